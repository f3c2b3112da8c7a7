//! The times a question names — "in May 2023", "on 8 May, 2023", "May 8th 2023",
//! "2023-05-08", "during 2022", "yesterday", "last week" — as windows of milliseconds. A
//! memory is stored when it is told, so one stored within a window is more likely what the
//! question asks about; the search takes such rows as candidates and ranks them up
//! (`time_weight` in [`RankConfig`](super::RankConfig)).
//!
//! English only, and only forms that say a date without doubt: a month needs a day or a
//! year beside it (a bare "may" is a verb far more often than a month), a bare year needs
//! "in", "during" or "since" before it (so "a diet of 2000 calories" is not a year), and a
//! day must exist in its month. Relative phrases count
//! only when the question names no date, and are taken from `now`. Days are UTC days.

/// A day in milliseconds.
const DAY: i64 = 86_400_000;
/// Slack on each side of a named day, month or year: a fact is often told days after it
/// happened, and a question may name either day.
const SLACK: i64 = 7 * DAY;

const MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// Words before a bare year that make it one ("in 2022", "since 2019").
const YEAR_CUES: [&str; 3] = ["in", "during", "since"];

/// A half-open window `[start, end)` of milliseconds since the epoch.
pub(crate) type Window = (i64, i64);

/// The times a question names, and its words without them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dated {
    /// Widened by a week on each side; empty when the question names no time.
    pub(crate) windows: Vec<Window>,
    /// The question's words less those of the dates it names (a day's "8" is no word to
    /// look for in the memories); the question itself when it names none.
    pub(crate) words: String,
}

/// What times `text` names (see [`Dated`]).
pub(crate) fn dated(text: &str, now_ms: i64) -> Dated {
    let (tokens, spans) = tokens(text);
    let (windows, used) = absolute(&tokens);
    if windows.is_empty() {
        return Dated {
            windows: relative(&tokens, now_ms).into_iter().collect(),
            words: text.to_owned(),
        };
    }
    // The question as written, each date's tokens blanked out.
    let mut words = String::with_capacity(text.len());
    let mut from = 0;
    for (span, _) in spans.iter().zip(&used).filter(|(_, used)| **used) {
        words.push_str(&text[from..span.start]);
        words.push(' ');
        from = span.end;
    }
    words.push_str(&text[from..]);
    Dated { windows, words }
}

/// The windows of time `text` names (see [`Dated::windows`]).
#[cfg(test)]
fn windows(text: &str, now_ms: i64) -> Vec<Window> {
    dated(text, now_ms).windows
}

/// The dates among `tokens` as windows, and which tokens they took.
fn absolute(tokens: &[String]) -> (Vec<Window>, Vec<bool>) {
    let mut out = Vec::new();
    let mut used = vec![false; tokens.len()];
    for (i, t) in tokens.iter().enumerate() {
        if let Some((y, m, d)) = iso_date(t)
            && let Some(w) = match d {
                Some(d) => day_window(y, m, d),
                None => month_window(y, m),
            }
        {
            used[i] = true;
            out.push(w);
        }
    }
    for i in 0..tokens.len() {
        let Some(m) = month(&tokens[i]) else { continue };
        let day_at = |j: Option<usize>| j.and_then(|j| tokens.get(j)).and_then(|t| day(t));
        let year_at = |j: usize| tokens.get(j).and_then(|t| year(t));
        // "8 May 2023", "8th of May, 2023"
        let before = match i.checked_sub(1).map(|j| tokens[j].as_str()) {
            Some("of") => i.checked_sub(2),
            _ => i.checked_sub(1),
        };
        let after = if tokens.get(i + 1).is_some_and(|t| t == "of") {
            i + 2
        } else {
            i + 1
        };
        if let (Some(d), Some(y)) = (day_at(before), year_at(after))
            && let Some(w) = day_window(y, m, d)
        {
            out.push(w);
            mark(&mut used, &[before.unwrap_or(i), i, after]);
        } else if let (Some(d), Some(y)) = (day_at(Some(i + 1)), year_at(i + 2))
            && let Some(w) = day_window(y, m, d)
        {
            // "May 8, 2023", "May 8th 2023"
            out.push(w);
            mark(&mut used, &[i, i + 1, i + 2]);
        } else if let Some(y) = year_at(after)
            && let Some(w) = month_window(y, m)
        {
            // "May 2023", "May of 2023"
            out.push(w);
            mark(&mut used, &[i, after]);
        }
    }
    for i in 1..tokens.len() {
        if used[i] || !YEAR_CUES.contains(&tokens[i - 1].as_str()) {
            continue;
        }
        if let Some(y) = year(&tokens[i])
            && let Some(w) = year_window(y)
        {
            used[i] = true;
            out.push(w);
        }
    }
    (out, used)
}

