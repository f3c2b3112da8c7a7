//! `followups list`, `followups export`, `followups import`: follow-ups as text or JSON
//! lines, for the operator (every user's, unless `--user` narrows).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use ringfence_core::time::format_iso_ms;
use ringfence_followups::store::{ExportRecord, FollowupStore};

use super::{fail, print_out, read_input, say};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub(super) enum FollowupsCommand {
    /// Print follow-ups, one per line (user, #id, status, due time in UTC, context).
    List {
        /// Only this user's (default: every user's).
        #[arg(long)]
        user: Option<String>,
        /// `pending` (with those being delivered), `completed`, `cancelled`, `failed` or
        /// `all` (the default).
        #[arg(long, default_value = "all")]
        status: String,
    },
    /// Write every follow-up as JSON lines (to stdout, or --output).
    Export {
        #[arg(long)]
        user: Option<String>,
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Read JSON lines written by export and store them, numbered anew per user; ones
    /// already here (the same idempotency key) are skipped.
    Import {
        /// The file, or `-` for stdin.
        file: PathBuf,
        /// Store every follow-up for this user (default: the user each line names).
        #[arg(long)]
        user: Option<String>,
    },
}

pub(super) fn run(config: &Config, cmd: FollowupsCommand) -> ExitCode {
    let settings = config
        .families
        .get::<ringfence_followups::settings::FollowupSettings>(ringfence_followups::FAMILY);
    let db = match ringfence_followups::open(&config.store.shared_store(), &settings.db_path) {
        Ok(db) => db,
        Err(e) => return fail(&e.to_string()),
    };
    match cmd {
        FollowupsCommand::List { user, status } => list(&*db, user.as_deref(), &status),
        FollowupsCommand::Export { user, output } => {
            export(&*db, user.as_deref(), output.as_deref())
        }
        FollowupsCommand::Import { file, user } => import(&*db, &file, user.as_deref()),
    }
}

fn list(db: &dyn FollowupStore, user: Option<&str>, status: &str) -> ExitCode {
    let wanted: &[&str] = match status {
        "all" => &["pending", "delivering", "completed", "cancelled", "failed"],
        "pending" => &["pending", "delivering"],
        "completed" => &["completed"],
        "cancelled" => &["cancelled"],
        "failed" => &["failed"],
        other => {
            return fail(&format!(
                "--status {other:?}: use pending, completed, cancelled, failed or all"
            ));
        }
    };
    let rows = match db.export(user) {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string()),
    };
    let mut text = String::new();
    let mut n = 0;
    for r in rows.iter().filter(|r| wanted.contains(&r.status.as_str())) {
        n += 1;
        let mut extra = String::new();
        if let (Some(at), Some(via)) = (r.delivered_ms, &r.delivered_via) {
            extra = format!("\t(delivered {} via {via})", format_iso_ms(at));
        } else if let Some(reason) = &r.cancel_reason {
            extra = format!("\t(cancelled: {reason})");
        } else if let Some(e) = &r.last_error {
            extra = format!("\t(attempts {}: {e})", r.attempts);
        }
        text.push_str(&format!(
            "{}\t#{}\t{}\t{}\t{}{extra}\n",
            r.user,
            r.id,
            r.status,
            format_iso_ms(r.due_ms),
            r.context
        ));
    }
    print_out(&text);
    say(&format!("{n} follow-ups"));
    ExitCode::SUCCESS
}

fn export(db: &dyn FollowupStore, user: Option<&str>, output: Option<&Path>) -> ExitCode {
    let rows = match db.export(user) {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string()),
    };
    if let Err(e) = super::write_json_lines(&rows, output) {
        return fail(&e);
    }
    say(&format!("exported {} follow-ups", rows.len()));
    ExitCode::SUCCESS
}

fn import(db: &dyn FollowupStore, file: &Path, user: Option<&str>) -> ExitCode {
    let text = match read_input(file) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let mut records = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<ExportRecord>(line) {
            Ok(r) => records.push(r),
            Err(e) => {
                // All or nothing: a file that is not an export is refused whole.
                return fail(&format!("line {}: not a follow-up record: {e}", n + 1));
            }
        }
    }
    match db.import(&records, user) {
        Ok(r) => {
            say(&format!(
                "imported {} follow-ups ({} already here)",
                r.imported, r.skipped
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("import failed, nothing stored: {e}")),
    }
}
