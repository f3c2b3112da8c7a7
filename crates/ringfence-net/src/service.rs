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
use serde::de::DeserializeOwned;

use crate::api::{ApiFailure, ApiKey, Reply, RetryPolicy, human_secs};
use crate::remote::{WebError, WebErrorKind};

/// The most of a response read (an image as base64 is a few MiB; this stops a runaway).
const MAX_BODY: usize = 64 << 20;

/// One configured service: its name for messages, the shared API client
/// (`ringfence_net::Api`: timeouts, retries, the key) and where the key comes from (to say
/// how to fix it).
pub struct Service {
    /// The service as messages name it (`brave`, `the images API`).
    pub name: String,
    pub client: reqwest::Client,
    net: crate::api::Api,
    /// Where the key is read from (`BRAVE_API_KEY`, `web.search.api_key`), for messages.
    pub key_source: String,
}

/// A client for an operator-configured API could not be made: its URL is unusable, or the
/// HTTP client failed to start.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("{0}")]
    Url(String),
    #[error(transparent)]
    Client(#[from] crate::ClientError),
}

impl Service {
    pub fn new(
        name: impl Into<String>,
        timeout: Duration,
        retry: RetryPolicy,
        key: Option<String>,
        key_source: impl Into<String>,
    ) -> Result<Service, SetupError> {
        let net = crate::api::Api::new(timeout, retry, MAX_BODY, ApiKey::new(key))?;
        Ok(Service {
            name: name.into(),
            client: net.client.clone(),
            net,
            key_source: key_source.into(),
        })
    }

    /// The key, if one is configured.
    pub fn key_if_any(&self) -> Option<&str> {
        self.net.key.as_ref().map(ApiKey::expose)
    }

    /// The key, or the error saying it is missing and where to put it.
    pub fn key(&self) -> Result<&str, WebError> {
        self.key_if_any().ok_or_else(|| {
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
        self.net
            .send(&self.name, make)
            .await
            .map_err(|f| self.failure(f))
    }

    /// A call that got no usable response, worded for the model.
    fn failure(&self, failure: ApiFailure) -> WebError {
        match failure {
            ApiFailure::RateLimited {
                attempts,
                retry_after,
            } => {
                let when = match retry_after {
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
            ApiFailure::Timeout => WebError::new(
                WebErrorKind::Timeout,
                format!(
                    "{} did not answer within {}; try again later",
                    self.name,
                    human_secs(self.net.timeout)
                ),
            ),
            ApiFailure::Connect(detail) => WebError::new(
                WebErrorKind::Upstream,
                format!(
                    "cannot reach {}: {detail}; check that it is up and the configured URL is right",
                    self.name
                ),
            ),
            ApiFailure::Transport(detail) => WebError::new(
                WebErrorKind::Upstream,
                format!("the request to {} failed: {detail}", self.name),
            ),
            ApiFailure::TooLarge { limit } => WebError::new(
                WebErrorKind::Upstream,
                format!(
                    "{} answered with more than {} MiB; check that the configured URL points at it",
                    self.name,
                    limit >> 20
                ),
            ),
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
            let fix = if self.net.key.is_some() {
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
            // serde quotes the value it could not read: keyless, and not all of it.
            let why: String = self.scrub(&e.to_string()).chars().take(200).collect();
            WebError::new(
                WebErrorKind::Upstream,
                format!(
                    "{} answered with something that is not its documented JSON ({why}); check that the configured URL points at it",
                    self.name
                ),
            )
        })
    }

    /// `: "<start of the body>"` when the body has text worth quoting, with the key removed.
    pub fn quoted(&self, reply: &Reply) -> String {
        self.net.quote(&reply.body)
    }

    /// `text` without the key in it.
    pub fn scrub(&self, text: &str) -> String {
        self.net.scrub(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_never_appears_in_a_quote() {
        let api = Service::new(
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
}
