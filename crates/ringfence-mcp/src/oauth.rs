//! OAuth 2.1 resource-server mode: JWT access tokens checked against the configured issuer,
//! audience and signing keys (a JWKS file or URL).
//!
//! Accepted signatures: RS256/384/512, PS256/384/512, ES256, ES384, EdDSA (Ed25519), verified
//! with `ring`. `none` and the HMAC algorithms are refused (a shared secret cannot come from a
//! public key set). A token must carry `exp`, name the configured issuer in `iss`, list one of
//! the configured audiences in `aud`, and carry the user claim (`sub` by default); `nbf` and
//! `exp` are checked with 60 s of leeway.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use axum::http::StatusCode;
use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use ring::signature;
use serde_json::Value;

/// Why a credential was refused: the HTTP status and the RFC 6750 error.
#[derive(Debug, Clone, PartialEq)]
pub struct AuthFailure {
    pub status: StatusCode,
    /// `invalid_token` or `insufficient_scope`.
    pub error: &'static str,
    pub description: String,
    /// The scopes needed (with `insufficient_scope`).
    pub scope: Option<String>,
}

impl AuthFailure {
    pub fn invalid(description: impl Into<String>) -> AuthFailure {
        AuthFailure {
            status: StatusCode::UNAUTHORIZED,
            error: "invalid_token",
            description: description.into(),
            scope: None,
        }
    }
}

