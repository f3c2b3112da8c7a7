//! `store migrate`: every row of the state both backends keep (edit journal, follow-ups,
//! local calendars, truths and memories), from the data directory's SQLite files into
//! PostgreSQL, or back.

use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};

use ringfence_store::pg::copy::{self, Direction};
use ringfence_store::pg::{Pg, PgOptions};

use super::{fail, say};
use crate::config::{Config, StoreSettings};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, Subcommand)]
pub(super) enum StoreCommand {
    /// Copy every row between the data directory's SQLite files and PostgreSQL (`--url`,
    /// else `[store] url` or RINGFENCE_DATABASE_URL). Rows already in the target are kept
    /// as they are, so an interrupted copy is resumed by running it again; at the end each
    /// table's rows are counted on both sides. Stop the servers first: rows written during
    /// the copy may be missed.
    Migrate {
        #[arg(long, value_enum)]
        from: Backend,
        #[arg(long, value_enum)]
        to: Backend,
        /// The PostgreSQL database (postgres://user:password@host:5432/database).
        #[arg(long)]
        url: Option<String>,
    },
}

pub(super) fn run(config: &Config, cmd: StoreCommand) -> ExitCode {
    let StoreCommand::Migrate { from, to, url } = cmd;
    let direction = match (from, to) {
        (Backend::Sqlite, Backend::Postgres) => Direction::SqliteToPostgres,
        (Backend::Postgres, Backend::Sqlite) => Direction::PostgresToSqlite,
        _ => {
            return fail(
                "--from and --to name the same backend: give sqlite and postgres, one each",
            );
        }
    };
    let options = match (url, &config.store) {
        (url, StoreSettings::Postgres(s)) => s.options(url),
        (Some(url), StoreSettings::Sqlite) => PgOptions::new(url),
        (None, StoreSettings::Sqlite) => {
            return fail(
                "no PostgreSQL database is named: give --url, or set [store] url or RINGFENCE_DATABASE_URL",
            );
        }
    };
    let pg = match Pg::connect(&options) {
        Ok(pg) => pg,
        Err(e) => return fail(&e.to_string()),
    };
    if let Err(e) = ringfence_fs::create_private_dir_all(&config.data_dir) {
        return fail(&format!("cannot create {}: {e}", config.data_dir.display()));
    }
    let families = state(config);
    let (source, target) = match direction {
        Direction::SqliteToPostgres => {
            ("SQLite".to_owned(), format!("PostgreSQL ({})", pg.shown()))
        }
        Direction::PostgresToSqlite => {
            (format!("PostgreSQL ({})", pg.shown()), "SQLite".to_owned())
        }
    };
    say(&format!("copying from {source} to {target}"));
    // Each family's tables are copied whatever became of another's; the failures are
    // reported together at the end.
    let mut failed = Vec::new();
    for family in &families {
        let mut progress = |table: &str, rows: u64| say(&format!("  {table}: {rows} rows read"));
        match copy::copy_family(family, &pg, direction, &mut progress) {
            Ok(report) => {
                for c in report {
                    say(&format!(
                        "{}: {} rows read, {} written ({} were there already), {} in the target",
                        c.table,
                        c.read,
                        c.written,
                        c.read - c.written,
                        c.in_target
                    ));
                }
            }
            Err(e) => {
                say(&format!(
                    "copying the {} tables failed: {e}",
                    family.sqlite.name
                ));
                failed.push(family.sqlite.name);
            }
        }
    }
    if !failed.is_empty() {
        return fail(&format!(
            "copying the {} tables failed (above); nothing copied is lost, and running the command again resumes",
            failed.join(", ")
        ));
    }
    say("done: every table has at least the source's rows in the target");
    ExitCode::SUCCESS
}

/// The state both backends keep, as each family registers it, with the SQLite files
/// `config` names.
fn state(config: &Config) -> Vec<copy::Family> {
    crate::families::state(config)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use ringfence_calendar::store::{CalendarDb, CalendarStore};
    use ringfence_files::journal::{FileKey, Journal, JournalEntry};
    use ringfence_followups::FollowupBackend;
    use ringfence_followups::store::pg::PgFollowups;
    use ringfence_followups::store::{FollowupDb, FollowupStore};
    use ringfence_memory::store::{MemoryDb, RankConfig};
    use ringfence_memory::{Kind, MemoryBackend, NewItem, Query, SearchMode, StoreOutcome};
    use ringfence_store::Store;
    use ringfence_store::pg::copy::{BATCH, Family, copy_family};
    use ringfence_store::pg::scratch::ScratchDb;
    use rusqlite::types::Value;

    use super::*;

    fn files(dir: &std::path::Path) -> Vec<Family> {
        state(&Config::for_tests(dir))
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
        open: impl FnOnce(Option<ringfence_memory::store::EmbedderLoader>) -> Arc<MemoryDb>,
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
                        "SELECT * FROM {} ORDER BY {}",
                        t.name,
                        t.key.join(", ")
                    ))
                    .unwrap();
                let n = q.column_count();
                let rows: Vec<Vec<Value>> = q
                    .query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                all.push((t.name.to_owned(), rows));
            }
        }
        all
    }

    fn fill(dir: &std::path::Path) {
        let journal = ringfence_files::journal::QueuedJournal::sqlite(Arc::new(
            ringfence_files::journal::sqlite::open(&dir.join("ringfence.db")).unwrap(),
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
