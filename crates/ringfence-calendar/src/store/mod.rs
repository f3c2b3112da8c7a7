//! The local calendar in `calendar.db`: per user, named calendars holding iCalendar objects
//! (one event with its overrides each, as CalDAV keeps them), each with a version that works
//! as its ETag and the span of time it can occur in, for window queries. What the objects
//! mean is `ringfence-calendar`'s business; this keeps them, once, per user.

use std::path::Path;

use rusqlite::{OptionalExtension, TransactionBehavior, params};

use ringfence_store::{Durability, Schema, Store, StoreError};

pub mod pg;

pub const CALENDAR_SCHEMA: Schema = Schema {
    name: "calendar",
    migrations: &[
        // 1: calendars and their objects.
        "CREATE TABLE calendars (
            user TEXT NOT NULL,
            id TEXT NOT NULL,
            name TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            PRIMARY KEY (user, id)
        ) WITHOUT ROWID;
        CREATE TABLE calendar_objects (
            user TEXT NOT NULL,
            calendar TEXT NOT NULL,
            href TEXT NOT NULL,
            ics TEXT NOT NULL,
            version INTEGER NOT NULL,
            span_start INTEGER NOT NULL,
            span_end INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            PRIMARY KEY (user, calendar, href)
        );
        CREATE INDEX calendar_objects_span ON calendar_objects (user, calendar, span_start);",
    ],
};

/// A stored object: where it is, its version (the ETag) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    pub calendar: String,
    pub href: String,
    pub version: i64,
    pub ics: String,
}

impl Object {
    /// The object a write just stored.
    pub(crate) fn written(calendar: &str, href: &str, version: i64, ics: &str) -> Object {
        Object {
            calendar: calendar.to_owned(),
            href: href.to_owned(),
            version,
            ics: ics.to_owned(),
        }
    }
}

/// Why a write did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteError {
    /// Someone changed or removed it since `expected` was read.
    Changed,
    /// There is no such object (or, for a new one, there already is).
    Missing,
    Exists,
    Store(String),
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> WriteError {
        WriteError::Store(e.to_string())
    }
}

impl From<rusqlite::Error> for WriteError {
    fn from(e: rusqlite::Error) -> WriteError {
        WriteError::Store(e.to_string())
    }
}

/// What an object becomes: its iCalendar text, the span its occurrences cover, and when.
#[derive(Debug, Clone, Copy)]
pub struct Revision<'a> {
    pub ics: &'a str,
    pub span: (i64, i64),
    pub now_ms: i64,
}

/// The local calendars' storage, one implementation per backend (SQLite's [`CalendarDb`],
/// and PostgreSQL's in [`pg`]).
pub trait CalendarStore: Send + Sync + std::fmt::Debug {
    /// The user's calendars (id, name), made with `default` first when they have none.
    fn calendars(
        &self,
        user: &str,
        default: (&str, &str),
        now_ms: i64,
    ) -> Result<Vec<(String, String)>, StoreError>;

    /// Makes calendar `id` of the user (named `name`) unless it exists.
    fn ensure_calendar(
        &self,
        user: &str,
        id: &str,
        name: &str,
        now_ms: i64,
    ) -> Result<(), StoreError>;

