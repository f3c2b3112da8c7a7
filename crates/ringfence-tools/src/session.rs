//! Per-session state: the workspace view and the read tracker behind the read-first gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use ringfence_fs::{Target, Workspace};

/// What was known about a file when this session last read (or wrote) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// BLAKE3 of the whole file content.
    pub hash: [u8; 32],
    pub size: u64,
    pub mtime: Option<SystemTime>,
}

/// Files this session has read, keyed by root and resolved root-relative path (so `a/../b`
/// and `b` and a symlink to `b` are the same file).
#[derive(Debug, Default)]
pub struct ReadTracker {
    records: HashMap<(usize, String), ReadRecord>,
}

fn key(target: &Target) -> (usize, String) {
    (Arc::as_ptr(target.root()) as usize, target.rel().to_owned())
}

impl ReadTracker {
    pub fn record(&mut self, target: &Target, record: ReadRecord) {
        self.records.insert(key(target), record);
    }

    pub fn get(&self, target: &Target) -> Option<&ReadRecord> {
        self.records.get(&key(target))
    }

    pub fn forget(&mut self, target: &Target) {
        self.records.remove(&key(target));
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// One client's session: its roots, current workspace and what it has read.
#[derive(Debug)]
pub struct Session {
    pub workspace: Workspace,
    pub reads: Mutex<ReadTracker>,
}

impl Session {
    pub fn new(workspace: Workspace) -> Session {
        Session {
            workspace,
            reads: Mutex::new(ReadTracker::default()),
        }
    }

    pub fn reads(&self) -> std::sync::MutexGuard<'_, ReadTracker> {
        self.reads.lock().unwrap_or_else(|e| e.into_inner())
    }
}
