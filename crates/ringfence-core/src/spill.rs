//! Spill files: when a cap cuts an output, the full output is saved here and the notice
//! prints the path, which read_file and grep can open (the spill root is a read-only root of
//! every session).

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ringfence_fs::Root;

use crate::error::{ToolError, ToolErrorKind, ToolResult};

/// Where full outputs are saved: `<data dir>/tool-output/<uuid>` (one directory per
/// configuration and user in a server).
///
/// The files of one store may take at most its quota ([`SpillStore::with_quota`], `[limits]
/// spill_quota_mb` per user) on disk together. A file that would go past it makes room by
/// deleting the store's oldest finished files first; files still being written are never
/// deleted, and what does not fit in what is left is cut off (the writer says so, and the
/// notice tells the model). The store counts what it writes itself, from the files it
/// found in its directory when it first saved, and reads the directory again when it runs
/// out of files to delete, so files another process added are counted then.
#[derive(Debug)]
pub struct SpillStore {
    root: Arc<Root>,
    quota: u64,
    ledger: Arc<Mutex<Ledger>>,
}

/// What a store's directory holds, as far as the store knows.
#[derive(Debug, Default)]
struct Ledger {
    /// Finished files, oldest first, with their sizes; `None` until the directory was read.
    kept: Option<VecDeque<(String, u64)>>,
    kept_bytes: u64,
    /// Files being written, with the bytes given to each so far.
    writing: HashMap<String, u64>,
}

impl Ledger {
    fn used(&self) -> u64 {
        self.kept_bytes + self.writing.values().sum::<u64>()
    }

    /// Reads the directory: every regular file not being written here is a finished one,
    /// oldest (by modification time) first.
    fn read(&mut self, dir: &cap_std::fs::Dir) {
        let mut found: Vec<(std::time::SystemTime, String, u64)> = Vec::new();
        if let Ok(entries) = dir.entries() {
            for entry in entries.flatten() {
                let Ok(meta) = entry.metadata() else { continue };
                let name = entry.file_name().to_string_lossy().into_owned();
                if !meta.is_file() || self.writing.contains_key(&name) {
                    continue;
                }
                let modified = meta
                    .modified()
                    .map(|t| t.into_std())
                    .unwrap_or(std::time::UNIX_EPOCH);
                found.push((modified, name, meta.len()));
            }
        }
        found.sort();
        self.kept_bytes = found.iter().map(|(_, _, len)| len).sum();
        self.kept = Some(found.into_iter().map(|(_, n, len)| (n, len)).collect());
    }

    /// Deletes the oldest finished file; false when there is none (known).
    fn evict_oldest(&mut self, dir: &cap_std::fs::Dir) -> bool {
        let Some((name, len)) = self.kept.as_mut().and_then(VecDeque::pop_front) else {
            return false;
        };
        self.kept_bytes -= len;
        match dir.remove_file(&name) {
            Ok(()) => tracing::debug!(bytes = len, "deleted an old saved output for the quota"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %e, "an old saved output could not be deleted"),
        }
        true
    }

    /// Grants up to `n` more bytes to the file `name` being written under `quota`, deleting
    /// the oldest finished files as needed; returns how many were granted.
    fn reserve(&mut self, dir: &cap_std::fs::Dir, name: &str, n: u64, quota: u64) -> u64 {
        if self.kept.is_none() {
            self.read(dir);
        }
        let mut read_again = true;
        while self.used().saturating_add(n) > quota {
            if self.evict_oldest(dir) {
                continue;
            }
            if !read_again {
                break;
            }
            // Nothing known is left to delete: others may have written meanwhile.
            read_again = false;
            self.read(dir);
        }
        let granted = n.min(quota.saturating_sub(self.used()));
        *self.writing.entry(name.to_owned()).or_default() += granted;
        granted
    }

    /// The file `name` is kept: it counts as finished, newest.
    fn keep(&mut self, name: &str) {
        let len = self.writing.remove(name).unwrap_or(0);
        if let Some(kept) = &mut self.kept {
            kept.push_back((name.to_owned(), len));
            self.kept_bytes += len;
        }
    }
}

impl SpillStore {
    /// `root` must be the internal tool-output root (also given to sessions, read-only).
    /// No quota until [`SpillStore::with_quota`] sets one.
    pub fn new(root: Arc<Root>) -> SpillStore {
        SpillStore {
            root,
            quota: u64::MAX,
            ledger: Arc::default(),
        }
    }

