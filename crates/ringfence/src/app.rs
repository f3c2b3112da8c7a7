//! Turns a [`Config`] into the pieces a server or a one-off call needs.

use std::sync::Arc;

use ringfence_fs::{Access, ClientRoots, Denylist, Root, RootOrigin, RootSpec, Workspace};
use ringfence_mcp::{McpServer, ServerIdentity};
use ringfence_store::{Durability, SqliteJournal, Store};
use ringfence_tools::{Journal, Limits, Session, SpillStore, Toolbox};

use crate::config::Config;

/// What the instructions at `initialize` teach the model.
pub const INSTRUCTIONS: &str = "ringfence gives you file tools confined to the directories the user allowed. Call file_access_info (when offered) to see them, with their access (read or write) and the current workspace.\n\
\n\
Paths: relative paths (`notes/todo.md`) resolve against the current workspace; `~` is the current workspace (not the user's home). Absolute paths work inside the allowed directories. `..` may move within a directory, never out of it; symbolic links that lead outside are refused, and some paths may be blocked by the user's denylist. switch_workspace changes the current workspace.\n\
\n\
Read first: a new file can be written at once, but overwriting or editing an existing file requires that you read it with read_file in this session first, and that it has not changed since. If it changed, read it again. undo_edit reverts ringfence's last change to a file.\n\
\n\
Large output: read_file returns at most 500 lines or 30,000 characters (10,000 characters per file with `paths`), grep 100 matches, glob 100 paths, list_directory 1,000 entries. When a cap cuts the output, a notice says what was shown and gives the path of a file holding the full output: read it with read_file using offset and limit, or search it with grep. Page through big files with read_file offset/limit (or start_line/end_line with `paths`).";

/// Everything built from the configuration.
pub struct App {
    pub toolbox: Toolbox,
    pub limits: Arc<Limits>,
    pub spill: Arc<SpillStore>,
    /// The edit journal for undo_edit; `None` if the database could not be opened.
    pub journal: Option<Arc<dyn Journal>>,
    data_dir: std::path::PathBuf,
    client_roots: ClientRoots,
    /// `[http]` settings for `serve --http`.
    pub http: crate::config::HttpConfig,
    /// The audit trail (opened for `serve`).
    pub audit: Option<Arc<crate::audit::AuditFile>>,
    roots: Vec<Arc<Root>>,
}

impl App {
    pub fn build(config: &Config) -> Result<App, String> {
        let denylist =
            Arc::new(Denylist::new(&config.denylist).map_err(|e| format!("denylist: {e}"))?);
        let specs: Vec<RootSpec> = if config.roots.is_empty() {
            vec![RootSpec {
                path: config.data_dir.join("workspace"),
                access: Access::ReadWrite,
                origin: RootOrigin::Default,
                label: "workspace".into(),
            }]
        } else {
            config.roots.clone()
        };
        let specs_for_key = specs.clone();
        let roots = specs
            .into_iter()
            .map(|s| {
                // ringfence's own data (saved outputs of every configuration, the journal of
                // earlier file versions) is never reachable through a root that contains it.
                let list = match data_dir_patterns(&config.data_dir, &s.path) {
                    Some(extra) => {
                        let mut patterns = config.denylist.clone();
                        patterns.extend(extra);
                        Arc::new(Denylist::new(&patterns).map_err(|e| format!("denylist: {e}"))?)
                    }
                    None => denylist.clone(),
                };
                Root::new(s, list).map(Arc::new).map_err(|e| e.to_string())
            })
            .collect::<Result<Vec<_>, _>>()?;
        let spill_root = Arc::new(
            Root::new(
                RootSpec {
                    path: config
                        .data_dir
                        .join("tool-output")
                        .join(spill_key(&specs_for_key, &config.denylist)),
                    access: Access::ReadOnly,
                    origin: RootOrigin::Internal,
                    label: "tool-output".into(),
                },
                Arc::new(Denylist::empty()),
            )
            .map_err(|e| e.to_string())?,
        );
        let mut toolbox = Toolbox::preset(config.preset);
        if let Some(enable) = &config.enable {
            toolbox = Toolbox::full();
            toolbox
                .retain_enabled(enable)
                .map_err(|e| format!("tools.enable: {e}"))?;
        }
        toolbox
            .add(&config.add)
            .map_err(|e| format!("tools.add: {e}"))?;
        toolbox
            .disable(&config.disable)
            .map_err(|e| format!("tools.disable: {e}"))?;
        if toolbox.is_empty() {
            return Err("tools: every tool is disabled; enable at least one".into());
        }
        Ok(App {
            toolbox,
            limits: Arc::new(config.limits.clone()),
            spill: Arc::new(SpillStore::new(spill_root)),
            journal: None,
            data_dir: config.data_dir.clone(),
            client_roots: config.client_roots,
            http: config.http.clone(),
            audit: None,
            roots,
        })
    }

