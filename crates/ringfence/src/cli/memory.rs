//! `memory list`, `memory export`, `memory import`: truths and memories as text or JSON
//! lines, for the operator (every user's, unless `--user` narrows).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use ringfence_memory::Kind;
use ringfence_memory::store::MemoryDb;

use ringfence_memory::settings::MemorySettings;

use super::{fail, print_out, say};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub(super) enum MemoryCommand {
    /// Print truths and memories, one per line (`#id [kind] content`).
    List {
        /// Only this user's (default: every user's).
        #[arg(long)]
        user: Option<String>,
        /// `truth` or `memory`.
        #[arg(long)]
        kind: Option<String>,
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

pub(super) fn run(config: &Config, cmd: MemoryCommand) -> ExitCode {
    let settings = config
        .families
        .get::<MemorySettings>(ringfence_memory::FAMILY);
    let db = match ringfence_memory::open(&config.store.shared_store(), settings) {
        Ok(db) => db,
        Err(e) => return fail(&e.to_string()),
    };
    match cmd {
        MemoryCommand::List { user, kind } => list(&db, user.as_deref(), kind.as_deref()),
        MemoryCommand::Export {
            user,
            kind,
            output,
            no_embeddings,
        } => export(
            &db,
            user.as_deref(),
            kind.as_deref(),
            output.as_deref(),
            !no_embeddings,
        ),
        MemoryCommand::Import { file, user } => import(&db, &file, user.as_deref()),
    }
}

fn parse_kind(kind: Option<&str>) -> Result<Option<Kind>, String> {
    match kind {
        None => Ok(None),
        Some(k) => Kind::parse(k)
            .map(Some)
            .ok_or_else(|| format!("--kind {k:?}: use `truth` or `memory`")),
    }
}

fn list(db: &MemoryDb, user: Option<&str>, kind: Option<&str>) -> ExitCode {
    let kind = match parse_kind(kind) {
        Ok(k) => k,
        Err(e) => return fail(&e),
    };
    let rows = match db.export(user, kind, false) {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string()),
    };
    let mut text = String::new();
    for r in &rows {
        let mut meta = Vec::new();
        if let Some(t) = &r.memory_type {
            meta.push(t.clone());
        }
        if let Some(c) = &r.category {
            meta.push(c.clone());
        }
        if r.is_pinned == Some(true) {
            meta.push("pinned".into());
        }
        if let Some(tags) = r.tags.as_ref().filter(|t| !t.is_empty()) {
            meta.push(format!("tags: {}", tags.join(", ")));
        }
        text.push_str(&format!(
            "{}\t{} #{}\t{}{}\n",
            r.user.as_deref().unwrap_or(""),
            r.kind,
            r.id.unwrap_or(0),
            r.content,
            if meta.is_empty() {
                String::new()
            } else {
                format!("\t({})", meta.join("; "))
            }
        ));
    }
    print_out(&text);
    say(&format!("{} rows", rows.len()));
    ExitCode::SUCCESS
}

fn export(
    db: &MemoryDb,
    user: Option<&str>,
    kind: Option<&str>,
    output: Option<&Path>,
    embeddings: bool,
) -> ExitCode {
    let kind = match parse_kind(kind) {
        Ok(k) => k,
        Err(e) => return fail(&e),
    };
    let rows = match db.export(user, kind, embeddings) {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string()),
    };
    if let Err(e) = super::write_json_lines(&rows, output) {
        return fail(&e);
    }
    say(&format!("exported {} rows", rows.len()));
    ExitCode::SUCCESS
}

fn import(db: &MemoryDb, file: &Path, user: Option<&str>) -> ExitCode {
    let text = match super::read_input(file) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let mut rows = Vec::new();
    let mut failed = 0usize;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let prepared = serde_json::from_str::<ringfence_memory::store::ExportRecord>(line)
            .map_err(|e| format!("not a memory record: {e}"))
            .and_then(|r| {
                ringfence_memory::store::Prepared::from_record(r, user).map_err(|e| e.to_string())
            });
        match prepared {
            Ok(p) => rows.push(p),
            Err(e) => {
                failed += 1;
                say(&format!("line {}: {e}", n + 1));
            }
        }
    }
    let mut last_report = std::time::Instant::now();
    let report = db.import_many(rows, &mut |done, total| {
        if last_report.elapsed() >= std::time::Duration::from_secs(2) || done == total {
            last_report = std::time::Instant::now();
            say(&format!("embedding: {done}/{total}"));
        }
    });
    let report = match report {
        Ok(r) => r,
        Err(e) => return fail(&format!("import failed: {e}")),
    };
    db.flush();
    say(&format!(
        "imported {} rows; {} already there; {failed} refused",
        report.stored, report.duplicates
    ));
    if failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
