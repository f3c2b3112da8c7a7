//! Moving state between the backends: every row of the families' SQLite files into
//! PostgreSQL, or back (`ringfence store migrate`).
//!
//! Both sides are migrated to the current schema first (the step numbering is the same, so
//! the tables are too). Rows stream from the source and are written in batches of
//! [`BATCH`], one transaction each; a row whose key is already in the target is left as it
//! is, so a copy that was interrupted is resumed by running it again. At the end each
//! table's rows are counted on both sides: fewer in the target is an error.

use std::path::PathBuf;

use rusqlite::types::Value;
use tokio_postgres::types::ToSql;

use super::Pg;
use crate::{Durability, Schema, Store, StoreError};

/// Rows per transaction on the target.
pub const BATCH: usize = 500;

/// How a column is carried across.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Int,
    Text,
    Bytes,
}

/// One table: its columns (key columns first) and the identity column PostgreSQL numbers.
#[derive(Debug)]
pub struct Table {
    pub name: &'static str,
    /// Its name in PostgreSQL, where that differs (a shared database names tables by
    /// family).
    pub renamed: Option<&'static str>,
    pub columns: &'static [(&'static str, Kind)],
    /// The primary key's columns (rows already in the target are skipped by it).
    pub key: &'static [&'static str],
    /// A column PostgreSQL fills from a sequence, moved past the copied rows afterwards.
    pub identity: Option<&'static str>,
}

/// One family's tables and where its SQLite file is.
#[derive(Debug)]
pub struct Family {
    pub sqlite: &'static Schema,
    pub postgres: &'static Schema,
    pub tables: &'static [Table],
    /// Its SQLite file.
    pub file: PathBuf,
    pub durability: Durability,
}

/// What a copy did for one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copied {
    pub table: &'static str,
    /// Rows read from the source.
    pub read: u64,
    /// Rows written (the rest were in the target already).
    pub written: u64,
    /// Rows in the target afterwards.
    pub in_target: u64,
}

/// Which way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    SqliteToPostgres,
    PostgresToSqlite,
}

impl Table {
    /// Its name in PostgreSQL.
    pub fn pg_name(&self) -> &'static str {
        self.renamed.unwrap_or(self.name)
    }
}

fn quoted(name: &str) -> String {
    format!("\"{name}\"")
}

fn column_list(t: &Table) -> String {
    t.columns
        .iter()
        .map(|(c, _)| quoted(c))
        .collect::<Vec<_>>()
        .join(", ")
}

