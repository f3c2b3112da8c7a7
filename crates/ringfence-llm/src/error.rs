//! What can go wrong talking to a model. Every message names the endpoint (its base URL,
//! credentials in it removed) and says what would fix it; none holds the key.

use std::time::Duration;

/// A chat request that produced no usable answer, or a model that could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// The provider needs a key and the variable that should hold it is unset or empty.
    #[error(
        "{endpoint} needs an API key and the environment variable {var} is not set: set {var} to the key, or name the variable that holds it in api_key_env"
    )]
    NoKey {
        /// The variable the key was looked for in.
        var: String,
        /// The endpoint that needs it.
        endpoint: String,
    },
    /// The server refused the key (HTTP 401 or 403). The message names the variable that
    /// holds the key and quotes the server's reason.
    #[error("{message}")]
    Refused {
        /// 401 or 403.
        status: u16,
        /// What happened and how to fix it.
        message: String,
    },
    /// HTTP 429 after every retry the policy allows, or with a `Retry-After` longer than it
    /// waits for.
    #[error("rate limited: {endpoint} answered HTTP 429 (too many requests) {attempts} time{s}; {when}", s = if *attempts == 1 { "" } else { "s" }, when = wait_advice(*retry_after))]
    RateLimited {
        /// The endpoint.
        endpoint: String,
        /// How many requests were answered 429.
        attempts: u32,
        /// The wait the server asked for last, if it said.
        retry_after: Option<Duration>,
    },
    /// The server answered with an error status (other than 401, 403 and 429).
    #[error("{endpoint} answered HTTP {status}{quote}")]
    Http {
        /// The endpoint.
        endpoint: String,
        /// The status.
        status: u16,
        /// `: "<start of the body>"` (at most 300 characters, the key removed), or empty.
        quote: String,
    },
    /// No answer came: the connection failed or broke.
    #[error(
        "the request to {endpoint} failed: {detail}; check that the server is up and the URL is right"
    )]
    Transport {
        /// The endpoint.
        endpoint: String,
        /// The transport's own explanation.
        detail: String,
    },
    /// The answer was not the API's documented JSON (or lacked what every answer holds).
    #[error(
        "{endpoint} answered with something that is not the expected API response ({reason}){quote}; check that the URL points at the right API"
    )]
    BadResponse {
        /// The endpoint.
        endpoint: String,
        /// What was wrong with it.
        reason: String,
        /// `: "<start of the body>"` (at most 300 characters, the key removed), or empty.
        quote: String,
    },
    /// No whole answer came within the request timeout.
    #[error("{endpoint} did not answer within {} s; try again, or with a smaller request", after.as_secs_f64().ceil())]
    Timeout {
        /// The endpoint.
        endpoint: String,
        /// The timeout.
        after: Duration,
    },
    /// The model could not be made: the base URL is unusable, the key cannot be sent in a
    /// header, or the HTTP client failed to start.
    #[error("{0}")]
    Setup(String),
}

/// What to tell someone who was rate limited.
fn wait_advice(asked: Option<Duration>) -> String {
    match asked {
        Some(d) => format!(
            "it asks to wait {} s; try again then, or raise the plan's limit",
            d.as_secs_f64().ceil()
        ),
        None => "try again in a minute, or raise the plan's limit".to_owned(),
    }
}
