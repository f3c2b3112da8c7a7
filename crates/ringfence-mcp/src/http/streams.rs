//! Which MCP sessions have an event stream (`GET /mcp`) open now: the only way anything
//! the server says between requests reaches an HTTP client. A session without one is not
//! counted as reachable, so what falls due waits for a client that can hear it.
//!
//! A quiet session would be ended after a few idle minutes (rmcp's session keep-alive, the
//! gate's idle streams), though its client is still listening: a session that is told
//! things pings its client while its stream is open, often enough to stay.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The longest wait between two pings (below rmcp's 5-minute session keep-alive).
const MAX_PING_EVERY: Duration = Duration::from_secs(240);

/// Open event streams per MCP session id.
#[derive(Debug, Default)]
pub(crate) struct EventStreams {
    open: Mutex<HashMap<String, usize>>,
    /// How often a session that is told things pings its client.
    ping_every: Option<Duration>,
}

/// What a session's server may ask later of its client's event streams.
pub(crate) struct StreamWatch {
    /// Whether a stream of the session is open now.
    pub(crate) open: Arc<dyn Fn() -> bool + Send + Sync>,
    /// How often to ping the client while it is, to keep the session and stream alive.
    pub(crate) ping_every: Duration,
}

/// Counts one open stream until dropped (with the response body).
pub(crate) struct StreamOpen {
    streams: Arc<EventStreams>,
    session: String,
}

impl Drop for StreamOpen {
    fn drop(&mut self) {
        let mut open = self.streams.lock();
        if let Some(n) = open.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.session);
            }
        }
    }
}

impl EventStreams {
    /// Streams closed after `stream_idle` without traffic: pings come well before.
    pub(crate) fn new(stream_idle: Option<Duration>) -> EventStreams {
        EventStreams {
            open: Mutex::default(),
            ping_every: Some(
                stream_idle
                    .map(|d| (d * 4 / 5).max(Duration::from_secs(1)))
                    .unwrap_or(MAX_PING_EVERY)
                    .min(MAX_PING_EVERY),
            ),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a stream of `session` as open until the guard is dropped.
    pub(crate) fn opened(self: &Arc<Self>, session: &str) -> StreamOpen {
        *self.lock().entry(session.to_owned()).or_default() += 1;
        StreamOpen {
            streams: self.clone(),
            session: session.to_owned(),
        }
    }

    pub(crate) fn is_open(&self, session: &str) -> bool {
        self.lock().contains_key(session)
    }
}

/// For a request that came over HTTP in an MCP session: whether that session has an event
/// stream open, asked at any later time. `None` for anything else (stdio; no session id).
pub(crate) fn event_stream_check(extensions: &rmcp::model::Extensions) -> Option<StreamWatch> {
    let parts = extensions.get::<axum::http::request::Parts>()?;
    let streams = parts.extensions.get::<Arc<EventStreams>>()?.clone();
    let session = parts
        .headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())?
        .to_owned();
    let ping_every = streams.ping_every.unwrap_or(MAX_PING_EVERY);
    Some(StreamWatch {
        open: Arc::new(move || streams.is_open(&session)),
        ping_every,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_open_while_any_of_its_streams_is() {
        let streams = Arc::new(EventStreams::default());
        assert!(!streams.is_open("s1"));
        let a = streams.opened("s1");
        let b = streams.opened("s1");
        let other = streams.opened("s2");
        drop(a);
        assert!(streams.is_open("s1"));
        drop(b);
        assert!(!streams.is_open("s1"));
        assert!(streams.is_open("s2"));
        drop(other);
        assert!(streams.lock().is_empty());
    }
}
