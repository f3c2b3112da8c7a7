//! Who a request comes from: configured bearer tokens (kept as hashes), JWT access tokens,
//! and the 401/403 answers with their `WWW-Authenticate` challenges.

use std::sync::Arc;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::ResourceMetadata;
use super::refusal::Refusal;
use crate::AuthUser;
use crate::oauth::{AuthFailure, JwtValidator};

/// Bearer tokens accepted by the HTTP transport, each mapped to a user. Only BLAKE3 hashes of
/// the tokens are kept (the configuration never holds a token in plain text).
#[derive(Debug, Clone, Default)]
pub struct TokenAuth {
    /// (hash of the token, user)
    tokens: Vec<(blake3::Hash, String)>,
}

/// Why the configured bearer tokens (`http.tokens`) were refused; each names the entry.
#[derive(Debug, thiserror::Error)]
pub enum TokenConfigError {
    #[error("http.tokens[{index}]: `user` is empty")]
    EmptyUser { index: usize },
    #[error(
        "http.tokens[{index}]: `hash` must look like blake3:<64 hex digits>; make one with `ringfence token-hash`"
    )]
    NotBlake3 { index: usize },
    #[error("http.tokens[{index}]: `hash` is not 64 hex digits after `blake3:`")]
    BadHex {
        index: usize,
        source: blake3::HexError,
    },
    #[error(
        "http.tokens[{index}]: the user name `local` is reserved for the stdio user; choose another"
    )]
    ReservedUser { index: usize },
    #[error("http.tokens[{index}]: the same token hash appears twice")]
    DuplicateHash { index: usize },
    #[error(
        "http.metrics_token_hash: must look like blake3:<64 hex digits>; make one with `ringfence token-hash`"
    )]
    MetricsHash,
    #[error(
        "http.metrics_token_hash: the operator's token must differ from every user's (http.tokens)"
    )]
    MetricsHashIsAUser,
}

/// The operator's token for `/metrics` (`http.metrics_token_hash`), kept as its BLAKE3 hash.
/// It names no user: it opens no MCP session, and user tokens do not open `/metrics`.
#[derive(Debug, Clone)]
pub struct MetricsToken(blake3::Hash);

impl MetricsToken {
    /// `hash`: `blake3:<64 hex>`; refused if it is also a user's token.
    pub fn new(hash: &str, users: &TokenAuth) -> Result<MetricsToken, TokenConfigError> {
        let hash = hash
            .strip_prefix("blake3:")
            .and_then(|hex| blake3::Hash::from_hex(hex).ok())
            .ok_or(TokenConfigError::MetricsHash)?;
        if users.tokens.iter().any(|(h, _)| *h == hash) {
            return Err(TokenConfigError::MetricsHashIsAUser);
        }
        Ok(MetricsToken(hash))
    }

    /// Whether `token` is the operator's (a constant-time comparison).
    fn matches(&self, token: &str) -> bool {
        blake3::hash(token.as_bytes()) == self.0
    }
}

impl TokenAuth {
    /// `entries`: (user, `blake3:<64 hex>`). Errors name the entry.
    pub fn new(entries: &[(String, String)]) -> Result<TokenAuth, TokenConfigError> {
        let mut tokens = Vec::new();
        for (index, (user, hash)) in entries.iter().enumerate() {
            if user.trim().is_empty() {
                return Err(TokenConfigError::EmptyUser { index });
            }
            let hex = hash
                .strip_prefix("blake3:")
                .ok_or(TokenConfigError::NotBlake3 { index })?;
            let hash = blake3::Hash::from_hex(hex)
                .map_err(|source| TokenConfigError::BadHex { index, source })?;
            if user == ringfence_core::LOCAL_USER {
                return Err(TokenConfigError::ReservedUser { index });
            }
            if tokens.iter().any(|(h, _)| *h == hash) {
                return Err(TokenConfigError::DuplicateHash { index });
            }
            tokens.push((hash, user.clone()));
        }
        Ok(TokenAuth { tokens })
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Whether a configured token belongs to `user`.
    pub fn has_user(&self, user: &str) -> bool {
        self.tokens.iter().any(|(_, u)| u == user)
    }

    /// The user a presented token belongs to. Every stored hash is compared, in constant
    /// time per comparison (`blake3::Hash` equality), so timing does not tell which entry
    /// matched or how much of it.
    pub fn user_of(&self, token: &str) -> Option<&str> {
        let presented = blake3::hash(token.as_bytes());
        let mut found = None;
        for (hash, user) in &self.tokens {
            if *hash == presented {
                found = Some(user.as_str());
            }
        }
        found
    }
}

/// The configuration form of a token's hash.
pub fn token_hash(token: &str) -> String {
    format!("blake3:{}", blake3::hash(token.as_bytes()).to_hex())
}

/// Who may use the HTTP transport: bearer tokens from the configuration, JWT access tokens
/// of an OAuth 2.1 authorization server, or both.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    pub tokens: TokenAuth,
    pub jwt: Option<Arc<JwtValidator>>,
}

