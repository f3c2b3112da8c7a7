//! What can go wrong in the store (a family's own failures ride in [`StoreError::Family`]). The messages are the ones the tools and the binary show;
//! underlying errors stay reachable through [`std::error::Error::source`].

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database file could not be opened (or created).
    #[error("cannot open the database {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    /// The database file could not be created (with its private mode).
    #[error("cannot create the database {}: {source}", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The directory of the database file could not be made.
    #[error("cannot create {}: {source}", path.display())]
    Directory {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The database was written by a newer ringfence: refused rather than misread.
    #[error(
        "the {database} database {} has schema version {found}, newer than this ringfence knows ({known}); upgrade ringfence",
        path.display()
    )]
    NewerSchema {
        database: &'static str,
        path: PathBuf,
        found: usize,
        known: usize,
    },
    /// A migration step failed; its transaction was rolled back, so the database stays at
    /// the version before it.
    #[error("cannot migrate the {database} database to schema version {version}: {source}")]
    Migration {
        database: &'static str,
        version: usize,
        #[source]
        source: rusqlite::Error,
    },
    /// The PostgreSQL settings are unusable (the message names the key).
    #[cfg(feature = "postgres")]
    #[error("{0}")]
    PgOptions(String),
    /// A connection to PostgreSQL could not be opened.
    #[cfg(feature = "postgres")]
    #[error(
        "cannot connect to PostgreSQL at {database}: {}",
        crate::pg::describe(source)
    )]
    PgConnect {
        database: String,
        #[source]
        source: tokio_postgres::Error,
    },
    /// Every connection of the pool stayed busy for the whole wait.
    #[cfg(feature = "postgres")]
    #[error(
        "all {size} PostgreSQL connections to {database} stayed busy for {waited:?}; raise store.pool_size"
    )]
    PgBusy {
        database: String,
        size: usize,
        waited: std::time::Duration,
    },
    /// The tables were migrated by a newer ringfence.
    #[cfg(feature = "postgres")]
    #[error(
        "the {database} tables in PostgreSQL have schema version {found}, newer than this ringfence knows ({known}); upgrade ringfence"
    )]
    PgNewerSchema {
        database: &'static str,
        found: usize,
        known: usize,
    },
    /// A migration step failed; its transaction was rolled back.
    #[cfg(feature = "postgres")]
    #[error(
        "cannot migrate the {database} tables in PostgreSQL to schema version {version}: {}",
        crate::pg::describe(source)
    )]
    PgMigration {
        database: &'static str,
        version: usize,
        #[source]
        source: tokio_postgres::Error,
    },
    /// Any other PostgreSQL failure.
    #[cfg(feature = "postgres")]
    #[error("PostgreSQL: {}", crate::pg::describe(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// Any other SQLite failure.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),

    /// A failure of a family's own making, over the database (a model that cannot load,
    /// a conflict between writers): the family's error type, kept as the source.
    #[error(transparent)]
    Family(Box<dyn std::error::Error + Send + Sync>),

    /// An exported record that cannot be imported: the message says why.
    #[error("{0}")]
    InvalidRecord(String),
}

impl StoreError {
    /// A family's own failure, as a store error.
    pub fn family(e: impl std::error::Error + Send + Sync + 'static) -> StoreError {
        StoreError::Family(Box::new(e))
    }
}