/// Why the resource server's settings were refused (from [`JwtValidator::new`]).
#[derive(Debug, thiserror::Error)]
pub enum JwtConfigError {
    #[error("http.oauth.issuer is empty")]
    EmptyIssuer,
    #[error("http.oauth.audience is empty: name this server's resource URL")]
    EmptyAudience,
    #[error("http.oauth.jwks_url: {0}")]
    JwksUrl(#[source] url::ParseError),
    #[error("http.oauth.jwks_url: `{url}` must be an https:// URL (plain http only on loopback)")]
    InsecureJwksUrl { url: String },
    /// The key set cannot be loaded or holds no usable key.
    #[error(transparent)]
    Keys(#[from] KeySetError),
}

/// Why the key set cannot be loaded; names the file or URL.
#[derive(Debug, thiserror::Error)]
pub enum KeySetError {
    #[error("cannot read the JWKS file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Client(ringfence_net::ClientError),
    #[error("cannot fetch the JWKS from {url}: {source}")]
    Fetch { url: String, source: reqwest::Error },
    #[error("fetching the JWKS from {url}: HTTP {status}")]
    Status {
        url: String,
        status: reqwest::StatusCode,
    },
    #[error("cannot read the JWKS from {url}: {source}")]
    Body { url: String, source: reqwest::Error },
    /// `name`: the file or URL the key set came from.
    #[error("JWKS {name}: {source}")]
    Invalid { name: String, source: JwksError },
}

/// What is wrong with a JSON Web Key Set document.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("not JSON: {0}")]
    NotJson(#[from] serde_json::Error),
    #[error("no `keys` array")]
    NoKeys,
    #[error("no usable signing key (RSA, EC P-256/P-384 or Ed25519)")]
    NoUsableKey,
}

/// Where the signing keys come from.
#[derive(Debug, Clone, PartialEq)]
pub enum KeySource {
    /// A JSON Web Key Set in a file (re-read when a token names a key it lacks).
    File(PathBuf),
    /// A JSON Web Key Set served over HTTPS (plain HTTP only on loopback), refreshed every
    /// 10 minutes and when a token names a key it lacks.
    Url(String),
}

/// The resource server's settings.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// Exact `iss` value required.
    pub issuer: String,
    /// A token's `aud` must contain one of these.
    pub audiences: Vec<String>,
    pub keys: KeySource,
    /// The claim naming the user (default `sub`).
    pub user_claim: String,
    /// Scopes every token must carry (in `scope` or `scp`).
    pub required_scopes: Vec<String>,
}

/// Checks JWT access tokens.
#[derive(Debug)]
pub struct JwtValidator {
    config: JwtConfig,
    keys: Mutex<KeyCache>,
    /// Serialises key refreshes.
    refresh: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct KeyCache {
    keys: Vec<Jwk>,
    fetched: Option<Instant>,
    /// The last refresh a token naming an unknown key caused.
    forced: Option<Instant>,
}

const LEEWAY_SECS: u64 = 60;
/// Keys from a URL are refreshed this often.
const KEY_MAX_AGE: Duration = Duration::from_secs(600);
/// A token naming an unknown key triggers a refresh at most this often.
const MIN_REFRESH: Duration = Duration::from_secs(30);

#[derive(Debug, Clone)]
struct Jwk {
    kid: Option<String>,
    alg: Option<String>,
    key: PublicKey,
}

#[derive(Debug, Clone)]
enum PublicKey {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// Uncompressed point (0x04 || x || y) and curve.
    Ec {
        point: Vec<u8>,
        curve: Curve,
    },
    Ed25519(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Curve {
    P256,
    P384,
}

impl JwtValidator {
    /// Checks the settings and loads the keys once (a key set that cannot be read or holds
    /// no usable key is an error naming the source).
    pub async fn new(config: JwtConfig) -> Result<JwtValidator, JwtConfigError> {
        if config.issuer.trim().is_empty() {
            return Err(JwtConfigError::EmptyIssuer);
        }
        if config.audiences.is_empty() {
            return Err(JwtConfigError::EmptyAudience);
        }
        if let KeySource::Url(url) = &config.keys {
            check_url(url)?;
        }
        let keys = load_keys(&config.keys).await?;
        Ok(JwtValidator {
            config,
            keys: Mutex::new(KeyCache {
                keys,
                fetched: Some(Instant::now()),
                forced: None,
            }),
            refresh: tokio::sync::Mutex::new(()),
        })
    }

    /// The user a valid token names.
    pub async fn validate(&self, token: &str) -> Result<String, AuthFailure> {
        let parsed = parse(token)?;
        let stale = {
            let cache = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            matches!(self.config.keys, KeySource::Url(_))
                && cache.fetched.is_none_or(|t| t.elapsed() > KEY_MAX_AGE)
        };
        if stale {
            self.refresh_keys(false).await;
        }
        let verified = self.verify_with_cache(&parsed);
        let verified = match verified {
            Err(KeyLookup::Unknown) => {
                // Keys rotate: look again (not more often than every 30 s).
                self.refresh_keys(true).await;
                self.verify_with_cache(&parsed)
            }
            other => other,
        };
        match verified {
            Ok(()) => {}
            Err(KeyLookup::Unknown) => {
                return Err(AuthFailure::invalid(
                    "the token is signed with a key this server does not know",
                ));
            }
            Err(KeyLookup::BadSignature) => {
                return Err(AuthFailure::invalid(
                    "the token's signature does not verify",
                ));
            }
        }
        self.check_claims(&parsed.claims)
    }

    fn verify_with_cache(&self, parsed: &Parsed) -> Result<(), KeyLookup> {
        let cache = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let candidates: Vec<&Jwk> = cache
            .keys
            .iter()
            .filter(|k| match (&parsed.kid, &k.kid) {
                (Some(want), Some(have)) => want == have,
                (Some(_), None) => false,
                (None, _) => true,
            })
            .filter(|k| k.alg.as_deref().is_none_or(|a| a == parsed.alg))
            .filter(|k| suits(&k.key, &parsed.alg))
            .collect();
        if candidates.is_empty() {
            return Err(KeyLookup::Unknown);
        }
        if candidates
            .iter()
            .any(|k| verify(&k.key, &parsed.alg, &parsed.signed, &parsed.signature))
        {
            Ok(())
        } else {
            Err(KeyLookup::BadSignature)
        }
    }

    /// Loads the key set again. `forced` (a token named an unknown key): at most every 30 s,
    /// so made-up key ids cannot make the server hammer the authorization server.
    async fn refresh_keys(&self, forced: bool) {
        let _one = self.refresh.lock().await;
        {
            let mut cache = self.keys.lock().unwrap_or_else(|e| e.into_inner());
            if forced {
                if cache.forced.is_some_and(|t| t.elapsed() < MIN_REFRESH) {
                    return;
                }
                cache.forced = Some(Instant::now());
            } else if cache.fetched.is_some_and(|t| t.elapsed() <= KEY_MAX_AGE) {
                // Another request refreshed them while this one waited.
                return;
            }
        }
        match load_keys(&self.config.keys).await {
            Ok(keys) => {
                let mut cache = self.keys.lock().unwrap_or_else(|e| e.into_inner());
                cache.keys = keys;
                cache.fetched = Some(Instant::now());
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot refresh the JWT signing keys; keeping the old ones");
                // Do not retry on every request.
                self.keys.lock().unwrap_or_else(|e| e.into_inner()).fetched = Some(Instant::now());
            }
        }
    }

    fn check_claims(&self, claims: &serde_json::Map<String, Value>) -> Result<String, AuthFailure> {
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let exp = claims
            .get("exp")
            .ok_or_else(|| AuthFailure::invalid("the token has no expiry (`exp`)"))
            .and_then(|v| numeric_date(v, "exp"))?;
        if now > exp.saturating_add(LEEWAY_SECS) {
            return Err(AuthFailure::invalid("the token has expired"));
        }
        if let Some(nbf) = claims.get("nbf") {
            let nbf = numeric_date(nbf, "nbf")?;
            if now.saturating_add(LEEWAY_SECS) < nbf {
                return Err(AuthFailure::invalid("the token is not valid yet (`nbf`)"));
            }
        }
        let iss = claims.get("iss").and_then(Value::as_str);
        if iss != Some(self.config.issuer.as_str()) {
            return Err(AuthFailure::invalid(
                "the token was issued by another authorization server (`iss`)",
            ));
        }
        let aud_ok = match claims.get("aud") {
            Some(Value::String(a)) => self.config.audiences.iter().any(|w| w == a),
            Some(Value::Array(list)) => list
                .iter()
                .filter_map(Value::as_str)
                .any(|a| self.config.audiences.iter().any(|w| w == a)),
            _ => false,
        };
        if !aud_ok {
            return Err(AuthFailure::invalid(
                "the token is meant for another resource (`aud`)",
            ));
        }
        if !self.config.required_scopes.is_empty() {
            let mut have: Vec<&str> = Vec::new();
            if let Some(s) = claims.get("scope").and_then(Value::as_str) {
                have.extend(s.split_whitespace());
            }
            if let Some(Value::Array(list)) = claims.get("scp") {
                have.extend(list.iter().filter_map(Value::as_str));
            }
            let missing: Vec<&str> = self
                .config
                .required_scopes
                .iter()
                .map(String::as_str)
                .filter(|s| !have.contains(s))
                .collect();
            if !missing.is_empty() {
                return Err(AuthFailure {
                    status: StatusCode::FORBIDDEN,
                    error: "insufficient_scope",
                    description: format!("the token lacks the scope {}", missing.join(" ")),
                    scope: Some(self.config.required_scopes.join(" ")),
                });
            }
        }
        match claims.get(&self.config.user_claim) {
            Some(Value::String(u)) if u == ringfence_core::LOCAL_USER => Err(AuthFailure::invalid(
                "the token names the user `local`, which is reserved for the stdio user",
            )),
            Some(Value::String(u)) if !u.trim().is_empty() => Ok(u.clone()),
            // One number, one name: integers in decimal (as `as_u64`/`as_i64` read them,
            // whatever spelling the token used); a fraction or an exponent could name the
            // same number several ways, so it is refused.
            Some(Value::Number(n)) if n.is_u64() || n.is_i64() => Ok(n.to_string()),
            Some(Value::Number(_)) => Err(AuthFailure::invalid(format!(
                "the token's user claim `{}` is a number that is not an integer",
                self.config.user_claim
            ))),
            _ => Err(AuthFailure::invalid(format!(
                "the token does not name a user (claim `{}`)",
                self.config.user_claim
            ))),
        }
    }
}

/// A NumericDate claim (RFC 7519: seconds since the epoch, possibly fractional) as whole
/// seconds, saturating: a date past the year 2^64 s is simply far in the future, never
/// wrapped into the past. Before 1970 counts as 0.
fn numeric_date(v: &Value, claim: &str) -> Result<u64, AuthFailure> {
    match v {
        Value::Number(n) => Ok(match (n.as_u64(), n.as_f64()) {
            (Some(secs), _) => secs,
            // `as` saturates: negative and NaN give 0, beyond u64::MAX gives u64::MAX.
            (None, Some(f)) => f.floor() as u64,
            (None, None) => 0,
        }),
        _ => Err(AuthFailure::invalid(format!(
            "the token's `{claim}` is not a number of seconds"
        ))),
    }
}

enum KeyLookup {
    Unknown,
    BadSignature,
}

struct Parsed {
    alg: String,
    kid: Option<String>,
    /// `header.payload` as sent: what the signature covers.
    signed: Vec<u8>,
    signature: Vec<u8>,
    claims: serde_json::Map<String, Value>,
}

/// Largest token accepted (a JWT is a few hundred bytes to a few KiB).
const MAX_TOKEN: usize = 16 * 1024;

fn parse(token: &str) -> Result<Parsed, AuthFailure> {
    if token.len() > MAX_TOKEN {
        return Err(AuthFailure::invalid("the token is too long"));
    }
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthFailure::invalid("the token is not a JWT"));
    };
    let bad = || AuthFailure::invalid("the token is not a well-formed JWT");
    let header: serde_json::Map<String, Value> =
        serde_json::from_slice(&b64url(h).ok_or_else(bad)?).map_err(|_| bad())?;
    let claims: serde_json::Map<String, Value> =
        serde_json::from_slice(&b64url(p).ok_or_else(bad)?).map_err(|_| bad())?;
    let signature = b64url(s).ok_or_else(bad)?;
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or_else(bad)?
        .to_owned();
    if !ALGORITHMS.contains(&alg.as_str()) {
        return Err(AuthFailure::invalid(format!(
            "the token's algorithm `{alg}` is not accepted (use one of {})",
            ALGORITHMS.join(", ")
        )));
    }
    if header.contains_key("crit") {
        return Err(AuthFailure::invalid(
            "the token has critical header extensions this server does not understand",
        ));
    }
    Ok(Parsed {
        alg,
        kid: header.get("kid").and_then(Value::as_str).map(str::to_owned),
        signed: format!("{h}.{p}").into_bytes(),
        signature,
        claims,
    })
}

const ALGORITHMS: &[&str] = &[
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA",
];

fn suits(key: &PublicKey, alg: &str) -> bool {
    match key {
        PublicKey::Rsa { .. } => alg.starts_with("RS") || alg.starts_with("PS"),
        PublicKey::Ec { curve, .. } => {
            (alg == "ES256" && *curve == Curve::P256) || (alg == "ES384" && *curve == Curve::P384)
        }
        PublicKey::Ed25519(_) => alg == "EdDSA",
    }
}

fn verify(key: &PublicKey, alg: &str, msg: &[u8], sig: &[u8]) -> bool {
    match key {
        PublicKey::Rsa { n, e } => {
            let params: &signature::RsaParameters = match alg {
                "RS256" => &signature::RSA_PKCS1_2048_8192_SHA256,
                "RS384" => &signature::RSA_PKCS1_2048_8192_SHA384,
                "RS512" => &signature::RSA_PKCS1_2048_8192_SHA512,
                "PS256" => &signature::RSA_PSS_2048_8192_SHA256,
                "PS384" => &signature::RSA_PSS_2048_8192_SHA384,
                "PS512" => &signature::RSA_PSS_2048_8192_SHA512,
                _ => return false,
            };
            signature::RsaPublicKeyComponents { n, e }
                .verify(params, msg, sig)
                .is_ok()
        }
        PublicKey::Ec { point, curve } => {
            let alg: &dyn signature::VerificationAlgorithm = match curve {
                Curve::P256 => &signature::ECDSA_P256_SHA256_FIXED,
                Curve::P384 => &signature::ECDSA_P384_SHA384_FIXED,
            };
            signature::UnparsedPublicKey::new(alg, point)
                .verify(msg, sig)
                .is_ok()
        }
        PublicKey::Ed25519(x) => signature::UnparsedPublicKey::new(&signature::ED25519, x)
            .verify(msg, sig)
            .is_ok(),
    }
}

/// Whether an authorization server's `url` may be used: HTTPS, or HTTP on a loopback
/// address (tests, a local proxy).
pub fn https_or_loopback(url: &str) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    let loopback = match parsed.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d == "localhost",
        None => false,
    };
    parsed.scheme() == "https" || (parsed.scheme() == "http" && loopback)
}

