//! Contained, parallel directory walks.
//!
//! `ignore::WalkBuilder` lists directories by ambient path, so a directory swapped for a
//! symlink mid-walk would be entered. This walker opens every directory beneath its parent's
//! handle with `O_NOFOLLOW`, never follows symlinks, and uses `ignore`'s gitignore matchers
//! only for the rules (`.gitignore`, `.ignore`, `.git/info/exclude`, inside or outside a git
//! repository). The denylist prunes entries before anyone sees them.

use std::ffi::OsString;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, FileType, OpenOptions};
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::error::FsResult;
use crate::root::Root;
use crate::target::Target;

/// Ignore files larger than this are not read (a gitignore is never this big).
const MAX_IGNORE_FILE: u64 = 1 << 20;

/// How a walk treats ignore files and hidden entries.
#[derive(Debug, Clone)]
pub struct WalkOptions {
    /// Honour `.gitignore`, `.ignore` and `.git/info/exclude` (default: true).
    pub respect_ignore_files: bool,
    /// Skip `.git` directories (default: true).
    pub skip_vcs_dirs: bool,
    /// Worker threads (default: available parallelism, at least 1).
    pub threads: usize,
    /// Pass symbolic links to the visitor as entries (default: false). They are never
    /// followed either way.
    pub report_symlinks: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            respect_ignore_files: true,
            skip_vcs_dirs: true,
            threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            report_symlinks: false,
        }
    }
}

/// One entry found by a walk.
pub struct WalkEntry {
    /// Root-relative, `/`-separated path.
    pub rel: String,
    pub file_type: FileType,
    parent: Arc<Dir>,
    name: OsString,
}

impl WalkEntry {
    /// Opens the entry as a regular file for reading, beneath its parent, never following a
    /// symlink that may have replaced it since it was listed.
    pub fn open_file(&self) -> std::io::Result<File> {
        open_nofollow(&self.parent, &self.name)
    }

    pub fn is_dir(&self) -> bool {
        self.file_type.is_dir()
    }

    /// The entry's own metadata (a symlink's, not its target's).
    pub fn metadata(&self) -> std::io::Result<cap_std::fs::Metadata> {
        self.parent.symlink_metadata(&self.name)
    }

    /// A symbolic link's text (an error for anything else).
    pub fn read_link(&self) -> std::io::Result<std::path::PathBuf> {
        self.parent.read_link_contents(&self.name)
    }

    pub fn name(&self) -> &OsString {
        &self.name
    }
}

fn open_nofollow(dir: &Dir, name: &OsString) -> std::io::Result<File> {
    let mut opts = OpenOptions::new();
    opts.read(true).follow(FollowSymlinks::No);
    crate::target::nonblocking(&mut opts);
    let file = dir.open_with(name, &opts)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    Ok(file)
}

/// What the visitor wants next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalkState {
    Continue,
    /// Do not descend into this directory.
    Skip,
    /// Stop the whole walk.
    Quit,
}

/// Gitignore rules in force for a directory: its own files and its ancestors'.
struct IgnoreNode {
    parent: Option<Arc<IgnoreNode>>,
    /// Root-relative path of the directory these rules were read from.
    dir_rel: String,
    /// Most specific first: `.ignore`, then `.gitignore`, then `.git/info/exclude`.
    matchers: Vec<Gitignore>,
}

impl Drop for IgnoreNode {
    /// Drops the chain of ancestors iteratively: a tree thousands of directories deep, each
    /// with a .gitignore, would otherwise overflow the stack with nested drops.
    fn drop(&mut self) {
        let mut next = self.parent.take();
        while let Some(node) = next {
            next = match Arc::try_unwrap(node) {
                Ok(mut node) => node.parent.take(),
                Err(_) => None,
            };
        }
    }
}

