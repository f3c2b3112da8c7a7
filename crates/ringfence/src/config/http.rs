//! The HTTP plan: `[http]` (with `serve --http ADDR` and its `--tls-cert`/`--tls-key`)
//! checked and turned into what the transport takes — bearer tokens, the OAuth resource
//! server's settings and metadata, TLS, per-user limits (rate, calls, sessions, streams), body
//! limits, the operator's `/metrics` token, the call timeout and the shutdown grace.
//! Built only for `serve --http`, so a broken `[http]` section stops nothing else.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ringfence_mcp::{
    Auth, HttpOptions, JwtConfig, JwtValidator, KeySource, Metrics, MetricsToken, RateLimits,
    ResourceMetadata, TlsConfig, TokenAuth,
};

use super::ConfigError;
use super::raw::HttpConfig;

/// The resolved HTTP transport settings for one address.
#[derive(Debug)]
pub struct HttpPlan {
    tokens: TokenAuth,
    oauth: Option<JwtConfig>,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    tls: Option<Arc<TlsConfig>>,
    /// `https` with TLS, else `http`.
    pub scheme: &'static str,
    /// `http.public_url`'s origin (`https://assistant.example.org`), when set: what browsers
    /// see behind a proxy (the settings page's origin, cookie and redirect address).
    pub public_origin: Option<String>,
    limits: RateLimits,
    /// A tool call running longer is stopped (`None`: never).
    pub call_timeout: Option<Duration>,
    grace: Duration,
    metadata: Option<ResourceMetadata>,
    metrics_token: Option<MetricsToken>,
    max_body_bytes: usize,
    max_buffered_bytes: usize,
    body_timeout: Option<Duration>,
    stream_idle: Option<Duration>,
    /// `None`: derived from the descriptor limit at start.
    max_open_requests: Option<usize>,
    /// Signing in to the settings page through the authorization server (`[http.oauth]`
    /// with a `client_id`), and the variable naming its client secret, if any.
    pub settings_oauth: Option<(ringfence_mcp::OauthSignIn, Option<String>)>,
}

/// The settings page's sign-in through the authorization server, when `[http.oauth]` names
/// a `client_id`; every endpoint must be HTTPS (HTTP on loopback only).
fn settings_sign_in(
    o: &crate::config::raw::OauthConfig,
    resource: &str,
) -> Result<Option<(ringfence_mcp::OauthSignIn, Option<String>)>, ConfigError> {
    let client_id = match o.client_id.as_deref().map(str::trim) {
        None => {
            for (key, set) in [
                ("client_secret_env", o.client_secret_env.is_some()),
                ("authorization_endpoint", o.authorization_endpoint.is_some()),
                ("token_endpoint", o.token_endpoint.is_some()),
                ("scopes", o.scopes.is_some()),
            ] {
                if set {
                    return Err(ConfigError::invalid(
                        format!("http.oauth.{key}"),
                        "is for the settings page's sign-in, which needs http.oauth.client_id: set it (the client registered at the authorization server) or remove this key",
                    ));
                }
            }
            return Ok(None);
        }
        Some("") => {
            return Err(ConfigError::invalid(
                "http.oauth.client_id",
                "is empty: name the settings page's client at the authorization server, or remove the key",
            ));
        }
        Some(id) => id.to_owned(),
    };
    // The code, the verifier and the client's secret go where the issuer says: it must be
    // reached over HTTPS.
    if !ringfence_mcp::https_or_loopback(&o.issuer) {
        return Err(ConfigError::invalid(
            "http.oauth.issuer",
            format!(
                "`{}` must be an https:// URL (plain http only on loopback) for the settings page's sign-in (client_id): its metadata says where people's codes and the client's secret are sent",
                o.issuer
            ),
        ));
    }
    for (key, url) in [
        ("authorization_endpoint", &o.authorization_endpoint),
        ("token_endpoint", &o.token_endpoint),
    ] {
        if let Some(url) = url
            && !ringfence_mcp::https_or_loopback(url)
        {
            return Err(ConfigError::invalid(
                format!("http.oauth.{key}"),
                format!("`{url}` must be an https:// URL (plain http only on loopback)"),
            ));
        }
    }
    let name = url::Url::parse(&o.issuer)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_else(|| o.issuer.clone());
    Ok(Some((
        ringfence_mcp::OauthSignIn {
            issuer: o.issuer.clone(),
            client_id,
            client_secret: None,
            authorization_endpoint: o.authorization_endpoint.clone(),
            token_endpoint: o.token_endpoint.clone(),
            scopes: o
                .scopes
                .clone()
                .unwrap_or_else(|| o.required_scopes.clone()),
            // The token must name this server as MCP's are checked: its first audience.
            resource: o
                .audience
                .as_ref()
                .and_then(|a| a.to_vec().into_iter().next())
                .unwrap_or_else(|| resource.to_owned()),
            name,
        },
        o.client_secret_env.clone(),
    )))
}

