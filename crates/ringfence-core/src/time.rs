//! Time for every family, on `jiff`: instants shown as ISO 8601 in UTC the way seed 002 shows
//! and accepts them (`2025-01-15T10:00:00.000Z`), parsing of what models write, and IANA time
//! zones (with daylight-saving rules) for anything that happens at a user's local time —
//! follow-ups, calendar events. The time-zone database is compiled in, so a zone works the
//! same on a machine without `/usr/share/zoneinfo`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use jiff::tz::TimeZone;
pub use jiff::{Timestamp, ZonedDateTime};

/// A time or zone a caller wrote that cannot be understood; the message gives an example of
/// what works.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    #[error("`{0}` is not an ISO 8601 date-time; use e.g. 2025-01-01T00:00:00.000Z or 2025-01-01")]
    NotIso(String),
    #[error(
        "`{0}` is not a time zone ringfence knows; use an IANA name such as Europe/Berlin, America/New_York or UTC"
    )]
    UnknownZone(String),
}

/// Milliseconds since the epoch (negative before 1970).
pub fn millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis().min(i64::MAX as u128) as i64,
        Err(e) => -(e.duration().as_millis().min(i64::MAX as u128) as i64),
    }
}

/// The current time in milliseconds since the epoch.
pub fn now_ms() -> i64 {
    millis(SystemTime::now())
}

/// `2025-01-15T10:00:00.000Z`.
pub fn format_iso(t: SystemTime) -> String {
    format_iso_ms(millis(t))
}

/// The instant of `ms`, clamped to the range jiff represents (years -9999 to 9999).
fn timestamp_ms(ms: i64) -> Timestamp {
    Timestamp::from_millisecond(ms).unwrap_or(if ms < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

/// [`format_iso`] for milliseconds since the Unix epoch.
pub fn format_iso_ms(ms: i64) -> String {
    let dt = timestamp_ms(ms).to_zoned_datetime(TimeZone::UTC).datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second(),
        dt.subsec_nanosecond() / 1_000_000
    )
}

/// `ms` as local time in `zone`, ISO 8601 with the offset that applied then
/// (`2026-03-29T03:30:00+02:00`) — what a user in that zone reads on their clock.
pub fn format_in_zone(ms: i64, zone: &TimeZone) -> String {
    timestamp_ms(ms)
        .to_zoned_datetime(zone.clone())
        .strftime("%Y-%m-%dT%H:%M:%S%:z")
        .to_string()
}

/// `ms` as local time in `zone`, written with the `strftime` pattern `format`
/// (`"%a %Y-%m-%d %H:%M"`): how a person reads it on a page or in a listing.
pub fn local_text(ms: i64, zone: &TimeZone, format: &str) -> String {
    timestamp_ms(ms)
        .to_zoned_datetime(zone.clone())
        .strftime(format)
        .to_string()
}

/// The machine's zone and its name (`UTC` when it cannot be told).
pub fn system_zone() -> (String, TimeZone) {
    let tz = TimeZone::try_system().unwrap_or(TimeZone::UTC);
    let name = tz.iana_name().unwrap_or("UTC").to_owned();
    (name, tz)
}

/// An IANA time zone by name (`Europe/Berlin`, `UTC`).
pub fn zone(name: &str) -> Result<TimeZone, TimeError> {
    TimeZone::get(name.trim()).map_err(|_| TimeError::UnknownZone(name.to_owned()))
}

/// Parses `YYYY-MM-DD`, or that followed by `THH:MM`, `:SS` and `.fraction` optionally, then
/// `Z` or `±HH:MM` (a space may stand for `T`). Without a zone the time is UTC. A leap
/// second (`:60`) counts as `:59`.
pub fn parse_iso(s: &str) -> Result<SystemTime, TimeError> {
    let bad = || TimeError::NotIso(s.to_owned());
    let t = s.trim();
    if !shape_is_iso(t) {
        return Err(bad());
    }
    let (body, offset_secs) = split_offset(t).ok_or_else(bad)?;
    let mut body = if body.len() >= 19 && &body[17..19] == "60" {
        format!("{}59{}", &body[..17], &body[19..])
    } else {
        body.to_owned()
    };
    // Nanoseconds are as fine as a time gets here: further digits are dropped (jiff reads
    // at most nine). The shape check made `body` ASCII, so byte offsets are characters.
    if body.len() > 29 {
        body.truncate(29);
    }
    let civil = if body.len() == 10 {
        body.parse::<jiff::civil::Date>()
            .map(|d| d.to_datetime(jiff::civil::Time::midnight()))
    } else {
        body.replacen([' ', 't'], "T", 1)
            .parse::<jiff::civil::DateTime>()
    }
    .map_err(|_| bad())?;
    // Measured from the epoch on the civil calendar rather than through a `Timestamp`,
    // whose range ends on 9999-12-30 (a model's "until 9999-12-31" must still parse).
    let since_epoch = civil.duration_since(jiff::civil::date(1970, 1, 1).at(0, 0, 0, 0))
        - jiff::SignedDuration::from_secs(offset_secs);
    let nanos = since_epoch.as_nanos();
    let magnitude = Duration::new(
        (nanos.unsigned_abs() / 1_000_000_000) as u64,
        (nanos.unsigned_abs() % 1_000_000_000) as u32,
    );
    Ok(if nanos >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    })
}

