//! A session's view of its roots: which roots exist, which is current, and path resolution.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cap_fs_ext::DirExt;
use cap_std::fs::Dir;

use crate::error::{FsError, FsErrorKind, FsResult};
use crate::root::{Lookup, Root};
use crate::target::{EntryKind, Target, TargetState};

/// Longest path string accepted (Linux `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;
/// Symbolic links followed in one resolution before giving up (Linux's limit).
pub const MAX_SYMLINKS: usize = 40;
/// Longest single path component (Linux `NAME_MAX`, in bytes).
const MAX_NAME_BYTES: usize = 255;

/// The roots a session may reach and which one relative paths are resolved against.
///
/// Cheap to clone per session: roots are shared, the current index is per workspace.
#[derive(Debug)]
pub struct Workspace {
    roots: Vec<Arc<Root>>,
    /// Roots the agent may read but never sees listed as a workspace (spilled output).
    internal: Vec<Arc<Root>>,
    current: AtomicUsize,
}

impl Clone for Workspace {
    fn clone(&self) -> Self {
        Workspace {
            roots: self.roots.clone(),
            internal: self.internal.clone(),
            current: AtomicUsize::new(self.current.load(Ordering::Relaxed)),
        }
    }
}

/// A path split into where it starts and the components to walk.
enum Anchor<'r> {
    Root(&'r Arc<Root>),
    /// An internal root, reached by an absolute path: readable, never writable by tools,
    /// whatever the root's own access level (ringfence itself writes there).
    Internal(&'r Arc<Root>),
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
        Ok(Workspace {
            roots,
            internal: Vec::new(),
            current: AtomicUsize::new(0),
        })
    }

    /// Adds a root that absolute paths may reach (read-only to tools) but that is never current.
    pub fn with_internal_root(mut self, root: Arc<Root>) -> Workspace {
        self.internal.push(root);
        self
    }

    pub fn roots(&self) -> &[Arc<Root>] {
        &self.roots
    }

    pub fn current_root(&self) -> &Arc<Root> {
        &self.roots[self
            .current
            .load(Ordering::Relaxed)
            .min(self.roots.len() - 1)]
    }

    /// Makes root number `index` current.
    pub fn set_current(&self, index: usize) -> bool {
        if index < self.roots.len() {
            self.current.store(index, Ordering::Relaxed);
            true
        } else {
            false
        }
    }

    /// Resolves `input` beneath a root, following symlinks that stay inside and refusing
    /// everything else. Every rejection is logged with the input and the reason.
    pub fn resolve(&self, input: &str) -> FsResult<Target> {
        let result = self.resolve_inner(input);
        if let Err(err) = &result
            && matches!(
                err.kind(),
                FsErrorKind::OutsideRoot
                    | FsErrorKind::Denied
                    | FsErrorKind::InvalidPath
                    | FsErrorKind::SymlinkLoop
            )
        {
            tracing::warn!(input = %input.escape_debug(), reason = %err.message(), "path rejected");
        }
        result
    }

    fn resolve_inner(&self, input: &str) -> FsResult<Target> {
        let (anchor, components) = self.anchor(input)?;
        let (root, internal) = match anchor {
            Anchor::Root(root) => (root, false),
            Anchor::Internal(root) => (root, true),
        };
        let mut target = resolve_beneath(root, input, components)?;
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

    fn anchor<'a>(&'a self, input: &str) -> FsResult<(Anchor<'a>, VecDeque<String>)> {
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
        let current = self.current_root();
        if input == "~" {
            return Ok((Anchor::Root(current), VecDeque::new()));
        }
        if let Some(rest) = input.strip_prefix("~/") {
            return Ok((Anchor::Root(current), split(rest)));
        }
        if input.starts_with('/') {
            let path = Path::new(input);
            let internal = self.internal.iter().map(|r| (r, true));
            // With nested roots the most specific one decides (its access level, its
            // denylist): the match that leaves the fewest components below its root.
            let mut best: Option<(Anchor<'a>, Vec<String>)> = None;
            // By spelling first; resolving aliases costs syscalls and is rarely needed.
            for lookup in [Lookup::Spelling, Lookup::Alias] {
                for (root, is_internal) in self
                    .roots
                    .iter()
                    .map(|r| (r, false))
                    .chain(internal.clone())
                {
                    // A root that cannot be opened cannot contain the path; keep looking, and
                    // report a missing root only when nothing else matches.
                    match root.relative_components(path, lookup) {
                        Ok(Some(comps)) => {
                            if best.as_ref().is_some_and(|(_, b)| b.len() <= comps.len()) {
                                continue;
                            }
                            let anchor = if is_internal {
                                Anchor::Internal(root)
                            } else {
                                Anchor::Root(root)
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
        Ok((Anchor::Root(current), split(input)))
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
                Err(err)
                    if matches!(
                        err.raw_os_error(),
                        Some(code) if code == rustix::io::Errno::INVAL.raw_os_error()
                            || code == rustix::io::Errno::NOENT.raw_os_error()
                    ) =>
                {
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
