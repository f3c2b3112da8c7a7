//! Who owns each MCP session, and how many each user has open: a session belongs to the user
//! whose `initialize` created it, and one user may hold at most `cap` of them (places being
//! created count too, so a burst of `initialize` requests cannot overshoot the cap). Many
//! clients never end their sessions (no DELETE), so at the cap the user's session unused for
//! longest — none of its requests or streams open — makes way for the new one
//! ([`SessionBook::least_recently_used`]); a client that comes back to it is told it is gone
//! (404) and starts a new one, as the protocol asks.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The session owners and the per-user counts.
#[derive(Debug)]
pub(super) struct SessionBook {
    /// Sessions one user may have open (`0`: no cap).
    cap: usize,
    inner: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    /// MCP session id -> the user who opened it.
    owners: HashMap<String, String>,
    /// User -> sessions owned plus places reserved for sessions being created.
    open: HashMap<String, usize>,
    /// MCP session id -> its requests and streams open now, and when it was last used.
    usage: HashMap<String, Usage>,
}

#[derive(Debug, Clone, Copy)]
struct Usage {
    open: usize,
    last: Instant,
}

impl Book {
    fn forget(&mut self, id: &str) {
        self.usage.remove(id);
        if let Some(user) = self.owners.remove(id) {
            self.release(&user);
        }
    }

    fn touch(&mut self, id: &str) -> &mut Usage {
        let usage = self.usage.entry(id.to_owned()).or_insert(Usage {
            open: 0,
            last: Instant::now(),
        });
        usage.last = Instant::now();
        usage
    }

    fn release(&mut self, user: &str) {
        if let Some(n) = self.open.get_mut(user) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(user);
            }
        }
    }
}

/// One request or stream of a session, open until dropped: a session in use is never the
/// one that makes way for a new one.
#[derive(Debug)]
pub(super) struct SessionUse {
    book: Arc<SessionBook>,
    id: String,
}

impl Drop for SessionUse {
    fn drop(&mut self) {
        let mut book = self.book.book();
        if book.owners.contains_key(&self.id) {
            let usage = book.touch(&self.id);
            usage.open = usage.open.saturating_sub(1);
        }
    }
}

/// A place for one session being created, given back when dropped unless
/// [`SessionSlot::fill`] recorded the session.
#[derive(Debug)]
pub(super) struct SessionSlot {
    book: Arc<SessionBook>,
    user: String,
    filled: bool,
}

impl SessionBook {
    pub(super) fn new(cap: usize) -> SessionBook {
        SessionBook {
            cap,
            inner: Mutex::new(Book::default()),
        }
    }

    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The user who opened session `id`, if it is known.
    pub(super) fn owner(&self, id: &str) -> Option<String> {
        self.book().owners.get(id).cloned()
    }

    /// Sessions `user` has open or being created.
    #[cfg(test)]
    pub(super) fn open(&self, user: &str) -> usize {
        self.book().open.get(user).copied().unwrap_or(0)
    }

    /// A place for a new session of `user`, or `Err(sessions open)` at the cap.
    pub(super) fn reserve(self: &Arc<Self>, user: &str) -> Result<SessionSlot, usize> {
        let mut book = self.book();
        let n = book.open.entry(user.to_owned()).or_insert(0);
        if self.cap != 0 && *n >= self.cap {
            return Err(*n);
        }
        *n += 1;
        Ok(SessionSlot {
            book: self.clone(),
            user: user.to_owned(),
            filled: false,
        })
    }

    /// Records session `id` as `user`'s without a reserved place (a request not expected to
    /// open one did): it is counted from now on, even above the cap.
    pub(super) fn adopt(&self, id: &str, user: &str) {
        let mut book = self.book();
        if let Some(previous) = book.owners.insert(id.to_owned(), user.to_owned()) {
            book.release(&previous);
        }
        book.touch(id);
        *book.open.entry(user.to_owned()).or_insert(0) += 1;
    }

    /// Forgets session `id` (ended by its owner, or made way for a new one).
    pub(super) fn remove(&self, id: &str) {
        self.book().forget(id);
    }

    /// A request or stream of session `id` begins (the session is known to be its user's).
    pub(super) fn begin_use(self: &Arc<Self>, id: &str) -> SessionUse {
        self.book().touch(id).open += 1;
        SessionUse {
            book: self.clone(),
            id: id.to_owned(),
        }
    }

    /// `user`'s session unused for longest among those with no request or stream open.
    pub(super) fn least_recently_used(&self, user: &str) -> Option<String> {
        let book = self.book();
        book.owners
            .iter()
            .filter(|(_, owner)| owner.as_str() == user)
            .map(|(id, _)| (id, book.usage.get(id)))
            .filter(|(_, usage)| usage.is_none_or(|u| u.open == 0))
            .min_by_key(|(_, usage)| usage.map(|u| u.last))
            .map(|(id, _)| id.clone())
    }

