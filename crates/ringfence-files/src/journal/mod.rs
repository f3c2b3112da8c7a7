//! The edit journal behind `undo_edit`: every write and edit ringfence makes records what the
//! file held before and a hash of what ringfence left, so an undo can restore the previous
//! version — but only while the file still holds exactly what ringfence wrote.
//!
//! The trait is implemented by [`QueuedJournal`] over the database's rows (`ringfence.db`
//! under the data directory, kept across restarts, or PostgreSQL's table) and by
//! [`MemoryJournal`] (tests, embedding without a database).

pub mod pg;
pub mod sqlite;

pub use sqlite::{JournalRows, QueuedJournal, SqliteJournalRows};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ringfence_fs::Target;

pub use ringfence_core::error::BackendError as JournalError;

/// Identifies a file across restarts and across roots: its absolute path, spelled from the
/// root as configured (so a file reached through a narrowed sub-root and through its
/// configured root is one file).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileKey {
    pub path: String,
}

impl FileKey {
    pub fn of(target: &Target) -> FileKey {
        FileKey {
            path: target.absolute().display().to_string(),
        }
    }
}

/// One change, as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    pub key: FileKey,
    /// The tool that made the change.
    pub tool: String,
    /// The file's bytes before; `None` if it did not exist. With `patch`, only the part that
    /// differs from what ringfence left.
    pub before: Option<Vec<u8>>,
    /// `(prefix, suffix)`: `before` holds only the middle of the earlier version; the first
    /// `prefix` and last `suffix` bytes are those of the version ringfence left (which undo
    /// checks by hash anyway). An edit of one line in a 10 MB file journals a few bytes.
    pub patch: Option<(u64, u64)>,
    /// BLAKE3 of the bytes ringfence left; `None` if it deleted the file.
    pub after_hash: Option<[u8; 32]>,
    /// The file's permission bits before, when it existed (restored if undo recreates it).
    pub mode: Option<u32>,
}

/// A recorded change with its id and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRecord {
    pub id: i64,
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    pub entry: JournalEntry,
}

/// Where edits are journaled. A journal failure is logged and reported, never allowed to
/// fail the edit that already happened.
pub trait Journal: Send + Sync + std::fmt::Debug {
    /// Records a change (the newest for its file), dropping the oldest beyond the history
    /// bound.
    fn record(&self, entry: JournalEntry) -> Result<(), JournalError>;
    /// The newest change of a file.
    fn latest(&self, key: &FileKey) -> Result<Option<JournalRecord>, JournalError>;
    /// Forgets one change (after it was undone).
    fn remove(&self, id: i64) -> Result<(), JournalError>;
    /// How many changes of a file are kept.
    fn depth(&self, key: &FileKey) -> Result<usize, JournalError>;
    /// Waits until every recorded change is stored (journals that store in the background
    /// must, before the process exits).
    fn flush(&self) {}
}

/// Changes kept per file.
pub const HISTORY_PER_FILE: usize = 20;
/// Files larger than this are not journaled (their previous version is not kept).
pub const MAX_JOURNALED_BYTES: usize = 16 * 1024 * 1024;

/// A journal in memory: lost when the process ends.
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patches_keep_only_the_changed_middle_and_rebuild_exactly() {
        for (before, after) in [
            (&b"hello world"[..], &b"hello there world"[..]),
            (b"abcabc", b"abc"),
            (b"abc", b"abcabc"),
            (b"same", b"same"),
            (b"", b"new"),
            (b"x", b"y"),
            (b"aaaa", b"aa"),
        ] {
            // Also long inputs that exercise the block comparison.
            let long_before: Vec<u8> = [before, &[b'-'; 200][..], before].concat();
            let long_after: Vec<u8> = [after, &[b'-'; 200][..], after].concat();
            let (p, s) = common_ends(&long_before, &long_after);
            assert!(p + s <= long_before.len().min(long_after.len()));
            let entry = JournalEntry {
                key: FileKey { path: "/f".into() },
                tool: "t".into(),
                before: Some(long_before[p..long_before.len() - s].to_vec()),
                patch: Some((p as u64, s as u64)),
                after_hash: None,
                mode: None,
            };
            assert_eq!(
                earlier_version(&entry, Some(&long_after)),
                Some(long_before.clone())
            );
            let (p, s) = common_ends(before, after);
            assert!(p + s <= before.len().min(after.len()));
            let entry = JournalEntry {
                key: FileKey { path: "/f".into() },
                tool: "t".into(),
                before: Some(before[p..before.len() - s].to_vec()),
                patch: Some((p as u64, s as u64)),
                after_hash: None,
                mode: None,
            };
            assert_eq!(
                earlier_version(&entry, Some(after)).as_deref(),
                Some(before),
                "{before:?} -> {after:?}"
            );
        }
    }
}

#[derive(Debug, Default)]
pub struct MemoryJournal {
    inner: Mutex<(i64, HashMap<FileKey, Vec<JournalRecord>>)>,
}

use ringfence_core::time::now_ms;

