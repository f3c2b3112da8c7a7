//! When a new or updated text is refused as already stored: exactly (the same normalised
//! text, by its hash) or by meaning (a vector at least `duplicate_threshold` similar to a
//! row stating the same numbers).

use std::sync::RwLock;

use crate::{Duplicate, Item, Kind};

use super::MemoryDb;
use super::normalize::numbers_in;
use super::vectors::VecIndex;
use ringfence_store::StoreError;

/// How far below a threshold an approximate (byte) similarity may be and still be checked
/// exactly.
const APPROX_MARGIN: f32 = 0.05;

/// An exact duplicate of `existing`.
fn exact(existing: Item) -> Duplicate {
    Duplicate {
        existing,
        similarity: 1.0,
        exact: true,
    }
}

impl MemoryDb {
    /// A row of `user`'s `kind` (other than `except`) whose normalised text has the hash
    /// `hash`.
    pub(super) fn exact_duplicate(
        &self,
        user: &str,
        kind: Kind,
        hash: &[u8],
        except: Option<i64>,
    ) -> Result<Option<Duplicate>, StoreError> {
        Ok(self
            .rows
            .find_by_hash(user, kind, hash)?
            .filter(|(row, _)| Some(*row) != except)
            .map(|(_, existing)| exact(existing)))
    }

    /// A row of `user` (in `index`, other than `except`) that means the same as `content`
    /// (whose vector is `vector`): at least `duplicate_threshold` similar and stating the
    /// same numbers ("runs 5k" and "runs 10k" are close in meaning but different facts).
    pub(super) fn near_duplicate(
        &self,
        user: &str,
        index: &RwLock<VecIndex>,
        model: &str,
        content: &str,
        vector: &[f32],
        except: Option<i64>,
    ) -> Result<Option<Duplicate>, StoreError> {
        // The index's similarities are approximate (bytes): take a margin, then decide on
        // the exact ones.
        let close: Vec<i64> = {
            let ix = index.read().unwrap_or_else(|e| e.into_inner());
            ix.top(vector, 8, None)
                .into_iter()
                .filter(|(row, sim)| {
                    Some(*row) != except && *sim >= self.rank.duplicate_threshold - APPROX_MARGIN
                })
                .map(|(row, _)| row)
                .collect()
        };
        if close.is_empty() {
            return Ok(None);
        }
        let mut close: Vec<(i64, f32)> = self
            .exact_similarities(user, model, &close, vector)?
            .into_iter()
            .filter(|(_, sim)| *sim >= self.rank.duplicate_threshold)
            .collect();
        close.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut rows = self
            .rows
            .rows_by_id(user, &close.iter().map(|c| c.0).collect::<Vec<_>>())?;
        let numbers = numbers_in(content);
        for (row, similarity) in close {
            if let Some(existing) = rows.remove(&row)
                && numbers_in(&existing.content) == numbers
            {
                return Ok(Some(Duplicate {
                    existing,
                    similarity,
                    exact: false,
                }));
            }
        }
        Ok(None)
    }
}
