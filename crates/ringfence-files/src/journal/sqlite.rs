//! The edit journal's rows: `ringfence.db` in the data directory, or PostgreSQL's table
//! ([`super::pg`]), written in the background by [`QueuedJournal`].

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ringfence_store::pg::copy;
use ringfence_store::rusqlite::{OptionalExtension, params};
use ringfence_store::{Durability, Schema, Store, StoreError};

use super::{FileKey, HISTORY_PER_FILE, Journal, JournalEntry, JournalRecord};
use ringfence_core::time::now_ms;

/// Opens (creating it 0600, its directory 0700) the edit journal's database at `path`,
/// migrated to the current schema, with commits durable against a killed process (see
/// [`Durability::Process`]).
pub fn open(path: &Path) -> Result<Store, StoreError> {
    ringfence_store::open_file(path, Durability::Process, &JOURNAL_SCHEMA)
}

/// The edit journal's database (`ringfence.db`).
pub const JOURNAL_SCHEMA: Schema = Schema {
    name: "edit journal",
    migrations: MIGRATIONS,
};

/// The journal's steps.
const MIGRATIONS: &[&str] = &[
    // 1: the edit journal.
    "CREATE TABLE edit_journal (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        path TEXT NOT NULL,
        tool TEXT NOT NULL,
        at_ms INTEGER NOT NULL,
        before BLOB,
        patch_prefix INTEGER,
        patch_suffix INTEGER,
        mode INTEGER,
        after_hash BLOB,
        size INTEGER NOT NULL
    );
    CREATE INDEX edit_journal_file ON edit_journal (path, id);",
];

/// The edit journal's state, for `ringfence store migrate`: both schemas, the table, and
/// the SQLite file at `file`.
pub fn state(file: PathBuf) -> copy::Family {
    copy::Family {
        sqlite: &JOURNAL_SCHEMA,
        postgres: &super::pg::JOURNAL_PG_SCHEMA,
        tables: &[copy::Table {
            name: "edit_journal",
            renamed: None,
            key: &["id"],
            identity: Some("id"),
        }],
        file,
        durability: Durability::Process,
    }
}

/// The edit journal the store names: `ringfence.db` in `data_dir` (the directory made 0700,
/// the file 0600: it holds earlier versions of people's files), or PostgreSQL's table.
pub fn open_shared(
    store: &ringfence_store::SharedStore,
    data_dir: &Path,
) -> Result<Arc<dyn Journal>, ringfence_store::OpenError> {
    store.open(
        "edit journal's database",
        || {
            let store = open(&data_dir.join("ringfence.db"))?;
            Ok(Arc::new(QueuedJournal::sqlite(Arc::new(store))) as Arc<dyn Journal>)
        },
        |pg| {
            let rows = super::pg::PgJournalRows::open(pg)?;
            Ok(Arc::new(QueuedJournal::new(Arc::new(rows))) as Arc<dyn Journal>)
        },
    )
}

/// Bytes of previous versions kept in the journal across all files; the oldest go first.
pub const JOURNAL_MAX_BYTES: i64 = 512 * 1024 * 1024;

/// Why a record could not be queued.
#[derive(Debug, thiserror::Error)]
enum QueueGone {
    #[error("the journal is closed")]
    Closed,
    #[error("the journal thread has stopped")]
    Stopped,
}

/// Where the edit journal's rows are kept: the SQLite file ([`SqliteJournalRows`]) or
/// PostgreSQL ([`super::pg::PgJournalRows`]). [`QueuedJournal`] writes through it in the background.
pub trait JournalRows: Send + Sync + std::fmt::Debug + 'static {
    /// Stores a record made at `at_ms` and applies the bounds: [`HISTORY_PER_FILE`] records
    /// per file, then [`JOURNAL_MAX_BYTES`] of previous versions in all (the oldest go).
    fn append(&self, entry: JournalEntry, at_ms: i64) -> Result<(), StoreError>;
    /// The newest record of the file `key`.
    fn latest(&self, key: &FileKey) -> Result<Option<JournalRecord>, StoreError>;
    /// Deletes record `id`.
    fn delete(&self, id: i64) -> Result<(), StoreError>;
    /// How many records the file `key` has.
    fn count(&self, key: &FileKey) -> Result<usize, StoreError>;
}

