//! Re-embedding after the model changed. Every stored vector carries the model that made it,
//! and a search compares only vectors of the model loaded now, so two models' vectors are
//! never mixed. A user with many rows lacking a vector of that model (the model changed, or
//! the rows came from an import without vectors) has them embedded by a background thread,
//! batch by batch, each batch saved as it is done: a crash loses at most the batch under way,
//! and the next start carries on from what is saved. Meanwhile that user's searches match
//! words only and say why, with how far it has got; stores and updates carry on (each new
//! row is embedded with the new model at once). A few such rows are embedded on the spot
//! instead.
//!
//! One job runs at a time (the model already uses every core); another user's job starts
//! with that user's first search after it, and says it is waiting until then. A job that
//! failed (an endpoint down) is not tried again for [`RETRY_FAILED`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use ringfence_embed::Embedder;
use ringfence_store::StoreError;

use super::{MemoryDb, MemoryFailure};
use crate::Kind;

/// Rows without a vector of the current model embedded on the spot, before the search that
/// needs them; more go to the background.
pub(super) const ON_THE_SPOT: usize = 256;

/// Progress is logged every this many rows.
const LOG_EVERY: usize = 2_000;

/// Jobs at once (each uses every core the model is given).
const MAX_JOBS: usize = 1;

/// How long a failed job is remembered before a search starts it again.
pub(super) const RETRY_FAILED: std::time::Duration = std::time::Duration::from_secs(30);

/// One user's rows of one kind being embedded again.
pub(super) struct Job {
    model: String,
    total: usize,
    done: AtomicUsize,
}

/// The jobs under way, and their threads (joined by [`MemoryDb::finish_reembedding`]).
#[derive(Default)]
pub(super) struct Jobs {
    running: Mutex<HashMap<(String, Kind), Arc<Job>>>,
    /// Jobs that failed: why, and when.
    failed: Mutex<HashMap<(String, Kind), (String, std::time::Instant)>>,
    /// Seconds before a failed job is tried again, when not [`RETRY_FAILED`] (tests).
    retry_secs: std::sync::atomic::AtomicU64,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl MemoryDb {
    /// Where `user`'s rows of `kind` are being embedded again: the error a search falls
    /// back to words with. Starts the job when none runs; `missing` are the rows (row,
    /// text) without a vector of `embedder`'s model.
    pub(super) fn reembed_in_background(
        &self,
        user: &str,
        kind: Kind,
        embedder: &Arc<dyn Embedder>,
        missing: Vec<(i64, String)>,
    ) -> StoreError {
        let key = (user.to_owned(), kind);
        let mut running = self
            .reembed
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(job) = running.get(&key) {
            return job.progress();
        }
        let job = Arc::new(Job {
            model: embedder.id().to_owned(),
            total: missing.len(),
            done: AtomicUsize::new(0),
        });
        if let Some((why, at)) = self
            .reembed
            .failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            && at.elapsed() < self.reembed.retry_after()
        {
            return MemoryFailure::ReembedFailed {
                model: job.model.clone(),
                why: why.clone(),
            }
            .into();
        }
        if running.len() >= MAX_JOBS {
            // Another user's rows are being embedded; this user's wait their turn.
            return job.progress();
        }
        let Some(db) = self.this.upgrade() else {
            // Being dropped: nothing to carry on with.
            return job.progress();
        };
        tracing::info!(
            user,
            kind = kind.as_str(),
            rows = missing.len(),
            model = embedder.id(),
            "embedding rows again for this model in the background; search matches words until it is done"
        );
        let (user_owned, embedder, worker) = (user.to_owned(), embedder.clone(), job.clone());
        let spawned = std::thread::Builder::new()
            .name("memory-reembed".into())
            .spawn(move || {
                // However the job ends (a panic too), the next search may start another.
                let _done = Finished(&db, (user_owned.clone(), kind));
                let texts: Vec<(i64, &str)> =
                    missing.iter().map(|(id, t)| (*id, t.as_str())).collect();
                let result = db.embed_and_save(&user_owned, kind, &embedder, &texts, |i, _| {
                    let done = i + 1;
                    worker.done.store(done, Ordering::Relaxed);
                    if done % LOG_EVERY == 0 {
                        tracing::info!(
                            user = user_owned.as_str(),
                            kind = kind.as_str(),
                            done,
                            total = worker.total,
                            "embedding rows again"
                        );
                    }
                });
                if result.is_ok() {
                    db.reembed
                        .failed
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&(user_owned.clone(), kind));
                }
                match result {
                    Ok(()) => tracing::info!(
                        user = user_owned.as_str(),
                        kind = kind.as_str(),
                        rows = worker.total,
                        model = worker.model.as_str(),
                        "rows embedded again; search by meaning is back"
                    ),
                    Err(why) => {
                        tracing::warn!(
                            user = user_owned.as_str(),
                            kind = kind.as_str(),
                            error = %why,
                            "embedding rows again stopped; a search after 30 s starts it again from what is saved"
                        );
                        db.reembed
                            .failed
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(
                                (user_owned.clone(), kind),
                                (why.to_string(), std::time::Instant::now()),
                            );
                    }
                }
            });
        match spawned {
            Ok(handle) => {
                running.insert(key, job.clone());
                let mut threads = self
                    .reembed
                    .threads
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                threads.retain(|t| !t.is_finished());
                threads.push(handle);
                job.progress()
            }
            Err(why) => {
                // No thread to be had: search stays with words, stores go on; a later
                // search tries again.
                tracing::warn!(error = %why, "cannot start embedding rows again");
                job.progress()
            }
        }
    }

    /// The progress of the job under way for `user`'s rows of `kind`, if one is.
    pub(super) fn reembedding(&self, user: &str, kind: Kind) -> Option<StoreError> {
        self.reembed
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(user.to_owned(), kind))
            .map(|job| job.progress())
    }

    /// Remembers a failed job this long (tests: long enough never to expire mid-test).
    #[cfg(test)]
    pub(super) fn retry_failed_after(&self, secs: u64) {
        self.reembed.retry_secs.store(secs, Ordering::Relaxed);
    }

    /// Waits for the background re-embedding under way (tests; the server lets it run).
    #[cfg(test)]
    pub(super) fn finish_reembedding(&self) {
        let threads: Vec<_> = std::mem::take(
            &mut *self
                .reembed
                .threads
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for t in threads {
            let _ = t.join();
        }
    }
}

/// Takes a finished job off the list.
struct Finished<'a>(&'a MemoryDb, (String, Kind));

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0
            .reembed
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
    }
}

impl Jobs {
    fn retry_after(&self) -> std::time::Duration {
        match self.retry_secs.load(Ordering::Relaxed) {
            0 => RETRY_FAILED,
            s => std::time::Duration::from_secs(s),
        }
    }
}

impl Job {
    fn progress(&self) -> StoreError {
        MemoryFailure::Reembedding {
            done: self.done.load(Ordering::Relaxed),
            total: self.total,
            model: self.model.clone(),
        }
        .into()
    }
}

/// Whether `e` says the rows are being embedded again.
pub(super) fn is_reembedding(e: &StoreError) -> bool {
    matches!(e, StoreError::Family(f) if matches!(
        f.downcast_ref::<MemoryFailure>(),
        Some(MemoryFailure::Reembedding { .. } | MemoryFailure::ReembedFailed { .. })
    ))
}
