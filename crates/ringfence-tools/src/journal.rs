//! The edit journal behind `undo_edit`: every write and edit ringfence makes records what the
//! file held before and a hash of what ringfence left, so an undo can restore the previous
//! version — but only while the file still holds exactly what ringfence wrote.
//!
//! The trait is implemented by `ringfence-store` (SQLite under the data directory, kept
//! across restarts) and here by [`MemoryJournal`] (tests, embedding without a database).

use std::collections::HashMap;
use std::sync::Mutex;

use ringfence_fs::Target;

use crate::tool::ToolContext;

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
    /// The file's bytes before; `None` if it did not exist.
    pub before: Option<Vec<u8>>,
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

/// Where edits are journaled. Errors are strings: a journal failure is logged and reported,
/// never allowed to fail the edit that already happened.
pub trait Journal: Send + Sync + std::fmt::Debug {
    /// Records a change (the newest for its file), dropping the oldest beyond the history
    /// bound.
    fn record(&self, entry: JournalEntry) -> Result<(), String>;
    /// The newest change of a file.
    fn latest(&self, key: &FileKey) -> Result<Option<JournalRecord>, String>;
    /// Forgets one change (after it was undone).
    fn remove(&self, id: i64) -> Result<(), String>;
    /// How many changes of a file are kept.
    fn depth(&self, key: &FileKey) -> Result<usize, String>;
    /// Waits until every recorded change is stored (journals that store in the background
    /// must, before the process exits).
    fn flush(&self) {}
}

/// Changes kept per file.
pub const HISTORY_PER_FILE: usize = 20;
/// Files larger than this are not journaled (their previous version is not kept).
pub const MAX_JOURNALED_BYTES: usize = 16 * 1024 * 1024;

/// A journal in memory: lost when the process ends.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    inner: Mutex<(i64, HashMap<FileKey, Vec<JournalRecord>>)>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Journal for MemoryJournal {
    fn record(&self, entry: JournalEntry) -> Result<(), String> {
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

    fn latest(&self, key: &FileKey) -> Result<Option<JournalRecord>, String> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(g.1.get(key).and_then(|l| l.last().cloned()))
    }

    fn remove(&self, id: i64) -> Result<(), String> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for list in g.1.values_mut() {
            list.retain(|r| r.id != id);
        }
        Ok(())
    }

    fn depth(&self, key: &FileKey) -> Result<usize, String> {
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        Ok(g.1.get(key).map_or(0, Vec::len))
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

/// Journals a change a tool just made to `target` (`after`: what it left, `None` if it
/// deleted the file; `mode`: the file's permission bits before). Returns a note for the
/// result when the change could not be kept.
pub(crate) fn note(
    ctx: &ToolContext,
    target: &Target,
    tool: &str,
    before: Before<'_>,
    after: Option<&[u8]>,
    mode: Option<u32>,
) -> Option<String> {
    let journal = ctx.journal.as_ref()?;
    let before = match before {
        Before::NotKept => {
            return Some(format!(
                "The previous version was not kept for undo_edit (files above {} MiB are not journaled).",
                MAX_JOURNALED_BYTES >> 20
            ));
        }
        Before::Absent => None,
        Before::Content(b) => Some(b.to_vec()),
    };
    let entry = JournalEntry {
        key: FileKey::of(target),
        tool: tool.to_owned(),
        before,
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
