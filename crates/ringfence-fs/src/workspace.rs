//! A session's view of its roots: which roots exist, which is current, and path resolution.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::RwLock;

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

use crate::error::{ClientRootsError, FsError, FsErrorKind, FsResult};
use crate::os_error::OsError;
use crate::root::{Lookup, Root};
use crate::target::{EntryKind, Target, TargetState};

/// Longest path string accepted (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Symbolic links followed in one resolution before giving up (Linux's limit).
pub const MAX_SYMLINKS: usize = 40;
/// Longest single path component (Linux `NAME_MAX`, in bytes).
const MAX_NAME_BYTES: usize = 255;

/// The roots a session may reach and which directory relative paths are resolved against.
///
/// Roots are shared between sessions; the current workspace (a root, or a directory inside
/// one) is per workspace value.
#[derive(Debug)]
pub struct Workspace {
    state: RwLock<State>,
    /// The roots as configured, before any narrowing by the client.
    configured: Arc<[Arc<Root>]>,
    /// Roots the agent may read but never sees listed as a workspace (spilled output).
    internal: Vec<Arc<Root>>,
    /// Places a client root may never be added at, inside or around (ringfence's data
    /// directory), whatever the client-roots policy.
    protected: Arc<[std::path::PathBuf]>,
}

#[derive(Debug, Clone)]
struct State {
    roots: Arc<[Arc<Root>]>,
    /// Index into `roots` of the root holding the current workspace.
    current: usize,
    /// The current workspace, relative to that root (resolved, `/`-separated; empty for the
    /// root itself).
    base: String,
    /// Set when nothing is reachable (the client's roots do not overlap the configured
    /// ones): every resolution fails with this reason.
    blocked: Option<String>,
}

/// How the roots a client announces (MCP `roots/list`) affect the configured ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ClientRoots {
    /// Use the configured roots whatever the client says.
    Ignore,
    /// Keep only what lies inside both the configured roots and the client's (default).
    #[default]
    Narrow,
    /// Like `Narrow`, and also add client roots outside every configured one, read-only.
    /// Only when the operator opted in: it lets the client widen access (never to a
    /// protected path such as ringfence's data directory).
    Extend,
    /// Like `Extend`, but the added roots are writable (the operator's explicit opt-in).
    ExtendWrite,
}

impl ClientRoots {
    pub fn parse(s: &str) -> Result<ClientRoots, ClientRootsError> {
        match s {
            "ignore" => Ok(ClientRoots::Ignore),
            "narrow" => Ok(ClientRoots::Narrow),
            "extend" => Ok(ClientRoots::Extend),
            "extend-write" => Ok(ClientRoots::ExtendWrite),
            other => Err(ClientRootsError::Unknown {
                value: other.to_owned(),
            }),
        }
    }

    /// The spelling the configuration uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ClientRoots::Ignore => "ignore",
            ClientRoots::Narrow => "narrow",
            ClientRoots::Extend => "extend",
            ClientRoots::ExtendWrite => "extend-write",
        }
    }

    /// Whether client roots outside every configured root are added (`extend`,
    /// `extend-write`).
    pub fn extends(self) -> bool {
        matches!(self, ClientRoots::Extend | ClientRoots::ExtendWrite)
    }
}

impl Clone for Workspace {
    fn clone(&self) -> Self {
        Workspace {
            state: RwLock::new(self.state()),
            configured: self.configured.clone(),
            internal: self.internal.clone(),
            protected: self.protected.clone(),
        }
    }
}

/// The current workspace: the root that holds it and the directory inside that root.
#[derive(Debug, Clone)]
pub struct CurrentDir {
    pub root: Arc<Root>,
    /// Root-relative, empty for the root itself.
    pub rel: String,
}

impl CurrentDir {
    /// The absolute path as the user spelled the root, for showing to the model.
    pub fn absolute(&self) -> std::path::PathBuf {
        join_abs(self.root.absolute_path(), &self.rel)
    }
}

