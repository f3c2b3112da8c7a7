//! What both providers share: the endpoint, its key, and one POST with its timeout, its
//! rate-limit retries and its errors — every one of which names the endpoint and none of
//! which holds the key.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{HeaderName, HeaderValue};
use serde::de::DeserializeOwned;

use crate::LlmError;

/// How many characters of a response are quoted in an error.
const QUOTE_CHARS: usize = 300;

/// The largest response read (a chat answer is a few kilobytes; this stops a runaway).
const MAX_BODY: usize = 32 << 20;

/// The whole-request timeout unless one is set.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// How rate limits (HTTP 429) are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (`2`: at most three requests).
    pub retries: u32,
    /// The wait before the first retry when the server sends no `Retry-After`; doubled for
    /// each further one.
    pub backoff: Duration,
    /// The longest wait. A `Retry-After` asking for more is not waited for: the call fails
    /// at once with [`LlmError::RateLimited`], saying how long the server asked for.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    /// Two retries, 1 s then 2 s apart, honouring a `Retry-After` of up to 10 s.
    fn default() -> RetryPolicy {
        RetryPolicy {
            retries: 2,
            backoff: Duration::from_secs(1),
            max_wait: Duration::from_secs(10),
        }
    }
}

/// An API key. Its `Debug` never shows it.
#[derive(Clone)]
pub(crate) struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl ApiKey {
    /// The key as a header value, marked sensitive (so HTTP machinery does not log it).
    /// Fails, without quoting the key, when it holds what a header cannot carry.
    fn header(&self, prefix: &str, var: &str) -> Result<HeaderValue, LlmError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            LlmError::Setup(format!(
                "the key in {var} holds characters an HTTP header cannot carry (a line break, a control character?); set it to the key alone"
            ))
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// One configured API endpoint: where to POST, how, and with which key.
#[derive(Clone)]
pub(crate) struct Endpoint {
    /// The URL requests are posted to.
    url: String,
    /// The base URL without credentials: how messages name the endpoint.
    pub label: String,
    client: reqwest::Client,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    key: Option<ApiKey>,
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
            .field("retry", &self.retry)
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
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
        let client = ringfence_net::client(&ringfence_net::Outbound {
            connect_timeout: Duration::from_secs(10),
            timeout: DEFAULT_TIMEOUT,
        })
        .map_err(|e| LlmError::Setup(e.to_string()))?;
        let key = key.filter(|k| !k.is_empty()).map(ApiKey);
        let auth = match &key {
            None => None,
            Some(k) => Some(match auth {
                Auth::Bearer => (
                    reqwest::header::AUTHORIZATION,
                    k.header("Bearer ", &key_var)?,
                ),
                Auth::Header(name) => (HeaderName::from_static(name), k.header("", &key_var)?),
            }),
        };
        Ok(Endpoint {
            url,
            label,
            client,
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            key,
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
        let mut attempt = 0u32;
        loop {
            let mut request = self
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
            let started = std::time::Instant::now();
            let response = request.send().await.map_err(|e| self.transport(e))?;
            let status = response.status();
            tracing::debug!(endpoint = %self.label, status = status.as_u16(), elapsed_ms = started.elapsed().as_millis() as u64, "model API answered");
            if status == StatusCode::TOO_MANY_REQUESTS {
                let asked = ringfence_net::retry_after(response.headers());
                let wait = asked.unwrap_or(self.retry.backoff * 2u32.saturating_pow(attempt));
                if attempt >= self.retry.retries || wait > self.retry.max_wait {
                    return Err(LlmError::RateLimited {
                        endpoint: self.label.clone(),
                        attempts: attempt + 1,
                        retry_after: asked,
                    });
                }
                tracing::debug!(endpoint = %self.label, attempt, wait_ms = wait.as_millis() as u64, "rate limited; retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
                continue;
            }
            let body = self.read(response).await?;
            self.check(status, &body)?;
            return Ok(body);
        }
    }

    /// The response's body, up to [`MAX_BODY`].
    async fn read(&self, mut response: reqwest::Response) -> Result<Vec<u8>, LlmError> {
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(e))? {
            if body.len() + chunk.len() > MAX_BODY {
                return Err(LlmError::BadResponse {
                    endpoint: self.label.clone(),
                    reason: format!("the response is larger than {} MiB", MAX_BODY >> 20),
                    quote: String::new(),
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// The error a non-success status means; `Ok` for a success.
    fn check(&self, status: StatusCode, body: &[u8]) -> Result<(), LlmError> {
        if status.is_success() {
            return Ok(());
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let fix = if self.key.is_some() {
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
            reason: self.scrub(&reason.into()),
            quote: self.quote(body),
        }
    }

    /// A request that got no response.
    fn transport(&self, e: reqwest::Error) -> LlmError {
        let e = e.without_url();
        if e.is_timeout() {
            return LlmError::Timeout {
                endpoint: self.label.clone(),
                after: self.timeout,
            };
        }
        LlmError::Transport {
            endpoint: self.label.clone(),
            detail: self.scrub(&ringfence_net::error_chain(&e)),
        }
    }

    /// `: "<start of the body>"` when it has text worth quoting — the API's own error
    /// message when it gives one — with the key removed; empty otherwise.
    pub fn quote(&self, body: &[u8]) -> String {
        let detail = serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| api_message(&v))
            .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
        // The key goes before the cut, so no part of it survives at the quote's end.
        let detail = self.scrub(&detail.split_whitespace().collect::<Vec<_>>().join(" "));
        if detail.is_empty() {
            return String::new();
        }
        let mut cut: String = detail.chars().take(QUOTE_CHARS).collect();
        if cut.len() < detail.len() {
            cut.push('…');
        }
        format!(": \"{cut}\"")
    }

    /// `text` with the key replaced by `[key]`.
    pub fn scrub(&self, text: &str) -> String {
        match &self.key {
            Some(ApiKey(key)) if key.len() >= 4 => text.replace(key.as_str(), "[key]"),
            _ => text.to_owned(),
        }
    }
}

/// The message in an API's JSON error: `{"error": {"message": …}}` (OpenAI, Anthropic,
/// Ollama), `{"error": "…"}`, `{"message": …}`, `{"detail": "…"}`.
fn api_message(v: &serde_json::Value) -> Option<String> {
    let error = v.get("error");
    [
        error.and_then(|e| e.get("message")),
        error,
        v.get("message"),
        v.get("detail"),
    ]
    .into_iter()
    .flatten()
    .find_map(|m| m.as_str().map(str::to_owned))
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
            ": \"".len() + QUOTE_CHARS + "…\"".chars().count()
        );
        let q = e.quote(format!(r#"{{"error":{{"message":"bad key {key}"}}}}"#).as_bytes());
        assert_eq!(q, ": \"bad key [key]\"");
        let debug = format!("{e:?}");
        assert!(!debug.contains(key), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }
}
