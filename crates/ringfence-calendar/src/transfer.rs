//! Moving events in and out of the local calendar as iCalendar (RFC 5545) files: export
//! writes one `VCALENDAR` with every event (and the time zones they name); import splits a
//! file into one object per UID (overrides kept with their series) and stores the new ones.

use crate::event::{Zones, span};
use crate::ical::{self, Component, Property};
use crate::object::PRODID;

/// One file holding `objects` (each a stored `VCALENDAR`).
pub fn export(objects: &[String]) -> String {
    let mut out = Component::new("VCALENDAR");
    out.push(Property::new("VERSION", "2.0"));
    out.push(Property::new("PRODID", PRODID));
    let mut zones_seen: Vec<String> = Vec::new();
    for text in objects {
        let Ok(parsed) = ical::parse(text) else {
            continue;
        };
        for cal in parsed.into_iter().filter(|c| c.name == "VCALENDAR") {
            for c in cal.children {
                if c.name == "VTIMEZONE" {
                    let id = c.text("TZID").unwrap_or_default();
                    if zones_seen.contains(&id) {
                        continue;
                    }
                    zones_seen.push(id);
                }
                out.children.push(c);
            }
        }
    }
    out.to_ics()
}

/// Why an iCalendar file cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error(transparent)]
    Parse(#[from] ical::ParseError),
    #[error("no VCALENDAR in the file")]
    NoCalendar,
    #[error("an event without UID (every VEVENT needs one)")]
    NoUid,
}

/// An object to store: its UID, text and span.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportObject {
    pub uid: String,
    pub ics: String,
    pub span: (i64, i64),
}

/// The objects of an iCalendar file: one per UID, with the `VTIMEZONE`s it names.
pub fn split(text: &str, zones: &Zones) -> Result<Vec<ImportObject>, ImportError> {
    let parsed = ical::parse(text).map_err(ImportError::Parse)?;
    let cals: Vec<Component> = parsed
        .into_iter()
        .filter(|c| c.name == "VCALENDAR")
        .collect();
    if cals.is_empty() {
        return Err(ImportError::NoCalendar);
    }
    let tz_defs: Vec<&Component> = cals
        .iter()
        .flat_map(|c| c.children.iter())
        .filter(|c| c.name == "VTIMEZONE")
        .collect();
    let mut groups: Vec<(String, Vec<Component>)> = Vec::new();
    for ev in cals
        .iter()
        .flat_map(|c| c.children.iter())
        .filter(|c| c.name == "VEVENT")
    {
        let uid = ev
            .text("UID")
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .ok_or(ImportError::NoUid)?;
        match groups.iter_mut().find(|(u, _)| *u == uid) {
            Some((_, evs)) => evs.push(ev.clone()),
            None => groups.push((uid, vec![ev.clone()])),
        }
    }
    let mut out = Vec::new();
    for (uid, evs) in groups {
        let mut cal = Component::new("VCALENDAR");
        cal.push(Property::new("VERSION", "2.0"));
        cal.push(Property::new("PRODID", PRODID));
        let named: Vec<String> = evs
            .iter()
            .flat_map(|e| e.props.iter())
            .filter_map(|p| p.param("TZID").map(str::to_owned))
            .collect();
        for tz in &tz_defs {
            if tz.text("TZID").is_some_and(|id| named.contains(&id)) {
                cal.children.push((*tz).clone());
            }
        }
        cal.children.extend(evs);
        let span = span(&cal, zones);
        out.push(ImportObject {
            uid,
            ics: cal.to_ics(),
            span,
        });
    }
    Ok(out)
}