/// `root` joined with a root-relative path (no trailing separator for the root itself).
pub(crate) fn join_abs(root: &Path, rel: &str) -> std::path::PathBuf {
    if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

/// A path split into where it starts and the components to walk.
enum Anchor {
    Root(Arc<Root>),
    /// An internal root, reached by an absolute path: readable, never writable by tools,
    /// whatever the root's own access level (ringfence itself writes there).
    Internal(Arc<Root>),
}

/// Whether resolution follows a symbolic link in the last component.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    Follow,
    /// The entry itself: a final symlink is the result (state `Exists(Symlink)`).
    NoFollow,
}

impl Workspace {
    /// A workspace over `roots` (at least one); the first is current.
    pub fn new(roots: Vec<Arc<Root>>) -> FsResult<Workspace> {
        if roots.is_empty() {
            return Err(FsError::new(
                FsErrorKind::InvalidPath,
                "",
                "a workspace needs at least one root",
            ));
        }
        let roots: Arc<[Arc<Root>]> = roots.into();
        Ok(Workspace {
            state: RwLock::new(State {
                roots: roots.clone(),
                current: 0,
                base: String::new(),
                blocked: None,
            }),
            configured: roots,
            internal: Vec::new(),
            protected: Arc::new([]),
        })
    }

    /// Adds a root that absolute paths may reach (read-only to tools) but that is never current.
    pub fn with_internal_root(mut self, root: Arc<Root>) -> Workspace {
        self.internal.push(root);
        self
    }

    /// Protects `path` (ringfence's data directory): no client root equal to it, inside it
    /// or containing it is ever added, whatever the client-roots policy. The internal roots
    /// are protected too.
    pub fn with_protected_path(mut self, path: &Path) -> Workspace {
        let mut all = self.protected.to_vec();
        all.push(crate::root::normalize_lexically(path));
        self.protected = all.into();
        self
    }

    /// Whether `path` is, lies inside or contains a protected path or an internal root.
    fn touches_protected(&self, path: &Path) -> bool {
        self.protected
            .iter()
            .map(|p| p.as_path())
            .chain(self.internal.iter().map(|r| r.absolute_path()))
            .any(|p| crate::root::paths_overlap(path, p))
    }