/// Whether `s` has the one shape [`parse_iso`] accepts (jiff alone also takes basic-format
/// and other spellings models never write; keeping the documented shape keeps errors early
/// and clear).
fn shape_is_iso(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|p| p.iter().all(u8::is_ascii_digit));
    if !(digits(0..4)
        && b.get(4) == Some(&b'-')
        && digits(5..7)
        && b.get(7) == Some(&b'-')
        && digits(8..10))
    {
        return false;
    }
    if b.len() == 10 {
        return true;
    }
    if !matches!(b[10], b'T' | b't' | b' ')
        || !digits(11..13)
        || b.get(13) != Some(&b':')
        || !digits(14..16)
    {
        return false;
    }
    let mut i = 16;
    if b.get(i) == Some(&b':') {
        if !digits(i + 1..i + 3) {
            return false;
        }
        i += 3;
        if matches!(b.get(i), Some(b'.' | b',')) {
            let start = i + 1;
            i = start;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i == start {
                return false;
            }
        }
    }
    match &b[i..] {
        [] | [b'Z' | b'z'] => true,
        [b'+' | b'-', h1, h2, b':', m1, m2] => [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit()),
        _ => false,
    }
}

/// The date-time part and the offset in seconds (`Z` or none: 0).
fn split_offset(s: &str) -> Option<(&str, i64)> {
    if let Some(body) = s.strip_suffix(['Z', 'z']) {
        return Some((body, 0));
    }
    if s.len() > 16 {
        let tail = &s[s.len() - 6..];
        if let Some(sign) = tail.chars().next().filter(|c| *c == '+' || *c == '-') {
            let h: i64 = tail[1..3].parse().ok()?;
            let m: i64 = tail[4..6].parse().ok()?;
            if h > 23 || m > 59 {
                return None;
            }
            let off = h * 3600 + m * 60;
            return Some((&s[..s.len() - 6], if sign == '+' { off } else { -off }));
        }
    }
    Some((s, 0))
}

/// A time a person typed on the command line that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a time ringfence understands; use an RFC 3339 time with its offset (2026-12-02T15:00:00+01:00 or …Z), a date (2026-12-02, midnight in your zone), `today`, `yesterday`, `now`, or a duration ago such as 30m, 2h, 3d, 1w"
)]
pub struct TimeInputError(pub String);

