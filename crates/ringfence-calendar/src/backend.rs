//! The calendar tools over any store of iCalendar objects (the local calendar, a CalDAV
//! server): listing expands each object within the window; an edit reads the object, changes
//! it and writes it back only if nobody changed it in between (its ETag, and the version the
//! user last saw).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::tools::{
    CalendarBackend, CalendarError, CalendarEvent, CalendarResult, Deleted, EventPatch, NewEvent,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ringfence_core::BoxFuture;
use ringfence_core::time::TimeZone;

use crate::event::{Occurrence, Zones, expand, parts};
use crate::ical::{self, Component};
use crate::object::{apply_patch, new_object, remove_occurrence};

/// A calendar of a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CalendarInfo {
    pub id: String,
    pub name: String,
}

/// An object as stored: where, its ETag, its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub href: String,
    pub etag: Option<String>,
    pub ics: String,
}

/// One user's calendars of iCalendar objects.
pub trait ObjectStore: Send + Sync {
    /// What the tools call this provider ("Local", "CalDAV").
    fn provider(&self) -> &'static str;
    fn calendars(&self) -> BoxFuture<'static, CalendarResult<Vec<CalendarInfo>>>;
    /// Objects that may occur in `[from_ms, to_ms)` (more is fine: they are expanded).
    fn query(
        &self,
        cal: &CalendarInfo,
        from_ms: i64,
        to_ms: i64,
    ) -> BoxFuture<'static, CalendarResult<Vec<Stored>>>;
    fn get(
        &self,
        cal: &CalendarInfo,
        href: &str,
    ) -> BoxFuture<'static, CalendarResult<Option<Stored>>>;
    /// Stores a new object named after `uid`; `span` is when it can occur.
    fn create(
        &self,
        cal: &CalendarInfo,
        uid: &str,
        ics: String,
        span: (i64, i64),
    ) -> BoxFuture<'static, CalendarResult<Stored>>;
    /// Replaces the object if its ETag is still `etag` (else [`CalendarError::Conflict`]).
    fn replace(
        &self,
        cal: &CalendarInfo,
        href: &str,
        etag: Option<String>,
        ics: String,
        span: (i64, i64),
    ) -> BoxFuture<'static, CalendarResult<Stored>>;
    fn remove(
        &self,
        cal: &CalendarInfo,
        href: &str,
        etag: Option<String>,
    ) -> BoxFuture<'static, CalendarResult<()>>;
}

/// Finds each user's store and zone (the binary's configuration).
pub trait UserStores: Send + Sync + std::fmt::Debug {
    fn store(&self, user: &str) -> CalendarResult<Arc<dyn ObjectStore>>;
    fn zone(&self, user: &str) -> (String, TimeZone);
}

/// The most ETags remembered (as seen by users) before the oldest are forgotten.
const MAX_SEEN: usize = 50_000;

/// (user, calendar, object) → the ETag the user last saw: an edit of an object changed since
/// is a conflict. Shared by every provider that has ETags.
/// One user's (calendar, object) → ETag.
type UserSeen = HashMap<(String, String), String>;

#[derive(Debug, Default)]
pub struct SeenEtags {
    /// user → (calendar, object) → ETag; each user's capped on their own.
    map: Mutex<HashMap<String, UserSeen>>,
}

impl SeenEtags {
    /// Remembers what the user was shown (`None`: forget, the object is gone). A user who
    /// saw more than [`MAX_SEEN`] objects starts over (their own only).
    pub fn record(&self, user: &str, cal: &str, href: &str, etag: Option<&str>) {
        let mut all = self.map.lock().unwrap_or_else(|e| e.into_inner());
        let m = all.entry(user.to_owned()).or_default();
        let key = (cal.to_owned(), href.to_owned());
        match etag {
            Some(e) => {
                if m.len() >= MAX_SEEN && !m.contains_key(&key) {
                    m.clear();
                }
                m.insert(key, e.to_owned());
            }
            None => {
                m.remove(&key);
            }
        }
    }

    /// The ETag the user last saw of the object, if any.
    pub fn get(&self, user: &str, cal: &str, href: &str) -> Option<String> {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(user)?
            .get(&(cal.to_owned(), href.to_owned()))
            .cloned()
    }

