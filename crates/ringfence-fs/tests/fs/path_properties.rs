//! Property tests: paths built from hostile components against a fixed tree with symlinks
//! that stay inside and symlinks that leave.
//!
//! For every generated path, `Workspace::resolve` either errors, or
//! - `rel()` is a clean root-relative path (no `.`, `..` or empty components, no leading `/`),
//! - the target's ambient location `<root>/<rel>` contains no symlink and lies inside the
//!   root (checked with `std::fs::canonicalize` of its deepest existing ancestor),
//! - when the target exists and the kernel can resolve the same path, both agree (an oracle
//!   for symlink and `..` semantics),
//! - `write_atomic` through it (with `create_parents`) lands exactly at `<root>/<rel>` and
//!   never creates or changes anything outside the root.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use ringfence_fs::{FsErrorKind, TargetState, Workspace, WriteOptions};

use crate::common::{Node, one_root, snapshot};

const COMPONENTS: &[&str] = &[
    ".", "..", "a", "b", "link_in", "link_out", "abs_out", "~", "", "new",
];

#[derive(Debug, Clone, Copy)]
enum Prefix {
    /// Relative to the current root.
    None,
    /// `<root path>/`
    Root,
    /// `~/`
    Tilde,
    /// `<outside path>/` (anything accepted must come back into the root)
    Outside,
}

struct Fixture {
    _tmp: tempfile::TempDir,
    top: PathBuf,
    root: PathBuf,
    outside: PathBuf,
    ws: Workspace,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(tmp.path()).unwrap();
    let root = top.join("root");
    let outside = top.join("outside");
    // The same shape inside and outside, so an escape would find something to act on.
    for base in [&root, &outside] {
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::fs::create_dir_all(base.join("b")).unwrap();
        std::fs::create_dir_all(base.join("~")).unwrap();
        std::fs::write(base.join("a/b/a"), "aba").unwrap();
        std::fs::write(base.join("b/a"), "ba").unwrap();
        std::fs::write(base.join("~/a"), "tilde-a").unwrap();
    }
    std::fs::create_dir_all(top.join("root-sibling/a")).unwrap();
    let os = outside.display().to_string();
    let links: &[(&str, String)] = &[
        // inside
        ("link_in", "a".into()),
        ("a/link_in", "../b".into()),
        ("b/link_in", "..".into()),
        ("a/b/link_in", format!("{}/a", root.display())),
        // leaving
        ("link_out", "../outside".into()),
        ("a/link_out", "../../outside/a".into()),
        ("b/link_out", "../../root-sibling".into()),
        ("abs_out", os.clone()),
        ("a/abs_out", format!("{os}/b")),
        ("a/b/abs_out", format!("/proc/self/root{os}")),
        ("b/abs_out", format!("{os}/new")), // dangling, outside
        ("~/link_out", "../..".into()),
    ];
    for (at, target) in links {
        symlink(target, root.join(at)).unwrap();
        // outside mirrors point back in, to catch resolution that wandered out and back
        symlink(target, outside.join(at)).unwrap();
    }
    let ws = one_root(&root, &[]);
    Fixture {
        _tmp: tmp,
        top,
        root,
        outside,
        ws,
    }
}

/// Names, kinds, contents and link targets of everything under `top` except `root/`.
fn outside_snapshot(top: &Path) -> BTreeMap<String, Node> {
    snapshot(top, Some("root"))
}

/// The deepest ancestor of `p` (or `p` itself) that exists.
fn deepest_existing(p: &Path) -> &Path {
    let mut cur = p;
    loop {
        if std::fs::symlink_metadata(cur).is_ok() {
            return cur;
        }
        cur = cur.parent().expect("the root exists");
    }
}

fn input_strategy() -> impl Strategy<Value = (Prefix, Vec<&'static str>)> {
    let prefix = prop_oneof![
        4 => Just(Prefix::None),
        2 => Just(Prefix::Root),
        2 => Just(Prefix::Tilde),
        1 => Just(Prefix::Outside),
    ];
    let comps = proptest::collection::vec(proptest::sample::select(COMPONENTS), 0..8);
    (prefix, comps)
}

fn build_input(fx: &Fixture, prefix: Prefix, comps: &[&str]) -> String {
    let joined = comps.join("/");
    match prefix {
        Prefix::None => joined,
        Prefix::Root => format!("{}/{joined}", fx.root.display()),
        Prefix::Tilde => format!("~/{joined}"),
        Prefix::Outside => format!("{}/{joined}", fx.outside.display()),
    }
}

/// What the kernel would open for `input`, with ringfence's meaning of `~`.
fn kernel_path(fx: &Fixture, input: &str) -> PathBuf {
    if input.starts_with('/') {
        PathBuf::from(input)
    } else if input == "~" {
        fx.root.clone()
    } else if let Some(rest) = input.strip_prefix("~/") {
        fx.root.join(rest.trim_start_matches('/'))
    } else {
        fx.root.join(input)
    }
}

