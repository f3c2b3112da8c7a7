//! The follow-up family (seed 003): check-ins the assistant schedules during a conversation
//! ("I'll check in on that later") and that reach the user when they fall due.
//!
//! The tools validate, compute the due time and format; the rows live behind
//! [`FollowupBackend`] ([`store`]: `followups.db` or PostgreSQL's tables) and the user's
//! delivery settings (proactive messages on or off, time zone, quiet hours, channels) behind
//! [`DeliveryPolicy`] (from [`settings`], the `[followups]` table). The [`scheduler`] claims
//! what falls due and delivers it (webhook, command, email, or the user's MCP sessions);
//! [`FollowupsPlug`] builds the family for a binary.

mod cancel_followup;
pub mod cli;
pub mod desktop;
mod due;

mod list_followups;
mod page;
mod plug;
mod schedule_followup;
pub mod scheduler;
pub mod settings;
pub mod store;
mod update_followup;

use std::sync::Arc;

use serde::{Deserialize, Deserializer};
use serde_json::{Value, json};

use ringfence_core::error::{BackendError, ToolError, ToolErrorKind, ToolResult};
use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::text::{indented, refuse_controls};
use ringfence_core::time::{TimeZone, format_in_zone, format_iso_ms};
use ringfence_core::tool::{Blocking, Tool};

pub use cancel_followup::CancelFollowup;
pub use due::{DUE_PROMPT, DUE_URI, DueFollowups};
pub use plug::{FollowupsPlug, check_in_writer, open};

pub use list_followups::ListFollowups;
pub use schedule_followup::ScheduleFollowup;
pub use update_followup::UpdateFollowup;

/// The tool family name (`tools.disable = ["followups"]` turns all four off).
pub const FAMILY: &str = "followups";

/// The longest follow-up context accepted, in characters.
pub const MAX_CONTEXT_CHARS: usize = 4000;
/// The longest cancellation reason kept, in characters.
pub const MAX_REASON_CHARS: usize = 1000;
/// The furthest a follow-up may be scheduled: 366 days, in minutes.
pub const MAX_MINUTES: f64 = 366.0 * 24.0 * 60.0;

/// The follow-up family in the catalogue: the four tools, in seed 003's order.
pub const INFO: FamilyInfo = FamilyInfo {
    name: FAMILY,
    summary: "follow-ups the assistant schedules, delivered when they fall due (proactive messages)",
    tools: &[
        "schedule_followup",
        "list_followups",
        "update_followup",
        "cancel_followup",
    ],
    presets: &[ringfence_core::PresetPart {
        name: ringfence_core::family::ASSISTANT,
        summary: ringfence_core::family::ASSISTANT_SUMMARY,
        tools: ringfence_core::family::EVERY_TOOL,
    }],
};

/// Where a follow-up is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Status {
    /// Waiting for its time.
    Pending,
    /// Claimed by a scheduler that is delivering it now.
    Delivering,
    /// Delivered.
    Completed,
    Cancelled,
    /// Every delivery attempt failed.
    Failed,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Delivering => "delivering",
            Status::Completed => "completed",
            Status::Cancelled => "cancelled",
            Status::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Status> {
        Some(match s {
            "pending" => Status::Pending,
            "delivering" => Status::Delivering,
            "completed" => Status::Completed,
            "cancelled" => Status::Cancelled,
            "failed" => Status::Failed,
            _ => return None,
        })
    }
}

/// A stored follow-up.
#[derive(Debug, Clone, PartialEq)]
pub struct Followup {
    /// The number the user's tools see (`followup_id`): counted per user, never reused.
    pub id: i64,
    pub context: String,
    /// When it falls due, in milliseconds since the Unix epoch.
    pub due_ms: i64,
    pub status: Status,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// Delivery attempts made so far.
    pub attempts: i64,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// When it was delivered, and through which channels.
    pub delivered_ms: Option<i64>,
    pub delivered_via: Option<String>,
    pub cancel_reason: Option<String>,
}

/// Which follow-ups `list_followups` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListFilter {
    /// Not delivered yet (pending, or being delivered now).
    Pending,
    Completed,
    /// Everything, cancelled and failed ones included.
    All,
}

/// A page of follow-ups and how many match in all.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub followups: Vec<Followup>,
    pub total: usize,
}

/// What a change to a follow-up came to.
#[derive(Debug, Clone, PartialEq)]
pub enum ChangeOutcome {
    Changed(Followup),
    /// No such follow-up for this user (another user's is the same answer).
    NotFound,
    /// It is no longer pending: nothing changed.
    NotPending(Followup),
}

