//! The local calendars in PostgreSQL: the same rows as `calendar.db`, shared by every
//! instance. A replace holds the object's row (`FOR UPDATE`) while it checks the version,
//! so two instances editing one event at once cannot both win.

use super::{CalendarStore, Object, Revision, WriteError, next_version};
use ringfence_store::pg::{Pg, Row};
use ringfence_store::{Schema, StoreError};

/// The calendar tables, step for step as `calendar.db`'s.
pub const CALENDAR_PG_SCHEMA: Schema = Schema {
    name: "calendar",
    migrations: &[
        // 1: calendars and their objects.
        "CREATE TABLE calendars (
            \"user\" TEXT NOT NULL,
            id TEXT NOT NULL,
            name TEXT NOT NULL,
            created_ms BIGINT NOT NULL,
            PRIMARY KEY (\"user\", id)
        );
        CREATE TABLE calendar_objects (
            \"user\" TEXT NOT NULL,
            calendar TEXT NOT NULL,
            href TEXT NOT NULL,
            ics TEXT NOT NULL,
            version BIGINT NOT NULL,
            span_start BIGINT NOT NULL,
            span_end BIGINT NOT NULL,
            updated_ms BIGINT NOT NULL,
            PRIMARY KEY (\"user\", calendar, href)
        );
        CREATE INDEX calendar_objects_span ON calendar_objects (\"user\", calendar, span_start);",
    ],
};

/// The local calendars of a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgCalendar {
    pg: Pg,
}

impl PgCalendar {
    /// The calendars of `pg`, migrating their tables first.
    pub fn open(pg: Pg) -> Result<PgCalendar, StoreError> {
        pg.migrate(&CALENDAR_PG_SCHEMA)?;
        Ok(PgCalendar { pg })
    }
}

fn object(r: &Row) -> Object {
    Object {
        calendar: r.get(0),
        href: r.get(1),
        version: r.get(2),
        ics: r.get(3),
    }
}

const INSERT: &str = "INSERT INTO calendar_objects
        (\"user\", calendar, href, ics, version, span_start, span_end, updated_ms)
    VALUES ($1, $2, $3, $4, $8, $5, $6, $7)
    ON CONFLICT DO NOTHING";

impl CalendarStore for PgCalendar {
    fn calendars(
        &self,
        user: &str,
        default: (&str, &str),
        now_ms: i64,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.pg.run(async |c| {
            // Two first calls at once may both find none: the key makes one insert win.
            c.execute(
                "INSERT INTO calendars (\"user\", id, name, created_ms)
                 SELECT $1, $2, $3, $4
                 WHERE NOT EXISTS (SELECT 1 FROM calendars WHERE \"user\" = $1)
                 ON CONFLICT DO NOTHING",
                &[&user, &default.0, &default.1, &now_ms],
            )
            .await?;
            Ok(c.query(
                "SELECT id, name FROM calendars WHERE \"user\" = $1 ORDER BY created_ms, id",
                &[&user],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
        })
    }

    fn ensure_calendar(
        &self,
        user: &str,
        id: &str,
        name: &str,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.pg.run(async |c| {
            c.execute(
                "INSERT INTO calendars (\"user\", id, name, created_ms) VALUES ($1, $2, $3, $4)
                 ON CONFLICT DO NOTHING",
                &[&user, &id, &name, &now_ms],
            )
            .await?;
            Ok(())
        })
    }

    fn in_window(
        &self,
        user: &str,
        calendar: &str,
        from_ms: i64,
        to_ms: i64,
    ) -> Result<Vec<Object>, StoreError> {
        self.pg.run(async |c| {
            Ok(c.query(
                "SELECT calendar, href, version, ics FROM calendar_objects
                 WHERE \"user\" = $1 AND calendar = $2 AND span_start < $4 AND span_end >= $3",
                &[&user, &calendar, &from_ms, &to_ms],
            )
            .await?
            .iter()
            .map(object)
            .collect())
        })
    }

    fn get(&self, user: &str, calendar: &str, href: &str) -> Result<Option<Object>, StoreError> {
        self.pg.run(async |c| {
            Ok(c.query_opt(
                "SELECT calendar, href, version, ics FROM calendar_objects
                 WHERE \"user\" = $1 AND calendar = $2 AND href = $3",
                &[&user, &calendar, &href],
            )
            .await?
            .as_ref()
            .map(object))
        })
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
        let n = self.pg.run(async |c| {
            Ok(c.execute(
                INSERT,
                &[
                    &user, &calendar, &href, &ics, &span.0, &span.1, &now_ms, &version,
                ],
            )
            .await?)
        })?;
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
        let version = next_version(now_ms, None);
        let stored = self.pg.transaction(async |tx| {
            let insert = tx.prepare(INSERT).await?;
            let mut stored = 0;
            for (href, ics, span) in items {
                stored += tx
                    .execute(
                        &insert,
                        &[
                            &user, &calendar, href, ics, &span.0, &span.1, &now_ms, &version,
                        ],
                    )
                    .await? as usize;
            }
            Ok(stored)
        })?;
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
        let version = next_version(now_ms, Some(expected));
        let outcome = self.pg.transaction(async |tx| {
            let current: Option<i64> = tx
                .query_opt(
                    "SELECT version FROM calendar_objects
                     WHERE \"user\" = $1 AND calendar = $2 AND href = $3 FOR UPDATE",
                    &[&user, &calendar, &href],
                )
                .await?
                .map(|r| r.get(0));
            match current {
                None => return Ok(Err(WriteError::Missing)),
                Some(v) if v != expected => return Ok(Err(WriteError::Changed)),
                Some(_) => {}
            }
            tx.execute(
                "UPDATE calendar_objects SET ics = $4, version = $8, span_start = $5,
                     span_end = $6, updated_ms = $7
                 WHERE \"user\" = $1 AND calendar = $2 AND href = $3",
                &[
                    &user, &calendar, &href, &ics, &span.0, &span.1, &now_ms, &version,
                ],
            )
            .await?;
            Ok(Ok(()))
        })?;
        outcome?;
        Ok(Object::written(calendar, href, version, ics))
    }

    fn remove(
        &self,
        user: &str,
        calendar: &str,
        href: &str,
        expected: i64,
    ) -> Result<(), WriteError> {
        let (removed, exists) = self.pg.run(async |c| {
            let n = c
                .execute(
                    "DELETE FROM calendar_objects
                     WHERE \"user\" = $1 AND calendar = $2 AND href = $3 AND version = $4",
                    &[&user, &calendar, &href, &expected],
                )
                .await?;
            if n == 1 {
                return Ok((true, true));
            }
            let exists: bool = c
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM calendar_objects
                         WHERE \"user\" = $1 AND calendar = $2 AND href = $3)",
                    &[&user, &calendar, &href],
                )
                .await?
                .get(0);
            Ok((false, exists))
        })?;
        match (removed, exists) {
            (true, _) => Ok(()),
            (false, true) => Err(WriteError::Changed),
            (false, false) => Err(WriteError::Missing),
        }
    }

    fn all(&self, user: &str, calendar: Option<&str>) -> Result<Vec<Object>, StoreError> {
        self.pg.run(async |c| {
            Ok(c.query(
                "SELECT calendar, href, version, ics FROM calendar_objects
                 WHERE \"user\" = $1 AND ($2::TEXT IS NULL OR calendar = $2)
                 ORDER BY calendar, span_start, href",
                &[&user, &calendar],
            )
            .await?
            .iter()
            .map(object)
            .collect())
        })
    }

    fn users(&self) -> Result<Vec<String>, StoreError> {
        self.pg.run(async |c| {
            Ok(c.query(
                "SELECT DISTINCT \"user\" FROM calendars ORDER BY \"user\"",
                &[],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect())
        })
    }
}