impl Auth {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.jwt.is_none()
    }

    /// The user a presented bearer credential belongs to.
    pub(crate) async fn user_of(&self, token: &str) -> Result<String, AuthFailure> {
        if let Some(user) = self.tokens.user_of(token) {
            return Ok(user.to_owned());
        }
        let user = match &self.jwt {
            // A JWT is three base64url parts; anything else cannot be one.
            Some(jwt) if token.split('.').count() == 3 => jwt.validate(token).await?,
            _ => return Err(AuthFailure::invalid("the token is not valid")),
        };
        // The two kinds of identity never meet: a name a configured token belongs to cannot
        // be taken by an authorization server's token (whose user claim the person may have
        // chosen themselves, like `preferred_username`), so it never reaches that user's
        // sessions and files.
        if self.tokens.has_user(&user) {
            tracing::warn!(user = %user.escape_debug(), "a JWT names a user that a configured bearer token belongs to; refused");
            return Err(AuthFailure::invalid(
                "the token names a user that belongs to a configured bearer token of this server; the operator must rename one of them",
            ));
        }
        Ok(user)
    }
}

/// Puts the user of each request in its extensions, or answers 401/403 with a challenge.
#[derive(Debug)]
pub(super) struct Authenticator {
    /// `None`: no authentication; every request is the local user's.
    auth: Option<Arc<Auth>>,
    /// The challenge every refusal starts with (realm, and resource metadata when given).
    challenge_base: String,
}

impl Authenticator {
    /// Credentials that are missing or empty turn authentication off.
    pub(super) fn new(
        auth: Option<Arc<Auth>>,
        resource_metadata: Option<&ResourceMetadata>,
    ) -> Authenticator {
        let mut challenge_base = "Bearer realm=\"ringfence\"".to_owned();
        if let Some(meta) = resource_metadata {
            challenge_base.push_str(&format!(", resource_metadata=\"{}\"", meta.url));
        }
        Authenticator {
            auth: auth.filter(|a| !a.is_empty()),
            challenge_base,
        }
    }

    /// Whether `/metrics` may be answered: with credentials configured, only to the
    /// operator's token (401 without a token, 403 with any other — a user's token included:
    /// the counters show every user's activity); without credentials (a loopback-only server
    /// whose one user is `local`), to everyone. `Some(refusal)` when refused.
    pub(super) fn operator(
        &self,
        metrics_token: Option<&MetricsToken>,
        req: &axum::extract::Request,
    ) -> Option<Response> {
        if self.auth.is_none() && metrics_token.is_none() {
            return None;
        }
        let Some(presented) = bearer(req) else {
            return Some(self.refuse(None));
        };
        if metrics_token.is_some_and(|t| t.matches(&presented)) {
            return None;
        }
        tracing::warn!("/metrics refused: not the operator's token");
        Some(Refusal::new(
            StatusCode::FORBIDDEN,
            "operator_only",
            "/metrics is for the operator: send the token whose hash is http.metrics_token_hash (user tokens do not open it)".into(),
        )
        .setting("http.metrics_token_hash")
        .into_response())
    }

    /// The user `req` is sent by (recorded in its extensions as [`AuthUser`]), or the
    /// refusal to answer with.
    pub(super) async fn authenticate(
        &self,
        req: &mut axum::extract::Request,
    ) -> Result<String, Response> {
        let Some(auth) = &self.auth else {
            return Ok(ringfence_core::LOCAL_USER.to_owned());
        };
        let presented = bearer(req);
        let result = match &presented {
            None => Err(None),
            Some(token) => auth.user_of(token).await.map_err(Some),
        };
        match result {
            Ok(user) => {
                req.extensions_mut().insert(AuthUser(user.clone()));
                Ok(user)
            }
            Err(failure) => Err(self.refuse(failure.as_ref())),
        }
    }

