//! `audit`: prints the audit trail's lines that match every filter given (the trail itself
//! is written by `crate::audit`): from the data directory's files, or with the PostgreSQL
//! store from its table, which holds every instance's calls. A table for a person at a
//! terminal, JSON lines for a program; `--follow` keeps printing new calls.

use std::collections::HashSet;
use std::process::ExitCode;
use std::time::Duration;

use ringfence_core::time::{format_iso_ms, now_ms, parse_instant, system_zone};

use super::{fail, print_out};
use crate::audit::Query;

/// How far back each `--follow` poll looks again for lines written late.
const FOLLOW_MARGIN_MS: i64 = 60_000;

#[derive(Debug, clap::Args)]
pub(super) struct AuditArgs {
    #[arg(long)]
    user: Option<String>,
    #[arg(long)]
    tool: Option<String>,
    /// `ok` or `error`.
    #[arg(long)]
    outcome: Option<String>,
    #[arg(long)]
    session: Option<String>,
    /// Calls at or after this time: RFC 3339 with its offset (2026-12-02T15:00:00+01:00 or
    /// …Z), a date (its midnight here), `today`, `yesterday`, or a span ago (30m, 2h, 3d).
    #[arg(long, value_name = "TIME")]
    since: Option<String>,
    /// Calls before this time (the same forms).
    #[arg(long, value_name = "TIME")]
    until: Option<String>,
    /// JSON lines, as the trail keeps them, even on a terminal.
    #[arg(long)]
    json: bool,
    /// Keep printing calls as they are made, until interrupted.
    #[arg(long, short)]
    follow: bool,
}

pub(super) fn run(app: &crate::app::App, a: AuditArgs) -> ExitCode {
    if let Some(o) = &a.outcome
        && o != "ok"
        && o != "error"
    {
        return fail(&format!("audit --outcome {o}: use ok or error"));
    }
    let (zone, now) = (system_zone().1, now_ms());
    // Each bound an instant, written as the trail writes times (fixed-width UTC), so the
    // filters compare instants.
    let bound = |flag: &str, v: &Option<String>| -> Result<Option<String>, String> {
        v.as_deref()
            .map(|t| {
                parse_instant(t, now, &zone)
                    .map(format_iso_ms)
                    .map_err(|e| format!("audit --{flag}: {e}"))
            })
            .transpose()
    };
    let (since, until) = match (bound("since", &a.since), bound("until", &a.until)) {
        (Ok(s), Ok(u)) => (s, u),
        (Err(e), _) | (_, Err(e)) => return fail(&e),
    };
    let table = !a.json && std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut q = Query {
        user: a.user,
        tool: a.tool,
        outcome: a.outcome,
        session: a.session,
        since,
        until,
    };
    let mut seen: HashSet<String> = HashSet::new();
    let mut last_time: Option<String> = None;
    loop {
        let mut text = String::new();
        let mut out = |line: &str| {
            if !seen.insert(line.to_owned()) {
                return;
            }
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
            if let Some(t) = v.get("time").and_then(|t| t.as_str())
                && last_time.as_deref().is_none_or(|l| t > l)
            {
                last_time = Some(t.to_owned());
            }
            if table {
                text.push_str(&row(&v, &zone));
            } else {
                text.push_str(line);
            }
            text.push('\n');
        };
        let read = match crate::store::audit(app.store()) {
            Ok(Some(shared)) => shared.query(&q, &mut out).map_err(|e| e.to_string()),
            Ok(None) => {
                crate::audit::query(app.data_dir(), &q, &mut out).map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = read {
            return fail(&format!("cannot read the audit log: {e}"));
        }
        if !text.is_empty() {
            print_out(&text);
        }
        if !a.follow {
            return ExitCode::SUCCESS;
        }
        // From a minute before the newest call seen: lines are not written in time order
        // (several processes, a shared table filled late), and `seen` drops repeats.
        if let Some(t) = &last_time
            && let Ok(ts) = t.parse::<ringfence_core::time::Timestamp>()
        {
            let from = format_iso_ms(ts.as_millisecond() - FOLLOW_MARGIN_MS);
            seen.retain(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()
                    .and_then(|v| v.get("time")?.as_str().map(|x| x >= from.as_str()))
                    .unwrap_or(false)
            });
            q.since = Some(from);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// One call as a table row: local time, user, tool, outcome, duration, session.
fn row(v: &serde_json::Value, zone: &ringfence_core::time::TimeZone) -> String {
    let s = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("");
    let time = s("time")
        .parse::<ringfence_core::time::Timestamp>()
        .map(|t| {
            t.to_zoned_datetime(zone.clone())
                .strftime("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| s("time").to_owned());
    let outcome = match (s("outcome"), s("error")) {
        ("error", e) if !e.is_empty() => format!("error ({e})"),
        (o, _) => o.to_owned(),
    };
    let ms = v.get("duration_ms").and_then(|d| d.as_f64()).unwrap_or(0.0);
    format!(
        "{time}  {:<12} {:<24} {:<22} {:>8.0} ms  {}",
        s("user"),
        s("tool"),
        outcome,
        ms,
        s("session")
    )
}
