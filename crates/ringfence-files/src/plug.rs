//! The files family's plug: the file tools over the session's roots, with changes journaled for
//! undo_edit in `<data dir>/ringfence.db` (or in PostgreSQL with `[store]`).

use std::sync::Arc;

use ringfence_core::plug::{BuildError, FamilyEnv, FamilyPlug, SectionInput, SettingsError};
use ringfence_core::{BackendError, Family, FamilyInfo};

use crate::journal::{FileKey, Journal, JournalEntry, JournalError, JournalRecord, Journaling};
use crate::{self as files, FileServices};

pub struct FilesPlug;

impl FamilyPlug for FilesPlug {
    /// The roots, the denylist and the limits are the sessions' (the core's): the family has
    /// no section of its own.
    type Settings = ();

    fn info(&self) -> &'static FamilyInfo {
        &files::INFO
    }

    fn settings(&self, _: &SectionInput<'_>) -> Result<(), SettingsError> {
        Ok(())
    }

    fn state(&self, _: &(), data_dir: &std::path::Path) -> Vec<ringfence_store::pg::copy::Family> {
        vec![crate::journal::sqlite::state(data_dir.join("ringfence.db"))]
    }

    fn build(&self, _: &(), env: &FamilyEnv<'_>) -> Result<Family, BuildError> {
        let journal = Arc::new(LazyJournal {
            cell: std::sync::OnceLock::new(),
            data_dir: env.data_dir.to_owned(),
            store: env.store.clone(),
        });
        if env.background {
            // Opening and migrating the database must not delay the MCP handshake; a call
            // that needs the journal before it is open waits for it.
            let opener = journal.clone();
            env.supervisor.spawn("journal-open", move |_| {
                // Failures are logged by open_journal; calls then report them.
                let _ = opener.get();
            });
        }
        let flushed = journal.clone();
        env.supervisor
            .at_exit("journal flush", move || flushed.flush());
        Ok(files::family(FileServices {
            journal: Journaling::to(journal),
        }))
    }
}

/// The edit journal, opened on first use (or by a background job at start-up).
#[derive(Debug)]
struct LazyJournal {
    cell: std::sync::OnceLock<Option<Arc<dyn Journal>>>,
    data_dir: std::path::PathBuf,
    store: Arc<ringfence_store::SharedStore>,
}

impl LazyJournal {
    fn get(&self) -> Result<&Arc<dyn Journal>, JournalError> {
        self.cell
            .get_or_init(|| {
                match crate::journal::sqlite::open_shared(&self.store, &self.data_dir) {
                    Ok(j) => Some(j),
                    Err(e) => {
                        tracing::error!(error = %e, "edits will not be journaled for undo");
                        None
                    }
                }
            })
            .as_ref()
            .ok_or_else(|| {
                BackendError::new(
                    "the edit journal's database could not be opened (see the server log)",
                )
            })
    }
}

impl Journal for LazyJournal {
    fn record(&self, entry: JournalEntry) -> Result<(), JournalError> {
        self.get()?.record(entry)
    }
    fn latest(&self, key: &FileKey) -> Result<Option<JournalRecord>, JournalError> {
        self.get()?.latest(key)
    }
    fn remove(&self, id: i64) -> Result<(), JournalError> {
        self.get()?.remove(id)
    }
    fn depth(&self, key: &FileKey) -> Result<usize, JournalError> {
        self.get()?.depth(key)
    }
    fn flush(&self) {
        if let Some(Some(j)) = self.cell.get() {
            j.flush();
        }
    }
}
