//! Calls to an HTTP API an operator configured (a model provider, a search provider, the
//! images API): what every such call shares, whichever crate makes it. Rate limits (HTTP
//! 429) are retried a bounded number of times, honouring `Retry-After` within a cap;
//! responses are read up to a size; failures are sorted into what a caller words for its own
//! users ([`ApiFailure`]); and the key is kept out of every message — [`ApiKey`] never shows
//! in `Debug`, and [`Api::scrub`] and [`Api::quote`] take it out of any text quoted back.

use std::time::Duration;

use reqwest::StatusCode;

use crate::{ClientError, Outbound};

/// How many characters of an error response are quoted in a message.
pub const QUOTE_CHARS: usize = 300;

/// How rate limits (HTTP 429) are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (`2`: at most three requests).
    pub retries: u32,
    /// The wait before the first retry when the service sends no `Retry-After`; doubled for
    /// each further one.
    pub backoff: Duration,
    /// The longest wait. A `Retry-After` asking for more is not waited for: the call fails
    /// at once, saying how long the service asked for.
    pub max_wait: Duration,
}

impl RetryPolicy {
    /// How long to wait before retrying a rate-limited attempt (`attempt` counts from 0),
    /// `asked` being the service's `Retry-After`; `None`: give up now, without waiting —
    /// every retry is spent, or the service asks for longer than `max_wait`.
    pub fn wait_before_retry(&self, attempt: u32, asked: Option<Duration>) -> Option<Duration> {
        let wait = asked.unwrap_or(self.backoff * 2u32.saturating_pow(attempt));
        (attempt < self.retries && wait <= self.max_wait).then_some(wait)
    }
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
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

impl ApiKey {
    /// `None` for an absent or empty key.
    pub fn new(key: Option<String>) -> Option<ApiKey> {
        key.filter(|k| !k.is_empty()).map(ApiKey)
    }

    /// The key itself, to put in a request.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `prefix` and the key as a header value, marked sensitive (so HTTP machinery does not
    /// log it); `None` when the key holds what a header cannot carry (a line break).
    pub fn header(&self, prefix: &str) -> Option<reqwest::header::HeaderValue> {
        let mut value =
            reqwest::header::HeaderValue::from_str(&format!("{prefix}{}", self.0)).ok()?;
        value.set_sensitive(true);
        Some(value)
    }
}

/// A response other than a rate limit: its status and body.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Vec<u8>,
}

/// Why a call got no usable response, for the caller to word. Details never hold the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiFailure {
    /// HTTP 429 after `attempts` requests; `retry_after` is what the service last asked for.
    RateLimited {
        attempts: u32,
        retry_after: Option<Duration>,
    },
    /// No answer within the client's timeout.
    Timeout,
    /// No connection could be made.
    Connect(String),
    /// The request or the reading of its response failed otherwise.
    Transport(String),
    /// The response was larger than the caller reads.
    TooLarge { limit: usize },
}

/// One configured service: a client with its timeouts, how it retries, the most of a
/// response it reads, and its key (to scrub it from messages).
#[derive(Debug, Clone)]
pub struct Api {
    pub client: reqwest::Client,
    /// The whole-request timeout the client was made with.
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub max_body: usize,
    pub key: Option<ApiKey>,
}

impl Api {
    /// A client with `timeout` for a whole request (and at most 10 s to connect).
    pub fn new(
        timeout: Duration,
        retry: RetryPolicy,
        max_body: usize,
        key: Option<ApiKey>,
    ) -> Result<Api, ClientError> {
        let client = crate::client(&Outbound {
            connect_timeout: timeout.min(Duration::from_secs(10)),
            timeout,
        })?;
        Ok(Api {
            client,
            timeout,
            retry,
            max_body,
            key,
        })
    }

