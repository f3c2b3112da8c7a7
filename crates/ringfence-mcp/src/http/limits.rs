//! Per-user limits on `/mcp` requests: a token bucket for the rate and a semaphore for the
//! calls answered at once; a refusal is 429 with `Retry-After`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Per-user limits on `/mcp` requests. `0` turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimits {
    /// Requests of one user being answered at once (long-lived event streams not counted).
    pub concurrent: usize,
    /// Sustained requests per second of one user.
    pub rate: f64,
    /// Requests one user may send in a burst above the rate.
    pub burst: f64,
}

impl RateLimits {
    /// Concurrent requests one user may have (`0`: unbounded).
    fn permits(&self) -> usize {
        if self.concurrent == 0 {
            tokio::sync::Semaphore::MAX_PERMITS
        } else {
            self.concurrent
        }
    }
}

impl Default for RateLimits {
    fn default() -> RateLimits {
        RateLimits {
            concurrent: 16,
            rate: 20.0,
            burst: 100.0,
        }
    }
}

/// The limiters of the users seen lately.
#[derive(Debug)]
pub(super) struct Limiters {
    limits: RateLimits,
    users: Mutex<HashMap<String, Arc<UserLimiter>>>,
}

#[derive(Debug)]
struct UserLimiter {
    concurrent: Arc<tokio::sync::Semaphore>,
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
        full && self.concurrent.available_permits() == limits.permits()
    }
}

impl Limiters {
    pub(super) fn new(limits: RateLimits) -> Limiters {
        Limiters {
            limits,
            users: Mutex::new(HashMap::new()),
        }
    }

    /// Admits one request of `user`: takes a token from the user's bucket and, for a call
    /// (`is_call`), a place among the user's concurrent calls, held until the permit is
    /// dropped.
    pub(super) fn admit(
        &self,
        user: &str,
        is_call: bool,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, LimitReached> {
        let limiter = self.limiter(user);
        if let Err(wait) = self.take_token(&limiter) {
            tracing::info!(%user, wait, "rate limit reached");
            return Err(LimitReached {
                retry_after: wait,
                message: format!(
                    "rate limit: at most {} requests per second (burst {}) per user; retry after {wait} s",
                    self.limits.rate, self.limits.burst
                ),
            });
        }
        if !is_call {
            return Ok(None);
        }
        match limiter.concurrent.clone().try_acquire_owned() {
            Ok(p) => Ok(Some(p)),
            Err(_) => {
                tracing::info!(%user, "concurrency limit reached");
                Err(LimitReached {
                    retry_after: 1,
                    message: format!(
                        "concurrency limit: at most {} requests of one user at a time; retry after 1 s",
                        self.limits.concurrent
                    ),
                })
            }
        }
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
                    concurrent: Arc::new(tokio::sync::Semaphore::new(self.limits.permits())),
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

/// A request over its user's limits: answered 429 with `Retry-After`.
#[derive(Debug)]
pub(super) struct LimitReached {
    /// Seconds to wait before trying again.
    retry_after: u64,
    message: String,
}

impl IntoResponse for LimitReached {
    fn into_response(self) -> Response {
        let mut r = (StatusCode::TOO_MANY_REQUESTS, format!("{}\n", self.message)).into_response();
        if let Ok(v) = HeaderValue::from_str(&self.retry_after.to_string()) {
            r.headers_mut().insert(header::RETRY_AFTER, v);
        }
        r
    }
}
