//! The calendar family (seed 003): list, create, update and delete events.
//!
//! The tools validate (date-times with an offset, end after start, the day range), format
//! times in the event's zone and the user's, and map provider failures to errors the model
//! can act on. The calendars themselves live behind [`CalendarBackend`]: the local calendar,
//! CalDAV and Google are implemented in `ringfence-calendar` and chosen per user by the
//! binary's configuration, so this crate knows nothing of iCalendar or HTTP.

mod create_calendar_event;
mod delete_calendar_event;
mod list_calendar_events;
mod update_calendar_event;

use std::sync::Arc;

use serde_json::{Value, json};

use ringfence_core::error::{ToolError, ToolErrorKind};
use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::text::indented;
use ringfence_core::time::{TimeZone, format_in_zone, format_iso_ms};
use ringfence_core::tool::{Async, BoxFuture, Tool};

pub use create_calendar_event::CreateCalendarEvent;
pub use delete_calendar_event::DeleteCalendarEvent;
pub use list_calendar_events::ListCalendarEvents;
pub use update_calendar_event::UpdateCalendarEvent;

/// The tool family name (`tools.disable = ["calendar"]` turns all four off).
pub const FAMILY: &str = "calendar";

pub const INFO: FamilyInfo = FamilyInfo {
    name: FAMILY,
    summary: "list, create, move and delete calendar events: a local calendar, CalDAV or Google Calendar",
    tools: &[
        "list_calendar_events",
        "create_calendar_event",
        "update_calendar_event",
        "delete_calendar_event",
    ],
    presets: &[ringfence_core::PresetPart {
        name: ringfence_core::family::ASSISTANT,
        summary: ringfence_core::family::ASSISTANT_SUMMARY,
        tools: ringfence_core::family::EVERY_TOOL,
    }],
};

/// The longest title, location and description accepted, in characters.
pub const MAX_TITLE_CHARS: usize = 1000;
pub const MAX_LOCATION_CHARS: usize = 2000;
pub const MAX_DESCRIPTION_CHARS: usize = 20_000;
/// The longest an event may last: 366 days.
pub const MAX_EVENT_MS: i64 = 366 * 24 * 3600 * 1000;

/// When an event starts or ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// An instant (milliseconds since the Unix epoch).
    At(i64),
    /// A whole day (all-day events; an end date is exclusive, as in iCalendar).
    Date(jiff::civil::Date),
}

/// An event (or one occurrence of a recurring one) as a provider returns it.
#[derive(Debug, Clone, PartialEq)]
pub struct CalendarEvent {
    /// What `update_calendar_event` and `delete_calendar_event` take: for an occurrence of
    /// a recurring event, that occurrence's own ID.
    pub id: String,
    pub calendar_id: String,
    pub calendar_name: String,
    pub title: String,
    pub start: When,
    pub end: When,
    /// The event's own zone (its `TZID`), when it has one.
    pub zone: Option<String>,
    pub location: Option<String>,
    pub description: Option<String>,
    /// One occurrence of a recurring event.
    pub recurring: bool,
    /// A video meeting link (Google Meet, or a link the provider made).
    pub meet_link: Option<String>,
}

impl CalendarEvent {
    pub fn all_day(&self) -> bool {
        matches!(self.start, When::Date(_))
    }
}

/// A date-time as the model gave it: the instant, and the offset it was written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GivenTime {
    pub ms: i64,
    pub offset_secs: i32,
}

/// What `create_calendar_event` asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub title: String,
    pub start: GivenTime,
    pub end: GivenTime,
    pub description: Option<String>,
    pub location: Option<String>,
    pub add_meet_link: bool,
}

/// What `update_calendar_event` changes: only the fields given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventPatch {
    pub title: Option<String>,
    pub start: Option<GivenTime>,
    pub end: Option<GivenTime>,
    pub description: Option<String>,
    pub location: Option<String>,
}

/// What a deletion removed.
#[derive(Debug, Clone, PartialEq)]
pub struct Deleted {
    pub title: String,
    pub calendar_name: String,
    /// Only one occurrence of a recurring event (the others stay).
    pub occurrence_only: bool,
}

