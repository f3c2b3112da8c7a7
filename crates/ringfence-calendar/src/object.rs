//! Writing objects: a new event, a change to a whole event or to one occurrence, an
//! occurrence removed. Everything not touched (alarms, attendees, other properties) stays as
//! it was; each change bumps `SEQUENCE` and stamps `DTSTAMP` and `LAST-MODIFIED`.

use jiff::Timestamp;
use jiff::tz::TimeZone;

use crate::event::{IcalTime, Length, Zones, compact_utc, expand, parts, start_and_length};
use crate::ical::{Component, Property};
use crate::tools::{CalendarError, EventPatch, GivenTime, NewEvent};

pub const PRODID: &str = "-//ringfence//calendar//EN";

/// How a time the model gave is written: as wall-clock time in the user's zone when it was
/// given with that zone's offset then (so a later move, or a series, keeps the wall-clock
/// time across daylight-saving changes), else in UTC (another zone's offset names no zone).
pub fn form_for(g: GivenTime, zones: &Zones) -> IcalTime {
    let ts = Timestamp::from_millisecond(g.ms).unwrap_or(Timestamp::UNIX_EPOCH);
    if zones.user.to_offset(ts).seconds() == g.offset_secs && zones.user != TimeZone::UTC {
        IcalTime::Zoned(
            ts.to_zoned_datetime(zones.user.clone()).datetime(),
            zones.user_name.clone(),
        )
    } else {
        IcalTime::Utc(ts)
    }
}

fn stamp(ev: &mut Component, now_ms: i64) {
    ev.set(
        "DTSTAMP",
        Some(Property::new("DTSTAMP", compact_utc(now_ms))),
    );
    ev.set(
        "LAST-MODIFIED",
        Some(Property::new("LAST-MODIFIED", compact_utc(now_ms))),
    );
}

fn bump(ev: &mut Component, now_ms: i64) {
    let seq = ev
        .prop("SEQUENCE")
        .and_then(|p| p.value.trim().parse::<i64>().ok())
        .unwrap_or(0);
    ev.set(
        "SEQUENCE",
        Some(Property::new("SEQUENCE", (seq + 1).to_string())),
    );
    stamp(ev, now_ms);
}

fn set_text(ev: &mut Component, name: &str, value: Option<&str>) {
    match value {
        Some(v) if !v.is_empty() => ev.set(name, Some(Property::text(name, v))),
        Some(_) => ev.set(name, None),
        None => {}
    }
}

/// A new object holding one event.
pub fn new_object(uid: &str, e: &NewEvent, zones: &Zones, now_ms: i64) -> Component {
    let mut ev = Component::new("VEVENT");
    ev.push(Property::new("UID", uid));
    stamp(&mut ev, now_ms);
    ev.push(Property::new("CREATED", compact_utc(now_ms)));
    ev.push(Property::new("SEQUENCE", "0"));
    let start = form_for(e.start, zones);
    ev.push(start.to_prop("DTSTART"));
    ev.push(start.same_form(e.end.ms, zones).to_prop("DTEND"));
    ev.push(Property::text("SUMMARY", &e.title));
    if let Some(d) = &e.description {
        ev.push(Property::text("DESCRIPTION", d));
    }
    if let Some(l) = &e.location {
        ev.push(Property::text("LOCATION", l));
    }
    let mut cal = Component::new("VCALENDAR");
    cal.push(Property::new("VERSION", "2.0"));
    cal.push(Property::new("PRODID", PRODID));
    cal.children.push(ev);
    cal
}

/// Index of the component an edit of occurrence `key` (or of the whole event) applies to:
/// the override for it, made from the master if there is none yet.
fn target(cal: &mut Component, key: Option<&str>, zones: &Zones) -> Result<usize, CalendarError> {
    let zones = zones.with_object(cal);
    let master_at = cal
        .children
        .iter()
        .position(|c| c.name == "VEVENT" && c.prop("RECURRENCE-ID").is_none());
    let Some(key) = key else {
        return master_at
            .ok_or_else(|| CalendarError::NotFound("the event has no main entry".into()));
    };
    if let Some(i) = cal.children.iter().position(|c| {
        c.name == "VEVENT"
            && c.prop("RECURRENCE-ID")
                .and_then(IcalTime::from_prop)
                .is_some_and(|r| r.key(&zones) == key)
    }) {
        return Ok(i);
    }
    let m =
        master_at.ok_or_else(|| CalendarError::NotFound("the series has no main entry".into()))?;
    let (start, length) = start_and_length(&cal.children[m], &zones)
        .ok_or_else(|| CalendarError::Failed("the event has no readable start".into()))?;
    // Is there such an occurrence? Look around its instant.
    let at = occurrence_instant(key, &start, &zones)
        .ok_or_else(|| CalendarError::NotFound(format!("no occurrence {key} in this series")))?;
    let found = expand(cal, at - 1, at + 1, &zones)
        .into_iter()
        .any(|o| o.rid.as_deref() == Some(key));
    if !found {
        return Err(CalendarError::NotFound(format!(
            "the series has no occurrence at {key} (any more); list the events again"
        )));
    }
    let rid = start.same_form(at, &zones);
    let master = &cal.children[m];
    let mut ov = Component::new("VEVENT");
    for p in &master.props {
        if !matches!(
            p.name.as_str(),
            "RRULE" | "RDATE" | "EXDATE" | "EXRULE" | "DTSTART" | "DTEND" | "DURATION"
        ) {
            ov.props.push(p.clone());
        }
    }
    ov.children = master.children.clone();
    ov.push(rid.to_prop("RECURRENCE-ID"));
    ov.push(rid.to_prop("DTSTART"));
    let end = match length {
        Length::Ms(ms) => rid.same_form(at + ms, &zones),
        Length::Days(n) => match &rid {
            IcalTime::Date(d) => {
                IcalTime::Date(d.checked_add(jiff::Span::new().days(n)).unwrap_or(*d))
            }
            other => other.same_form(at + i64::from(n) * 86_400_000, &zones),
        },
    };
    ov.push(end.to_prop("DTEND"));
    cal.children.push(ov);
    Ok(cal.children.len() - 1)
}

