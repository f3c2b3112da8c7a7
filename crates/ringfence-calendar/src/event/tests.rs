//! Times, recurrence and edits on fixed instants (never the machine's clock).

use super::*;
use crate::ical::parse;
use crate::object::{apply_patch, form_for, new_object, remove_occurrence};
use crate::tools::{EventPatch, GivenTime, NewEvent};

fn ny() -> Zones {
    Zones::new(
        "America/New_York",
        TimeZone::get("America/New_York").unwrap(),
    )
}

fn ms(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_millisecond()
}

fn cal(events: &str) -> Component {
    let text =
        format!("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:test\r\n{events}END:VCALENDAR\r\n")
            .replace('\n', "\r\n")
            .replace("\r\r\n", "\r\n");
    parse(&text).unwrap().remove(0)
}

/// A weekly meeting at 09:00 New York time from Monday 2026-03-02 (daylight saving starts
/// on 2026-03-08): the 9th is excluded, the 16th moved to 10:00 and renamed.
const SERIES: &str = "BEGIN:VEVENT
UID:weekly@test
DTSTART;TZID=America/New_York:20260302T090000
DTEND;TZID=America/New_York:20260302T093000
RRULE:FREQ=WEEKLY;COUNT=6
EXDATE;TZID=America/New_York:20260309T090000
SUMMARY:Standup
END:VEVENT
BEGIN:VEVENT
UID:weekly@test
RECURRENCE-ID;TZID=America/New_York:20260316T090000
DTSTART;TZID=America/New_York:20260316T100000
DTEND;TZID=America/New_York:20260316T103000
SUMMARY:Standup (moved)
END:VEVENT
";

fn starts(os: &[Occurrence]) -> Vec<(String, String)> {
    os.iter()
        .map(|o| {
            (
                ringfence_core::time::format_iso_ms(o.start_ms),
                o.title.clone(),
            )
        })
        .collect()
}

#[test]
fn a_weekly_series_keeps_its_wall_clock_across_dst_with_exceptions_and_overrides() {
    let c = cal(SERIES);
    let os = expand(
        &c,
        ms("2026-03-01T00:00:00Z"),
        ms("2026-04-01T00:00:00Z"),
        &ny(),
    );
    assert_eq!(
        starts(&os),
        [
            // 09:00 EST is 14:00 UTC; after the change 09:00 EDT is 13:00 UTC.
            ("2026-03-02T14:00:00.000Z".into(), "Standup".into()),
            ("2026-03-16T14:00:00.000Z".into(), "Standup (moved)".into()),
            ("2026-03-23T13:00:00.000Z".into(), "Standup".into()),
            ("2026-03-30T13:00:00.000Z".into(), "Standup".into()),
        ]
    );
    assert!(os.iter().all(|o| o.recurring));
    assert_eq!(os[0].zone.as_deref(), Some("America/New_York"));
    assert_eq!(os[0].end_ms - os[0].start_ms, 30 * 60_000);
    // Each occurrence has its own key: the UTC instant it was due at.
    assert_eq!(os[0].rid.as_deref(), Some("20260302T140000Z"));
    assert_eq!(
        os[1].rid.as_deref(),
        Some("20260316T130000Z"),
        "the override answers to its original time"
    );
    // A window holding only part of an occurrence still lists it.
    let mid = expand(
        &c,
        ms("2026-03-23T13:15:00Z"),
        ms("2026-03-23T13:20:00Z"),
        &ny(),
    );
    assert_eq!(mid.len(), 1);
    // COUNT=6 ends the series (the excluded one counts): nothing in April after the 6th.
    assert!(
        expand(
            &c,
            ms("2026-04-07T00:00:00Z"),
            ms("2026-05-01T00:00:00Z"),
            &ny()
        )
        .is_empty()
    );
}