    /// Bounds the bytes of this store's files together (see the type's documentation).
    pub fn with_quota(mut self, bytes: u64) -> SpillStore {
        self.quota = bytes;
        self
    }

    pub fn root(&self) -> &Arc<Root> {
        &self.root
    }

    /// Starts a spill file; returns a writer and the absolute path to print.
    pub fn create(&self) -> ToolResult<SpillWriter> {
        let dir = self.root.dir().map_err(ToolError::from)?;
        let name = uuid::Uuid::new_v4().to_string();
        // A saved output holds what a tool read: private to the server's account, like
        // everything under the data directory (the umask does not widen or decide it).
        let mut opts = cap_std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        // (Windows: no mode bits; the file takes the data directory's access list.)
        #[cfg(unix)]
        cap_std::fs::OpenOptionsExt::mode(&mut opts, ringfence_fs::PRIVATE_FILE_MODE);
        let file = dir.open_with(&name, &opts).map_err(|e| {
            ToolError::new(
                ToolErrorKind::Io,
                format!("could not save the full output: {e}"),
            )
        })?;
        self.ledger().writing.insert(name.clone(), 0);
        Ok(SpillWriter {
            file: Some(std::io::BufWriter::with_capacity(
                64 * 1024,
                file.into_std(),
            )),
            path: self.root.absolute_path().join(&name),
            dir,
            name,
            kept: false,
            quota: self.quota,
            ledger: self.ledger.clone(),
            written: 0,
            cut: false,
        })
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        lock(&self.ledger)
    }

    /// Deletes spill files last modified more than `max_age` ago, here and in the
    /// directories up to two levels beneath (per configuration, per user); returns how many.
    /// Called at start-up, so saved outputs outlive the session that made them but do not
    /// pile up.
    pub fn prune(&self, max_age: std::time::Duration) -> usize {
        let Ok(dir) = self.root.dir() else {
            return 0;
        };
        prune_dir(&dir, max_age, 2)
    }

    /// Saves `text` whole (up to the quota) and returns where.
    pub fn save(&self, text: &str) -> ToolResult<Saved> {
        let mut w = self.create()?;
        w.write(text.as_bytes())?;
        w.finish()
    }
}

fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|e| e.into_inner())
}

/// A spill file being written. Unless [`SpillWriter::finish`] keeps it, the file is removed
/// when the writer goes (a call that failed or was cancelled half-way leaves nothing behind).
pub struct SpillWriter {
    /// `None` only while the writer is being dropped.
    file: Option<std::io::BufWriter<std::fs::File>>,
    path: PathBuf,
    dir: Arc<ringfence_fs::Dir>,
    name: String,
    /// Set by `finish`: the file stays.
    kept: bool,
    quota: u64,
    ledger: Arc<Mutex<Ledger>>,
    /// Bytes written (given to the file).
    written: u64,
    /// The quota cut this file: nothing more is written to it.
    cut: bool,
}

impl Drop for SpillWriter {
    fn drop(&mut self) {
        if !self.kept {
            drop(self.file.take());
            let _ = self.dir.remove_file(&self.name);
            lock(&self.ledger).writing.remove(&self.name);
        }
    }
}

impl SpillWriter {
    fn file(&mut self) -> &mut std::io::BufWriter<std::fs::File> {
        self.file.as_mut().expect("present until dropped")
    }

    /// Appends `bytes`, as far as the quota allows: past it the file is cut (and stays cut;
    /// [`Saved::cut`] says so), which is not an error.
    pub fn write(&mut self, bytes: &[u8]) -> ToolResult<()> {
        if self.cut || bytes.is_empty() {
            return Ok(());
        }
        let granted =
            lock(&self.ledger).reserve(&self.dir, &self.name, bytes.len() as u64, self.quota);
        let part = &bytes[..granted as usize];
        if granted < bytes.len() as u64 {
            self.cut = true;
        }
        self.written += granted;
        self.file().write_all(part).map_err(|e| {
            ToolError::new(
                ToolErrorKind::Io,
                format!("could not save the full output: {e}"),
            )
        })
    }

    /// Drops a spill that is no longer wanted, removing its file.
    pub fn discard(self) {
        drop(self);
    }