impl IgnoreNode {
    fn is_ignored(self: &Arc<Self>, rel: &str, is_dir: bool) -> bool {
        let mut node = Some(self);
        while let Some(n) = node {
            if !n.matchers.is_empty() {
                let local = if n.dir_rel.is_empty() {
                    rel
                } else {
                    rel.strip_prefix(&n.dir_rel)
                        .map(|r| r.trim_start_matches('/'))
                        .unwrap_or(rel)
                };
                for m in &n.matchers {
                    match m.matched(local, is_dir) {
                        Match::Ignore(_) => return true,
                        Match::Whitelist(_) => return false,
                        Match::None => {}
                    }
                }
            }
            node = n.parent.as_ref();
        }
        false
    }
}

fn read_small(dir: &Dir, name: &str) -> Option<String> {
    let file = open_nofollow(dir, &OsString::from(name)).ok()?;
    let mut buf = String::new();
    file.take(MAX_IGNORE_FILE).read_to_string(&mut buf).ok()?;
    Some(buf)
}

fn build_matcher(text: &str) -> Option<Gitignore> {
    let mut b = GitignoreBuilder::new("");
    for line in text.lines() {
        let _ = b.add_line(None, line);
    }
    b.build().ok().filter(|g| !g.is_empty())
}

fn load_ignores(
    dir: &Dir,
    dir_rel: &str,
    parent: Option<Arc<IgnoreNode>>,
    opts: &WalkOptions,
) -> Option<Arc<IgnoreNode>> {
    if !opts.respect_ignore_files {
        return parent;
    }
    let mut matchers = Vec::new();
    for name in [".ignore", ".gitignore"] {
        if let Some(m) = read_small(dir, name).as_deref().and_then(build_matcher) {
            matchers.push(m);
        }
    }
    if let Ok(git) = dir.open_dir_nofollow(".git")
        && let Ok(info) = git.open_dir_nofollow("info")
        && let Some(m) = read_small(&info, "exclude")
            .as_deref()
            .and_then(build_matcher)
    {
        matchers.push(m);
    }
    if matchers.is_empty() {
        return parent;
    }
    Some(Arc::new(IgnoreNode {
        parent,
        dir_rel: dir_rel.to_owned(),
        matchers,
    }))
}

struct Work {
    dir: WorkDir,
    rel: String,
    ignores: Option<Arc<IgnoreNode>>,
}

enum WorkDir {
    Open(Arc<Dir>),
    /// Opened lazily so queued work holds only its parent's descriptor.
    Child(Arc<Dir>, OsString),
}

struct Queue {
    items: Vec<Work>,
    active: usize,
}

/// Walks the directory `start` (or visits the single file it names) with the visitor made by
/// `make_visitor` on each worker thread. Directories are passed to the visitor before they
/// are entered; `WalkState::Skip` prunes them. Symlinks are never followed or reported.
pub fn walk<F, V>(start: &Target, opts: &WalkOptions, make_visitor: F) -> FsResult<()>
where
    F: Fn() -> V + Sync,
    V: FnMut(&WalkEntry) -> WalkState,
{
    let root = start.root().clone();
    if !start.is_dir() {
        let (parent, name) = start.parent_and_name().ok_or_else(|| {
            crate::error::FsError::new(
                crate::error::FsErrorKind::NotFound,
                start.input(),
                format!("{}: not found", start.input()),
            )
        })?;
        let meta = start.metadata()?;
        let entry = WalkEntry {
            rel: start.rel().to_owned(),
            file_type: meta.file_type(),
            parent: parent.clone(),
            name: name.clone(),
        };
        let mut visit = make_visitor();
        visit(&entry);
        return Ok(());
    }
    let start_dir = start.open_dir()?;
    // Rules of the ancestors between the root and the start directory.
    let ignores = ancestor_ignores(start, opts)?;
    let queue = Mutex::new(Queue {
        items: vec![Work {
            dir: WorkDir::Open(start_dir),
            rel: start.rel().to_owned(),
            ignores,
        }],
        active: 0,
    });
    let cv = Condvar::new();
    let quit = AtomicBool::new(false);
    let threads = opts.threads.max(1);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut visit = make_visitor();
                worker(&root, opts, &queue, &cv, &quit, &mut visit);
            });
        }
    });
    Ok(())
}

