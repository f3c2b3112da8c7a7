//! Who owns each MCP session, and how many each user has open: a session belongs to the user
//! whose `initialize` created it, and one user may hold at most `cap` of them (places being
//! created count too, so a burst of `initialize` requests cannot overshoot the cap).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

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
}

impl Book {
    fn release(&mut self, user: &str) {
        if let Some(n) = self.open.get_mut(user) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(user);
            }
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
        *book.open.entry(user.to_owned()).or_insert(0) += 1;
    }

    /// Forgets session `id` (ended by its owner).
    pub(super) fn remove(&self, id: &str) {
        let mut book = self.book();
        if let Some(user) = book.owners.remove(id) {
            book.release(&user);
        }
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
            if let Some(user) = book.owners.remove(&id) {
                book.release(&user);
            }
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
}
