//! Sessions several instances share: with a [`SessionDirectory`] (the binary's PostgreSQL
//! tables), any instance serves any request of an MCP session.
//!
//! - **Who owns a session** is recorded there when the `initialize` answer names it; an
//!   instance that does not know a session id asks the directory, and serves the request if
//!   it belongs to the sender (else 404, as for any unknown session).
//! - **The session itself** is re-created from the client's `initialize` parameters, which
//!   rmcp stores after the handshake (`SessionStore`) and replays on an instance that has
//!   not seen the session — the client never re-initialises.
//! - **Server-sent events** are appended to the directory before they are sent (rmcp's
//!   `EventStore`), so a client whose stream broke resumes it with `Last-Event-ID` on any
//!   instance: the events after that id are replayed, then the stream follows new ones as
//!   any instance appends them (woken by the directory's announcements, else polled; a
//!   request's stream ends with its answer). Where the directory is shared, an instance's
//!   first event stream of a session is such a resumption from the session's first event
//!   (the admission gate asks for it), so what was sent before the stream opened arrives.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::ServerJsonRpcMessage;
use rmcp::transport::streamable_http_server::session::{
    EventId, EventStore, EventStoreError, EventStream, ServerSseMessage, SessionState,
    SessionStore, SessionStoreError,
};
use serde::{Deserialize, Serialize};

/// Where shared sessions and their events are kept. Calls block (they are run off the
/// async workers).
pub trait SessionDirectory: Send + Sync + std::fmt::Debug + 'static {
    /// Records session `id`'s transport state.
    fn save_state(&self, id: &str, state: &str) -> std::io::Result<()>;
    /// Records `user` as the owner of session `id` (the first owner stays).
    fn set_owner(&self, id: &str, user: &str) -> std::io::Result<()>;
    /// Session `id`: its owner and state, as far as they are recorded.
    fn session(&self, id: &str) -> std::io::Result<Option<(Option<String>, Option<String>)>>;
    /// Forgets session `id`.
    fn remove(&self, id: &str) -> std::io::Result<()>;
    /// The sessions this instance holds are alive; forgets what nobody held for long.
    fn keep(&self, alive: &[String]) -> std::io::Result<()>;
    /// Appends an event to `stream`; returns its number (increasing over all streams).
    fn append_event(&self, stream: &str, event: &str) -> std::io::Result<i64>;
    /// The events of `stream` after number `after`, in order.
    fn events_after(&self, stream: &str, after: i64) -> std::io::Result<Vec<(i64, String)>>;
    /// Where a standalone stream of `session` opened without `Last-Event-ID` starts: 0 (its
    /// first event) for the session's first such stream — what the session sent before it
    /// opened must arrive — and the stream's latest event for later ones (as a new stream
    /// starts with what comes next).
    fn stream_start(&self, session: &str, stream: &str) -> std::io::Result<i64>;
    /// Announcements of the streams events are appended to, by any instance (an empty one
    /// when some may have been missed); `None`: resumed streams look for new events
    /// every [`FOLLOW_EVERY`].
    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }
}

/// Runs `work` off the async workers.
pub(super) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(std::io::Error::other)?
}

/// rmcp's session store over the directory.
#[derive(Debug)]
pub(super) struct SharedSessions(pub(super) Arc<dyn SessionDirectory>);

#[async_trait::async_trait]
impl SessionStore for SharedSessions {
    async fn load(&self, session_id: &str) -> Result<Option<SessionState>, SessionStoreError> {
        let (dir, id) = (self.0.clone(), session_id.to_owned());
        let Some((_, Some(state))) = blocking(move || dir.session(&id)).await? else {
            return Ok(None);
        };
        Ok(Some(serde_json::from_str(&state)?))
    }

    async fn store(&self, session_id: &str, state: &SessionState) -> Result<(), SessionStoreError> {
        let (dir, id) = (self.0.clone(), session_id.to_owned());
        let state = serde_json::to_string(state)?;
        blocking(move || dir.save_state(&id, &state)).await?;
        Ok(())
    }

    async fn delete(&self, session_id: &str) -> Result<(), SessionStoreError> {
        let (dir, id) = (self.0.clone(), session_id.to_owned());
        blocking(move || dir.remove(&id)).await?;
        Ok(())
    }
}

/// An event as the directory keeps it.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<ServerJsonRpcMessage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_ms: Option<u64>,
}

/// The stream a session's messages between requests go out on (rmcp names it so).
pub(super) fn standalone_stream(session: &str) -> String {
    format!("{session}:common")
}

/// The session whose standalone stream `stream` is.
fn standalone_of(stream: &str) -> Option<&str> {
    stream.strip_suffix(":common")
}