fn worker<V>(
    root: &Arc<Root>,
    opts: &WalkOptions,
    queue: &Mutex<Queue>,
    cv: &Condvar,
    quit: &AtomicBool,
    visit: &mut V,
) where
    V: FnMut(&WalkEntry) -> WalkState,
{
    loop {
        let work = {
            let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                if quit.load(Ordering::Relaxed) {
                    cv.notify_all();
                    return;
                }
                if let Some(w) = q.items.pop() {
                    q.active += 1;
                    break w;
                }
                if q.active == 0 {
                    cv.notify_all();
                    return;
                }
                q = cv.wait(q).unwrap_or_else(|e| e.into_inner());
            }
        };
        let children = list_dir(root, opts, work, quit, visit);
        let mut q = queue.lock().unwrap_or_else(|e| e.into_inner());
        q.active -= 1;
        let had = !children.is_empty();
        q.items.extend(children);
        if had || q.active == 0 {
            cv.notify_all();
        }
    }
}

fn list_dir<V>(
    root: &Arc<Root>,
    opts: &WalkOptions,
    work: Work,
    quit: &AtomicBool,
    visit: &mut V,
) -> Vec<Work>
where
    V: FnMut(&WalkEntry) -> WalkState,
{
    let Some(dir) = open_work_dir(work.dir, &work.rel) else {
        return Vec::new();
    };
    let ignores = load_ignores(&dir, &work.rel, work.ignores, opts);
    let mut children = Vec::new();
    for walk_entry in read_entries(root, opts, &dir, &work.rel, &ignores) {
        if quit.load(Ordering::Relaxed) {
            break;
        }
        match visit(&walk_entry) {
            WalkState::Quit => {
                quit.store(true, Ordering::Relaxed);
                break;
            }
            WalkState::Skip => {}
            WalkState::Continue => {
                if walk_entry.is_dir() {
                    children.push(Work {
                        dir: WorkDir::Child(walk_entry.parent, walk_entry.name),
                        rel: walk_entry.rel,
                        ignores: ignores.clone(),
                    });
                }
            }
        }
    }
    // Visit in name order within a directory when popped (stack is LIFO).
    children.reverse();
    children
}

fn open_work_dir(dir: WorkDir, rel: &str) -> Option<Arc<Dir>> {
    match dir {
        WorkDir::Open(d) => Some(d),
        WorkDir::Child(parent, name) => match parent.open_dir_nofollow(&name) {
            Ok(d) => Some(Arc::new(d)),
            Err(err) => {
                tracing::debug!(dir = %rel.escape_debug(), error = %err, "skipping directory that could not be opened");
                None
            }
        },
    }
}

/// The entries of `dir` a walk may show: not denied, not ignored, no `.git` (if so
/// configured), no temporary files of atomic writes, symlinks only if asked for.
fn read_entries(
    root: &Arc<Root>,
    opts: &WalkOptions,
    dir: &Arc<Dir>,
    rel: &str,
    ignores: &Option<Arc<IgnoreNode>>,
) -> Vec<WalkEntry> {
    let entries = match dir.entries() {
        Ok(e) => e,
        Err(err) => {
            tracing::debug!(dir = %rel.escape_debug(), error = %err, "skipping unreadable directory");
            return Vec::new();
        }
    };
    let denylist = root.denylist();
    let mut out = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else { continue };
        let Ok(file_type) = entry.file_type() else {
            continue;
        };
        if file_type.is_symlink() && !opts.report_symlinks {
            continue;
        }
        let name = entry.file_name();
        let name_str = name.to_string_lossy();
        // In-flight (or, after a crash, abandoned) temporary files of atomic writes.
        if is_write_temp(&name_str) {
            continue;
        }
        let is_dir = file_type.is_dir();
        if is_dir && opts.skip_vcs_dirs && name_str == ".git" {
            continue;
        }
        let child_rel = if rel.is_empty() {
            name_str.into_owned()
        } else {
            format!("{rel}/{name_str}")
        };
        if denylist.is_denied_entry(&child_rel, is_dir) {
            continue;
        }
        if let Some(ig) = ignores
            && ig.is_ignored(&child_rel, is_dir)
        {
            continue;
        }
        out.push(WalkEntry {
            rel: child_rel,
            file_type,
            parent: dir.clone(),
            name,
        });
    }
    out
}