    /// Writes out what is buffered and keeps the file; returns where it is and whether the
    /// quota cut it. On an error the file is removed.
    pub fn finish(mut self) -> ToolResult<Saved> {
        self.file().flush().map_err(|e| {
            ToolError::new(
                ToolErrorKind::Io,
                format!("could not save the full output: {e}"),
            )
        })?;
        self.kept = true;
        lock(&self.ledger).keep(&self.name);
        Ok(Saved {
            path: std::mem::take(&mut self.path),
            cut: self.cut.then_some(Cut {
                saved: self.written,
                quota: self.quota,
            }),
        })
    }
}

/// A saved full output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Saved {
    /// The absolute path to print.
    pub path: PathBuf,
    /// Set when the quota cut the output short.
    pub cut: Option<Cut>,
}

/// Where the quota cut a saved output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// Bytes saved (the beginning of the output).
    pub saved: u64,
    /// The quota, in bytes.
    pub quota: u64,
}

impl Cut {
    fn quota_text(&self) -> String {
        if self.quota.is_multiple_of(1 << 20) {
            format!("{} MiB", self.quota >> 20)
        } else {
            format!("{} bytes", self.quota)
        }
    }

    /// Why the saved file is shorter than the output.
    pub fn note(&self) -> String {
        format!(
            "only the first {} bytes were saved: each user's saved outputs may take {} together ([limits] spill_quota_mb), the oldest deleted first to make room, and this one did not fit",
            self.saved,
            self.quota_text()
        )
    }
}

impl Saved {
    /// The notice naming the file, and when the quota cut it, what it holds and why.
    pub fn notice(&self) -> String {
        match &self.cut {
            None => saved_notice(&self.path),
            Some(cut) => format!(
                "The output was cut when saved to {}: {}. Use read_file with offset/limit to access specific sections.",
                self.path.display(),
                cut.note()
            ),
        }
    }
}

/// The second line of every truncation notice.
pub fn saved_notice(path: &std::path::Path) -> String {
    format!(
        "Full output saved to {}. Use read_file with offset/limit to access specific sections.",
        path.display()
    )
}