/// Where follow-ups live. Every call names the user; an implementation must never let one
/// user's call see or change another user's rows.
pub trait FollowupBackend: Send + Sync + std::fmt::Debug {
    /// Stores a pending follow-up due at `due_ms`; durable when it returns.
    fn schedule(
        &self,
        user: &str,
        context: &str,
        due_ms: i64,
        now_ms: i64,
    ) -> Result<Followup, BackendError>;
    /// The user's follow-ups: pending ones soonest first, the others latest first.
    fn list(&self, user: &str, filter: ListFilter, limit: usize) -> Result<Listed, BackendError>;
    /// Replaces the context and/or the due time of a pending follow-up.
    fn update(
        &self,
        user: &str,
        id: i64,
        context: Option<&str>,
        due_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<ChangeOutcome, BackendError>;
    /// Cancels a pending follow-up, keeping the reason.
    fn cancel(
        &self,
        user: &str,
        id: i64,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<ChangeOutcome, BackendError>;
    /// What has come due for the user: follow-ups delivered since `since_ms`, and those due
    /// by `now_ms` and still on their way (not cancelled or failed ones), latest first (by
    /// delivery, else due time), at most `limit`.
    fn due(
        &self,
        user: &str,
        since_ms: i64,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<Followup>, BackendError>;
}

/// Daily hours in which nothing is delivered (`22:00-07:00`), in the user's zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietHours {
    /// Minutes after local midnight.
    pub start: u16,
    pub end: u16,
}

impl QuietHours {
    /// Parses `HH:MM-HH:MM` (the end may be earlier than the start: the hours span
    /// midnight).
    pub fn parse(s: &str) -> Option<QuietHours> {
        let (a, b) = s.trim().split_once('-')?;
        let minutes = |t: &str| -> Option<u16> {
            let (h, m) = t.trim().split_once(':')?;
            let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
            (h < 24 && m < 60 && h.to_string().len() <= 2 && m.to_string().len() <= 2)
                .then_some(h * 60 + m)
        };
        let (start, end) = (minutes(a)?, minutes(b)?);
        (start != end).then_some(QuietHours { start, end })
    }

    /// Whether local minute-of-day `m` is quiet.
    pub fn contains(self, m: u16) -> bool {
        if self.start < self.end {
            (self.start..self.end).contains(&m)
        } else {
            m >= self.start || m < self.end
        }
    }

    /// The first instant at or after `ms` outside these hours, in `zone` (a follow-up due
    /// in quiet hours waits for their end; a day whose clock skips the end, by a daylight
    /// saving change, takes the first minute after it).
    pub fn next_allowed(self, ms: i64, zone: &TimeZone) -> i64 {
        let Ok(ts) = jiff::Timestamp::from_millisecond(ms) else {
            return ms;
        };
        let local = ts.to_zoned_datetime(zone.clone());
        let minute = (local.hour() as u16) * 60 + local.minute() as u16;
        if !self.contains(minute) {
            return ms;
        }
        // Walk forward minute by minute from the start of this minute to the first allowed
        // one (at most a day; zones make closed forms fragile around DST).
        let start_of_minute = ms - ms.rem_euclid(60_000);
        let mut t = start_of_minute;
        for _ in 0..=(24 * 60 + 120) {
            t += 60_000;
            let Ok(ts) = jiff::Timestamp::from_millisecond(t) else {
                return ms;
            };
            let l = ts.to_zoned_datetime(zone.clone());
            if !self.contains((l.hour() as u16) * 60 + l.minute() as u16) {
                return t;
            }
        }
        ms
    }

    pub fn describe(self) -> String {
        format!(
            "{:02}:{:02}-{:02}:{:02}",
            self.start / 60,
            self.start % 60,
            self.end / 60,
            self.end % 60
        )
    }
}

/// How follow-ups reach one user.
#[derive(Debug, Clone)]
pub struct UserDelivery {
    /// Proactive messages on: due follow-ups are delivered.
    pub proactive: bool,
    /// How to turn them on, when off (the setting or variable to use).
    pub enable_hint: String,
    pub zone: TimeZone,
    /// The zone's name as configured (`Europe/Berlin`).
    pub zone_name: String,
    pub quiet_hours: Option<QuietHours>,
    /// The channels that carry them (`mcp`, `webhook`, …).
    pub channels: Vec<String>,
    /// Why nothing can reach this user even with proactive messages on, if so.
    pub undeliverable: Option<String>,
    /// What the user should know about how it reaches them, if anything (only through
    /// their MCP client, which must be connected).
    pub caveat: Option<String>,
}

/// The users' delivery settings, as the tools report them.
pub trait DeliveryPolicy: Send + Sync + std::fmt::Debug {
    fn for_user(&self, user: &str) -> UserDelivery;
}

/// The time the tools compute due times from (injectable for tests).
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now_ms(&self) -> i64;
}

/// The machine's clock.
#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        ringfence_core::time::now_ms()
    }
}