fn key_list(t: &Table) -> String {
    t.key
        .iter()
        .map(|c| quoted(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where each family keeps its SQLite file.
#[derive(Debug, Clone)]
pub struct Files {
    /// The edit journal (`ringfence.db`).
    pub journal: PathBuf,
    pub followups: PathBuf,
    pub calendar: PathBuf,
    pub memory: PathBuf,
}

/// The families whose state both backends keep, with their SQLite files: the edit journal,
/// follow-ups, local calendars, truths and memories.
pub fn families(files: Files) -> Vec<Family> {
    use Kind::{Bytes, Int, Text};
    const JOURNAL: &[Table] = &[Table {
        name: "edit_journal",
        renamed: None,
        columns: &[
            ("id", Int),
            ("path", Text),
            ("tool", Text),
            ("at_ms", Int),
            ("before", Bytes),
            ("patch_prefix", Int),
            ("patch_suffix", Int),
            ("mode", Int),
            ("after_hash", Bytes),
            ("size", Int),
        ],
        key: &["id"],
        identity: Some("id"),
    }];
    const FOLLOWUPS: &[Table] = &[
        Table {
            name: "followups",
            renamed: None,
            columns: &[
                ("id", Int),
                ("user", Text),
                ("number", Int),
                ("context", Text),
                ("due_ms", Int),
                ("status", Text),
                ("created_ms", Int),
                ("updated_ms", Int),
                ("hold_ms", Int),
                ("attempts", Int),
                ("last_error", Text),
                ("lease_owner", Text),
                ("lease_until_ms", Int),
                ("delivered_ms", Int),
                ("delivered_via", Text),
                ("cancel_reason", Text),
                ("idempotency_key", Text),
            ],
            key: &["id"],
            identity: Some("id"),
        },
        Table {
            name: "followup_counters",
            renamed: None,
            columns: &[("user", Text), ("last", Int)],
            key: &["user"],
            identity: None,
        },
    ];
    const CALENDAR: &[Table] = &[
        Table {
            name: "calendars",
            renamed: None,
            columns: &[
                ("user", Text),
                ("id", Text),
                ("name", Text),
                ("created_ms", Int),
            ],
            key: &["user", "id"],
            identity: None,
        },
        Table {
            name: "calendar_objects",
            renamed: None,
            columns: &[
                ("user", Text),
                ("calendar", Text),
                ("href", Text),
                ("ics", Text),
                ("version", Int),
                ("span_start", Int),
                ("span_end", Int),
                ("updated_ms", Int),
            ],
            key: &["user", "calendar", "href"],
            identity: None,
        },
    ];
    const MEMORY: &[Table] = &[
        Table {
            name: "items",
            renamed: Some("memory_items"),
            columns: &[
                ("id", Int),
                ("user", Text),
                ("kind", Text),
                ("number", Int),
                ("content", Text),
                ("norm_hash", Bytes),
                ("category", Text),
                ("memory_type", Text),
                ("tags", Text),
                ("pinned", Int),
                ("source", Text),
                ("created_ms", Int),
                ("updated_ms", Int),
                ("access_count", Int),
                ("last_access_ms", Int),
                ("embedding", Bytes),
                ("embedding_model", Text),
            ],
            key: &["id"],
            identity: Some("id"),
        },
        Table {
            name: "counters",
            renamed: Some("memory_counters"),
            columns: &[("user", Text), ("kind", Text), ("last", Int)],
            key: &["user", "kind"],
            identity: None,
        },
    ];
    let Files {
        journal,
        followups,
        calendar,
        memory,
    } = files;
    vec![
        Family {
            sqlite: &crate::JOURNAL_SCHEMA,
            postgres: &super::journal::JOURNAL_PG_SCHEMA,
            tables: JOURNAL,
            file: journal,
            durability: Durability::Process,
        },
        Family {
            sqlite: &crate::followups::FOLLOWUP_SCHEMA,
            postgres: &super::followups::FOLLOWUP_PG_SCHEMA,
            tables: FOLLOWUPS,
            file: followups,
            durability: Durability::Full,
        },
        Family {
            sqlite: &crate::calendar::CALENDAR_SCHEMA,
            postgres: &super::calendar::CALENDAR_PG_SCHEMA,
            tables: CALENDAR,
            file: calendar,
            durability: Durability::Full,
        },
        Family {
            sqlite: &crate::memory::MEMORY_SCHEMA,
            postgres: &super::memory::MEMORY_PG_SCHEMA,
            tables: MEMORY,
            file: memory,
            durability: Durability::Full,
        },
    ]
}

/// Copies every table of `family` in `direction`, telling `progress` (table, rows so far)
/// after each batch.
pub fn copy_family(
    family: &Family,
    pg: &Pg,
    direction: Direction,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<Vec<Copied>, StoreError> {
    let sqlite = Store::open_schema(&family.file, family.durability, family.sqlite)?;
    pg.migrate(family.postgres)?;
    let mut report = Vec::new();
    for table in family.tables {
        let (read, written) = match direction {
            Direction::SqliteToPostgres => sqlite_to_pg(&sqlite, pg, table, progress)?,
            Direction::PostgresToSqlite => pg_to_sqlite(pg, &sqlite, table, progress)?,
        };
        if let (Direction::SqliteToPostgres, Some(id)) = (direction, table.identity) {
            // New rows numbered by PostgreSQL must come after the copied ones.
            let sql = format!(
                "SELECT setval(pg_get_serial_sequence('{0}', '{id}'),
                     GREATEST((SELECT max({id}) FROM {0}), 1))",
                table.pg_name()
            );
            pg.run(async |c| Ok(c.batch_execute(&sql).await?))?;
        }
        let count = |name: &str| format!("SELECT count(*) FROM {name}");
        let in_sqlite: i64 = sqlite
            .conn()
            .query_row(&count(table.name), [], |r| r.get(0))?;
        let pg_count = count(table.pg_name());
        let in_pg: i64 = pg.run(async |c| Ok(c.query_one(&pg_count, &[]).await?.get(0)))?;
        let (source, target) = match direction {
            Direction::SqliteToPostgres => (in_sqlite, in_pg),
            Direction::PostgresToSqlite => (in_pg, in_sqlite),
        };
        if target < source {
            return Err(StoreError::InvalidRecord(format!(
                "table {}: {source} rows in the source but {target} in the target after the copy",
                table.name
            )));
        }
        report.push(Copied {
            table: table.name,
            read,
            written,
            in_target: target as u64,
        });
    }
    Ok(report)
}

/// A SQLite value as the parameter of a PostgreSQL column of `kind`.
fn to_pg(value: Value, kind: Kind) -> Result<Box<dyn ToSql + Sync + Send>, StoreError> {
    let bad = |what: &str| StoreError::InvalidRecord(format!("a {what} where {kind:?} belongs"));
    Ok(match (value, kind) {
        (Value::Null, Kind::Int) => Box::new(None::<i64>),
        (Value::Null, Kind::Text) => Box::new(None::<String>),
        (Value::Null, Kind::Bytes) => Box::new(None::<Vec<u8>>),
        (Value::Integer(i), Kind::Int) => Box::new(i),
        (Value::Text(s), Kind::Text) => Box::new(s),
        (Value::Blob(b), Kind::Bytes) => Box::new(b),
        (Value::Real(_), _) => return Err(bad("real number")),
        (Value::Integer(_), _) => return Err(bad("number")),
        (Value::Text(_), _) => return Err(bad("text")),
        (Value::Blob(_), _) => return Err(bad("blob")),
    })
}

fn sqlite_to_pg(
    sqlite: &Store,
    pg: &Pg,
    table: &Table,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<(u64, u64), StoreError> {
    let columns = column_list(table);
    let params: Vec<String> = (1..=table.columns.len()).map(|i| format!("${i}")).collect();
    let insert = format!(
        "INSERT INTO {} ({columns}) VALUES ({}) ON CONFLICT DO NOTHING",
        table.pg_name(),
        params.join(", ")
    );
    let conn = sqlite.conn();
    let mut select = conn.prepare(&format!(
        "SELECT {columns} FROM {} ORDER BY {}",
        table.name,
        key_list(table)
    ))?;
    let mut rows = select.query([])?;
    let (mut read, mut written) = (0u64, 0u64);
    let mut batch: Vec<Vec<Box<dyn ToSql + Sync + Send>>> = Vec::with_capacity(BATCH);
    loop {
        let row = rows.next()?;
        if let Some(row) = row {
            let mut values = Vec::with_capacity(table.columns.len());
            for (i, (_, kind)) in table.columns.iter().enumerate() {
                values.push(to_pg(row.get::<_, Value>(i)?, *kind)?);
            }
            batch.push(values);
            read += 1;
        }
        if batch.len() == BATCH || (row.is_none() && !batch.is_empty()) {
            let rows_of_batch = std::mem::take(&mut batch);
            written += pg.transaction(async |tx| {
                let statement = tx.prepare(&insert).await?;
                let mut n = 0;
                for values in &rows_of_batch {
                    let refs: Vec<&(dyn ToSql + Sync)> =
                        values.iter().map(|v| &**v as &(dyn ToSql + Sync)).collect();
                    n += tx.execute(&statement, &refs).await?;
                }
                Ok(n)
            })?;
            progress(table.name, read);
        }
        if row.is_none() {
            return Ok((read, written));
        }
    }
}

/// A PostgreSQL column of `kind` as a SQLite value.
fn from_pg(row: &tokio_postgres::Row, i: usize, kind: Kind) -> Value {
    match kind {
        Kind::Int => row
            .get::<_, Option<i64>>(i)
            .map_or(Value::Null, Value::Integer),
        Kind::Text => row
            .get::<_, Option<String>>(i)
            .map_or(Value::Null, Value::Text),
        Kind::Bytes => row
            .get::<_, Option<Vec<u8>>>(i)
            .map_or(Value::Null, Value::Blob),
    }
}

fn pg_to_sqlite(
    pg: &Pg,
    sqlite: &Store,
    table: &Table,
    progress: &mut dyn FnMut(&str, u64),
) -> Result<(u64, u64), StoreError> {
    let columns = column_list(table);
    let params: Vec<String> = (1..=table.columns.len()).map(|i| format!("?{i}")).collect();
    let insert = format!(
        "INSERT OR IGNORE INTO {} ({columns}) VALUES ({})",
        table.name,
        params.join(", ")
    );
    let select = format!(
        "SELECT {columns} FROM {} ORDER BY {}",
        table.pg_name(),
        key_list(table)
    );
    let (mut read, mut written) = (0u64, 0u64);
    // Keyset pages would need per-table key types; a portal reads the table in order,
    // BATCH rows at a time, within one snapshot.
    pg.transaction(async |tx| {
        let portal = tx.bind(&select, &[]).await?;
        loop {
            let rows = tx.query_portal(&portal, BATCH as i32).await?;
            if rows.is_empty() {
                return Ok(());
            }
            let mut conn = sqlite.conn();
            let sql_tx = conn.transaction()?;
            {
                let mut statement = sql_tx.prepare_cached(&insert)?;
                for row in &rows {
                    let values: Vec<Value> = table
                        .columns
                        .iter()
                        .enumerate()
                        .map(|(i, (_, kind))| from_pg(row, i, *kind))
                        .collect();
                    written += statement.execute(rusqlite::params_from_iter(values))? as u64;
                }
            }
            sql_tx.commit()?;
            read += rows.len() as u64;
            progress(table.name, read);
        }
    })?;
    Ok((read, written))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ringfence_tools::followups::FollowupBackend;
    use ringfence_tools::{FileKey, Journal, JournalEntry};

    use ringfence_tools::memory::{Kind, MemoryBackend, NewItem, Query, SearchMode, StoreOutcome};

    use super::*;
    use crate::calendar::{CalendarDb, CalendarStore};
    use crate::followups::{FollowupDb, FollowupStore};
    use crate::memory::{MemoryDb, RankConfig};
    use crate::pg::followups::PgFollowups;
    use crate::pg::scratch::ScratchDb;

    fn files(dir: &std::path::Path) -> Vec<Family> {
        families(Files {
            journal: dir.join("ringfence.db"),
            followups: dir.join("followups.db"),
            calendar: dir.join("calendar.db"),
            memory: dir.join("memory.db"),
        })
    }

    /// A two-dimensional embedder: "tea" one way, everything else the other.
    #[derive(Debug)]
    struct Axis;

    impl ringfence_embed::Embedder for Axis {
        fn id(&self) -> &str {
            "test:axis"
        }
        fn dims(&self) -> usize {
            2
        }
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ringfence_embed::EmbedError> {
            Ok(texts
                .iter()
                .map(|t| {
                    if t.contains("tea") {
                        vec![1.0, 0.0]
                    } else {
                        vec![0.0, 1.0]
                    }
                })
                .collect())
        }
    }

    fn memory_db(
        open: impl FnOnce(Option<crate::memory::EmbedderLoader>) -> Arc<MemoryDb>,
    ) -> Arc<MemoryDb> {
        open(Some(Box::new(|| {
            Ok(Arc::new(Axis) as Arc<dyn ringfence_embed::Embedder>)
        })))
    }

    fn new_item(content: &str) -> NewItem {
        NewItem {
            content: content.into(),
            category: None,
            memory_type: Some("preference".into()),
            tags: vec!["drinks".into()],
            pinned: false,
            source: "conversation".into(),
        }
    }

    /// Every row of every table, in key order, as SQLite holds them.
    fn dump(dir: &std::path::Path) -> Vec<(String, Vec<Vec<Value>>)> {
        let mut all = Vec::new();
        for family in files(dir) {
            let store = Store::open_schema(&family.file, family.durability, family.sqlite).unwrap();
            for t in family.tables {
                let conn = store.conn();
                let mut q = conn
                    .prepare(&format!(
                        "SELECT {} FROM {} ORDER BY {}",
                        column_list(t),
                        t.name,
                        key_list(t)
                    ))
                    .unwrap();
                let rows: Vec<Vec<Value>> = q
                    .query_map([], |r| {
                        (0..t.columns.len()).map(|i| r.get::<_, Value>(i)).collect()
                    })
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                all.push((t.name.to_owned(), rows));
            }
        }
        all
    }

    fn fill(dir: &std::path::Path) {
        let journal = crate::QueuedJournal::sqlite(Arc::new(
            Store::open_with(&dir.join("ringfence.db"), Durability::Process).unwrap(),
        ));
        for i in 0..3 {
            journal
                .record(JournalEntry {
                    key: FileKey {
                        path: format!("/r/f{i}"),
                    },
                    tool: "write_file".into(),
                    before: Some(vec![0, 159, 146, i]),
                    after_hash: Some([i; 32]),
                    mode: Some(0o640),
                    patch: (i == 1).then_some((2, 3)),
                })
                .unwrap();
        }
        journal.flush();
        let followups = FollowupDb::open(&dir.join("followups.db")).unwrap();
        // More than a batch, so the copy streams in several transactions.
        for i in 0..(BATCH as i64 + 20) {
            followups
                .schedule(&format!("u{}", i % 3), &format!("ctx {i} ✓"), 60_000 * i, 0)
                .unwrap();
        }
        followups.cancel("u1", 2, Some("no need"), 1).unwrap();
        let memory = memory_db(|l| {
            MemoryDb::open(&dir.join("memory.db"), l, RankConfig::default()).unwrap()
        });
        for (user, text) in [
            ("alice", "Alice drinks green tea"),
            ("alice", "Alice rows"),
            ("bob", "Bob likes jazz"),
        ] {
            memory.store(user, Kind::Memory, new_item(text)).unwrap();
        }
        memory
            .store("alice", Kind::Truth, new_item("Alice is a nurse"))
            .unwrap();
        memory.delete("alice", Kind::Memory, 2).unwrap().unwrap();
        let calendar = CalendarDb::open(&dir.join("calendar.db")).unwrap();
        calendar
            .calendars("alice", ("personal", "Personal"), 1)
            .unwrap();
        calendar
            .insert(
                "alice",
                "personal",
                "e1.ics",
                "BEGIN:VCALENDAR\r\nEND:VCALENDAR\r\n",
                (1, 2),
                5,
            )
            .unwrap();
    }

    #[test]
    fn sqlite_to_postgres_to_sqlite_keeps_every_row() {
        let Some(db) = ScratchDb::new() else { return };
        let pg = db.connect();
        let (from, back) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        fill(from.path());
        let mut seen = Vec::new();
        for family in files(from.path()) {
            let report = copy_family(&family, &pg, Direction::SqliteToPostgres, &mut |t, n| {
                seen.push((t.to_owned(), n))
            })
            .unwrap();
            for c in &report {
                assert_eq!(
                    (c.read, c.written, c.in_target),
                    (c.read, c.read, c.read),
                    "{c:?}"
                );
            }
        }
        // Progress came per batch: the follow-ups in two.
        let batches: Vec<u64> = seen
            .iter()
            .filter(|(t, _)| t == "followups")
            .map(|s| s.1)
            .collect();
        assert_eq!(batches, [BATCH as u64, BATCH as u64 + 20]);
        // Again: nothing new is written, nothing is lost (an interrupted copy resumes so).
        for family in files(from.path()) {
            for c in copy_family(&family, &pg, Direction::SqliteToPostgres, &mut |_, _| {}).unwrap()
            {
                assert_eq!(c.written, 0, "{c:?}");
            }
        }
        // And back, into empty files: the same rows, byte for byte.
        for family in files(back.path()) {
            copy_family(&family, &pg, Direction::PostgresToSqlite, &mut |_, _| {}).unwrap();
        }
        assert_eq!(dump(from.path()), dump(back.path()));
        // PostgreSQL numbers new rows after the copied ones (else the insert would collide).
        let f = PgFollowups::open(pg.clone()).unwrap();
        f.schedule("u0", "after the copy", 1, 1).unwrap();
        assert_eq!(
            f.counts().unwrap().iter().map(|c| c.1).sum::<i64>(),
            BATCH as i64 + 21
        );
        let back_calendar = CalendarDb::open(&back.path().join("calendar.db")).unwrap();
        assert_eq!(back_calendar.all("alice", None).unwrap().len(), 1);
        // The copied memories are found by words and by meaning, and numbering goes on.
        let memory =
            memory_db(|l| MemoryDb::open_postgres(pg.clone(), l, RankConfig::default()).unwrap());
        let found = memory
            .search(
                "alice",
                Kind::Memory,
                &Query {
                    text: "tea".into(),
                    limit: 5,
                    memory_type: None,
                    category: None,
                    tags: Vec::new(),
                },
            )
            .unwrap();
        assert_eq!(found.mode, SearchMode::Hybrid);
        assert_eq!(found.hits[0].item.content, "Alice drinks green tea");
        assert_eq!(found.hits[0].similarity, Some(1.0));
        assert!(found.hits[0].keyword_match);
        let StoreOutcome::Stored(next) = memory
            .store("alice", Kind::Memory, new_item("Alice sails"))
            .unwrap()
        else {
            panic!("stored as a duplicate")
        };
        assert_eq!(next.id, 3);
    }
}
