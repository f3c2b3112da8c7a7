//! The per-user daily cap of `generate_image`: a slot is taken before an image is asked for
//! (so calls at once cannot pass the cap together) and given back when none was made. Days
//! are UTC days; the counts of the current day are kept by a [`UsageLedger`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jiff::Timestamp;

use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};

/// Keeps the day's counts across restarts.
pub trait UsageLedger: Send + Sync {
    /// The counts saved for `day` (`YYYY-MM-DD`); empty when none were (or they are of
    /// another day).
    fn load(&self, day: &str) -> HashMap<String, u32>;
    /// Saves the counts of `day`, replacing whatever was saved before. Failing to save is
    /// logged by the implementation, never an error of the call.
    fn save(&self, day: &str, counts: &HashMap<String, u32>);
}

/// A ledger that keeps nothing: counts live as long as the process.
#[derive(Debug, Default)]
pub struct MemoryLedger;

impl UsageLedger for MemoryLedger {
    fn load(&self, _day: &str) -> HashMap<String, u32> {
        HashMap::new()
    }
    fn save(&self, _day: &str, _counts: &HashMap<String, u32>) {}
}

/// Images per user per UTC day.
pub struct DailyCap {
    limit: u32,
    ledger: Arc<dyn UsageLedger>,
    /// The day counted (empty before the first call) and its counts.
    state: Mutex<(String, HashMap<String, u32>)>,
}

impl DailyCap {
    pub fn new(limit: u32, ledger: Arc<dyn UsageLedger>) -> DailyCap {
        DailyCap {
            limit,
            ledger,
            state: Mutex::new((String::new(), HashMap::new())),
        }
    }

    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Takes one of `user`'s slots for the day of `now`, or says when the cap resets.
    pub fn take(&self, user: &str, now: Timestamp) -> ToolResult<u32> {
        if self.limit == 0 {
            return Err(ToolError::new(
                ToolErrorKind::Disabled,
                "image generation is turned off on this server ([images] daily_limit = 0); an operator raises the limit to enable it",
            ));
        }
        let day = day_of(now);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.roll(&mut state, &day);
        let used = state.1.get(user).copied().unwrap_or(0);
        if used >= self.limit {
            return Err(ToolError::new(
                ToolErrorKind::Refused,
                format!(
                    "daily image limit reached: {used} of {} images made today; it resets at 00:00 UTC (in {}). An operator can raise [images] daily_limit",
                    self.limit,
                    until_midnight(now)
                ),
            ));
        }
        state.1.insert(user.to_owned(), used + 1);
        self.ledger.save(&day, &state.1);
        Ok(used + 1)
    }

    /// Gives back the slot taken at `taken_at` (no image was made).
    pub fn give_back(&self, user: &str, taken_at: Timestamp) {
        let day = day_of(taken_at);
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if state.0 != day {
            return;
        }
        if let Some(n) = state.1.get_mut(user) {
            *n = n.saturating_sub(1);
            self.ledger.save(&day, &state.1);
        }
    }

    /// Moves the counts to `day` when it is a new one (loading what the ledger kept).
    fn roll(&self, state: &mut (String, HashMap<String, u32>), day: &str) {
        if state.0 != day {
            *state = (day.to_owned(), self.ledger.load(day));
        }
    }
}

/// `YYYY-MM-DD` of `now` in UTC.
pub(crate) fn day_of(now: Timestamp) -> String {
    now.strftime("%Y-%m-%d").to_string()
}

/// `5 h 12 min` until the next UTC midnight.
fn until_midnight(now: Timestamp) -> String {
    let secs_today = now.as_second().rem_euclid(86_400);
    let left = 86_400 - secs_today;
    let (h, m) = (left / 3600, (left % 3600 + 59) / 60);
    let (h, m) = if m == 60 { (h + 1, 0) } else { (h, m) };
    match (h, m) {
        (0, m) => format!("{m} min"),
        (h, 0) => format!("{h} h"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ledger that remembers what was saved.
    #[derive(Default)]
    struct Kept(Mutex<Option<(String, HashMap<String, u32>)>>);

    impl UsageLedger for Kept {
        fn load(&self, day: &str) -> HashMap<String, u32> {
            match &*self.0.lock().unwrap() {
                Some((d, c)) if d == day => c.clone(),
                _ => HashMap::new(),
            }
        }
        fn save(&self, day: &str, counts: &HashMap<String, u32>) {
            *self.0.lock().unwrap() = Some((day.to_owned(), counts.clone()));
        }
    }

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn the_cap_counts_per_user_and_resets_at_utc_midnight() {
        let cap = DailyCap::new(2, Arc::new(MemoryLedger));
        let t = at("2026-03-01T21:30:00Z");
        assert_eq!(cap.take("alice", t).unwrap(), 1);
        assert_eq!(cap.take("alice", t).unwrap(), 2);
        let err = cap.take("alice", t).unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::Refused);
        assert!(err.message.contains("2 of 2"), "{}", err.message);
        assert!(
            err.message.contains("00:00 UTC (in 2 h 30 min)"),
            "{}",
            err.message
        );
        // Another user has their own count; the next day starts afresh.
        assert_eq!(cap.take("bob", t).unwrap(), 1);
        assert_eq!(cap.take("alice", at("2026-03-02T00:00:01Z")).unwrap(), 1);
    }

    #[test]
    fn a_slot_given_back_can_be_used_again() {
        let cap = DailyCap::new(1, Arc::new(MemoryLedger));
        let t = at("2026-03-01T10:00:00Z");
        cap.take("alice", t).unwrap();
        cap.give_back("alice", t);
        cap.take("alice", t).unwrap();
        assert!(cap.take("alice", t).is_err());
    }

    #[test]
    fn the_counts_survive_through_the_ledger() {
        let ledger = Arc::new(Kept::default());
        let t = at("2026-03-01T10:00:00Z");
        DailyCap::new(2, ledger.clone()).take("alice", t).unwrap();
        DailyCap::new(2, ledger.clone()).take("alice", t).unwrap();
        // A third instance (a restart) still knows both.
        assert!(DailyCap::new(2, ledger.clone()).take("alice", t).is_err());
        // Saved counts of another day do not count.
        assert!(
            DailyCap::new(2, ledger)
                .take("alice", at("2026-03-02T10:00:00Z"))
                .is_ok()
        );
    }

    #[test]
    fn a_zero_limit_turns_the_tool_off() {
        let err = DailyCap::new(0, Arc::new(MemoryLedger))
            .take("alice", Timestamp::now())
            .unwrap_err();
        assert_eq!(err.kind, ToolErrorKind::Disabled);
        assert!(err.message.contains("daily_limit"), "{}", err.message);
    }

    #[test]
    fn time_to_midnight_reads_well() {
        assert_eq!(until_midnight(at("2026-03-01T23:59:30Z")), "1 min");
        assert_eq!(until_midnight(at("2026-03-01T22:00:00Z")), "2 h");
        assert_eq!(until_midnight(at("2026-03-01T00:00:00Z")), "24 h");
    }
}
