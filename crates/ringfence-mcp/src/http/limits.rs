//! Per-user limits on `/mcp` requests — a token bucket for the rate, and semaphores for the
//! calls answered at once and the event streams held open — and the server-wide cap on calls
//! and streams open at once, which keeps a reserve of descriptors for everything else
//! (admission answers, `/healthz`, the files tools open). A refusal names the setting.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::StatusCode;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::refusal::Refusal;

/// Per-user limits on `/mcp` requests. `0` turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimits {
    /// Requests of one user being answered at once (long-lived event streams not counted).
    pub concurrent: usize,
    /// Sustained requests per second of one user.
    pub rate: f64,
    /// Requests one user may send in a burst above the rate.
    pub burst: f64,
    /// MCP sessions one user may have open.
    pub sessions: usize,
    /// Event streams (GET) one user may hold open at once.
    pub streams: usize,
}

/// A semaphore size for a limit where `0` means none.
fn permits(limit: usize) -> usize {
    if limit == 0 {
        Semaphore::MAX_PERMITS
    } else {
        limit.min(Semaphore::MAX_PERMITS)
    }
}

/// The defaults where users are many (a server with credentials): each user gets a fair
/// share, with room for a heavy client — an agent issuing calls in parallel, an inspector
/// reconnecting, the MCP conformance suite's few hundred requests in a second. At the session
/// cap the user's session unused for longest makes way (see `sessions`), so clients that
/// never end their sessions are not locked out.
impl Default for RateLimits {
    fn default() -> RateLimits {
        RateLimits {
            concurrent: 16,
            rate: 50.0,
            burst: 500.0,
            sessions: 16,
            streams: 32,
        }
    }
}

impl RateLimits {
    /// The defaults of a server without credentials, which listens on loopback only: its one
    /// user is the person at the machine, whom per-user limits would only lock out of their
    /// own server. Their sessions stay bounded (the unused ones make way at 64); the
    /// server-wide bounds (calls and streams open at once, request body bytes) still hold.
    pub fn one_person() -> RateLimits {
        RateLimits {
            concurrent: 0,
            rate: 0.0,
            burst: 0.0,
            sessions: 64,
            streams: 0,
        }
    }
}

/// Calls and event streams open at once over all users, given the process's descriptor
/// limit: each holds a connection (one descriptor), and a quarter of the descriptors (at
/// least 64) stays free for the rest — accepting and refusing, health checks, tools' files.
pub fn open_request_slots(descriptors: u64) -> usize {
    let reserve = (descriptors / 4).max(64);
    let slots = descriptors
        .saturating_sub(reserve)
        .max(descriptors / 4)
        .max(1);
    usize::try_from(slots).unwrap_or(usize::MAX)
}

/// What a request will hold while it is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A POST: a call, counted against the user's concurrency.
    Call,
    /// A GET: an event stream, counted against the user's streams.
    Stream,
    /// Anything else (DELETE): the rate only.
    Other,
}

/// The limiters of the users seen lately, and the server-wide cap.
#[derive(Debug)]
pub(super) struct Limiters {
    limits: RateLimits,
    users: Mutex<HashMap<String, Arc<UserLimiter>>>,
    /// Calls and streams open at once over all users.
    open: Arc<Semaphore>,
    open_slots: usize,
}

#[derive(Debug)]
struct UserLimiter {
    concurrent: Arc<Semaphore>,
    streams: Arc<Semaphore>,
    /// (tokens left, when last refilled)
    bucket: Mutex<(f64, Instant)>,
}

impl UserLimiter {
    fn is_idle(&self, limits: &RateLimits) -> bool {
        let full = {
            let bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            limits.rate <= 0.0
                || bucket.0 + bucket.1.elapsed().as_secs_f64() * limits.rate
                    >= limits.burst.max(1.0)
        };
        full && self.concurrent.available_permits() == permits(limits.concurrent)
            && self.streams.available_permits() == permits(limits.streams)
    }
}

/// The places a request holds until its answer has been sent.
#[derive(Debug, Default)]
pub(super) struct Admitted {
    /// Among its user's calls or streams.
    user: Option<OwnedSemaphorePermit>,
    /// Among the server's open calls and streams.
    server: Option<OwnedSemaphorePermit>,
}

impl Admitted {
    pub(super) fn is_empty(&self) -> bool {
        self.user.is_none() && self.server.is_none()
    }
}

impl Limiters {
    /// `open_slots`: calls and streams open at once over all users (`0`: no cap).
    pub(super) fn new(limits: RateLimits, open_slots: usize) -> Limiters {
        Limiters {
            limits,
            users: Mutex::new(HashMap::new()),
            open: Arc::new(Semaphore::new(permits(open_slots))),
            open_slots,
        }
    }

    pub(super) fn limits(&self) -> &RateLimits {
        &self.limits
    }