#[test]
fn until_written_as_a_date_is_read_in_the_events_zone() {
    let c = cal("BEGIN:VEVENT
UID:u@test
DTSTART;TZID=America/New_York:20260302T090000
DTEND;TZID=America/New_York:20260302T100000
RRULE:FREQ=WEEKLY;UNTIL=20260316
SUMMARY:Until
END:VEVENT
");
    let os = expand(
        &c,
        ms("2026-03-01T00:00:00Z"),
        ms("2026-05-01T00:00:00Z"),
        &ny(),
    );
    assert_eq!(os.len(), 3, "{:?}", starts(&os));
}

#[test]
fn all_day_events_are_dates_and_floating_times_read_in_the_users_zone() {
    let c = cal("BEGIN:VEVENT
UID:d@test
DTSTART;VALUE=DATE:20260310
DTEND;VALUE=DATE:20260312
SUMMARY:Conference
END:VEVENT
");
    let os = expand(
        &c,
        ms("2026-03-11T12:00:00Z"),
        ms("2026-03-11T13:00:00Z"),
        &ny(),
    );
    assert_eq!(os.len(), 1);
    let d = |s: &str| When::Date(s.parse().unwrap());
    assert_eq!((os[0].start, os[0].end), (d("2026-03-10"), d("2026-03-12")));
    assert_eq!(os[0].zone, None);
    let f = cal("BEGIN:VEVENT
UID:f@test
DTSTART:20260310T090000
DURATION:PT1H30M
SUMMARY:Floating
END:VEVENT
");
    let os = expand(
        &f,
        ms("2026-03-10T00:00:00Z"),
        ms("2026-03-11T00:00:00Z"),
        &ny(),
    );
    // 09:00 in New York on 2026-03-10 (EDT) is 13:00 UTC; 90 minutes long.
    assert_eq!(os[0].start_ms, ms("2026-03-10T13:00:00Z"));
    assert_eq!(os[0].end_ms - os[0].start_ms, 90 * 60_000);
}

#[test]
fn a_zone_iana_does_not_know_comes_from_the_objects_vtimezone() {
    let c = cal("BEGIN:VTIMEZONE
TZID:Custom Standard Time
BEGIN:STANDARD
DTSTART:19700101T000000
TZOFFSETFROM:+0300
TZOFFSETTO:+0300
END:STANDARD
END:VTIMEZONE
BEGIN:VEVENT
UID:c@test
DTSTART;TZID=Custom Standard Time:20260310T090000
DTEND;TZID=Custom Standard Time:20260310T100000
SUMMARY:Elsewhere
END:VEVENT
");
    let os = expand(
        &c,
        ms("2026-03-10T00:00:00Z"),
        ms("2026-03-11T00:00:00Z"),
        &ny(),
    );
    assert_eq!(os[0].start_ms, ms("2026-03-10T06:00:00Z"));
    // A prefixed IANA name (as some clients write it) is still that zone.
    let (_, name) = ny().resolve("/mozilla.org/20050126_1/Europe/Berlin");
    assert_eq!(name.as_deref(), Some("Europe/Berlin"));
}

#[test]
fn one_occurrence_changes_or_goes_and_the_series_stays() {
    let zones = ny();
    let mut c = cal(SERIES);
    // The occurrence of 2026-03-23 (13:00 UTC) gets a new title and moves an hour later.
    let patch = EventPatch {
        title: Some("Standup with guests".into()),
        start: Some(GivenTime {
            ms: ms("2026-03-23T14:00:00Z"),
            offset_secs: -4 * 3600,
        }),
        ..EventPatch::default()
    };
    apply_patch(&mut c, Some("20260323T130000Z"), &patch, &zones, 1).unwrap();
    remove_occurrence(&mut c, "20260330T130000Z", &zones, 2).unwrap();
    // Text written and read back, as a server would.
    let c = parse(&c.to_ics()).unwrap().remove(0);
    let os = expand(
        &c,
        ms("2026-03-01T00:00:00Z"),
        ms("2026-04-07T00:00:00Z"),
        &zones,
    );
    assert_eq!(
        starts(&os),
        [
            ("2026-03-02T14:00:00.000Z".into(), "Standup".into()),
            ("2026-03-16T14:00:00.000Z".into(), "Standup (moved)".into()),
            (
                "2026-03-23T14:00:00.000Z".into(),
                "Standup with guests".into()
            ),
            ("2026-04-06T13:00:00.000Z".into(), "Standup".into()),
        ]
    );
    // Its 30 minutes are kept, and it stays in New York time.
    assert_eq!(os[2].end_ms - os[2].start_ms, 30 * 60_000);
    assert_eq!(os[2].zone.as_deref(), Some("America/New_York"));
    // No such occurrence: not found, nothing changed.
    let mut again = c.clone();
    assert!(apply_patch(&mut again, Some("20260324T130000Z"), &patch, &zones, 3).is_err());
    assert!(
        remove_occurrence(&mut again, "20260309T140000Z", &zones, 3).is_err(),
        "an excluded one"
    );
    assert_eq!(again, c);
}

#[test]
fn new_events_keep_the_users_zone_when_given_its_offset() {
    let zones = ny();
    // 10:00 at -05:00 in January is New York time: stored as wall-clock time there.
    let g = GivenTime {
        ms: ms("2026-01-29T15:00:00Z"),
        offset_secs: -5 * 3600,
    };
    assert!(matches!(form_for(g, &zones), IcalTime::Zoned(_, ref z) if z == "America/New_York"));
    // Another zone's offset names no zone: UTC.
    let tokyo = GivenTime {
        ms: ms("2026-01-29T01:00:00Z"),
        offset_secs: 9 * 3600,
    };
    assert!(matches!(form_for(tokyo, &zones), IcalTime::Utc(_)));
    let e = NewEvent {
        title: "Team Sync".into(),
        start: g,
        end: GivenTime {
            ms: g.ms + 30 * 60_000,
            offset_secs: g.offset_secs,
        },
        description: Some("notes, with; punctuation\nand lines".into()),
        location: None,
        add_meet_link: false,
    };
    let mut c = new_object("n@test", &e, &zones, ms("2026-01-01T00:00:00Z"));
    let c2 = parse(&c.to_ics()).unwrap().remove(0);
    let os = expand(&c2, g.ms - 1, g.ms + 1, &zones);
    assert_eq!(
        os[0].description.as_deref(),
        Some("notes, with; punctuation\nand lines")
    );
    assert!(!os[0].recurring && os[0].rid.is_none());
    // Moved across the DST change (to 2026-03-10, given at -04:00): still 10:00 local.
    let moved = EventPatch {
        start: Some(GivenTime {
            ms: ms("2026-03-10T14:00:00Z"),
            offset_secs: -4 * 3600,
        }),
        ..EventPatch::default()
    };
    apply_patch(&mut c, None, &moved, &zones, 5).unwrap();
    let ev = parts(&c).0.unwrap();
    assert_eq!(ev.prop("DTSTART").unwrap().value, "20260310T100000");
    assert_eq!(ev.prop("DTEND").unwrap().value, "20260310T103000");
    assert_eq!(ev.prop("SEQUENCE").unwrap().value, "1");
}

#[test]
fn hostile_rules_and_lengths_end_quickly_and_do_not_panic() {
    let zones = ny();
    // Every second since 1970: only the window's seconds, found at once.
    let c = cal("BEGIN:VEVENT
UID:s@test
DTSTART:19700101T000000Z
RRULE:FREQ=SECONDLY
SUMMARY:Tick
END:VEVENT
");
    let t0 = std::time::Instant::now();
    let os = expand(
        &c,
        ms("2026-03-10T12:00:00Z"),
        ms("2026-03-10T12:00:03Z"),
        &zones,
    );
    assert_eq!(os.len(), 3);
    assert_eq!(os[0].start_ms, ms("2026-03-10T12:00:00Z"));
    // A generous bound for a debug build on a busy machine; the walk used to take minutes.
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    // A COUNT of a billion seconds stops at the step limit instead of walking them all.
    let counted = cal("BEGIN:VEVENT
UID:c@test
DTSTART:19700101T000000Z
RRULE:FREQ=SECONDLY;COUNT=1000000000
SUMMARY:Tick
END:VEVENT
");
    assert!(
        expand(
            &counted,
            ms("2026-03-10T12:00:00Z"),
            ms("2026-03-10T12:00:03Z"),
            &zones
        )
        .is_empty()
    );
    // Absurd lengths are clamped, not overflowed.
    for ev in [
        "DTSTART;VALUE=DATE:20260310\nDURATION:P99999999D",
        "DTSTART:20260310T090000Z\nDURATION:P9999999999999W",
        "DTSTART:20260310T090000Z\nDTEND:99991231T000000Z",
    ] {
        let c = cal(&format!(
            "BEGIN:VEVENT\nUID:l@test\n{ev}\nSUMMARY:Long\nEND:VEVENT\n"
        ));
        let _ = expand(
            &c,
            ms("2026-03-01T00:00:00Z"),
            ms("2026-04-01T00:00:00Z"),
            &zones,
        );
        let _ = span(&c, &zones);
    }
}

#[test]
fn occurrences_kept_without_their_series_are_each_an_event() {
    let zones = ny();
    let mut c = cal("BEGIN:VEVENT
UID:inv@test
RECURRENCE-ID;TZID=America/New_York:20260310T090000
DTSTART;TZID=America/New_York:20260310T090000
DTEND;TZID=America/New_York:20260310T100000
SUMMARY:Invited, first
END:VEVENT
BEGIN:VEVENT
UID:inv@test
RECURRENCE-ID;TZID=America/New_York:20260317T090000
DTSTART;TZID=America/New_York:20260317T090000
DTEND;TZID=America/New_York:20260317T100000
SUMMARY:Invited, second
END:VEVENT
");
    let os = expand(
        &c,
        ms("2026-03-01T00:00:00Z"),
        ms("2026-04-01T00:00:00Z"),
        &zones,
    );
    assert_eq!(os.len(), 2);
    let key = os[0].rid.clone().unwrap();
    remove_occurrence(&mut c, &key, &zones, 1).unwrap();
    let os = expand(
        &c,
        ms("2026-03-01T00:00:00Z"),
        ms("2026-04-01T00:00:00Z"),
        &zones,
    );
    assert_eq!(
        os.iter().map(|o| o.title.as_str()).collect::<Vec<_>>(),
        ["Invited, second"]
    );
}
