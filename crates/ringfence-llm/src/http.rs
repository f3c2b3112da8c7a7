//! What both providers share: the endpoint, its key, and one POST with its timeout, its
//! rate-limit retries and its errors — every one of which names the endpoint and none of
//! which holds the key.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};
use ringfence_net::{Api, ApiFailure, ApiKey};
use serde::de::DeserializeOwned;

use crate::LlmError;

pub use ringfence_net::RetryPolicy;

/// The largest response read (a chat answer is a few kilobytes; this stops a runaway).
const MAX_BODY: usize = 32 << 20;

/// The whole-request timeout unless one is set.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// One configured API endpoint: where to POST, how, and with which key.
#[derive(Clone)]
pub(crate) struct Endpoint {
    /// The URL requests are posted to.
    url: String,
    /// The base URL without credentials: how messages name the endpoint.
    pub label: String,
    /// The client, its retries and the key (`ringfence_net::Api`).
    pub api: Api,
    pub timeout: Duration,
    /// The header carrying the key, ready to send.
    auth: Option<(HeaderName, HeaderValue)>,
    /// The variable the key came from, for messages.
    pub key_var: String,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.label)
            .field("timeout", &self.timeout)
            .field("retry", &self.api.retry)
            .field("key", &self.api.key.as_ref().map(|_| "[redacted]"))
            .field("key_var", &self.key_var)
            .finish()
    }
}

/// A base URL checked and cut down to what requests and messages need.
pub(crate) struct Base {
    /// The base URL as configured, without a trailing `/`.
    pub url: String,
    /// The same without credentials, for messages.
    pub label: String,
    /// Whether the host is this machine (`localhost`, `127.0.0.0/8`, `::1`).
    pub loopback: bool,
}

impl Base {
    pub fn parse(base_url: &str) -> Result<Base, LlmError> {
        let trimmed = base_url.trim().trim_end_matches('/');
        let parsed = url::Url::parse(trimmed).map_err(|e| {
            LlmError::Setup(format!(
                "the model API's base URL is not a URL ({e}); write it as http(s)://host[:port]/path"
            ))
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(LlmError::Setup(format!(
                "the model API's base URL must be http or https, not {}",
                parsed.scheme()
            )));
        }
        let loopback = match parsed.host() {
            Some(url::Host::Domain(d)) => {
                let d = d.to_ascii_lowercase();
                d == "localhost" || d.ends_with(".localhost")
            }
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        };
        let mut shown = parsed.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        let label = shown.as_str().trim_end_matches('/').to_owned();
        Ok(Base {
            url: trimmed.to_owned(),
            label,
            loopback,
        })
    }
}

/// How the key is sent.
pub(crate) enum Auth {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// The key alone in this header (`x-api-key`).
    Header(&'static str),
}

impl Endpoint {
    /// An endpoint posting to `url`, named `label` in messages.
    pub fn new(
        url: String,
        label: String,
        key: Option<String>,
        key_var: String,
        auth: Auth,
    ) -> Result<Endpoint, LlmError> {
        let key = ApiKey::new(key);
        let header = |prefix: &str, k: &ApiKey| {
            k.header(prefix).ok_or_else(|| {
                LlmError::Setup(format!(
                    "the key in {key_var} holds characters an HTTP header cannot carry (a line break, a control character?); set it to the key alone"
                ))
            })
        };
        let auth = match &key {
            None => None,
            Some(k) => Some(match auth {
                Auth::Bearer => (reqwest::header::AUTHORIZATION, header("Bearer ", k)?),
                Auth::Header(name) => (HeaderName::from_static(name), header("", k)?),
            }),
        };
        let api = Api::new(DEFAULT_TIMEOUT, RetryPolicy::default(), MAX_BODY, key)
            .map_err(|e| LlmError::Setup(e.to_string()))?;
        Ok(Endpoint {
            url,
            label,
            api,
            timeout: DEFAULT_TIMEOUT,
            auth,
            key_var,
        })
    }

    /// Posts `body` as JSON with `headers`, retrying rate limits as the policy says.
    /// Returns the body of a success; every other outcome is an error.
    pub async fn post(
        &self,
        body: &serde_json::Value,
        headers: &[(&'static str, &'static str)],
    ) -> Result<Vec<u8>, LlmError> {
        let bytes = serde_json::to_vec(body).map_err(|e| {
            LlmError::Setup(format!("the request could not be written as JSON: {e}"))
        })?;
        let reply = self
            .api
            .send(&self.label, || {
                let mut request = self
                    .api
                    .client
                    .post(&self.url)
                    .timeout(self.timeout)
                    .header(reqwest::header::CONTENT_TYPE, "application/json")
                    .body(bytes.clone());
                for (name, value) in headers {
                    request = request.header(*name, *value);
                }
                if let Some((name, value)) = &self.auth {
                    request = request.header(name.clone(), value.clone());
                }
                request
            })
            .await
            .map_err(|f| self.failure(f))?;
        self.check(reply.status, &reply.body)?;
        Ok(reply.body)
    }

