//! The settings page's sections that belong to the server rather than a family: the
//! person's own activity (the audit trail, redacted as it is written) and the tools their
//! assistant is offered here, with why the others are not.

use std::path::PathBuf;
use std::sync::Arc;

use ringfence_core::page::{Method, PAGE_ROWS, PageRequest, Reply, Section, html, pager};
use ringfence_core::time::{format_iso_ms, now_ms, parse_instant};
use ringfence_store::SharedStore;

/// `/settings/activity`: the signed-in person's calls, newest first, filtered by tool and
/// time. Only what the audit trail holds is shown: tool, outcome, duration, error kind —
/// never arguments, memory text or secrets (the trail never had them).
/// The last page of calls the Activity page shows: 100,000 calls back.
const MAX_PAGE: usize = 1999;

pub struct Activity {
    pub store: Arc<SharedStore>,
    pub data_dir: PathBuf,
}

impl Section for Activity {
    fn name(&self) -> &'static str {
        "activity"
    }

    fn title(&self) -> &'static str {
        "Activity"
    }

    fn handle(&self, req: &PageRequest<'_>) -> Reply {
        if req.method != Method::Get || !req.rest.is_empty() {
            return Reply::NotFound;
        }
        let (tool, since, until) = (req.param("tool"), req.param("since"), req.param("until"));
        let zone = ringfence_core::time::system_zone().1;
        let now = now_ms();
        let bound = |label: &str, text: &str| -> Result<Option<String>, String> {
            if text.trim().is_empty() {
                return Ok(None);
            }
            parse_instant(text, now, &zone)
                .map(|ms| Some(format_iso_ms(ms)))
                .map_err(|_| {
                    format!("{label}: not a time ringfence understands; use 2h, 3d, today, yesterday, a date (2026-12-01) or an RFC 3339 time")
                })
        };
        let (from, to) = match (bound("From", since), bound("Until", until)) {
            (Ok(f), Ok(t)) => (f, t),
            (Err(e), _) | (_, Err(e)) => return Reply::Invalid(e),
        };
        let query = crate::audit::Query {
            user: Some(req.user.to_owned()),
            tool: (!tool.trim().is_empty()).then(|| tool.trim().to_owned()),
            outcome: None,
            session: None,
            since: from,
            until: to,
        };
        // Only the newest lines up to the asked page are kept (a busy trail holds millions);
        // the others are counted.
        // Older pages than this are `ringfence audit`'s (the page would hold them all).
        let asked = req.number("page", 0).min(MAX_PAGE);
        let keep_at_most = asked.saturating_add(1).saturating_mul(PAGE_ROWS);
        let mut newest: std::collections::VecDeque<String> = std::collections::VecDeque::new();
        let mut total = 0usize;
        let mut keep = |line: &str| {
            total += 1;
            if newest.len() == keep_at_most {
                newest.pop_front();
            }
            newest.push_back(line.to_owned());
        };
        let read = match crate::store::audit(&self.store) {
            Ok(Some(shared)) => shared.query(&query, &mut keep).map_err(|e| e.to_string()),
            Ok(None) => {
                crate::audit::query(&self.data_dir, &query, &mut keep).map_err(|e| e.to_string())
            }
            Err(e) => Err(e.to_string()),
        };
        if let Err(e) = read {
            return Reply::Failed(format!("the audit trail: {e}"));
        }
        let page = asked.min(total.saturating_sub(1) / PAGE_ROWS);
        // Newest first: the i-th newest is `newest[len - 1 - i]`.
        let shown: Vec<serde_json::Value> = (page * PAGE_ROWS..((page + 1) * PAGE_ROWS).min(total))
            .filter_map(|i| newest.len().checked_sub(i + 1).and_then(|k| newest.get(k)))
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect();
        let s = |v: &serde_json::Value, k: &str| {
            v.get(k)
                .and_then(|x| x.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let body = html! {
            p { "What your assistant did with its tools, newest first: which tool, when, how it ended and how long it took. What it read or wrote is not kept here." }
            form.filters method="get" action=(req.base) role="search" {
                div.field { label for="tool" { "Tool" } input #tool name="tool" value=(tool); }
                div.field { label for="since" { "From" } input #since name="since" value=(since) placeholder="2h, yesterday, 2026-12-01"; }
                div.field { label for="until" { "Until" } input #until name="until" value=(until) placeholder="now"; }
                button type="submit" { "Filter" }
            }
            p.count { (total) " calls" }
            @if shown.is_empty() {
                p.empty { "No calls." }
            } @else {
                table {
                    thead { tr { th { "Time (UTC)" } th { "Tool" } th { "Outcome" } th { "Duration" } } }
                    tbody {
                        @for v in &shown {
                            tr {
                                td { (s(v, "time")) }
                                td { (s(v, "tool")) }
                                td { (s(v, "outcome")) @let e = s(v, "error"); @if !e.is_empty() { " (" (e) ")" } }
                                td { (format!("{:.0} ms", v.get("duration_ms").and_then(|d| d.as_f64()).unwrap_or(0.0))) }
                            }
                        }
                    }
                }
            }
            (pager(req.base, &[("tool", tool), ("since", since), ("until", until)], page, total))
        };
        Reply::page("Activity", body)
    }
}

/// `/settings/tools`: the tools this server offers, by family, and each family that is off
/// with the reason.
pub struct Tools {
    /// Offered tools, by family, in listing order.
    pub offered: Vec<(&'static str, Vec<String>)>,
    /// Families that are off, and why.
    pub withheld: Vec<(&'static str, String)>,
}

impl Section for Tools {
    fn name(&self) -> &'static str {
        "tools"
    }

    fn title(&self) -> &'static str {
        "Tools"
    }

    fn handle(&self, req: &PageRequest<'_>) -> Reply {
        if req.method != Method::Get || !req.rest.is_empty() {
            return Reply::NotFound;
        }
        let body = html! {
            p { "The tools your assistant is offered by this server, the same for every person it serves. The operator turns features on and off in the configuration." }
            h2 { "On" }
            @if self.offered.is_empty() { p.empty { "None." } }
            dl {
                @for (family, tools) in &self.offered {
                    dt { (family) }
                    dd { (tools.join(", ")) }
                }
            }
            h2 { "Off" }
            @if self.withheld.is_empty() { p.empty { "Every feature is on." } }
            dl {
                @for (family, why) in &self.withheld {
                    dt { (family) }
                    dd { (why) }
                }
            }
        };
        Reply::page("Tools", body)
    }
}
