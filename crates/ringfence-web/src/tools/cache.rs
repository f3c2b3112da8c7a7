//! Fetched documents, kept briefly per user so that paging through a long page does not
//! fetch it again.
//!
//! Each user has a share of their own: at most [`CacheLimits::entries_per_user`] documents
//! and [`CacheLimits::bytes_per_user`] bytes, and a user's document that does not fit evicts
//! that user's least recently used ones only — one user's fetches never evict another's.
//! All users together hold at most [`CacheLimits::total_bytes`]: when many users' shares
//! exceed it, expired documents go first, then the least recently used documents of the
//! user who used the cache least recently (never the user storing, while anyone else holds
//! something). A user's share is at most the whole cache (checked with the configuration),
//! so one user alone never reaches the global bound.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Fetched, FetchedBody, Format};

/// How much the page cache holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// How long a document is kept (zero turns the cache off).
    pub ttl: Duration,
    /// Documents one user's share holds (zero turns the cache off).
    pub entries_per_user: usize,
    /// Bytes one user's share holds; a larger document is not kept.
    pub bytes_per_user: usize,
    /// Bytes all users' shares hold together.
    pub total_bytes: usize,
}

/// A small cache of rendered documents keyed by user, URL and format (see the module's
/// documentation for who evicts whom).
#[derive(Debug)]
pub struct PageCache {
    limits: CacheLimits,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    users: HashMap<String, Share>,
    /// Bytes of every share.
    bytes: usize,
    /// Counts uses, to order users by their last one.
    clock: u64,
}

/// One user's documents, least recently used first.
#[derive(Debug, Default)]
struct Share {
    entries: VecDeque<Entry>,
    bytes: usize,
    /// The value of the state's clock at this user's last use.
    used: u64,
}

#[derive(Debug)]
struct Entry {
    url: String,
    format: Format,
    at: Instant,
    size: usize,
    doc: Arc<Fetched>,
}

fn size(doc: &Fetched) -> usize {
    match &doc.body {
        FetchedBody::Text(t) => t.len(),
        FetchedBody::Image { data, .. } => data.len(),
    }
}

impl Share {
    /// Removes the entry at `i`; returns its size.
    fn remove(&mut self, i: usize) -> usize {
        let size = self.entries.remove(i).map_or(0, |e| e.size);
        self.bytes -= size;
        size
    }

    /// Removes the entries older than `ttl`; returns the bytes freed.
    fn expire(&mut self, ttl: Duration) -> usize {
        let before = self.bytes;
        self.entries.retain(|e| e.at.elapsed() < ttl);
        self.bytes = self.entries.iter().map(|e| e.size).sum();
        before - self.bytes
    }
}

impl State {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }
}

