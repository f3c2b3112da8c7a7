//! The HTTP plan: `[http]` (with `serve --http ADDR` and its `--tls-cert`/`--tls-key`)
//! checked and turned into what the transport takes — bearer tokens, the OAuth resource
//! server's settings and metadata, TLS, rate limits, the call timeout and the shutdown grace.
//! Built only for `serve --http`, so a broken `[http]` section stops nothing else.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ringfence_mcp::{
    Auth, HttpOptions, JwtConfig, JwtValidator, KeySource, Metrics, RateLimits, ResourceMetadata,
    TlsConfig, TokenAuth,
};

use super::ConfigError;
use super::raw::HttpConfig;

/// The resolved HTTP transport settings for one address.
#[derive(Debug)]
pub struct HttpPlan {
    tokens: TokenAuth,
    oauth: Option<JwtConfig>,
    allowed_hosts: Vec<String>,
    tls: Option<Arc<TlsConfig>>,
    /// `https` with TLS, else `http`.
    pub scheme: &'static str,
    limits: RateLimits,
    /// A tool call running longer is stopped (`None`: never).
    pub call_timeout: Option<Duration>,
    grace: Duration,
    metadata: Option<ResourceMetadata>,
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
        let defaults = RateLimits::default();
        let l = http.limits.clone().unwrap_or_default();
        let limits = RateLimits {
            concurrent: l.concurrent.unwrap_or(defaults.concurrent),
            rate: l.rate.unwrap_or(defaults.rate),
            burst: l.burst.unwrap_or(defaults.burst),
        };
        for (key, v) in [("rate", limits.rate), ("burst", limits.burst)] {
            if !v.is_finite() || v < 0.0 {
                return Err(ConfigError::invalid(
                    format!("http.limits.{key}"),
                    format!("`{v}` must be a number >= 0 (0 turns the limit off)"),
                ));
            }
        }
        let call_timeout = match http.call_timeout_secs.unwrap_or(300) {
            0 => None,
            s => Some(Duration::from_secs(s)),
        };
        Ok(HttpPlan {
            tokens,
            oauth,
            allowed_hosts: http.allowed_hosts.clone(),
            tls,
            scheme,
            limits,
            call_timeout,
            grace: Duration::from_secs(http.shutdown_grace_secs.unwrap_or(30)),
            metadata,
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

    /// The transport's options, with the credentials from [`HttpPlan::auth`].
    pub fn options(&self, auth: Arc<Auth>, metrics: Arc<Metrics>) -> HttpOptions {
        HttpOptions {
            auth: Some(auth),
            allowed_hosts: self.allowed_hosts.clone(),
            metrics: Some(metrics),
            limits: self.limits,
            tls: self.tls.clone(),
            shutdown_grace: self.grace,
            resource_metadata: self.metadata.clone(),
        }
    }
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
}
