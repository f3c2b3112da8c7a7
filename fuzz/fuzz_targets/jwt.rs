//! JWT access tokens: any string presented as a bearer token is refused or names a user —
//! never a panic — and a user is named only for a token whose signature verifies and whose
//! claims pass. Half the inputs are raw tokens (the parser: segments, base64url, the
//! header); the other half are claim sets signed with the trusted key, so the fuzzer reaches
//! the claim checks (`exp`, `nbf`, `iss`, `aud`, scopes, the user claim).
#![no_main]

use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use libfuzzer_sys::fuzz_target;
use ring::signature::{Ed25519KeyPair, KeyPair};
use ringfence_mcp::{JwtConfig, JwtValidator, KeySource};

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    key: Ed25519KeyPair,
    validator: JwtValidator,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    // A fixed key: the fuzzer's findings must replay.
    let key = Ed25519KeyPair::from_seed_unchecked(&[7u8; 32]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    let x = URL_SAFE_NO_PAD.encode(key.public_key().as_ref());
    std::fs::write(
        &jwks,
        format!(r#"{{"keys":[{{"kty":"OKP","crv":"Ed25519","kid":"k","x":"{x}"}}]}}"#),
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let validator = runtime
        .block_on(JwtValidator::new(JwtConfig {
            issuer: "https://idp".into(),
            audiences: vec!["https://rf/mcp".into()],
            keys: KeySource::File(jwks),
            user_claim: "sub".into(),
            required_scopes: vec!["files".into()],
        }))
        .unwrap();
    Fixture {
        _dir: dir,
        runtime,
        key,
        validator,
    }
});

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let fx = &*FIXTURE;
    let token = if mode % 2 == 0 {
        String::from_utf8_lossy(rest).into_owned()
    } else {
        let head = URL_SAFE_NO_PAD.encode(br#"{"alg":"EdDSA","kid":"k"}"#);
        let body = URL_SAFE_NO_PAD.encode(rest);
        let signed = format!("{head}.{body}");
        let sig = URL_SAFE_NO_PAD.encode(fx.key.sign(signed.as_bytes()).as_ref());
        format!("{signed}.{sig}")
    };
    if let Ok(user) = fx.runtime.block_on(fx.validator.validate(&token)) {
        assert!(mode % 2 == 1, "an unsigned input was accepted as {user:?}");
        assert!(!user.trim().is_empty() && user != "local", "user {user:?}");
        let claims: serde_json::Value = serde_json::from_slice(rest).expect("claims parsed");
        assert_eq!(claims["iss"], "https://idp");
    }
});