/// The instant of occurrence `key` (a UTC key, or a date for all-day series).
fn occurrence_instant(key: &str, start: &IcalTime, zones: &Zones) -> Option<i64> {
    let probe = crate::ical::Property::new("X", key);
    let t = IcalTime::from_prop(&probe)?;
    match (start, &t) {
        (IcalTime::Date(_), IcalTime::Date(_)) | (_, IcalTime::Utc(_)) => Some(t.ms(zones)),
        _ => None,
    }
}

/// Applies `patch` to the whole event (`key` `None`) or to one occurrence. Returns the
/// occurrence key the changed entry now answers to (for a series: `None`).
pub fn apply_patch(
    cal: &mut Component,
    key: Option<&str>,
    patch: &EventPatch,
    zones: &Zones,
    now_ms: i64,
) -> Result<(), CalendarError> {
    let i = target(cal, key, zones)?;
    let zones = zones.with_object(cal);
    let ev = &mut cal.children[i];
    if let Some(t) = &patch.title {
        ev.set("SUMMARY", Some(Property::text("SUMMARY", t)));
    }
    set_text(ev, "DESCRIPTION", patch.description.as_deref());
    set_text(ev, "LOCATION", patch.location.as_deref());
    if patch.start.is_some() || patch.end.is_some() {
        let (start, length) = start_and_length(ev, &zones)
            .ok_or_else(|| CalendarError::Failed("the event has no readable start".into()))?;
        let old_start = start.ms(&zones);
        let old_len = match length {
            Length::Ms(ms) => ms,
            Length::Days(n) => i64::from(n) * 86_400_000,
        };
        let new_start = patch.start.map(|g| g.ms).unwrap_or(old_start);
        let new_end = patch.end.map(|g| g.ms).unwrap_or(new_start + old_len);
        if new_end - new_start > crate::tools::MAX_EVENT_MS {
            return Err(CalendarError::Invalid(
                "the event would last more than 366 days; check startDateTime and endDateTime"
                    .into(),
            ));
        }
        if new_end <= new_start {
            return Err(CalendarError::Invalid(format!(
                "the event would end ({}) before it starts ({}); give both startDateTime and endDateTime",
                ringfence_core::time::format_iso_ms(new_end),
                ringfence_core::time::format_iso_ms(new_start)
            )));
        }
        // Keep the way the start is written (its zone) unless it was a date (an all-day
        // event given times becomes a timed one).
        let form = match (&start, patch.start) {
            (IcalTime::Date(_), Some(g)) => form_for(g, &zones),
            (IcalTime::Date(_), None) => form_for(
                GivenTime {
                    ms: new_start,
                    offset_secs: zones
                        .user
                        .to_offset(Timestamp::from_millisecond(new_start).unwrap_or_default())
                        .seconds(),
                },
                &zones,
            ),
            (s, _) => s.clone(),
        };
        let s = form.same_form(new_start, &zones);
        let e = s.same_form(new_end, &zones);
        ev.set("DURATION", None);
        ev.set("DTSTART", Some(s.to_prop("DTSTART")));
        ev.set("DTEND", Some(e.to_prop("DTEND")));
    }
    bump(ev, now_ms);
    Ok(())
}

/// Removes occurrence `key` of a series: an EXDATE on the master, and its override gone.
pub fn remove_occurrence(
    cal: &mut Component,
    key: &str,
    zones: &Zones,
    now_ms: i64,
) -> Result<(), CalendarError> {
    let zones = zones.with_object(cal);
    let (master, _) = parts(cal);
    let Some(master) = master else {
        // Occurrences without their series: this one goes, the others stay.
        let before = cal.children.len();
        cal.children.retain(|c| {
            c.prop("RECURRENCE-ID")
                .and_then(IcalTime::from_prop)
                .is_none_or(|r| r.key(&zones) != key)
        });
        if cal.children.len() == before {
            return Err(CalendarError::NotFound(format!(
                "the event has no occurrence at {key} (any more); list the events again"
            )));
        }
        return Ok(());
    };
    let (start, _) = start_and_length(master, &zones)
        .ok_or_else(|| CalendarError::Failed("the event has no readable start".into()))?;
    let at = occurrence_instant(key, &start, &zones);
    let exists = at.is_some_and(|at| {
        expand(cal, at - 1, at + 1, &zones)
            .iter()
            .any(|o| o.rid.as_deref() == Some(key))
    }) || cal.children.iter().any(|c| {
        c.prop("RECURRENCE-ID")
            .and_then(IcalTime::from_prop)
            .is_some_and(|r| r.key(&zones) == key)
    });
    let (Some(at), true) = (at, exists) else {
        return Err(CalendarError::NotFound(format!(
            "the series has no occurrence at {key} (any more); list the events again"
        )));
    };
    cal.children.retain(|c| {
        c.prop("RECURRENCE-ID")
            .and_then(IcalTime::from_prop)
            .is_none_or(|r| r.key(&zones) != key)
    });
    let exdate = start.same_form(at, &zones).to_prop("EXDATE");
    if let Some(m) = cal
        .children
        .iter_mut()
        .find(|c| c.name == "VEVENT" && c.prop("RECURRENCE-ID").is_none())
    {
        m.push(exdate);
        bump(m, now_ms);
    }
    Ok(())
}