    /// Whether the object changed since the user last saw it (unknown: no).
    pub fn changed(&self, user: &str, cal: &str, href: &str, etag: Option<&str>) -> bool {
        match (self.get(user, cal, href), etag) {
            (Some(seen), Some(now)) => seen != now,
            _ => false,
        }
    }
}

/// [`CalendarBackend`] over the users' object stores.
#[derive(Debug)]
pub struct ObjectCalendar {
    stores: Arc<dyn UserStores>,
    /// (user, calendar, href) → the ETag the user last saw: an edit of an object changed
    /// since is a conflict.
    seen: Arc<SeenEtags>,
    now: fn() -> i64,
}

impl ObjectCalendar {
    pub fn new(stores: Arc<dyn UserStores>) -> ObjectCalendar {
        ObjectCalendar {
            stores,
            seen: Arc::default(),
            now: ringfence_core::time::now_ms,
        }
    }
}

/// An event ID: the calendar, the object (its name within the calendar when it is there)
/// and, for one occurrence, its key; base64url.
pub fn event_id(calendar: &str, href: &str, rid: Option<&str>) -> String {
    let href = match href.strip_prefix(calendar) {
        Some(rest) if !rest.is_empty() && calendar.ends_with('/') => format!("./{rest}"),
        _ => href.to_owned(),
    };
    URL_SAFE_NO_PAD.encode(format!("{calendar}\u{1f}{href}\u{1f}{}", rid.unwrap_or("")))
}

/// The parts of an event ID.
pub fn parse_event_id(id: &str) -> Option<(String, String, Option<String>)> {
    let raw = URL_SAFE_NO_PAD.decode(id.trim()).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let mut it = text.split('\u{1f}');
    let (cal, href, rid) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || cal.is_empty() || href.is_empty() {
        return None;
    }
    let href = match href.strip_prefix("./") {
        Some(rest) => format!("{cal}{rest}"),
        None => href.to_owned(),
    };
    Some((
        cal.to_owned(),
        href,
        (!rid.is_empty()).then(|| rid.to_owned()),
    ))
}

pub(crate) fn not_found(id: &str) -> CalendarError {
    CalendarError::NotFound(format!(
        "no event with ID {id}; list_calendar_events gives the IDs of the events there are"
    ))
}

fn conflict() -> CalendarError {
    CalendarError::Conflict(
        "the event was changed by someone else since you last saw it (in another app, or by another client); nothing was overwritten. List the events again to see the change, then make yours".into(),
    )
}

/// The VCALENDAR of a stored object.
fn calendar_of(s: &Stored) -> CalendarResult<Component> {
    ical::parse(&s.ics)
        .ok()
        .and_then(|mut cs| cs.drain(..).find(|c| c.name == "VCALENDAR"))
        .ok_or_else(|| {
            CalendarError::Failed(format!("the event {} is not readable iCalendar", s.href))
        })
}

fn to_event(o: Occurrence, cal: &CalendarInfo, href: &str) -> CalendarEvent {
    CalendarEvent {
        id: event_id(&cal.id, href, o.rid.as_deref()),
        calendar_id: cal.id.clone(),
        calendar_name: cal.name.clone(),
        title: o.title,
        start: o.start,
        end: o.end,
        zone: o.zone,
        location: o.location,
        description: o.description,
        recurring: o.recurring,
        meet_link: o.meet_link,
    }
}

/// The calendar `wanted` names (its ID or, ignoring case, its name).
pub(crate) fn pick(cals: &[CalendarInfo], wanted: &str) -> CalendarResult<CalendarInfo> {
    cals.iter()
        .find(|c| c.id == wanted)
        .or_else(|| cals.iter().find(|c| c.name.eq_ignore_ascii_case(wanted)))
        .cloned()
        .ok_or_else(|| {
            let names: Vec<String> = cals
                .iter()
                .map(|c| format!("{} ({})", c.name, c.id))
                .collect();
            CalendarError::NotFound(format!(
                "no calendar {wanted:?}; the calendars are: {}",
                names.join(", ")
            ))
        })
}

/// The occurrence of `cal` an edit produced: the one `key` names, or the series' first.
fn edited_occurrence(cal: &Component, key: Option<&str>, zones: &Zones) -> Option<Occurrence> {
    let zones = zones.with_object(cal);
    let (master, overrides) = parts(cal);
    let entry = match key {
        None => master?,
        Some(k) => overrides.into_iter().find(|o| {
            o.prop("RECURRENCE-ID")
                .and_then(crate::event::IcalTime::from_prop)
                .is_some_and(|r| r.key(&zones) == k)
        })?,
    };
    let (start, _) = crate::event::start_and_length(entry, &zones)?;
    let at = start.ms(&zones);
    expand(cal, at - 1, at + 1, &zones)
        .into_iter()
        .find(|o| key.is_none_or(|k| o.rid.as_deref() == Some(k)))
}