/// A key set URL must be HTTPS, or HTTP on a loopback address.
fn check_url(url: &str) -> Result<(), JwtConfigError> {
    reqwest::Url::parse(url).map_err(JwtConfigError::JwksUrl)?;
    if https_or_loopback(url) {
        Ok(())
    } else {
        Err(JwtConfigError::InsecureJwksUrl {
            url: url.to_owned(),
        })
    }
}

#[allow(clippy::disallowed_methods)] // the key set file is the operator's, not under a root
async fn load_keys(source: &KeySource) -> Result<Vec<Jwk>, KeySetError> {
    let (text, name) = match source {
        KeySource::File(path) => (
            std::fs::read_to_string(path).map_err(|source| KeySetError::Read {
                path: path.clone(),
                source,
            })?,
            path.display().to_string(),
        ),
        KeySource::Url(url) => {
            let client = ringfence_net::client(&ringfence_net::Outbound {
                timeout: Duration::from_secs(10),
                ..ringfence_net::Outbound::default()
            })
            .map_err(KeySetError::Client)?;
            let resp = client
                .get(url)
                .send()
                .await
                .map_err(|source| KeySetError::Fetch {
                    url: url.clone(),
                    source,
                })?;
            if !resp.status().is_success() {
                return Err(KeySetError::Status {
                    url: url.clone(),
                    status: resp.status(),
                });
            }
            let text = resp.text().await.map_err(|source| KeySetError::Body {
                url: url.clone(),
                source,
            })?;
            (text, url.clone())
        }
    };
    parse_jwks(&text).map_err(|source| KeySetError::Invalid { name, source })
}

