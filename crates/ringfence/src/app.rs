//! Turns a [`Config`] into the pieces a server or a one-off call needs.

use std::sync::Arc;

use ringfence_fs::{Access, ClientRoots, Denylist, Root, RootOrigin, RootSpec, Workspace};
use ringfence_mcp::{McpServer, ServerIdentity, SessionParts, UserSessions};
use ringfence_store::memory::{EmbedderLoader, MemoryDb};
use ringfence_store::{Durability, SqliteJournal, Store};
use ringfence_tools::memory::{
    Item, Kind, MemoryBackend, MemoryError, NewItem, Query, SearchOutcome, StoreOutcome,
    UpdateOutcome,
};
use ringfence_tools::{Journal, Limits, Session, SpillStore, Toolbox};

use crate::config::{Config, EmbeddingProvider, MemorySettings};

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
    /// The edit journal for undo_edit; `None` if the database could not be opened.
    pub journal: Option<Arc<dyn Journal>>,
    /// Truths and memories; `None` until [`open_memory`](Self::open_memory).
    pub memory: Option<Arc<LazyMemory>>,
    memory_settings: MemorySettings,
    data_dir: std::path::PathBuf,
    client_roots: ClientRoots,
    /// `[http]` settings for `serve --http`.
    pub http: crate::config::HttpConfig,
    /// The audit trail (opened for `serve`).
    pub audit: Option<Arc<crate::audit::AuditFile>>,
    roots: Vec<RootSlot>,
    /// The configured denylist patterns (per-user roots get them too).
    denylist: Vec<String>,
    /// `<data dir>/tool-output/<configuration key>`: one directory per user beneath.
    spill_base: std::path::PathBuf,
    /// Each user's roots and spill store, made on their first session and kept.
    users: std::sync::Mutex<std::collections::HashMap<String, UserRoots>>,
}

/// One user's roots and spill store.
type UserRoots = (Vec<Arc<Root>>, Arc<SpillStore>);

/// A configured root: one directory every user shares, or a template (`{user}` in the
/// path) that gives every user their own.
enum RootSlot {
    Shared(Arc<Root>),
    Template(RootSpec),
    /// No root configured: `<data dir>/workspace` for the local user, and
    /// `<data dir>/users/<user>/workspace` for each authenticated one.
    DefaultWorkspace(Arc<Root>),
}