fn prune_dir(dir: &cap_std::fs::Dir, max_age: std::time::Duration, depth: usize) -> usize {
    let Ok(entries) = dir.entries() else {
        return 0;
    };
    let now = std::time::SystemTime::now();
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else {
            continue;
        };
        if meta.is_dir() && depth > 0 {
            if let Ok(sub) = entry.open_dir() {
                removed += prune_dir(&sub, max_age, depth - 1);
            }
            continue;
        }
        let old = meta.is_file()
            && meta
                .modified()
                .ok()
                .and_then(|t| now.duration_since(t.into_std()).ok())
                .is_some_and(|age| age > max_age);
        if old && entry.remove_file().is_ok() {
            removed += 1;
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringfence_fs::{Access, Denylist, RootOrigin, RootSpec};

    /// A store over `<dir>/<user>` with `quota` bytes.
    fn store(dir: &std::path::Path, user: &str, quota: u64) -> SpillStore {
        let root = Root::new(
            RootSpec {
                path: dir.join(user),
                access: Access::ReadOnly,
                origin: RootOrigin::Internal,
                label: "tool-output".into(),
            },
            Arc::new(Denylist::empty()),
        )
        .unwrap();
        SpillStore::new(Arc::new(root)).with_quota(quota)
    }

    /// The names of the store's files and their sizes, sorted by name.
    fn files(store: &SpillStore) -> Vec<(String, u64)> {
        let dir = store.root().dir().unwrap();
        let mut found: Vec<(String, u64)> = dir
            .entries()
            .unwrap()
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, e.metadata().unwrap().len())
            })
            .collect();
        found.sort();
        found
    }

    fn name(saved: &Saved) -> String {
        saved
            .path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned()
    }

    fn names(saved: &[&Saved]) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = saved.iter().map(|s| (name(s), 300)).collect();
        v.sort();
        v
    }

    /// Issue 29: saved output had no per-user bound. A user's new output makes room by
    /// deleting that user's oldest; another user's files are never touched.
    #[test]
    fn a_users_oldest_saved_outputs_go_first_and_other_users_keep_theirs() {
        let dir = tempfile::tempdir().unwrap();
        let ann = store(dir.path(), "ann", 1000);
        let bob = store(dir.path(), "bob", 1000);
        let bobs = bob.save(&"b".repeat(300)).unwrap();
        let text = "a".repeat(300);
        let first = ann.save(&text).unwrap();
        let second = ann.save(&text).unwrap();
        let third = ann.save(&text).unwrap();
        assert_eq!(files(&ann), names(&[&first, &second, &third]));
        // The fourth does not fit beside the three: the oldest goes, the rest stay.
        let fourth = ann.save(&text).unwrap();
        assert_eq!(fourth.cut, None);
        assert_eq!(files(&ann), names(&[&second, &third, &fourth]));
        // Seven more: only the newest three of Ann's are left, Bob's is untouched.
        let mut last = Vec::new();
        for _ in 0..7 {
            last.push(ann.save(&text).unwrap());
        }
        let newest: Vec<&Saved> = last.iter().skip(4).collect();
        assert_eq!(files(&ann), names(&newest));
        assert_eq!(files(&bob), names(&[&bobs]));
    }

    /// The files a store finds when it starts (saved by an earlier run) count, oldest by
    /// modification time first.
    #[test]
    fn files_found_at_the_start_count_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        let earlier = store(dir.path(), "ann", 1000);
        let old = earlier.save(&"o".repeat(400)).unwrap();
        let young = earlier.save(&"y".repeat(400)).unwrap();
        // Make the first saved the younger by its time: order is by time, not by name.
        let d = earlier.root().dir().unwrap();
        let set = |n: &str, secs: u64| {
            let f = d
                .open_with(n, cap_std::fs::OpenOptions::new().write(true))
                .unwrap()
                .into_std();
            f.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
                .unwrap();
        };
        set(&name(&old), 2_000_000_000);
        set(&name(&young), 1_000_000_000);
        drop(earlier);
        let later = store(dir.path(), "ann", 1000);
        let new = later.save(&"n".repeat(400)).unwrap();
        let mut left = vec![(name(&old), 400), (name(&new), 400)];
        left.sort();
        assert_eq!(files(&later), left);
    }

    /// An output larger than the whole quota is cut at it, after the user's older outputs
    /// made room, and the notice says so and why.
    #[test]
    fn an_output_larger_than_the_quota_is_cut_at_it_with_a_notice() {
        let dir = tempfile::tempdir().unwrap();
        let ann = store(dir.path(), "ann", 1000);
        ann.save(&"a".repeat(300)).unwrap();
        ann.save(&"a".repeat(300)).unwrap();
        let mut w = ann.create().unwrap();
        for _ in 0..5 {
            w.write(&[b'x'; 400]).unwrap();
        }
        let saved = w.finish().unwrap();
        assert_eq!(
            saved.cut,
            Some(Cut {
                saved: 1000,
                quota: 1000
            })
        );
        assert_eq!(files(&ann), [(name(&saved), 1000)]);
        let notice = saved.notice();
        assert!(
            notice.contains("only the first 1000 bytes were saved")
                && notice.contains("[limits] spill_quota_mb")
                && notice.contains(&saved.path.display().to_string()),
            "{notice}"
        );
        // Within the quota the notice is the usual one.
        let small = store(dir.path(), "bob", 1000).save("short").unwrap();
        assert_eq!(small.notice(), saved_notice(&small.path));
    }

    /// A file still being written is never deleted to make room for another: the newcomer
    /// is cut instead. A writer dropped without finishing gives its bytes back.
    #[test]
    fn files_being_written_are_never_evicted() {
        let dir = tempfile::tempdir().unwrap();
        let ann = store(dir.path(), "ann", 1000);
        let mut long = ann.create().unwrap();
        long.write(&[b'l'; 800]).unwrap();
        let second = ann.save(&"s".repeat(300)).unwrap();
        assert_eq!(second.cut.map(|c| c.saved), Some(200));
        let long = long.finish().unwrap();
        assert_eq!(long.cut, None);
        let mut left = vec![(name(&long), 800), (name(&second), 200)];
        left.sort();
        assert_eq!(files(&ann), left);
        let bob = store(dir.path(), "bob", 1000);
        let mut dropped = bob.create().unwrap();
        dropped.write(&[b'd'; 600]).unwrap();
        drop(dropped);
        let whole = bob.save(&"w".repeat(900)).unwrap();
        assert_eq!(
            whole.cut, None,
            "the dropped writer's bytes were given back"
        );
        assert_eq!(files(&bob), [(name(&whole), 900)]);
    }
}