fn parse_jwks(text: &str) -> Result<Vec<Jwk>, JwksError> {
    let doc: Value = serde_json::from_str(text)?;
    let list = doc
        .get("keys")
        .and_then(Value::as_array)
        .ok_or(JwksError::NoKeys)?;
    let mut out = Vec::new();
    for k in list {
        if k.get("use")
            .and_then(Value::as_str)
            .is_some_and(|u| u != "sig")
        {
            continue;
        }
        let field = |name: &str| k.get(name).and_then(Value::as_str).and_then(b64url);
        let key = match k.get("kty").and_then(Value::as_str) {
            Some("RSA") => match (field("n"), field("e")) {
                (Some(n), Some(e)) => PublicKey::Rsa { n, e },
                _ => continue,
            },
            Some("EC") => {
                let curve = match k.get("crv").and_then(Value::as_str) {
                    Some("P-256") => Curve::P256,
                    Some("P-384") => Curve::P384,
                    _ => continue,
                };
                match (field("x"), field("y")) {
                    (Some(x), Some(y)) => {
                        let mut point = vec![4u8];
                        point.extend(x);
                        point.extend(y);
                        PublicKey::Ec { point, curve }
                    }
                    _ => continue,
                }
            }
            Some("OKP") if k.get("crv").and_then(Value::as_str) == Some("Ed25519") => {
                match field("x") {
                    Some(x) => PublicKey::Ed25519(x),
                    None => continue,
                }
            }
            _ => continue,
        };
        out.push(Jwk {
            kid: k.get("kid").and_then(Value::as_str).map(str::to_owned),
            alg: k.get("alg").and_then(Value::as_str).map(str::to_owned),
            key,
        });
    }
    if out.is_empty() {
        return Err(JwksError::NoUsableKey);
    }
    Ok(out)
}

