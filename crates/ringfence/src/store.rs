//! The server's own state in the store: with PostgreSQL, the audit table, the MCP sessions
//! and their events, and the read-first records of HTTP sessions (with SQLite they live in
//! the instance's memory and the data directory's files). Each family opens its own
//! state through the same `ringfence_store::SharedStore`.

use std::sync::Arc;

use ringfence_store::pg::audit::PgAudit;
use ringfence_store::pg::sessions::PgSessions;
use ringfence_store::{OpenError, SharedStore, StoreError};

/// The shared audit table, with PostgreSQL (`None` with SQLite, whose trail is the data
/// directory's file alone).
pub fn audit(store: &SharedStore) -> Result<Option<Arc<PgAudit>>, OpenError> {
    store.open_shared("audit table", |pg| Ok(Arc::new(PgAudit::open(pg)?)))
}

/// The shared MCP session tables, with PostgreSQL (`None` with SQLite: sessions live in the
/// instance's memory).
pub fn sessions(
    store: &SharedStore,
) -> Result<Option<Arc<dyn ringfence_mcp::SessionDirectory>>, OpenError> {
    store.open_shared("session tables", |pg| {
        let tables = PgSessions::open(pg)?;
        let heard = tables.listen();
        Ok(Arc::new(SessionTables(tables, Some(heard)))
            as Arc<dyn ringfence_mcp::SessionDirectory>)
    })
}

/// The shared read-first records of HTTP sessions, with PostgreSQL (`None` with SQLite).
pub fn reads(
    store: &SharedStore,
) -> Result<Option<Arc<dyn ringfence_files::SharedReads>>, OpenError> {
    store.open_shared("read records", |pg| {
        Ok(Arc::new(SessionTables(PgSessions::open(pg)?, None))
            as Arc<dyn ringfence_files::SharedReads>)
    })
}

/// The settings page's sign-ins: PostgreSQL's table, so any instance serves them; this
/// instance's memory with SQLite (one instance; a restart signs everyone out).
pub fn web_sessions(store: &SharedStore) -> Result<Arc<dyn ringfence_mcp::WebSessions>, OpenError> {
    Ok(store
        .open_shared("settings sign-ins", |pg| {
            Ok(Arc::new(WebSignIns(PgSessions::open(pg)?)) as Arc<dyn ringfence_mcp::WebSessions>)
        })?
        .unwrap_or_else(|| Arc::new(ringfence_mcp::MemoryWebSessions::default())))
}

#[derive(Debug)]
struct WebSignIns(PgSessions);

impl ringfence_mcp::WebSessions for WebSignIns {
    fn create(
        &self,
        key: &str,
        session: &ringfence_mcp::WebSession,
        expires_ms: i64,
    ) -> std::io::Result<()> {
        self.0
            .web_create(key, &session.user, &session.csrf, expires_ms, now_ms())
            .map_err(io)
    }
    fn find(&self, key: &str, now_ms: i64) -> std::io::Result<Option<ringfence_mcp::WebSession>> {
        Ok(self
            .0
            .web_find(key, now_ms)
            .map_err(io)?
            .map(|(user, csrf)| ringfence_mcp::WebSession { user, csrf }))
    }
    fn remove(&self, key: &str) -> std::io::Result<()> {
        self.0.web_remove(key).map_err(io)
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

fn backend(e: StoreError) -> ringfence_core::BackendError {
    ringfence_core::BackendError::new(e)
}

impl ringfence_files::SharedReads for SessionTables {
    fn get(
        &self,
        session: &str,
        path: &str,
    ) -> Result<Option<ringfence_files::ReadRecord>, ringfence_core::BackendError> {
        let Some(read) = self.0.read_record(session, path).map_err(backend)? else {
            return Ok(None);
        };
        // A row another ringfence could not have written is no record.
        let Ok(hash) = <[u8; 32]>::try_from(read.hash.as_slice()) else {
            return Ok(None);
        };
        Ok(Some(ringfence_files::ReadRecord {
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
        record: &ringfence_files::ReadRecord,
    ) -> Result<(), ringfence_core::BackendError> {
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

    fn forget(&self, session: &str, path: &str) -> Result<(), ringfence_core::BackendError> {
        self.0.forget_read_record(session, path).map_err(backend)
    }
}

fn now_ms() -> i64 {
    ringfence_core::time::now_ms()
}
