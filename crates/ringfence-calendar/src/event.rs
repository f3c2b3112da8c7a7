//! Events inside an iCalendar object: times in their zones, recurrence expanded within a
//! window (RRULE through the `rrule` crate; RDATE, EXDATE and RECURRENCE-ID overrides here),
//! and the edits the tools make — a field changed on the whole event or on one occurrence
//! (an override), an occurrence removed (an EXDATE).
//!
//! One object holds one event: the master `VEVENT` and its overrides (same UID), as CalDAV
//! stores them and as the local calendar keeps them.

use chrono::TimeZone as _;
use jiff::civil::{Date, DateTime};
use jiff::tz::{Offset, TimeZone};
use jiff::{Span, Timestamp};

use crate::ical::{Component, Property};
use crate::tools::When;

/// How a DTSTART, DTEND, RECURRENCE-ID or EXDATE value is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IcalTime {
    Date(Date),
    /// Wall-clock time in no zone: read in the user's.
    Floating(DateTime),
    Utc(Timestamp),
    /// Wall-clock time in the zone `TZID` names.
    Zoned(DateTime, String),
}

/// The zones an object's times are read in: named ones (and the object's own `VTIMEZONE`s
/// where a `TZID` is no IANA name), and the user's for floating times and dates.
#[derive(Debug, Clone)]
pub struct Zones {
    pub user: TimeZone,
    pub user_name: String,
    /// `TZID` → the standard offset of its `VTIMEZONE`, for names IANA does not know.
    custom: Vec<(String, i32)>,
}

impl Zones {
    pub fn new(user_name: &str, user: TimeZone) -> Zones {
        Zones {
            user,
            user_name: user_name.to_owned(),
            custom: Vec::new(),
        }
    }

    /// These zones plus the `VTIMEZONE`s of `calendar`.
    pub fn with_object(&self, calendar: &Component) -> Zones {
        let mut z = self.clone();
        for tz in calendar.children.iter().filter(|c| c.name == "VTIMEZONE") {
            let Some(id) = tz.text("TZID") else { continue };
            let offset = tz
                .children
                .iter()
                .find(|c| c.name == "STANDARD")
                .or_else(|| tz.children.first())
                .and_then(|c| c.prop("TZOFFSETTO"))
                .and_then(|p| parse_utc_offset(&p.value));
            if let Some(o) = offset {
                z.custom.push((id, o));
            }
        }
        z
    }

    /// The zone a `TZID` names, and its IANA name when it has one: an IANA name as is; a
    /// name ending in one (`/mozilla.org/…/Europe/Berlin`); the object's `VTIMEZONE` (its
    /// standard offset, without daylight-saving changes); else the user's zone.
    pub fn resolve(&self, tzid: &str) -> (TimeZone, Option<String>) {
        let tzid = tzid.trim();
        if let Some(found) = iana(tzid) {
            return found;
        }
        let parts: Vec<&str> = tzid.split('/').collect();
        for i in 1..parts.len() {
            if let Some(found) = iana(&parts[i..].join("/")) {
                return found;
            }
        }
        if let Some((_, secs)) = self.custom.iter().find(|(id, _)| id == tzid)
            && let Ok(o) = Offset::from_seconds(*secs)
        {
            return (TimeZone::fixed(o), None);
        }
        (self.user.clone(), Some(self.user_name.clone()))
    }
}

fn iana(name: &str) -> Option<(TimeZone, Option<String>)> {
    let tz = TimeZone::get(name).ok()?;
    let canonical = tz.iana_name().unwrap_or(name).to_owned();
    Some((tz, Some(canonical)))
}

/// `+0100`, `-0530`, `+013045` → seconds.
fn parse_utc_offset(s: &str) -> Option<i32> {
    let s = s.trim();
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let d = &s[1..];
    if !(d.len() == 4 || d.len() == 6) || !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let h: i32 = d[0..2].parse().ok()?;
    let m: i32 = d[2..4].parse().ok()?;
    let sec: i32 = if d.len() == 6 {
        d[4..6].parse().ok()?
    } else {
        0
    };
    Some(sign * (h * 3600 + m * 60 + sec))
}

