//! `ringfence memory …`: a person's truths and memories from the shell — list, search, show,
//! edit (the meaning recomputed, as update_memory does), pin and unpin, delete, clear, and
//! export/import as JSON lines. Every command but list and export works on one user's
//! rows: `--user`, the stdio user `local` when not given.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use ringfence_core::LOCAL_USER;
use ringfence_core::console::{CommandError, Console, Ended, json_lines};

use crate::store::{ExportRecord, MemoryDb, Prepared};
use crate::{Item, Kind, MemoryBackend, Query, UpdateOutcome};

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Print truths and memories, one per line (`user  kind #id  content  (details)`).
    List {
        /// Only this user's (default: every user's).
        #[arg(long)]
        user: Option<String>,
        /// `truth` or `memory`.
        #[arg(long)]
        kind: Option<String>,
    },
    /// Find a user's truths or memories by meaning (and words), best first.
    Search {
        /// What to look for.
        query: String,
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
        /// `memory` (default) or `truth`.
        #[arg(long, default_value = "memory")]
        kind: String,
        /// At most this many (1–50).
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// Print one truth or memory with everything kept about it.
    Show {
        /// `truth` or `memory`.
        kind: String,
        id: i64,
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
    },
    /// Replace a truth's or memory's text (its meaning is computed again).
    Edit {
        /// `truth` or `memory`.
        kind: String,
        id: i64,
        /// The new text.
        text: String,
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
    },
    /// Pin a truth: pinned truths are always in the assistant's view.
    Pin {
        id: i64,
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
    },
    /// Unpin a truth.
    Unpin {
        id: i64,
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
    },
    /// Delete one truth or memory (printed as it was).
    Delete {
        /// `truth` or `memory`.
        kind: String,
        id: i64,
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
    },
    /// Delete every truth and memory of a user (or of one kind); asks for --yes.
    Clear {
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
        /// Only `truth` or `memory`.
        #[arg(long)]
        kind: Option<String>,
        /// Yes, delete them.
        #[arg(long)]
        yes: bool,
    },
    /// Write every row as JSON lines (to stdout, or --output), vectors included unless
    /// --no-embeddings.
    Export {
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        kind: Option<String>,
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        #[arg(long)]
        no_embeddings: bool,
    },
    /// Read JSON lines written by export (or by hand: kind and content are enough) and store
    /// them; rows that are already there are skipped.
    Import {
        /// The file, or `-` for stdin.
        file: PathBuf,
        /// Store every row for this user (default: the user each line names).
        #[arg(long)]
        user: Option<String>,
    },
}

