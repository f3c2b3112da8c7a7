//! The store of one process, as `[store]` chooses it: a SQLite file per family under the data
//! directory, or one PostgreSQL database several instances share — connected once, on first
//! use, and lent to every family that keeps state there.

use std::sync::{Arc, OnceLock};

use crate::StoreError;
use crate::pg::{Pg, PgOptions};

/// See the module documentation (one per build, shared as `Arc<SharedStore>`).
#[derive(Default)]
pub struct SharedStore {
    postgres: Option<PgOptions>,
    pg: OnceLock<Result<Pg, Arc<StoreError>>>,
}

impl std::fmt::Debug for SharedStore {
    // The options hold the URL, which may hold a password: never in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedStore")
            .field("postgres", &self.postgres.is_some())
            .finish_non_exhaustive()
    }
}

/// A family's store that could not be opened, naming it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot open the {what}: {source}")]
pub struct OpenError {
    /// What it is ("follow-up database").
    pub what: &'static str,
    #[source]
    pub source: Arc<StoreError>,
}

impl SharedStore {
    /// SQLite files, or the PostgreSQL database `postgres` names.
    pub fn new(postgres: Option<PgOptions>) -> SharedStore {
        SharedStore {
            postgres,
            pg: OnceLock::new(),
        }
    }

    /// Whether the state lives in PostgreSQL.
    pub fn is_postgres(&self) -> bool {
        self.postgres.is_some()
    }

    /// The pool, connected on the first call (`None` with SQLite).
    pub fn pg(&self) -> Option<Result<Pg, Arc<StoreError>>> {
        let options = self.postgres.as_ref()?;
        Some(
            self.pg
                .get_or_init(|| Pg::connect(options).map_err(Arc::new))
                .clone(),
        )
    }

    /// One family's store, `what` naming it in errors: `sqlite()` with SQLite, else
    /// `postgres` on the pool.
    pub fn open<T: ?Sized>(
        &self,
        what: &'static str,
        sqlite: impl FnOnce() -> Result<Arc<T>, StoreError>,
        postgres: impl FnOnce(Pg) -> Result<Arc<T>, StoreError>,
    ) -> Result<Arc<T>, OpenError> {
        let failed = |source| OpenError { what, source };
        match self.pg() {
            None => sqlite().map_err(|e| failed(Arc::new(e))),
            Some(pg) => postgres(pg.map_err(failed)?).map_err(|e| failed(Arc::new(e))),
        }
    }

    /// Only PostgreSQL keeps this state (`None` with SQLite).
    pub fn open_shared<T: ?Sized>(
        &self,
        what: &'static str,
        postgres: impl FnOnce(Pg) -> Result<Arc<T>, StoreError>,
    ) -> Result<Option<Arc<T>>, OpenError> {
        if !self.is_postgres() {
            return Ok(None);
        }
        self.open(what, || unreachable!("PostgreSQL is configured"), postgres)
            .map(Some)
    }
}