/// The id a client sees for event `n` of `stream`. It names the stream, so a resumption
/// needs no lookup and reaches only a stream whose name the client holds: its session's
/// standalone stream (`n@session`; the admission gate checks that the session is the one
/// the request names) or a request's stream (`n/stream`, a random name only the client
/// that made the request was given). The `/` is how the gate tells a request's stream, as
/// with rmcp's own ids.
fn event_id(n: i64, stream: &str) -> EventId {
    match standalone_of(stream) {
        Some(session) => format!("{n}@{session}"),
        None => format!("{n}/{stream}"),
    }
}

/// The event number and stream a `Last-Event-ID` names (a request's stream is never a
/// standalone one: such an id is no id of ours).
fn parse_event_id(id: &str) -> Option<(i64, String)> {
    if let Some((n, stream)) = id.split_once('/') {
        if stream.is_empty() || standalone_of(stream).is_some() {
            return None;
        }
        return Some((n.parse().ok()?, stream.to_owned()));
    }
    let (n, session) = id.split_once('@')?;
    Some((n.parse().ok()?, standalone_stream(session)))
}

/// Whether `last` (a `Last-Event-ID`) may be resumed in session `session`: it names a
/// request's stream, or this session's standalone stream (an id that is none of ours may
/// not).
pub(super) fn resumable_in(last: &str, session: &str) -> bool {
    parse_event_id(last)
        .is_some_and(|(_, stream)| standalone_of(&stream).is_none_or(|s| s == session))
}

/// The `Last-Event-ID` that opens session `session`'s standalone stream after event `n`
/// (0: from its start).
pub(super) fn standalone_from(n: i64, session: &str) -> String {
    event_id(n, &standalone_stream(session))
}

/// How often a resumed stream looks for new events, without announcements.
const FOLLOW_EVERY: Duration = Duration::from_millis(250);
/// With announcements, how often it looks all the same (one lost is then late, not lost).
const FOLLOW_FALLBACK: Duration = Duration::from_secs(5);
/// A request's resumed stream that gets nothing new for this long ends (the instance that
/// ran the call is gone; the client may call again).
const REQUEST_STREAM_QUIET: Duration = Duration::from_secs(60);

/// rmcp's event store over the directory.
#[derive(Debug)]
pub(super) struct SharedEvents(pub(super) Arc<dyn SessionDirectory>);

#[async_trait::async_trait]
impl EventStore for SharedEvents {
    async fn store_event(
        &self,
        stream_id: &str,
        event: &ServerSseMessage,
    ) -> Result<EventId, EventStoreError> {
        let stored = serde_json::to_string(&Stored {
            message: event.message.as_deref().cloned(),
            retry_ms: event.retry.map(|r| r.as_millis() as u64),
        })?;
        let (dir, stream) = (self.0.clone(), stream_id.to_owned());
        let n = blocking(move || dir.append_event(&stream, &stored)).await?;
        Ok(event_id(n, stream_id))
    }

    async fn replay_events_after(
        &self,
        last_event_id: &str,
    ) -> Result<EventStream, EventStoreError> {
        let (after, stream) = parse_event_id(last_event_id).ok_or_else(|| {
            format!("Last-Event-ID {last_event_id:?} is not an event id of this server")
        })?;
        Ok(Box::pin(follow(self.0.clone(), stream, after)))
    }
}