/// Walks the directory `start` on this thread, depth first, each directory's entries in
/// name order, a directory passed to `visit` right before its contents. `depth` is 1 for the
/// entries of `start`; with `max_depth` nothing deeper is listed. The same filtering as
/// [`walk`] applies. Memory is bounded by the entries still to visit along the current path.
pub fn walk_sorted(
    start: &Target,
    opts: &WalkOptions,
    max_depth: Option<usize>,
    visit: &mut dyn FnMut(&WalkEntry, usize) -> WalkState,
) -> FsResult<()> {
    let root = start.root().clone();
    let start_dir = start.open_dir()?;
    let ignores = ancestor_ignores(start, opts)?;
    let ignores = load_ignores(&start_dir, start.rel(), ignores, opts);
    let sorted = |dir: &Arc<Dir>, rel: &str, ig: &Option<Arc<IgnoreNode>>| {
        let mut entries = read_entries(&root, opts, dir, rel, ig);
        entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        entries.reverse(); // popped from the back
        entries
    };
    let mut stack: Vec<(Vec<WalkEntry>, Option<Arc<IgnoreNode>>)> =
        vec![(sorted(&start_dir, start.rel(), &ignores), ignores)];
    loop {
        let depth = stack.len();
        let Some((entries, ig)) = stack.last_mut() else {
            break;
        };
        let Some(entry) = entries.pop() else {
            stack.pop();
            continue;
        };
        match visit(&entry, depth) {
            WalkState::Quit => return Ok(()),
            WalkState::Skip => continue,
            WalkState::Continue => {}
        }
        if entry.is_dir() && max_depth.is_none_or(|m| depth < m) {
            let parent_ig = ig.clone();
            if let Some(dir) = open_work_dir(
                WorkDir::Child(entry.parent.clone(), entry.name.clone()),
                &entry.rel,
            ) {
                let child_ig = load_ignores(&dir, &entry.rel, parent_ig, opts);
                let children = sorted(&dir, &entry.rel, &child_ig);
                stack.push((children, child_ig));
            }
        }
    }
    Ok(())
}

/// Rules of the ancestors between the root and `start` (not `start`'s own).
fn ancestor_ignores(start: &Target, opts: &WalkOptions) -> FsResult<Option<Arc<IgnoreNode>>> {
    let mut ignores = None;
    if opts.respect_ignore_files && !start.rel().is_empty() {
        let mut dir = start.root().dir()?;
        let mut rel = String::new();
        ignores = load_ignores(&dir, "", None, opts);
        let comps: Vec<&str> = start.rel().split('/').collect();
        for comp in &comps[..comps.len() - 1] {
            match dir.open_dir_nofollow(comp) {
                Ok(d) => dir = Arc::new(d),
                Err(_) => break,
            }
            if !rel.is_empty() {
                rel.push('/');
            }
            rel.push_str(comp);
            ignores = load_ignores(&dir, &rel, ignores, opts);
        }
    }
    Ok(ignores)
}

/// Whether `name` is a temporary file of [`Target::write_atomic`](crate::Target::write_atomic).
pub(crate) fn is_write_temp(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".rftmp")
}
