//! The state store `[store]` chooses: a SQLite file per family under the data directory, or
//! one PostgreSQL database that several instances share — connected once per process, on
//! first use, and shared by every family that keeps state there.

use std::path::Path;
use std::sync::Arc;
use std::sync::OnceLock;

use ringfence_store::followups::{FollowupDb, FollowupStore};

use crate::config::StoreSettings;

/// The store of one process (one per build: `env.shared`).
#[derive(Debug, Default)]
pub struct SharedStore {
    settings: StoreSettings,
    pg: OnceLock<Result<ringfence_store::pg::Pg, String>>,
}

impl SharedStore {
    pub fn new(settings: StoreSettings) -> SharedStore {
        SharedStore {
            settings,
            pg: OnceLock::new(),
        }
    }

    /// The follow-ups: `followups.db` at `sqlite_path`, or PostgreSQL's tables.
    pub fn followups(&self, sqlite_path: &Path) -> Result<Arc<dyn FollowupStore>, String> {
        match &self.settings {
            StoreSettings::Sqlite => {
                let db =
                    crate::families::open_private_db(sqlite_path, "follow-up", FollowupDb::open)?;
                Ok(db)
            }
            StoreSettings::Postgres(_) => self.with_pg(|pg| {
                let db = ringfence_store::pg::followups::PgFollowups::open(pg)?;
                Ok(Arc::new(db) as Arc<dyn FollowupStore>)
            }),
        }
    }

    /// Runs `open` on the pool (connected on the first call), naming what failed.
    fn with_pg<T>(
        &self,
        open: impl FnOnce(ringfence_store::pg::Pg) -> Result<T, ringfence_store::StoreError>,
    ) -> Result<T, String> {
        let StoreSettings::Postgres(s) = &self.settings else {
            unreachable!("with_pg is called for the postgres backend only")
        };
        let pg = self
            .pg
            .get_or_init(|| {
                let options = ringfence_store::pg::PgOptions {
                    url: s.url.clone(),
                    pool_size: s.pool_size,
                    ca_file: s.ca_file.clone(),
                    connect_timeout: s.connect_timeout,
                };
                ringfence_store::pg::Pg::connect(&options).map_err(|e| e.to_string())
            })
            .clone()?;
        open(pg).map_err(|e| e.to_string())
    }
}