/// Lower-cased words and numbers, an ordinal's suffix dropped ("8th" → "8"), each with
/// where it stands in `text`; dashes are kept inside a token so an ISO date stays whole.
fn tokens(text: &str) -> (Vec<String>, Vec<std::ops::Range<usize>>) {
    let mut tokens = Vec::new();
    let mut spans = Vec::new();
    let mut push = |start: usize, end: usize| {
        let raw = &text[start..end];
        let trimmed = raw.trim_matches('-');
        if trimmed.is_empty() {
            return;
        }
        let start = start + (raw.len() - raw.trim_start_matches('-').len());
        let t = trimmed.to_lowercase();
        let digits = t.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let suffix = &t[digits.len()..];
        let t = if !digits.is_empty()
            && digits.chars().all(|c| c.is_ascii_digit())
            && matches!(suffix, "st" | "nd" | "rd" | "th")
        {
            digits.to_owned()
        } else {
            t
        };
        tokens.push(t);
        spans.push(start..start + trimmed.len());
    };
    let mut start = None;
    for (i, c) in text.char_indices() {
        let inside = c.is_alphanumeric() || c == '-';
        match (inside, start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                push(s, i);
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        push(s, text.len());
    }
    (tokens, spans)
}

fn mark(used: &mut [bool], at: &[usize]) {
    for &i in at {
        if let Some(u) = used.get_mut(i) {
            *u = true;
        }
    }
}

/// 1..=12 for a month's name or its three-letter form ("sept" too).
fn month(t: &str) -> Option<u32> {
    MONTHS
        .iter()
        .position(|m| {
            *m == t || (t.len() >= 3 && m.starts_with(t) && (t.len() == 3 || t == "sept"))
        })
        .map(|p| p as u32 + 1)
}

fn day(t: &str) -> Option<u32> {
    let d: u32 = t.parse().ok().filter(|_| t.len() <= 2)?;
    (1..=31).contains(&d).then_some(d)
}

fn year(t: &str) -> Option<i64> {
    let y: i64 = t.parse().ok().filter(|_| t.len() == 4)?;
    (1900..=2200).contains(&y).then_some(y)
}

/// `2023-05-08` or `2023-05`.
fn iso_date(t: &str) -> Option<(i64, u32, Option<u32>)> {
    let mut parts = t.split('-');
    let y = year(parts.next()?)?;
    let m_text = parts.next()?;
    let m: u32 = m_text.parse().ok().filter(|_| m_text.len() == 2)?;
    if !(1..=12).contains(&m) {
        return None;
    }
    let d = match parts.next() {
        None => None,
        Some(d) if d.len() == 2 => Some(day(d).filter(|&d| midnight(y, m, d).is_some())?),
        Some(_) => return None,
    };
    parts.next().is_none().then_some((y, m, d))
}

/// Midnight (UTC) of a date, in milliseconds since the epoch; `None` when there is no such
/// day ("31 February").
fn midnight(y: i64, m: u32, d: u32) -> Option<i64> {
    let date = jiff::civil::Date::new(
        i16::try_from(y).ok()?,
        i8::try_from(m).ok()?,
        i8::try_from(d).ok()?,
    )
    .ok()?;
    Some(
        date.to_zoned_datetime(jiff::tz::TimeZone::UTC)
            .ok()?
            .timestamp()
            .as_millisecond(),
    )
}

fn day_window(y: i64, m: u32, d: u32) -> Option<Window> {
    let start = midnight(y, m, d)?;
    Some((start - SLACK, start + DAY + SLACK))
}

fn month_window(y: i64, m: u32) -> Option<Window> {
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    Some((midnight(y, m, 1)? - SLACK, midnight(ny, nm, 1)? + SLACK))
}

fn year_window(y: i64) -> Option<Window> {
    Some((midnight(y, 1, 1)? - SLACK, midnight(y + 1, 1, 1)? + SLACK))
}

/// "yesterday", "today", "this/last/past week|weekend|month|year", from `now`.
fn relative(tokens: &[String], now_ms: i64) -> Option<Window> {
    let has = |a: &str, b: &str| tokens.windows(2).any(|w| w[0] == a && w[1] == b);
    let back = |days: i64| Some((now_ms - days * DAY, now_ms + DAY));
    if tokens.iter().any(|t| t == "yesterday") {
        return back(2);
    }
    if tokens.iter().any(|t| t == "today" || t == "tonight") {
        return back(1);
    }
    for (unit, this, last) in [("weekend", 4, 10), ("week", 7, 14), ("month", 31, 62)] {
        if has("this", unit) {
            return back(this);
        }
        if has("last", unit) || has("past", unit) {
            return back(last);
        }
    }
    let y = i64::from(
        jiff::Timestamp::from_millisecond(now_ms)
            .ok()?
            .to_zoned_datetime(jiff::tz::TimeZone::UTC)
            .year(),
    );
    if has("this", "year") {
        return Some((midnight(y, 1, 1)?, now_ms + DAY));
    }
    if has("last", "year") {
        return year_window(y - 1);
    }
    if has("past", "year") {
        return back(366);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The date (UTC) of a time.
    fn date_of(ms: i64) -> (i64, u32, u32) {
        let d = jiff::Timestamp::from_millisecond(ms)
            .unwrap()
            .to_zoned_datetime(jiff::tz::TimeZone::UTC)
            .date();
        (i64::from(d.year()), d.month() as u32, d.day() as u32)
    }

    /// The window's dates, slack taken off: (first day, day after the last).
    fn dates(w: Window) -> ((i64, u32, u32), (i64, u32, u32)) {
        (date_of(w.0 + SLACK), date_of(w.1 - SLACK))
    }

    const NOW: i64 = 1_780_000_000_000; // 2026-05-28

    #[test]
    fn days_are_utc_midnights_and_only_real_days() {
        assert_eq!(midnight(1970, 1, 1), Some(0));
        assert_eq!(midnight(2000, 3, 1), Some(11_017 * DAY));
        assert_eq!(midnight(2023, 2, 29), None);
        assert_eq!(
            midnight(2024, 2, 29),
            Some(midnight(2024, 3, 1).unwrap() - DAY)
        );
        assert_eq!(date_of(NOW), (2026, 5, 28));
    }

    #[test]
    fn each_written_form_of_a_day_gives_that_day() {
        for q in [
            "What did Maria do on 8 May, 2023?",
            "as mentioned on 8th May 2023",
            "on the 8th of May 2023",
            "What happened on May 8, 2023?",
            "What happened on May 8th 2023?",
            "Anything from 2023-05-08?",
            "What did Jo say on May 8 2023",
        ] {
            let w = windows(q, NOW);
            assert_eq!(w.len(), 1, "{q}: {w:?}");
            assert_eq!(dates(w[0]), ((2023, 5, 8), (2023, 5, 9)), "{q}");
        }
        assert_eq!(
            dates(windows("on 8 Sept 2023", NOW)[0]),
            ((2023, 9, 8), (2023, 9, 9))
        );
    }

    #[test]
    fn a_month_or_a_year_gives_all_of_it() {
        let w = windows("What did Audrey do in November 2023?", NOW);
        assert_eq!(dates(w[0]), ((2023, 11, 1), (2023, 12, 1)));
        let w = windows("in December of 2023", NOW);
        assert_eq!(dates(w[0]), ((2023, 12, 1), (2024, 1, 1)));
        let w = windows("projects from 2023-02", NOW);
        assert_eq!(dates(w[0]), ((2023, 2, 1), (2023, 3, 1)));
        let w = windows("Where did Tim travel in 2022?", NOW);
        assert_eq!(w.len(), 1);
        assert_eq!(dates(w[0]), ((2022, 1, 1), (2023, 1, 1)));
    }

    #[test]
    fn words_that_only_look_like_dates_give_nothing() {
        for q in [
            "What may Caroline pursue?",
            "Who did Jon meet in May?",
            "How many calories is 2000 calories?",
            "a diet of 2000 calories, around 2000 steps",
            "the resolution of 1920 by 1080",
            "February 29, 2023",
            "What is the 2023 budget?",
            "room 12 of march street",
            "version 2023-13-01 and 2023-05-40",
            "When did Melanie paint a sunrise?",
        ] {
            assert_eq!(windows(q, NOW), Vec::<Window>::new(), "{q}");
        }
    }

    #[test]
    fn relative_phrases_count_from_now_unless_a_date_is_named() {
        let w = windows("What did I decide yesterday?", NOW);
        assert_eq!(w, vec![(NOW - 2 * DAY, NOW + DAY)]);
        let w = windows("what did we plan last week", NOW);
        assert_eq!(w, vec![(NOW - 14 * DAY, NOW + DAY)]);
        let w = windows("anything from last year", NOW);
        assert_eq!(dates(w[0]), ((2025, 1, 1), (2026, 1, 1)));
        // The named date wins over "last weekend".
        let w = windows("What did Maria do last weekend before April 10, 2023?", NOW);
        assert_eq!(w.len(), 1);
        assert_eq!(dates(w[0]), ((2023, 4, 10), (2023, 4, 11)));
    }

    #[test]
    fn the_words_searched_for_leave_the_dates_out() {
        let words = |q: &str| {
            dated(q, NOW)
                .words
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            words("What did Maria's sister start on 3rd June, 2023 at the gym?"),
            "What did Maria's sister start on , at the gym?"
        );
        assert_eq!(
            words("Where did Tim travel in 2022?"),
            "Where did Tim travel in ?"
        );
        assert_eq!(
            words("Since 2023-05-08 what changed?"),
            "Since what changed?"
        );
        let q = "What did I decide yesterday?";
        assert_eq!(dated(q, NOW).words, q);
        let q = "Which room is 12 of March street?";
        assert_eq!(dated(q, NOW).words, q);
    }

    #[test]
    fn a_day_that_does_not_exist_is_no_day() {
        // The month still stands where one is named with its year.
        let w = windows("What happened on 31 February 2023?", NOW);
        assert_eq!(dates(w[0]), ((2023, 2, 1), (2023, 3, 1)));
        assert!(windows("on 2023-02-30", NOW).is_empty());
        let w = windows("on 29 February 2024", NOW);
        assert_eq!(dates(w[0]), ((2024, 2, 29), (2024, 3, 1)));
        // Non-ASCII digits and marks are words, not dates, and never split a character.
        assert!(windows("on ８th May ２０２３ é́", NOW).is_empty());
    }

    #[test]
    fn several_dates_give_several_windows() {
        let w = windows("between 3 June 2023 and July 2023", NOW);
        assert_eq!(w.len(), 2);
        assert_eq!(dates(w[0]), ((2023, 6, 3), (2023, 6, 4)));
        assert_eq!(dates(w[1]), ((2023, 7, 1), (2023, 8, 1)));
    }
}
