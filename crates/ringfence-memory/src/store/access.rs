//! How often searches returned each row: counted in memory as results go out, written in
//! one transaction every two seconds (and when the database is flushed or dropped), so a
//! search never waits for a write.

use std::collections::HashMap;
use std::sync::Mutex;

use super::now_ms;
use super::rows::MemoryRows;

/// Access counts not yet written: row id → (count, last access ms).
#[derive(Default)]
pub(super) struct AccessCounts {
    pending: Mutex<HashMap<i64, (i64, i64)>>,
}

impl AccessCounts {
    /// Counts one access to each of `rows`, now.
    pub(super) fn record(&self, rows: &[i64]) {
        let now = now_ms();
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        for r in rows {
            let e = pending.entry(*r).or_insert((0, now));
            e.0 += 1;
            e.1 = now;
        }
    }

    /// Forgets the pending counts of a deleted row.
    pub(super) fn forget(&self, row: i64) {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&row);
    }

    /// Writes the pending counts to `rows`; a failure is logged (the counts are lost).
    pub(super) fn flush(&self, rows: &dyn MemoryRows) {
        let pending: HashMap<i64, (i64, i64)> =
            std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        if pending.is_empty() {
            return;
        }
        if let Err(e) = rows.add_access(&pending) {
            tracing::warn!(error = %e, "could not record memory access counts");
        }
    }
}