/// Users whose roots are kept ready; beyond this, those without a live session are dropped
/// (their directory handles closed) and made again when they come back.
const USER_CACHE: usize = 1024;

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
        let spill_base = config
            .data_dir
            .join("tool-output")
            .join(spill_key(&specs, &config.denylist));
        let default = config.roots.is_empty();
        let roots = specs
            .into_iter()
            .map(|s| {
                if s.is_template() {
                    return Ok(RootSlot::Template(s));
                }
                let root = root_with_denylist(s, &config.data_dir, &config.denylist, &denylist)?;
                Ok(if default {
                    RootSlot::DefaultWorkspace(root)
                } else {
                    RootSlot::Shared(root)
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
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
            journal: None,
            memory: None,
            memory_settings: config.memory.clone(),
            data_dir: config.data_dir.clone(),
            client_roots: config.client_roots,
            http: config.http.clone(),
            audit: None,
            roots,
            spill_base,
            users: Default::default(),
            denylist: config.denylist.clone(),
        })
    }

    /// `user`'s roots (shared ones and their own from templates) and spill store, made on
    /// first use and kept for their later sessions.
    fn user_parts(&self, user: &str) -> Result<UserRoots, String> {
        let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(parts) = users.get(user) {
            return Ok(parts.clone());
        }
        let base = Arc::new(Denylist::new(&self.denylist).map_err(|e| format!("denylist: {e}"))?);
        let roots = self
            .roots
            .iter()
            .map(|slot| match slot {
                RootSlot::Shared(root) => Ok(root.clone()),
                RootSlot::DefaultWorkspace(root) if user == ringfence_tools::LOCAL_USER => {
                    Ok(root.clone())
                }
                RootSlot::DefaultWorkspace(_) => {
                    let spec = RootSpec {
                        path: self
                            .data_dir
                            .join("users")
                            .join(ringfence_fs::user_dir_name(user))
                            .join("workspace"),
                        access: Access::ReadWrite,
                        origin: RootOrigin::PerUser,
                        label: "workspace".into(),
                    };
                    root_with_denylist(spec, &self.data_dir, &self.denylist, &base)
                }
                RootSlot::Template(spec) => {
                    root_with_denylist(spec.for_user(user), &self.data_dir, &self.denylist, &base)
                }
            })
            .collect::<Result<Vec<_>, String>>()?;
        // Saved outputs are readable through the spill root: each user gets their own.
        let spill = spill_store(self.spill_base.join(ringfence_fs::user_dir_name(user)))?;
        let parts = (roots, Arc::new(spill));
        if users.len() >= USER_CACHE {
            // Keep the users some session still holds (their spill store is shared with it).
            users.retain(|_, (_, spill)| Arc::strong_count(spill) > 1);
        }
        users.insert(user.to_owned(), parts.clone());
        Ok(parts)
    }

    /// A fresh session for `user` over their roots (plus their read-only spill root).
    pub fn session_for(&self, user: &str) -> Result<(Arc<Session>, Arc<SpillStore>), String> {
        let (roots, spill) = self.user_parts(user)?;
        let ws = Workspace::new(roots)
            .map_err(|e| e.to_string())?
            .with_internal_root(spill.root().clone());
        let session = Session::new(ws)
            .with_client_roots(self.client_roots)
            .with_user(user);
        Ok((Arc::new(session), spill))
    }

    /// A fresh session for the local user (stdio, `ringfence call`).
    pub fn session(&self) -> Result<(Arc<Session>, Arc<SpillStore>), String> {
        self.session_for(ringfence_tools::LOCAL_USER)
    }

    fn identity() -> ServerIdentity {
        ServerIdentity {
            name: "ringfence".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            instructions: INSTRUCTIONS.into(),
        }
    }

    /// The server for one stdio client (the local user).
    pub fn server(&self) -> Result<McpServer, String> {
        let (session, spill) = self.session()?;
        let server = McpServer::new(
            self.toolbox.clone(),
            session,
            self.limits.clone(),
            spill,
            Self::identity(),
        );
        Ok(self.attach(server))
    }

    /// The server for one HTTP MCP session: it takes the session of the user who
    /// authenticated its first request and refuses every other user.
    pub fn user_server(self: &Arc<Self>) -> McpServer {
        let app = self.clone();
        let sessions: UserSessions = Arc::new(move |user: &str| {
            let (session, spill) = app.session_for(user)?;
            Ok(SessionParts { session, spill })
        });
        self.attach(McpServer::for_users(
            self.toolbox.clone(),
            sessions,
            self.limits.clone(),
            Self::identity(),
        ))
    }

    fn attach(&self, server: McpServer) -> McpServer {
        let server = match &self.journal {
            Some(j) => server.with_journal(j.clone()),
            None => server,
        };
        let server = match &self.memory {
            Some(m)
                if self
                    .toolbox
                    .iter()
                    .any(|t| t.family() == ringfence_tools::memory::FAMILY) =>
            {
                server.with_memory(m.clone()).with_resources(Arc::new(
                    ringfence_tools::memory::PinnedTruths::new(
                        m.clone(),
                        self.memory_settings.pinned_in_instructions,
                    ),
                ))
            }
            Some(m) => server.with_memory(m.clone()),
            None => server,
        };
        match &self.audit {
            Some(a) => server.with_audit(a.clone()),
            None => server,
        }
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

    /// Opens the memory database and loads the embedding model on a background thread (the
    /// model takes a moment to read; the handshake must not wait). Calls that need memory
    /// before then wait for the database; searches before the model is ready wait for it.
    pub fn open_memory(&mut self) {
        let lazy = Arc::new(LazyMemory {
            cell: std::sync::OnceLock::new(),
            settings: self.memory_settings.clone(),
        });
        let opener = lazy.clone();
        let spawned = std::thread::Builder::new()
            .name("ringfence-memory-open".into())
            .spawn(move || {
                if let Ok(db) = opener.get() {
                    db.warm_up();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "cannot open memory in the background; it opens on first use");
        }
        self.memory = Some(lazy);
    }

    /// The memory database, opened now (for the `memory` commands).
    pub fn memory_db(&self) -> Result<Arc<MemoryDb>, String> {
        open_memory_db(&self.memory_settings)
    }

    /// Writes pending memory access counts (before the process exits).
    pub fn flush_memory(&self) {
        if let Some(m) = &self.memory
            && let Some(Ok(db)) = m.cell.get()
        {
            db.flush();
        }
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
        self.flush_memory();
        if let Some(a) = &self.audit {
            a.close();
        }
    }

    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// Deletes saved outputs older than the retention period (every user's).
    pub fn prune_spill(&self) {
        let days = self.limits.spill_retention_days;
        let Ok(base) = spill_store(self.spill_base.clone()) else {
            return;
        };
        let removed = base.prune(std::time::Duration::from_secs(days.saturating_mul(86_400)));
        if removed > 0 {
            tracing::info!(removed, days, "deleted old saved tool outputs");
        }
    }

    /// Warns (once, at start) about configured roots that do not exist yet.
    pub fn check_roots(&self) {
        for root in self.roots.iter().filter_map(|r| match r {
            RootSlot::Shared(root) | RootSlot::DefaultWorkspace(root) => Some(root),
            RootSlot::Template(_) => None,
        }) {
            if let Err(err) = root.dir() {
                tracing::warn!(root = root.label(), error = %err.message(), "root is not usable yet; calls will fail until it exists");
            }
        }
    }
}

/// Truths and memories, opened on first use (or by a background thread at start-up).
pub struct LazyMemory {
    cell: std::sync::OnceLock<Result<Arc<MemoryDb>, String>>,
    settings: MemorySettings,
}

impl std::fmt::Debug for LazyMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyMemory")
            .field("database", &self.settings.database)
            .finish()
    }
}