/// A span a person typed: a number and a unit (`90s`, `30m`, `2h`, `3d`, `1w`).
pub fn parse_span(text: &str) -> Option<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit())?;
    let (n, unit) = t.split_at(split);
    let n: u64 = n.parse().ok()?;
    let secs = match unit {
        "s" | "sec" | "secs" => 1,
        "m" | "min" | "mins" => 60,
        "h" | "hour" | "hours" => 3600,
        "d" | "day" | "days" => 86_400,
        "w" | "week" | "weeks" => 604_800,
        _ => return None,
    };
    Some(Duration::from_secs(n.checked_mul(secs)?))
}

/// The instant a person means by `text`, `now_ms` being now and `zone` theirs: an RFC 3339
/// time with an offset, a date (its midnight in `zone`), `now`, `today`, `yesterday`, or a
/// span ago (`2h`). Anything else is an error saying what works.
pub fn parse_instant(text: &str, now_ms: i64, zone: &TimeZone) -> Result<i64, TimeInputError> {
    let t = text.trim();
    let bad = || TimeInputError(text.to_owned());
    let midnight = |date: jiff::civil::Date| -> Result<i64, TimeInputError> {
        date.to_zoned_datetime(zone.clone())
            .map(|z| z.timestamp().as_millisecond())
            .map_err(|_| bad())
    };
    let today = || timestamp_ms(now_ms).to_zoned_datetime(zone.clone()).date();
    match t {
        "now" => return Ok(now_ms),
        "today" => return midnight(today()),
        "yesterday" => return midnight(today().yesterday().map_err(|_| bad())?),
        _ => {}
    }
    if let Some(span) = parse_span(t) {
        return Ok(now_ms.saturating_sub(span.as_millis().min(i64::MAX as u128) as i64));
    }
    if let Ok(ts) = t.parse::<Timestamp>() {
        return Ok(ts.as_millisecond());
    }
    if let Ok(date) = t.parse::<jiff::civil::Date>() {
        return midnight(date);
    }
    Err(bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_the_seed_examples() {
        for s in [
            "2025-01-15T10:00:00.000Z",
            "2025-03-20T14:30:00.000Z",
            "2025-01-01T00:00:00.000Z",
            "1970-01-01T00:00:00.000Z",
            "2000-02-29T23:59:59.999Z",
            "1969-12-31T23:59:59.500Z",
        ] {
            assert_eq!(format_iso(parse_iso(s).unwrap()), s);
        }
    }

    #[test]
    fn accepts_dates_zones_and_no_fraction() {
        let z = parse_iso("2025-01-01T00:00:00.000Z").unwrap();
        assert_eq!(parse_iso("2025-01-01").unwrap(), z);
        assert_eq!(parse_iso("2025-01-01T00:00").unwrap(), z);
        assert_eq!(parse_iso("2025-01-01 00:00:00Z").unwrap(), z);
        assert_eq!(parse_iso("2025-01-01t00:00:00z").unwrap(), z);
        assert_eq!(parse_iso("2025-01-01T02:00:00+02:00").unwrap(), z);
        assert_eq!(parse_iso("2024-12-31T19:00:00-05:00").unwrap(), z);
        assert_eq!(
            parse_iso("2024-12-31T23:59:60Z").unwrap(),
            parse_iso("2024-12-31T23:59:59Z").unwrap()
        );
        assert_eq!(
            format_iso(parse_iso("2025-01-01T00:00:00,123456789Z").unwrap()),
            "2025-01-01T00:00:00.123Z"
        );
        // More digits than nanoseconds hold, and the last day of year 9999 (an open bound).
        assert_eq!(
            parse_iso("2025-01-01T00:00:00.1234567891234Z").unwrap(),
            parse_iso("2025-01-01T00:00:00.123456789Z").unwrap()
        );
        assert_eq!(
            parse_iso("9999-12-31T23:59:59Z").unwrap(),
            UNIX_EPOCH + Duration::from_secs(253_402_300_799)
        );
        assert_eq!(
            parse_iso("9999-12-31").unwrap(),
            UNIX_EPOCH + Duration::from_secs(253_402_214_400)
        );
        assert_eq!(
            parse_iso("0001-01-01").unwrap(),
            UNIX_EPOCH - Duration::from_secs(62_135_596_800)
        );
    }

    #[test]
    fn rejects_nonsense_with_an_example() {
        for s in [
            "",
            "yesterday",
            "2025-13-01",
            "2025-02-30",
            "2025-01-01T25:00",
            "2025-01-01T10:00:00Q",
            "2025-01-01T10:00:00.Z",
            "20250101T0000Z",
            "2025-01-01T10:00:00+0200",
            "2025-01-01T10:00:00+24:00",
        ] {
            let err = parse_iso(s).unwrap_err().to_string();
            assert!(err.contains("2025-01-01T00:00:00.000Z"), "{s}: {err}");
        }
    }

    #[test]
    fn zones_follow_daylight_saving() {
        let berlin = zone("Europe/Berlin").unwrap();
        // The night Berlin moved its clocks forward (2026-03-29, 02:00 → 03:00 local).
        let before = parse_iso("2026-03-29T00:30:00Z").unwrap();
        let after = parse_iso("2026-03-29T01:30:00Z").unwrap();
        assert_eq!(
            format_in_zone(millis(before), &berlin),
            "2026-03-29T01:30:00+01:00"
        );
        assert_eq!(
            format_in_zone(millis(after), &berlin),
            "2026-03-29T03:30:00+02:00"
        );
        assert_eq!(
            format_in_zone(0, &zone("UTC").unwrap()),
            "1970-01-01T00:00:00+00:00"
        );
        let err = zone("Mars/Olympus_Mons").unwrap_err().to_string();
        assert!(err.contains("Europe/Berlin"), "{err}");
    }

    #[test]
    fn extreme_instants_are_clamped_not_panicking() {
        let (max, min) = (format_iso_ms(i64::MAX), format_iso_ms(i64::MIN));
        assert!(max.starts_with("9999-12-"), "{max}");
        assert!(min.starts_with("-9999-01-"), "{min}");
    }

    #[test]
    fn a_persons_times_are_instants() {
        use super::{TimeZone, parse_instant, parse_span};
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        // 2026-12-06T12:00:00Z
        let now = 1_796_558_400_000;
        assert_eq!(parse_instant("now", now, &berlin), Ok(now));
        assert_eq!(parse_instant("2h", now, &berlin), Ok(now - 7_200_000));
        assert_eq!(parse_instant("3d", now, &berlin), Ok(now - 3 * 86_400_000));
        // An offset is honoured: the same instant written two ways.
        assert_eq!(
            parse_instant("2026-12-06T13:00:00+01:00", now, &berlin),
            parse_instant("2026-12-06T12:00:00Z", now, &berlin)
        );
        assert_eq!(parse_instant("2026-12-06T12:00:00Z", now, &berlin), Ok(now));
        // A date is its midnight in the person's zone (23:00 UTC the day before in Berlin).
        assert_eq!(
            parse_instant("2026-12-06", now, &berlin),
            Ok(now - 13 * 3_600_000)
        );
        assert_eq!(
            parse_instant("today", now, &berlin),
            Ok(now - 13 * 3_600_000)
        );
        assert_eq!(
            parse_instant("yesterday", now, &berlin),
            Ok(now - 37 * 3_600_000)
        );
        for bad in ["garbage", "2026-13-01", "12:00", "2h ago", "-2h", ""] {
            let e = parse_instant(bad, now, &berlin).unwrap_err().to_string();
            assert!(e.contains("RFC 3339") && e.contains("2h"), "{bad}: {e}");
        }
        assert_eq!(parse_span("90s"), Some(std::time::Duration::from_secs(90)));
        assert_eq!(
            parse_span("1w"),
            Some(std::time::Duration::from_secs(604_800))
        );
        assert_eq!(parse_span("2x"), None);
        assert_eq!(parse_span("h"), None);
    }
}
