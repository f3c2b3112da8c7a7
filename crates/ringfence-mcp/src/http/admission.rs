//! The gate in front of `/mcp`: authentication first (nothing of a request is read before
//! its sender is known), session ownership, refusing new work while shutting down, per-user
//! limits (rate, calls, event streams, sessions), bounded body reading, and counting the calls
//! in flight until their answers have been sent. And the operator's gate in front of
//! `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::MetricsToken;
use super::auth::Authenticator;
use super::body::{BodyFailure, BodyLimits, Reservation};
use super::limits::{Admitted, Kind, Limiters};
use super::refusal::Refusal;
use super::sessions::{SessionBook, SessionSlot, SessionUse};
use super::shared::{self, SessionDirectory, blocking};
use super::streams::{EventStreams, StreamOpen};
use crate::Metrics;

/// The first protocol version without sessions (SEP-2567): requests naming it, or a later
/// one, in `MCP-Protocol-Version` are stateless.
const STATELESS_PROTOCOL: &str = "2026-07-28";

/// After the last running call of a shutdown, how long clients get to read its answer.
const LINGER: Duration = Duration::from_secs(1);

/// State shared by every request: credentials, limits, session owners, calls in flight.
#[derive(Debug)]
pub(super) struct Gate {
    auth: Authenticator,
    metrics_token: Option<MetricsToken>,
    limiters: Limiters,
    body: BodyLimits,
    /// An event stream that carries nothing for this long is closed.
    stream_idle: Option<Duration>,
    sessions: Arc<SessionBook>,
    /// rmcp's sessions: which are still alive.
    manager: Arc<LocalSessionManager>,
    draining: AtomicBool,
    inflight: AtomicUsize,
    idle: tokio::sync::Notify,
    metrics: Option<Arc<Metrics>>,
    /// Which sessions have an event stream open.
    streams: Arc<EventStreams>,
    /// Sessions several instances share: owners of sessions this instance has not seen.
    directory: Option<Arc<dyn SessionDirectory>>,
}

/// What the gate is made of.
pub(super) struct GateParts {
    pub(super) auth: Authenticator,
    pub(super) metrics_token: Option<MetricsToken>,
    pub(super) limiters: Limiters,
    pub(super) body: BodyLimits,
    pub(super) stream_idle: Option<Duration>,
    pub(super) manager: Arc<LocalSessionManager>,
    pub(super) metrics: Option<Arc<Metrics>>,
    pub(super) directory: Option<Arc<dyn SessionDirectory>>,
}

impl Gate {
    pub(super) fn new(parts: GateParts) -> Gate {
        let sessions = Arc::new(SessionBook::new(parts.limiters.limits().sessions));
        Gate {
            auth: parts.auth,
            metrics_token: parts.metrics_token,
            limiters: parts.limiters,
            body: parts.body,
            stream_idle: parts.stream_idle,
            sessions,
            manager: parts.manager,
            directory: parts.directory,
            draining: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            metrics: parts.metrics,
            streams: Arc::new(EventStreams::new(parts.stream_idle)),
        }
    }

    /// Forgets the owners of sessions rmcp has closed, and the limiters of idle users.
    pub(super) async fn sweep(&self) {
        self.forget_ended_sessions().await;
        self.limiters.forget_idle();
    }

    async fn forget_ended_sessions(&self) {
        let alive: std::collections::HashSet<String> = self
            .manager
            .sessions
            .read()
            .await
            .keys()
            .map(|k| k.to_string())
            .collect();
        self.sessions.retain(&alive);
        if let Some(dir) = self.directory.clone() {
            let alive: Vec<String> = alive.into_iter().collect();
            if let Err(e) = blocking(move || dir.keep(&alive)).await {
                tracing::warn!(error = %e, "cannot mark this instance's sessions alive in the shared store");
            }
        }
    }

