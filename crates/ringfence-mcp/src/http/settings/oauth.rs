//! Signing in to the settings page through the OAuth authorization server that issues the
//! deployment's MCP access tokens (`[http.oauth]` with a `client_id`): the authorization-code
//! flow with PKCE (S256).
//!
//! `/settings/login/oauth` sends the browser to the authorization endpoint with a fresh
//! `state` and code challenge; both the state and the verifier ride in a short-lived
//! `HttpOnly` cookie of their own, so whichever instance the browser comes back to can finish
//! the flow, and a callback that does not carry the browser's own state is refused (login
//! CSRF). `/settings/login/callback` exchanges the code, with the verifier, at the token
//! endpoint, and the access token it gets must pass the same check as an MCP request's (the
//! issuer, this server as audience, the signature, the scopes): its user is who signs in.
//! Nothing the authorization server says is shown as it said it — only the error codes of
//! RFC 6749, in our words.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::Value;

/// The settings page's OAuth client at the authorization server.
#[derive(Clone)]
pub struct OauthSignIn {
    /// The authorization server's issuer identifier (`[http.oauth] issuer`).
    pub issuer: String,
    /// This client's id there.
    pub client_id: String,
    /// Its secret, for a confidential client (sent with HTTP Basic authentication).
    pub client_secret: Option<String>,
    /// Where to send the browser; `None`: from the issuer's metadata.
    pub authorization_endpoint: Option<String>,
    /// Where to exchange the code; `None`: from the issuer's metadata.
    pub token_endpoint: Option<String>,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The resource the token is for (RFC 8707): the MCP endpoint's public URL.
    pub resource: String,
    /// A name people know the authorization server by, for the button.
    pub name: String,
}

impl std::fmt::Debug for OauthSignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OauthSignIn")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("authorization_endpoint", &self.authorization_endpoint)
            .field("token_endpoint", &self.token_endpoint)
            .field("scopes", &self.scopes)
            .field("resource", &self.resource)
            .finish()
    }
}

/// The endpoints the flow uses.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Endpoints {
    pub authorization: String,
    pub token: String,
}

/// The flow, with the endpoints once known.
#[derive(Debug)]
pub(super) struct Flow {
    pub config: OauthSignIn,
    endpoints: Mutex<Option<Endpoints>>,
    /// One discovery at a time, and when the last one failed: a failure is not tried again
    /// for [`RETRY_DISCOVERY`], so sign-in clicks cannot make the server hammer (or wait on)
    /// an authorization server that is down.
    discovery: tokio::sync::Mutex<Option<std::time::Instant>>,
}

/// How long a failed discovery stands before the metadata is asked for again.
const RETRY_DISCOVERY: Duration = Duration::from_secs(30);

/// How long a started sign-in may take at the authorization server.
pub(super) const FLOW_SECS: u64 = 600;
/// The longest wait for the authorization server.
const TIMEOUT: Duration = Duration::from_secs(15);
/// The largest answer read from it.
const MAX_ANSWER: usize = 256 * 1024;

/// What went wrong, in words for the person signing in (the details go to the log).
#[derive(Debug, PartialEq)]
pub(super) struct FlowError(pub String);

use crate::oauth::https_or_loopback as acceptable;

pub(super) use ringfence_net::pkce::challenge;

/// Where an issuer's metadata is (RFC 8414 first, then OpenID Connect Discovery): for an
/// issuer with a path, RFC 8414 puts the well-known part before it, OpenID after it.
fn metadata_urls(issuer: &str) -> Vec<String> {
    let Ok(url) = url::Url::parse(issuer) else {
        return Vec::new();
    };
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    vec![
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        ),
    ]
}