/// Runs `cmd` against `db`.
pub fn run(
    db: &MemoryDb,
    cmd: MemoryCommand,
    con: &mut dyn Console,
) -> Result<Ended, CommandError> {
    match cmd {
        MemoryCommand::List { user, kind } => {
            list(db, user.as_deref(), optional_kind(kind.as_deref())?, con)
        }
        MemoryCommand::Search {
            query,
            user,
            kind,
            limit,
        } => search(db, &user, kind_of(&kind)?, &query, limit, con),
        MemoryCommand::Show { kind, id, user } => {
            let item = found(
                db.get(&user, kind_of(&kind)?, id).map_err(failed)?,
                &user,
                &kind,
                id,
            )?;
            con.out(&detail(&item));
            Ok(Ended::Done)
        }
        MemoryCommand::Edit {
            kind,
            id,
            text,
            user,
        } => {
            let k = kind_of(&kind)?;
            match MemoryBackend::update(db, &user, k, id, &text)
                .map_err(|e| CommandError(e.to_string()))?
            {
                UpdateOutcome::Updated { before, after } => {
                    con.note(&format!("was: {}", before.content));
                    con.out(&line(&user, &after));
                    Ok(Ended::Done)
                }
                UpdateOutcome::NotFound => Err(missing(&user, &kind, id)),
                UpdateOutcome::Duplicate(d) => Err(CommandError(format!(
                    "{} #{} already says this ({}); nothing changed",
                    d.existing.kind.as_str(),
                    d.existing.id,
                    d.existing.content
                ))),
            }
        }
        MemoryCommand::Pin { id, user } => pin(db, &user, id, true, con),
        MemoryCommand::Unpin { id, user } => pin(db, &user, id, false, con),
        MemoryCommand::Delete { kind, id, user } => {
            let k = kind_of(&kind)?;
            let item = found(
                MemoryBackend::delete(db, &user, k, id).map_err(|e| CommandError(e.to_string()))?,
                &user,
                &kind,
                id,
            )?;
            con.note("deleted:");
            con.out(&line(&user, &item));
            Ok(Ended::Done)
        }
        MemoryCommand::Clear { user, kind, yes } => {
            let kind = optional_kind(kind.as_deref())?;
            let rows = db.items(Some(&user), kind).map_err(failed)?;
            if !yes {
                return Err(CommandError(format!(
                    "this deletes {} rows of {user} ({}) for good; run it again with --yes (`ringfence memory export --user {user} -o FILE` keeps a copy first)",
                    rows.len(),
                    kind.map_or("truths and memories", |k| if k == Kind::Truth {
                        "truths"
                    } else {
                        "memories"
                    })
                )));
            }
            let n = db.clear(&user, kind).map_err(failed)?;
            con.note(&format!("deleted {n} rows of {user}"));
            Ok(Ended::Done)
        }
        MemoryCommand::Export {
            user,
            kind,
            output,
            no_embeddings,
        } => {
            let rows = db
                .export(
                    user.as_deref(),
                    optional_kind(kind.as_deref())?,
                    !no_embeddings,
                )
                .map_err(failed)?;
            con.write_output(&json_lines(&rows)?, output.as_deref())?;
            con.note(&format!("exported {} rows", rows.len()));
            Ok(Ended::Done)
        }
        MemoryCommand::Import { file, user } => import(db, &file, user.as_deref(), con),
    }
}

fn failed(e: impl std::fmt::Display) -> CommandError {
    CommandError(format!("the memory database: {e}"))
}

fn kind_of(k: &str) -> Result<Kind, CommandError> {
    Kind::parse(k).ok_or_else(|| CommandError(format!("`{k}` is neither `truth` nor `memory`")))
}

fn optional_kind(k: Option<&str>) -> Result<Option<Kind>, CommandError> {
    k.map(kind_of).transpose()
}

fn missing(user: &str, kind: &str, id: i64) -> CommandError {
    CommandError(format!(
        "{user} has no {kind} #{id} (`ringfence memory list --user {user}` lists them)"
    ))
}

fn found(item: Option<Item>, user: &str, kind: &str, id: i64) -> Result<Item, CommandError> {
    item.ok_or_else(|| missing(user, kind, id))
}

fn pin(
    db: &MemoryDb,
    user: &str,
    id: i64,
    pinned: bool,
    con: &mut dyn Console,
) -> Result<Ended, CommandError> {
    let item = found(
        db.set_pinned(user, id, pinned).map_err(failed)?,
        user,
        "truth",
        id,
    )?;
    con.out(&line(user, &item));
    Ok(Ended::Done)
}

/// `user  kind #id  content  (type; category; pinned; tags: …)`.
fn line(user: &str, item: &Item) -> String {
    let mut meta = Vec::new();
    if let Some(t) = &item.memory_type {
        meta.push(t.clone());
    }
    if let Some(c) = &item.category {
        meta.push(c.clone());
    }
    if item.pinned {
        meta.push("pinned".into());
    }
    if !item.tags.is_empty() {
        meta.push(format!("tags: {}", item.tags.join(", ")));
    }
    format!(
        "{user}\t{} #{}\t{}{}",
        item.kind.as_str(),
        item.id,
        item.content,
        if meta.is_empty() {
            String::new()
        } else {
            format!("\t({})", meta.join("; "))
        }
    )
}