    fn state(&self) -> State {
        self.state.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The roots, in configuration order.
    pub fn roots(&self) -> Arc<[Arc<Root>]> {
        self.state().roots
    }

    /// The root that holds the current workspace.
    pub fn current_root(&self) -> Arc<Root> {
        let st = self.state();
        st.roots[st.current.min(st.roots.len() - 1)].clone()
    }

    /// The current workspace: relative paths are resolved against it.
    pub fn current(&self) -> CurrentDir {
        let st = self.state();
        CurrentDir {
            root: st.roots[st.current.min(st.roots.len() - 1)].clone(),
            rel: st.base,
        }
    }

    /// Makes root number `index` the current workspace.
    pub fn set_current(&self, index: usize) -> bool {
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        if index < st.roots.len() {
            st.current = index;
            st.base.clear();
            true
        } else {
            false
        }
    }

    /// Makes the directory `target` (resolved by this workspace) the current workspace. It
    /// must be an existing directory inside one of the roots (not ringfence's internal
    /// storage).
    pub fn switch_to(&self, target: &Target) -> FsResult<CurrentDir> {
        if !target.exists() {
            return Err(FsError::new(
                FsErrorKind::NotFound,
                target.input(),
                format!(
                    "{}: no such directory; create it with create_folder first, or pick an existing one (list_directory shows them)",
                    target.input()
                ),
            ));
        }
        if !target.is_dir() {
            return Err(FsError::new(
                FsErrorKind::NotADirectory,
                target.input(),
                format!(
                    "{}: is not a directory; a workspace must be a directory",
                    target.input()
                ),
            ));
        }
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        let Some(index) = st.roots.iter().position(|r| Arc::ptr_eq(r, target.root())) else {
            return Err(FsError::new(
                FsErrorKind::OutsideRoot,
                target.input(),
                format!(
                    "{}: not inside a configured directory; call file_access_info to see which directories can be used",
                    target.input()
                ),
            ));
        };
        if target.is_read_only_view() {
            return Err(FsError::new(
                FsErrorKind::OutsideRoot,
                target.input(),
                format!(
                    "{}: ringfence's internal storage cannot be a workspace",
                    target.input()
                ),
            ));
        }
        st.current = index;
        st.base = target.rel().to_owned();
        Ok(CurrentDir {
            root: st.roots[index].clone(),
            rel: st.base.clone(),
        })
    }

    /// Replaces the roots (MCP roots narrowing them, for instance). The current workspace
    /// becomes the first root.
    pub fn replace_roots(&self, roots: Vec<Arc<Root>>) -> FsResult<()> {
        if roots.is_empty() {
            return Err(FsError::new(
                FsErrorKind::InvalidPath,
                "",
                "a workspace needs at least one root",
            ));
        }
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        st.roots = roots.into();
        st.current = 0;
        st.base.clear();
        st.blocked = None;
        Ok(())
    }

    /// Makes every resolution fail with `reason` (fail closed) until roots are applied.
    pub fn block(&self, reason: String) {
        self.state
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .blocked = Some(reason);
    }

    /// Why nothing is reachable, when the client's roots left no directory.
    pub fn blocked(&self) -> Option<String> {
        self.state().blocked
    }

    /// Applies the roots a client announced (absolute paths) to the configured roots, per
    /// `policy`, and returns the effective roots' paths. Narrowing never widens: a client
    /// root inside a configured root becomes a root of its own (same access, same denylist,
    /// opened through the configured root's handle, so a symlink cannot lead it out); a
    /// configured root inside a client root stays whole; everything else is dropped — or,
    /// under `extend`/`extend-write`, added as a root of its own (read-only/writable) unless
    /// it is, lies inside or contains a protected path or an internal root. When nothing is
    /// left, every call fails until the client announces usable roots.
    pub fn apply_client_roots(
        &self,
        client: &[std::path::PathBuf],
        policy: ClientRoots,
    ) -> Vec<std::path::PathBuf> {
        if policy == ClientRoots::Ignore {
            return self
                .roots()
                .iter()
                .map(|r| r.absolute_path().to_path_buf())
                .collect();
        }
        let client: Vec<std::path::PathBuf> = client
            .iter()
            .filter(|c| c.is_absolute())
            .map(|c| crate::root::normalize_lexically(c))
            .collect();
        let mut effective: Vec<Arc<Root>> = Vec::new();
        let mut used = vec![false; client.len()];
        // Configured roots inside a client root stay whole.
        for root in self.configured.iter() {
            let covered: Vec<usize> = (0..client.len())
                .filter(|&i| root.absolute_path().starts_with(&client[i]))
                .collect();
            if !covered.is_empty() {
                effective.push(root.clone());
                for i in covered {
                    used[i] = true;
                }
            }
        }
        // A client root inside configured roots becomes a sub-root of the deepest of them
        // (its access level, its denylist), unless it is that root itself.
        for (i, c) in client.iter().enumerate() {
            let mut best: Option<(&Arc<Root>, Vec<String>)> = None;
            for root in self.configured.iter() {
                let comps = match root.relative_components(c, Lookup::Spelling) {
                    Ok(Some(comps)) => Some(comps),
                    Ok(None) => root.relative_components(c, Lookup::Alias).ok().flatten(),
                    Err(_) => None,
                };
                if let Some(comps) = comps
                    && best.as_ref().is_none_or(|(_, b)| comps.len() < b.len())
                {
                    best = Some((root, comps));
                }
            }
            let Some((root, comps)) = best else { continue };
            used[i] = true;
            if comps.is_empty() || effective.iter().any(|r| Arc::ptr_eq(r, root)) {
                // The configured root itself, or one already kept whole.
                if !effective.iter().any(|r| Arc::ptr_eq(r, root)) {
                    effective.push(root.clone());
                }
                continue;
            }
            let input = c.display().to_string();
            let sub = resolve_beneath(root, &input, comps.into(), Last::Follow).and_then(|t| {
                if t.is_dir() && !root.denylist().is_denied(t.rel(), true) {
                    if t.rel().is_empty() {
                        Ok(root.clone())
                    } else {
                        Root::subroot(&t).map(Arc::new)
                    }
                } else {
                    Err(FsError::new(
                        FsErrorKind::NotADirectory,
                        &input,
                        "not a usable directory",
                    ))
                }
            });
            match sub {
                Ok(r) => effective.push(r),
                Err(e) => {
                    tracing::warn!(root = %input.escape_debug(), reason = %e.message().escape_debug(), "client root inside a configured root is not usable; ignored");
                }
            }
        }
        if policy.extends() {
            let denylist = self
                .configured
                .first()
                .map(|r| r.denylist_arc())
                .unwrap_or_default();
            // Added roots are read-only unless the operator said `extend-write`.
            let access = if policy == ClientRoots::ExtendWrite {
                crate::root::Access::ReadWrite
            } else {
                crate::root::Access::ReadOnly
            };
            for (i, c) in client.iter().enumerate() {
                // Never re-add a place inside a configured root (one that is missing right
                // now, say): that would bypass its access level.
                if used[i]
                    || self
                        .configured
                        .iter()
                        .any(|r| c.starts_with(r.absolute_path()))
                {
                    continue;
                }
                // Never ringfence's own data (earlier file versions, every user's saved
                // outputs, memories), nor a directory holding it.
                if self.touches_protected(c) {
                    tracing::warn!(
                        "client root refused: it is, lies inside or contains ringfence's data directory"
                    );
                    continue;
                }
                let spec = crate::root::RootSpec::configured(c.clone(), access);
                let Ok(r) = Root::new(spec, denylist.clone()) else {
                    continue;
                };
                // Open it now, so the directory every later call uses is the one judged
                // here, and judge it again by where it really is (a symlink's target).
                match r.canonical() {
                    Ok(real) if !self.touches_protected(&real) => effective.push(Arc::new(r)),
                    Ok(_) => tracing::warn!(
                        "client root refused: it leads to, into or around ringfence's data directory"
                    ),
                    Err(e) => {
                        tracing::warn!(reason = %e.message().escape_debug(), "client root outside the configured roots is not usable; ignored")
                    }
                }
            }
        }
        let mut st = self.state.write().unwrap_or_else(|e| e.into_inner());
        if effective.is_empty() {
            tracing::warn!(
                client_roots = client.len(),
                "the client's roots do not overlap any configured root; every call will fail"
            );
            st.blocked = Some(
                "no directory is available: the MCP client's roots do not overlap the directories ringfence is configured to use. Ask the user to open a folder inside a configured directory".into(),
            );
            return Vec::new();
        }
        let paths = effective
            .iter()
            .map(|r| r.absolute_path().to_path_buf())
            .collect();
        st.roots = effective.into();
        st.current = 0;
        st.base.clear();
        st.blocked = None;
        paths
    }

    /// Whether `target` is the current workspace or a directory that contains it (so moving
    /// or deleting it would leave the session without a workspace).
    pub fn holds_current(&self, target: &Target) -> bool {
        let cur = self.current();
        Arc::ptr_eq(&cur.root, target.root())
            && (target.rel().is_empty()
                || cur.rel == target.rel()
                || cur
                    .rel
                    .strip_prefix(target.rel())
                    .is_some_and(|r| r.starts_with('/')))
    }

    /// Resolves `input` beneath a root, following symlinks that stay inside and refusing
    /// everything else. Every rejection is logged with the input and the reason.
    pub fn resolve(&self, input: &str) -> FsResult<Target> {
        self.resolve_logged(input, Last::Follow)
    }

    /// Like [`resolve`](Self::resolve), but a symbolic link in the last component is not
    /// followed: the target is the link itself (for deleting, moving or describing it).
    /// Links earlier on the path are followed as usual.
    pub fn resolve_entry(&self, input: &str) -> FsResult<Target> {
        self.resolve_logged(input, Last::NoFollow)
    }

    fn resolve_logged(&self, input: &str, last: Last) -> FsResult<Target> {
        if let Some(reason) = self.state().blocked {
            return Err(FsError::new(FsErrorKind::OutsideRoot, input, reason));
        }
        let result = self.resolve_inner(input, last);
        if let Err(err) = &result
            && matches!(
                err.kind(),
                FsErrorKind::OutsideRoot
                    | FsErrorKind::Denied
                    | FsErrorKind::InvalidPath
                    | FsErrorKind::SymlinkLoop
            )
        {
            tracing::warn!(input = %input.escape_debug(), reason = %err.message().escape_debug(), "path rejected");
        }
        result
    }

    fn resolve_inner(&self, input: &str, last: Last) -> FsResult<Target> {
        let (anchor, components) = self.anchor(input)?;
        let (root, internal) = match anchor {
            Anchor::Root(root) => (root, false),
            Anchor::Internal(root) => (root, true),
        };
        let mut root = root;
        let mut target = resolve_beneath(&root, input, components, last)?;
        // Where roots nest, the most specific one decides (its access level, its denylist),
        // however the path was spelled: `vendor/x` typed relative to `~/proj` lands in the
        // read-only root `~/proj/vendor` just as `/home/me/proj/vendor/x` does.
        if !internal && let Some((inner, comps)) = self.deeper_root(&root, target.rel()) {
            target = resolve_beneath(&inner, input, comps, last)?;
            root = inner;
        }
        let root = &root;
        if internal {
            // The documented contract of `with_internal_root`: tools may read spilled output
            // but never write there, even though the root itself is read-write.
            target.set_read_only();
        }
        let is_dir = matches!(target.state(), TargetState::Exists(EntryKind::Dir));
        if root.denylist().is_denied(target.rel(), is_dir) {
            return Err(FsError::new(
                FsErrorKind::Denied,
                input,
                format!("{input}: access to this path is blocked by the denylist"),
            ));
        }
        Ok(target)
    }

    /// A root nested inside `root` that holds the resolved location `rel` of `root`, with
    /// the components of that location below it: the deepest such root; between two roots
    /// at the same place, a read-only one over a read-write one.
    fn deeper_root(&self, root: &Arc<Root>, rel: &str) -> Option<(Arc<Root>, VecDeque<String>)> {
        let st = self.state();
        if st.roots.len() < 2 {
            return None;
        }
        let base = root.canonical().ok()?;
        let location = if rel.is_empty() {
            base.clone()
        } else {
            base.join(rel)
        };
        let mut best: Option<(Arc<Root>, std::path::PathBuf)> = None;
        for other in st.roots.iter() {
            if Arc::ptr_eq(other, root) {
                continue;
            }
            let Ok(canon) = other.canonical() else {
                continue;
            };
            if !location.starts_with(&canon) || !canon.starts_with(&base) {
                continue;
            }
            let same_place = canon == base;
            if same_place
                && !(other.access() == crate::root::Access::ReadOnly
                    && root.access() == crate::root::Access::ReadWrite)
            {
                continue;
            }
            if best
                .as_ref()
                .is_some_and(|(_, b)| b.components().count() >= canon.components().count())
            {
                continue;
            }
            best = Some((other.clone(), canon));
        }
        let (inner, canon) = best?;
        let rest = location.strip_prefix(&canon).ok()?;
        let comps = rest
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        Some((inner, comps))
    }

    fn anchor(&self, input: &str) -> FsResult<(Anchor, VecDeque<String>)> {
        if input.is_empty() {
            return Err(FsError::new(
                FsErrorKind::InvalidPath,
                input,
                "the path is empty; pass a workspace-relative path such as `notes/todo.md`, or `~` for the workspace root",
            ));
        }
        if input.contains('\0') {
            return Err(FsError::new(
                FsErrorKind::InvalidPath,
                input.replace('\0', "\\0"),
                "the path contains a NUL byte; remove it",
            ));
        }
        if input.len() > MAX_PATH_BYTES {
            return Err(FsError::new(
                FsErrorKind::InvalidPath,
                format!("{}…", truncate_chars(input, 64)),
                format!(
                    "the path is {} bytes long; paths are limited to {MAX_PATH_BYTES} bytes",
                    input.len()
                ),
            ));
        }
        let st = self.state();
        let current = st.roots[st.current.min(st.roots.len() - 1)].clone();
        // Relative paths and `~` start at the current workspace, which may be a directory
        // inside the root: its components come first, so `..` can still climb to the root.
        let relative = |rest: &str| -> VecDeque<String> {
            let mut comps = split(&st.base);
            comps.extend(split(rest));
            comps
        };
        if input == "~" {
            return Ok((Anchor::Root(current), relative("")));
        }
        if let Some(rest) = input.strip_prefix("~/") {
            return Ok((Anchor::Root(current), relative(rest)));
        }
        if input.starts_with('/') {
            let path = Path::new(input);
            let internal = self.internal.iter().map(|r| (r, true));
            // With nested roots the most specific one decides (its access level, its
            // denylist): the match that leaves the fewest components below its root.
            let mut best: Option<(Anchor, Vec<String>)> = None;
            // By spelling first; resolving aliases costs syscalls and is rarely needed.
            for lookup in [Lookup::Spelling, Lookup::Alias] {
                for (root, is_internal) in
                    st.roots.iter().map(|r| (r, false)).chain(internal.clone())
                {
                    // A root that cannot be opened cannot contain the path; keep looking, and
                    // report a missing root only when nothing else matches.
                    match root.relative_components(path, lookup) {
                        Ok(Some(comps)) => {
                            if best.as_ref().is_some_and(|(_, b)| b.len() <= comps.len()) {
                                continue;
                            }
                            let anchor = if is_internal {
                                Anchor::Internal(root.clone())
                            } else {
                                Anchor::Root(root.clone())
                            };
                            best = Some((anchor, comps));
                        }
                        Ok(None) => {}
                        Err(err) if err.kind() == FsErrorKind::RootMissing => {}
                        Err(err) => return Err(err),
                    }
                }
                if best.is_some() {
                    break;
                }
            }
            if let Some((anchor, comps)) = best {
                return Ok((anchor, comps.into()));
            }
            // If the current root is missing, say so: that is the actionable problem.
            current
                .dir()
                .map_err(|e| FsError::new(e.kind(), input, e.message()))?;
            return Err(FsError::new(
                FsErrorKind::OutsideRoot,
                input,
                format!(
                    "{input}: absolute paths are accepted only inside the workspace; \
                     use a workspace-relative path such as `notes/todo.md`"
                ),
            ));
        }
        Ok((Anchor::Root(current), relative(input)))
    }
}

fn truncate_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn split(rest: &str) -> VecDeque<String> {
    rest.split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .map(str::to_owned)
        .collect()
}

fn outside(input: &str, why: &str) -> FsError {
    FsError::new(
        FsErrorKind::OutsideRoot,
        input,
        format!("{input}: {why}; only paths inside the workspace can be used"),
    )
}

/// Walks `components` from the root's directory handle, one kernel operation per component,
/// each relative to the handle of the directory before it. Nothing here touches an ambient
/// path except [`Root::relative_components`] for absolute symlink targets.
fn resolve_beneath(
    root: &Arc<Root>,
    input: &str,
    mut pending: VecDeque<String>,
    last: Last,
) -> FsResult<Target> {
    let root_dir = root
        .dir()
        .map_err(|e| FsError::new(e.kind(), input, e.message()))?;
    // dirs[0] is the root; dirs[i] is the directory named names[i-1] inside dirs[i-1].
    let mut dirs: Vec<Arc<Dir>> = vec![root_dir.clone()];
    let mut names: Vec<String> = Vec::new();
    let mut links = 0usize;

    while let Some(comp) = pending.pop_front() {
        if comp == "." {
            continue;
        }
        if comp == ".." {
            if names.pop().is_none() {
                return Err(outside(input, "`..` leads above the root"));
            }
            dirs.pop();
            continue;
        }
        let cur = dirs.last().expect("root always on the stack").clone();
        let is_last = pending.iter().all(|c| c == ".");
        let meta = match cur.symlink_metadata(&comp) {
            Ok(meta) => meta,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                match missing_tail(root, input, &mut dirs, &names, comp, &mut pending)? {
                    Some(target) => return Ok(target),
                    None => continue,
                }
            }
            Err(err) => return Err(FsError::from_io(input, err)),
        };
        let ft = meta.file_type();
        if ft.is_symlink() && is_last && last == Last::NoFollow {
            let rel = join(&names, Some(&comp));
            if root.denylist().is_denied(&rel, false) {
                return Err(FsError::new(
                    FsErrorKind::Denied,
                    input,
                    format!("{input}: access to this path is blocked by the denylist"),
                ));
            }
            return Ok(Target::new(
                root.clone(),
                input,
                rel,
                Some(cur),
                OsString::from(comp),
                TargetState::Exists(EntryKind::Symlink),
                Vec::new(),
            ));
        }
        // Every real entry the resolution passes through is checked against the denylist, not
        // only the end point: otherwise `secrets/k.txt/../../x` would answer "is a file" and
        // reveal what a denied directory holds.
        if !ft.is_symlink() && !root.denylist().is_empty() {
            let here = join(&names, Some(&comp));
            if root.denylist().is_denied(&here, ft.is_dir()) {
                return Err(FsError::new(
                    FsErrorKind::Denied,
                    input,
                    format!("{input}: access to this path is blocked by the denylist"),
                ));
            }
        }
        if ft.is_symlink() {
            links += 1;
            if links > MAX_SYMLINKS {
                return Err(FsError::new(
                    FsErrorKind::SymlinkLoop,
                    input,
                    format!("{input}: too many levels of symbolic links (a symlink loop?)"),
                ));
            }
            let target = match cur.read_link_contents(&comp) {
                Ok(target) => target,
                // Replaced between lstat and readlink (EINVAL: no longer a symlink; ENOENT:
                // gone). Look again, like a failed directory open below; the symlink budget
                // bounds the retries. Anything else is a real error.
                Err(err) if OsError::Invalid.is(&err) || OsError::NotFound.is(&err) => {
                    pending.push_front(comp);
                    continue;
                }
                Err(err) => return Err(FsError::from_io(input, err)),
            };
            // A lossy conversion could name a different file: refuse instead.
            let Some(target_str) = target.to_str().map(str::to_owned) else {
                return Err(FsError::new(
                    FsErrorKind::InvalidPath,
                    input,
                    format!(
                        "{input}: a symbolic link on this path has a target that is not valid UTF-8"
                    ),
                ));
            };
            let mut spliced: VecDeque<String> = if target.is_absolute() {
                let comps = match root.relative_components(&target, Lookup::Spelling)? {
                    Some(c) => Some(c),
                    None => root.relative_components(&target, Lookup::Alias)?,
                };
                match comps {
                    Some(comps) => {
                        dirs.truncate(1);
                        names.clear();
                        comps.into()
                    }
                    None => {
                        return Err(outside(
                            input,
                            "a symbolic link on this path points outside the workspace",
                        ));
                    }
                }
            } else {
                split(&target_str)
            };
            if target_str.is_empty() {
                return Err(FsError::new(
                    FsErrorKind::NotFound,
                    input,
                    format!("{input}: empty symbolic link"),
                ));
            }
            spliced.extend(pending.drain(..));
            pending = spliced;
            continue;
        }
        if is_last {
            let kind = EntryKind::from_file_type(ft);
            return Ok(Target::new(
                root.clone(),
                input,
                join(&names, Some(&comp)),
                Some(cur),
                OsString::from(comp),
                TargetState::Exists(kind),
                Vec::new(),
            ));
        }
        if !ft.is_dir() {
            return Err(FsError::new(
                FsErrorKind::NotADirectory,
                input,
                format!(
                    "{input}: `{}` is a file, not a directory",
                    join(&names, Some(&comp))
                ),
            ));
        }
        match cur.open_dir_nofollow(&comp) {
            Ok(dir) => {
                dirs.push(Arc::new(dir));
                names.push(comp);
            }
            Err(err) => {
                // Swapped for a symlink between lstat and open: look again (bounded by the
                // symlink budget, so a hostile swapper cannot keep us here forever).
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(FsError::from_io(input, err));
                }
                pending.push_front(comp);
            }
        }
    }
    // Ended on a directory reached by `..`, `.`, or nothing at all.
    let state = TargetState::Exists(EntryKind::Dir);
    match names.pop() {
        None => Ok(Target::new(
            root.clone(),
            input,
            String::new(),
            None,
            OsString::new(),
            state,
            Vec::new(),
        )),
        Some(name) => {
            dirs.pop();
            let parent = dirs.pop().expect("parent of a named directory");
            Ok(Target::new(
                root.clone(),
                input,
                join(&names, Some(&name)),
                Some(parent),
                OsString::from(name),
                state,
                Vec::new(),
            ))
        }
    }
}

