//! Who is signed in to the settings page: sessions made by signing in with the user's own
//! MCP credential, kept in a [`WebSessions`] store (PostgreSQL's table when instances share
//! one, so any instance serves any session; the instance's memory otherwise), each known by
//! the SHA-256 of its cookie (a copy of the table opens nobody's page) and carrying its own
//! CSRF token. Failed sign-ins are counted per client address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ringfence_core::time::now_ms;

/// A signed-in person's session, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    pub user: String,
    /// The token every form of the session sends back.
    pub csrf: String,
}

/// Where settings-page sessions live. Keys are the SHA-256 (hex) of the cookie's value.
pub trait WebSessions: Send + Sync + std::fmt::Debug {
    /// Keeps a new session until `expires_ms` (milliseconds since the epoch).
    fn create(&self, key: &str, session: &WebSession, expires_ms: i64) -> std::io::Result<()>;
    /// The session under `key`, if it has not expired at `now_ms`.
    fn find(&self, key: &str, now_ms: i64) -> std::io::Result<Option<WebSession>>;
    /// Ends the session under `key` (signing out).
    fn remove(&self, key: &str) -> std::io::Result<()>;
}

/// Sessions in this instance's memory (one instance; they end when it stops).
#[derive(Debug, Default)]
pub struct MemoryWebSessions(Mutex<HashMap<String, (WebSession, i64)>>);

impl WebSessions for MemoryWebSessions {
    fn create(&self, key: &str, session: &WebSession, expires_ms: i64) -> std::io::Result<()> {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let now = now_ms();
        map.retain(|_, (_, exp)| *exp > now);
        map.insert(key.to_owned(), (session.clone(), expires_ms));
        Ok(())
    }

    fn find(&self, key: &str, now_ms: i64) -> std::io::Result<Option<WebSession>> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        Ok(map
            .get(key)
            .filter(|(_, exp)| *exp > now_ms)
            .map(|(s, _)| s.clone()))
    }

    fn remove(&self, key: &str) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
        Ok(())
    }
}

/// 32 random bytes, base64url: a cookie's value or a CSRF token.
pub(super) fn random_token() -> String {
    ringfence_net::pkce::random_token(32)
}

/// The store's key for a cookie's value.
pub(super) fn key_of(cookie: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, cookie.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether two secrets are equal, in time independent of where they differ.
pub(super) fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Failed sign-ins per client address: `MAX_FAILURES` in a `WINDOW`, then refused until the
/// window has passed.
#[derive(Debug, Default)]
pub(super) struct Attempts(Mutex<HashMap<IpAddr, (u32, Instant)>>);

pub(super) const MAX_FAILURES: u32 = 10;
pub(super) const WINDOW: Duration = Duration::from_secs(10 * 60);

/// Addresses counted at most; past it, only those already refused are kept.
const MAX_ADDRESSES: usize = 100_000;

/// What failures are counted by: an IPv4 address, or an IPv6 address's /64 (one
/// subscriber's network, which hands out addresses freely).
fn counted(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(_) => addr,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !((1u128 << 64) - 1),
            )),
        },
    }
}

impl Attempts {
    /// Seconds to wait when `addr` has failed too often, at `now`.
    pub(super) fn refused(&self, addr: IpAddr, now: Instant) -> Option<u64> {
        let addr = counted(addr);
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (count, since) = map.get(&addr)?;
        let waited = now.saturating_duration_since(*since);
        (*count >= MAX_FAILURES && waited < WINDOW).then(|| (WINDOW - waited).as_secs().max(1))
    }

    /// Counts a failure of `addr` at `now`.
    pub(super) fn failed(&self, addr: IpAddr, now: Instant) {
        let addr = counted(addr);
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_ADDRESSES {
            map.retain(|_, (n, since)| {
                now.saturating_duration_since(*since) < WINDOW && *n >= MAX_FAILURES
            });
        }
        let entry = map.entry(addr).or_insert((0, now));
        if now.saturating_duration_since(entry.1) >= WINDOW {
            *entry = (0, now);
        }
        entry.0 += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_past_the_cap_are_refused_until_the_window_passes() {
        let attempts = Attempts::default();
        let addr: IpAddr = "192.0.2.7".parse().unwrap();
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        let t0 = Instant::now();
        for _ in 0..MAX_FAILURES - 1 {
            attempts.failed(addr, t0);
        }
        assert_eq!(attempts.refused(addr, t0), None);
        attempts.failed(addr, t0);
        assert_eq!(attempts.refused(addr, t0), Some(WINDOW.as_secs()));
        assert_eq!(
            attempts.refused(other, t0),
            None,
            "another address is not held back"
        );
        assert_eq!(attempts.refused(addr, t0 + WINDOW), None);
        attempts.failed(addr, t0 + WINDOW);
        assert_eq!(
            attempts.refused(addr, t0 + WINDOW),
            None,
            "a new window counts from one"
        );
    }

    #[test]
    fn an_ipv6_network_counts_as_one_address() {
        let attempts = Attempts::default();
        let t0 = Instant::now();
        for i in 0..MAX_FAILURES {
            let a: IpAddr = format!("2001:db8:1:2::{:x}", i + 1).parse().unwrap();
            attempts.failed(a, t0);
        }
        let same: IpAddr = "2001:db8:1:2:ffff::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert!(attempts.refused(same, t0).is_some());
        assert!(attempts.refused(other, t0).is_none());
    }

    #[test]
    fn sessions_expire_and_end() {
        let store = MemoryWebSessions::default();
        let s = WebSession {
            user: "alice".into(),
            csrf: "c".into(),
        };
        store.create("k", &s, 1_000).unwrap();
        assert_eq!(store.find("k", 999).unwrap(), Some(s.clone()));
        assert_eq!(store.find("k", 1_000).unwrap(), None);
        store.create("k2", &s, i64::MAX).unwrap();
        store.remove("k2").unwrap();
        assert_eq!(store.find("k2", 0).unwrap(), None);
    }

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("abc", "abc"));
        assert!(!same_secret("abc", "abd"));
        assert!(!same_secret("abc", "ab"));
        assert_ne!(random_token(), random_token());
        assert_eq!(key_of("x").len(), 64);
    }
}
