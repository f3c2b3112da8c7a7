//! A before/after picture of the working directory, to report what a task created,
//! modified and deleted (commands change files the edit journal never sees).

use std::collections::BTreeMap;
use std::io::Read;
use std::time::SystemTime;

use ringfence_fs::{Target, WalkOptions, WalkState, walk_sorted};

/// Entries scanned at most.
pub const MAX_ENTRIES: usize = 20_000;
/// Files hashed up to this size (larger ones compare by size and time).
const HASH_UP_TO: u64 = 1 << 20;
/// Paths listed per kind of change.
pub const MAX_LISTED: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    size: u64,
    mtime: Option<SystemTime>,
    hash: Option<[u8; 32]>,
}

/// Files under a directory (relative to it), `.git` skipped.
#[derive(Debug, Default)]
pub struct Snapshot {
    files: BTreeMap<String, Seen>,
    /// The scan stopped at [`MAX_ENTRIES`].
    pub capped: bool,
    /// Why the scan could not run, if it could not.
    pub error: Option<String>,
}

impl Snapshot {
    pub fn take(dir: &Target) -> Snapshot {
        let mut snap = Snapshot::default();
        let opts = WalkOptions {
            respect_ignore_files: false,
            skip_vcs_dirs: true,
            threads: 1,
            report_symlinks: true,
        };
        let prefix = if dir.rel().is_empty() {
            String::new()
        } else {
            format!("{}/", dir.rel())
        };
        let mut count = 0usize;
        let result = walk_sorted(dir, &opts, None, &mut |entry, _| {
            count += 1;
            if count > MAX_ENTRIES {
                snap.capped = true;
                return WalkState::Quit;
            }
            if entry.is_dir() {
                return WalkState::Continue;
            }
            let rel = entry
                .rel
                .strip_prefix(&prefix)
                .unwrap_or(&entry.rel)
                .to_owned();
            let Ok(meta) = entry.metadata() else {
                return WalkState::Continue;
            };
            let size = meta.len();
            let mtime = meta.modified().ok().map(|t| t.into_std());
            let hash = (meta.is_file() && size <= HASH_UP_TO)
                .then(|| {
                    let mut file = entry.open_file().ok()?;
                    let mut buf = Vec::with_capacity(size as usize);
                    file.read_to_end(&mut buf).ok()?;
                    Some(*blake3::hash(&buf).as_bytes())
                })
                .flatten();
            snap.files.insert(rel, Seen { size, mtime, hash });
            WalkState::Continue
        });
        if let Err(e) = result {
            snap.error = Some(e.to_string());
        }
        snap
    }
}

/// What changed between two snapshots.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Changes {
    pub created: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

pub fn compare(before: &Snapshot, after: &Snapshot) -> Changes {
    let mut c = Changes::default();
    for (path, seen) in &after.files {
        match before.files.get(path) {
            None => c.created.push(path.clone()),
            Some(old) => {
                let changed = match (old.hash, seen.hash) {
                    (Some(a), Some(b)) => a != b,
                    _ => old.size != seen.size || old.mtime != seen.mtime,
                };
                if changed {
                    c.modified.push(path.clone());
                }
            }
        }
    }
    for path in before.files.keys() {
        if !after.files.contains_key(path) {
            c.deleted.push(path.clone());
        }
    }
    c
}