    /// Whether session `id` is `user`'s: known here, or — where sessions are shared — known
    /// to the shared store as theirs (then it is counted here from now on, and rmcp
    /// re-creates it from the store). `Err` when the store cannot be asked.
    async fn owns(&self, id: &str, user: &str) -> std::io::Result<bool> {
        if let Some(owner) = self.sessions.owner(id) {
            return Ok(owner == user);
        }
        if self.sessions.is_closing(id) {
            return Ok(false);
        }
        let Some(dir) = self.directory.clone() else {
            return Ok(false);
        };
        let key = id.to_owned();
        match blocking(move || dir.session(&key)).await? {
            Some((Some(owner), Some(_))) if owner == user => {
                self.sessions.adopt(id, user);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Records `user` as the owner of the new session `id` in the shared store, if any,
    /// before its id reaches the client (so every instance knows it from then on).
    async fn share_owner(&self, id: &str, user: &str) {
        let Some(dir) = self.directory.clone() else {
            return;
        };
        let (key, owner) = (id.to_owned(), user.to_owned());
        if let Err(e) = blocking(move || dir.set_owner(&key, &owner)).await {
            tracing::warn!(error = %e, "cannot record the session's owner in the shared store; only this instance will serve it");
        }
    }

    /// A place for a new session of `user`. At the cap, sessions that ended since the last
    /// sweep are forgotten first, so the count is exact; a place is then given while one of
    /// the user's sessions is idle (it makes way once the new session exists). Refused only
    /// when every one of the user's sessions is in use.
    async fn reserve_session(&self, user: &str) -> Result<SessionSlot, Refusal> {
        if let Ok(slot) = self.sessions.reserve(user) {
            return Ok(slot);
        }
        self.forget_ended_sessions().await;
        self.sessions.reserve(user).map_err(|open| {
            tracing::info!(user = %user.escape_debug(), open, "session limit reached, every session in use");
            Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                "sessions",
                format!(
                    "session limit: this user has {open} MCP sessions open, all in use now (each with a request or event stream open), and at most {} are allowed (http.limits.sessions); end one (DELETE) or close one's event stream; retry after 30 s",
                    self.sessions.cap()
                ),
            )
            .setting("http.limits.sessions")
            .retry_after(30)
        })
    }

    /// Ends session `id`, which made way for a new one (already forgotten here and marked
    /// closing, so no request adopts it meanwhile): out of the shared store first, so no
    /// instance restores it, then closed, then its mark dropped.
    async fn end_session(&self, id: &str) {
        use rmcp::transport::streamable_http_server::session::SessionManager;
        tracing::info!(
            "session limit reached: the session unused for longest made way for a new one"
        );
        if let Some(dir) = self.directory.clone() {
            let key = id.to_owned();
            if let Err(e) = blocking(move || dir.remove(&key)).await {
                tracing::warn!(error = %e, "cannot remove an ended session from the shared store");
            }
        }
        let key: Arc<str> = Arc::from(id);
        if let Err(e) = self.manager.close_session(&key).await {
            tracing::debug!(error = %e, "session already gone");
        }
        self.sessions.closed(id);
    }

    /// The first steps of a shutdown: refuse new requests, and let running calls finish
    /// (for `grace` at most).
    pub(super) async fn drain(&self, grace: Duration) {
        self.draining.store(true, Ordering::SeqCst);
        let running = self.inflight.load(Ordering::SeqCst);
        if running == 0 {
            return;
        }
        tracing::info!(
            running,
            grace_s = grace.as_secs_f64(),
            "waiting for running calls to finish"
        );
        let deadline = tokio::time::Instant::now() + grace;
        loop {
            let idle = self.idle.notified();
            if self.inflight.load(Ordering::SeqCst) == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                tracing::warn!(
                    still_running = self.inflight.load(Ordering::SeqCst),
                    "shutdown grace period over; cancelling the calls still running"
                );
                break;
            }
        }
        // Give clients a moment to take their last answers and end their sessions before
        // the event streams close under them.
        tokio::time::sleep(LINGER).await;
    }

    fn begin(self: &Arc<Self>) -> InflightGuard {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        InflightGuard(self.clone())
    }

    fn count_refusal(&self, response: &mut Response) {
        let status = response.status().as_u16();
        if matches!(status, 401 | 403 | 404 | 408 | 413 | 429 | 503) {
            if let Some(m) = &self.metrics {
                m.refused(status);
            }
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
    }
}

/// Counts a request in flight until dropped (when its response body has been sent).
#[derive(Debug)]
struct InflightGuard(Arc<Gate>);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A response body that keeps its request counted (in flight, against its user's calls or
/// streams, against the server's open requests, its body bytes against the buffer budget)
/// until the last byte is sent: a tool call's answer streams after the handler returned. An
/// event stream that carries nothing but keep-alive comments for its idle time is ended.
struct GuardedBody {
    inner: axum::body::Body,
    idle: Option<IdleTimer>,
    ended: bool,
    _inflight: Option<InflightGuard>,
    _admitted: Admitted,
    _reservation: Option<Arc<Reservation>>,
    _stream: Option<StreamOpen>,
    _session_use: Option<SessionUse>,
}

struct IdleTimer {
    after: Duration,
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
}

impl http_body::Body for GuardedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        use std::future::Future as _;
        use std::task::Poll;
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let polled = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        // An SSE comment (`:`) is a keep-alive ping, not activity.
        let active = matches!(&polled, Poll::Ready(Some(Ok(frame)))
            if frame.data_ref().is_some_and(|d| !d.starts_with(b":")));
        if let Some(idle) = &mut this.idle {
            if active {
                let next = tokio::time::Instant::now() + idle.after;
                idle.sleep.as_mut().reset(next);
            } else if polled.is_pending() && idle.sleep.as_mut().poll(cx).is_ready() {
                tracing::debug!(
                    idle_s = idle.after.as_secs(),
                    "closing an idle event stream"
                );
                this.ended = true;
                return Poll::Ready(None);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// In front of `/mcp`. A refusal usually leaves the request body unread, so the connection is
/// closed after it (said in `Connection: close`) rather than reused with stray bytes in it.
pub(super) async fn gate(
    gate: Arc<Gate>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let mut response = admit(gate.clone(), req, next).await;
    gate.count_refusal(&mut response);
    response
}

/// In front of `/metrics`: the operator only (see [`Authenticator::operator`]).
pub(super) async fn operator_gate(
    gate: Arc<Gate>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    match gate.auth.operator(gate.metrics_token.as_ref(), &req) {
        None => next.run(req).await,
        Some(mut refused) => {
            gate.count_refusal(&mut refused);
            refused
        }
    }
}

/// The shared session store could not be asked: a passing state (a database restarting),
/// so the client is told to retry rather than that its session is gone.
fn store_unavailable(e: &std::io::Error) -> Response {
    tracing::warn!(error = %e, "the shared session store is unavailable");
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "store",
        "the session store is unavailable for the moment; retry shortly".into(),
    )
    .retry_after(2)
    .into_response()
}

fn shutting_down() -> Response {
    Refusal::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "shutdown",
        "the server is shutting down; retry against the next instance".into(),
    )
    .retry_after(5)
    .into_response()
}

async fn admit(
    gate: Arc<Gate>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    // Who sends it, before anything else of the request is looked at.
    let user = match gate.auth.authenticate(&mut req).await {
        Ok(user) => user,
        Err(refused) => return refused,
    };

    // A session belongs to the user who opened it; to anyone else it does not exist.
    let session_id = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    // Every session made through this gate has its owner recorded (below), so an id the
    // book does not know is no session of this user's either.
    let owned = match &session_id {
        Some(id) => match gate.owns(id, &user).await {
            Ok(owned) => owned,
            Err(e) => return store_unavailable(&e),
        },
        None => true,
    };
    if !owned {
        tracing::warn!(user = %user.escape_debug(), "request for another user's MCP session refused");
        return Refusal::new(StatusCode::NOT_FOUND, "session", "session not found".into())
            .into_response();
    }
    // The session is in use until this request's answer (or stream) ends. One ended since
    // the ownership check (it made way for a new one) is gone.
    let session_use = match session_id.as_deref() {
        Some(id) => match gate.sessions.begin_use(id) {
            Some(used) => Some(used),
            None => {
                return Refusal::new(StatusCode::NOT_FOUND, "session", "session not found".into())
                    .into_response();
            }
        },
        None => None,
    };

    // Shutting down: no new work. Ending a session, or resuming a stream a running call
    // answers on, still passes; so does a POST carrying only answers and notifications
    // (checked once its body is read, below).
    let method = req.method().clone();
    let draining = gate.draining.load(Ordering::SeqCst);
    if draining && method != Method::POST {
        let resume = method == Method::GET && req.headers().contains_key("last-event-id");
        if !(method == Method::DELETE || resume) {
            return shutting_down();
        }
    }

    // Shared sessions: a resumption reaches only this session's own standalone stream or a
    // request's stream (whose random name only its client was given), and only within a
    // session; a stream opened without `Last-Event-ID` starts where the directory says (the
    // session's first such stream at its first event, so nothing sent before it is lost).
    if let Some(dir) = gate.directory.clone() {
        let resumed = req
            .headers()
            .get("last-event-id")
            .map(|v| v.to_str().ok().map(str::to_owned));
        let refused = || {
            Refusal::new(StatusCode::NOT_FOUND, "session", "session not found".into())
                .into_response()
        };
        match (&session_id, resumed) {
            (None, Some(_)) => {
                tracing::warn!(user = %user.escape_debug(), "resumption without a session refused");
                return refused();
            }
            (Some(id), Some(Some(last))) if !shared::resumable_in(&last, id) => {
                tracing::warn!(user = %user.escape_debug(), "resumption of another session's stream refused");
                return refused();
            }
            (Some(id), None) if method == Method::GET => {
                let (session, stream) = (id.clone(), shared::standalone_stream(id));
                match blocking(move || dir.stream_start(&session, &stream)).await {
                    Ok(n) => {
                        if let Ok(v) = HeaderValue::from_str(&shared::standalone_from(n, id)) {
                            req.headers_mut().insert("last-event-id", v);
                        }
                    }
                    Err(e) => return store_unavailable(&e),
                }
            }
            _ => {}
        }
    }

    // A 2026-07-28 `subscriptions/listen` is a POST whose answer is a long-lived event
    // stream: it counts as a stream (not as a call a shutdown waits for), and holds no body
    // budget once it is read. rmcp refuses a request whose `Mcp-Method` header and body
    // disagree, so the header can be trusted here.
    let listen = method == Method::POST
        && req
            .headers()
            .get("mcp-method")
            .is_some_and(|v| v.as_bytes() == b"subscriptions/listen");
    let kind = match method {
        Method::POST if listen => Kind::Stream,
        Method::POST => Kind::Call,
        Method::GET => Kind::Stream,
        _ => Kind::Other,
    };
    let admitted = match gate.limiters.admit(&user, kind) {
        Ok(a) => a,
        Err(refused) => return refused.into_response(),
    };
    // A POST without a session id opens a session (an `initialize`) — unless it is a
    // stateless request (protocol 2026-07-28 or later, which has no sessions): those do not
    // hold a session place while they run. Should one make a session all the same, its owner
    // is recorded when the answer names it.
    let stateless = req
        .headers()
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim() >= STATELESS_PROTOCOL);
    let slot = if method == Method::POST && session_id.is_none() && !stateless {
        match gate.reserve_session(&user).await {
            Ok(slot) => Some(slot),
            Err(refused) => return refused.into_response(),
        }
    } else {
        None
    };

    // The body: bounded in size, time and the server's buffer budget.
    let mut reservation = None;
    let mut body_failure = None;
    if method == Method::POST {
        let declared = req
            .headers()
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        let held = match gate.body.admit(declared) {
            Ok(r) => r,
            Err(refused) => return refused.into_response(),
        };
        let (parts, body) = req.into_parts();
        let (body, failure) = gate.body.wrap(body, held.clone());
        let body = if draining {
            match read_while_draining(&gate, body, &failure).await {
                Ok(bytes) => axum::body::Body::from(bytes),
                Err(refused) => return refused,
            }
        } else {
            body
        };
        req = axum::extract::Request::from_parts(parts, body);
        reservation = Some(held);
        body_failure = Some(failure);
    }

    let req_last_event_id = req
        .headers()
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let inflight = (method == Method::POST && !listen).then(|| gate.begin());
    // The session's server asks later whether its client has an event stream open.
    req.extensions_mut().insert(gate.streams.clone());
    let mut response = next.run(req).await;

    // A body cut short (too slow, too large, no room): say so, not the service's 500.
    if let Some(why) = body_failure.as_ref().and_then(|f| f.get()) {
        tracing::info!(user = %user.escape_debug(), reason = ?why, "request body cut short");
        return gate.body.refusal(*why).into_response();
    }
    if let Some(id) = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .filter(|_| session_id.is_none())
    {
        gate.share_owner(id, &user).await;
        match slot {
            Some(slot) => {
                if let Some(oldest) = slot.fill(id) {
                    gate.end_session(&oldest).await;
                }
            }
            None => gate.sessions.adopt(id, &user),
        }
    }
    if method == Method::DELETE
        && response.status().is_success()
        && let Some(id) = &session_id
    {
        gate.sessions.remove(id);
        // The session is gone: 204 (clients treat rmcp's 202 as a failed termination).
        if response.status() == StatusCode::ACCEPTED {
            *response.status_mut() = StatusCode::NO_CONTENT;
            *response.body_mut() = axum::body::Body::empty();
        }
    }
    let is_event_stream = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if listen && is_event_stream {
        // Its body was read to answer; a listen may last for hours.
        reservation = None;
    }
    // A listen is quiet until something changes, and its client does not open it again
    // by itself: it is not closed for being idle.
    let idle = match (kind, gate.stream_idle) {
        (Kind::Stream, Some(after)) if is_event_stream && !listen => Some(IdleTimer {
            after,
            sleep: Box::pin(tokio::time::sleep(after)),
        }),
        _ => None,
    };
    // The session's standalone event stream (not a resumed request's own stream, which
    // carries nothing else): what anything said between requests goes out on.
    let standalone = method == Method::GET
        && req_last_event_id
            .as_deref()
            .is_none_or(|id| !id.contains('/'));
    let stream = match &session_id {
        Some(id) if standalone && is_event_stream && response.status().is_success() => {
            Some(gate.streams.opened(id))
        }
        _ => None,
    };
    if admitted.is_empty()
        && inflight.is_none()
        && reservation.is_none()
        && idle.is_none()
        && stream.is_none()
    {
        drop(session_use);
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        axum::body::Body::new(GuardedBody {
            inner: body,
            idle,
            ended: false,
            _inflight: inflight,
            _admitted: admitted,
            _reservation: reservation,
            _stream: stream,
            _session_use: session_use,
        }),
    )
}

/// During shutdown: the body is read (under its limits) and scanned without being parsed
/// into a tree; one carrying only JSON-RPC answers or notifications passes (its bytes put
/// back), anything starting new work is answered 503.
async fn read_while_draining(
    gate: &Gate,
    body: axum::body::Body,
    failure: &std::sync::OnceLock<BodyFailure>,
) -> Result<axum::body::Bytes, Response> {
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(_) => {
            return Err(match failure.get() {
                Some(why) => gate.body.refusal(*why).into_response(),
                None => shutting_down(),
            });
        }
    };
    if super::body::only_answers_and_notifications(&bytes) {
        Ok(bytes)
    } else {
        Err(shutting_down())
    }
}