    /// 401/403 with its challenge, and the reason as a JSON-RPC error.
    fn refuse(&self, failure: Option<&AuthFailure>) -> Response {
        let why = failure
            .map(|f| f.description.clone())
            .unwrap_or_else(|| "missing bearer token".to_owned());
        tracing::warn!(reason = %why.escape_debug(), "HTTP request refused");
        let status = failure
            .map(|f| f.status)
            .unwrap_or(StatusCode::UNAUTHORIZED);
        let mut response = Refusal::new(
            status,
            "authentication",
            format!("{why}: send Authorization: Bearer <token>"),
        )
        .into_response();
        if let Ok(v) = axum::http::HeaderValue::from_str(&self.challenge(failure)) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        response
    }

    /// The `WWW-Authenticate` value for a failure (or a plain challenge).
    fn challenge(&self, failure: Option<&AuthFailure>) -> String {
        let mut c = self.challenge_base.clone();
        if let Some(f) = failure {
            c.push_str(&format!(
                ", error=\"{}\", error_description=\"{}\"",
                f.error,
                f.description.replace(['"', '\\'], "'")
            ));
            if let Some(scope) = &f.scope {
                c.push_str(&format!(", scope=\"{scope}\""));
            }
        }
        c
    }
}

/// The bearer token of `req`, if it carries one.
fn bearer(req: &axum::extract::Request) -> Option<String> {
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|t| t.trim().to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_metrics_token_is_nobody_s_user_token() {
        let users =
            super::TokenAuth::new(&[("alice".into(), super::token_hash("alice-t"))]).unwrap();
        let ops = super::MetricsToken::new(&super::token_hash("ops-t"), &users).unwrap();
        assert!(ops.matches("ops-t") && !ops.matches("alice-t"));
        assert_eq!(users.user_of("ops-t"), None);
        let err = super::MetricsToken::new(&super::token_hash("alice-t"), &users).unwrap_err();
        assert!(
            err.to_string().starts_with("http.metrics_token_hash:"),
            "{err}"
        );
        let err = super::MetricsToken::new("ops-t", &users).unwrap_err();
        assert!(err.to_string().contains("token-hash"), "{err}");
    }

    #[test]
    fn token_hashes_verify_and_reject() {
        let auth = super::TokenAuth::new(&[
            ("alice".into(), super::token_hash("alice-secret-token")),
            ("bob".into(), super::token_hash("bob-secret-token-2")),
        ])
        .unwrap();
        assert_eq!(auth.user_of("alice-secret-token"), Some("alice"));
        assert_eq!(auth.user_of("bob-secret-token-2"), Some("bob"));
        assert_eq!(auth.user_of("alice-secret-token "), None);
        assert_eq!(auth.user_of(""), None);
        // Upper-case hex digits name the same hash.
        let upper = super::token_hash("carol-token")
            .to_uppercase()
            .replace("BLAKE3:", "blake3:");
        let auth = super::TokenAuth::new(&[("carol".into(), upper)]).unwrap();
        assert_eq!(auth.user_of("carol-token"), Some("carol"));
        for bad in [
            vec![("".to_string(), super::token_hash("x"))],
            vec![("u".to_string(), "sha256:00".to_string())],
            vec![("u".to_string(), "blake3:zz".to_string())],
            vec![("u".to_string(), format!("blake3:{}", "+f".repeat(32)))],
            vec![
                ("u".to_string(), super::token_hash("same")),
                ("v".to_string(), super::token_hash("same")),
            ],
        ] {
            assert!(super::TokenAuth::new(&bad).is_err(), "{bad:?}");
        }
        // The messages name the entry and what to do, as the configuration errors did.
        let err = |entries: &[(String, String)]| super::TokenAuth::new(entries).unwrap_err();
        assert_eq!(
            err(&[("u".into(), "sha256:00".into())]).to_string(),
            "http.tokens[0]: `hash` must look like blake3:<64 hex digits>; make one with `ringfence token-hash`"
        );
        let bad_hex = err(&[
            ("u".into(), super::token_hash("a")),
            ("v".into(), "blake3:zz".into()),
        ]);
        assert_eq!(
            bad_hex.to_string(),
            "http.tokens[1]: `hash` is not 64 hex digits after `blake3:`"
        );
        assert!(std::error::Error::source(&bad_hex).is_some());
        assert_eq!(
            err(&[("local".into(), super::token_hash("a"))]).to_string(),
            "http.tokens[0]: the user name `local` is reserved for the stdio user; choose another"
        );
    }
}