/// Reads at most [`MAX_ANSWER`] bytes of a response as JSON.
async fn json_of(resp: reqwest::Response) -> Result<Value, String> {
    let mut resp = resp;
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("the answer is larger than {MAX_ANSWER} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| format!("the answer is not JSON: {e}"))
}

fn client() -> Result<reqwest::Client, FlowError> {
    ringfence_net::client(&ringfence_net::Outbound {
        timeout: TIMEOUT,
        ..ringfence_net::Outbound::default()
    })
    .map_err(|e| {
        tracing::error!(error = %e, "settings sign-in: no HTTP client");
        FlowError("This server cannot reach its sign-in service just now.".into())
    })
}

impl Flow {
    pub(super) fn new(config: OauthSignIn) -> Flow {
        let known = match (&config.authorization_endpoint, &config.token_endpoint) {
            (Some(a), Some(t)) => Some(Endpoints {
                authorization: a.clone(),
                token: t.clone(),
            }),
            _ => None,
        };
        Flow {
            config,
            endpoints: Mutex::new(known),
            discovery: tokio::sync::Mutex::new(None),
        }
    }

    /// The endpoints once known (configured, or read from the metadata).
    fn known(&self) -> Option<Endpoints> {
        self.endpoints
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The endpoints: as configured, else from the issuer's metadata (read once; after a
    /// failure, not asked again for [`RETRY_DISCOVERY`]).
    pub(super) async fn endpoints(&self) -> Result<Endpoints, FlowError> {
        if let Some(e) = self.known() {
            return Ok(e);
        }
        let unreachable = || {
            FlowError(
                "The sign-in service cannot be reached just now; try again in a moment, or sign in with your access token.".into(),
            )
        };
        let mut failed_at = self.discovery.lock().await;
        if let Some(e) = self.known() {
            return Ok(e);
        }
        if failed_at.is_some_and(|t| t.elapsed() < RETRY_DISCOVERY) {
            return Err(unreachable());
        }
        *failed_at = Some(std::time::Instant::now());
        if !acceptable(&self.config.issuer) {
            tracing::error!(issuer = %self.config.issuer, "settings sign-in: the issuer is not https://, so its metadata is not trusted; set [http.oauth] authorization_endpoint and token_endpoint");
            return Err(unreachable());
        }
        let http = client()?;
        let mut why = String::from("no metadata document");
        for url in metadata_urls(&self.config.issuer) {
            let doc = match http.get(&url).send().await {
                Ok(r) if r.status().is_success() => json_of(r).await,
                Ok(r) => Err(format!("HTTP {}", r.status())),
                Err(e) => Err(e.to_string()),
            };
            let doc = match doc {
                Ok(doc) => doc,
                Err(e) => {
                    why = format!("{url}: {e}");
                    continue;
                }
            };
            if doc.get("issuer").and_then(Value::as_str) != Some(self.config.issuer.as_str()) {
                why = format!("{url}: its issuer is not {}", self.config.issuer);
                continue;
            }
            let field = |name: &str, configured: &Option<String>| {
                configured
                    .clone()
                    .or_else(|| doc.get(name).and_then(Value::as_str).map(str::to_owned))
            };
            let found = (
                field(
                    "authorization_endpoint",
                    &self.config.authorization_endpoint,
                ),
                field("token_endpoint", &self.config.token_endpoint),
            );
            let (Some(authorization), Some(token)) = found else {
                why = format!("{url}: no authorization_endpoint or token_endpoint");
                continue;
            };
            if !acceptable(&authorization) || !acceptable(&token) {
                why = format!(
                    "{url}: its endpoints must be https:// URLs (plain http only on loopback)"
                );
                continue;
            }
            let e = Endpoints {
                authorization,
                token,
            };
            *self.endpoints.lock().unwrap_or_else(|e| e.into_inner()) = Some(e.clone());
            *failed_at = None;
            return Ok(e);
        }
        tracing::error!(issuer = %self.config.issuer, reason = %why, "settings sign-in: the authorization server's metadata cannot be read; set [http.oauth] authorization_endpoint and token_endpoint");
        Err(unreachable())
    }

    /// Where to send the browser to sign in.
    pub(super) fn authorize_url(
        &self,
        endpoint: &str,
        redirect_uri: &str,
        state: &str,
        verifier: &str,
    ) -> String {
        let mut url = match url::Url::parse(endpoint) {
            Ok(u) => u,
            Err(_) => return endpoint.to_owned(),
        };
        {
            let mut q = url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", &self.config.client_id)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("state", state)
                .append_pair("code_challenge", &challenge(verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("resource", &self.config.resource);
            if !self.config.scopes.is_empty() {
                q.append_pair("scope", &self.config.scopes.join(" "));
            }
        }
        url.into()
    }

    /// Exchanges `code` for an access token at the token endpoint.
    pub(super) async fn exchange(
        &self,
        endpoint: &str,
        code: &str,
        redirect_uri: &str,
        verifier: &str,
    ) -> Result<String, FlowError> {
        let refused = || {
            FlowError(
                "The sign-in service did not give this server a token for you; start again, or sign in with your access token.".into(),
            )
        };
        let http = client()?;
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", verifier),
            ("resource", self.config.resource.as_str()),
        ];
        let mut request = http.post(endpoint);
        match &self.config.client_secret {
            Some(secret) => {
                request = request.basic_auth(
                    form_encode(&self.config.client_id),
                    Some(form_encode(secret)),
                );
            }
            None => form.push(("client_id", self.config.client_id.as_str())),
        }
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let answer = request
            .header(
                reqwest::header::CONTENT_TYPE,
                "application/x-www-form-urlencoded",
            )
            .header(reqwest::header::ACCEPT, "application/json")
            .body(body)
            .send()
            .await;
        let resp = match answer {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "settings sign-in: the token endpoint cannot be reached");
                return Err(refused());
            }
        };
        let status = resp.status();
        let doc = json_of(resp).await;
        match doc {
            Ok(doc) if status.is_success() => match doc.get("access_token").and_then(Value::as_str)
            {
                Some(token)
                    if doc
                        .get("token_type")
                        .and_then(Value::as_str)
                        .is_none_or(|t| t.eq_ignore_ascii_case("bearer")) =>
                {
                    Ok(token.to_owned())
                }
                _ => {
                    tracing::warn!(
                        "settings sign-in: the token endpoint's answer has no bearer access_token"
                    );
                    Err(refused())
                }
            },
            Ok(doc) => {
                let code = doc.get("error").and_then(Value::as_str).unwrap_or("none");
                tracing::warn!(status = %status, error = %code.escape_debug(), "settings sign-in: the token endpoint refused the code");
                Err(refused())
            }
            Err(e) => {
                tracing::warn!(status = %status, error = %e, "settings sign-in: the token endpoint's answer cannot be read");
                Err(refused())
            }
        }
    }
}

/// RFC 6749 §2.3.1: the client's id and secret are form-encoded before Basic authentication.
fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// What a person is told when the authorization server sends them back with `error`: one of
/// RFC 6749's codes in our words (its own description is not shown: anyone can craft one).
pub(super) fn refusal_words(error: &str) -> &'static str {
    match error {
        "access_denied" => "You (or the sign-in service) declined the sign-in.",
        "login_required" | "interaction_required" | "consent_required" => {
            "The sign-in service needs you to sign in there first; start again."
        }
        "invalid_scope" => {
            "The sign-in service does not grant the access this server asks for: the operator must check [http.oauth] scopes."
        }
        "unauthorized_client" | "invalid_request" | "unsupported_response_type" => {
            "The sign-in service does not accept this server's sign-in request: the operator must check [http.oauth] client_id and the registered return address."
        }
        "temporarily_unavailable" | "server_error" => {
            "The sign-in service failed; try again in a moment."
        }
        _ => "The sign-in service did not sign you in.",
    }
}