    /// Sends the request `make` builds (once per attempt), retrying rate limits as the
    /// policy says; `service` names it in the log. Any other response is returned, its body
    /// read up to `max_body`.
    pub async fn send(
        &self,
        service: &str,
        make: impl Fn() -> reqwest::RequestBuilder,
    ) -> Result<Reply, ApiFailure> {
        let mut attempt = 0u32;
        loop {
            let started = std::time::Instant::now();
            let response = make().send().await.map_err(|e| self.transport(e))?;
            let status = response.status();
            tracing::debug!(
                service,
                status = status.as_u16(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "API answered"
            );
            if status != StatusCode::TOO_MANY_REQUESTS {
                let body = self.read(response).await?;
                return Ok(Reply { status, body });
            }
            let asked = crate::retry_after(response.headers());
            // Not held across the wait: its connection goes back to the pool.
            drop(response);
            let Some(wait) = self.retry.wait_before_retry(attempt, asked) else {
                return Err(ApiFailure::RateLimited {
                    attempts: attempt + 1,
                    retry_after: asked,
                });
            };
            tracing::debug!(
                service,
                attempt,
                wait_ms = wait.as_millis() as u64,
                "rate limited; retrying"
            );
            tokio::time::sleep(wait).await;
            attempt += 1;
        }
    }

    async fn read(&self, mut response: reqwest::Response) -> Result<Vec<u8>, ApiFailure> {
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(e))? {
            if body.len() + chunk.len() > self.max_body {
                return Err(ApiFailure::TooLarge {
                    limit: self.max_body,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// A request that produced no response. The URL is left out: messages name the service.
    fn transport(&self, e: reqwest::Error) -> ApiFailure {
        let e = e.without_url();
        if e.is_timeout() {
            ApiFailure::Timeout
        } else if e.is_connect() {
            ApiFailure::Connect(self.scrub(&crate::error_chain(&e)))
        } else {
            ApiFailure::Transport(self.scrub(&crate::error_chain(&e)))
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

/// The message in an API's JSON error body: `{"error": {"message": …}}` (OpenAI, Anthropic,
/// Ollama), `{"error": {"detail": …}}`, `{"error": "…"}`, `{"detail": {"error": …}}`,
/// `{"detail": "…"}`, `{"message": …}`.
pub fn api_message(v: &serde_json::Value) -> Option<String> {
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

/// `3 s`, `2 min`, `2 min 5 s`.
pub fn human_secs(d: Duration) -> String {
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

    /// The decision `Api::send` sleeps on: a wait the policy allows, or none (give up now).
    /// A `Retry-After` beyond `max_wait` gives up at the first answer, never waiting.
    #[test]
    fn the_retry_policy_waits_only_what_it_allows() {
        let p = RetryPolicy::default();
        let s = Duration::from_secs;
        assert_eq!(p.wait_before_retry(0, None), Some(s(1)));
        assert_eq!(p.wait_before_retry(1, None), Some(s(2)));
        assert_eq!(p.wait_before_retry(2, None), None, "both retries spent");
        assert_eq!(p.wait_before_retry(0, Some(s(7))), Some(s(7)));
        assert_eq!(p.wait_before_retry(0, Some(s(3600))), None);
        assert_eq!(p.wait_before_retry(0, Some(s(10))), Some(s(10)));
        let none = RetryPolicy {
            retries: 0,
            ..RetryPolicy::default()
        };
        assert_eq!(none.wait_before_retry(0, Some(s(1))), None);
    }

    use super::*;

    fn api(key: &str) -> Api {
        Api::new(
            Duration::from_secs(1),
            RetryPolicy::default(),
            1 << 20,
            ApiKey::new(Some(key.into())),
        )
        .unwrap()
    }

    #[test]
    fn api_messages_are_found_in_the_usual_shapes() {
        let m = |s: &str| api_message(&serde_json::from_str(s).unwrap());
        assert_eq!(m(r#"{"error":{"message":"bad"}}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"error":{"detail":"bad"}}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"error":"bad"}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"detail":{"error":"bad"}}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"detail":"bad"}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"message":"bad"}"#).as_deref(), Some("bad"));
        assert_eq!(m(r#"{"results":[]}"#), None);
    }

    #[test]
    fn quotes_are_cut_and_keyless() {
        let key = "sk-live-0123456789";
        let api = api(key);
        let long = format!("{} {key}", "a".repeat(400));
        let q = api.quote(long.as_bytes());
        assert!(!q.contains(key), "{q}");
        assert_eq!(
            q.chars().count(),
            ": \"".len() + QUOTE_CHARS + "…\"".chars().count()
        );
        let q = api.quote(format!(r#"{{"error":{{"message":"bad key {key}"}}}}"#).as_bytes());
        assert_eq!(q, ": \"bad key [key]\"");
        assert_eq!(api.quote(b"  \n "), "");
        let debug = format!("{api:?}");
        assert!(!debug.contains(key), "{debug}");
        assert!(debug.contains("[redacted]"), "{debug}");
    }

    #[test]
    fn a_key_a_header_cannot_carry_is_refused_without_quoting_it() {
        let bad = ApiKey::new(Some("sk-1\nX-Evil: 1".into())).unwrap();
        assert!(bad.header("Bearer ").is_none());
        let good = ApiKey::new(Some("sk-1".into())).unwrap();
        let header = good.header("Bearer ").unwrap();
        assert!(header.is_sensitive());
        assert_eq!(header.to_str().unwrap(), "Bearer sk-1");
        assert!(ApiKey::new(Some(String::new())).is_none());
    }

    #[test]
    fn waits_read_as_people_write_them() {
        assert_eq!(human_secs(Duration::from_millis(200)), "1 s");
        assert_eq!(human_secs(Duration::from_secs(120)), "2 min");
        assert_eq!(human_secs(Duration::from_secs(125)), "2 min 5 s");
    }
}