fn check(fx: &Fixture, input: &str, n: usize) -> Result<(), TestCaseError> {
    let before = outside_snapshot(&fx.top);
    let target = match fx.ws.resolve(input) {
        Ok(t) => t,
        Err(e) => {
            prop_assert_ne!(
                e.kind(),
                FsErrorKind::Io,
                "unexpected I/O error for {:?}: {}",
                input,
                e
            );
            return Ok(());
        }
    };
    let rel = target.rel().to_owned();
    prop_assert!(!rel.starts_with('/'), "{:?} -> rel {:?}", input, rel);
    if !rel.is_empty() {
        prop_assert!(
            rel.split('/')
                .all(|c| !c.is_empty() && c != "." && c != ".."),
            "{:?} -> unclean rel {:?}",
            input,
            rel
        );
    }
    let ambient = fx.root.join(&rel);
    let existing = deepest_existing(&ambient);
    let canon = std::fs::canonicalize(existing).unwrap();
    prop_assert!(
        canon.starts_with(&fx.root),
        "{:?} -> {:?} outside",
        input,
        canon
    );
    // No component of <root>/<rel> is a symlink: resolution followed them all.
    prop_assert_eq!(
        &canon,
        existing,
        "{:?}: a symlink remains in {:?}",
        input,
        rel
    );

    if let TargetState::Exists(_) = target.state() {
        prop_assert!(
            std::fs::symlink_metadata(&ambient).is_ok(),
            "{:?}: target vanished",
            input
        );
        // Oracle: where the kernel resolves the same path (and stays inside), it must agree.
        if let Ok(k) = std::fs::canonicalize(kernel_path(fx, input)) {
            prop_assert_eq!(&k, &ambient, "{:?}: kernel and ringfence disagree", input);
        }
    }

    let data = format!("prop write {n}").into_bytes();
    let opts = WriteOptions {
        create_parents: true,
        ..WriteOptions::default()
    };
    let wrote = target.write_atomic(&data, &opts);
    let after = outside_snapshot(&fx.top);
    prop_assert!(
        before == after,
        "{:?}: write changed something outside the root",
        input
    );
    match wrote {
        Ok(()) => {
            prop_assert_eq!(
                std::fs::read(&ambient).unwrap(),
                data,
                "{:?}: write went elsewhere",
                input
            );
            prop_assert_eq!(std::fs::canonicalize(&ambient).unwrap(), ambient);
        }
        Err(e) => {
            prop_assert!(
                matches!(
                    e.kind(),
                    FsErrorKind::IsADirectory | FsErrorKind::NotADirectory
                ),
                "{:?}: unexpected write error {:?}: {}",
                input,
                e.kind(),
                e
            );
        }
    }
    Ok(())
}

#[test]
fn generated_paths_never_leave_the_root() {
    let fx = fixture();
    let before = outside_snapshot(&fx.top);
    let counter = AtomicUsize::new(0);
    let resolved = AtomicUsize::new(0);
    let mut runner = TestRunner::new(Config {
        cases: 768,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&input_strategy(), |(prefix, comps)| {
            let input = build_input(&fx, prefix, &comps);
            let n = counter.fetch_add(1, Ordering::Relaxed);
            if fx.ws.resolve(&input).is_ok() {
                resolved.fetch_add(1, Ordering::Relaxed);
            }
            check(&fx, &input, n)
        })
        .unwrap();
    assert_eq!(
        before,
        outside_snapshot(&fx.top),
        "outside changed over the run"
    );
    // The generator must exercise both outcomes, or the property says little.
    let ok = resolved.load(Ordering::Relaxed);
    assert!(
        ok > 50 && ok < counter.load(Ordering::Relaxed),
        "resolved {ok}"
    );
}

/// Deterministic spot checks of the fixture's links, so the property above is known to be
/// exercising both escaping and staying links.
#[test]
fn fixture_links_behave() {
    let fx = fixture();
    let rel = |p: &str| {
        fx.ws
            .resolve(p)
            .map(|t| t.rel().to_owned())
            .map_err(|e| e.kind())
    };
    assert_eq!(rel("link_in/link_in/a"), Ok("b/a".into()));
    assert_eq!(rel("b/link_in/a/b/link_in/b"), Ok("a/b".into()));
    assert_eq!(rel("link_in/.."), Ok("".into()));
    assert_eq!(rel("~/link_in/b/a"), Ok("a/b/a".into()));
    for p in [
        "link_out",
        "a/link_out",
        "b/link_out/a",
        "abs_out",
        "a/abs_out/a",
        "a/b/abs_out",
        "b/abs_out",
        "~/link_out",
        "~/~/link_out/root",
    ] {
        assert_eq!(rel(p), Err(FsErrorKind::OutsideRoot), "{p}");
    }
    // `~` is only special as the first component.
    assert_eq!(rel("~/~/a"), Ok("~/a".into()));
}