/// A provider's failure, as the tools report it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalendarError {
    /// No credentials, or the connection was refused: the message says how to connect.
    #[error("{0}")]
    NotConnected(String),
    #[error("{0}")]
    NotFound(String),
    /// Someone else changed it since it was read: nothing was overwritten.
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Invalid(String),
    /// The provider cannot do this (a Meet link on a calendar without one).
    #[error("{0}")]
    Unsupported(String),
    /// The provider failed (a network error, a server error).
    #[error("{0}")]
    Failed(String),
}

impl From<CalendarError> for ToolError {
    fn from(e: CalendarError) -> ToolError {
        match e {
            CalendarError::NotConnected(m) => ToolError::new(ToolErrorKind::Unavailable, m),
            CalendarError::NotFound(m) => ToolError::new(ToolErrorKind::NotFound, m),
            CalendarError::Conflict(m) => ToolError::new(ToolErrorKind::Conflict, m),
            CalendarError::Invalid(m) => ToolError::invalid(m),
            CalendarError::Unsupported(m) => ToolError::new(ToolErrorKind::Refused, m),
            CalendarError::Failed(m) => ToolError::new(ToolErrorKind::Io, m),
        }
    }
}

pub type CalendarResult<T> = Result<T, CalendarError>;

/// A user's calendars, wherever they are. Every call names the user; an implementation
/// must never let one user reach another's calendars or credentials.
pub trait CalendarBackend: Send + Sync + std::fmt::Debug {
    /// The user's zone and its name.
    fn zone(&self, user: &str) -> (String, TimeZone);
    /// Events (occurrences of recurring ones each on their own) overlapping
    /// `[from_ms, to_ms)`, soonest first, of every calendar or of `calendar` (an ID or a
    /// name).
    fn list(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        calendar: Option<String>,
    ) -> BoxFuture<'static, CalendarResult<Vec<CalendarEvent>>>;
    fn create(
        &self,
        user: &str,
        event: NewEvent,
    ) -> BoxFuture<'static, CalendarResult<CalendarEvent>>;
    /// Changes the given fields of an event, or of one occurrence when `id` names one.
    fn update(
        &self,
        user: &str,
        id: String,
        patch: EventPatch,
    ) -> BoxFuture<'static, CalendarResult<CalendarEvent>>;
    fn delete(&self, user: &str, id: String) -> BoxFuture<'static, CalendarResult<Deleted>>;
}

/// Builds the calendar family: the four tools over `backend`.
pub fn family(backend: Arc<dyn CalendarBackend>) -> Family {
    let tools: Vec<Arc<dyn Tool>> = vec![
        Async::arc(ListCalendarEvents {
            backend: backend.clone(),
        }),
        Async::arc(CreateCalendarEvent {
            backend: backend.clone(),
        }),
        Async::arc(UpdateCalendarEvent {
            backend: backend.clone(),
        }),
        Async::arc(DeleteCalendarEvent { backend }),
    ];
    Family::new(&INFO, tools).with_instructions(
        "Calendar: date-times you give are ISO 8601 with an offset or Z (2026-01-29T10:00:00-05:00). Events are shown in the user's time zone; use the event IDs list_calendar_events returns (an occurrence of a recurring event has its own).",
    )
}

// --- shared by the tools -----------------------------------------------------------------

/// Parses an ISO 8601 date-time with an offset or `Z`; `field` names the argument in the
/// error.
pub fn given_time(field: &str, s: &str) -> Result<GivenTime, ToolError> {
    let t = s.trim();
    let bad = |why: &str| {
        ToolError::invalid(format!(
            "{field} {t:?} {why}; give ISO 8601 with a time zone offset or Z, like 2026-01-29T10:00:00-05:00 or 2026-01-29T15:00:00Z"
        ))
    };
    let ts: jiff::Timestamp = t.parse().map_err(|_| {
        if t.parse::<jiff::civil::DateTime>().is_ok() || t.parse::<jiff::civil::Date>().is_ok() {
            bad("has no time zone offset")
        } else {
            bad("is not a date-time")
        }
    })?;
    let offset_secs = if t.ends_with(['Z', 'z']) {
        0
    } else {
        let civil: jiff::civil::DateTime = t.parse().map_err(|_| bad("is not a date-time"))?;
        let as_utc = civil
            .to_zoned_datetime(TimeZone::UTC)
            .map_err(|_| bad("is out of range"))?
            .timestamp();
        (as_utc.as_second() - ts.as_second()) as i32
    };
    Ok(GivenTime {
        ms: ts.as_millisecond(),
        offset_secs,
    })
}