impl Journal for MemoryJournal {
    fn record(&self, entry: JournalEntry) -> Result<(), JournalError> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.0 += 1;
        let id = g.0;
        let list = g.1.entry(entry.key.clone()).or_default();
        list.push(JournalRecord {
            id,
            at_ms: now_ms(),
            entry,
        });
        if list.len() > HISTORY_PER_FILE {
            list.remove(0);
        }
        Ok(())
    }

    fn latest(&self, key: &FileKey) -> Result<Option<JournalRecord>, JournalError> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(g.1.get(key).and_then(|l| l.last().cloned()))
    }

    fn remove(&self, id: i64) -> Result<(), JournalError> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for list in g.1.values_mut() {
            list.retain(|r| r.id != id);
        }
        Ok(())
    }

    fn depth(&self, key: &FileKey) -> Result<usize, JournalError> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(g.1.get(key).map_or(0, Vec::len))
    }
}

/// Lengths of the common prefix and suffix of `a` and `b` (not overlapping in either).
/// Compares in 64-byte blocks (memcmp) first: megabytes cost microseconds.
fn common_ends(a: &[u8], b: &[u8]) -> (usize, usize) {
    const BLOCK: usize = 64;
    let max = a.len().min(b.len());
    let mut prefix = 0;
    while prefix + BLOCK <= max && a[prefix..prefix + BLOCK] == b[prefix..prefix + BLOCK] {
        prefix += BLOCK;
    }
    while prefix < max && a[prefix] == b[prefix] {
        prefix += 1;
    }
    let rest = max - prefix;
    let (ea, eb) = (a.len(), b.len());
    let mut suffix = 0;
    while suffix + BLOCK <= rest
        && a[ea - suffix - BLOCK..ea - suffix] == b[eb - suffix - BLOCK..eb - suffix]
    {
        suffix += BLOCK;
    }
    while suffix < rest && a[ea - suffix - 1] == b[eb - suffix - 1] {
        suffix += 1;
    }
    (prefix, suffix)
}

/// The earlier version of a file from a journal entry and what the file holds now (which
/// must be what ringfence left: the caller checked the hash).
pub fn earlier_version(entry: &JournalEntry, current: Option<&[u8]>) -> Option<Vec<u8>> {
    let middle = entry.before.as_ref()?;
    match (entry.patch, current) {
        (None, _) => Some(middle.clone()),
        (Some((prefix, suffix)), Some(cur)) => {
            let (p, s) = (prefix as usize, suffix as usize);
            if p + s > cur.len() {
                return None;
            }
            let mut out = Vec::with_capacity(p + middle.len() + s);
            out.extend_from_slice(&cur[..p]);
            out.extend_from_slice(middle);
            out.extend_from_slice(&cur[cur.len() - s..]);
            Some(out)
        }
        (Some(_), None) => None,
    }
}

/// What a file held before a change, as far as the journal is concerned.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Before<'a> {
    /// The file did not exist.
    Absent,
    Content(&'a [u8]),
    /// It existed but was too large to keep.
    NotKept,
}

impl<'a> Before<'a> {
    /// The bytes of an existing file, or `NotKept` if they are too many to journal.
    pub fn of(bytes: &'a [u8]) -> Before<'a> {
        if bytes.len() > MAX_JOURNALED_BYTES {
            Before::NotKept
        } else {
            Before::Content(bytes)
        }
    }
}

/// The journal the file tools that change files record into, if any: held by each of those
/// tools (given when the files family is built). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Journaling(Option<Arc<dyn Journal>>);

impl Journaling {
    /// Changes are recorded in `journal`.
    pub fn to(journal: Arc<dyn Journal>) -> Journaling {
        Journaling(Some(journal))
    }

    /// Changes are not recorded (undo_edit then says the journal is unavailable).
    pub fn off() -> Journaling {
        Journaling(None)
    }

    /// The journal, if changes are recorded.
    pub fn journal(&self) -> Option<&Arc<dyn Journal>> {
        self.0.as_ref()
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// Journals a change a tool just made to `target` (`after`: what it left, `None` if it
    /// deleted the file; `mode`: the file's permission bits before). Returns a note for the
    /// result when the change could not be kept.
    pub(crate) fn note(
        &self,
        target: &Target,
        tool: &str,
        before: Before<'_>,
        after: Option<&[u8]>,
        mode: Option<u32>,
    ) -> Option<String> {
        note(self.0.as_ref()?, target, tool, before, after, mode)
    }
}

fn note(
    journal: &Arc<dyn Journal>,
    target: &Target,
    tool: &str,
    before: Before<'_>,
    after: Option<&[u8]>,
    mode: Option<u32>,
) -> Option<String> {
    // Keep only what differs: the common prefix and suffix are in the file ringfence left.
    let (before, patch) = match before {
        Before::NotKept => {
            return Some(format!(
                "The previous version was not kept for undo_edit (files above {} MiB are not journaled).",
                MAX_JOURNALED_BYTES >> 20
            ));
        }
        Before::Absent => (None, None),
        Before::Content(b) => match after {
            Some(a) => {
                let (prefix, suffix) = common_ends(b, a);
                if prefix + suffix > 0 {
                    (
                        Some(b[prefix..b.len() - suffix].to_vec()),
                        Some((prefix as u64, suffix as u64)),
                    )
                } else {
                    (Some(b.to_vec()), None)
                }
            }
            None => (Some(b.to_vec()), None),
        },
    };
    let entry = JournalEntry {
        key: FileKey::of(target),
        tool: tool.to_owned(),
        before,
        patch,
        after_hash: after.map(|a| *blake3::hash(a).as_bytes()),
        mode,
    };
    match journal.record(entry) {
        Ok(()) => None,
        Err(e) => {
            tracing::error!(error = %e, "edit journal write failed");
            Some("The change could not be journaled, so undo_edit cannot revert it.".to_owned())
        }
    }
}