    /// Forgets the sessions no longer `alive` (ended, expired after inactivity).
    pub(super) fn retain(&self, alive: &HashSet<String>) {
        let mut book = self.book();
        let gone: Vec<String> = book
            .owners
            .keys()
            .filter(|id| !alive.contains(*id))
            .cloned()
            .collect();
        for id in gone {
            book.forget(&id);
        }
    }
}

impl SessionSlot {
    /// The session was created: it is `user`'s now, and keeps its place until it ends.
    pub(super) fn fill(mut self, id: &str) {
        let mut book = self.book.book();
        if let Some(previous) = book.owners.insert(id.to_owned(), self.user.clone()) {
            // The same id twice (should not happen): count it once.
            book.release(&previous);
        }
        book.touch(id);
        self.filled = true;
    }
}

impl Drop for SessionSlot {
    fn drop(&mut self) {
        if !self.filled {
            self.book.book().release(&self.user);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_counted_per_user_until_the_session_ends() {
        let book = Arc::new(SessionBook::new(2));
        let a1 = book.reserve("alice").unwrap();
        let a2 = book.reserve("alice").unwrap();
        // Two being created: a third is refused even before they exist.
        assert_eq!(book.reserve("alice").unwrap_err(), 2);
        // Bob has his own places.
        let b1 = book.reserve("bob").unwrap();
        a1.fill("s1");
        drop(a2); // its initialize failed: the place is free again
        assert_eq!(book.open("alice"), 1);
        assert_eq!(book.owner("s1").as_deref(), Some("alice"));
        let a3 = book.reserve("alice").unwrap();
        a3.fill("s2");
        assert!(book.reserve("alice").is_err());
        // Ending a session frees its place; an unknown id changes nothing.
        book.remove("s1");
        book.remove("nope");
        assert_eq!(book.open("alice"), 1);
        assert_eq!(book.owner("s1"), None);
        // Sessions that expired are forgotten by the sweep.
        b1.fill("s3");
        book.retain(&HashSet::from(["s3".to_owned()]));
        assert_eq!(book.open("alice"), 0);
        assert_eq!(book.open("bob"), 1);
        assert_eq!(book.owner("s2"), None);
    }

    #[test]
    fn an_adopted_session_is_owned_and_counted() {
        let book = Arc::new(SessionBook::new(1));
        book.adopt("s1", "alice");
        assert_eq!(book.owner("s1").as_deref(), Some("alice"));
        assert_eq!(book.open("alice"), 1);
        assert!(book.reserve("alice").is_err());
        book.remove("s1");
        assert_eq!(book.open("alice"), 0);
        assert!(book.owner("s1").is_none());
    }

    #[test]
    fn no_cap_counts_but_never_refuses() {
        let book = Arc::new(SessionBook::new(0));
        let slots: Vec<_> = (0..100).map(|_| book.reserve("alice").unwrap()).collect();
        assert_eq!(book.open("alice"), 100);
        drop(slots);
        assert_eq!(book.open("alice"), 0);
    }

    #[test]
    fn the_session_unused_for_longest_and_not_in_use_makes_way() {
        let book = Arc::new(SessionBook::new(3));
        for id in ["s1", "s2", "s3"] {
            book.reserve("alice").unwrap().fill(id);
        }
        book.reserve("bob").unwrap().fill("b1");
        assert_eq!(book.least_recently_used("alice").as_deref(), Some("s1"));
        // Using s1 (a request that has ended) makes s2 the oldest.
        drop(book.begin_use("s1"));
        assert_eq!(book.least_recently_used("alice").as_deref(), Some("s2"));
        // A session with a request or stream open is never chosen.
        let stream = book.begin_use("s2");
        let call = book.begin_use("s3");
        assert_eq!(book.least_recently_used("alice").as_deref(), Some("s1"));
        let held = book.begin_use("s1");
        assert_eq!(book.least_recently_used("alice"), None);
        drop(call);
        assert_eq!(book.least_recently_used("alice").as_deref(), Some("s3"));
        // Another user's sessions are never another's to end.
        assert_eq!(book.least_recently_used("bob").as_deref(), Some("b1"));
        // A session removed while in use is not brought back when its use ends.
        book.remove("s2");
        drop(stream);
        assert_eq!(book.owner("s2"), None);
        assert!(!book.book().usage.contains_key("s2"));
        drop(held);
        assert_eq!(book.open("alice"), 2);
    }
}
