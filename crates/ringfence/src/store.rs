//! The state store `[store]` chooses: a SQLite file per family under the data directory, or
//! one PostgreSQL database that several instances share — connected once per process, on
//! first use, and shared by every family that keeps state there.

use std::path::Path;
use std::sync::Arc;
use std::sync::OnceLock;

use ringfence_store::calendar::{CalendarDb, CalendarStore};
use ringfence_store::followups::{FollowupDb, FollowupStore};
use ringfence_store::memory::{EmbedderLoader, MemoryDb, RankConfig};
use ringfence_store::pg::Pg;
use ringfence_store::pg::audit::PgAudit;
use ringfence_store::pg::calendar::PgCalendar;
use ringfence_store::pg::credentials::PgCredentials;
use ringfence_store::pg::followups::PgFollowups;
use ringfence_store::pg::journal::PgJournalRows;
use ringfence_store::{Durability, QueuedJournal, Store, StoreError};
use ringfence_tools::Journal;

use crate::config::StoreSettings;

/// The store of one process (one per build: `env.shared`).
#[derive(Debug, Default)]
pub struct SharedStore {
    settings: StoreSettings,
    pg: OnceLock<Result<Pg, String>>,
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
        self.open(
            || {
                crate::families::open_private_db(sqlite_path, "follow-up", FollowupDb::open)
                    .map(|db| db as Arc<dyn FollowupStore>)
            },
            |pg| Ok(Arc::new(PgFollowups::open(pg)?) as Arc<dyn FollowupStore>),
        )
    }

    /// The local calendars: `calendar.db` at `sqlite_path`, or PostgreSQL's tables.
    pub fn calendar(&self, sqlite_path: &Path) -> Result<Arc<dyn CalendarStore>, String> {
        self.open(
            || {
                crate::families::open_private_db(sqlite_path, "calendar", CalendarDb::open)
                    .map(|db| db as Arc<dyn CalendarStore>)
            },
            |pg| Ok(Arc::new(PgCalendar::open(pg)?) as Arc<dyn CalendarStore>),
        )
    }

    /// Truths and memories: `memory.db` at `sqlite_path` (made 0600, a missing directory
    /// 0700: facts about people), or PostgreSQL's tables.
    pub fn memory(
        &self,
        sqlite_path: &Path,
        loader: Option<EmbedderLoader>,
        rank: RankConfig,
    ) -> Result<Arc<MemoryDb>, String> {
        let opened = match &self.settings {
            StoreSettings::Sqlite => {
                if let Some(dir) = sqlite_path.parent() {
                    ringfence_fs::create_private_dir_all(dir)
                        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                }
                MemoryDb::open(sqlite_path, loader, rank).map_err(|e| e.to_string())
            }
            StoreSettings::Postgres(_) => self.open(
                || unreachable!("PostgreSQL is configured"),
                |pg| MemoryDb::open_postgres(pg, loader, rank),
            ),
        };
        opened.map_err(|e| {
            tracing::error!(error = %e, "cannot open the memory database; the memory tools are unavailable");
            format!("the memory database could not be opened: {e}")
        })
    }

    /// The edit journal: `ringfence.db` in `data_dir` (made 0700, the file 0600: it holds
    /// earlier versions of people's files), or PostgreSQL's table.
    pub fn journal(&self, data_dir: &Path) -> Result<Arc<dyn Journal>, String> {
        self.open(
            || {
                ringfence_fs::create_private_dir_all(data_dir)
                    .map_err(|e| format!("cannot create the data directory: {e}"))?;
                let store = Store::open_with(&data_dir.join("ringfence.db"), Durability::Process)
                    .map_err(|e| format!("cannot open the edit journal's database: {e}"))?;
                Ok(Arc::new(QueuedJournal::sqlite(Arc::new(store))) as Arc<dyn Journal>)
            },
            |pg| {
                let rows = PgJournalRows::open(pg)?;
                Ok(Arc::new(QueuedJournal::new(Arc::new(rows))) as Arc<dyn Journal>)
            },
        )
    }

    /// The shared audit table, with PostgreSQL (`None` with SQLite, whose trail is the
    /// data directory's file alone).
    pub fn audit(&self) -> Result<Option<Arc<PgAudit>>, String> {
        if self.settings == StoreSettings::Sqlite {
            return Ok(None);
        }
        self.open(
            || unreachable!("the SQLite store has no audit table"),
            |pg| Ok(Arc::new(PgAudit::open(pg)?)),
        )
        .map(Some)
    }

    /// The shared credentials table, with PostgreSQL (`None` with SQLite: logins are files
    /// of the data directory).
    pub fn credentials(&self) -> Result<Option<Arc<PgCredentials>>, String> {
        if self.settings == StoreSettings::Sqlite {
            return Ok(None);
        }
        self.open(
            || unreachable!("the SQLite store keeps logins in files"),
            |pg| Ok(Arc::new(PgCredentials::open(pg)?)),
        )
        .map(Some)
    }

    /// One family's store: its SQLite file, or its tables on the pool (connected on the
    /// first call), naming what failed.
    fn open<T: ?Sized>(
        &self,
        sqlite: impl FnOnce() -> Result<Arc<T>, String>,
        postgres: impl FnOnce(Pg) -> Result<Arc<T>, StoreError>,
    ) -> Result<Arc<T>, String> {
        let StoreSettings::Postgres(s) = &self.settings else {
            return sqlite();
        };
        let pg = self
            .pg
            .get_or_init(|| Pg::connect(&s.options(None)).map_err(|e| e.to_string()))
            .clone()?;
        postgres(pg).map_err(|e| e.to_string())
    }
}