    /// The objects of a calendar that can occur in `[from_ms, to_ms)`.
    fn in_window(
        &self,
        user: &str,
        calendar: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<Object>, StoreError>;

    fn get(&self, user: &str, calendar: &str, href: &str) -> Result<Option<Object>, StoreError>;

    /// Stores a new object. Versions are times in microseconds (each write's above the last
    /// one's), so an object deleted and made again never gets an old version back.
    fn insert(
        &self,
        user: &str,
        calendar: &str,
        href: &str,
        ics: &str,
        span: (i64, i64),
        now_ms: i64,
    ) -> Result<Object, WriteError>;

    /// Stores many new objects `(href, ics, span)` in one transaction (an import); those
    /// whose href is there already are left as they are. Returns (stored, skipped).
    fn insert_many(
        &self,
        user: &str,
        calendar: &str,
        items: &[(String, String, (i64, i64))],
        now_ms: i64,
    ) -> Result<(usize, usize), StoreError>;

    /// Replaces an object if it is still at version `expected`.
    fn replace(
        &self,
        user: &str,
        calendar: &str,
        href: &str,
        expected: i64,
        revision: Revision<'_>,
    ) -> Result<Object, WriteError>;

    /// Removes an object if it is still at version `expected`.
    fn remove(
        &self,
        user: &str,
        calendar: &str,
        href: &str,
        expected: i64,
    ) -> Result<(), WriteError>;

    /// Every object of the user (of one calendar if given), for export.
    fn all(&self, user: &str, calendar: Option<&str>) -> Result<Vec<Object>, StoreError>;

    /// The users with calendars.
    fn users(&self) -> Result<Vec<String>, StoreError>;
}

/// The version a write at `now_ms` gives an object that was at `previous` (if any): the
/// time in microseconds, always above the previous one.
pub(crate) fn next_version(now_ms: i64, previous: Option<i64>) -> i64 {
    let v = now_ms.saturating_mul(1000);
    previous.map_or(v, |p| v.max(p + 1))
}

#[derive(Debug)]
pub struct CalendarDb {
    store: Store,
}

impl CalendarDb {
    pub fn open(path: &Path) -> Result<CalendarDb, StoreError> {
        Ok(CalendarDb {
            store: ringfence_store::open_file(path, Durability::Full, &CALENDAR_SCHEMA)?,
        })
    }
}

impl CalendarStore for CalendarDb {
    fn calendars(
        &self,
        user: &str,
        default: (&str, &str),
        now_ms: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let conn = self.store.conn();
        conn.execute(
            "INSERT INTO calendars (user, id, name, created_ms)
             SELECT ?1, ?2, ?3, ?4 WHERE NOT EXISTS (SELECT 1 FROM calendars WHERE user = ?1)",
            params![user, default.0, default.1, now_ms],
        )?;
        let mut q =
            conn.prepare("SELECT id, name FROM calendars WHERE user = ?1 ORDER BY created_ms, id")?;
        let rows = q.query_map(params![user], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn ensure_calendar(
        &self,
        user: &str,
        id: &str,
        name: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.store.conn().execute(
            "INSERT OR IGNORE INTO calendars (user, id, name, created_ms) VALUES (?1, ?2, ?3, ?4)",
            params![user, id, name, now_ms],
        )?;
        Ok(())
    }

    fn in_window(
        &self,
        user: &str,
        calendar: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<Object>, StoreError> {
        let conn = self.store.conn();
        let mut q = conn.prepare_cached(
            "SELECT calendar, href, version, ics FROM calendar_objects
             WHERE user = ?1 AND calendar = ?2 AND span_start < ?4 AND span_end >= ?3",
        )?;
        let rows = q.query_map(params![user, calendar, from_ms, to_ms], object)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn get(&self, user: &str, calendar: &str, href: &str) -> Result<Option<Object>, StoreError> {
        Ok(self
            .store
            .conn()
            .query_row(
                "SELECT calendar, href, version, ics FROM calendar_objects
                 WHERE user = ?1 AND calendar = ?2 AND href = ?3",
                params![user, calendar, href],
                object,
            )
            .optional()?)
    }

    fn insert(
        &self,
        user: &str,
        calendar: &str,
        href: &str,
        ics: &str,
        span: (i64, i64),
        now_ms: i64,
    ) -> Result<Object, WriteError> {
        let version = next_version(now_ms, None);
        let n = self.store.conn().execute(
            "INSERT OR IGNORE INTO calendar_objects
                 (user, calendar, href, ics, version, span_start, span_end, updated_ms)
             VALUES (?1, ?2, ?3, ?4, ?8, ?5, ?6, ?7)",
            params![user, calendar, href, ics, span.0, span.1, now_ms, version],
        )?;
        if n == 0 {
            return Err(WriteError::Exists);
        }
        Ok(Object::written(calendar, href, version, ics))
    }

    fn insert_many(
        &self,
        user: &str,
        calendar: &str,
        items: &[(String, String, (i64, i64))],
        now_ms: i64,
    ) -> Result<(usize, usize), StoreError> {
        let mut conn = self.store.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut stored = 0;
        {
            let mut q = tx.prepare(
                "INSERT OR IGNORE INTO calendar_objects
                     (user, calendar, href, ics, version, span_start, span_end, updated_ms)
                 VALUES (?1, ?2, ?3, ?4, ?8, ?5, ?6, ?7)",
            )?;
            let version = next_version(now_ms, None);
            for (href, ics, span) in items {
                stored += q.execute(params![
                    user, calendar, href, ics, span.0, span.1, now_ms, version
                ])?;
            }
        }
        tx.commit()?;
        Ok((stored, items.len() - stored))
    }

    fn replace(
        &self,
        user: &str,
        calendar: &str,
        href: &str,
        expected: i64,
        revision: Revision<'_>,
    ) -> Result<Object, WriteError> {
        let Revision { ics, span, now_ms } = revision;
        let mut conn = self.store.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let current: Option<i64> = tx
            .query_row(
                "SELECT version FROM calendar_objects WHERE user = ?1 AND calendar = ?2 AND href = ?3",
                params![user, calendar, href],
                |r| r.get(0),
            )
            .optional()?;
        match current {
            None => return Err(WriteError::Missing),
            Some(v) if v != expected => return Err(WriteError::Changed),
            Some(_) => {}
        }
        let version = next_version(now_ms, Some(expected));
        tx.execute(
            "UPDATE calendar_objects SET ics = ?4, version = ?8, span_start = ?5,
                 span_end = ?6, updated_ms = ?7
             WHERE user = ?1 AND calendar = ?2 AND href = ?3",
            params![user, calendar, href, ics, span.0, span.1, now_ms, version],
        )?;
        tx.commit()?;
        Ok(Object::written(calendar, href, version, ics))
    }

    fn remove(
        &self,
        user: &str,
        calendar: &str,
        href: &str,
        expected: i64,
    ) -> Result<(), WriteError> {
        let conn = self.store.conn();
        let n = conn.execute(
            "DELETE FROM calendar_objects
             WHERE user = ?1 AND calendar = ?2 AND href = ?3 AND version = ?4",
            params![user, calendar, href, expected],
        )?;
        if n == 1 {
            return Ok(());
        }
        let exists: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM calendar_objects WHERE user = ?1 AND calendar = ?2 AND href = ?3)",
            params![user, calendar, href],
            |r| r.get(0),
        )?;
        Err(if exists {
            WriteError::Changed
        } else {
            WriteError::Missing
        })
    }

    fn all(&self, user: &str, calendar: Option<&str>) -> Result<Vec<Object>, StoreError> {
        let conn = self.store.conn();
        let mut q = conn.prepare(
            "SELECT calendar, href, version, ics FROM calendar_objects
             WHERE user = ?1 AND (?2 IS NULL OR calendar = ?2) ORDER BY calendar, span_start, href",
        )?;
        let rows = q.query_map(params![user, calendar], object)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn users(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.store.conn();
        let mut q = conn.prepare("SELECT DISTINCT user FROM calendars ORDER BY user")?;
        let rows = q.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }
}

fn object(r: &rusqlite::Row) -> rusqlite::Result<Object> {
    Ok(Object {
        calendar: r.get(0)?,
        href: r.get(1)?,
        version: r.get(2)?,
        ics: r.get(3)?,
    })
}

/// The local calendars' state, for `ringfence store migrate`: both schemas, the tables, and
/// the SQLite file at `file`.
pub fn state(file: std::path::PathBuf) -> ringfence_store::pg::copy::Family {
    use ringfence_store::pg::copy::{Family, Table};
    Family {
        sqlite: &CALENDAR_SCHEMA,
        postgres: &pg::CALENDAR_PG_SCHEMA,
        tables: &[
            Table {
                name: "calendars",
                renamed: None,
                key: &["user", "id"],
                identity: None,
            },
            Table {
                name: "calendar_objects",
                renamed: None,
                key: &["user", "calendar", "href"],
                identity: None,
            },
        ],
        file,
        durability: Durability::Full,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite() {
        let dir = tempfile::tempdir().unwrap();
        versions_guard_writes_and_users_stay_apart(
            &CalendarDb::open(&dir.path().join("calendar.db")).unwrap(),
        );
    }

    #[test]
    fn postgres() {
        if let Some(db) = ringfence_store::pg::scratch::ScratchDb::new() {
            versions_guard_writes_and_users_stay_apart(
                &pg::PgCalendar::open(db.connect()).unwrap(),
            );
        }
    }

    fn rev(ics: &str, span: (i64, i64), now_ms: i64) -> Revision<'_> {
        Revision { ics, span, now_ms }
    }

    fn versions_guard_writes_and_users_stay_apart(db: &dyn CalendarStore) {
        let cals = db.calendars("alice", ("personal", "Personal"), 1).unwrap();
        assert_eq!(cals, [("personal".to_owned(), "Personal".to_owned())]);
        let a = db
            .insert("alice", "personal", "e1", "A1", (100, 200), 1)
            .unwrap();
        assert_eq!(a.version, 1000);
        assert_eq!(
            db.insert("alice", "personal", "e1", "again", (0, 1), 1),
            Err(WriteError::Exists)
        );
        // Windows: [150, 300) overlaps the span, [0, 100) ends where it starts.
        assert_eq!(
            db.in_window("alice", "personal", 150, 300).unwrap().len(),
            1
        );
        assert!(
            db.in_window("alice", "personal", 0, 100)
                .unwrap()
                .is_empty()
        );
        assert!(db.in_window("bob", "personal", 0, 1000).unwrap().is_empty());
        assert!(db.get("bob", "personal", "e1").unwrap().is_none());
        let b = db
            .replace(
                "alice",
                "personal",
                "e1",
                a.version,
                rev("A2", (100, 200), 2),
            )
            .unwrap();
        assert_eq!(b.version, 2000);
        // A writer still holding the first version is refused; nothing is overwritten.
        assert_eq!(
            db.replace(
                "alice",
                "personal",
                "e1",
                a.version,
                rev("stale", (0, 1), 3)
            ),
            Err(WriteError::Changed)
        );
        assert_eq!(
            db.remove("alice", "personal", "e1", a.version),
            Err(WriteError::Changed)
        );
        assert_eq!(
            db.get("alice", "personal", "e1").unwrap().unwrap().ics,
            "A2"
        );
        assert_eq!(
            db.remove("bob", "personal", "e1", b.version),
            Err(WriteError::Missing)
        );
        db.remove("alice", "personal", "e1", b.version).unwrap();
        assert_eq!(
            db.replace("alice", "personal", "e1", b.version, rev("x", (0, 1), 4)),
            Err(WriteError::Missing)
        );
        // Made again, it never carries a version it had before.
        let again = db
            .insert("alice", "personal", "e1", "A3", (100, 200), 5)
            .unwrap();
        assert!(again.version > b.version);
        db.remove("alice", "personal", "e1", again.version).unwrap();
        assert_eq!(db.users().unwrap(), ["alice"]);
        let many = vec![
            ("e2".to_owned(), "B".to_owned(), (0, 10)),
            ("e3".to_owned(), "C".to_owned(), (0, 10)),
        ];
        assert_eq!(
            db.insert_many("alice", "personal", &many, 5).unwrap(),
            (2, 0)
        );
        assert_eq!(
            db.insert_many("alice", "personal", &many, 6).unwrap(),
            (0, 2)
        );
        assert_eq!(db.all("alice", None).unwrap().len(), 2);
    }
}
