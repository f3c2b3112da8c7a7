//! The files family's plug: the file tools over the session's roots, with changes journaled for
//! undo_edit in `<data dir>/ringfence.db` (or in PostgreSQL with `[store]`).

use std::sync::Arc;

use ringfence_core::plug::{BuildError, FamilyEnv, FamilyPlug, Lazy, SectionInput, SettingsError};
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
        let (store, data_dir) = (env.store.clone(), env.data_dir.to_owned());
        let journal = Arc::new(LazyJournal(Lazy::new(move || {
            let opened = crate::journal::sqlite::open_shared(&store, &data_dir);
            if let Err(e) = &opened {
                tracing::error!(error = %e, "edits will not be journaled for undo");
            }
            opened
        })));
        if env.background {
            // Opening and migrating the database must not delay the MCP handshake; a call
            // that needs the journal before it is open waits for it.
            let opener = journal.clone();
            env.supervisor.spawn("journal-open", move |_| {
                // A failure is logged by the opener; calls then report it.
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
struct LazyJournal(Lazy<dyn Journal>);

impl LazyJournal {
    fn get(&self) -> Result<&Arc<dyn Journal>, JournalError> {
        self.0.open().map_err(|_| {
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
        if let Some(j) = self.0.opened() {
            j.flush();
        }
    }
}
