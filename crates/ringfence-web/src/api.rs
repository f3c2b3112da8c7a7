//! Calls to the HTTP APIs an operator configured — search providers, the images API. They
//! are trusted as configured (the SSRF guard is for addresses the model or fetched content
//! chose), so requests go straight through `ringfence_net::client`.
//!
//! What every such call shares lives here: rate limits (HTTP 429) retried a bounded number
//! of times, honouring `Retry-After` within a cap; transport failures and timeouts turned
//! into [`WebError`]s that name the service; refused keys (401/403) reported with the
//! variable that holds the key; and the key itself kept out of every message — it is sent
//! only in a header or body, and scrubbed from any response text quoted in an error.

use std::time::Duration;

use reqwest::StatusCode;
use ringfence_tools::web::{WebError, WebErrorKind};
use serde::de::DeserializeOwned;

/// How many characters of an error response are quoted in a message.
const QUOTE_CHARS: usize = 300;

/// How rate limits are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (so `2` means at most three requests).
    pub retries: u32,
    /// The wait before the first retry when the service gives no `Retry-After`; doubled for
    /// each further retry.
    pub backoff: Duration,
    /// The longest wait before a retry. A `Retry-After` asking for more is not waited for:
    /// the call fails at once, saying when to try again.
    pub max_wait: Duration,
}

impl Default for RetryPolicy {
    /// Two retries, 1 s then 2 s apart, waiting at most 10 s for a `Retry-After`.
    fn default() -> RetryPolicy {
        RetryPolicy {
            retries: 2,
            backoff: Duration::from_secs(1),
            max_wait: Duration::from_secs(10),
        }
    }
}

/// One configured service: its name for messages, an HTTP client with its timeouts, its key
/// (to scrub it from messages) and where the key comes from (to say how to fix it).
pub(crate) struct Api {
    /// The service as messages name it (`brave`, `the images API`).
    pub name: String,
    pub client: reqwest::Client,
    /// The whole-request timeout the client was made with (for the timeout message).
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub key: Option<String>,
    /// Where the key is read from (`BRAVE_API_KEY`, `web.search.api_key`), for messages.
    pub key_source: String,
}

/// A response other than a rate limit: its status and body.
pub(crate) struct Reply {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

/// A client for an operator-configured API could not be made: its URL is unusable, or the
/// HTTP client failed to start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    Url(String),
    #[error(transparent)]
    Client(#[from] ringfence_net::ClientError),
}

impl Api {
    pub fn new(
        name: impl Into<String>,
        timeout: Duration,
        retry: RetryPolicy,
        key: Option<String>,
        key_source: impl Into<String>,
    ) -> Result<Api, SetupError> {
        let client = ringfence_net::client(&ringfence_net::Outbound {
            connect_timeout: timeout.min(Duration::from_secs(10)),
            timeout,
        })?;
        Ok(Api {
            name: name.into(),
            client,
            timeout,
            retry,
            key: key.filter(|k| !k.is_empty()),
            key_source: key_source.into(),
        })
    }

    /// The key, or the error saying it is missing and where to put it.
    pub fn key(&self) -> Result<&str, WebError> {
        self.key.as_deref().ok_or_else(|| {
            WebError::new(
                WebErrorKind::NotConfigured,
                format!(
                    "{} needs an API key and none is configured: an operator sets {}",
                    self.name, self.key_source
                ),
            )
        })
    }

