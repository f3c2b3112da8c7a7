//! The state store `[store]` chooses: a SQLite file per family under the data directory, or
//! one PostgreSQL database that several instances share — connected once per process, on
//! first use, and shared by every family that keeps state there.

use std::path::Path;
use std::sync::Arc;
use std::sync::OnceLock;

use ringfence_calendar::store::pg::PgCalendar;
use ringfence_calendar::store::{CalendarDb, CalendarStore};
use ringfence_followups::store::pg::PgFollowups;
use ringfence_followups::store::{FollowupDb, FollowupStore};
use ringfence_memory::store::{EmbedderLoader, MemoryDb, RankConfig};
use ringfence_store::StoreError;
use ringfence_store::pg::Pg;
use ringfence_store::pg::audit::PgAudit;
use ringfence_store::pg::credentials::PgCredentials;
use ringfence_store::pg::sessions::PgSessions;
use ringfence_tools::Journal;
use ringfence_tools::QueuedJournal;
use ringfence_tools::journal::pg::PgJournalRows;

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
                let store = ringfence_tools::journal::sqlite::open(&data_dir.join("ringfence.db"))
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

    /// The shared MCP session tables, with PostgreSQL (`None` with SQLite: sessions live in
    /// the instance's memory).
    pub fn sessions(&self) -> Result<Option<Arc<dyn ringfence_mcp::SessionDirectory>>, String> {
        if self.settings == StoreSettings::Sqlite {
            return Ok(None);
        }
        self.open(
            || unreachable!("the SQLite store keeps no sessions"),
            |pg| {
                let tables = PgSessions::open(pg)?;
                let heard = tables.listen();
                Ok(Arc::new(SessionTables(tables, Some(heard)))
                    as Arc<dyn ringfence_mcp::SessionDirectory>)
            },
        )
        .map(Some)
    }

    /// The shared read-first records of HTTP sessions, with PostgreSQL (`None` with SQLite).
    pub fn reads(&self) -> Result<Option<Arc<dyn ringfence_tools::SharedReads>>, String> {
        if self.settings == StoreSettings::Sqlite {
            return Ok(None);
        }
        self.open(
            || unreachable!("the SQLite store keeps no read records"),
            |pg| {
                Ok(Arc::new(SessionTables(PgSessions::open(pg)?, None))
                    as Arc<dyn ringfence_tools::SharedReads>)
            },
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

/// A session nobody held for this long is forgotten (an instance marks the sessions it holds
/// every minute; rmcp ends a session after 5 minutes without a request).
const SESSION_KEPT_MS: i64 = 30 * 60 * 1000;
/// Events are kept this long for clients resuming a stream.
const EVENTS_KEPT_MS: i64 = 10 * 60 * 1000;
/// Read records of stateless requests (which have no session row) are kept this long.
const READS_KEPT_MS: i64 = 24 * 60 * 60 * 1000;

/// The transport's shared sessions over PostgreSQL's tables, with the announcements of
/// appended events (for the transport).
#[derive(Debug)]
struct SessionTables(PgSessions, Option<tokio::sync::broadcast::Sender<String>>);

fn io(e: StoreError) -> std::io::Error {
    std::io::Error::other(e.to_string())
}

impl ringfence_mcp::SessionDirectory for SessionTables {
    fn save_state(&self, id: &str, state: &str) -> std::io::Result<()> {
        self.0.save_state(id, state, now_ms()).map_err(io)
    }
    fn set_owner(&self, id: &str, user: &str) -> std::io::Result<()> {
        self.0.set_owner(id, user, now_ms()).map_err(io)
    }
    fn session(&self, id: &str) -> std::io::Result<Option<(Option<String>, Option<String>)>> {
        Ok(self.0.session(id).map_err(io)?.map(|s| (s.user, s.state)))
    }
    fn remove(&self, id: &str) -> std::io::Result<()> {
        self.0.remove(id).map_err(io)
    }
    fn keep(&self, alive: &[String]) -> std::io::Result<()> {
        let now = now_ms();
        self.0.touch(alive, now).map_err(io)?;
        let (sessions, events) = self
            .0
            .prune(
                now - SESSION_KEPT_MS,
                now - EVENTS_KEPT_MS,
                now - READS_KEPT_MS,
            )
            .map_err(io)?;
        if sessions + events > 0 {
            tracing::debug!(sessions, events, "forgot old shared sessions and events");
        }
        Ok(())
    }
    fn append_event(&self, stream: &str, event: &str) -> std::io::Result<i64> {
        self.0.append_event(stream, event, now_ms()).map_err(io)
    }
    fn events_after(&self, stream: &str, after: i64) -> std::io::Result<Vec<(i64, String)>> {
        self.0.events_after(stream, after).map_err(io)
    }
    fn stream_start(&self, session: &str, stream: &str) -> std::io::Result<i64> {
        self.0.stream_start(session, stream).map_err(io)
    }
    fn subscribe(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        self.1.as_ref().map(|tx| tx.subscribe())
    }
}

fn backend(e: StoreError) -> ringfence_tools::BackendError {
    ringfence_tools::BackendError::new(e)
}

impl ringfence_tools::SharedReads for SessionTables {
    fn get(
        &self,
        session: &str,
        path: &str,
    ) -> Result<Option<ringfence_tools::ReadRecord>, ringfence_tools::BackendError> {
        let Some(read) = self.0.read_record(session, path).map_err(backend)? else {
            return Ok(None);
        };
        // A row another ringfence could not have written is no record.
        let Ok(hash) = <[u8; 32]>::try_from(read.hash.as_slice()) else {
            return Ok(None);
        };
        Ok(Some(ringfence_tools::ReadRecord {
            hash,
            size: read.size.max(0) as u64,
            mtime: read.mtime_ns.map(|ns| {
                std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns.max(0) as u64)
            }),
        }))
    }

    fn record(
        &self,
        session: &str,
        path: &str,
        record: &ringfence_tools::ReadRecord,
    ) -> Result<(), ringfence_tools::BackendError> {
        let read = ringfence_store::pg::sessions::StoredRead {
            hash: record.hash.to_vec(),
            size: record.size as i64,
            mtime_ns: record
                .mtime
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as i64),
        };
        self.0
            .set_read_record(session, path, &read, now_ms())
            .map_err(backend)
    }

    fn forget(&self, session: &str, path: &str) -> Result<(), ringfence_tools::BackendError> {
        self.0.forget_read_record(session, path).map_err(backend)
    }
}

fn now_ms() -> i64 {
    ringfence_tools::time::now_ms()
}