/// A record's columns as both backends read them: id, tool, at_ms, before, after_hash,
/// mode, patch_prefix, patch_suffix.
pub(crate) type RecordColumns = (
    i64,
    String,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// The record `columns` hold, of the file `key`.
pub(crate) fn journal_record(key: &FileKey, columns: RecordColumns) -> JournalRecord {
    let (id, tool, at_ms, before, after, mode, prefix, suffix) = columns;
    JournalRecord {
        id,
        at_ms,
        entry: JournalEntry {
            key: key.clone(),
            tool,
            before,
            after_hash: after.and_then(|a| a.try_into().ok()),
            mode: mode.and_then(|m| u32::try_from(m).ok()),
            patch: prefix.zip(suffix).map(|(p, s)| (p as u64, s as u64)),
        },
    }
}

/// The edit journal's rows in the SQLite file `ringfence.db`.
#[derive(Debug)]
pub struct SqliteJournalRows(pub Arc<Store>);

impl JournalRows for SqliteJournalRows {
    fn append(&self, entry: JournalEntry, at_ms: i64) -> Result<(), StoreError> {
        let mut conn = self.0.conn();
        let tx = conn.transaction()?;
        let size = entry.before.as_ref().map_or(0, |b| b.len() as i64);
        tx.execute(
            "INSERT INTO edit_journal
                 (path, tool, at_ms, before, patch_prefix, patch_suffix, mode, after_hash, size)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                entry.key.path,
                entry.tool,
                at_ms,
                entry.before,
                entry.patch.map(|(p, _)| p as i64),
                entry.patch.map(|(_, s)| s as i64),
                entry.mode.map(i64::from),
                entry.after_hash.map(|h| h.to_vec()),
                size
            ],
        )?;
        // The per-file bound.
        tx.execute(
            "DELETE FROM edit_journal WHERE path = ?1 AND id NOT IN (
                    SELECT id FROM edit_journal WHERE path = ?1 ORDER BY id DESC LIMIT ?2)",
            params![entry.key.path, HISTORY_PER_FILE as i64],
        )?;
        // The global bound: drop the oldest versions until under it.
        let total: i64 =
            tx.query_row("SELECT COALESCE(SUM(size), 0) FROM edit_journal", [], |r| {
                r.get(0)
            })?;
        if total > JOURNAL_MAX_BYTES {
            tx.execute(
                "DELETE FROM edit_journal WHERE id IN (
                        SELECT id FROM (
                            SELECT id, SUM(size) OVER (ORDER BY id DESC) AS kept FROM edit_journal
                        ) WHERE kept > ?1)",
                params![JOURNAL_MAX_BYTES],
            )?;
        }
        Ok(tx.commit()?)
    }

    fn latest(&self, key: &FileKey) -> Result<Option<JournalRecord>, StoreError> {
        let columns = self
            .0
            .conn()
            .query_row(
                "SELECT id, tool, at_ms, before, after_hash, mode, patch_prefix, patch_suffix
                 FROM edit_journal
                 WHERE path = ?1 ORDER BY id DESC LIMIT 1",
                params![key.path],
                |r| {
                    Ok((
                        r.get(0)?,
                        r.get(1)?,
                        r.get(2)?,
                        r.get(3)?,
                        r.get(4)?,
                        r.get(5)?,
                        r.get(6)?,
                        r.get(7)?,
                    ))
                },
            )
            .optional()?;
        Ok(columns.map(|c| journal_record(key, c)))
    }

    fn delete(&self, id: i64) -> Result<(), StoreError> {
        self.0
            .conn()
            .execute("DELETE FROM edit_journal WHERE id = ?1", params![id])?;
        Ok(())
    }

    fn count(&self, key: &FileKey) -> Result<usize, StoreError> {
        let n = self.0.conn().query_row(
            "SELECT COUNT(*) FROM edit_journal WHERE path = ?1",
            params![key.path],
            |r| r.get::<_, i64>(0),
        )?;
        Ok(n as usize)
    }
}

