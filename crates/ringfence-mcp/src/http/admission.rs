//! The gate in front of `/mcp` and `/metrics`: refusing new work while shutting down,
//! authentication, session ownership, per-user limits, and counting the calls in flight until
//! their answers have been sent.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::MAX_HTTP_BODY;
use super::auth::Authenticator;
use super::limits::Limiters;
use crate::Metrics;

/// After the last running call of a shutdown, how long clients get to read its answer.
const LINGER: Duration = Duration::from_secs(1);

/// State shared by every request: credentials, limits, session owners, calls in flight.
#[derive(Debug)]
pub(super) struct Gate {
    auth: Authenticator,
    limiters: Limiters,
    /// MCP session id -> the user who opened it.
    owners: Mutex<HashMap<String, String>>,
    draining: AtomicBool,
    inflight: AtomicUsize,
    idle: tokio::sync::Notify,
    metrics: Option<Arc<Metrics>>,
}

impl Gate {
    pub(super) fn new(
        auth: Authenticator,
        limiters: Limiters,
        metrics: Option<Arc<Metrics>>,
    ) -> Gate {
        Gate {
            auth,
            limiters,
            owners: Mutex::new(HashMap::new()),
            draining: AtomicBool::new(false),
            inflight: AtomicUsize::new(0),
            idle: tokio::sync::Notify::new(),
            metrics,
        }
    }

    /// Forgets the owners of sessions no longer `alive`, and the limiters of idle users.
    pub(super) fn sweep(&self, alive: &HashSet<String>) {
        self.owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|id, _| alive.contains(id));
        self.limiters.forget_idle();
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

/// A response body that keeps its request counted (in flight, and against its user's
/// concurrency) until the last byte is sent: a tool call's answer streams after the
/// handler returned.
struct GuardedBody {
    inner: axum::body::Body,
    _inflight: Option<InflightGuard>,
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl http_body::Body for GuardedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// In front of `/mcp` and `/metrics`: shutdown, authentication, session ownership, limits.
/// A refusal usually leaves the request body unread, so the connection is closed after it
/// (said in `Connection: close`) rather than reused with stray bytes in it.
pub(super) async fn gate(
    gate: Arc<Gate>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let metrics = gate.metrics.clone();
    let mut response = admit(gate, req, next).await;
    let status = response.status().as_u16();
    if matches!(status, 401 | 403 | 404 | 413 | 429 | 503) {
        if let Some(m) = &metrics {
            m.refused(status);
        }
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn admit(
    gate: Arc<Gate>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    // Shutting down: no new work. Answers and notifications the client owes to calls still
    // running (a roots/list result, a cancellation) still pass, or those calls could not end.
    let req = if gate.draining.load(Ordering::SeqCst) {
        match admit_while_draining(req).await {
            Ok(req) => req,
            Err(refused) => return refused,
        }
    } else {
        req
    };
    let mut req = req;
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
    if let Some(id) = &session_id {
        let owner = gate
            .owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned();
        if owner.as_deref().is_some_and(|o| o != user) {
            tracing::warn!(%user, "request for another user's MCP session refused");
            return (StatusCode::NOT_FOUND, "session not found\n").into_response();
        }
    }

    // Event streams (GET) stay open for the whole session: they are not "calls".
    let is_call = req.method() == Method::POST;
    let permit = match gate.limiters.admit(&user, is_call) {
        Ok(permit) => permit,
        Err(refused) => return refused.into_response(),
    };
    let inflight = is_call.then(|| gate.begin());
    let is_delete = req.method() == Method::DELETE;
    let response = next.run(req).await;

    if session_id.is_none()
        && let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
    {
        gate.owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned(), user.clone());
    }
    if is_delete
        && response.status().is_success()
        && let Some(id) = &session_id
    {
        gate.owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
    if permit.is_none() && inflight.is_none() {
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        axum::body::Body::new(GuardedBody {
            inner: body,
            _inflight: inflight,
            _permit: permit,
        }),
    )
}

/// During shutdown: a POST carrying only JSON-RPC responses or notifications passes (its
/// body put back); anything starting new work is answered 503.
async fn admit_while_draining(
    req: axum::extract::Request,
) -> Result<axum::extract::Request, Response> {
    let refuse = || {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "5")],
            "the server is shutting down; retry against the next instance\n",
        )
            .into_response()
    };
    if req.method() != Method::POST {
        // Ending a session, or resuming a stream a running call answers on, still passes.
        let resume = req.method() == Method::GET && req.headers().contains_key("last-event-id");
        return if req.method() == Method::DELETE || resume {
            Ok(req)
        } else {
            Err(refuse())
        };
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_HTTP_BODY)
        .await
        .map_err(|_| refuse())?;
    let starts_work = |m: &serde_json::Value| m.get("method").is_some() && m.get("id").is_some();
    let new_work = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Array(batch)) => batch.iter().any(starts_work),
        Ok(message) => starts_work(&message),
        Err(_) => true,
    };
    if new_work {
        return Err(refuse());
    }
    Ok(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
}
