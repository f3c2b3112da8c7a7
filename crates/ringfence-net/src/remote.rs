//! Why a call to a remote service failed — a fetched page, a search or images API: a kind
//! the caller maps to its own error kinds, and a message written for the model (what
//! happened, and what to do).

/// See the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct WebError {
    pub kind: WebErrorKind,
    pub message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebErrorKind {
    /// The URL or query is malformed.
    Invalid,
    /// The SSRF guard, the operator's domain policy or robots.txt refused it.
    Refused,
    /// The content is of a type that cannot be rendered (binary).
    Unsupported,
    /// Too slow: the connect or whole-request timeout passed.
    Timeout,
    /// The server or provider answered with an error, or could not be reached.
    Upstream,
    /// Nothing is configured to do this (no search provider, no API key).
    NotConfigured,
}

impl WebError {
    pub fn new(kind: WebErrorKind, message: impl Into<String>) -> WebError {
        WebError {
            kind,
            message: message.into(),
        }
    }
}