/// [`SeenEtags`] for one user.
struct Seen {
    all: Arc<SeenEtags>,
    user: String,
}

impl Seen {
    fn record(&self, cal: &str, href: &str, etag: Option<&str>) {
        self.all.record(&self.user, cal, href, etag);
    }

    fn changed(&self, cal: &str, href: &str, etag: Option<&str>) -> bool {
        self.all.changed(&self.user, cal, href, etag)
    }
}

impl ObjectCalendar {
    fn seen(&self, user: &str) -> Seen {
        Seen {
            all: self.seen.clone(),
            user: user.to_owned(),
        }
    }

    /// The user's store, zones, calendars, and the object an ID names (checked against what
    /// the user saw).
    #[allow(clippy::type_complexity)]
    fn open(
        &self,
        user: &str,
        id: String,
    ) -> BoxFuture<
        'static,
        CalendarResult<(
            Arc<dyn ObjectStore>,
            Zones,
            CalendarInfo,
            Stored,
            Component,
            Option<String>,
        )>,
    > {
        let store = self.stores.store(user);
        let (zname, zone) = self.stores.zone(user);
        let seen = self.seen(user);
        Box::pin(async move {
            let store = store?;
            let (cal_id, href, key) = parse_event_id(&id).ok_or_else(|| not_found(&id))?;
            let cals = store.calendars().await?;
            let cal = cals
                .into_iter()
                .find(|c| c.id == cal_id)
                .ok_or_else(|| not_found(&id))?;
            let stored = store
                .get(&cal, &href)
                .await?
                .ok_or_else(|| not_found(&id))?;
            if seen.changed(&cal.id, &stored.href, stored.etag.as_deref()) {
                // Not recorded as seen: a blind retry is refused too; listing again shows
                // the change, and then the edit goes through.
                return Err(conflict());
            }
            let parsed = calendar_of(&stored)?;
            Ok((store, Zones::new(&zname, zone), cal, stored, parsed, key))
        })
    }
}

impl CalendarBackend for ObjectCalendar {
    fn zone(&self, user: &str) -> (String, TimeZone) {
        self.stores.zone(user)
    }