fn parse_date(s: &str) -> Option<Date> {
    let s = s.trim();
    if s.len() != 8 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Date::new(
        s[0..4].parse().ok()?,
        s[4..6].parse().ok()?,
        s[6..8].parse().ok()?,
    )
    .ok()
}

fn parse_datetime(s: &str) -> Option<DateTime> {
    let (d, t) = s.trim().split_once(['T', 't'])?;
    let date = parse_date(d)?;
    if t.len() != 6 || !t.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let sec: i8 = t[4..6].parse::<i8>().ok()?.min(59);
    date.to_datetime(
        jiff::civil::Time::new(t[0..2].parse().ok()?, t[2..4].parse().ok()?, sec, 0).ok()?,
    )
    .into()
}

fn compact_date(d: Date) -> String {
    d.strftime("%Y%m%d").to_string()
}

fn compact_datetime(d: DateTime) -> String {
    d.strftime("%Y%m%dT%H%M%S").to_string()
}

/// `20260129T150000Z`.
pub fn compact_utc(ms: i64) -> String {
    let ts = Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH);
    format!(
        "{}Z",
        compact_datetime(ts.to_zoned_datetime(TimeZone::UTC).datetime())
    )
}

impl IcalTime {
    /// One value (of possibly several, comma-separated) with the property's parameters.
    fn from_value(value: &str, prop: &Property) -> Option<IcalTime> {
        let v = value.trim();
        if prop
            .param("VALUE")
            .is_some_and(|t| t.eq_ignore_ascii_case("DATE"))
            || (v.len() == 8 && !v.contains('T'))
        {
            return parse_date(v).map(IcalTime::Date);
        }
        if let Some(body) = v.strip_suffix(['Z', 'z']) {
            let dt = parse_datetime(body)?;
            return dt
                .to_zoned_datetime(TimeZone::UTC)
                .ok()
                .map(|z| IcalTime::Utc(z.timestamp()));
        }
        let dt = parse_datetime(v)?;
        Some(match prop.param("TZID") {
            Some(tz) => IcalTime::Zoned(dt, tz.to_owned()),
            None => IcalTime::Floating(dt),
        })
    }

    pub fn from_prop(p: &Property) -> Option<IcalTime> {
        IcalTime::from_value(p.value.split(',').next()?, p)
    }

    /// Every value of a (possibly multi-valued) property, e.g. `EXDATE`.
    pub fn all_from_prop(p: &Property) -> Vec<IcalTime> {
        p.value
            .split(',')
            .filter_map(|v| IcalTime::from_value(v, p))
            .collect()
    }

    pub fn to_prop(&self, name: &str) -> Property {
        match self {
            IcalTime::Date(d) => Property::new(name, compact_date(*d)).with_param("VALUE", "DATE"),
            IcalTime::Floating(dt) => Property::new(name, compact_datetime(*dt)),
            IcalTime::Utc(ts) => Property::new(name, compact_utc(ts.as_millisecond())),
            IcalTime::Zoned(dt, tz) => {
                Property::new(name, compact_datetime(*dt)).with_param("TZID", tz)
            }
        }
    }

    pub fn is_date(&self) -> bool {
        matches!(self, IcalTime::Date(_))
    }

    /// The zone this time is read in, with its IANA name when it has one.
    pub fn zone(&self, zones: &Zones) -> (TimeZone, Option<String>) {
        match self {
            IcalTime::Utc(_) => (TimeZone::UTC, Some("UTC".into())),
            IcalTime::Zoned(_, tz) => zones.resolve(tz),
            IcalTime::Floating(_) | IcalTime::Date(_) => {
                (zones.user.clone(), Some(zones.user_name.clone()))
            }
        }
    }

    /// The instant (a date: its midnight in the user's zone).
    pub fn ms(&self, zones: &Zones) -> i64 {
        let (tz, _) = self.zone(zones);
        let civil = match self {
            IcalTime::Utc(ts) => return ts.as_millisecond(),
            IcalTime::Date(d) => d.to_datetime(jiff::civil::Time::midnight()),
            IcalTime::Floating(dt) | IcalTime::Zoned(dt, _) => *dt,
        };
        civil
            .to_zoned_datetime(tz)
            .map(|z| z.timestamp().as_millisecond())
            .unwrap_or(0)
    }

