//! `Workspace::apply_client_roots`: what the roots an MCP client announces do to the
//! configured ones under each policy — narrowing never widens; `extend` adds read-only,
//! `extend-write` writable; nothing ever reaches a protected path (the data directory), an
//! internal root, or a directory around them, however the client spells it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringfence_fs::{
    Access, ClientRoots, Denylist, FsErrorKind, Root, RootOrigin, RootSpec, Workspace, WriteOptions,
};

use crate::common::one_root;

/// `ws/` (configured, with `ws/project/in.txt`), `data/` (protected, with `data/secret.txt`
/// and `data/spill/`, the internal root) and `other/a.txt` outside both.
struct Tree {
    _tmp: tempfile::TempDir,
    base: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::tempdir().unwrap();
        let base = tmp.path().to_path_buf();
        for d in ["ws/project", "data/spill", "data/sub", "other"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("ws/project/in.txt"), "in\n").unwrap();
        std::fs::write(base.join("data/secret.txt"), "secret\n").unwrap();
        std::fs::write(base.join("other/a.txt"), "outside\n").unwrap();
        std::os::unix::fs::symlink(base.join("data"), base.join("alias-of-data")).unwrap();
        std::os::unix::fs::symlink(&base, base.join("other/alias-of-base")).unwrap();
        Tree { _tmp: tmp, base }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// A session's workspace: `ws/` configured, `data/spill` internal, `data/` protected.
    fn workspace(&self) -> Workspace {
        let spill = Root::new(
            RootSpec {
                path: self.p("data/spill"),
                access: Access::ReadOnly,
                origin: RootOrigin::Internal,
                label: "tool-output".into(),
            },
            Arc::new(Denylist::empty()),
        )
        .unwrap();
        one_root(&self.p("ws"), &[])
            .with_internal_root(Arc::new(spill))
            .with_protected_path(&self.p("data"))
    }
}

fn roots(ws: &Workspace) -> Vec<(PathBuf, Access)> {
    ws.roots()
        .iter()
        .map(|r| (r.absolute_path().to_path_buf(), r.access()))
        .collect()
}

fn write(ws: &Workspace, path: &Path) -> Result<(), FsErrorKind> {
    let target = ws.resolve(path.to_str().unwrap()).map_err(|e| e.kind())?;
    target
        .write_atomic(b"x\n", &WriteOptions::default())
        .map_err(|e| e.kind())
}

#[test]
fn narrow_keeps_only_what_lies_inside_both() {
    let t = Tree::new();
    let ws = t.workspace();
    ws.apply_client_roots(&[t.p("ws/project"), t.p("other")], ClientRoots::Narrow);
    assert_eq!(roots(&ws), vec![(t.p("ws/project"), Access::ReadWrite)]);
    assert!(ws.resolve("in.txt").unwrap().exists());
    assert_eq!(
        ws.resolve(t.p("other/a.txt").to_str().unwrap())
            .unwrap_err()
            .kind(),
        FsErrorKind::OutsideRoot
    );
    // Nothing in common: every call fails until the client says something usable.
    ws.apply_client_roots(&[t.p("other")], ClientRoots::Narrow);
    assert!(ws.blocked().unwrap().contains("do not overlap"));
    assert!(ws.resolve("x").is_err());
}

#[test]
fn ignore_leaves_the_configured_roots() {
    let t = Tree::new();
    let ws = t.workspace();
    ws.apply_client_roots(&[t.p("other")], ClientRoots::Ignore);
    assert_eq!(roots(&ws), vec![(t.p("ws"), Access::ReadWrite)]);
    assert!(ws.blocked().is_none());
}

