//! Fixtures shared by the test modules: a workspace over one root, snapshots of a tree on
//! disk (to prove that nothing changed), and the listing of a walk.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ringfence_fs::{
    Access, Denylist, FsResult, Root, RootSpec, Target, WalkEntry, WalkOptions, WalkState,
    Workspace, walk,
};

/// A workspace whose only root is `root`, configured read-write, with these denylist
/// patterns (none: nothing denied).
pub fn one_root(root: &Path, deny: &[&str]) -> Workspace {
    let spec = RootSpec::configured(root.to_path_buf(), Access::ReadWrite);
    let deny = Arc::new(Denylist::new(deny).expect("denylist"));
    Workspace::new(vec![Arc::new(Root::new(spec, deny).expect("root"))]).expect("workspace")
}

/// One entry of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir,
    File(Vec<u8>),
    Link(PathBuf),
    Other,
}

/// Every entry under `dir` (never following symlinks), keyed by `/`-joined relative path,
/// skipping the subtree at `exclude` (relative to `dir`). Empty when `dir` does not exist.
pub fn snapshot(dir: &Path, exclude: Option<&str>) -> BTreeMap<String, Node> {
    let mut out = BTreeMap::new();
    if std::fs::symlink_metadata(dir).is_ok() {
        snap_into(dir, "", exclude, &mut out);
    }
    out
}

fn snap_into(dir: &Path, rel: &str, exclude: Option<&str>, out: &mut BTreeMap<String, Node>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd {
        let entry = entry.expect("read_dir entry");
        let name = entry.file_name().to_string_lossy().into_owned();
        let child_rel = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        if exclude == Some(child_rel.as_str()) {
            continue;
        }
        let path = entry.path();
        let ft = std::fs::symlink_metadata(&path).expect("lstat").file_type();
        let node = if ft.is_symlink() {
            Node::Link(std::fs::read_link(&path).expect("readlink"))
        } else if ft.is_dir() {
            snap_into(&path, &child_rel, exclude, out);
            Node::Dir
        } else if ft.is_file() {
            Node::File(std::fs::read(&path).expect("read"))
        } else {
            Node::Other
        };
        out.insert(child_rel, node);
    }
}

/// What changed between two snapshots, one line per entry (`removed`, `changed`, `created`).
pub fn diff(before: &BTreeMap<String, Node>, after: &BTreeMap<String, Node>) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => d.push(format!("removed {k}")),
            Some(w) if w != v => d.push(format!("changed {k}")),
            _ => {}
        }
    }
    for k in after.keys() {
        if !before.contains_key(k) {
            d.push(format!("created {k}"));
        }
    }
    d
}

/// The root-relative paths a walk from `target` reports, sorted.
pub fn walk_rels(target: &Target, opts: &WalkOptions) -> FsResult<Vec<String>> {
    let seen = Mutex::new(Vec::new());
    walk(target, opts, || {
        |e: &WalkEntry| {
            seen.lock().unwrap().push(e.rel.clone());
            WalkState::Continue
        }
    })?;
    let mut v = seen.into_inner().unwrap();
    v.sort();
    Ok(v)
}