    /// Admits one request of `user`: takes a token from the user's bucket and, for a call or
    /// a stream, a place among the user's (then the server's) calls or streams, held until
    /// [`Admitted`] is dropped.
    pub(super) fn admit(&self, user: &str, kind: Kind) -> Result<Admitted, Refusal> {
        let limiter = self.limiter(user);
        if let Err(wait) = self.take_token(&limiter) {
            tracing::info!(user = %user.escape_debug(), wait, "rate limit reached");
            return Err(Refusal::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate",
                format!(
                    "rate limit: at most {} requests per second (burst {}) per user (http.limits.rate, http.limits.burst); retry after {wait} s",
                    self.limits.rate, self.limits.burst
                ),
            )
            .setting("http.limits.rate")
            .retry_after(wait));
        }
        let user_permit = match kind {
            Kind::Other => return Ok(Admitted::default()),
            Kind::Call => limiter.concurrent.clone().try_acquire_owned().map_err(|_| {
                tracing::info!(user = %user.escape_debug(), "concurrency limit reached");
                Refusal::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "concurrent",
                    format!(
                        "concurrency limit: at most {} requests of one user at a time (http.limits.concurrent); retry after 1 s",
                        self.limits.concurrent
                    ),
                )
                .setting("http.limits.concurrent")
                .retry_after(1)
            })?,
            Kind::Stream => limiter.streams.clone().try_acquire_owned().map_err(|_| {
                tracing::info!(user = %user.escape_debug(), "stream limit reached");
                Refusal::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "streams",
                    format!(
                        "stream limit: at most {} event streams of one user open at once (http.limits.streams); close one, or retry after 5 s",
                        self.limits.streams
                    ),
                )
                .setting("http.limits.streams")
                .retry_after(5)
            })?,
        };
        let server_permit = self.open.clone().try_acquire_owned().map_err(|_| {
            tracing::warn!(
                open = self.open_slots,
                "server-wide limit on open calls and streams reached"
            );
            Refusal::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "open_requests",
                format!(
                    "the server has {} calls and event streams open, all it keeps open at once (http.max_open_requests; the rest of its file descriptors are kept in reserve); retry after 5 s",
                    self.open_slots
                ),
            )
            .setting("http.max_open_requests")
            .retry_after(5)
        })?;
        Ok(Admitted {
            user: Some(user_permit),
            server: Some(server_permit),
        })
    }

    /// Forgets the limiters of users who are idle: nothing in flight, budget full again.
    pub(super) fn forget_idle(&self) {
        let limits = self.limits;
        self.users
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, l| Arc::strong_count(l) > 1 || !l.is_idle(&limits));
    }

    fn limiter(&self, user: &str) -> Arc<UserLimiter> {
        let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        users
            .entry(user.to_owned())
            .or_insert_with(|| {
                Arc::new(UserLimiter {
                    concurrent: Arc::new(Semaphore::new(permits(self.limits.concurrent))),
                    streams: Arc::new(Semaphore::new(permits(self.limits.streams))),
                    bucket: Mutex::new((self.limits.burst.max(1.0), Instant::now())),
                })
            })
            .clone()
    }

    /// Takes one request from `user`'s token bucket; `Err(seconds to wait)` when empty.
    fn take_token(&self, limiter: &UserLimiter) -> Result<(), u64> {
        if self.limits.rate <= 0.0 {
            return Ok(());
        }
        let capacity = self.limits.burst.max(1.0);
        let mut bucket = limiter.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(bucket.1).as_secs_f64() * self.limits.rate;
        bucket.0 = (bucket.0 + refill).min(capacity);
        bucket.1 = now;
        if bucket.0 >= 1.0 {
            bucket.0 -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - bucket.0) / self.limits.rate).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(concurrent: usize, streams: usize) -> RateLimits {
        RateLimits {
            concurrent,
            rate: 0.0,
            burst: 0.0,
            sessions: 0,
            streams,
        }
    }

    #[test]
    fn streams_are_capped_per_user_and_given_back() {
        let l = Limiters::new(limits(0, 2), 0);
        let a = l.admit("alice", Kind::Stream).unwrap();
        let b = l.admit("alice", Kind::Stream).unwrap();
        let refused = l.admit("alice", Kind::Stream).unwrap_err();
        assert_eq!(refused.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.setting, Some("http.limits.streams"));
        assert_eq!(refused.retry_after, Some(5));
        // Another user, calls, and DELETEs are not affected.
        let _bob = l.admit("bob", Kind::Stream).unwrap();
        let _call = l.admit("alice", Kind::Call).unwrap();
        assert!(l.admit("alice", Kind::Other).unwrap().is_empty());
        drop(a);
        let _c = l.admit("alice", Kind::Stream).unwrap();
        drop(b);
        // Idle users are forgotten only once they hold nothing.
        l.forget_idle();
        assert!(l.users.lock().unwrap().contains_key("alice"));
    }

    #[test]
    fn the_server_wide_cap_counts_every_user_and_kind() {
        let l = Limiters::new(limits(0, 0), 3);
        let held = [
            l.admit("alice", Kind::Stream).unwrap(),
            l.admit("bob", Kind::Call).unwrap(),
            l.admit("carol", Kind::Stream).unwrap(),
        ];
        let refused = l.admit("dave", Kind::Call).unwrap_err();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(refused.setting, Some("http.max_open_requests"));
        // A user at the server's cap gives back their own place too.
        let refused = l.admit("dave", Kind::Stream).unwrap_err();
        assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE);
        drop(held);
        for _ in 0..3 {
            assert!(l.admit("dave", Kind::Stream).is_ok());
        }
        l.forget_idle();
        assert!(l.users.lock().unwrap().is_empty());
    }

    #[test]
    fn the_descriptor_reserve() {
        assert_eq!(open_request_slots(20_000), 15_000);
        assert_eq!(open_request_slots(1024), 768);
        assert_eq!(open_request_slots(128), 64);
        assert_eq!(open_request_slots(64), 16);
        assert_eq!(open_request_slots(0), 1);
    }
}