#[test]
fn extend_adds_outside_roots_read_only() {
    let t = Tree::new();
    let ws = t.workspace();
    ws.apply_client_roots(&[t.p("ws"), t.p("other")], ClientRoots::Extend);
    assert_eq!(
        roots(&ws),
        vec![
            (t.p("ws"), Access::ReadWrite),
            (t.p("other"), Access::ReadOnly)
        ]
    );
    let a = ws.resolve(t.p("other/a.txt").to_str().unwrap()).unwrap();
    assert!(a.exists());
    assert_eq!(
        write(&ws, &t.p("other/new.txt")),
        Err(FsErrorKind::ReadOnly)
    );
    assert!(!t.p("other/new.txt").exists());
    assert_eq!(write(&ws, &t.p("ws/ok.txt")), Ok(()));
}

#[test]
fn extend_write_adds_outside_roots_writable() {
    let t = Tree::new();
    let ws = t.workspace();
    ws.apply_client_roots(&[t.p("ws"), t.p("other")], ClientRoots::ExtendWrite);
    assert_eq!(write(&ws, &t.p("other/new.txt")), Ok(()));
    assert_eq!(std::fs::read(t.p("other/new.txt")).unwrap(), b"x\n");
}

#[test]
fn extension_never_reaches_the_protected_path() {
    let t = Tree::new();
    let offered = [
        ("the data directory", t.p("data")),
        ("a directory inside it", t.p("data/sub")),
        ("the internal root", t.p("data/spill")),
        ("a directory containing it", t.base.clone()),
        ("the file system root", PathBuf::from("/")),
        ("a symlink to it", t.p("alias-of-data")),
        (
            "a symlink to a directory containing it",
            t.p("other/alias-of-base"),
        ),
        ("a spelling with ..", t.p("other/../data")),
        (
            "a spelling through a symlink, then ..",
            t.p("alias-of-data/sub/.."),
        ),
    ];
    for policy in [ClientRoots::Extend, ClientRoots::ExtendWrite] {
        for (what, path) in &offered {
            let ws = t.workspace();
            ws.apply_client_roots(&[t.p("ws"), path.clone()], policy);
            assert_eq!(
                roots(&ws),
                vec![(t.p("ws"), Access::ReadWrite)],
                "{what} was added under {policy:?}"
            );
            assert!(
                ws.resolve(t.p("data/secret.txt").to_str().unwrap())
                    .is_err(),
                "{what}: the data directory is reachable under {policy:?}"
            );
            let planted = path.join("planted.txt");
            assert!(write(&ws, &planted).is_err(), "{what} under {policy:?}");
            assert!(!planted.exists());
            // Offered alone, it adds nothing either: the session is blocked, or keeps the
            // configured root the client's directory contains.
            let ws = t.workspace();
            ws.apply_client_roots(std::slice::from_ref(path), policy);
            assert!(
                ws.blocked().is_some() || roots(&ws) == vec![(t.p("ws"), Access::ReadWrite)],
                "{what} under {policy:?}: {:?}",
                roots(&ws)
            );
            assert!(
                ws.resolve(t.p("data/secret.txt").to_str().unwrap())
                    .is_err()
            );
        }
    }
}

#[test]
fn a_configured_root_holding_the_data_directory_still_narrows() {
    // `serve ~` style: the configured root contains the data directory (the session maker
    // denies it there); a client root inside the configured root is narrowing, not
    // extension, and the protection does not get in its way.
    let t = Tree::new();
    let deny = Arc::new(Denylist::new(["/data/"]).unwrap());
    let root = Root::new(
        RootSpec::configured(t.base.clone(), Access::ReadWrite),
        deny,
    )
    .unwrap();
    let ws = Workspace::new(vec![Arc::new(root)])
        .unwrap()
        .with_protected_path(&t.p("data"));
    ws.apply_client_roots(&[t.p("ws")], ClientRoots::Extend);
    assert_eq!(roots(&ws), vec![(t.p("ws"), Access::ReadWrite)]);
    // A client root at the data directory inside that root is denied there.
    let ws2 = ws.clone();
    ws2.apply_client_roots(&[t.p("data")], ClientRoots::Narrow);
    assert!(ws2.blocked().is_some());
}
