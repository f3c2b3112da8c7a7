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
    let families = copy::families(copy::Files {
        journal: config.data_dir.join("ringfence.db"),
        followups: crate::families::followups::settings(config).db_path.clone(),
        calendar: crate::families::calendar::settings(config).db_path.clone(),
        memory: crate::families::memory::settings(config).database.clone(),
    });
    let (source, target) = match direction {
        Direction::SqliteToPostgres => {
            ("SQLite".to_owned(), format!("PostgreSQL ({})", pg.shown()))
        }
        Direction::PostgresToSqlite => {
            (format!("PostgreSQL ({})", pg.shown()), "SQLite".to_owned())
        }
    };
    say(&format!("copying from {source} to {target}"));
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
                return fail(&format!(
                    "copying the {} tables failed: {e}; nothing copied so far is lost, and running the command again resumes",
                    family.sqlite.name
                ));
            }
        }
    }
    say("done: every table has at least the source's rows in the target");
    ExitCode::SUCCESS
}