/// The events of `stream` after `after`: those kept, then new ones as they are appended.
/// A request's stream ends with its answer (or after [`REQUEST_STREAM_QUIET`]).
fn follow(
    dir: Arc<dyn SessionDirectory>,
    stream: String,
    after: i64,
) -> impl futures_util::Stream<Item = ServerSseMessage> + Send + Sync + 'static {
    struct State {
        dir: Arc<dyn SessionDirectory>,
        stream: String,
        after: i64,
        pending: std::collections::VecDeque<ServerSseMessage>,
        quiet_since: tokio::time::Instant,
        done: bool,
        /// Subscribed before the first look, so nothing appended after it goes unheard.
        heard: Option<tokio::sync::broadcast::Receiver<String>>,
        /// When the session of a standalone stream was last seen to exist.
        session_checked: tokio::time::Instant,
    }
    let state = State {
        heard: dir.subscribe(),
        session_checked: tokio::time::Instant::now(),
        dir,
        stream,
        after,
        pending: Default::default(),
        quiet_since: tokio::time::Instant::now(),
        done: false,
    };
    futures_util::stream::unfold(state, |mut s| async move {
        loop {
            if let Some(event) = s.pending.pop_front() {
                return Some((event, s));
            }
            if s.done {
                return None;
            }
            let (dir, stream, after) = (s.dir.clone(), s.stream.clone(), s.after);
            let events = match blocking(move || dir.events_after(&stream, after)).await {
                Ok(events) => events,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the shared event log; ending the resumed stream");
                    return None;
                }
            };
            if events.is_empty() {
                match standalone_of(&s.stream) {
                    None if s.quiet_since.elapsed() >= REQUEST_STREAM_QUIET => return None,
                    // A session ended (or expired) anywhere ends its stream here too.
                    Some(session) if s.session_checked.elapsed() >= FOLLOW_FALLBACK => {
                        let (dir, id) = (s.dir.clone(), session.to_owned());
                        if let Ok(None) = blocking(move || dir.session(&id)).await {
                            return None;
                        }
                        s.session_checked = tokio::time::Instant::now();
                    }
                    _ => {}
                }
                wait_for_news(&mut s.heard, &s.stream).await;
                continue;
            }
            s.quiet_since = tokio::time::Instant::now();
            for (n, text) in events {
                s.after = n;
                let stored: Stored = match serde_json::from_str(&text) {
                    Ok(stored) => stored,
                    Err(e) => {
                        tracing::warn!(error = %e, event = n, "unreadable event in the shared log; skipped");
                        continue;
                    }
                };
                let answer = matches!(
                    stored.message,
                    Some(ServerJsonRpcMessage::Response(_) | ServerJsonRpcMessage::Error(_))
                );
                let id = event_id(n, &s.stream);
                let retry = stored.retry_ms.map(Duration::from_millis);
                let mut event = match stored.message {
                    Some(message) => ServerSseMessage::new(id, message),
                    None => ServerSseMessage::priming(id, retry.unwrap_or_default()),
                };
                event.retry = retry;
                s.pending.push_back(event);
                if answer && standalone_of(&s.stream).is_none() {
                    s.done = true;
                    break;
                }
            }
        }
    })
}

/// Until `stream` (or anything, after a gap) is announced, or the fallback time passes;
/// without announcements, [`FOLLOW_EVERY`].
async fn wait_for_news(heard: &mut Option<tokio::sync::broadcast::Receiver<String>>, stream: &str) {
    let Some(rx) = heard else {
        tokio::time::sleep(FOLLOW_EVERY).await;
        return;
    };
    let until = tokio::time::sleep(FOLLOW_FALLBACK);
    tokio::pin!(until);
    loop {
        tokio::select! {
            _ = &mut until => return,
            got = rx.recv() => match got {
                Ok(s) if s == stream || s.is_empty() => return,
                Ok(_) => {}
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    *heard = None;
                    return;
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_name_the_number_and_the_stream() {
        assert_eq!(event_id(7, "s-1:common"), "7@s-1");
        assert_eq!(event_id(8, "5c0ffee0-uuid"), "8/5c0ffee0-uuid");
        assert_eq!(parse_event_id("7@s-1"), Some((7, "s-1:common".into())));
        assert_eq!(
            parse_event_id("8/5c0ffee0-uuid"),
            Some((8, "5c0ffee0-uuid".into()))
        );
        assert_eq!(parse_event_id("x/1"), None);
        assert_eq!(parse_event_id("7"), None);
        // A standalone stream named in the request form is no id of ours.
        assert_eq!(parse_event_id("0/s-1:common"), None);
        assert!(resumable_in("7@s-1", "s-1"));
        assert!(!resumable_in("7@s-2", "s-1"));
        assert!(resumable_in("8/5c0ffee0-uuid", "s-1"));
        assert!(!resumable_in("0/s-2:common", "s-1"));
        assert!(!resumable_in("garbage", "s-1"));
        assert_eq!(standalone_from(0, "s-1"), "0@s-1");
        assert_eq!(standalone_from(12, "s-1"), "12@s-1");
    }

    #[test]
    fn stored_messages_come_back_as_they_went() {
        let messages = [
            r#"{"jsonrpc":"2.0","id":3,"result":{"content":[{"type":"text","text":"hi"}],"isError":false}}"#,
            r#"{"jsonrpc":"2.0","id":4,"result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"roots/list"}"#,
            r#"{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"bad"}}"#,
        ];
        for m in messages {
            let message: ServerJsonRpcMessage = serde_json::from_str(m).unwrap();
            let text = serde_json::to_string(&Stored {
                message: Some(message),
                retry_ms: None,
            })
            .unwrap();
            let back: Stored = serde_json::from_str(&text).unwrap();
            let again: serde_json::Value =
                serde_json::to_value(back.message.as_ref().unwrap()).unwrap();
            assert_eq!(
                again,
                serde_json::from_str::<serde_json::Value>(m).unwrap(),
                "{m}"
            );
        }
    }
}