/// The edit journal, over either backend's rows.
///
/// Records are committed by a background thread, in order, so a large previous version
/// (megabytes into the write-ahead log, and the checkpoint after it; or a round trip to
/// PostgreSQL) never adds to the latency of the edit that produced it. Every read of the
/// journal (`latest`, `depth`, `remove`) first waits for the queue to drain, and
/// [`Journal::flush`] waits for it explicitly (the binary flushes before it exits), so
/// nothing recorded is ever missing from a later query.
#[derive(Debug, Clone)]
pub struct QueuedJournal {
    rows: Arc<dyn JournalRows>,
    queue: Arc<Queue>,
}

#[derive(Debug)]
struct Queue {
    tx: Mutex<Option<std::sync::mpsc::Sender<JournalEntry>>>,
    pending: Mutex<usize>,
    drained: std::sync::Condvar,
}

impl QueuedJournal {
    /// The journal in the SQLite database `store`.
    pub fn sqlite(store: Arc<Store>) -> QueuedJournal {
        QueuedJournal::new(Arc::new(SqliteJournalRows(store)))
    }

    pub fn new(rows: Arc<dyn JournalRows>) -> QueuedJournal {
        let (tx, rx) = std::sync::mpsc::channel::<JournalEntry>();
        let queue = Arc::new(Queue {
            tx: Mutex::new(Some(tx)),
            pending: Mutex::new(0),
            drained: std::sync::Condvar::new(),
        });
        let (worker_rows, worker_queue) = (rows.clone(), queue.clone());
        std::thread::Builder::new()
            .name("ringfence-journal".into())
            .spawn(move || {
                for entry in rx {
                    if let Err(e) = worker_rows.append(entry, now_ms()) {
                        tracing::error!(error = %e, "edit journal write failed; that change cannot be undone");
                    }
                    let mut n = worker_queue
                        .pending
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    *n -= 1;
                    if *n == 0 {
                        worker_queue.drained.notify_all();
                    }
                }
            })
            .expect("spawn the journal thread");
        QueuedJournal { rows, queue }
    }

