//! MCP sessions in PostgreSQL, so any instance serves any request of a session: who owns
//! each session and the client's `initialize` parameters (to re-create the session on an
//! instance that has not seen it), and the log of server-sent events (so a client that
//! lost its stream resumes it from `Last-Event-ID` on any instance).
//!
//! There is no SQLite twin: one instance keeps its sessions in memory.
//!
//! Events and read records are written without waiting for the commit's WAL flush
//! (`synchronous_commit = off` for that statement alone): they are the transport's working
//! state, not what a user wrote. A database crash may lose the last fraction of a second of
//! them (a client then resumes from an earlier event, or is asked to read a file again),
//! and no tool call waits for two or three disk flushes of them. Sessions' owners and
//! states, and everything the families store, stay durable.

use super::Pg;
use crate::{Schema, StoreError};

/// The session tables.
pub const SESSIONS_PG_SCHEMA: Schema = Schema {
    name: "mcp sessions",
    migrations: &[
        // 1: sessions and their event log.
        "CREATE TABLE mcp_sessions (
            id TEXT PRIMARY KEY,
            \"user\" TEXT,
            state TEXT,
            created_ms BIGINT NOT NULL,
            seen_ms BIGINT NOT NULL
        );
        CREATE INDEX mcp_sessions_seen ON mcp_sessions (seen_ms);
        CREATE TABLE mcp_events (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            stream TEXT NOT NULL,
            event TEXT NOT NULL,
            at_ms BIGINT NOT NULL
        );
        CREATE INDEX mcp_events_stream ON mcp_events (stream, id);
        CREATE INDEX mcp_events_at ON mcp_events (at_ms);",
        // 2: the read-first records of shared sessions.
        "CREATE TABLE mcp_read_records (
            session TEXT NOT NULL,
            path TEXT NOT NULL,
            hash BYTEA NOT NULL,
            size BIGINT NOT NULL,
            mtime_ns BIGINT,
            at_ms BIGINT NOT NULL,
            PRIMARY KEY (session, path)
        );
        CREATE INDEX mcp_read_records_at ON mcp_read_records (at_ms);",
        // 3: whether a session's standalone stream was ever opened; events of one stream
        // committed in order.
        "ALTER TABLE mcp_sessions ADD COLUMN streamed BOOLEAN NOT NULL DEFAULT false;",
        // 4: the settings page's sign-ins, by the SHA-256 of their cookie.
        "CREATE TABLE web_sessions (
            key TEXT PRIMARY KEY,
            \"user\" TEXT NOT NULL,
            csrf TEXT NOT NULL,
            expires_ms BIGINT NOT NULL
        );
        CREATE INDEX web_sessions_expires ON web_sessions (expires_ms);",
    ],
};

/// A file as a session last read (or wrote) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRead {
    pub hash: Vec<u8>,
    pub size: i64,
    /// Modification time in nanoseconds since the epoch, when known.
    pub mtime_ns: Option<i64>,
}

/// A session as the store knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSession {
    /// Who opened it (recorded once the `initialize` answer names the session).
    pub user: Option<String>,
    /// The transport's state (the client's `initialize` parameters), as it wrote it.
    pub state: Option<String>,
}

/// The channel on which each appended event's stream is announced.
pub const EVENTS_CHANNEL: &str = "ringfence_mcp_events";

/// The MCP session tables of a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgSessions {
    pg: Pg,
}

impl PgSessions {
    /// The session tables of `pg`, migrating them first.
    pub fn open(pg: Pg) -> Result<PgSessions, StoreError> {
        pg.migrate(&SESSIONS_PG_SCHEMA)?;
        Ok(PgSessions { pg })
    }

