//! The data directory is private to the account the server runs as: ringfence's records
//! there (the audit trail, saved outputs, the edit journal, memories, the model) are 0600
//! files in 0700 directories. Everything ringfence creates there is made so at creation
//! (`ringfence_fs::create_private_dir_all`, explicit file modes); [`make_private`] at start
//! tightens what an earlier version made wider (0644 in 0755 folders).
//!
//! Only ringfence's own entries are touched, by name — the data directory may be configured
//! to a place that holds other things: the entries below, the database files every family
//! registers (`FamilyPlug::state`, with SQLite's `-wal`, `-shm` and `-journal` beside them),
//! and the data directory itself, which is made 0700
//! (set-group-ID and sticky bits included: a data directory shared with other accounts is
//! not supported; the README says so). Workspaces under it (`workspace/`,
//! `users/<user>/workspace/`) are made 0700 themselves, which keeps everything in them from
//! other accounts; the files in them are the user's and keep their modes.

use std::path::Path;

use ringfence_fs::{Reach, make_private as tighten};

/// ringfence's entries in the data directory, and how far tightening reaches in each.
const ENTRIES: &[(&str, Reach)] = &[
    ("", Reach::Itself),
    ("audit", Reach::Tree),
    ("tool-output", Reach::Tree),
    ("models", Reach::Tree),
    // The default workspace: the directory, not the user's files in it.
    ("workspace", Reach::Itself),
    // `users/<user>/workspace`: the directories down to each workspace, not its files.
    ("users", Reach::Dirs(2)),
];

/// SQLite's files beside a database.
const DATABASE_SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

/// Tightens ringfence's entries in `data_dir`, and the families' database files
/// `databases`, to 0600 files and 0700 directories, logging how many changed. A missing
/// entry is fine (it is made private when first needed); an entry that cannot be changed is
/// logged and skipped.
pub fn make_private(data_dir: &Path, databases: &[std::path::PathBuf]) {
    let named = ENTRIES.iter().map(|(rel, reach)| {
        let path = if rel.is_empty() {
            data_dir.to_path_buf()
        } else {
            data_dir.join(rel)
        };
        (path, *reach)
    });
    let files = databases.iter().flat_map(|db| {
        let side = DATABASE_SIDE_FILES.iter().map(move |suffix| {
            let mut name = db.clone().into_os_string();
            name.push(suffix);
            std::path::PathBuf::from(name)
        });
        std::iter::once(db.clone()).chain(side)
    });
    let mut changed = 0;
    for (path, reach) in named.chain(files.map(|f| (f, Reach::Itself))) {
        match tighten(&path, reach) {
            Ok(n) => changed += n,
            Err(e) => {
                tracing::warn!(entry = %path.display(), error = %e, "cannot make this entry of the data directory private")
            }
        }
    }
    if changed > 0 {
        tracing::info!(
            entries = changed,
            "tightened the permissions of entries in the data directory (now 0700 directories, 0600 files)"
        );
    }
}