    /// Sends the request `make` builds (once per attempt), retrying rate limits as the
    /// policy says. Returns any other response; transport failures become errors.
    pub async fn send(
        &self,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<Reply, WebError> {
        let mut attempt = 0;
        loop {
            let response = make().send().await.map_err(|e| self.transport(e))?;
            let status = response.status();
            if status != StatusCode::TOO_MANY_REQUESTS {
                let body = response
                    .bytes()
                    .await
                    .map_err(|e| self.transport(e))?
                    .to_vec();
                return Ok(Reply { status, body });
            }
            let asked = ringfence_net::retry_after(response.headers());
            let wait = asked.unwrap_or(self.retry.backoff * 2u32.saturating_pow(attempt));
            if attempt >= self.retry.retries || wait > self.retry.max_wait {
                return Err(self.rate_limited(attempt + 1, asked));
            }
            tracing::debug!(service = %self.name, attempt, wait_ms = wait.as_millis() as u64, "rate limited; retrying");
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    fn rate_limited(&self, attempts: u32, asked: Option<Duration>) -> WebError {
        let when = match asked {
            Some(d) => format!("it asks to wait {}", human_secs(d)),
            None => "try again in a minute".to_owned(),
        };
        WebError::new(
            WebErrorKind::Upstream,
            format!(
                "rate limited: {} answered HTTP 429 (too many requests) {} time{}; {when}, or an operator raises the plan's limit",
                self.name,
                attempts,
                if attempts == 1 { "" } else { "s" }
            ),
        )
    }

    /// A request that produced no response.
    fn transport(&self, e: reqwest::Error) -> WebError {
        // The URL is the operator's, but it is left out anyway: messages name the service.
        let e = e.without_url();
        if e.is_timeout() {
            WebError::new(
                WebErrorKind::Timeout,
                format!(
                    "{} did not answer within {}; try again later",
                    self.name,
                    human_secs(self.timeout)
                ),
            )
        } else if e.is_connect() {
            WebError::new(
                WebErrorKind::Upstream,
                format!(
                    "cannot reach {}: {}; check that it is up and the configured URL is right",
                    self.name,
                    self.scrub(&ringfence_net::error_chain(&e))
                ),
            )
        } else {
            WebError::new(
                WebErrorKind::Upstream,
                format!(
                    "the request to {} failed: {}",
                    self.name,
                    self.scrub(&ringfence_net::error_chain(&e))
                ),
            )
        }
    }

    /// The common refusals of a non-success reply: a refused key (401/403) and any other
    /// error status, quoting the start of the response. `Ok` for a success.
    pub fn check(&self, reply: &Reply) -> Result<(), WebError> {
        let status = reply.status;
        if status.is_success() {
            return Ok(());
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            let fix = if self.key.is_some() {
                format!(
                    "check the key in {} (wrong, expired or without access to this API)",
                    self.key_source
                )
            } else {
                format!("an operator sets a key in {}", self.key_source)
            };
            return Err(WebError::new(
                WebErrorKind::NotConfigured,
                format!(
                    "{} refused the request (HTTP {}): {}{}",
                    self.name,
                    status.as_u16(),
                    fix,
                    self.quoted(reply)
                ),
            ));
        }
        Err(WebError::new(
            WebErrorKind::Upstream,
            format!(
                "{} answered HTTP {}{}",
                self.name,
                status.as_u16(),
                self.quoted(reply)
            ),
        ))
    }

    /// The reply's body as `T`; a body that is not (the service changed its format, or the
    /// URL points at something else) is an error naming the service.
    pub fn json<T: DeserializeOwned>(&self, reply: &Reply) -> Result<T, WebError> {
        serde_json::from_slice(&reply.body).map_err(|e| {
            WebError::new(
                WebErrorKind::Upstream,
                format!(
                    "{} answered with something that is not its documented JSON ({e}); check that the configured URL points at it",
                    self.name
                ),
            )
        })
    }

    /// `: "<start of the body>"` when the body has text worth quoting (an API's own error
    /// message is usually the best explanation), with the key removed.
    pub fn quoted(&self, reply: &Reply) -> String {
        let text = String::from_utf8_lossy(&reply.body);
        let detail = serde_json::from_slice::<serde_json::Value>(&reply.body)
            .ok()
            .and_then(|v| api_message(&v))
            .unwrap_or_else(|| text.trim().to_owned());
        // The key is removed before the quote is cut, so no part of it can survive the cut.
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

    /// `text` without the key in it.
    pub fn scrub(&self, text: &str) -> String {
        match &self.key {
            Some(key) if key.len() >= 4 => text.replace(key.as_str(), "[key]"),
            _ => text.to_owned(),
        }
    }
}

/// The message in an API's JSON error body: `{"error": {"message": …}}`, `{"error": "…"}`,
/// `{"detail": {"error": …}}`, `{"message": …}`, `{"detail": "…"}`.
pub(crate) fn api_message(v: &serde_json::Value) -> Option<String> {
    let error = v.get("error");
    let candidates = [
        error.and_then(|e| e.get("message")),
        error.and_then(|e| e.get("detail")),
        error,
        v.get("detail").and_then(|d| d.get("error")),
        v.get("detail"),
        v.get("message"),
    ];
    candidates
        .into_iter()
        .flatten()
        .find_map(|m| m.as_str().map(str::to_owned))
}

/// `3 s`, `2 min 5 s`.
fn human_secs(d: Duration) -> String {
    let secs = d.as_secs_f64().ceil() as u64;
    if secs < 60 {
        format!("{secs} s")
    } else if secs.is_multiple_of(60) {
        format!("{} min", secs / 60)
    } else {
        format!("{} min {} s", secs / 60, secs % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_messages_are_found_in_the_usual_shapes() {
        let m = |s: &str| api_message(&serde_json::from_str(s).unwrap());
        assert_eq!(m(r#"{"error":{"message":"bad"}}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"error":"bad"}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"detail":{"error":"bad"}}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"message":"bad"}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"results":[]}"#), None);
    }

    #[test]
    fn the_key_never_appears_in_a_quote() {
        let api = Api::new(
            "brave",
            Duration::from_secs(1),
            RetryPolicy::default(),
            Some("sk-secret-123".into()),
            "BRAVE_API_KEY",
        )
        .unwrap();
        let reply = Reply {
            status: StatusCode::UNAUTHORIZED,
            body: br#"{"error":{"message":"invalid token sk-secret-123"}}"#.to_vec(),
        };
        let err = api.check(&reply).unwrap_err();
        assert_eq!(err.kind, WebErrorKind::NotConfigured);
        assert!(!err.message.contains("sk-secret-123"), "{}", err.message);
        assert!(err.message.contains("BRAVE_API_KEY"), "{}", err.message);
        assert!(
            err.message.contains("invalid token [key]"),
            "{}",
            err.message
        );
    }

    #[test]
    fn waits_read_as_people_write_them() {
        assert_eq!(human_secs(Duration::from_millis(200)), "1 s");
        assert_eq!(human_secs(Duration::from_secs(120)), "2 min");
        assert_eq!(human_secs(Duration::from_secs(125)), "2 min 5 s");
    }
}
