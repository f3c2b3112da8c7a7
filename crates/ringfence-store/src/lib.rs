//! Persistence for ringfence: one embedded SQLite database under the data directory.
//!
//! The database runs in WAL mode. With [`Durability::Full`] (`synchronous=FULL`) a change is
//! on disk before the call that made it returns; with [`Durability::Process`]
//! (`synchronous=NORMAL`) a committed change survives the process being killed at any moment
//! but the last commits may be lost if the machine loses power — the edit journal uses it,
//! since it must not double the cost of every edit (the edited file itself is always
//! written durably). Either way a crash leaves the previous or the new state, never a torn
//! one. The schema is versioned (`PRAGMA user_version`) and migrated forward at
//! open, one transaction per step.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::{Connection, OptionalExtension, params};

use ringfence_tools::journal::HISTORY_PER_FILE;
use ringfence_tools::{FileKey, Journal, JournalEntry, JournalRecord};

/// Runs each named test once per backend, for a test module that defines `SqliteBed`
/// (around a temporary directory) and `PgBed` (around a scratch database); PostgreSQL's
/// runs are skipped without a test cluster. The calling crate needs `tempfile` among its
/// dev-dependencies and this crate's `postgres` feature.
#[macro_export]
macro_rules! on_both_beds {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::$name(&super::SqliteBed(tempfile::tempdir().unwrap()));
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                if let Some(db) = $crate::pg::scratch::ScratchDb::new() {
                    super::$name(&super::PgBed(db));
                }
            })*
        }
    };
}

pub mod calendar;
mod error;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod pg;

pub use error::StoreError;

/// A database's schema: its migration steps, one per version. Never edit a released step:
/// append a new one.
#[derive(Debug)]
pub struct Schema {
    /// Names the database in messages.
    pub name: &'static str,
    pub migrations: &'static [&'static str],
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
#[cfg(feature = "postgres")]
pub fn journal_state(file: PathBuf) -> pg::copy::Family {
    pg::copy::Family {
        sqlite: &JOURNAL_SCHEMA,
        postgres: &pg::journal::JOURNAL_PG_SCHEMA,
        tables: &[pg::copy::Table {
            name: "edit_journal",
            renamed: None,
            key: &["id"],
            identity: Some("id"),
        }],
        file,
        durability: Durability::Process,
    }
}

/// Bytes of previous versions kept in the journal across all files; the oldest go first.
pub const JOURNAL_MAX_BYTES: i64 = 512 * 1024 * 1024;

/// The database.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    schema: &'static Schema,
}

/// How durable a commit is when the call returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On disk (`synchronous=FULL`): survives power loss.
    Full,
    /// In the write-ahead log (`synchronous=NORMAL`): survives the process being killed, not
    /// necessarily a power loss.
    Process,
}

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it to the current
    /// schema. A database from a newer ringfence is refused rather than misread.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        Store::open_with(path, Durability::Full)
    }

    /// [`open`](Self::open) with a chosen durability for this connection's commits.
    pub fn open_with(path: &Path, durability: Durability) -> Result<Store, StoreError> {
        Store::open_schema(path, durability, &JOURNAL_SCHEMA)
    }

    /// Opens a database of `schema` (migrating it forward) with a chosen durability. A new
    /// database file is created 0600 — it holds earlier versions of people's files, or
    /// their memories — and SQLite gives its `-wal` and `-shm` files the same mode.
    pub fn open_schema(
        path: &Path,
        durability: Durability,
        schema: &'static Schema,
    ) -> Result<Store, StoreError> {
        create_private(path).map_err(|source| StoreError::Create {
            path: path.to_owned(),
            source,
        })?;
        let conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.to_owned(),
            source,
        })?;
        conn.busy_timeout(std::time::Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(
            None,
            "synchronous",
            match durability {
                Durability::Full => "FULL",
                Durability::Process => "NORMAL",
            },
        )?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        let store = Store {
            conn: Mutex::new(conn),
            path: path.to_owned(),
            schema,
        };
        store.migrate()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection, for one statement or transaction at a time (a family's store runs
    /// its SQL through it).
    pub fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The schema version the database is at.
    pub fn schema_version(&self) -> Result<usize, StoreError> {
        let v: i64 = self
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))?;
        Ok(v as usize)
    }

    fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        let current = current as usize;
        let migrations = self.schema.migrations;
        if current > migrations.len() {
            return Err(StoreError::NewerSchema {
                database: self.schema.name,
                path: self.path.clone(),
                found: current,
                known: migrations.len(),
            });
        }
        for (i, step) in migrations.iter().enumerate().skip(current) {
            let version = i + 1;
            let migrated = conn.transaction().and_then(|tx| {
                tx.execute_batch(step)?;
                tx.pragma_update(None, "user_version", version as i64)?;
                tx.commit()
            });
            migrated.map_err(|source| StoreError::Migration {
                database: self.schema.name,
                version,
                source,
            })?;
            tracing::info!(database = self.schema.name, version, "database migrated");
        }
        Ok(())
    }
}

/// Where the edit journal's rows are kept: the SQLite file ([`SqliteJournalRows`]) or
/// PostgreSQL (`pg::journal`). [`QueuedJournal`] writes through it in the background.
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
            return Err(StoreError::JournalClosed);
        };
        *self.queue.pending.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        if tx.send(entry).is_err() {
            *self.queue.pending.lock().unwrap_or_else(|e| e.into_inner()) -= 1;
            return Err(StoreError::JournalStopped);
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

use ringfence_tools::time::now_ms;

/// The error type of ringfence-tools' [`Journal`] methods.
type JournalTraitError = ringfence_tools::JournalError;

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

/// Creates the database file with mode 0600 if it does not exist (SQLite would make it
/// 0644 under the usual umask); an existing file is left as it is.
#[allow(clippy::disallowed_methods)] // the operator's data directory, not a root
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map(drop)
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
                            super::Store::open(&path).unwrap(),
                        ))
                    });
                })*
            }
            #[cfg(feature = "postgres")]
            mod postgres {
                $(#[test]
                fn $name() {
                    if let Some(db) = crate::pg::scratch::ScratchDb::new() {
                        super::$name(&|| {
                            super::QueuedJournal::new(std::sync::Arc::new(
                                crate::pg::journal::PgJournalRows::open(db.connect()).unwrap(),
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

    #[test]
    fn the_schema_version_is_the_last_step() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open(&tmp.path().join("db")).unwrap();
        assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len());
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

    #[test]
    fn refuses_a_database_from_the_future() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", 99).unwrap();
        }
        let err = Store::open(&path).unwrap_err();
        assert!(
            err.to_string().contains("newer than this ringfence"),
            "{err}"
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