/// What the follow-up family is built from.
#[derive(Debug, Clone)]
pub struct FollowupServices {
    pub backend: Arc<dyn FollowupBackend>,
    pub delivery: Arc<dyn DeliveryPolicy>,
    pub clock: Arc<dyn Clock>,
}

/// Builds the follow-up family: the four tools over `services`.
pub fn family(services: FollowupServices) -> Family {
    let s = Arc::new(services);
    let tools: Vec<Arc<dyn Tool>> = vec![
        Blocking::arc(ScheduleFollowup { s: s.clone() }),
        Blocking::arc(ListFollowups { s: s.clone() }),
        Blocking::arc(UpdateFollowup { s: s.clone() }),
        Blocking::arc(CancelFollowup { s: s.clone() }),
    ];
    Family::new(&INFO, tools).with_resources(Arc::new(DueFollowups::new(&s)))
}

// --- shared by the tools -----------------------------------------------------------------

/// A storage failure as the model sees it.
fn storage_failed(e: BackendError) -> ToolError {
    ToolError::new(ToolErrorKind::Io, format!("follow-up storage failed: {e}"))
}

/// The trimmed context, refused when empty, too long, or holding a control character other
/// than TAB and LF (it goes into mails and lists as it is).
fn context(text: &str) -> ToolResult<String> {
    refuse_controls("context", text)?;
    let t = text.trim();
    if t.is_empty() {
        return Err(ToolError::invalid(
            "context is empty: say what to follow up about, specific enough to make sense later",
        ));
    }
    let n = t.chars().count();
    if n > MAX_CONTEXT_CHARS {
        return Err(ToolError::invalid(format!(
            "context has {n} characters; the limit is {MAX_CONTEXT_CHARS}"
        )));
    }
    Ok(t.to_owned())
}

/// The due time `minutes` from `now_ms`, refused outside (0, [`MAX_MINUTES`]].
fn due_in(minutes: f64, now_ms: i64) -> ToolResult<i64> {
    if !minutes.is_finite() || minutes <= 0.0 || minutes > MAX_MINUTES {
        return Err(ToolError::invalid(format!(
            "minutes_from_now must be more than 0 and at most {MAX_MINUTES} (366 days); got {minutes}"
        )));
    }
    Ok(now_ms + (minutes * 60_000.0).round() as i64)
}

/// Deserializes a JSON number (or a numeric string, which models sometimes send).
fn number<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let v = Value::deserialize(d)?;
    as_number(&v).ok_or_else(|| serde::de::Error::custom(format!("expected a number, got {v}")))
}

fn optional_number<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Value::deserialize(d)?;
    if v.is_null() {
        return Ok(None);
    }
    as_number(&v)
        .map(Some)
        .ok_or_else(|| serde::de::Error::custom(format!("expected a number, got {v}")))
}

fn as_number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok().filter(|f: &f64| f.is_finite()),
        _ => None,
    }
}

/// "in 1 h 30 min", "2 min ago".
fn relative(ms: i64, now_ms: i64) -> String {
    let d = (ms - now_ms).abs();
    let minutes = (d + 30_000) / 60_000;
    let text = if d < 60_000 {
        format!("{} s", (d + 500) / 1000)
    } else if minutes < 60 {
        format!("{minutes} min")
    } else if minutes < 48 * 60 {
        match minutes % 60 {
            0 => format!("{} h", minutes / 60),
            m => format!("{} h {m} min", minutes / 60),
        }
    } else {
        format!("{} days", (minutes + 12 * 60) / (24 * 60))
    };
    if ms >= now_ms {
        format!("in {text}")
    } else {
        format!("{text} ago")
    }
}