/// The flow cookie's value: the state and the verifier.
pub(super) fn cookie_value(state: &str, verifier: &str) -> String {
    format!("{state}.{verifier}")
}

/// The state and verifier a flow cookie holds.
pub(super) fn parse_cookie(value: &str) -> Option<(&str, &str)> {
    let (state, verifier) = value.split_once('.')?;
    let ok = |s: &str| {
        (43..=128).contains(&s.len())
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    (ok(state) && ok(verifier)).then_some((state, verifier))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow() -> Flow {
        Flow::new(OauthSignIn {
            issuer: "https://idp.example".into(),
            client_id: "settings page".into(),
            client_secret: None,
            authorization_endpoint: Some("https://idp.example/authorize?tenant=1".into()),
            token_endpoint: Some("https://idp.example/token".into()),
            scopes: vec!["files".into(), "mcp".into()],
            resource: "https://mcp.example/mcp".into(),
            name: "idp.example".into(),
        })
    }

    #[test]
    fn the_authorization_request_carries_state_challenge_and_resource() {
        let f = flow();
        let verifier = super::super::signin::random_token();
        let url = f.authorize_url(
            "https://idp.example/authorize?tenant=1",
            "https://mcp.example/settings/login/callback",
            "the-state",
            &verifier,
        );
        let parsed = url::Url::parse(&url).unwrap();
        let q: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
        assert_eq!(q["tenant"], "1", "the endpoint's own query is kept");
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["client_id"], "settings page");
        assert_eq!(
            q["redirect_uri"],
            "https://mcp.example/settings/login/callback"
        );
        assert_eq!(q["state"], "the-state");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["code_challenge"], challenge(&verifier));
        assert!(!url.contains(&verifier), "the verifier never leaves");
        assert_eq!(q["resource"], "https://mcp.example/mcp");
        assert_eq!(q["scope"], "files mcp");
    }

    #[test]
    fn metadata_is_looked_for_where_both_standards_put_it() {
        assert_eq!(
            metadata_urls("https://idp.example"),
            [
                "https://idp.example/.well-known/oauth-authorization-server",
                "https://idp.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            metadata_urls("https://idp.example/realms/home/"),
            [
                "https://idp.example/.well-known/oauth-authorization-server/realms/home",
                "https://idp.example/realms/home/.well-known/openid-configuration"
            ]
        );
    }

    #[test]
    fn a_flow_cookie_holds_two_tokens_or_nothing() {
        let (s, v) = (
            super::super::signin::random_token(),
            super::super::signin::random_token(),
        );
        assert_eq!(parse_cookie(&cookie_value(&s, &v)), Some((&*s, &*v)));
        for bad in [
            "",
            "abc",
            &s,
            &format!("{s}.short"),
            &format!("{s}.{v};x"),
            &format!("{s}.{}", "é".repeat(30)),
        ] {
            assert_eq!(parse_cookie(bad), None, "{bad}");
        }
    }

    #[test]
    fn endpoints_must_be_https_or_loopback() {
        assert!(acceptable("https://idp.example/token"));
        assert!(acceptable("http://127.0.0.1:9/token"));
        assert!(acceptable("http://localhost/token"));
        assert!(!acceptable("http://idp.example/token"));
        assert!(!acceptable("ftp://idp.example/token"));
        assert!(!acceptable("not a url"));
    }

    #[test]
    fn refusals_are_told_in_our_words() {
        assert!(refusal_words("access_denied").contains("declined"));
        assert_eq!(
            refusal_words("<script>alert(1)</script>"),
            "The sign-in service did not sign you in."
        );
    }

    #[test]
    fn basic_credentials_are_form_encoded_first() {
        assert_eq!(form_encode("a b:c"), "a+b%3Ac");
    }
}