    /// A fresh session over the configured roots (plus the read-only spill root).
    pub fn session(&self) -> Result<Arc<Session>, String> {
        let ws = Workspace::new(self.roots.clone())
            .map_err(|e| e.to_string())?
            .with_internal_root(self.spill.root().clone());
        Ok(Arc::new(
            Session::new(ws).with_client_roots(self.client_roots),
        ))
    }

    pub fn server(&self) -> Result<McpServer, String> {
        let server = McpServer::new(
            self.toolbox.clone(),
            self.session()?,
            self.limits.clone(),
            self.spill.clone(),
            ServerIdentity {
                name: "ringfence".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                instructions: INSTRUCTIONS.into(),
            },
        );
        let server = match &self.journal {
            Some(j) => server.with_journal(j.clone()),
            None => server,
        };
        Ok(match &self.audit {
            Some(a) => server.with_audit(a.clone()),
            None => server,
        })
    }

    /// Opens the edit journal (for serving and calls; listing tools touches no files) on a
    /// background thread: opening and migrating the database must not delay the MCP
    /// handshake. A call that needs the journal before it is open waits for it.
    pub fn open_journal(&mut self) {
        let lazy = Arc::new(LazyJournal {
            cell: std::sync::OnceLock::new(),
            data_dir: self.data_dir.clone(),
        });
        let opener = lazy.clone();
        let spawned = std::thread::Builder::new()
            .name("ringfence-journal-open".into())
            .spawn(move || {
                // Failures are logged by open_journal; calls then report them.
                let _ = opener.get();
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot open the journal in the background; it opens on first use");
        }
        self.journal = Some(lazy);
    }

    /// Starts the audit trail (`<data dir>/audit/audit.jsonl`). Without it the server still
    /// runs; the failure is logged.
    pub fn open_audit(&mut self) {
        match crate::audit::AuditFile::open(&self.data_dir) {
            Ok(a) => self.audit = Some(a),
            Err(e) => {
                tracing::error!(error = %e, "cannot open the audit log; tool calls are not audited")
            }
        }
    }

    /// Waits until the journal has stored every change and the audit trail every line
    /// (before the process exits).
    pub fn flush_journal(&self) {
        if let Some(j) = &self.journal {
            j.flush();
        }
        if let Some(a) = &self.audit {
            a.close();
        }
    }

    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// Deletes saved outputs older than the retention period.
    pub fn prune_spill(&self) {
        let days = self.limits.spill_retention_days;
        let removed = self
            .spill
            .prune(std::time::Duration::from_secs(days.saturating_mul(86_400)));
        if removed > 0 {
            tracing::info!(removed, days, "deleted old saved tool outputs");
        }
    }

    /// Warns (once, at start) about configured roots that do not exist yet.
    pub fn check_roots(&self) {
        for root in &self.roots {
            if let Err(err) = root.dir() {
                tracing::warn!(root = root.label(), error = %err.message(), "root is not usable yet; calls will fail until it exists");
            }
        }
    }
}

/// The edit journal, opened on first use (or by a background thread at start-up).
#[derive(Debug)]
struct LazyJournal {
    cell: std::sync::OnceLock<Option<Arc<dyn Journal>>>,
    data_dir: std::path::PathBuf,
}

impl LazyJournal {
    fn get(&self) -> Result<&Arc<dyn Journal>, String> {
        self.cell
            .get_or_init(|| open_journal(&self.data_dir))
            .as_ref()
            .ok_or_else(|| {
                "the edit journal's database could not be opened (see the server log)".to_owned()
            })
    }
}

impl Journal for LazyJournal {
    fn record(&self, entry: ringfence_tools::JournalEntry) -> Result<(), String> {
        self.get()?.record(entry)
    }
    fn latest(
        &self,
        key: &ringfence_tools::FileKey,
    ) -> Result<Option<ringfence_tools::JournalRecord>, String> {
        self.get()?.latest(key)
    }
    fn remove(&self, id: i64) -> Result<(), String> {
        self.get()?.remove(id)
    }
    fn depth(&self, key: &ringfence_tools::FileKey) -> Result<usize, String> {
        self.get()?.depth(key)
    }
    fn flush(&self) {
        if let Some(Some(j)) = self.cell.get() {
            j.flush();
        }
    }
}

/// Opens the database under the data directory for the edit journal. Without it ringfence
/// still works; undo_edit then says the journal is unavailable.
#[allow(clippy::disallowed_methods)] // the data directory is the operator's, not a root
fn open_journal(data_dir: &std::path::Path) -> Option<Arc<dyn Journal>> {
    if let Err(e) = std::fs::create_dir_all(data_dir) {
        tracing::error!(error = %e, "cannot create the data directory; edits will not be journaled for undo");
        return None;
    }
    match Store::open_with(&data_dir.join("ringfence.db"), Durability::Process) {
        Ok(store) => Some(Arc::new(SqliteJournal::new(Arc::new(store)))),
        Err(e) => {
            tracing::error!(error = %e, "cannot open the database; edits will not be journaled for undo");
            None
        }
    }
}

/// Denylist patterns that hide the data directory inside a root that contains it (judged
/// by the paths as written, normalised lexically), or `None` when it is not inside.
fn data_dir_patterns(data_dir: &std::path::Path, root: &std::path::Path) -> Option<Vec<String>> {
    let data = ringfence_fs::normalize_lexically(data_dir);
    let root = ringfence_fs::normalize_lexically(root);
    let rel = data.strip_prefix(&root).ok()?;
    let escape = |s: &str| -> String {
        s.chars()
            .flat_map(|c| {
                let special = matches!(c, '*' | '?' | '[' | ']' | '\\' | '!' | '#' | ' ');
                special
                    .then_some('\\')
                    .into_iter()
                    .chain(std::iter::once(c))
            })
            .collect()
    };
    let rel = rel.to_string_lossy();
    Some(if rel.is_empty() {
        // The root is the data directory itself: hide what ringfence keeps there.
        vec![
            "/tool-output/".to_owned(),
            "/ringfence.db".to_owned(),
            "/ringfence.db-*".to_owned(),
        ]
    } else {
        vec![format!("/{}/", escape(&rel))]
    })
}

/// The spill directory's name for this configuration. Saved outputs are readable through the
/// spill root, so two servers with different roots or denylists sharing a data directory must
/// not see each other's: each configuration gets its own directory.
fn spill_key(roots: &[RootSpec], denylist: &[String]) -> String {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: stable across runs of the same build.
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    for r in roots {
        r.path.hash(&mut h);
        r.access.as_str().hash(&mut h);
    }
    for d in denylist {
        d.hash(&mut h);
    }
    format!("{:016x}", h.finish())
}