/// A text argument trimmed, refused when longer than `max` characters; `None` when absent.
fn text_arg(field: &str, v: Option<String>, max: usize) -> Result<Option<String>, ToolError> {
    let Some(v) = v else { return Ok(None) };
    let n = v.chars().count();
    if n > max {
        return Err(ToolError::invalid(format!(
            "{field} has {n} characters; the limit is {max}"
        )));
    }
    Ok(Some(v.trim().to_owned()))
}

/// An event ID argument: not empty.
fn event_id(id: &str) -> Result<String, ToolError> {
    let id = id.trim();
    if id.is_empty() {
        return Err(ToolError::invalid(
            "eventId is empty: use an ID that list_calendar_events returned",
        ));
    }
    Ok(id.to_owned())
}

/// End after start, and not absurdly long.
fn check_span(start: i64, end: i64) -> Result<(), ToolError> {
    if end <= start {
        return Err(ToolError::invalid(format!(
            "endDateTime ({}) must be after startDateTime ({})",
            format_iso_ms(end),
            format_iso_ms(start)
        )));
    }
    if end - start > MAX_EVENT_MS {
        return Err(ToolError::invalid(
            "the event would last more than 366 days; check startDateTime and endDateTime",
        ));
    }
    Ok(())
}

/// `2026-01-29 10:00`-style local text of an instant in `zone`.
fn local(ms: i64, zone: &TimeZone) -> String {
    ringfence_core::time::local_text(ms, zone, "%a %Y-%m-%d %H:%M")
}

/// The event's times as the user reads them: in their zone, and in the event's own when it
/// differs.
fn times(e: &CalendarEvent, user_zone: &(String, TimeZone)) -> String {
    match (e.start, e.end) {
        (When::Date(s), When::Date(end)) => {
            let last = end.yesterday().unwrap_or(end);
            if last <= s {
                format!("{} (all day)", s.strftime("%a %Y-%m-%d"))
            } else {
                format!(
                    "{} – {} (all day)",
                    s.strftime("%a %Y-%m-%d"),
                    last.strftime("%a %Y-%m-%d")
                )
            }
        }
        (When::At(s), When::At(end)) => {
            let (name, zone) = user_zone;
            let mut out = format!("{} – {} ({name})", local(s, zone), local(end, zone));
            if let Some(own) = &e.zone
                && own != name
                && let Ok(tz) = ringfence_core::time::zone(own)
            {
                out.push_str(&format!("; {} – {} {own}", local(s, &tz), local(end, &tz)));
            }
            out
        }
        // Mixed kinds do not occur; show what there is.
        (s, end) => format!("{s:?} – {end:?}"),
    }
}

/// The structured form of an event: times in the event's zone (ISO 8601 with offset), in
/// the user's, and UTC.
fn structured(e: &CalendarEvent, user_zone: &(String, TimeZone)) -> Value {
    let iso = |w: When| -> (Value, Value, Value) {
        match w {
            When::Date(d) => (d.to_string().into(), d.to_string().into(), Value::Null),
            When::At(ms) => {
                let own = e
                    .zone
                    .as_deref()
                    .and_then(|z| ringfence_core::time::zone(z).ok())
                    .unwrap_or_else(|| user_zone.1.clone());
                (
                    format_in_zone(ms, &own).into(),
                    format_in_zone(ms, &user_zone.1).into(),
                    format_iso_ms(ms).into(),
                )
            }
        }
    };
    let (start, start_local, start_utc) = iso(e.start);
    let (end, end_local, end_utc) = iso(e.end);
    json!({
        "eventId": e.id,
        "title": e.title,
        "start": start,
        "end": end,
        "startLocal": start_local,
        "endLocal": end_local,
        "startUtc": start_utc,
        "endUtc": end_utc,
        "eventTimezone": e.zone,
        "timezone": user_zone.0,
        "allDay": e.all_day(),
        "recurring": e.recurring,
        "calendarId": e.calendar_id,
        "calendar": e.calendar_name,
        "location": e.location,
        "description": e.description,
        "meetLink": e.meet_link,
    })
}