impl LazyMemory {
    fn get(&self) -> Result<&Arc<MemoryDb>, MemoryError> {
        self.cell
            .get_or_init(|| open_memory_db(&self.settings))
            .as_ref()
            .map_err(|e| MemoryError(e.clone()))
    }
}

impl MemoryBackend for LazyMemory {
    fn store(&self, user: &str, kind: Kind, item: NewItem) -> Result<StoreOutcome, MemoryError> {
        self.get()?.store(user, kind, item)
    }
    fn search(&self, user: &str, kind: Kind, query: &Query) -> Result<SearchOutcome, MemoryError> {
        self.get()?.search(user, kind, query)
    }
    fn update(
        &self,
        user: &str,
        kind: Kind,
        id: i64,
        content: &str,
    ) -> Result<UpdateOutcome, MemoryError> {
        self.get()?.update(user, kind, id, content)
    }
    fn delete(&self, user: &str, kind: Kind, id: i64) -> Result<Option<Item>, MemoryError> {
        self.get()?.delete(user, kind, id)
    }
    fn pinned(&self, user: &str) -> Result<Vec<Item>, MemoryError> {
        self.get()?.pinned(user)
    }
}

/// Opens the memory database with the configured embedder.
#[allow(clippy::disallowed_methods)] // the data directory is the operator's, not a root
fn open_memory_db(settings: &MemorySettings) -> Result<Arc<MemoryDb>, String> {
    if let Some(dir) = settings.database.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    // Facts about people: readable by their owner only. SQLite gives its -wal and -shm
    // files the database file's mode.
    {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&settings.database)
            .map_err(|e| format!("cannot create {}: {e}", settings.database.display()))?;
    }
    MemoryDb::open(
        &settings.database,
        embedder_loader(&settings.provider),
        settings.rank.clone(),
    )
    .map_err(|e| {
        tracing::error!(error = %e, "cannot open the memory database; the memory tools are unavailable");
        format!("the memory database could not be opened: {e}")
    })
}

/// How the configured embedding provider is loaded.
fn embedder_loader(provider: &EmbeddingProvider) -> Option<EmbedderLoader> {
    match provider.clone() {
        EmbeddingProvider::None => None,
        EmbeddingProvider::Local { model_dir } => Some(Box::new(move || {
            #[cfg(feature = "local-embeddings")]
            {
                ringfence_embed::LocalModel::load(&model_dir)
                    .map(|m| Arc::new(m) as Arc<dyn ringfence_embed::Embedder>)
            }
            #[cfg(not(feature = "local-embeddings"))]
            {
                let _ = &model_dir;
                Err(ringfence_embed::EmbedError::Model("this ringfence was built without the local model (feature local-embeddings); use memory.embeddings.provider = \"openai\"".into()))
            }
        })),
        EmbeddingProvider::OpenAi {
            url,
            model,
            api_key_env,
            dimensions,
            timeout_secs,
        } => Some(Box::new(move || {
            let api_key = api_key_env.as_ref().and_then(|v| std::env::var(v).ok());
            ringfence_embed::OpenAiEmbedder::new(ringfence_embed::OpenAiConfig {
                url: url.clone(),
                model: model.clone(),
                api_key,
                dimensions,
                timeout: std::time::Duration::from_secs(timeout_secs),
            })
            .map(|e| Arc::new(e) as Arc<dyn ringfence_embed::Embedder>)
        })),
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

/// A spill store at `path`: a read-only internal root, created on first use.
fn spill_store(path: std::path::PathBuf) -> Result<SpillStore, String> {
    let root = Root::new(
        RootSpec {
            path,
            access: Access::ReadOnly,
            origin: RootOrigin::Internal,
            label: "tool-output".into(),
        },
        Arc::new(Denylist::empty()),
    )
    .map_err(|e| e.to_string())?;
    Ok(SpillStore::new(Arc::new(root)))
}

/// A root with the configured denylist, plus patterns hiding ringfence's own data directory
/// when the root contains it (the saved outputs of every configuration and user, the journal
/// of earlier file versions).
fn root_with_denylist(
    spec: RootSpec,
    data_dir: &std::path::Path,
    patterns: &[String],
    base: &Arc<Denylist>,
) -> Result<Arc<Root>, String> {
    let list = match data_dir_patterns(data_dir, &spec.path) {
        Some(extra) => {
            let mut all = patterns.to_vec();
            all.extend(extra);
            Arc::new(Denylist::new(&all).map_err(|e| format!("denylist: {e}"))?)
        }
        None => base.clone(),
    };
    Root::new(spec, list)
        .map(Arc::new)
        .map_err(|e| e.to_string())
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