    /// A call that got no usable response, as the model API's error.
    fn failure(&self, failure: ApiFailure) -> LlmError {
        let endpoint = self.label.clone();
        match failure {
            ApiFailure::RateLimited {
                attempts,
                retry_after,
            } => LlmError::RateLimited {
                endpoint,
                attempts,
                retry_after,
            },
            ApiFailure::Timeout => LlmError::Timeout {
                endpoint,
                after: self.timeout,
            },
            ApiFailure::Connect(detail) | ApiFailure::Transport(detail) => {
                LlmError::Transport { endpoint, detail }
            }
            ApiFailure::TooLarge { limit } => LlmError::BadResponse {
                endpoint,
                reason: format!("the response is larger than {} MiB", limit >> 20),
                quote: String::new(),
            },
        }
    }

    /// The error a non-success status means; `Ok` for a success.
    fn check(&self, status: StatusCode, body: &[u8]) -> Result<(), LlmError> {
        if status.is_success() {
            return Ok(());
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let fix = if self.api.key.is_some() {
                format!(
                    "check the key in {} (wrong, expired, or without access to this model)",
                    self.key_var
                )
            } else {
                format!("it wants a key: set {} to one", self.key_var)
            };
            return Err(LlmError::Refused {
                status: status.as_u16(),
                message: format!(
                    "{} refused the request (HTTP {}): {fix}{}",
                    self.label,
                    status.as_u16(),
                    self.quote(body)
                ),
            });
        }
        Err(LlmError::Http {
            endpoint: self.label.clone(),
            status: status.as_u16(),
            quote: self.quote(body),
        })
    }

    /// `body` read as `T`; a body that is not is [`LlmError::BadResponse`], quoting it.
    pub fn parse<T: DeserializeOwned>(&self, body: &[u8]) -> Result<T, LlmError> {
        serde_json::from_slice(body).map_err(|e| self.bad(e.to_string(), body))
    }

    /// [`LlmError::BadResponse`] for `body`, saying `reason`.
    pub fn bad(&self, reason: impl Into<String>, body: &[u8]) -> LlmError {
        LlmError::BadResponse {
            endpoint: self.label.clone(),
            reason: self.api.scrub(&reason.into()),
            quote: self.quote(body),
        }
    }

    /// `: "<start of the body>"` with the key removed (see `ringfence_net::Api::quote`).
    pub fn quote(&self, body: &[u8]) -> String {
        self.api.quote(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_lose_credentials_and_know_loopback() {
        let b = Base::parse("http://user:pw@localhost:11434/v1/").unwrap();
        assert_eq!(b.url, "http://user:pw@localhost:11434/v1");
        assert_eq!(b.label, "http://localhost:11434/v1");
        assert!(b.loopback);
        assert!(Base::parse("http://127.0.0.2:8000").unwrap().loopback);
        assert!(Base::parse("http://[::1]:8000/v1").unwrap().loopback);
        assert!(!Base::parse("https://api.openai.com/v1").unwrap().loopback);
        assert!(!Base::parse("http://10.0.0.5:8000/v1").unwrap().loopback);
        assert!(matches!(
            Base::parse("file:///etc/passwd"),
            Err(LlmError::Setup(_))
        ));
        assert!(matches!(Base::parse("not a url"), Err(LlmError::Setup(_))));
    }

    #[test]
    fn quotes_are_cut_and_keyless() {
        let key = "sk-live-0123456789";
        let e = Endpoint::new(
            "http://127.0.0.1:1/x".into(),
            "http://127.0.0.1:1".into(),
            Some(key.into()),
            "MY_KEY".into(),
            Auth::Bearer,
        )
        .unwrap();
        let long = format!("{} {key}", "a".repeat(400));
        let q = e.quote(long.as_bytes());
        assert!(!q.contains(key), "{q}");
        assert_eq!(
            q.chars().count(),
            ": \"".len() + ringfence_net::api::QUOTE_CHARS + "…\"".chars().count()
        );
        let q = e.quote(format!(r#"{{"error":{{"message":"bad key {key}"}}}}"#).as_bytes());
        assert_eq!(q, ": \"bad key [key]\"");
        let debug = format!("{e:?}");
        assert!(!debug.contains(key), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }
}
