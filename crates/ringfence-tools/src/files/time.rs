//! ISO 8601 timestamps as seed 002 shows and accepts them (`2025-01-15T10:00:00.000Z`), in
//! UTC, without a calendar dependency.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Milliseconds since the epoch (negative before 1970).
fn millis(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis().min(i64::MAX as u128) as i64,
        Err(e) => -(e.duration().as_millis().min(i64::MAX as u128) as i64),
    }
}

/// `2025-01-15T10:00:00.000Z`.
pub fn format_iso(t: SystemTime) -> String {
    format_iso_ms(millis(t))
}

/// [`format_iso`] for milliseconds since the Unix epoch.
pub fn format_iso_ms(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let frac = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{frac:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// Parses `YYYY-MM-DD`, or that followed by `THH:MM`, `:SS` and `.fraction` optionally, then
/// `Z` or `±HH:MM` (a space may stand for `T`). Without a zone the time is UTC.
pub fn parse_iso(s: &str) -> Result<SystemTime, String> {
    let bad = || {
        format!(
            "`{s}` is not an ISO 8601 date-time; use e.g. 2025-01-01T00:00:00.000Z or 2025-01-01"
        )
    };
    let s = s.trim();
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Result<i64, String> {
        let part = s.get(from..from + len).ok_or_else(bad)?;
        if !part.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        part.parse::<i64>().map_err(|_| bad())
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo as u32) as i64 {
        return Err(bad());
    }
    let mut secs = days_from_civil(y, mo as u32, d as u32) * 86_400;
    let mut nanos: u32 = 0;
    let mut i = 10;
    if i < b.len() && (b[i] == b'T' || b[i] == b't' || b[i] == b' ') {
        let (h, mi) = (num(i + 1, 2)?, num(i + 4, 2)?);
        if b.get(i + 3) != Some(&b':') || h > 23 || mi > 59 {
            return Err(bad());
        }
        secs += h * 3600 + mi * 60;
        i += 6;
        if b.get(i) == Some(&b':') {
            let sec = num(i + 1, 2)?;
            if sec > 60 {
                return Err(bad());
            }
            secs += sec.min(59);
            i += 3;
            if b.get(i) == Some(&b'.') || b.get(i) == Some(&b',') {
                i += 1;
                let start = i;
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                if i == start {
                    return Err(bad());
                }
                let digits = &s[start..i.min(start + 9)];
                let scale = 10u32.pow(9 - digits.len() as u32);
                nanos = digits.parse::<u32>().map_err(|_| bad())? * scale;
            }
        }
        match b.get(i) {
            None => {}
            Some(b'Z') | Some(b'z') if i + 1 == b.len() => {}
            Some(&sign @ (b'+' | b'-')) => {
                let (oh, om) = (num(i + 1, 2)?, num(i + 4, 2)?);
                if b.get(i + 3) != Some(&b':') || i + 6 != b.len() || oh > 23 || om > 59 {
                    return Err(bad());
                }
                let off = oh * 3600 + om * 60;
                secs -= if sign == b'+' { off } else { -off };
            }
            _ => return Err(bad()),
        }
    } else if i != b.len() {
        return Err(bad());
    }
    let t = if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nanos)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()) + Duration::from_nanos(nanos.into())
    };
    Ok(t)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
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
        assert_eq!(parse_iso("2025-01-01T02:00:00+02:00").unwrap(), z);
        assert_eq!(parse_iso("2024-12-31T19:00:00-05:00").unwrap(), z);
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
        ] {
            let err = parse_iso(s).unwrap_err();
            assert!(err.contains("2025-01-01T00:00:00.000Z"), "{s}: {err}");
        }
    }
}