impl PageCache {
    pub fn new(limits: CacheLimits) -> PageCache {
        PageCache {
            limits,
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The document `user` fetched from `url` in `format`, if it is still fresh.
    pub fn get(&self, user: &str, url: &str, format: Format) -> Option<Arc<Fetched>> {
        let mut state = self.state();
        let now = state.tick();
        let share = state.users.get_mut(user)?;
        let freed = share.expire(self.limits.ttl);
        let found = share
            .entries
            .iter()
            .position(|e| e.url == url && e.format == format);
        let doc = found.map(|i| {
            // Used now: the last to go of this user's.
            let entry = share.entries.remove(i).expect("found above");
            let doc = entry.doc.clone();
            share.entries.push_back(entry);
            share.used = now;
            doc
        });
        let empty = share.entries.is_empty();
        state.bytes -= freed;
        if empty {
            state.users.remove(user);
        }
        doc
    }

    /// Keeps `doc` for `user`, replacing an older copy: within the user's share, their least
    /// recently used documents make room; beyond the global bound, other users' (see the
    /// module's documentation).
    pub fn put(&self, user: &str, url: &str, format: Format, doc: Arc<Fetched>) {
        let limits = self.limits;
        let size = size(&doc);
        if limits.entries_per_user == 0
            || limits.ttl.is_zero()
            || size > limits.bytes_per_user
            || size > limits.total_bytes
        {
            return;
        }
        let mut state = self.state();
        let now = state.tick();
        let share = state.users.entry(user.to_owned()).or_default();
        share.used = now;
        let mut freed = share.expire(limits.ttl);
        if let Some(i) = share
            .entries
            .iter()
            .position(|e| e.url == url && e.format == format)
        {
            freed += share.remove(i);
        }
        while !share.entries.is_empty()
            && (share.entries.len() >= limits.entries_per_user
                || share.bytes + size > limits.bytes_per_user)
        {
            freed += share.remove(0);
        }
        share.entries.push_back(Entry {
            url: url.to_owned(),
            format,
            at: Instant::now(),
            size,
            doc,
        });
        share.bytes += size;
        state.bytes = state.bytes - freed + size;
        if state.bytes > limits.total_bytes {
            self.make_room(&mut state, user);
        }
    }

    /// Brings all shares within the global bound: expired documents first, then the least
    /// recently used user's oldest, sparing `storing` while anyone else holds something.
    fn make_room(&self, state: &mut State, storing: &str) {
        let ttl = self.limits.ttl;
        let freed: usize = state.users.values_mut().map(|s| s.expire(ttl)).sum();
        state.bytes -= freed;
        while state.bytes > self.limits.total_bytes {
            let victim = state
                .users
                .iter()
                .filter(|(u, s)| u.as_str() != storing && !s.entries.is_empty())
                .min_by_key(|(_, s)| s.used)
                .map(|(u, _)| u.clone());
            let Some(victim) = victim else { break };
            let share = state.users.get_mut(&victim).expect("found above");
            let freed = share.remove(0);
            state.bytes -= freed;
        }
        state.users.retain(|_, s| !s.entries.is_empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(text: &str) -> Arc<Fetched> {
        Arc::new(Fetched {
            url: "https://example.com/".into(),
            content_type: "text/html".into(),
            title: None,
            body: FetchedBody::Text(text.into()),
            notices: Vec::new(),
        })
    }

    fn cache(entries_per_user: usize, bytes_per_user: usize, total_bytes: usize) -> PageCache {
        PageCache::new(CacheLimits {
            ttl: Duration::from_secs(60),
            entries_per_user,
            bytes_per_user,
            total_bytes,
        })
    }

    #[test]
    fn entries_are_per_user_and_format_and_the_least_recently_used_go_first() {
        let cache = cache(2, 1000, 10_000);
        cache.put("ann", "u1", Format::Markdown, doc("a"));
        assert!(cache.get("bob", "u1", Format::Markdown).is_none());
        assert!(cache.get("ann", "u1", Format::Text).is_none());
        assert_eq!(cache.get("ann", "u1", Format::Markdown), Some(doc("a")));
        cache.put("ann", "u2", Format::Markdown, doc("b"));
        // Reading u1 again leaves u2 the least recently used of Ann's two.
        assert!(cache.get("ann", "u1", Format::Markdown).is_some());
        cache.put("ann", "u3", Format::Markdown, doc("c"));
        assert!(cache.get("ann", "u2", Format::Markdown).is_none());
        assert!(cache.get("ann", "u1", Format::Markdown).is_some());
        assert!(cache.get("ann", "u3", Format::Markdown).is_some());
    }

    /// Issue 29: one shared 64-entry pool let one user evict everyone's pages.
    #[test]
    fn one_users_fetches_never_evict_another_users_pages() {
        let cache = cache(4, 400, 10_000);
        cache.put("ann", "mine", Format::Markdown, doc("ann's page"));
        for i in 0..100 {
            cache.put(
                "bob",
                &format!("u{i}"),
                Format::Markdown,
                doc(&"x".repeat(90)),
            );
        }
        assert_eq!(
            cache.get("ann", "mine", Format::Markdown),
            Some(doc("ann's page"))
        );
        // Bob kept his last four (his entry bound), within his 400 bytes.
        let kept: Vec<usize> = (0..100)
            .filter(|i| {
                cache
                    .get("bob", &format!("u{i}"), Format::Markdown)
                    .is_some()
            })
            .collect();
        assert_eq!(kept, [96, 97, 98, 99]);
        // A document larger than a share is not kept at all.
        cache.put("bob", "big", Format::Markdown, doc(&"x".repeat(401)));
        assert!(cache.get("bob", "big", Format::Markdown).is_none());
        assert!(cache.get("bob", "u99", Format::Markdown).is_some());
    }

    #[test]
    fn beyond_the_global_bound_the_least_recently_used_user_gives_way() {
        // Shares of 100 bytes, 250 for everyone: the third user's page overflows it.
        let cache = cache(8, 100, 250);
        cache.put("ann", "a1", Format::Markdown, doc(&"a".repeat(50)));
        cache.put("ann", "a2", Format::Markdown, doc(&"a".repeat(50)));
        cache.put("bob", "b1", Format::Markdown, doc(&"b".repeat(100)));
        // Ann is more recent than Bob now.
        assert!(cache.get("ann", "a2", Format::Markdown).is_some());
        cache.put("cy", "c1", Format::Markdown, doc(&"c".repeat(60)));
        assert!(
            cache.get("bob", "b1", Format::Markdown).is_none(),
            "Bob's went"
        );
        assert!(cache.get("ann", "a1", Format::Markdown).is_some());
        assert!(cache.get("ann", "a2", Format::Markdown).is_some());
        assert!(cache.get("cy", "c1", Format::Markdown).is_some());
    }

    #[test]
    fn entries_expire() {
        let cache = PageCache::new(CacheLimits {
            ttl: Duration::from_millis(1),
            entries_per_user: 8,
            bytes_per_user: 1000,
            total_bytes: 1000,
        });
        cache.put("ann", "u1", Format::Markdown, doc("a"));
        std::thread::sleep(Duration::from_millis(5));
        assert!(cache.get("ann", "u1", Format::Markdown).is_none());
    }
}
