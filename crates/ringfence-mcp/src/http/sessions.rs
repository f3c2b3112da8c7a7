//! Who owns each MCP session, and how many each user has open: a session belongs to the user
//! whose `initialize` created it, and one user may hold at most `cap` of them (places being
//! created count too, so a burst of `initialize` requests cannot overshoot the cap). Many
//! clients never end their sessions (no DELETE), so at the cap a new session may still be
//! made while one of the user's sessions is idle (no request or stream of it open); once
//! the new one exists ([`SessionSlot::fill`]), the user's session unused for longest makes
//! way. A request that fails, or is refused before it makes a session, ends nothing. A
//! client that comes back to an ended session is told it is gone (404) and starts anew, as
//! the protocol asks.

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
    /// MCP session id -> its requests and streams open now, and when it was last used.
    usage: HashMap<String, Usage>,
    /// Sessions being ended to make way: no request may adopt them again meanwhile.
    closing: HashSet<String>,
    /// A counter for "last used" (an order, free of clock ties) and for generations.
    tick: u64,
}

#[derive(Debug, Clone, Copy)]
struct Usage {
    open: usize,
    last: u64,
    /// Which recording of the session this is: a use begun before it was forgotten and
    /// recorded again does not count against the new one.
    generation: u64,
}

impl Book {
    fn next(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    fn forget(&mut self, id: &str) {
        self.usage.remove(id);
        if let Some(user) = self.owners.remove(id) {
            self.release(&user);
        }
    }

    /// Records `id` as used now (a new recording when it had none).
    fn touch(&mut self, id: &str) -> &mut Usage {
        let now = self.next();
        let usage = self.usage.entry(id.to_owned()).or_insert(Usage {
            open: 0,
            last: now,
            generation: now,
        });
        usage.last = now;
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

    /// `user`'s session unused for longest among those with no request or stream open,
    /// other than `except`.
    fn idle_of(&self, user: &str, except: Option<&str>) -> Option<String> {
        self.owners
            .iter()
            .filter(|(id, owner)| owner.as_str() == user && Some(id.as_str()) != except)
            .map(|(id, _)| (id, self.usage.get(id)))
            .filter(|(_, usage)| usage.is_none_or(|u| u.open == 0))
            .min_by_key(|(id, usage)| (usage.map(|u| u.last), id.as_str()))
            .map(|(id, _)| id.clone())
    }
}

/// One request or stream of a session, open until dropped: a session in use is never the
/// one that makes way for a new one.
#[derive(Debug)]
pub(super) struct SessionUse {
    book: Arc<SessionBook>,
    id: String,
    generation: u64,
}

impl Drop for SessionUse {
    fn drop(&mut self) {
        let mut book = self.book.book();
        if book
            .usage
            .get(&self.id)
            .is_some_and(|u| u.generation == self.generation)
        {
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
    /// Taken above the cap, against an idle session that makes way once this one exists.
    over: bool,
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

    /// Whether session `id` is being ended to make way (no request may adopt it).
    pub(super) fn is_closing(&self, id: &str) -> bool {
        self.book().closing.contains(id)
    }

    /// Session `id`, ended to make way, is gone everywhere.
    pub(super) fn closed(&self, id: &str) {
        self.book().closing.remove(id);
    }

    /// Sessions `user` has open or being created.
    #[cfg(test)]
    pub(super) fn open(&self, user: &str) -> usize {
        self.book().open.get(user).copied().unwrap_or(0)
    }

    /// A place for a new session of `user`: below the cap, or at it while one of the user's
    /// sessions is idle (it makes way once the new one exists). `Err(sessions open)` when
    /// every one is in use.
    pub(super) fn reserve(self: &Arc<Self>, user: &str) -> Result<SessionSlot, usize> {
        let mut book = self.book();
        let n = book.open.get(user).copied().unwrap_or(0);
        let over = self.cap != 0 && n >= self.cap;
        if over && book.idle_of(user, None).is_none() {
            return Err(n);
        }
        *book.open.entry(user.to_owned()).or_insert(0) += 1;
        Ok(SessionSlot {
            book: self.clone(),
            user: user.to_owned(),
            filled: false,
            over,
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

    /// Forgets session `id` (ended by its owner).
    pub(super) fn remove(&self, id: &str) {
        self.book().forget(id);
    }

    /// A request or stream of session `id` begins; `None` when the session is no longer
    /// known (it was ended meanwhile).
    pub(super) fn begin_use(self: &Arc<Self>, id: &str) -> Option<SessionUse> {
        let mut book = self.book();
        if !book.owners.contains_key(id) {
            return None;
        }
        let usage = book.touch(id);
        usage.open += 1;
        let generation = usage.generation;
        Some(SessionUse {
            book: self.clone(),
            id: id.to_owned(),
            generation,
        })
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
        // A use whose session is gone leaves nothing behind.
        let Book { usage, owners, .. } = &mut *book;
        usage.retain(|id, _| owners.contains_key(id));
    }
}

impl SessionSlot {
    /// The session was created: it is `user`'s now, and keeps its place until it ends. A
    /// place taken above the cap returns the session that makes way for it — the user's
    /// idle one unused for longest, forgotten here and marked closing — for the caller to
    /// end.
    #[must_use = "a session returned here must be ended"]
    pub(super) fn fill(mut self, id: &str) -> Option<String> {
        let mut book = self.book.book();
        if let Some(previous) = book.owners.insert(id.to_owned(), self.user.clone()) {
            // The same id twice (should not happen): count it once.
            book.release(&previous);
        }
        book.touch(id);
        self.filled = true;
        if !self.over {
            return None;
        }
        let oldest = book.idle_of(&self.user, Some(id))?;
        book.forget(&oldest);
        book.closing.insert(oldest.clone());
        Some(oldest)
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
        assert_eq!(a1.fill("s1"), None);
        drop(a2); // its initialize failed: the place is free again
        assert_eq!(book.open("alice"), 1);
        assert_eq!(book.owner("s1").as_deref(), Some("alice"));
        let a3 = book.reserve("alice").unwrap();
        assert_eq!(a3.fill("s2"), None);
        // Both in use: at the cap nothing can make way.
        let (_u1, _u2) = (book.begin_use("s1").unwrap(), book.begin_use("s2").unwrap());
        assert!(book.reserve("alice").is_err());
        drop((_u1, _u2));
        // Ending a session frees its place; an unknown id changes nothing.
        book.remove("s1");
        book.remove("nope");
        assert_eq!(book.open("alice"), 1);
        assert_eq!(book.owner("s1"), None);
        // Sessions that expired are forgotten by the sweep.
        assert_eq!(b1.fill("s3"), None);
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
        let _busy = book.begin_use("s1").unwrap();
        assert!(book.reserve("alice").is_err());
        drop(_busy);
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
            assert_eq!(book.reserve("alice").unwrap().fill(id), None);
        }
        assert_eq!(book.reserve("bob").unwrap().fill("b1"), None);
        // Using s1 (a request that has ended) makes s2 the oldest.
        drop(book.begin_use("s1"));
        // A fourth session at the cap: s2 makes way once s4 exists, not before.
        let slot = book.reserve("alice").unwrap();
        assert_eq!(book.owner("s2").as_deref(), Some("alice"));
        assert_eq!(slot.fill("s4").as_deref(), Some("s2"));
        assert_eq!(book.owner("s2"), None);
        assert!(book.is_closing("s2"));
        assert_eq!(book.open("alice"), 3);
        book.closed("s2");
        assert!(!book.is_closing("s2"));
        // A place taken at the cap and never filled (a refused or failed initialize) ends
        // nothing.
        drop(book.reserve("alice").unwrap());
        assert_eq!(book.open("alice"), 3);
        assert!(["s1", "s3", "s4"].iter().all(|id| book.owner(id).is_some()));
        // A session with a request or stream open is never chosen.
        let stream = book.begin_use("s3").unwrap();
        let call = book.begin_use("s1").unwrap();
        let held = book.begin_use("s4").unwrap();
        assert!(book.reserve("alice").is_err());
        drop(call);
        assert_eq!(
            book.reserve("alice").unwrap().fill("s5").as_deref(),
            Some("s1")
        );
        // Bob's sessions are never Alice's to end.
        assert_eq!(book.owner("b1").as_deref(), Some("bob"));
        // A session ended while in use is not brought back when its use ends, and a use of
        // a session no longer known does not begin.
        book.remove("s3");
        drop(stream);
        assert_eq!(book.owner("s3"), None);
        assert!(!book.book().usage.contains_key("s3"));
        assert!(book.begin_use("s3").is_none());
        drop(held);
        assert_eq!(book.open("alice"), 2);
    }

    #[test]
    fn a_use_of_an_earlier_recording_does_not_count_against_a_new_one() {
        let book = Arc::new(SessionBook::new(0));
        book.adopt("s1", "alice");
        let old = book.begin_use("s1").unwrap();
        book.remove("s1");
        book.adopt("s1", "alice");
        let new = book.begin_use("s1").unwrap();
        drop(old);
        assert_eq!(book.book().usage["s1"].open, 1);
        drop(new);
        assert_eq!(book.book().usage["s1"].open, 0);
    }
}