/// The structured form of a follow-up (local and UTC times).
fn structured(f: &Followup, d: &UserDelivery) -> Value {
    json!({
        "followupId": f.id,
        "context": f.context,
        "status": f.status.as_str(),
        "scheduledFor": format_in_zone(f.due_ms, &d.zone),
        "scheduledForUtc": format_iso_ms(f.due_ms),
        "timezone": d.zone_name,
        "createdAt": format_iso_ms(f.created_ms),
        "attempts": f.attempts,
        "lastError": f.last_error,
        "deliveredAt": f.delivered_ms.map(format_iso_ms),
        "deliveredVia": f.delivered_via,
        "cancelReason": f.cancel_reason,
    })
}

/// The answer to a schedule or an update: `headline`, then when it is due (the user's
/// time, UTC, how far off), the context and the delivery note; structured the same, with
/// the proactive setting and the note.
fn confirmation(headline: String, f: &Followup, d: &UserDelivery, now_ms: i64) -> (String, Value) {
    let mut out = format!(
        "{headline} {} ({}; {} UTC), {}.\nContext: {}\n",
        format_in_zone(f.due_ms, &d.zone),
        d.zone_name,
        format_iso_ms(f.due_ms),
        relative(f.due_ms, now_ms),
        indented(&f.context, "  ")
    );
    let note = delivery_note(d, f.due_ms);
    if let Some(n) = &note {
        out.push_str(n);
        out.push('\n');
    }
    let mut s = structured(f, d);
    s["proactive"] = d.proactive.into();
    s["deliveryNote"] = note.into();
    (out, s)
}

/// One line: `#3 2026-12-04T18:45:00+01:00 (17:45Z) pending — context`.
fn line(f: &Followup, d: &UserDelivery, now_ms: i64) -> String {
    let mut s = format!(
        "#{} {} [{}] {} ({})",
        f.id,
        f.status.as_str(),
        format_in_zone(f.due_ms, &d.zone),
        format_iso_ms(f.due_ms),
        relative(f.due_ms, now_ms)
    );
    match f.status {
        Status::Completed => {
            if let Some(at) = f.delivered_ms {
                s.push_str(&format!(
                    "; delivered {} via {}",
                    format_in_zone(at, &d.zone),
                    f.delivered_via.as_deref().unwrap_or("?")
                ));
            }
        }
        Status::Cancelled => {
            if let Some(r) = &f.cancel_reason {
                s.push_str(&format!("; cancelled: {}", indented(r, "   ")));
            }
        }
        Status::Failed => s.push_str(&format!(
            "; delivery failed after {} attempts: {}",
            f.attempts,
            indented(f.last_error.as_deref().unwrap_or("unknown error"), "   ")
        )),
        Status::Pending | Status::Delivering => {}
    }
    s.push_str(&format!("\n   {}", indented(&f.context, "   ")));
    s
}

/// What the user should know about delivery of a follow-up due at `due_ms`: off, quiet
/// hours, or nothing.
fn delivery_note(d: &UserDelivery, due_ms: i64) -> Option<String> {
    if !d.proactive {
        return Some(format!(
            "Proactive messages are off for this user: the follow-up is kept, but nothing will be delivered until they are turned on ({}).",
            d.enable_hint
        ));
    }
    if let Some(why) = &d.undeliverable {
        return Some(format!(
            "The follow-up is kept, but it cannot be delivered: {why}."
        ));
    }
    let quiet = d.quiet_hours.and_then(|q| {
        let at = q.next_allowed(due_ms, &d.zone);
        (at != due_ms).then(|| {
            format!(
                "It falls in quiet hours ({}, {}): it will be delivered when they end, at {}.",
                q.describe(),
                d.zone_name,
                format_in_zone(at, &d.zone)
            )
        })
    });
    match (quiet, &d.caveat) {
        (Some(q), Some(c)) => Some(format!("{q} {c}")),
        (q, c) => q.or_else(|| c.clone()),
    }
}

/// The refusal for a follow-up that is not pending, worded as seed 003 names it.
fn not_pending(f: &Followup, what: &str) -> ToolError {
    let why = match f.status {
        Status::Completed => "already completed".to_owned(),
        Status::Delivering => {
            "being delivered right now (already completed in a moment)".to_owned()
        }
        Status::Cancelled => "already cancelled".to_owned(),
        Status::Failed => format!(
            "already finished: delivery failed after {} attempts",
            f.attempts
        ),
        Status::Pending => "pending".to_owned(),
    };
    ToolError::new(
        ToolErrorKind::Conflict,
        format!(
            "follow-up {} is {why}; only a pending follow-up can be {what}. Schedule a new one with schedule_followup",
            f.id
        ),
    )
}

