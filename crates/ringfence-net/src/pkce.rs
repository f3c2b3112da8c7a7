//! What the OAuth authorization-code flows share (the settings page's sign-in, Google
//! Calendar's connection): random tokens and PKCE (RFC 7636, S256).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// `bytes` random bytes from the system's source, base64url without padding: a `state`, a
/// PKCE verifier (32 bytes or more give the 43 characters RFC 7636 asks at least), a
/// session cookie.
pub fn random_token(bytes: usize) -> String {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; bytes];
    ring::rand::SystemRandom::new()
        .fill(&mut buf)
        .expect("the system's random source");
    URL_SAFE_NO_PAD.encode(buf)
}

/// The PKCE challenge of `verifier` (S256): base64url of its SHA-256.
pub fn challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        verifier.as_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636s_example() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn tokens_are_random_and_sized() {
        assert_ne!(random_token(32), random_token(32));
        assert_eq!(random_token(32).len(), 43);
    }
}