/// The rest of the path does not exist yet: normalise it lexically (nothing there can be a
/// symlink). Returns the missing target, or `None` when a `..` climbs back out of the missing
/// part: the caller then goes on resolving `pending` from the directory on top of its stack
/// (the remainder may name symlinks again). No recursion: one loop, one symlink budget.
fn missing_tail(
    root: &Arc<Root>,
    input: &str,
    dirs: &mut Vec<Arc<Dir>>,
    names: &[String],
    first: String,
    pending: &mut VecDeque<String>,
) -> FsResult<Option<Target>> {
    let denylist = root.denylist();
    // Missing names are checked against the denylist too (as file and as directory, since
    // nothing says which they would be): `x.env/..` must answer like `.env/..`.
    let check = |tail: &[String]| -> FsResult<()> {
        if denylist.is_empty() {
            return Ok(());
        }
        let mut parts = names.to_vec();
        parts.extend(tail.iter().cloned());
        let here = parts.join("/");
        if denylist.is_denied(&here, false) || denylist.is_denied(&here, true) {
            return Err(FsError::new(
                FsErrorKind::Denied,
                input,
                format!("{input}: access to this path is blocked by the denylist"),
            ));
        }
        Ok(())
    };
    let mut tail: Vec<String> = vec![first];
    check(&tail)?;
    while let Some(comp) = pending.pop_front() {
        match comp.as_str() {
            "." => {}
            ".." => {
                tail.pop();
                if tail.is_empty() {
                    return Ok(None);
                }
            }
            _ => {
                tail.push(comp);
                check(&tail)?;
            }
        }
    }
    // The kernel never sees these names during resolution (they do not exist yet), so check
    // their length here. Otherwise an over-long name is only refused by the final rename,
    // after `create_parents` has already created the directories before it.
    if let Some(long) = tail.iter().find(|c| c.len() > MAX_NAME_BYTES) {
        return Err(FsError::new(
            FsErrorKind::InvalidPath,
            input,
            format!(
                "{input}: a path component is {} bytes long; names are limited to {MAX_NAME_BYTES} bytes",
                long.len()
            ),
        ));
    }
    let name = tail.pop().expect("non-empty tail");
    let mut rel_parts = names.to_vec();
    rel_parts.extend(tail.iter().cloned());
    let rel = join(&rel_parts, Some(&name));
    let parent = dirs.pop().expect("root always on the stack");
    Ok(Some(Target::new(
        root.clone(),
        input,
        rel,
        Some(parent),
        OsString::from(name),
        TargetState::Missing,
        tail,
    )))
}

fn join(names: &[String], last: Option<&str>) -> String {
    let mut out = names.join("/");
    if let Some(last) = last {
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(last);
    }
    out
}