impl HttpPlan {
    /// Checks `[http]` for serving at `addr`; `tls_files` (the command line's certificate
    /// and key) replace the configured ones. Loads the TLS files.
    pub fn new(
        http: &HttpConfig,
        addr: SocketAddr,
        tls_files: Option<(PathBuf, PathBuf)>,
    ) -> Result<HttpPlan, ConfigError> {
        let entries: Vec<(String, String)> = http
            .tokens
            .iter()
            .map(|t| (t.user.clone(), t.hash.clone()))
            .collect();
        let tokens = TokenAuth::new(&entries)?;
        let metrics_token = match &http.metrics_token_hash {
            Some(hash) => Some(MetricsToken::new(hash, &tokens)?),
            None => None,
        };
        if http.tls_cert.is_some() != http.tls_key.is_some() {
            return Err(ConfigError::TlsHalf);
        }
        let tls_files = tls_files.or_else(|| http.tls_cert.clone().zip(http.tls_key.clone()));
        let tls = match &tls_files {
            Some((cert, key)) => Some(ringfence_mcp::load_tls(cert, key)?),
            None => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let public = match &http.public_url {
            Some(u) => {
                if !(u.starts_with("https://") || u.starts_with("http://")) {
                    return Err(ConfigError::invalid(
                        "http.public_url",
                        format!("`{u}` must start with https:// or http://"),
                    ));
                }
                u.trim_end_matches('/').to_owned()
            }
            None => format!("{scheme}://{addr}"),
        };
        let resource = format!("{public}/mcp");
        // The public URL's origin is the server's own too (behind a proxy that serves HTTPS).
        let mut allowed_origins = Vec::new();
        if http.public_url.is_some()
            && let Ok(origin) = ringfence_mcp::normalize_origin(
                url::Url::parse(&public)
                    .map(|u| u.origin().ascii_serialization())
                    .as_deref()
                    .unwrap_or(&public),
            )
        {
            allowed_origins.push(origin);
        }
        for entry in &http.allowed_origins {
            allowed_origins.push(
                ringfence_mcp::normalize_origin(entry)
                    .map_err(|e| ConfigError::invalid("http.allowed_origins", e.to_string()))?,
            );
        }
        let settings_oauth = match &http.oauth {
            Some(o) => settings_sign_in(o, &resource)?,
            None => None,
        };
        let (oauth, metadata) = match &http.oauth {
            None => (None, None),
            Some(o) => {
                let keys = match (&o.jwks_file, &o.jwks_url) {
                    (Some(f), None) => KeySource::File(f.clone()),
                    (None, Some(u)) => KeySource::Url(u.clone()),
                    _ => {
                        return Err(ConfigError::invalid(
                            "http.oauth",
                            "set exactly one of jwks_file and jwks_url (where the authorization server's signing keys are)",
                        ));
                    }
                };
                let audiences = o
                    .audience
                    .as_ref()
                    .map(|a| a.to_vec())
                    .unwrap_or_else(|| vec![resource.clone()]);
                let config = JwtConfig {
                    issuer: o.issuer.clone(),
                    audiences,
                    keys,
                    user_claim: o.user_claim.clone().unwrap_or_else(|| "sub".into()),
                    required_scopes: o.required_scopes.clone(),
                };
                let mut document = serde_json::json!({
                    "resource": resource,
                    "authorization_servers": [o.issuer],
                    "bearer_methods_supported": ["header"],
                    "resource_name": "ringfence",
                });
                if !o.required_scopes.is_empty() {
                    document["scopes_supported"] = serde_json::json!(o.required_scopes);
                }
                let metadata = ResourceMetadata {
                    document,
                    url: format!("{public}/.well-known/oauth-protected-resource/mcp"),
                };
                (Some(config), Some(metadata))
            }
        };
        // Without credentials the server listens on loopback only, for one person.
        let defaults = if entries.is_empty() && http.oauth.is_none() {
            RateLimits::one_person()
        } else {
            RateLimits::default()
        };
        let l = http.limits.clone().unwrap_or_default();
        let limits = RateLimits {
            concurrent: l.concurrent.unwrap_or(defaults.concurrent),
            rate: l.rate.unwrap_or(defaults.rate),
            // A rate set without its burst gets the usual burst, not the loopback's none.
            burst: l
                .burst
                .unwrap_or(if l.rate.is_some() && defaults.rate == 0.0 {
                    RateLimits::default().burst
                } else {
                    defaults.burst
                }),
            sessions: l.sessions.unwrap_or(defaults.sessions),
            streams: l.streams.unwrap_or(defaults.streams),
        };
        for (key, v) in [("rate", limits.rate), ("burst", limits.burst)] {
            if !v.is_finite() || v < 0.0 {
                return Err(ConfigError::invalid(
                    format!("http.limits.{key}"),
                    format!("`{v}` must be a number >= 0 (0 turns the limit off)"),
                ));
            }
        }
        let call_timeout = seconds_or_never(http.call_timeout_secs, 300);
        let max_body_mib = http.max_body_mib.unwrap_or(64);
        if !(1..=4096).contains(&max_body_mib) {
            return Err(ConfigError::invalid(
                "http.max_body_mib",
                format!("`{max_body_mib}` must be between 1 and 4096 (MiB)"),
            ));
        }
        let max_buffered_mib = http.max_buffered_mib.unwrap_or(256.max(max_body_mib));
        if max_buffered_mib < max_body_mib || max_buffered_mib > 65_536 {
            return Err(ConfigError::invalid(
                "http.max_buffered_mib",
                format!(
                    "`{max_buffered_mib}` must be at least http.max_body_mib ({max_body_mib}), or a body of the largest size could never be read, and at most 65536 (MiB)"
                ),
            ));
        }
        let public_origin = http
            .public_url
            .as_ref()
            .and_then(|u| url::Url::parse(u).ok())
            .map(|u| u.origin().ascii_serialization());
        Ok(HttpPlan {
            public_origin,
            tokens,
            oauth,
            allowed_hosts: http.allowed_hosts.clone(),
            allowed_origins,
            tls,
            scheme,
            limits,
            call_timeout,
            grace: Duration::from_secs(http.shutdown_grace_secs.unwrap_or(30)),
            metadata,
            metrics_token,
            max_body_bytes: mib(max_body_mib),
            max_buffered_bytes: mib(max_buffered_mib),
            body_timeout: seconds_or_never(http.body_timeout_secs, 60),
            stream_idle: seconds_or_never(http.stream_idle_secs, 300),
            max_open_requests: http.max_open_requests,
            settings_oauth,
        })
    }

    /// The credentials: the bearer tokens, and with `[http.oauth]` the JWT validator (which
    /// loads the key set now, from its file or URL).
    pub async fn auth(&self) -> Result<Auth, ConfigError> {
        let jwt = match self.oauth.clone() {
            Some(config) => Some(Arc::new(
                JwtValidator::new(config)
                    .await
                    .map_err(ConfigError::Oauth)?,
            )),
            None => None,
        };
        Ok(Auth {
            tokens: self.tokens.clone(),
            jwt,
        })
    }

    /// Calls and event streams open at once over all users: as configured, else what the
    /// process's descriptor limit (`descriptors`, when known) allows with a reserve kept.
    pub fn max_open_requests(&self, descriptors: Option<u64>) -> usize {
        match (self.max_open_requests, descriptors) {
            (Some(n), _) => n,
            (None, Some(d)) => ringfence_mcp::open_request_slots(d),
            (None, None) => 0,
        }
    }

    /// The transport's options, with the credentials from [`HttpPlan::auth`]; `descriptors`
    /// is the process's descriptor limit, when known.
    pub fn options(
        &self,
        auth: Arc<Auth>,
        metrics: Arc<Metrics>,
        descriptors: Option<u64>,
    ) -> HttpOptions {
        HttpOptions {
            auth: Some(auth),
            allowed_hosts: self.allowed_hosts.clone(),
            allowed_origins: self.allowed_origins.clone(),
            metrics: Some(metrics),
            metrics_token: self.metrics_token.clone(),
            limits: self.limits,
            max_body_bytes: self.max_body_bytes,
            max_buffered_bytes: self.max_buffered_bytes,
            body_timeout: self.body_timeout,
            stream_idle: self.stream_idle,
            max_open_requests: self.max_open_requests(descriptors),
            tls: self.tls.clone(),
            shutdown_grace: self.grace,
            resource_metadata: self.metadata.clone(),
            // Set by `serve` from `[store]` and the families built.
            shared_sessions: None,
            settings: None,
        }
    }
}

/// A number of seconds from the configuration (`default` when unset); `0` is "never".
fn seconds_or_never(configured: Option<u64>, default: u64) -> Option<Duration> {
    match configured.unwrap_or(default) {
        0 => None,
        s => Some(Duration::from_secs(s)),
    }
}

fn mib(n: u64) -> usize {
    usize::try_from(n << 20).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::raw::{HttpLimits, OauthConfig};

    fn addr() -> SocketAddr {
        "127.0.0.1:8765".parse().unwrap()
    }

    fn refused(http: &HttpConfig) -> String {
        HttpPlan::new(http, addr(), None).unwrap_err().to_string()
    }

    #[test]
    fn defaults_serve_plain_http_with_a_five_minute_call_limit() {
        let plan = HttpPlan::new(&HttpConfig::default(), addr(), None).unwrap();
        assert_eq!(plan.scheme, "http");
        assert_eq!(plan.call_timeout, Some(Duration::from_secs(300)));
        assert_eq!(plan.grace, Duration::from_secs(30));
        assert!(plan.oauth.is_none() && plan.metadata.is_none() && plan.tls.is_none());
        assert_eq!((plan.limits.sessions, plan.limits.streams), (64, 0)); // one person
        assert_eq!(plan.body_timeout, Some(Duration::from_secs(60)));
        assert_eq!(plan.stream_idle, Some(Duration::from_secs(300)));
        assert_eq!(
            (plan.max_body_bytes, plan.max_buffered_bytes),
            (64 << 20, 256 << 20)
        );
        assert!(plan.metrics_token.is_none());
        // The server-wide cap follows the descriptor limit unless configured.
        assert_eq!(plan.max_open_requests(Some(20_000)), 15_000);
        assert_eq!(plan.max_open_requests(None), 0);
        let set = HttpConfig {
            max_open_requests: Some(500),
            body_timeout_secs: Some(0),
            ..HttpConfig::default()
        };
        let plan = HttpPlan::new(&set, addr(), None).unwrap();
        assert_eq!(plan.max_open_requests(Some(20_000)), 500);
        assert_eq!(plan.body_timeout, None);
    }

    #[test]
    fn body_and_operator_settings_are_checked() {
        let body = |max_body_mib, max_buffered_mib| HttpConfig {
            max_body_mib,
            max_buffered_mib,
            ..HttpConfig::default()
        };
        assert_eq!(
            refused(&body(Some(0), None)),
            "http.max_body_mib: `0` must be between 1 and 4096 (MiB)"
        );
        assert!(
            refused(&body(Some(64), Some(32)))
                .starts_with("http.max_buffered_mib: `32` must be at least http.max_body_mib (64)")
        );
        // A larger body limit raises the default budget with it.
        let plan = HttpPlan::new(&body(Some(512), None), addr(), None).unwrap();
        assert_eq!(plan.max_buffered_bytes, 512 << 20);
        let user_hash = ringfence_mcp::token_hash("alice-token");
        let ops = |hash: &str| HttpConfig {
            tokens: vec![crate::config::raw::TokenEntry {
                user: "alice".into(),
                hash: user_hash.clone(),
            }],
            metrics_token_hash: Some(hash.into()),
            ..HttpConfig::default()
        };
        assert!(refused(&ops("plain")).starts_with("http.metrics_token_hash: must look like"));
        assert!(refused(&ops(&user_hash)).starts_with("http.metrics_token_hash: the operator's"));
        let plan = HttpPlan::new(&ops(&ringfence_mcp::token_hash("ops")), addr(), None).unwrap();
        assert!(plan.metrics_token.is_some());
    }

    #[test]
    fn refusals_name_the_key() {
        let half = HttpConfig {
            tls_cert: Some("/c.pem".into()),
            ..HttpConfig::default()
        };
        assert_eq!(
            refused(&half),
            "http.tls_cert and http.tls_key go together: set both or neither"
        );
        let url = HttpConfig {
            public_url: Some("mcp.example.com".into()),
            ..HttpConfig::default()
        };
        assert_eq!(
            refused(&url),
            "http.public_url: `mcp.example.com` must start with https:// or http://"
        );
        let rate = HttpConfig {
            limits: Some(HttpLimits {
                rate: Some(-1.0),
                ..HttpLimits::default()
            }),
            ..HttpConfig::default()
        };
        assert_eq!(
            refused(&rate),
            "http.limits.rate: `-1` must be a number >= 0 (0 turns the limit off)"
        );
        let keys = HttpConfig {
            oauth: Some(OauthConfig {
                issuer: "https://issuer.example".into(),
                audience: None,
                jwks_file: None,
                jwks_url: None,
                user_claim: None,
                required_scopes: Vec::new(),
                ..OauthConfig::default()
            }),
            ..HttpConfig::default()
        };
        assert!(refused(&keys).starts_with("http.oauth: set exactly one of jwks_file"));
    }

    #[test]
    fn oauth_metadata_names_the_public_resource() {
        let http = HttpConfig {
            public_url: Some("https://mcp.example.com/".into()),
            oauth: Some(OauthConfig {
                issuer: "https://issuer.example".into(),
                audience: None,
                jwks_file: Some("/keys.json".into()),
                jwks_url: None,
                user_claim: None,
                required_scopes: vec!["mcp".into()],
                ..OauthConfig::default()
            }),
            ..HttpConfig::default()
        };
        let plan = HttpPlan::new(&http, addr(), None).unwrap();
        let oauth = plan.oauth.as_ref().unwrap();
        assert_eq!(
            oauth.audiences,
            vec!["https://mcp.example.com/mcp".to_owned()]
        );
        assert_eq!(oauth.user_claim, "sub");
        let metadata = plan.metadata.as_ref().unwrap();
        assert_eq!(
            metadata.url,
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(metadata.document["scopes_supported"][0], "mcp");
    }

    #[test]
    fn the_settings_sign_in_needs_a_client_and_safe_endpoints() {
        let with = |o: OauthConfig| HttpConfig {
            public_url: Some("https://mcp.example.com".into()),
            oauth: Some(OauthConfig {
                issuer: "https://issuer.example/realm".into(),
                jwks_file: Some("/keys.json".into()),
                required_scopes: vec!["mcp".into()],
                ..o
            }),
            ..HttpConfig::default()
        };
        // Without a client id: no sign-in through the issuer, and its keys are refused.
        let plan = HttpPlan::new(&with(OauthConfig::default()), addr(), None).unwrap();
        assert!(plan.settings_oauth.is_none());
        let stray = with(OauthConfig {
            token_endpoint: Some("https://issuer.example/token".into()),
            ..OauthConfig::default()
        });
        assert!(refused(&stray).starts_with("http.oauth.token_endpoint: "));
        let plan = HttpPlan::new(
            &with(OauthConfig {
                client_id: Some("settings".into()),
                client_secret_env: Some("SETTINGS_SECRET".into()),
                ..OauthConfig::default()
            }),
            addr(),
            None,
        )
        .unwrap();
        let (flow, secret) = plan.settings_oauth.unwrap();
        assert_eq!(flow.client_id, "settings");
        assert_eq!(flow.resource, "https://mcp.example.com/mcp");
        assert_eq!(flow.scopes, ["mcp"], "the required scopes by default");
        assert_eq!(flow.name, "issuer.example");
        assert_eq!(secret.as_deref(), Some("SETTINGS_SECRET"));
        for bad in ["http://issuer.example/authorize", "not a url"] {
            let http = with(OauthConfig {
                client_id: Some("settings".into()),
                authorization_endpoint: Some(bad.into()),
                ..OauthConfig::default()
            });
            assert!(
                refused(&http).contains("must be an https:// URL"),
                "{}",
                refused(&http)
            );
        }
        let plain = HttpConfig {
            oauth: Some(OauthConfig {
                issuer: "http://login.corp".into(),
                jwks_file: Some("/keys.json".into()),
                client_id: Some("settings".into()),
                ..OauthConfig::default()
            }),
            ..HttpConfig::default()
        };
        assert!(
            refused(&plain)
                .starts_with("http.oauth.issuer: `http://login.corp` must be an https://"),
            "{}",
            refused(&plain)
        );
        let empty = with(OauthConfig {
            client_id: Some(" ".into()),
            ..OauthConfig::default()
        });
        assert!(refused(&empty).starts_with("http.oauth.client_id: "));
    }

    #[test]
    fn one_person_without_credentials_many_users_with_them() {
        let local = HttpPlan::new(&HttpConfig::default(), addr(), None).unwrap();
        assert_eq!(local.limits, RateLimits::one_person());
        assert_eq!(local.limits.rate, 0.0);
        let users = HttpConfig {
            tokens: vec![crate::config::raw::TokenEntry {
                user: "alice".into(),
                hash: ringfence_mcp::token_hash("a"),
            }],
            ..HttpConfig::default()
        };
        let plan = HttpPlan::new(&users, addr(), None).unwrap();
        assert_eq!(plan.limits, RateLimits::default());
        // A limit set by hand holds either way.
        let set = HttpConfig {
            limits: Some(HttpLimits {
                rate: Some(5.0),
                ..HttpLimits::default()
            }),
            ..HttpConfig::default()
        };
        let plan = HttpPlan::new(&set, addr(), None).unwrap();
        assert_eq!(plan.limits.rate, 5.0);
        assert_eq!(plan.limits.sessions, RateLimits::one_person().sessions);
    }

    #[test]
    fn origins_are_the_public_urls_and_the_listed_ones() {
        let http = HttpConfig {
            public_url: Some("https://assistant.example.com/".into()),
            allowed_origins: vec![
                "http://localhost:3000".into(),
                "https://app.example.com".into(),
            ],
            ..HttpConfig::default()
        };
        let plan = HttpPlan::new(&http, addr(), None).unwrap();
        assert_eq!(
            plan.allowed_origins,
            [
                "https://assistant.example.com:443",
                "http://localhost:3000",
                "https://app.example.com:443"
            ]
        );
        let bad = HttpConfig {
            allowed_origins: vec!["*".into()],
            ..HttpConfig::default()
        };
        assert!(
            refused(&bad).starts_with("http.allowed_origins: `*` is not an origin"),
            "{}",
            refused(&bad)
        );
    }
}
