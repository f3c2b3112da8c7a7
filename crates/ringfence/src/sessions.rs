//! Sessions: each user's roots (shared roots, `{user}` templates expanded, or the default
//! workspace) and spill directory, made on their first session and kept for the next.

use std::sync::Arc;

use ringfence_fs::{Access, ClientRoots, Denylist, Root, RootOrigin, RootSpec, Workspace};
use ringfence_tools::{CallScope, Session, SpillStore};

use crate::config::Config;

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

/// Makes the scope of each user's sessions.
pub struct Sessions {
    roots: Vec<RootSlot>,
    /// The configured denylist patterns (per-user roots get them too).
    denylist: Vec<String>,
    data_dir: std::path::PathBuf,
    /// `<data dir>/tool-output/<configuration key>`: one directory per user beneath.
    spill_base: std::path::PathBuf,
    client_roots: ClientRoots,
    /// Each user's roots and spill store, made on their first session and kept.
    users: std::sync::Mutex<std::collections::HashMap<String, UserRoots>>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("roots", &self.roots.len())
            .finish_non_exhaustive()
    }
}

impl Sessions {
    pub fn new(config: &Config) -> Result<Sessions, String> {
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
        Ok(Sessions {
            roots,
            denylist: config.denylist.clone(),
            data_dir: config.data_dir.clone(),
            spill_base,
            client_roots: config.client_roots,
            users: Default::default(),
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
    pub fn scope_for(&self, user: &str) -> Result<CallScope, String> {
        let (roots, spill) = self.user_parts(user)?;
        let ws = Workspace::new(roots)
            .map_err(|e| e.to_string())?
            .with_internal_root(spill.root().clone())
            // Client roots (`extend`) never reach ringfence's own data.
            .with_protected_path(&self.data_dir);
        let session = Session::new(ws)
            .with_client_roots(self.client_roots)
            .with_user(user);
        Ok(CallScope {
            session: Arc::new(session),
            spill,
        })
    }

    /// What the MCP client's roots may do (the configured policy).
    pub fn client_roots(&self) -> ClientRoots {
        self.client_roots
    }

    /// A fresh scope for the local user (stdio, `ringfence call`).
    pub fn local(&self) -> Result<CallScope, String> {
        self.scope_for(ringfence_tools::LOCAL_USER)
    }

    /// Deletes saved outputs older than the retention period (every user's).
    /// Every configuration's, not only this one's: a directory whose configuration is gone
    /// (or whose key was made by an older ringfence) would otherwise keep full tool outputs
    /// forever.
    pub fn prune_spill(&self, days: u64) {
        let all = self
            .spill_base
            .parent()
            .map_or_else(|| self.spill_base.clone(), |p| p.to_path_buf());
        let Ok(base) = spill_store(all) else {
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
    // Each part length-prefixed, so no two configurations hash the same bytes.
    let mut h = blake3::Hasher::new();
    let mut part = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    for r in roots {
        part(r.path.as_os_str().as_encoded_bytes());
        part(r.access.as_str().as_bytes());
    }
    for d in denylist {
        part(d.as_bytes());
    }
    h.finalize().to_hex()[..16].to_owned()
}