    /// Waits until every queued record is committed.
    fn drain(&self) {
        let mut n = self.queue.pending.lock().unwrap_or_else(|e| e.into_inner());
        while *n > 0 {
            n = self
                .queue
                .drained
                .wait(n)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Queues `entry` for the writer thread.
    fn enqueue(&self, entry: JournalEntry) -> Result<(), StoreError> {
        let tx = self.queue.tx.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = tx.as_ref() else {
            return Err(StoreError::family(QueueGone::Closed));
        };
        *self.queue.pending.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        if tx.send(entry).is_err() {
            *self.queue.pending.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            return Err(StoreError::family(QueueGone::Stopped));
        }
        Ok(())
    }
}

impl Drop for QueuedJournal {
    /// A journal dropped with records still queued stores them first.
    fn drop(&mut self) {
        self.drain();
    }
}

/// The error type of the [`Journal`] methods.
type JournalTraitError = super::JournalError;

/// A store error as [`Journal`] reports it (kept as the source).
fn to_journal_error(e: StoreError) -> JournalTraitError {
    JournalTraitError::new(e)
}

impl Journal for QueuedJournal {
    fn record(&self, entry: JournalEntry) -> Result<(), JournalTraitError> {
        self.enqueue(entry).map_err(to_journal_error)
    }

    fn flush(&self) {
        self.drain();
    }

    fn latest(&self, key: &FileKey) -> Result<Option<JournalRecord>, JournalTraitError> {
        self.drain();
        self.rows.latest(key).map_err(to_journal_error)
    }

    fn remove(&self, id: i64) -> Result<(), JournalTraitError> {
        self.drain();
        self.rows.delete(id).map_err(to_journal_error)
    }

    fn depth(&self, key: &FileKey) -> Result<usize, JournalTraitError> {
        self.drain();
        self.rows.count(key).map_err(to_journal_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(rel: &str) -> FileKey {
        FileKey {
            path: format!("/r/{rel}"),
        }
    }

    fn entry(rel: &str, before: &[u8]) -> JournalEntry {
        JournalEntry {
            key: key(rel),
            tool: "write_file".into(),
            before: Some(before.to_vec()),
            after_hash: Some([7; 32]),
            mode: Some(0o600),
            patch: Some((3, 4)),
        }
    }

    /// Opens another journal on the test's store (as another process would).
    type Open<'a> = &'a (dyn Fn() -> QueuedJournal + Sync);

    /// Each test once per backend (PostgreSQL's are skipped without a test cluster).
    macro_rules! on_both {
        ($($name:ident),* $(,)?) => {
            mod sqlite {
                $(#[test]
                fn $name() {
                    let tmp = tempfile::tempdir().unwrap();
                    let path = tmp.path().join("ringfence.db");
                    super::$name(&|| {
                        super::QueuedJournal::sqlite(std::sync::Arc::new(
                            super::open(&path).unwrap(),
                        ))
                    });
                })*
            }
            mod postgres {
                $(#[test]
                fn $name() {
                    if let Some(db) = ringfence_store::pg::scratch::ScratchDb::new() {
                        super::$name(&|| {
                            super::QueuedJournal::new(std::sync::Arc::new(
                                crate::journal::pg::PgJournalRows::open(db.connect()).unwrap(),
                            ))
                        });
                    }
                })*
            }
        };
    }

    on_both!(
        survives_reopening_and_keeps_the_newest_first,
        history_per_file_is_bounded,
        concurrent_writers_lose_nothing,
    );

    fn survives_reopening_and_keeps_the_newest_first(open: Open<'_>) {
        {
            let j = open();
            j.record(entry("a", b"one")).unwrap();
            j.record(entry("a", b"two")).unwrap();
            j.record(entry("b", b"other")).unwrap();
        }
        let j = open();
        let latest = j.latest(&key("a")).unwrap().unwrap();
        assert_eq!(latest.entry.before.as_deref(), Some(&b"two"[..]));
        assert_eq!(latest.entry.after_hash, Some([7; 32]));
        assert_eq!(latest.entry.mode, Some(0o600));
        assert_eq!(latest.entry.patch, Some((3, 4)));
        j.remove(latest.id).unwrap();
        let latest = j.latest(&key("a")).unwrap().unwrap();
        assert_eq!(latest.entry.before.as_deref(), Some(&b"one"[..]));
        assert_eq!(j.depth(&key("b")).unwrap(), 1);
        assert!(j.latest(&key("zzz")).unwrap().is_none());
    }

    fn history_per_file_is_bounded(open: Open<'_>) {
        let j = open();
        for i in 0..(HISTORY_PER_FILE + 7) {
            j.record(entry("a", format!("v{i}").as_bytes())).unwrap();
        }
        assert_eq!(j.depth(&key("a")).unwrap(), HISTORY_PER_FILE);
        let latest = j.latest(&key("a")).unwrap().unwrap();
        assert_eq!(
            latest.entry.before.unwrap(),
            format!("v{}", HISTORY_PER_FILE + 6).into_bytes()
        );
    }

    fn concurrent_writers_lose_nothing(open: Open<'_>) {
        let first = open();
        std::thread::scope(|s| {
            for t in 0..4 {
                // Journals sharing one connection or pool, in effect threads of one process.
                let j = first.clone();
                s.spawn(move || {
                    for i in 0..15 {
                        j.record(entry(&format!("f{t}-{i}"), b"x")).unwrap();
                    }
                });
            }
            // A second connection (another process, in effect) writing at the same time.
            let other = open();
            s.spawn(move || {
                for i in 0..15 {
                    other.record(entry(&format!("g-{i}"), b"y")).unwrap();
                }
            });
        });
        let j = open();
        for t in 0..4 {
            for i in 0..15 {
                assert_eq!(j.depth(&key(&format!("f{t}-{i}"))).unwrap(), 1);
            }
        }
        for i in 0..15 {
            assert_eq!(j.depth(&key(&format!("g-{i}"))).unwrap(), 1);
        }
    }
}