/// The seed's "not found": no such follow-up for this user, whoever else may have one.
fn not_found(id: i64) -> ToolError {
    ToolError::new(
        ToolErrorKind::NotFound,
        format!("follow-up {id} not found; list_followups shows the existing ones"),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Follow-ups in memory, for the resource's tests: only `due` is answered.
    #[derive(Debug, Default)]
    pub(crate) struct Rows(Mutex<Vec<(String, Followup)>>);

    impl Rows {
        pub(crate) fn push(&self, user: &str, id: i64, context: &str, due_ms: i64) {
            self.0.lock().unwrap().push((
                user.into(),
                Followup {
                    id,
                    context: context.into(),
                    due_ms,
                    status: Status::Pending,
                    created_ms: due_ms - 60_000,
                    updated_ms: due_ms - 60_000,
                    attempts: 0,
                    last_error: None,
                    delivered_ms: None,
                    delivered_via: None,
                    cancel_reason: None,
                },
            ));
        }
    }

    fn not_here() -> BackendError {
        BackendError::new(std::io::Error::other("not part of this fake"))
    }

    impl FollowupBackend for Rows {
        fn schedule(&self, _: &str, _: &str, _: i64, _: i64) -> Result<Followup, BackendError> {
            Err(not_here())
        }
        fn list(&self, _: &str, _: ListFilter, _: usize) -> Result<Listed, BackendError> {
            Err(not_here())
        }
        fn update(
            &self,
            _: &str,
            _: i64,
            _: Option<&str>,
            _: Option<i64>,
            _: i64,
        ) -> Result<ChangeOutcome, BackendError> {
            Err(not_here())
        }
        fn cancel(
            &self,
            _: &str,
            _: i64,
            _: Option<&str>,
            _: i64,
        ) -> Result<ChangeOutcome, BackendError> {
            Err(not_here())
        }
        fn due(
            &self,
            user: &str,
            since_ms: i64,
            now_ms: i64,
            limit: usize,
        ) -> Result<Vec<Followup>, BackendError> {
            let mut rows: Vec<Followup> = self
                .0
                .lock()
                .unwrap()
                .iter()
                .filter(|(u, f)| u == user && f.due_ms <= now_ms && f.due_ms >= since_ms)
                .map(|(_, f)| f.clone())
                .collect();
            rows.sort_by_key(|f| std::cmp::Reverse(f.due_ms));
            rows.truncate(limit);
            Ok(rows)
        }
    }

    #[derive(Debug)]
    struct Fixed(i64);
    impl Clock for Fixed {
        fn now_ms(&self) -> i64 {
            self.0
        }
    }

    #[derive(Debug)]
    struct Utc;
    impl DeliveryPolicy for Utc {
        fn for_user(&self, _: &str) -> UserDelivery {
            UserDelivery {
                proactive: true,
                enable_hint: String::new(),
                zone: ringfence_core::time::zone("UTC").unwrap(),
                zone_name: "UTC".into(),
                quiet_hours: None,
                channels: vec!["mcp".into()],
                undeliverable: None,
                caveat: None,
            }
        }
    }

    /// Services over [`Rows`] with the clock stopped at `now_ms`.
    pub(crate) fn services_at(now_ms: i64) -> (Arc<FollowupServices>, Arc<Rows>) {
        let rows = Arc::new(Rows::default());
        let s = Arc::new(FollowupServices {
            backend: rows.clone(),
            delivery: Arc::new(Utc),
            clock: Arc::new(Fixed(now_ms)),
        });
        (s, rows)
    }

    #[test]
    fn quiet_hours_parse_and_span_midnight() {
        let q = QuietHours::parse("22:00-07:00").unwrap();
        assert_eq!((q.start, q.end), (22 * 60, 7 * 60));
        assert!(q.contains(23 * 60) && q.contains(0) && q.contains(6 * 60 + 59));
        assert!(!q.contains(7 * 60) && !q.contains(12 * 60) && !q.contains(21 * 60 + 59));
        let day = QuietHours::parse("12:30-13:15").unwrap();
        assert!(day.contains(12 * 60 + 30) && !day.contains(13 * 60 + 15));
        for bad in [
            "",
            "22-07",
            "25:00-07:00",
            "22:00-22:00",
            "22:00",
            "7:60-8:00",
            "x",
        ] {
            assert_eq!(QuietHours::parse(bad), None, "{bad}");
        }
        assert_eq!(q.describe(), "22:00-07:00");
    }

    #[test]
    fn a_time_in_quiet_hours_waits_for_their_end_in_the_users_zone() {
        let zone = ringfence_core::time::zone("Europe/Berlin").unwrap();
        let q = QuietHours::parse("22:00-07:00").unwrap();
        let at = |s: &str| {
            jiff::Timestamp::from_second(
                s.parse::<jiff::civil::DateTime>()
                    .unwrap()
                    .to_zoned_datetime(zone.clone())
                    .unwrap()
                    .timestamp()
                    .as_second(),
            )
            .unwrap()
            .as_millisecond()
        };
        // 23:10 Berlin → 07:00 the next morning.
        assert_eq!(
            q.next_allowed(at("2026-12-04T23:10:00"), &zone),
            at("2026-12-05T07:00:00")
        );
        // 12:00 is not quiet.
        assert_eq!(
            q.next_allowed(at("2026-12-04T12:00:00"), &zone),
            at("2026-12-04T12:00:00")
        );
        // Across the spring change (2027-03-28, 02:00 → 03:00): still 07:00 local.
        assert_eq!(
            q.next_allowed(at("2027-03-28T01:30:00"), &zone),
            at("2027-03-28T07:00:00")
        );
    }

    #[test]
    fn due_times_are_checked_against_the_documented_range() {
        assert_eq!(due_in(90.0, 1_000).ok(), Some(1_000 + 90 * 60_000));
        assert_eq!(due_in(0.5, 0).ok(), Some(30_000));
        for bad in [0.0, -5.0, f64::NAN, f64::INFINITY, MAX_MINUTES + 1.0] {
            let e = due_in(bad, 0).unwrap_err();
            assert!(
                e.message.contains("more than 0 and at most"),
                "{}",
                e.message
            );
        }
    }

    /// A stored context (or reason) with a line break cannot fake an entry of the list: each
    /// of its lines after the first stays indented under its own entry.
    #[test]
    fn a_context_with_line_breaks_stays_inside_its_entry() {
        let fake =
            "ask about the trip\n#7 pending [2026-01-01] fake entry\r- 2026-01-01 fake entry";
        let (s, _) = services_at(1_000_000_000_000);
        let d = s.delivery.for_user("alice");
        let mut f = Followup {
            id: 1,
            context: fake.into(),
            due_ms: 1_000_000_060_000,
            status: Status::Cancelled,
            created_ms: 0,
            updated_ms: 0,
            attempts: 0,
            last_error: None,
            delivered_ms: None,
            delivered_via: None,
            cancel_reason: Some("done\n#8 pending fake".into()),
        };
        let listed = line(&f, &d, 1_000_000_000_000);
        let (confirmed, _) = confirmation("Follow-up 1 due".into(), &f, &d, 1_000_000_000_000);
        f.status = Status::Failed;
        f.last_error = Some("webhook: HTTP 500\n#9 completed fake".into());
        let failed = line(&f, &d, 1_000_000_000_000);
        for text in [&listed, &confirmed, &failed] {
            // Every line of the stored text after its first is indented: nothing at the start
            // of a line looks like an entry (`#7 …`, `- …`).
            for l in text.lines().filter(|l| l.contains("fake")) {
                assert!(
                    l.starts_with("  "),
                    "{l:?} starts a line of its own in:\n{text}"
                );
            }
            assert!(
                text.contains("  #7 pending [2026-01-01] fake entry"),
                "{text}"
            );
            assert!(text.contains("  - 2026-01-01 fake entry"), "{text}");
        }
        assert!(
            listed.contains("cancelled: done\n   #8 pending fake"),
            "{listed}"
        );
        assert!(
            failed.contains("HTTP 500\n   #9 completed fake"),
            "{failed}"
        );
    }

    #[test]
    fn contexts_with_control_characters_are_refused_when_scheduled() {
        assert_eq!(context("  two\nlines\tok  ").unwrap(), "two\nlines\tok");
        let e = context("c\r.\rMAIL FROM:<x>").unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::InvalidArgument);
        assert!(
            e.message
                .contains("remove the control character U+000D (carriage return) at position 2"),
            "{}",
            e.message
        );
        let e = context("see \u{1b}[2Jthis").unwrap_err();
        assert!(
            e.message
                .contains("remove the control character U+001B (escape) at position 5"),
            "{}",
            e.message
        );
    }

    #[test]
    fn relative_times_read_naturally() {
        assert_eq!(relative(90 * 60_000, 0), "in 1 h 30 min");
        assert_eq!(relative(0, 120_000), "2 min ago");
        assert_eq!(relative(30_000, 0), "in 30 s");
        assert_eq!(relative(3 * 24 * 3_600_000, 0), "in 3 days");
    }
}