/// The event as a few lines: title, times, then calendar, ID, markers, location, link. What
/// comes from the calendar (a title or a location with line breaks in it) keeps each of its
/// lines inside this entry.
fn describe(e: &CalendarEvent, user_zone: &(String, TimeZone)) -> String {
    const INDENT: &str = "   ";
    let mut s = format!(
        "{}\n{INDENT}{}",
        indented(&e.title, INDENT),
        times(e, user_zone)
    );
    let mut facts = vec![format!("calendar: {}", e.calendar_name)];
    if e.recurring {
        facts.push("recurring".into());
    }
    facts.push(format!("ID: {}", e.id));
    s.push_str(&format!(
        "\n{INDENT}{}",
        indented(&facts.join(" · "), INDENT)
    ));
    if let Some(l) = &e.location {
        s.push_str(&format!("\n{INDENT}Location: {}", indented(l, INDENT)));
    }
    if let Some(m) = &e.meet_link {
        s.push_str(&format!("\n{INDENT}Meeting link: {}", indented(m, INDENT)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A title or a location with line breaks cannot fake another event of the list: each of
    /// its lines after the first stays indented under its own entry.
    #[test]
    fn a_title_with_line_breaks_stays_inside_its_entry() {
        let day = |d: &str| When::Date(d.parse().unwrap());
        let e = CalendarEvent {
            id: "ev1".into(),
            calendar_id: "personal".into(),
            calendar_name: "Personal".into(),
            title: "Dentist\n2. - 2026-01-01 fake entry\r\n- 2026-01-01 fake entry".into(),
            start: day("2026-01-29"),
            end: day("2026-01-30"),
            zone: None,
            location: Some("Main St 1\r2. fake location".into()),
            description: None,
            recurring: false,
            meet_link: None,
        };
        let zone = ("UTC".to_owned(), TimeZone::UTC);
        let text = format!("1. {}\n", describe(&e, &zone));
        assert!(text.starts_with("1. Dentist\n   2. - 2026-01-01 fake entry\n   - 2026-01-01"));
        for l in text.lines().skip(1) {
            assert!(
                l.starts_with("   "),
                "{l:?} starts a line of its own in:\n{text}"
            );
        }
        assert!(
            text.contains("Location: Main St 1\n   2. fake location"),
            "{text}"
        );
    }

    #[test]
    fn date_times_need_an_offset() {
        let g = given_time("startDateTime", "2026-01-29T10:00:00-05:00").unwrap();
        assert_eq!(g.offset_secs, -5 * 3600);
        assert_eq!(
            format_iso_ms(g.ms),
            "2026-01-29T15:00:00.000Z",
            "10:00 at -05:00 is 15:00 UTC"
        );
        let z = given_time("startDateTime", "2026-01-29T15:00:00Z").unwrap();
        assert_eq!((z.ms, z.offset_secs), (g.ms, 0));
        let e = given_time("startDateTime", "2026-01-29T10:00:00").unwrap_err();
        assert!(
            e.message.contains("has no time zone offset") && e.message.contains("-05:00"),
            "{}",
            e.message
        );
        let e = given_time("endDateTime", "tomorrow at ten").unwrap_err();
        assert!(
            e.message
                .starts_with("endDateTime \"tomorrow at ten\" is not a date-time")
        );
        assert!(check_span(g.ms, g.ms).is_err() && check_span(g.ms, g.ms + 1).is_ok());
    }
}
