//! What each session has read: the records behind the read-first gate. They live in the
//! session's per-family state (the core's session knows nothing of them), and, where an MCP
//! session may be served by any instance of a deployment, in a shared store too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use ringfence_core::{BackendError, Session};
use ringfence_fs::Target;

/// What was known about a file when this session last read (or wrote) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// BLAKE3 of the whole file content.
    pub hash: [u8; 32],
    pub size: u64,
    pub mtime: Option<SystemTime>,
}

/// Read records kept where several instances find them: an MCP session served by any
/// instance of a deployment keeps one set of records, keyed by the session's key and the
/// file's absolute path (instances mount shared files at the same place).
pub trait SharedReads: Send + Sync + std::fmt::Debug {
    fn get(&self, session: &str, path: &str) -> Result<Option<ReadRecord>, BackendError>;
    fn record(&self, session: &str, path: &str, record: &ReadRecord) -> Result<(), BackendError>;
    fn forget(&self, session: &str, path: &str) -> Result<(), BackendError>;
}

/// Files one session has read, keyed by root and resolved root-relative path (so `a/../b`
/// and `b` and a symlink to `b` are the same file), and the store they are shared in, if any.
#[derive(Debug, Default)]
struct Tracker {
    records: HashMap<(usize, String), ReadRecord>,
    shared: Option<Arc<dyn SharedReads>>,
}

/// The session state this module keeps.
#[derive(Debug, Default)]
struct SessionReads(Mutex<Tracker>);

/// `session`'s read records (each operation locks them for itself).
pub fn reads(session: &Session) -> Reads<'_> {
    let state = session.state().get_or_init(SessionReads::default);
    Reads { state, session }
}

/// `session`'s records are kept in `store` too, once the session has a key (the transport's
/// session id, [`Session::set_key`]); where it has none, they stay in this instance.
pub fn share_reads(session: &Session, store: Arc<dyn SharedReads>) {
    let state = session.state().get_or_init(SessionReads::default);
    lock(&state).shared = Some(store);
}

fn lock(state: &SessionReads) -> MutexGuard<'_, Tracker> {
    state.0.lock().unwrap_or_else(|e| e.into_inner())
}

/// One session's read records (see [`reads`]).
pub struct Reads<'a> {
    state: Arc<SessionReads>,
    session: &'a Session,
}

fn key(target: &Target) -> (usize, String) {
    (Arc::as_ptr(target.root()) as usize, target.rel().to_owned())
}

/// A file as the shared records name it: its absolute path.
fn path_key(target: &Target) -> String {
    target.absolute().to_string_lossy().into_owned()
}

impl Reads<'_> {
    /// The store and key records are shared under, once both are known.
    fn shared(&self, tracker: &Tracker) -> Option<(Arc<dyn SharedReads>, String)> {
        Some((tracker.shared.clone()?, self.session.key()?.to_owned()))
    }

    pub fn record(&self, target: &Target, record: ReadRecord) {
        let mut tracker = lock(&self.state);
        if let Some((store, session)) = self.shared(&tracker)
            && let Err(e) = store.record(&session, &path_key(target), &record)
        {
            // Another instance will then ask for a fresh read: safe, if a nuisance.
            tracing::warn!(error = %e, "cannot share a read record; other instances will ask for a fresh read");
        }
        tracker.records.insert(key(target), record);
    }

    /// What is known of `target`: where records are shared, the shared record (another
    /// instance may have made, replaced or forgotten it); else, or when the store cannot be
    /// read, this instance's own.
    pub fn get(&self, target: &Target) -> Option<ReadRecord> {
        let tracker = lock(&self.state);
        if let Some((store, session)) = self.shared(&tracker) {
            match store.get(&session, &path_key(target)) {
                Ok(found) => return found,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the shared read records; using this instance's")
                }
            }
        }
        tracker.records.get(&key(target)).cloned()
    }

    pub fn forget(&self, target: &Target) {
        let mut tracker = lock(&self.state);
        if let Some((store, session)) = self.shared(&tracker)
            && let Err(e) = store.forget(&session, &path_key(target))
        {
            tracing::warn!(error = %e, "cannot forget a shared read record");
        }
        tracker.records.remove(&key(target));
    }

    /// How many files this instance holds records of.
    pub fn len(&self) -> usize {
        lock(&self.state).records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