/// Base64url as JWTs and JWKs use it (RFC 7515): no padding expected, and unused bits of
/// the last character ignored, as the decoder this replaced did.
const BASE64URL: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new()
        .with_encode_padding(false)
        .with_decode_padding_mode(DecodePaddingMode::RequireNone)
        .with_decode_allow_trailing_bits(true),
);

/// Base64url without padding (RFC 7515); padding is tolerated.
fn b64url(s: &str) -> Option<Vec<u8>> {
    BASE64URL.decode(s.trim_end_matches('=')).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b64url_decodes_and_rejects() {
        assert_eq!(b64url("Zm9vYmFy").unwrap(), b"foobar");
        assert_eq!(b64url("Zm9vYg").unwrap(), b"foob");
        assert_eq!(b64url("Zm9vYg==").unwrap(), b"foob");
        assert_eq!(b64url("-_8").unwrap(), vec![0xfb, 0xff]);
        assert!(b64url("Zm9v+").is_none());
        assert!(b64url("Z").is_none());
        assert!(b64url("Zm=9v").is_none());
        // Unused bits of the last character are ignored, as before the base64 crate.
        assert_eq!(b64url("Zm9vYh").unwrap(), b"foob");
    }

    #[test]
    fn jwks_parsing_keeps_only_usable_signing_keys() {
        let text = r#"{"keys":[
            {"kty":"RSA","kid":"r1","n":"AQAB","e":"AQAB"},
            {"kty":"RSA","kid":"enc","use":"enc","n":"AQAB","e":"AQAB"},
            {"kty":"oct","k":"c2VjcmV0"},
            {"kty":"EC","crv":"P-521","x":"AA","y":"AA"},
            {"kty":"OKP","crv":"Ed25519","kid":"e1","x":"AAAA"}
        ]}"#;
        let keys = parse_jwks(text).unwrap();
        let kids: Vec<_> = keys.iter().map(|k| k.kid.clone().unwrap()).collect();
        assert_eq!(kids, ["r1", "e1"]);
        let err = |text: &str| parse_jwks(text).unwrap_err().to_string();
        assert_eq!(
            err(r#"{"keys":[{"kty":"oct","k":"AA"}]}"#),
            "no usable signing key (RSA, EC P-256/P-384 or Ed25519)"
        );
        assert_eq!(err("[]"), "no `keys` array");
        assert!(err("{").starts_with("not JSON: "));
    }

    #[test]
    fn tokens_with_refused_algorithms_or_shapes_fail() {
        let enc = |v: &str| b64(v.as_bytes());
        let claims = enc(r#"{"sub":"a","exp":9999999999}"#);
        for (header, why) in [
            (r#"{"alg":"none"}"#, "algorithm"),
            (r#"{"alg":"HS256"}"#, "algorithm"),
            (r#"{"alg":"RS256","crit":["x"]}"#, "critical"),
            (r#"{"typ":"JWT"}"#, "well-formed"),
        ] {
            let token = format!("{}.{claims}.c2ln", enc(header));
            let err = parse(&token).err().expect(header);
            assert!(
                err.description.contains(why),
                "{header}: {}",
                err.description
            );
        }
        assert!(parse("a.b").is_err());
        assert!(parse("a.b.c.d").is_err());
        assert!(parse(&"a".repeat(MAX_TOKEN + 1)).is_err());
    }

    #[test]
    fn key_set_urls_must_be_https_or_loopback() {
        assert!(check_url("https://idp.example/jwks").is_ok());
        assert!(check_url("http://127.0.0.1:9/jwks").is_ok());
        assert!(check_url("http://localhost/jwks").is_ok());
        assert_eq!(
            check_url("http://idp.example/jwks")
                .unwrap_err()
                .to_string(),
            "http.oauth.jwks_url: `http://idp.example/jwks` must be an https:// URL (plain http only on loopback)"
        );
        assert!(check_url("file:///etc/jwks").is_err());
        let err = check_url("not a url").unwrap_err();
        assert!(
            err.to_string().starts_with("http.oauth.jwks_url: "),
            "{err}"
        );
        assert!(std::error::Error::source(&err).is_some());
    }

    fn b64(data: &[u8]) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(data)
    }

    /// Keys generated here; tokens signed here; the validator reads the public halves from
    /// a JWKS file.
    #[tokio::test]
    #[allow(clippy::disallowed_methods)] // writes the test's own key set file
    async fn signed_tokens_verify_and_tampering_fails() {
        use ring::rand::SystemRandom;
        use ring::signature::{
            ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
        };
        let rng = SystemRandom::new();
        let ed = Ed25519KeyPair::from_pkcs8(Ed25519KeyPair::generate_pkcs8(&rng).unwrap().as_ref())
            .unwrap();
        let ec_doc = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let ec = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, ec_doc.as_ref(), &rng)
            .unwrap();
        let point = ec.public_key().as_ref();
        let jwks = serde_json::json!({"keys": [
            {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": b64(ed.public_key().as_ref())},
            {"kty": "EC", "crv": "P-256", "kid": "ec", "x": b64(&point[1..33]),
             "y": b64(&point[33..])},
        ]});
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jwks.json");
        std::fs::write(&file, jwks.to_string()).unwrap();
        let v = JwtValidator::new(JwtConfig {
            issuer: "https://idp".into(),
            audiences: vec!["https://rf/mcp".into()],
            keys: KeySource::File(file),
            user_claim: "sub".into(),
            required_scopes: vec![],
        })
        .await
        .unwrap();
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let sign = |alg: &str, kid: &str, claims: serde_json::Value| -> String {
            let head = b64(serde_json::json!({"alg": alg, "kid": kid})
                .to_string()
                .as_bytes());
            let body = b64(claims.to_string().as_bytes());
            let msg = format!("{head}.{body}");
            let sig = match alg {
                "EdDSA" => ed.sign(msg.as_bytes()).as_ref().to_vec(),
                _ => ec.sign(&rng, msg.as_bytes()).unwrap().as_ref().to_vec(),
            };
            format!("{msg}.{}", b64(&sig))
        };
        let good = serde_json::json!({"iss": "https://idp", "aud": ["x", "https://rf/mcp"],
                                      "sub": "erin", "exp": now + 60});
        assert_eq!(
            v.validate(&sign("EdDSA", "ed", good.clone()))
                .await
                .unwrap(),
            "erin"
        );
        assert_eq!(
            v.validate(&sign("ES256", "ec", good.clone()))
                .await
                .unwrap(),
            "erin"
        );
        // A key of the wrong type for the algorithm is not a candidate.
        assert!(
            v.validate(&sign("EdDSA", "ec", good.clone()))
                .await
                .is_err()
        );
        // Tampered claims: the signature no longer verifies.
        let token = sign("EdDSA", "ed", good.clone());
        let mut parts: Vec<String> = token.split('.').map(str::to_owned).collect();
        parts[1] = b64(
            serde_json::json!({"iss": "https://idp", "aud": "https://rf/mcp",
                                          "sub": "admin", "exp": now + 60})
            .to_string()
            .as_bytes(),
        );
        let err = v.validate(&parts.join(".")).await.unwrap_err();
        assert!(err.description.contains("signature"), "{err:?}");
        for (claims, why) in [
            (
                serde_json::json!({"iss": "https://idp", "aud": "https://rf/mcp", "sub": "e",
                                "exp": now - 120}),
                "expired",
            ),
            (
                serde_json::json!({"iss": "https://idp", "aud": "https://rf/mcp", "sub": "e",
                                "exp": now + 60, "nbf": now + 600}),
                "not valid yet",
            ),
            (
                serde_json::json!({"iss": "https://idp", "aud": "https://rf/mcp",
                                "sub": "local", "exp": now + 60}),
                "reserved",
            ),
            (
                serde_json::json!({"iss": "https://idp", "aud": "https://rf/mcp", "sub": "e",
                                "exp": "tomorrow"}),
                "not a number of seconds",
            ),
            (
                serde_json::json!({"iss": "https://idp", "aud": "https://rf/mcp", "sub": "e",
                                "exp": 1e300, "nbf": 1e300}),
                "not valid yet",
            ),
            (
                serde_json::json!({"iss": "https://idp", "aud": "https://rf/mcp", "sub": 7.5,
                                "exp": now + 60}),
                "not an integer",
            ),
        ] {
            let err = v.validate(&sign("EdDSA", "ed", claims)).await.unwrap_err();
            assert!(err.description.contains(why), "{why}: {err:?}");
        }
        // Dates past 64 bits are far in the future (not wrapped into the past); integer
        // user claims are their decimal spelling.
        for (exp, sub, user) in [
            (serde_json::json!(1e20), serde_json::json!("far"), "far"),
            (serde_json::json!(u64::MAX), serde_json::json!(42), "42"),
            (
                serde_json::json!(now as f64 + 60.5),
                serde_json::json!(-3),
                "-3",
            ),
        ] {
            let claims = serde_json::json!({"iss": "https://idp", "aud": "https://rf/mcp",
                                            "sub": sub, "exp": exp});
            assert_eq!(
                v.validate(&sign("EdDSA", "ed", claims)).await.unwrap(),
                user
            );
        }
    }

    #[test]
    fn numeric_dates_saturate_instead_of_wrapping() {
        use serde_json::json;
        assert_eq!(
            numeric_date(&json!(1700000000), "exp").unwrap(),
            1_700_000_000
        );
        assert_eq!(
            numeric_date(&json!(1700000000.9), "exp").unwrap(),
            1_700_000_000
        );
        assert_eq!(numeric_date(&json!(1e30), "exp").unwrap(), u64::MAX);
        assert_eq!(numeric_date(&json!(-5), "exp").unwrap(), 0);
        assert!(numeric_date(&json!(null), "exp").is_err());
    }
}