    fn list(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        calendar: Option<String>,
    ) -> BoxFuture<'static, CalendarResult<Vec<CalendarEvent>>> {
        let store = self.stores.store(user);
        let (zname, zone) = self.stores.zone(user);
        let seen = self.seen(user);
        Box::pin(async move {
            let store = store?;
            let zones = Zones::new(&zname, zone);
            let mut cals = store.calendars().await?;
            if let Some(c) = calendar {
                cals = vec![pick(&cals, &c)?];
            }
            let mut events = Vec::new();
            for cal in &cals {
                for s in store.query(cal, from_ms, to_ms).await? {
                    let Ok(parsed) = calendar_of(&s) else {
                        tracing::warn!(href = %s.href, "an unreadable calendar object is skipped");
                        continue;
                    };
                    seen.record(&cal.id, &s.href, s.etag.as_deref());
                    for o in expand(&parsed, from_ms, to_ms, &zones) {
                        events.push((o.start_ms, to_event(o, cal, &s.href)));
                    }
                }
            }
            events.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.title.cmp(&b.1.title)));
            Ok(events.into_iter().map(|(_, e)| e).collect())
        })
    }

    fn create(
        &self,
        user: &str,
        event: NewEvent,
    ) -> BoxFuture<'static, CalendarResult<CalendarEvent>> {
        let store = self.stores.store(user);
        let (zname, zone) = self.stores.zone(user);
        let seen = self.seen(user);
        let now = (self.now)();
        Box::pin(async move {
            let store = store?;
            if event.add_meet_link {
                return Err(CalendarError::Unsupported(format!(
                    "{} calendars cannot make Google Meet links, so the event was not created: leave addMeetLink out (a meeting link can go in location); Meet links need Google Calendar: the operator connects it with [calendar] provider = \"google\" and an OAuth client (client_id and client_secret_env), then runs `ringfence calendar connect google` to sign the user in",
                    store.provider()
                )));
            }
            let zones = Zones::new(&zname, zone);
            let cals = store.calendars().await?;
            let cal = cals.first().cloned().ok_or_else(|| {
                CalendarError::NotFound("there is no calendar to add events to".into())
            })?;
            let uid = format!("{}@ringfence", uuid::Uuid::new_v4());
            let obj = new_object(&uid, &event, &zones, now);
            let span = crate::event::span(&obj, &zones);
            let stored = store.create(&cal, &uid, obj.to_ics(), span).await?;
            seen.record(&cal.id, &stored.href, stored.etag.as_deref());
            let o = edited_occurrence(&obj, None, &zones)
                .ok_or_else(|| CalendarError::Failed("the new event cannot be read back".into()))?;
            Ok(to_event(o, &cal, &stored.href))
        })
    }

    fn update(
        &self,
        user: &str,
        id: String,
        patch: EventPatch,
    ) -> BoxFuture<'static, CalendarResult<CalendarEvent>> {
        let opened = self.open(user, id);
        let seen = self.seen(user);
        let now = (self.now)();
        Box::pin(async move {
            let (store, zones, cal, stored, mut obj, key) = opened.await?;
            apply_patch(&mut obj, key.as_deref(), &patch, &zones, now)?;
            let span = crate::event::span(&obj, &zones);
            let written = store
                .replace(&cal, &stored.href, stored.etag.clone(), obj.to_ics(), span)
                .await?;
            seen.record(&cal.id, &written.href, written.etag.as_deref());
            let o = edited_occurrence(&obj, key.as_deref(), &zones).ok_or_else(|| {
                CalendarError::Failed("the changed event cannot be read back".into())
            })?;
            Ok(to_event(o, &cal, &written.href))
        })
    }

    fn delete(&self, user: &str, id: String) -> BoxFuture<'static, CalendarResult<Deleted>> {
        let opened = self.open(user, id);
        let seen = self.seen(user);
        let now = (self.now)();
        Box::pin(async move {
            let (store, zones, cal, stored, mut obj, key) = opened.await?;
            let title = edited_occurrence(&obj, key.as_deref(), &zones)
                .map(|o| o.title)
                .or_else(|| parts(&obj).0.and_then(|m| m.text("SUMMARY")))
                .unwrap_or_else(|| "(no title)".into());
            let (master, _) = parts(&obj);
            // One occurrence goes from a series, or from the occurrences kept without their
            // series (an invitation to some of them) — unless it was the last one.
            let occurrence_only = master
                .is_none_or(|m| m.prop("RRULE").is_some() || m.prop("RDATE").is_some())
                && obj.children.iter().filter(|c| c.name == "VEVENT").count()
                    > usize::from(master.is_none());
            match key {
                Some(k) if occurrence_only => {
                    remove_occurrence(&mut obj, &k, &zones, now)?;
                    let span = crate::event::span(&obj, &zones);
                    let written = store
                        .replace(&cal, &stored.href, stored.etag.clone(), obj.to_ics(), span)
                        .await?;
                    seen.record(&cal.id, &written.href, written.etag.as_deref());
                    Ok(Deleted {
                        title,
                        calendar_name: cal.name,
                        occurrence_only: true,
                    })
                }
                _ => {
                    store
                        .remove(&cal, &stored.href, stored.etag.clone())
                        .await?;
                    seen.record(&cal.id, &stored.href, None);
                    Ok(Deleted {
                        title,
                        calendar_name: cal.name,
                        occurrence_only: false,
                    })
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_ids_round_trip_and_junk_is_no_id() {
        for (cal, href, rid) in [
            ("personal", "abc@ringfence", None),
            (
                "/alice/work/",
                "/alice/work/e1.ics",
                Some("20260302T140000Z"),
            ),
            ("/alice/work/", "/elsewhere/e2.ics", None),
        ] {
            let id = event_id(cal, href, rid);
            assert_eq!(
                parse_event_id(&id),
                Some((cal.into(), href.into(), rid.map(str::to_owned)))
            );
        }
        assert!(event_id("/alice/work/", "/alice/work/e1.ics", None).len() < 40);
        for junk in ["abc123", "", "!!", &URL_SAFE_NO_PAD.encode("a\u{1f}b")] {
            assert_eq!(parse_event_id(junk), None, "{junk}");
        }
    }
}
