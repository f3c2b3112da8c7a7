//! Persistence for ringfence, knowing no tool family: a [`Store`] is one SQLite file of the
//! data directory, opened with the [`Schema`] a family registers; [`pg::Pg`] is the pool of
//! the PostgreSQL database several instances share, migrating each registered schema; and
//! [`pg::copy`] moves a family's registered tables between the two. The server's own state
//! (MCP sessions, read records, the audit table, logins) has its tables here too.
//!
//! A database runs in WAL mode. With [`Durability::Full`] (`synchronous=FULL`) a change is
//! on disk before the call that made it returns; with [`Durability::Process`]
//! (`synchronous=NORMAL`) a committed change survives the process being killed at any moment
//! but the last commits may be lost if the machine loses power — the edit journal uses it,
//! since it must not double the cost of every edit (the edited file itself is always
//! written durably). Either way a crash leaves the previous or the new state, never a torn
//! one. The schema is versioned (`PRAGMA user_version`) and migrated forward at
//! open, one transaction per step.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

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

mod error;
#[cfg(feature = "postgres")]
pub mod pg;
#[cfg(feature = "postgres")]
mod shared;

pub use error::StoreError;
pub use rusqlite;
#[cfg(feature = "postgres")]
pub use shared::{OpenError, SharedStore};

/// A database's schema: its migration steps, one per version. Never edit a released step:
/// append a new one.
#[derive(Debug)]
pub struct Schema {
    /// Names the database in messages.
    pub name: &'static str,
    pub migrations: &'static [&'static str],
}

/// The database.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    path: PathBuf,
    schema: &'static Schema,
}

/// Opens a family's SQLite file of the data directory (see [`Store::open_schema`]), making
/// its directory (0700) first if missing.
pub fn open_file(
    path: &Path,
    durability: Durability,
    schema: &'static Schema,
) -> Result<Store, StoreError> {
    if let Some(dir) = path.parent() {
        ringfence_fs::create_private_dir_all(dir).map_err(|source| StoreError::Directory {
            path: dir.to_owned(),
            source,
        })?;
    }
    Store::open_schema(path, durability, schema)
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
    /// Opens (creating if needed) a database of `schema` and migrates it forward, with a
    /// chosen durability for this connection's commits. A database from a newer ringfence is
    /// refused rather than misread. A new database file is created 0600 — it holds earlier versions of people's files, or
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

/// Creates the database file with mode 0600 if it does not exist (SQLite would make it
/// 0644 under the usual umask); an existing file is left as it is on Unix (Windows: given the
/// owner-only access list when it lacks it; see `ringfence_fs::open_with_mode`).
fn create_private(path: &Path) -> std::io::Result<()> {
    ringfence_fs::open_with_mode(
        path,
        ringfence_fs::PRIVATE_FILE_MODE,
        ringfence_fs::Opening::Append,
    )
    .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    static DEMO: Schema = Schema {
        name: "demo",
        migrations: &[
            "CREATE TABLE a (id INTEGER PRIMARY KEY);",
            "CREATE TABLE b (id INTEGER PRIMARY KEY);",
        ],
    };

    #[test]
    fn the_schema_version_is_the_last_step() {
        let tmp = tempfile::tempdir().unwrap();
        let store = Store::open_schema(&tmp.path().join("db"), Durability::Full, &DEMO).unwrap();
        assert_eq!(store.schema_version().unwrap(), 2);
    }

    #[test]
    fn refuses_a_database_from_the_future() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", 99).unwrap();
        }
        let err = Store::open_schema(&path, Durability::Process, &DEMO).unwrap_err();
        assert!(
            err.to_string().contains("newer than this ringfence"),
            "{err}"
        );
    }
}
