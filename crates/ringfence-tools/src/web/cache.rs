//! Fetched documents, kept briefly per user so that paging through a long page does not
//! fetch it again.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Fetched, FetchedBody, Format};

/// The most bytes of documents the cache holds, all users together.
const MAX_BYTES: usize = 64 << 20;

/// A small cache of rendered documents keyed by user, URL and format; entries expire after
/// `ttl`, and the oldest go first when it holds `capacity` entries or [`MAX_BYTES`].
#[derive(Debug)]
pub struct PageCache {
    ttl: Duration,
    capacity: usize,
    entries: Mutex<VecDeque<Entry>>,
}

#[derive(Debug)]
struct Entry {
    user: String,
    url: String,
    format: Format,
    at: Instant,
    doc: Arc<Fetched>,
}

fn size(doc: &Fetched) -> usize {
    match &doc.body {
        FetchedBody::Text(t) => t.len(),
        FetchedBody::Image { data, .. } => data.len(),
    }
}

impl PageCache {
    pub fn new(ttl: Duration, capacity: usize) -> PageCache {
        PageCache {
            ttl,
            capacity,
            entries: Mutex::new(VecDeque::new()),
        }
    }

    /// The document `user` fetched from `url` in `format`, if it is still fresh.
    pub fn get(&self, user: &str, url: &str, format: Format) -> Option<Arc<Fetched>> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let ttl = self.ttl;
        entries.retain(|e| e.at.elapsed() < ttl);
        entries
            .iter()
            .find(|e| e.user == user && e.url == url && e.format == format)
            .map(|e| e.doc.clone())
    }

    /// Keeps `doc` for `user`, replacing an older copy.
    pub fn put(&self, user: &str, url: &str, format: Format, doc: Arc<Fetched>) {
        if self.capacity == 0 || self.ttl.is_zero() || size(&doc) > MAX_BYTES {
            return;
        }
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.retain(|e| !(e.user == user && e.url == url && e.format == format));
        entries.push_back(Entry {
            user: user.to_owned(),
            url: url.to_owned(),
            format,
            at: Instant::now(),
            doc,
        });
        let mut total: usize = entries.iter().map(|e| size(&e.doc)).sum();
        while entries.len() > self.capacity || total > MAX_BYTES {
            match entries.pop_front() {
                Some(old) => total -= size(&old.doc),
                None => break,
            }
        }
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

    #[test]
    fn entries_are_per_user_and_format_and_the_oldest_go_first() {
        let cache = PageCache::new(Duration::from_secs(60), 2);
        cache.put("ann", "u1", Format::Markdown, doc("a"));
        assert!(cache.get("bob", "u1", Format::Markdown).is_none());
        assert!(cache.get("ann", "u1", Format::Text).is_none());
        assert_eq!(cache.get("ann", "u1", Format::Markdown), Some(doc("a")));
        cache.put("ann", "u2", Format::Markdown, doc("b"));
        cache.put("ann", "u3", Format::Markdown, doc("c"));
        assert!(cache.get("ann", "u1", Format::Markdown).is_none());
        assert!(cache.get("ann", "u3", Format::Markdown).is_some());
    }

    #[test]
    fn entries_expire() {
        let cache = PageCache::new(Duration::from_millis(1), 8);
        cache.put("ann", "u1", Format::Markdown, doc("a"));
        std::thread::sleep(Duration::from_millis(5));
        assert!(cache.get("ann", "u1", Format::Markdown).is_none());
    }
}
