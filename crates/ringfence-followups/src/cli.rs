//! `ringfence followups …`: follow-ups from the shell — list, cancel, reschedule, and
//! export/import as JSON lines. Cancel and reschedule work on one user's follow-ups
//! (`--user`, the stdio user `local` when not given), as the tools would.

use std::path::PathBuf;

use clap::Subcommand;
use ringfence_core::LOCAL_USER;
use ringfence_core::console::{CommandError, Console, Ended, json_lines};
use ringfence_core::time::{format_in_zone, format_iso_ms, now_ms, parse_instant, parse_span};

use crate::settings::FollowupSettings;
use crate::store::{ExportRecord, FollowupStore};
use crate::{ChangeOutcome, Followup, MAX_MINUTES};

#[derive(Debug, Subcommand)]
pub enum FollowupsCommand {
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
    /// Cancel a pending follow-up.
    Cancel {
        id: i64,
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
        /// Why (kept with it).
        #[arg(long)]
        reason: Option<String>,
    },
    /// Move a pending follow-up to another time.
    Reschedule {
        id: i64,
        #[arg(long, default_value = LOCAL_USER)]
        user: String,
        /// From now: 30m, 2h, 3d, 1w.
        #[arg(
            long = "in",
            value_name = "SPAN",
            conflicts_with = "at",
            required_unless_present = "at"
        )]
        within: Option<String>,
        /// At this time: RFC 3339 with its offset (2026-12-24T09:00:00+01:00), or a date
        /// (its midnight in the user's zone).
        #[arg(long, value_name = "TIME")]
        at: Option<String>,
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

/// Runs `cmd` against `db`, under `settings` (the users' time zones).
pub fn run(
    db: &dyn FollowupStore,
    settings: &FollowupSettings,
    cmd: FollowupsCommand,
    con: &mut dyn Console,
) -> Result<Ended, CommandError> {
    let failed = |e: &dyn std::fmt::Display| CommandError(format!("the follow-up store: {e}"));
    match cmd {
        FollowupsCommand::List { user, status } => {
            let wanted: &[&str] = match status.as_str() {
                "all" => &["pending", "delivering", "completed", "cancelled", "failed"],
                "pending" => &["pending", "delivering"],
                "completed" => &["completed"],
                "cancelled" => &["cancelled"],
                "failed" => &["failed"],
                other => {
                    return Err(CommandError(format!(
                        "--status {other:?}: use pending, completed, cancelled, failed or all"
                    )));
                }
            };
            let rows = db.export(user.as_deref()).map_err(|e| failed(&e))?;
            let mut text = String::new();
            let mut n = 0;
            for r in rows.iter().filter(|r| wanted.contains(&r.status.as_str())) {
                n += 1;
                text.push_str(&record_line(r));
            }
            con.out(&text);
            con.note(&format!("{n} follow-ups"));
            Ok(Ended::Done)
        }
        FollowupsCommand::Cancel { id, user, reason } => {
            let outcome = db
                .cancel(&user, id, reason.as_deref(), now_ms())
                .map_err(|e| failed(&e))?;
            changed(outcome, &user, id, "cancelled", settings, con)
        }
        FollowupsCommand::Reschedule {
            id,
            user,
            within,
            at,
        } => {
            let now = now_ms();
            let due = match (within, at) {
                (Some(span), _) => {
                    let d = parse_span(&span).ok_or_else(|| {
                        CommandError(format!(
                            "--in {span:?}: use a span such as 30m, 2h, 3d or 1w"
                        ))
                    })?;
                    now.saturating_add(d.as_millis().min(i64::MAX as u128) as i64)
                }
                (None, Some(at)) => parse_instant(&at, now, &settings.zone_of(&user).1)
                    .map_err(|e| CommandError(format!("--at: {e}")))?,
                (None, None) => return Err("give --in SPAN or --at TIME".into()),
            };
            let minutes = (due - now) as f64 / 60_000.0;
            if minutes <= 0.0 || minutes > MAX_MINUTES {
                return Err(CommandError(format!(
                    "the new time must be in the future and within 366 days; {} is not",
                    format_iso_ms(due)
                )));
            }
            let outcome = db
                .update(&user, id, None, Some(due), now)
                .map_err(|e| failed(&e))?;
            changed(outcome, &user, id, "rescheduled", settings, con)
        }
        FollowupsCommand::Export { user, output } => {
            let rows = db.export(user.as_deref()).map_err(|e| failed(&e))?;
            con.write_output(&json_lines(&rows)?, output.as_deref())?;
            con.note(&format!("exported {} follow-ups", rows.len()));
            Ok(Ended::Done)
        }
        FollowupsCommand::Import { file, user } => {
            let text = con.read_input(&file)?;
            let mut records = Vec::new();
            for (n, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                // All or nothing: a file that is not an export is refused whole.
                let record = serde_json::from_str::<ExportRecord>(line).map_err(|e| {
                    CommandError(format!("line {}: not a follow-up record: {e}", n + 1))
                })?;
                records.push(record);
            }
            let r = db
                .import(&records, user.as_deref())
                .map_err(|e| CommandError(format!("import failed, nothing stored: {e}")))?;
            con.note(&format!(
                "imported {} follow-ups ({} already here)",
                r.imported, r.skipped
            ));
            Ok(Ended::Done)
        }
    }
}

fn record_line(r: &ExportRecord) -> String {
    let mut extra = String::new();
    if let (Some(at), Some(via)) = (r.delivered_ms, &r.delivered_via) {
        extra = format!("\t(delivered {} via {via})", format_iso_ms(at));
    } else if let Some(reason) = &r.cancel_reason {
        extra = format!("\t(cancelled: {reason})");
    } else if let Some(e) = &r.last_error {
        extra = format!("\t(attempts {}: {e})", r.attempts);
    }
    format!(
        "{}\t#{}\t{}\t{}\t{}{extra}\n",
        r.user,
        r.id,
        r.status,
        format_iso_ms(r.due_ms),
        r.context
    )
}

fn changed(
    outcome: ChangeOutcome,
    user: &str,
    id: i64,
    done: &str,
    settings: &FollowupSettings,
    con: &mut dyn Console,
) -> Result<Ended, CommandError> {
    let show = |f: &Followup| {
        format!(
            "{user}\t#{}\t{}\t{} ({})\t{}",
            f.id,
            f.status.as_str(),
            format_in_zone(f.due_ms, &settings.zone_of(user).1),
            format_iso_ms(f.due_ms),
            f.context
        )
    };
    match outcome {
        ChangeOutcome::Changed(f) => {
            con.note(done);
            con.out(&show(&f));
            Ok(Ended::Done)
        }
        ChangeOutcome::NotFound => Err(CommandError(format!(
            "{user} has no follow-up #{id} (`ringfence followups list --user {user}` lists them)"
        ))),
        ChangeOutcome::NotPending(f) => Err(CommandError(format!(
            "follow-up #{id} of {user} is {}, no longer pending: nothing changed",
            f.status.as_str()
        ))),
    }
}
