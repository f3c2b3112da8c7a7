//! The MCP sessions open in this process, per user, and telling them something now: a
//! family's background work (the follow-up scheduler) hands a [`Notice`] to [`LiveSessions`],
//! which passes it to every session of its user that can hear it. Nothing here knows MCP — the transport registers a
//! [`NoticeSink`] for each session and keeps the [`Registration`] while the session lives.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::tool::BoxFuture;

/// How long one session may take to accept a notice before it counts as not told.
pub const TELL_TIMEOUT: Duration = Duration::from_secs(5);

/// Something to tell a user's open sessions. The transport knows no family: what a notice is
/// about travels with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub user: String,
    /// The family telling it (`followups`): the log message's logger is `ringfence.<from>`.
    pub from: &'static str,
    /// What the document is (`followup`): its key in the log message's data.
    pub kind: &'static str,
    /// What the user should read.
    pub message: String,
    /// The whole document, as other channels get it (a notification's data).
    pub document: serde_json::Value,
    /// The resource whose content changed with it (subscribers are told).
    pub resource: &'static str,
}

/// One open session, as the transport sees it.
pub trait NoticeSink: Send + Sync {
    /// Whether a notice about `resource` would be heard now: the client can be reached (an
    /// HTTP session without an open event stream cannot) and asked for it (log messages at
    /// the notice's level, or updates of `resource`).
    fn reachable(&self, resource: &str) -> bool;
    /// Sends the notice; resolves to whether the client was sent anything (a client that
    /// asked for neither log messages at this level nor the resource is not told).
    fn tell(&self, notice: Arc<Notice>) -> BoxFuture<'static, bool>;
}

type Entry = (u64, String, Arc<dyn NoticeSink>);

/// The sessions of this process that may be told things, by user.
#[derive(Default)]
pub struct LiveSessions {
    sinks: Mutex<Vec<Entry>>,
    next: AtomicU64,
}

impl std::fmt::Debug for LiveSessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveSessions")
            .field("sessions", &self.lock().len())
            .finish()
    }
}

/// Keeps a session registered; dropping it takes the session out.
#[must_use = "the session is unregistered when this is dropped"]
pub struct Registration {
    live: Weak<LiveSessions>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(live) = self.live.upgrade() {
            live.lock().retain(|(id, _, _)| *id != self.id);
        }
    }
}

impl LiveSessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.sinks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a session of `user` until the returned registration is dropped.
    pub fn register(self: &Arc<Self>, user: &str, sink: Arc<dyn NoticeSink>) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.lock().push((id, user.to_owned(), sink));
        Registration {
            live: Arc::downgrade(self),
            id,
        }
    }

    /// The users with a session that would hear a notice about `resource` now, sorted.
    pub fn reachable_users(&self, resource: &str) -> Vec<String> {
        let mut users: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, _, s)| s.reachable(resource))
            .map(|(_, u, _)| u.clone())
            .collect();
        users.sort();
        users.dedup();
        users
    }

    /// Whether `user` has a session that would hear a notice about `resource` now.
    pub fn reaches(&self, user: &str, resource: &str) -> bool {
        self.lock()
            .iter()
            .any(|(_, u, s)| u == user && s.reachable(resource))
    }

    /// Tells every session of the notice's user that would hear it, all at once.
    pub async fn tell(&self, notice: Notice) -> Told {
        let notice = Arc::new(notice);
        let sinks: Vec<Arc<dyn NoticeSink>> = self
            .lock()
            .iter()
            .filter(|(_, u, s)| *u == notice.user && s.reachable(notice.resource))
            .map(|(_, _, s)| s.clone())
            .collect();
        let reachable = sinks.len();
        let mut told = 0;
        let mut sending = tokio::task::JoinSet::new();
        for sink in sinks {
            let notice = notice.clone();
            sending.spawn(async move {
                tokio::time::timeout(TELL_TIMEOUT, sink.tell(notice))
                    .await
                    .unwrap_or(false)
            });
        }
        while let Some(done) = sending.join_next().await {
            told += usize::from(done.unwrap_or(false));
        }
        Told { reachable, told }
    }
}

/// What [`LiveSessions::tell`] came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Told {
    /// Sessions that would hear it when it was sent.
    pub reachable: usize,
    /// Sessions that were sent it within [`TELL_TIMEOUT`].
    pub told: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    struct Sink {
        open: AtomicBool,
        hears: bool,
        told: Mutex<Vec<String>>,
    }

    impl NoticeSink for Sink {
        fn reachable(&self, resource: &str) -> bool {
            self.open.load(Ordering::SeqCst) && resource == "ringfence://x"
        }
        fn tell(&self, notice: Arc<Notice>) -> BoxFuture<'static, bool> {
            self.told.lock().unwrap().push(notice.message.clone());
            let hears = self.hears;
            Box::pin(async move { hears })
        }
    }

    fn sink(open: bool, hears: bool) -> Arc<Sink> {
        Arc::new(Sink {
            open: AtomicBool::new(open),
            hears,
            told: Mutex::new(Vec::new()),
        })
    }

    fn notice(user: &str) -> Notice {
        Notice {
            user: user.into(),
            from: "tests",
            kind: "test",
            message: format!("for {user}"),
            document: serde_json::json!({}),
            resource: "ringfence://x",
        }
    }

    #[tokio::test]
    async fn only_the_users_reachable_sessions_are_told_while_registered() {
        let live = Arc::new(LiveSessions::default());
        let (a1, a2, b) = (sink(true, true), sink(false, true), sink(true, true));
        let r1 = live.register("alice", a1.clone());
        let _r2 = live.register("alice", a2.clone());
        let _r3 = live.register("bob", b.clone());
        assert_eq!(live.reachable_users("ringfence://x"), ["alice", "bob"]);
        assert!(live.reachable_users("ringfence://other").is_empty());
        assert_eq!(
            live.tell(notice("alice")).await,
            Told {
                reachable: 1,
                told: 1
            }
        );
        assert_eq!(*a1.told.lock().unwrap(), ["for alice"]);
        assert!(
            a2.told.lock().unwrap().is_empty(),
            "no event stream, not told"
        );
        assert!(b.told.lock().unwrap().is_empty(), "another user's session");
        // A stream opens on the second session; the first goes away.
        a2.open.store(true, Ordering::SeqCst);
        drop(r1);
        assert_eq!(
            live.tell(notice("alice")).await,
            Told {
                reachable: 1,
                told: 1
            }
        );
        assert_eq!(a1.told.lock().unwrap().len(), 1);
        assert_eq!(a2.told.lock().unwrap().len(), 1);
        assert_eq!(
            live.tell(notice("carol")).await,
            Told {
                reachable: 0,
                told: 0
            }
        );
        assert!(!live.reaches("carol", "ringfence://x"));
    }

    #[tokio::test]
    async fn a_session_that_fails_to_take_it_is_not_counted() {
        let live = Arc::new(LiveSessions::default());
        let failing = sink(true, false);
        let _r = live.register("alice", failing.clone());
        assert!(live.reaches("alice", "ringfence://x"));
        assert_eq!(
            live.tell(notice("alice")).await,
            Told {
                reachable: 1,
                told: 0
            }
        );
        assert_eq!(failing.told.lock().unwrap().len(), 1);
    }
}