    /// The key an occurrence is known by: its UTC instant (`20260129T150000Z`), or its date.
    pub fn key(&self, zones: &Zones) -> String {
        match self {
            IcalTime::Date(d) => compact_date(*d),
            t => compact_utc(t.ms(zones)),
        }
    }

    /// The instant `ms` written the way `self` is (same zone form): what a moved start or
    /// a new RECURRENCE-ID looks like.
    pub fn same_form(&self, ms: i64, zones: &Zones) -> IcalTime {
        let ts = Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH);
        let (tz, _) = self.zone(zones);
        let wall = ts.to_zoned_datetime(tz).datetime();
        match self {
            IcalTime::Utc(_) => IcalTime::Utc(ts),
            IcalTime::Zoned(_, name) => IcalTime::Zoned(wall, name.clone()),
            IcalTime::Floating(_) => IcalTime::Floating(wall),
            IcalTime::Date(_) => IcalTime::Date(wall.date()),
        }
    }
}

/// An event's length: exact for timed events, in days for all-day ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Length {
    Ms(i64),
    Days(i32),
}

/// The longest event length read from DURATION or DTEND: ten years (longer is unreadable).
const MAX_LENGTH_MS: i64 = 3660 * 86_400_000;

/// A `DURATION` value (`PT1H30M`, `P1D`, `P2W`) in milliseconds, at most [`MAX_LENGTH_MS`].
fn parse_duration(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let s = s.strip_prefix('P')?;
    let mut total: i64 = 0;
    let mut num = String::new();
    let mut in_time = false;
    for ch in s.chars() {
        match ch {
            'T' => in_time = true,
            '0'..='9' => num.push(ch),
            unit => {
                let n: i64 = num.parse().ok()?;
                num.clear();
                let unit_ms: i64 = match (unit, in_time) {
                    ('W', false) => 7 * 86_400_000,
                    ('D', false) => 86_400_000,
                    ('H', true) => 3_600_000,
                    ('M', true) => 60_000,
                    ('S', true) => 1000,
                    _ => return None,
                };
                total = total.checked_add(n.checked_mul(unit_ms)?)?;
                if total > MAX_LENGTH_MS {
                    return None;
                }
            }
        }
    }
    Some(if neg { -total } else { total })
}

/// An event component's start and length.
pub fn start_and_length(ev: &Component, zones: &Zones) -> Option<(IcalTime, Length)> {
    let start = IcalTime::from_prop(ev.prop("DTSTART")?)?;
    let end = ev.prop("DTEND").and_then(IcalTime::from_prop);
    let length = match (&start, end) {
        (IcalTime::Date(s), Some(IcalTime::Date(e))) => {
            Length::Days((e - *s).get_days().clamp(1, 3660))
        }
        (IcalTime::Date(_), _) => Length::Days(
            ev.prop("DURATION")
                .and_then(|p| parse_duration(&p.value))
                .map(|ms| (ms / 86_400_000).max(1) as i32)
                .unwrap_or(1),
        ),
        (s, Some(e)) => Length::Ms(
            e.ms(zones)
                .saturating_sub(s.ms(zones))
                .clamp(0, MAX_LENGTH_MS),
        ),
        (_, None) => Length::Ms(
            ev.prop("DURATION")
                .and_then(|p| parse_duration(&p.value))
                .unwrap_or(0)
                .max(0),
        ),
    };
    Some((start, length))
}

/// One occurrence as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    pub uid: String,
    /// Which occurrence of a recurring event (its key); `None` for a single event.
    pub rid: Option<String>,
    pub start: When,
    pub end: When,
    /// The IANA name of the zone its start is written in, if any.
    pub zone: Option<String>,
    pub title: String,
    pub location: Option<String>,
    pub description: Option<String>,
    pub recurring: bool,
    pub meet_link: Option<String>,
    /// Start instant, for ordering and windows.
    pub start_ms: i64,
    pub end_ms: i64,
}

