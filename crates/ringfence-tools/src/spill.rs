//! Spill files: when a cap cuts an output, the full output is saved here and the notice
//! prints the path, which read_file and grep can open (the spill root is a read-only root of
//! every session).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use cap_std::fs::OpenOptionsExt;
use ringfence_fs::Root;

use crate::error::{ToolError, ToolErrorKind, ToolResult};

/// Where full outputs are saved: `<data dir>/tool-output/<uuid>`.
#[derive(Debug)]
pub struct SpillStore {
    root: Arc<Root>,
}

impl SpillStore {
    /// `root` must be the internal tool-output root (also given to sessions, read-only).
    pub fn new(root: Arc<Root>) -> SpillStore {
        SpillStore { root }
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
        opts.write(true)
            .create_new(true)
            .mode(ringfence_fs::PRIVATE_FILE_MODE);
        let file = dir.open_with(&name, &opts).map_err(|e| {
            ToolError::new(
                ToolErrorKind::Io,
                format!("could not save the full output: {e}"),
            )
        })?;
        Ok(SpillWriter {
            file: Some(std::io::BufWriter::with_capacity(
                64 * 1024,
                file.into_std(),
            )),
            path: self.root.absolute_path().join(&name),
            dir,
            name,
            kept: false,
        })
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

    /// Saves `text` whole and returns the absolute path to print.
    pub fn save(&self, text: &str) -> ToolResult<PathBuf> {
        let mut w = self.create()?;
        w.write(text.as_bytes())?;
        w.finish()
    }
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
}

impl Drop for SpillWriter {
    fn drop(&mut self) {
        if !self.kept {
            drop(self.file.take());
            let _ = self.dir.remove_file(&self.name);
        }
    }
}

impl SpillWriter {
    fn file(&mut self) -> &mut std::io::BufWriter<std::fs::File> {
        self.file.as_mut().expect("present until dropped")
    }

    pub fn write(&mut self, bytes: &[u8]) -> ToolResult<()> {
        self.file().write_all(bytes).map_err(|e| {
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

    /// Writes out what is buffered and keeps the file; returns its absolute path. On an
    /// error the file is removed.
    pub fn finish(mut self) -> ToolResult<PathBuf> {
        self.file().flush().map_err(|e| {
            ToolError::new(
                ToolErrorKind::Io,
                format!("could not save the full output: {e}"),
            )
        })?;
        self.kept = true;
        Ok(std::mem::take(&mut self.path))
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