/// Everything kept about `item`, a field a line.
fn detail(item: &Item) -> String {
    let time = ringfence_core::time::format_iso_ms;
    let mut out = format!("{} #{}\n{}\n\n", item.kind.as_str(), item.id, item.content);
    if let Some(t) = &item.memory_type {
        out.push_str(&format!("type: {t}\n"));
    }
    if let Some(c) = &item.category {
        out.push_str(&format!("category: {c}\n"));
    }
    if !item.tags.is_empty() {
        out.push_str(&format!("tags: {}\n", item.tags.join(", ")));
    }
    if item.kind == Kind::Truth {
        out.push_str(&format!(
            "pinned: {}\n",
            if item.pinned { "yes" } else { "no" }
        ));
    }
    out.push_str(&format!(
        "source: {}\ncreated: {}\nupdated: {}\n",
        item.source,
        time(item.created_ms),
        time(item.updated_ms)
    ));
    out
}

fn list(
    db: &MemoryDb,
    user: Option<&str>,
    kind: Option<Kind>,
    con: &mut dyn Console,
) -> Result<Ended, CommandError> {
    let rows = db.items(user, kind).map_err(failed)?;
    let mut text = String::new();
    for (user, item) in &rows {
        text.push_str(&line(user, item));
        text.push('\n');
    }
    con.out(&text);
    con.note(&format!("{} rows", rows.len()));
    Ok(Ended::Done)
}

fn search(
    db: &MemoryDb,
    user: &str,
    kind: Kind,
    text: &str,
    limit: usize,
    con: &mut dyn Console,
) -> Result<Ended, CommandError> {
    if !(1..=50).contains(&limit) {
        return Err("--limit: use 1 to 50".into());
    }
    let query = Query {
        text: text.to_owned(),
        limit,
        memory_type: None,
        category: None,
        tags: Vec::new(),
    };
    let outcome =
        MemoryBackend::search(db, user, kind, &query).map_err(|e| CommandError(e.to_string()))?;
    let mut out = String::new();
    for hit in &outcome.hits {
        out.push_str(&format!("{:.2}\t{}\n", hit.score, line(user, &hit.item)));
    }
    con.out(&out);
    con.note(&format!(
        "{} found ({:?})",
        outcome.hits.len(),
        outcome.mode
    ));
    Ok(Ended::Done)
}

fn import(
    db: &MemoryDb,
    file: &Path,
    user: Option<&str>,
    con: &mut dyn Console,
) -> Result<Ended, CommandError> {
    let text = con.read_input(file)?;
    let mut rows = Vec::new();
    let mut refused = 0usize;
    for (n, l) in text.lines().enumerate() {
        if l.trim().is_empty() {
            continue;
        }
        let prepared = serde_json::from_str::<ExportRecord>(l)
            .map_err(|e| format!("not a memory record: {e}"))
            .and_then(|r| Prepared::from_record(r, user).map_err(|e| e.to_string()));
        match prepared {
            Ok(p) => rows.push(p),
            Err(e) => {
                refused += 1;
                con.note(&format!("line {}: {e}", n + 1));
            }
        }
    }
    let mut last = std::time::Instant::now();
    let report = db
        .import_many(rows, &mut |done, total| {
            if last.elapsed() >= std::time::Duration::from_secs(2) || done == total {
                last = std::time::Instant::now();
                con.note(&format!("embedding: {done}/{total}"));
            }
        })
        .map_err(|e| CommandError(format!("import failed: {e}")))?;
    db.flush();
    con.note(&format!(
        "imported {} rows; {} already there; {refused} refused",
        report.stored, report.duplicates
    ));
    Ok(if refused > 0 {
        Ended::Partly
    } else {
        Ended::Done
    })
}