/// The master event of an object and its overrides.
pub fn parts(cal: &Component) -> (Option<&Component>, Vec<&Component>) {
    let events: Vec<&Component> = cal.children.iter().filter(|c| c.name == "VEVENT").collect();
    let master = events
        .iter()
        .find(|e| e.prop("RECURRENCE-ID").is_none())
        .copied();
    let overrides = events
        .into_iter()
        .filter(|e| e.prop("RECURRENCE-ID").is_some())
        .collect();
    (master, overrides)
}

fn is_recurring(master: &Component) -> bool {
    master.prop("RRULE").is_some() || master.prop("RDATE").is_some()
}

fn non_empty(s: Option<String>) -> Option<String> {
    s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// An occurrence of `ev` starting at `start` for `length`.
fn occurrence(
    ev: &Component,
    uid: &str,
    rid: Option<String>,
    start: &IcalTime,
    length: Length,
    recurring: bool,
    zones: &Zones,
) -> Occurrence {
    let start_ms = start.ms(zones);
    let (s, e, end_ms) = match (start, length) {
        (IcalTime::Date(d), Length::Days(n)) => {
            let end = Span::new()
                .try_days(n.clamp(0, 3660))
                .ok()
                .and_then(|span| d.checked_add(span).ok())
                .unwrap_or(*d);
            let end_ms = IcalTime::Date(end).ms(zones);
            (When::Date(*d), When::Date(end), end_ms)
        }
        (_, Length::Ms(ms)) => {
            let end = start_ms.saturating_add(ms);
            (When::At(start_ms), When::At(end), end)
        }
        (_, Length::Days(n)) => {
            let end = start_ms.saturating_add(i64::from(n.clamp(0, 3660)) * 86_400_000);
            (When::At(start_ms), When::At(end), end)
        }
    };
    let meet_link = non_empty(ev.text("X-GOOGLE-CONFERENCE"))
        .or_else(|| non_empty(ev.text("X-RINGFENCE-MEETING")));
    Occurrence {
        uid: uid.to_owned(),
        rid,
        start: s,
        end: e,
        zone: match start {
            IcalTime::Date(_) | IcalTime::Floating(_) => None,
            t => t.zone(zones).1,
        },
        title: non_empty(ev.text("SUMMARY")).unwrap_or_else(|| "(no title)".into()),
        location: non_empty(ev.text("LOCATION")),
        description: non_empty(ev.text("DESCRIPTION")),
        recurring,
        meet_link,
        start_ms,
        end_ms,
    }
}

fn overlaps(o: &Occurrence, from: i64, to: i64) -> bool {
    if o.end_ms > o.start_ms {
        o.start_ms < to && o.end_ms > from
    } else {
        o.start_ms >= from && o.start_ms < to
    }
}

/// The most occurrences of one series listed in one window.
const MAX_OCCURRENCES: u16 = 5000;
/// The most instances of one series walked to reach a window.
const MAX_STEPS: usize = 200_000;

/// The start of the last whole period of `rule` (from the series start `start_ms`) at least
/// one period before `from_ms`, for rules that repeat by seconds, minutes, hours, days or
/// weeks; `None` when there is nothing to skip.
fn period_start_before(
    rule: &rrule::RRule<rrule::Unvalidated>,
    start_ms: i64,
    from_ms: i64,
    tz: &TimeZone,
) -> Option<i64> {
    use rrule::Frequency;
    let interval = i64::from(rule.get_interval().max(1));
    let exact = |unit_ms: i64| -> Option<i64> {
        let period = unit_ms * interval;
        let k = (from_ms - start_ms) / period - 1;
        (k > 0).then(|| start_ms + k * period)
    };
    let days = |per: i64| -> Option<i64> {
        let period = per * interval;
        let ts = Timestamp::from_millisecond(start_ms).ok()?;
        let wall = ts.to_zoned_datetime(tz.clone()).datetime();
        let k = (from_ms - start_ms) / (period * 86_400_000) - 1;
        if k <= 0 {
            return None;
        }
        let moved = wall
            .checked_add(Span::new().try_days(k * period).ok()?)
            .ok()?;
        let z = moved.to_zoned_datetime(tz.clone()).ok()?;
        Some(z.timestamp().as_millisecond())
    };
    match rule.get_freq() {
        Frequency::Secondly => exact(1000),
        Frequency::Minutely => exact(60_000),
        Frequency::Hourly => exact(3_600_000),
        Frequency::Daily => days(1),
        Frequency::Weekly => days(7),
        _ => None,
    }
}

/// The RRULE with an `UNTIL` rewritten in UTC (what the `rrule` crate requires beside a
/// zoned start; a date or floating `UNTIL` is read in the start's zone).
fn normalized_rrule(rule: &str, start_zone: &TimeZone) -> String {
    rule.split(';')
        .map(|part| {
            let Some((k, v)) = part.split_once('=') else {
                return part.to_owned();
            };
            if !k.eq_ignore_ascii_case("UNTIL") || v.ends_with(['Z', 'z']) {
                return part.to_owned();
            }
            let wall = parse_datetime(v).or_else(|| {
                parse_date(v).map(|d| {
                    d.to_datetime(jiff::civil::Time::new(23, 59, 59, 0).unwrap_or_default())
                })
            });
            match wall.and_then(|w| w.to_zoned_datetime(start_zone.clone()).ok()) {
                Some(z) => format!("UNTIL={}", compact_utc(z.timestamp().as_millisecond())),
                None => part.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// The starts of the series of `master` (DTSTART `start`) from `from_ms` to `to_ms`, by the
/// `rrule` crate in the start's zone (wall-clock times kept across daylight-saving changes),
/// plus RDATEs. `None` when the rule cannot be read.
fn series_starts(
    master: &Component,
    start: &IcalTime,
    from_ms: i64,
    to_ms: i64,
    zones: &Zones,
) -> Option<Vec<i64>> {
    let (tz, name) = start.zone(zones);
    let ctz: chrono_tz::Tz = name
        .as_deref()
        .and_then(|n| n.parse().ok())
        .unwrap_or(chrono_tz::UTC);
    let rtz = rrule::Tz::Tz(ctz);
    let to_chrono = |ms: i64| rtz.timestamp_millis_opt(ms).single();
    let start_ms = start.ms(zones);
    let rule: Option<rrule::RRule<rrule::Unvalidated>> = match master.prop("RRULE") {
        Some(p) => Some(normalized_rrule(&p.value, &tz).parse().ok()?),
        None => None,
    };
    // The crate walks from DTSTART: a rule without COUNT starts from its last period before
    // the window instead (whole periods, in wall-clock days for daily and weekly rules), so
    // a rule begun decades ago costs what one begun last week does.
    let first = match &rule {
        Some(r) if r.get_count().is_none() => {
            period_start_before(r, start_ms, from_ms, &tz).unwrap_or(start_ms)
        }
        _ => start_ms,
    };
    let dtstart = to_chrono(first)?;
    let mut set = match rule {
        Some(r) => match r.build(dtstart) {
            Ok(set) => set,
            // An UNTIL before the (moved) start: the series ended before the window.
            Err(_) if first != start_ms => return Some(Vec::new()),
            Err(_) => return None,
        },
        None => rrule::RRuleSet::new(dtstart),
    };
    for p in master.props_named("RDATE") {
        for t in IcalTime::all_from_prop(p) {
            if let Some(c) = to_chrono(t.ms(zones)) {
                set = set.rdate(c);
            }
        }
    }
    // At most MAX_STEPS instances are walked (a COUNT of millions of seconds ends early).
    let mut starts = Vec::new();
    for (step, d) in (&set).into_iter().enumerate() {
        let ms = d.timestamp_millis();
        if ms >= to_ms || starts.len() >= usize::from(MAX_OCCURRENCES) {
            break;
        }
        if step >= MAX_STEPS {
            tracing::warn!(
                "a recurrence rule needs more than {MAX_STEPS} steps to reach the window; later occurrences are not listed"
            );
            break;
        }
        if ms >= from_ms {
            starts.push(ms);
        }
    }
    if master.prop("RRULE").is_none() {
        // An RDATE-only series also occurs at its DTSTART.
        starts.push(start.ms(zones));
    }
    starts.sort_unstable();
    starts.dedup();
    Some(starts)
}

/// Every occurrence of the event in `cal` overlapping `[from_ms, to_ms)`, soonest first.
pub fn expand(cal: &Component, from_ms: i64, to_ms: i64, zones: &Zones) -> Vec<Occurrence> {
    let zones = zones.with_object(cal);
    let (master, overrides) = parts(cal);
    let mut out = Vec::new();
    let Some(master) = master else {
        // Only occurrences of a series kept elsewhere (an invitation to some of them): each
        // is an event of its own, known by its occurrence key.
        for ov in overrides {
            let uid = ov.text("UID").unwrap_or_default();
            let key = ov
                .prop("RECURRENCE-ID")
                .and_then(IcalTime::from_prop)
                .map(|r| r.key(&zones));
            if let Some((s, l)) = start_and_length(ov, &zones) {
                let o = occurrence(ov, &uid, key, &s, l, true, &zones);
                if overlaps(&o, from_ms, to_ms) {
                    out.push(o);
                }
            }
        }
        out.sort_by_key(|o| o.start_ms);
        return out;
    };
    let uid = master.text("UID").unwrap_or_default();
    let Some((start, length)) = start_and_length(master, &zones) else {
        return out;
    };
    if !is_recurring(master) || master.prop("RECURRENCE-ID").is_some() {
        let o = occurrence(master, &uid, None, &start, length, false, &zones);
        if overlaps(&o, from_ms, to_ms) {
            out.push(o);
        }
        return out;
    }
    let excluded: Vec<String> = master
        .props_named("EXDATE")
        .flat_map(IcalTime::all_from_prop)
        .map(|t| t.key(&zones))
        .collect();
    let overridden: Vec<(String, &Component)> = overrides
        .iter()
        .filter_map(|o| {
            let rid = IcalTime::from_prop(o.prop("RECURRENCE-ID")?)?;
            Some((rid.key(&zones), *o))
        })
        .collect();
    let reach = match length {
        Length::Ms(ms) => ms,
        Length::Days(n) => i64::from(n) * 86_400_000 + 86_400_000,
    };
    let starts = series_starts(master, &start, from_ms - reach, to_ms, &zones).unwrap_or_else(|| {
        tracing::warn!(uid = %uid, "a recurrence rule could not be read; only the first occurrence is listed");
        vec![start.ms(&zones)]
    });
    for s in starts {
        let at = start.same_form(s, &zones);
        let key = at.key(&zones);
        if excluded.contains(&key) || overridden.iter().any(|(k, _)| *k == key) {
            continue;
        }
        let o = occurrence(master, &uid, Some(key), &at, length, true, &zones);
        if overlaps(&o, from_ms, to_ms) {
            out.push(o);
        }
    }
    for (key, ov) in overridden {
        if excluded.contains(&key) {
            continue;
        }
        if let Some((s, l)) = start_and_length(ov, &zones) {
            let o = occurrence(ov, &uid, Some(key), &s, l, true, &zones);
            if overlaps(&o, from_ms, to_ms) {
                out.push(o);
            }
        }
    }
    out.sort_by_key(|o| o.start_ms);
    out
}

/// The span `[first start, last end]` an object can occur in (the last end is `i64::MAX`
/// for a series without an end we compute), for the local calendar's window index.
pub fn span(cal: &Component, zones: &Zones) -> (i64, i64) {
    let zones = zones.with_object(cal);
    let (master, overrides) = parts(cal);
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    for ev in master.iter().chain(overrides.iter()) {
        if let Some((s, l)) = start_and_length(ev, &zones) {
            let o = occurrence(ev, "", None, &s, l, false, &zones);
            lo = lo.min(o.start_ms);
            hi = hi.max(o.end_ms.max(o.start_ms));
        }
    }
    if master.is_some_and(is_recurring) {
        hi = i64::MAX;
    }
    if lo == i64::MAX {
        (0, i64::MAX)
    } else {
        (lo, hi)
    }
}

#[cfg(test)]
mod tests;