    /// Records session `id`'s state (the transport writes it after the handshake).
    pub fn save_state(&self, id: &str, state: &str, now_ms: i64) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute(
                "INSERT INTO mcp_sessions (id, state, created_ms, seen_ms) VALUES ($1, $2, $3, $3)
                 ON CONFLICT (id) DO UPDATE SET state = EXCLUDED.state, seen_ms = EXCLUDED.seen_ms",
                &[&id, &state, &now_ms],
            )
            .await?;
            Ok(())
        })
    }

    /// Records `user` as session `id`'s owner. The first owner stays: a session never
    /// changes hands.
    pub fn set_owner(&self, id: &str, user: &str, now_ms: i64) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute(
                "INSERT INTO mcp_sessions (id, \"user\", created_ms, seen_ms) VALUES ($1, $2, $3, $3)
                 ON CONFLICT (id) DO UPDATE SET \"user\" = COALESCE(mcp_sessions.\"user\", EXCLUDED.\"user\"),
                     seen_ms = EXCLUDED.seen_ms",
                &[&id, &user, &now_ms],
            )
            .await?;
            Ok(())
        })
    }

    /// Session `id`, if the store has it.
    pub fn session(&self, id: &str) -> Result<Option<StoredSession>, StoreError> {
        self.pg.run(async |c| {
            Ok(c.query_opt(
                "SELECT \"user\", state FROM mcp_sessions WHERE id = $1",
                &[&id],
            )
            .await?
            .map(|r| StoredSession {
                user: r.get(0),
                state: r.get(1),
            }))
        })
    }

    /// Forgets session `id` (its client ended it).
    pub fn remove(&self, id: &str) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute("DELETE FROM mcp_sessions WHERE id = $1", &[&id])
                .await?;
            Ok(())
        })
    }

    /// Keeps a settings-page sign-in under `key` until `expires_ms`, forgetting expired ones.
    pub fn web_create(
        &self,
        key: &str,
        user: &str,
        csrf: &str,
        expires_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute("DELETE FROM web_sessions WHERE expires_ms <= $1", &[&now_ms])
                .await?;
            c.execute(
                "INSERT INTO web_sessions (key, \"user\", csrf, expires_ms) VALUES ($1, $2, $3, $4)",
                &[&key, &user, &csrf, &expires_ms],
            )
            .await?;
            Ok(())
        })
    }

    /// The sign-in under `key` (its user and CSRF token), if it has not expired at `now_ms`.
    pub fn web_find(&self, key: &str, now_ms: i64) -> Result<Option<(String, String)>, StoreError> {
        const FIND: &str =
            "SELECT \"user\", csrf FROM web_sessions WHERE key = $1 AND expires_ms > $2";
        self.pg.run_prepared(FIND, async |c, statement| {
            Ok(c.query_opt(statement, &[&key, &now_ms])
                .await?
                .map(|r| (r.get(0), r.get(1))))
        })
    }

    /// Ends the sign-in under `key`.
    pub fn web_remove(&self, key: &str) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute("DELETE FROM web_sessions WHERE key = $1", &[&key])
                .await?;
            Ok(())
        })
    }

    /// Marks `ids` (the sessions an instance holds) as seen now, so they are not pruned.
    pub fn touch(&self, ids: &[String], now_ms: i64) -> Result<(), StoreError> {
        if ids.is_empty() {
            return Ok(());
        }
        self.pg.run(async |c| {
            c.execute(
                "UPDATE mcp_sessions SET seen_ms = $2 WHERE id = ANY($1)",
                &[&ids, &now_ms],
            )
            .await?;
            Ok(())
        })
    }

    /// Forgets sessions nobody held since `sessions_before` (and their read records), events
    /// older than `events_before`, and read records of sessions the table does not hold
    /// (stateless ones) older than `reads_before`; returns how many sessions and events
    /// went.
    pub fn prune(
        &self,
        sessions_before: i64,
        events_before: i64,
        reads_before: i64,
    ) -> Result<(u64, u64), StoreError> {
        self.pg.run(async |c| {
            let sessions = c
                .execute(
                    "DELETE FROM mcp_sessions WHERE seen_ms < $1",
                    &[&sessions_before],
                )
                .await?;
            let events = c
                .execute("DELETE FROM mcp_events WHERE at_ms < $1", &[&events_before])
                .await?;
            c.execute(
                "DELETE FROM mcp_read_records r WHERE r.at_ms < $1
                   AND NOT EXISTS (SELECT 1 FROM mcp_sessions s WHERE s.id = r.session)",
                &[&reads_before],
            )
            .await?;
            Ok((sessions, events))
        })
    }

    /// Session `session`'s record of the file at `path`.
    pub fn read_record(&self, session: &str, path: &str) -> Result<Option<StoredRead>, StoreError> {
        const READ: &str =
            "SELECT hash, size, mtime_ns FROM mcp_read_records WHERE session = $1 AND path = $2";
        self.pg.run_prepared(READ, async |c, statement| {
            Ok(c.query_opt(statement, &[&session, &path])
                .await?
                .map(|r| StoredRead {
                    hash: r.get(0),
                    size: r.get(1),
                    mtime_ns: r.get(2),
                }))
        })
    }

    /// Records that session `session` knows the file at `path` as `read`.
    pub fn set_read_record(
        &self,
        session: &str,
        path: &str,
        read: &StoredRead,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        // Not waiting for the commit's flush (see the module's documentation).
        const RECORD: &str =
            "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true))
             INSERT INTO mcp_read_records (session, path, hash, size, mtime_ns, at_ms)
             SELECT $1, $2, $3, $4, $5, $6 FROM unflushed
             ON CONFLICT (session, path) DO UPDATE SET hash = EXCLUDED.hash,
                 size = EXCLUDED.size, mtime_ns = EXCLUDED.mtime_ns, at_ms = EXCLUDED.at_ms";
        self.pg.run_prepared(RECORD, async |c, statement| {
            c.execute(
                statement,
                &[
                    &session,
                    &path,
                    &read.hash,
                    &read.size,
                    &read.mtime_ns,
                    &now_ms,
                ],
            )
            .await?;
            Ok(())
        })
    }

    /// Forgets session `session`'s record of the file at `path`.
    pub fn forget_read_record(&self, session: &str, path: &str) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute(
                "DELETE FROM mcp_read_records WHERE session = $1 AND path = $2",
                &[&session, &path],
            )
            .await?;
            Ok(())
        })
    }

    /// Where a standalone stream (`stream`) of `session` opened without a position starts:
    /// 0 for the first one the session ever opens (it then gets what was sent before it),
    /// the stream's latest event for later ones.
    pub fn stream_start(&self, session: &str, stream: &str) -> Result<i64, StoreError> {
        self.pg.transaction(async |tx| {
            let first = tx
                .query_opt(
                    "UPDATE mcp_sessions SET streamed = true WHERE id = $1 AND NOT streamed
                     RETURNING id",
                    &[&session],
                )
                .await?
                .is_some();
            if first {
                return Ok(0);
            }
            Ok(tx
                .query_one(
                    "SELECT coalesce(max(id), 0) FROM mcp_events WHERE stream = $1",
                    &[&stream],
                )
                .await?
                .get(0))
        })
    }

    /// Appends an event to `stream`; returns its number (increasing across all streams).
    /// Appends to one stream are serialised (an advisory lock until commit), so its events
    /// commit in the order of their numbers and a reader that has seen number n never
    /// misses a later-committing n − 1. The stream's name is announced on
    /// [`EVENTS_CHANNEL`] when the event commits.
    pub fn append_event(&self, stream: &str, event: &str, now_ms: i64) -> Result<i64, StoreError> {
        // Not waiting for the commit's flush (see the module's documentation).
        const APPEND: &str =
            "WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)),
             ordered AS (SELECT pg_advisory_xact_lock(hashtext($1))),
             appended AS (
                 INSERT INTO mcp_events (stream, event, at_ms)
                 SELECT $1, $2, $3 FROM ordered RETURNING id
             )
             SELECT id, pg_notify('ringfence_mcp_events', $1) FROM appended, unflushed";
        self.pg.run_prepared(APPEND, async |c, statement| {
            Ok(c.query_one(statement, &[&stream, &event, &now_ms])
                .await?
                .get(0))
        })
    }

    /// The streams events are appended to, as any instance appends them (see
    /// [`Pg::listen`]).
    pub fn listen(&self) -> tokio::sync::broadcast::Sender<String> {
        self.pg.listen(EVENTS_CHANNEL)
    }

    /// The events of `stream` after event `after`, in order: (number, event).
    pub fn events_after(&self, stream: &str, after: i64) -> Result<Vec<(i64, String)>, StoreError> {
        self.pg.run(async |c| {
            Ok(c.query(
                "SELECT id, event FROM mcp_events WHERE stream = $1 AND id > $2 ORDER BY id",
                &[&stream, &after],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg::scratch::ScratchDb;

    #[test]
    fn owners_stay_states_load_and_streams_replay_in_order() {
        let Some(db) = ScratchDb::new() else { return };
        let a = PgSessions::open(db.connect()).unwrap();
        // Another instance, on its own pool.
        let b = PgSessions::open(db.connect()).unwrap();
        assert_eq!(b.session("s1").unwrap(), None);
        // The state and the owner arrive in either order.
        a.save_state("s1", "{\"init\":1}", 10).unwrap();
        a.set_owner("s1", "alice", 11).unwrap();
        b.set_owner("s2", "bob", 11).unwrap();
        b.save_state("s2", "{}", 12).unwrap();
        assert_eq!(
            b.session("s1").unwrap(),
            Some(StoredSession {
                user: Some("alice".into()),
                state: Some("{\"init\":1}".into())
            })
        );
        // A session never changes hands.
        b.set_owner("s1", "mallory", 13).unwrap();
        assert_eq!(
            a.session("s1").unwrap().unwrap().user.as_deref(),
            Some("alice")
        );
        // Events: numbered across streams, replayed per stream after a number, and each
        // announced to every instance listening.
        let mut heard = b.listen().subscribe();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let next = |heard: &mut tokio::sync::broadcast::Receiver<String>| {
            runtime.block_on(async {
                tokio::time::timeout(std::time::Duration::from_secs(10), heard.recv())
                    .await
                    .expect("a notification within 10 s")
                    .unwrap()
            })
        };
        // First the (re)connection marker, then the streams as events are appended.
        assert_eq!(next(&mut heard), "");
        let e1 = a.append_event("s1:common", "one", 20).unwrap();
        assert_eq!(next(&mut heard), "s1:common");
        let other = b.append_event("x", "elsewhere", 20).unwrap();
        let e2 = b.append_event("s1:common", "two", 21).unwrap();
        assert!(e1 < other && other < e2);
        assert_eq!(
            b.events_after("s1:common", e1).unwrap(),
            vec![(e2, "two".to_owned())]
        );
        assert_eq!(a.events_after("s1:common", 0).unwrap().len(), 2);
        // The first standalone stream of a session starts at its first event, later ones
        // at its latest.
        assert_eq!(a.stream_start("s1", "s1:common").unwrap(), 0);
        assert_eq!(b.stream_start("s1", "s1:common").unwrap(), e2);
        // Held sessions are kept; the others and old events go.
        // Read records: per session and path, replaced, forgotten.
        let read = |n: u8| StoredRead {
            hash: vec![n; 32],
            size: i64::from(n),
            mtime_ns: Some(7),
        };
        a.set_read_record("s1", "/w/a.txt", &read(1), 30).unwrap();
        b.set_read_record("s1", "/w/a.txt", &read(2), 31).unwrap();
        a.set_read_record("s2", "/w/a.txt", &read(3), 31).unwrap();
        a.set_read_record("stateless:bob", "/w/a.txt", &read(4), 31)
            .unwrap();
        assert_eq!(b.read_record("s1", "/w/a.txt").unwrap(), Some(read(2)));
        assert_eq!(b.read_record("s1", "/w/b.txt").unwrap(), None);
        b.forget_read_record("s1", "/w/a.txt").unwrap();
        assert_eq!(a.read_record("s1", "/w/a.txt").unwrap(), None);
        a.set_read_record("s1", "/w/a.txt", &read(5), 32).unwrap();
        a.touch(&["s1".to_owned()], 100).unwrap();
        assert_eq!(a.prune(50, 21, 40).unwrap(), (1, 2));
        // A held session keeps its records; a pruned one's and old stateless ones go.
        assert_eq!(a.read_record("s1", "/w/a.txt").unwrap(), Some(read(5)));
        assert_eq!(a.read_record("s2", "/w/a.txt").unwrap(), None);
        assert_eq!(a.read_record("stateless:bob", "/w/a.txt").unwrap(), None);
        assert!(a.session("s2").unwrap().is_none());
        assert!(a.session("s1").unwrap().is_some());
        assert_eq!(a.events_after("s1:common", 0).unwrap().len(), 1);
        a.remove("s1").unwrap();
        assert!(b.session("s1").unwrap().is_none());
    }
}
