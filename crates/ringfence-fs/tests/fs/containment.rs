//! Adversarial containment table for ringfence-fs.
//!
//! Every case builds a fresh temporary tree:
//!
//! ```text
//! <tmp>/alias -> real                 (a symlinked alias of the whole tree)
//! <tmp>/real/root/...                 the configured root (see `build_tree`)
//! <tmp>/real/root-sibling/file        shares the root's name as a prefix
//! <tmp>/real/outside/secret.txt       what an escape would reach
//! ```
//!
//! resolves one input through `Workspace::resolve`, performs one operation on the target
//! (resolve only, read, write with `create_parents`, write without, open_dir, walk), and
//! asserts the exact `FsErrorKind` or the exact root-relative `rel()` (plus content/listing
//! where given). After every case it asserts that nothing outside the root changed (names,
//! kinds, contents and symlink targets of the whole temp tree minus the root), and — when
//! the operation failed — that nothing inside the root changed either (no half-created
//! directories, no temp files).

use std::io::Read;
use std::os::unix::fs::symlink;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringfence_fs::{
    Access, Denylist, FsErrorKind, Root, RootOrigin, RootSpec, WalkOptions, Workspace, WriteOptions,
};

use crate::common::{diff, one_root, snapshot, walk_rels};

use FsErrorKind::*;

/// Denylist of every standard root: gitignore syntax, matched after resolution.
const DENY: &[&str] = &["*.env", "secrets/", "/top-only.txt"];

// ---------------------------------------------------------------------------------------
// Fixture
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RootKind {
    /// `<tmp>/real/root`, read-write, configured.
    Rw,
    /// The same directory, read-only.
    Ro,
    /// Configured as `<tmp>/alias/root` (reached through a symlinked parent).
    ViaAlias,
    /// Configured `<tmp>/real/missing-root`, which does not exist.
    Missing,
    /// Default-origin root `<tmp>/real/data/ws`, which does not exist yet.
    Default,
}

struct Fx {
    _tmp: tempfile::TempDir,
    /// Canonical temp dir (holds `real/` and `alias`).
    top: PathBuf,
    /// `<top>/real`
    base: PathBuf,
    /// `<top>/alias` -> `real`
    alias: PathBuf,
    /// `<top>/real/outside`
    outside: PathBuf,
    kind: RootKind,
}

impl Fx {
    fn new(kind: RootKind) -> Fx {
        let tmp = tempfile::tempdir().expect("tempdir");
        let top = std::fs::canonicalize(tmp.path()).expect("canonical tempdir");
        let base = top.join("real");
        let alias = top.join("alias");
        let outside = base.join("outside");
        let fx = Fx {
            _tmp: tmp,
            top,
            base,
            alias,
            outside,
            kind,
        };
        build_tree(&fx);
        fx
    }

    /// The standard tree's real location (what every absolute symlink points into).
    fn std_root(&self) -> PathBuf {
        self.base.join("root")
    }

    /// The root as configured for this case.
    fn configured_root(&self) -> PathBuf {
        match self.kind {
            RootKind::Rw | RootKind::Ro => self.std_root(),
            RootKind::ViaAlias => self.alias.join("root"),
            RootKind::Missing => self.base.join("missing-root"),
            RootKind::Default => self.base.join("data").join("ws"),
        }
    }

    /// Where the root really is on disk.
    fn real_root(&self) -> PathBuf {
        match self.kind {
            RootKind::ViaAlias => self.std_root(),
            _ => self.configured_root(),
        }
    }

    /// The part of `top` that belongs to the root (excluded from the outside snapshot).
    fn root_exclusion(&self) -> Option<String> {
        match self.kind {
            RootKind::Rw | RootKind::Ro | RootKind::ViaAlias => Some("real/root".into()),
            RootKind::Missing => None,
            // The data directory is created together with the default root.
            RootKind::Default => Some("real/data".into()),
        }
    }

    fn workspace(&self) -> Workspace {
        let deny = Arc::new(Denylist::new(DENY).expect("denylist"));
        let path = self.configured_root();
        let spec = match self.kind {
            RootKind::Rw | RootKind::ViaAlias | RootKind::Missing => {
                RootSpec::configured(path, Access::ReadWrite)
            }
            RootKind::Ro => RootSpec::configured(path, Access::ReadOnly),
            RootKind::Default => RootSpec {
                path,
                access: Access::ReadWrite,
                origin: RootOrigin::Default,
                label: "ws".into(),
            },
        };
        let root = Root::new(spec, deny).expect("root");
        Workspace::new(vec![Arc::new(root)]).expect("workspace")
    }

    fn expand(&self, template: &str) -> String {
        let p = |p: &Path| p.to_str().expect("utf-8 temp path").to_owned();
        template
            .replace("{root}", &p(&self.configured_root()))
            .replace("{base}", &p(&self.base))
            .replace("{alias}", &p(&self.alias))
            .replace("{outside}", &p(&self.outside))
            .replace("{c300}", &"x".repeat(300))
            .replace("{c255}", &"y".repeat(255))
            .replace("{p5000}", &"a/".repeat(2500))
            // exactly MAX_PATH_BYTES (4096) bytes: accepted by the length check
            .replace("{p4096}", &format!("{}zz", "a/".repeat(2047)))
    }
}

fn write(path: impl AsRef<Path>, content: &str) {
    std::fs::write(path, content).expect("fixture write");
}

fn link(target: impl AsRef<Path>, at: impl AsRef<Path>) {
    symlink(target, at).expect("fixture symlink");
}

/// The standard tree. Absolute symlink targets use the real (canonical) spelling.
fn build_tree(fx: &Fx) {
    let b = &fx.base;
    let r = fx.std_root();
    let o = &fx.outside;
    let rs = r.display().to_string();
    let os = o.display().to_string();
    for d in [
        r.join("a/b"),
        r.join("sub"),
        r.join("secrets"),
        o.join("dir"),
        b.join("root-sibling"),
    ] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    link("real", &fx.alias);

    write(o.join("secret.txt"), "SECRET");
    write(o.join("dir/inner.txt"), "INNER");
    write(b.join("root-sibling/file"), "SIBLING");

    write(r.join("file.txt"), "inside");
    write(r.join("a/b/c.txt"), "abc");
    write(r.join("~user"), "tilde-user-file");
    write(r.join("app.env"), "ENV");
    write(r.join("sub/app.env"), "SUBENV");
    write(r.join("secrets/key"), "KEY");
    write(r.join("top-only.txt"), "TOP");
    write(r.join("sub/top-only.txt"), "SUBTOP");

    // inside, relative
    link("../../file.txt", r.join("a/b/link_up"));
    link("file.txt", r.join("link_file_in"));
    link("a/b", r.join("link_dir_in"));
    link("..", r.join("a/link_root"));
    // relative chain that stays inside
    link("chain2", r.join("chain1"));
    link("a/chain3", r.join("chain2"));
    link("../file.txt", r.join("a/chain3"));
    // absolute chain that stays inside
    link(format!("{rs}/a/abs_chain2"), r.join("abs_chain"));
    link(format!("{rs}/file.txt"), r.join("a/abs_chain2"));
    link(&r, r.join("link_to_root_abs"));
    link(fx.alias.join("root"), r.join("link_to_root_alias"));
    // relative chain that leaves
    link("chain_out2", r.join("chain_out1"));
    link("a/../../outside/secret.txt", r.join("chain_out2"));
    // absolute chain that leaves
    link(format!("{rs}/a/abs_chain_out2"), r.join("abs_chain_out"));
    link(format!("{os}/secret.txt"), r.join("a/abs_chain_out2"));
    // direct escapes
    link("../outside/secret.txt", r.join("link_out_file_rel"));
    link(format!("{os}/secret.txt"), r.join("link_out_file_abs"));
    link("../outside", r.join("link_out_dir_rel"));
    link(o, r.join("link_out_dir_abs"));
    link("../root-sibling", r.join("link_sibling"));
    link(b.join("root-sibling"), r.join("link_sibling_abs"));
    link("..", r.join("link_updir"));
    // leaves the root and comes back: refused, `..` never leaves a root even transiently
    link("../../root/file.txt", r.join("a/out_and_back"));
    // loops
    link("loop2", r.join("loop1"));
    link("loop1", r.join("loop2"));
    link("self_loop", r.join("self_loop"));
    // dangling
    link(format!("{os}/created.txt"), r.join("dangle_out_abs"));
    link("../outside/created.txt", r.join("dangle_out_rel"));
    link(format!("{os}/newdir/created.txt"), r.join("dangle_out_dir"));
    link("newdir/created.txt", r.join("dangle_in"));
    link(format!("{rs}/created_abs.txt"), r.join("dangle_in_abs"));
    // /proc magic
    link("/proc/self/root", r.join("proc_root"));
    link(
        format!("/proc/self/root{os}/secret.txt"),
        r.join("proc_out"),
    );
    link(format!("/proc/self/root{rs}/file.txt"), r.join("proc_in"));
    // denylist through links
    link("secrets/key", r.join("ok.txt"));
    link("secrets", r.join("link_secrets"));
    // not a regular file
    rustix::fs::mknodat(
        rustix::fs::CWD,
        r.join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
}

// ---------------------------------------------------------------------------------------
// Cases
// ---------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Resolve,
    Read,
    /// `write_atomic` with `create_parents: true`.
    Write,
    /// `write_atomic` with `create_parents: false`.
    WriteNoParents,
    OpenDir,
    Walk,
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Success, with this exact `rel()`.
    Ok(&'static str),
    Err(FsErrorKind),
}

struct Case {
    name: &'static str,
    kind: RootKind,
    input: &'static str,
    op: Op,
    expect: Expect,
    /// For reads: the exact content.
    content: Option<&'static str>,
    /// For walks and open_dir: the exact sorted listing.
    listing: Option<&'static [&'static str]>,
    /// Extra assertions on the tree afterwards.
    check: Option<fn(&Fx)>,
}

fn c(name: &'static str, input: &'static str, op: Op, expect: Expect) -> Case {
    Case {
        name,
        kind: RootKind::Rw,
        input,
        op,
        expect,
        content: None,
        listing: None,
        check: None,
    }
}

impl Case {
    fn root(mut self, kind: RootKind) -> Case {
        self.kind = kind;
        self
    }
    fn content(mut self, content: &'static str) -> Case {
        self.content = Some(content);
        self
    }
    fn listing(mut self, listing: &'static [&'static str]) -> Case {
        self.listing = Some(listing);
        self
    }
    fn check(mut self, f: fn(&Fx)) -> Case {
        self.check = Some(f);
        self
    }
}

fn ok(rel: &'static str) -> Expect {
    Expect::Ok(rel)
}

fn err(kind: FsErrorKind) -> Expect {
    Expect::Err(kind)
}

/// What a full walk of the standard root reports: no symlinks (never followed, never
/// listed), nothing denied (`*.env`, `secrets/`, `/top-only.txt`), nothing outside.
const FULL_WALK: &[&str] = &[
    "a",
    "a/b",
    "a/b/c.txt",
    "fifo",
    "file.txt",
    "sub",
    "sub/top-only.txt",
    "~user",
];

fn cases() -> Vec<Case> {
    use Op::*;
    use RootKind::*;
    vec![
        // --- plain relative paths ------------------------------------------------------
        c("plain_read", "file.txt", Read, ok("file.txt")).content("inside"),
        c("dot_slash_read", "./file.txt", Read, ok("file.txt")).content("inside"),
        c("nested_read", "a/b/c.txt", Read, ok("a/b/c.txt")).content("abc"),
        c(
            "doubled_slashes_read",
            "a//b///c.txt",
            Read,
            ok("a/b/c.txt"),
        )
        .content("abc"),
        c("dot_is_root", ".", OpenDir, ok("")),
        c("missing_read_not_found", "missing.txt", Read, err(NotFound)),
        c("triple_dot_is_a_name", "...", Read, err(NotFound)),
        c("new_file_write", "a/new.txt", Write, ok("a/new.txt")),
        c(
            "new_dirs_write",
            "n1/n2/new.txt",
            Write,
            ok("n1/n2/new.txt"),
        ),
        c(
            "new_dirs_without_create_parents",
            "n1/new.txt",
            WriteNoParents,
            err(NotFound),
        ),
        c("overwrite_write", "a/b/c.txt", Write, ok("a/b/c.txt")),
        // --- `..` traversal --------------------------------------------------------------
        c("dotdot_alone", "..", OpenDir, err(OutsideRoot)),
        c("dotdot_x_write", "../x", Write, err(OutsideRoot)),
        c(
            "a_dotdot_dotdot_x_write",
            "a/../../x",
            Write,
            err(OutsideRoot),
        ),
        c(
            "a_b_3dotdot_x_write",
            "a/b/../../../x",
            Write,
            err(OutsideRoot),
        ),
        c(
            "dotdot_outside_secret_read",
            "../outside/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "deep_dotdot_outside_secret_read",
            "a/b/../../../outside/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "dotdot_sibling_prefix_read",
            "../root-sibling/file",
            Read,
            err(OutsideRoot),
        ),
        c(
            "dotdot_sibling_prefix_write",
            "../root-sibling/new",
            Write,
            err(OutsideRoot),
        ),
        c(
            "dotdot_back_into_root_refused",
            "../root/file.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "dotdot_within_root_read",
            "a/../file.txt",
            Read,
            ok("file.txt"),
        )
        .content("inside"),
        c(
            "dotdot_within_root_deep",
            "a/b/../../a/b/c.txt",
            Read,
            ok("a/b/c.txt"),
        ),
        c("dotdot_back_to_root_dir", "a/..", OpenDir, ok("")),
        c(
            "dotdot_within_root_write",
            "a/b/../new2.txt",
            Write,
            ok("a/new2.txt"),
        ),
        c(
            "dotdot_through_missing_dir",
            "newdir/../file.txt",
            Read,
            ok("file.txt"),
        ),
        c(
            "dotdot_through_missing_dir_out",
            "newdir/../../x",
            Write,
            err(OutsideRoot),
        ),
        c(
            "dotdot_three_up_from_two",
            "a/b/../../..",
            OpenDir,
            err(OutsideRoot),
        ),
        // --- absolute paths --------------------------------------------------------------
        c("abs_inside_read", "{root}/file.txt", Read, ok("file.txt")).content("inside"),
        c("abs_root_itself", "{root}", OpenDir, ok("")),
        c("abs_root_trailing_slash", "{root}/", OpenDir, ok("")),
        c(
            "abs_noise_inside",
            "{root}//a/./b/c.txt",
            Read,
            ok("a/b/c.txt"),
        ),
        c(
            "abs_inside_write",
            "{root}/n1/abs.txt",
            Write,
            ok("n1/abs.txt"),
        ),
        c(
            "abs_dotdot_within_root",
            "{root}/a/../file.txt",
            Read,
            ok("file.txt"),
        ),
        c(
            "abs_root_dotdot_out",
            "{root}/../outside/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "abs_outside_read",
            "{outside}/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "abs_outside_write",
            "{outside}/new.txt",
            Write,
            err(OutsideRoot),
        ),
        c("abs_etc_passwd", "/etc/passwd", Read, err(OutsideRoot)),
        c("abs_slash", "/", OpenDir, err(OutsideRoot)),
        c(
            "abs_double_slash_etc",
            "//etc/passwd",
            Read,
            err(OutsideRoot),
        ),
        c(
            "abs_sibling_prefix_read",
            "{base}/root-sibling/file",
            Read,
            err(OutsideRoot),
        ),
        c(
            "abs_sibling_prefix_write",
            "{base}/root-sibling/new",
            Write,
            err(OutsideRoot),
        ),
        c(
            "abs_sibling_bare_prefix",
            "{base}/root-sibling",
            OpenDir,
            err(OutsideRoot),
        ),
        c(
            "abs_sibling_via_root_dotdot",
            "{root}/../root-sibling/file",
            Read,
            err(OutsideRoot),
        ),
        // `..` above the root is not resolved: the answer would depend on whether directories
        // outside the root exist (an existence probe). Aliases without `..` still work below.
        c(
            "abs_dotdot_above_root_refused",
            "{outside}/../root/file.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "abs_dotdot_through_missing_outside_dir_refused",
            "{outside}/nodir/../../root/file.txt",
            Read,
            err(OutsideRoot),
        ),
        // --- roots reached through aliases -----------------------------------------------
        c(
            "alias_root_configured_spelling",
            "{root}/file.txt",
            Read,
            ok("file.txt"),
        )
        .root(ViaAlias)
        .content("inside"),
        c(
            "alias_root_canonical_spelling",
            "{base}/root/file.txt",
            Read,
            ok("file.txt"),
        )
        .root(ViaAlias),
        c(
            "alias_root_write_canonical",
            "{base}/root/n1/x.txt",
            Write,
            ok("n1/x.txt"),
        )
        .root(ViaAlias),
        c(
            "alias_root_dotdot_out",
            "{root}/../outside/secret.txt",
            Read,
            err(OutsideRoot),
        )
        .root(ViaAlias),
        c(
            "alias_root_sibling",
            "{alias}/root-sibling/file",
            Read,
            err(OutsideRoot),
        )
        .root(ViaAlias),
        c(
            "real_root_alias_spelling",
            "{alias}/root/file.txt",
            Read,
            ok("file.txt"),
        ),
        c(
            "real_root_alias_write",
            "{alias}/root/a/y.txt",
            Write,
            ok("a/y.txt"),
        ),
        c(
            "real_root_alias_outside",
            "{alias}/outside/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "real_root_alias_dotdot_out",
            "{alias}/root/../outside/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "proc_self_root_inside",
            "/proc/self/root{root}/file.txt",
            Read,
            ok("file.txt"),
        ),
        c(
            "proc_self_root_outside",
            "/proc/self/root{outside}/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "proc_self_root_outside_write",
            "/proc/self/root{outside}/new.txt",
            Write,
            err(OutsideRoot),
        ),
        c(
            "proc_self_cwd",
            "/proc/self/cwd/Cargo.toml",
            Read,
            err(OutsideRoot),
        ),
        // --- `~` -------------------------------------------------------------------------
        c("tilde_is_root", "~", OpenDir, ok("")),
        c("tilde_slash_is_root", "~/", OpenDir, ok("")),
        c("tilde_file", "~/file.txt", Read, ok("file.txt")).content("inside"),
        c("tilde_write", "~/n1/t.txt", Write, ok("n1/t.txt")),
        c("tilde_dotdot_x", "~/../x", Write, err(OutsideRoot)),
        c(
            "tilde_dotdot_secret",
            "~/../outside/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        // `~//etc/passwd` is the root-relative `etc/passwd`, not the system file.
        c(
            "tilde_double_slash_etc",
            "~//etc/passwd",
            Read,
            err(NotFound),
        ),
        // Design decision: `~user` is not expanded; it is a literal root-relative name.
        c("tilde_user_is_literal_name", "~user", Read, ok("~user")).content("tilde-user-file"),
        c(
            "tilde_root_is_literal_name",
            "~root/.bashrc",
            Read,
            err(NotFound),
        ),
        c("tilde_mid_path_is_literal", "a/~", Resolve, ok("a/~")),
        c("tilde_write_root_is_dir", "~", Write, err(IsADirectory)),
        // --- symlinks that stay inside ---------------------------------------------------
        c("link_file_in_read", "link_file_in", Read, ok("file.txt")).content("inside"),
        c("link_file_in_write", "link_file_in", Write, ok("file.txt")).check(|fx| {
            let l = fx.std_root().join("link_file_in");
            assert!(
                std::fs::symlink_metadata(l).unwrap().is_symlink(),
                "link kept"
            );
        }),
        c(
            "link_dir_in_read",
            "link_dir_in/c.txt",
            Read,
            ok("a/b/c.txt"),
        )
        .content("abc"),
        // `..` after a symlink is resolved from the link's *target* (POSIX), not lexically.
        c("link_dir_in_dotdot", "link_dir_in/..", OpenDir, ok("a")),
        c(
            "link_then_link_up",
            "link_dir_in/link_up",
            Read,
            ok("file.txt"),
        ),
        c(
            "link_to_root_from_sub",
            "a/link_root/file.txt",
            Read,
            ok("file.txt"),
        ),
        c("rel_chain_inside", "chain1", Read, ok("file.txt")).content("inside"),
        c("abs_chain_inside", "abs_chain", Read, ok("file.txt")).content("inside"),
        c(
            "abs_link_to_root",
            "link_to_root_abs/a/b/c.txt",
            Read,
            ok("a/b/c.txt"),
        ),
        c(
            "abs_link_to_root_alias",
            "link_to_root_alias/file.txt",
            Read,
            ok("file.txt"),
        ),
        c("proc_link_inside", "proc_in", Read, ok("file.txt")),
        c(
            "link_file_used_as_dir",
            "link_file_in/x",
            Read,
            err(NotADirectory),
        ),
        c(
            "link_file_dotdot",
            "link_file_in/..",
            OpenDir,
            err(NotADirectory),
        ),
        // --- symlinks that leave ---------------------------------------------------------
        c(
            "link_out_file_rel_read",
            "link_out_file_rel",
            Read,
            err(OutsideRoot),
        ),
        c(
            "link_out_file_abs_read",
            "link_out_file_abs",
            Read,
            err(OutsideRoot),
        ),
        c(
            "link_out_file_abs_write",
            "link_out_file_abs",
            Write,
            err(OutsideRoot),
        ),
        c(
            "link_out_file_rel_write",
            "link_out_file_rel",
            Write,
            err(OutsideRoot),
        ),
        c(
            "link_out_dir_rel_read",
            "link_out_dir_rel/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "link_out_dir_abs_write",
            "link_out_dir_abs/new.txt",
            Write,
            err(OutsideRoot),
        ),
        c(
            "link_out_dir_rel_opendir",
            "link_out_dir_rel",
            OpenDir,
            err(OutsideRoot),
        ),
        c(
            "link_out_dir_abs_nested",
            "link_out_dir_abs/dir/inner.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "link_out_then_dotdot_back",
            "link_out_dir_rel/../root/file.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "rel_link_out_and_back",
            "a/out_and_back",
            Read,
            err(OutsideRoot),
        ),
        c(
            "link_sibling_rel",
            "link_sibling/file",
            Read,
            err(OutsideRoot),
        ),
        c(
            "link_sibling_abs",
            "link_sibling_abs/file",
            Read,
            err(OutsideRoot),
        ),
        c(
            "link_updir",
            "link_updir/outside/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c("rel_chain_leaves", "chain_out1", Read, err(OutsideRoot)),
        c("abs_chain_leaves", "abs_chain_out", Read, err(OutsideRoot)),
        c(
            "abs_chain_leaves_write",
            "abs_chain_out",
            Write,
            err(OutsideRoot),
        ),
        c(
            "abs_path_then_link_out",
            "{root}/link_out_dir_abs/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "proc_root_link_plus_outside",
            "proc_root{outside}/secret.txt",
            Read,
            err(OutsideRoot),
        ),
        c(
            "proc_root_link_opendir",
            "proc_root",
            OpenDir,
            err(OutsideRoot),
        ),
        c("proc_out_link", "proc_out", Read, err(OutsideRoot)),
        // --- loops -----------------------------------------------------------------------
        c("loop_read", "loop1", Read, err(SymlinkLoop)),
        c("loop_as_dir", "loop1/x", Write, err(SymlinkLoop)),
        c("self_loop_write", "self_loop", Write, err(SymlinkLoop)),
        // --- dangling symlinks -----------------------------------------------------------
        c(
            "dangle_out_abs_write",
            "dangle_out_abs",
            Write,
            err(OutsideRoot),
        ),
        c(
            "dangle_out_rel_write",
            "dangle_out_rel",
            Write,
            err(OutsideRoot),
        ),
        c(
            "dangle_out_dir_write",
            "dangle_out_dir",
            Write,
            err(OutsideRoot),
        ),
        c(
            "dangle_out_abs_read",
            "dangle_out_abs",
            Read,
            err(OutsideRoot),
        ),
        c(
            "dangle_in_write",
            "dangle_in",
            Write,
            ok("newdir/created.txt"),
        )
        .check(|fx| {
            let r = fx.std_root();
            assert!(
                std::fs::symlink_metadata(r.join("dangle_in"))
                    .unwrap()
                    .is_symlink()
            );
            assert!(
                std::fs::metadata(r.join("newdir/created.txt"))
                    .unwrap()
                    .is_file()
            );
        }),
        c(
            "dangle_in_no_parents",
            "dangle_in",
            WriteNoParents,
            err(NotFound),
        ),
        c(
            "dangle_in_abs_write",
            "dangle_in_abs",
            Write,
            ok("created_abs.txt"),
        ),
        c("dangle_in_read", "dangle_in", Read, err(NotFound)),
        // --- argument errors -------------------------------------------------------------
        c("nul_byte", "file\0.txt", Read, err(InvalidPath)),
        c("nul_byte_write", "new\0.txt", Write, err(InvalidPath)),
        c("empty_path", "", Read, err(InvalidPath)),
        c("too_long_path", "{p5000}", Read, err(InvalidPath)),
        c("max_length_path_accepted", "{p4096}", Read, err(NotFound)),
        c("long_component_read", "{c300}", Read, err(InvalidPath)),
        c("long_component_write", "{c300}", Write, err(InvalidPath)),
        c("long_component_as_dir", "{c300}/x", Write, err(InvalidPath)),
        c(
            "long_component_under_new_dir",
            "newdir/{c300}",
            Write,
            err(InvalidPath),
        ),
        c(
            "long_dir_under_new_dir",
            "newdir/{c300}/x",
            Write,
            err(InvalidPath),
        ),
        c("name_max_component_ok", "{c255}", Write, ok("{c255}")),
        // --- wrong kinds -----------------------------------------------------------------
        c("file_as_dir_read", "file.txt/x", Read, err(NotADirectory)),
        c(
            "file_as_dir_write",
            "file.txt/x/y",
            Write,
            err(NotADirectory),
        ),
        c("file_opendir", "file.txt", OpenDir, err(NotADirectory)),
        // Current behaviour (not a containment matter): empty and `.` components are dropped
        // before resolution, so a trailing `/` or `/.` after a file name is ignored, unlike
        // the kernel's ENOTDIR.
        c(
            "file_trailing_slash_ignored",
            "file.txt/",
            Read,
            ok("file.txt"),
        ),
        c(
            "file_trailing_dot_ignored",
            "a/b/c.txt/.",
            Read,
            ok("a/b/c.txt"),
        ),
        c("dir_read", "a", Read, err(IsADirectory)),
        c("dir_write", "a", Write, err(IsADirectory)),
        c("fifo_read", "fifo", Read, err(NotAFile)),
        c("fifo_write", "fifo", Write, err(NotAFile)),
        // --- read-only root --------------------------------------------------------------
        c("ro_read", "file.txt", Read, ok("file.txt"))
            .root(Ro)
            .content("inside"),
        c("ro_write_new", "new.txt", Write, err(ReadOnly)).root(Ro),
        c("ro_overwrite", "file.txt", Write, err(ReadOnly)).root(Ro),
        c("ro_create_parents", "n1/n2/x", Write, err(ReadOnly)).root(Ro),
        c("ro_walk", ".", Walk, ok("")).root(Ro).listing(FULL_WALK),
        // --- configured root that does not exist -----------------------------------------
        c("missing_root_read", "file.txt", Read, err(RootMissing)).root(Missing),
        c("missing_root_write", "n1/new.txt", Write, err(RootMissing)).root(Missing),
        c("missing_root_tilde", "~", OpenDir, err(RootMissing)).root(Missing),
        c("missing_root_dotdot", "../x", Write, err(RootMissing)).root(Missing),
        c(
            "missing_root_abs_inside",
            "{root}/x",
            Write,
            err(RootMissing),
        )
        .root(Missing),
        c(
            "missing_root_abs_outside",
            "{outside}/secret.txt",
            Read,
            err(RootMissing),
        )
        .root(Missing),
        c("missing_root_walk", ".", Walk, err(RootMissing)).root(Missing),
        // --- default root: created on first use ------------------------------------------
        c("default_root_write", "new.txt", Write, ok("new.txt")).root(Default),
        c("default_root_opendir", "~", OpenDir, ok(""))
            .root(Default)
            .listing(&[]),
        c("default_root_escape", "../x", Write, err(OutsideRoot)).root(Default),
        // --- denylist (after resolution) -------------------------------------------------
        c("deny_env", "app.env", Read, err(Denied)),
        c("deny_env_nested", "sub/app.env", Read, err(Denied)),
        c("deny_env_write_new", "a/b/new.env", Write, err(Denied)),
        c("deny_secrets_file", "secrets/key", Read, err(Denied)),
        c("deny_secrets_dir", "secrets", OpenDir, err(Denied)),
        c("deny_secrets_write", "secrets/new.txt", Write, err(Denied)),
        c("deny_secrets_abs", "{root}/secrets/key", Read, err(Denied)),
        c("deny_secrets_dotdot", "a/../secrets/key", Read, err(Denied)),
        c("deny_link_to_secret_file", "ok.txt", Read, err(Denied)),
        c(
            "deny_link_to_secret_dir",
            "link_secrets/key",
            Read,
            err(Denied),
        ),
        c("deny_anchored_top", "top-only.txt", Read, err(Denied)),
        c(
            "deny_anchored_not_nested",
            "sub/top-only.txt",
            Read,
            ok("sub/top-only.txt"),
        )
        .content("SUBTOP"),
        c(
            "deny_prefix_not_dir",
            "secrets2/x.txt",
            Write,
            ok("secrets2/x.txt"),
        ),
        // --- walks -----------------------------------------------------------------------
        c("walk_root", ".", Walk, ok("")).listing(FULL_WALK),
        c("walk_tilde", "~", Walk, ok("")).listing(FULL_WALK),
        c("walk_via_link_to_root", "a/link_root", Walk, ok("")).listing(FULL_WALK),
        c("walk_via_link_dir_in", "link_dir_in", Walk, ok("a/b")).listing(&["a/b/c.txt"]),
        c("walk_abs_subdir", "{root}/a", Walk, ok("a")).listing(&["a/b", "a/b/c.txt"]),
        c("walk_sub_denied_entries", "sub", Walk, ok("sub")).listing(&["sub/top-only.txt"]),
        c("walk_single_file", "file.txt", Walk, ok("file.txt")).listing(&["file.txt"]),
        c("walk_link_out", "link_out_dir_abs", Walk, err(OutsideRoot)),
        c("walk_denied_dir", "secrets", Walk, err(Denied)),
        c("walk_alias_root", "{root}", Walk, ok(""))
            .root(ViaAlias)
            .listing(FULL_WALK),
        c(
            "opendir_lists_only_inside",
            "link_dir_in",
            OpenDir,
            ok("a/b"),
        )
        .listing(&["c.txt", "link_up"]),
    ]
}

// ---------------------------------------------------------------------------------------
// Runner
// ---------------------------------------------------------------------------------------

enum Out {
    Resolved,
    Read(Vec<u8>),
    Wrote(Vec<u8>),
    Listed(Vec<String>),
}

fn perform(
    ws: &Workspace,
    input: &str,
    op: Op,
    name: &str,
) -> (Option<String>, Result<Out, FsErrorKind>) {
    let target = match ws.resolve(input) {
        Ok(t) => t,
        Err(e) => return (None, Err(e.kind())),
    };
    let rel = Some(target.rel().to_owned());
    let res = match op {
        Op::Resolve => Ok(Out::Resolved),
        Op::Read => target.open_read().map(|(mut f, _)| {
            let mut buf = Vec::new();
            f.read_to_end(&mut buf).expect("read");
            Out::Read(buf)
        }),
        Op::Write | Op::WriteNoParents => {
            let data = format!("written by {name}").into_bytes();
            let opts = WriteOptions {
                create_parents: op == Op::Write,
                ..WriteOptions::default()
            };
            target.write_atomic(&data, &opts).map(|()| Out::Wrote(data))
        }
        Op::OpenDir => target.open_dir().map(|d| {
            let mut names: Vec<String> = d
                .entries()
                .expect("entries")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            Out::Listed(names)
        }),
        Op::Walk => {
            let opts = WalkOptions {
                threads: 2,
                ..WalkOptions::default()
            };
            walk_rels(&target, &opts).map(Out::Listed)
        }
    };
    (rel, res.map_err(|e| e.kind()))
}

fn run_case(case: &Case) -> Result<(), String> {
    let fx = Fx::new(case.kind);
    let input = fx.expand(case.input);
    let exclusion = fx.root_exclusion();
    let outside_before = snapshot(&fx.top, exclusion.as_deref());
    let inside_before = snapshot(&fx.real_root(), None);
    let root_existed = std::fs::symlink_metadata(fx.real_root()).is_ok();

    let ws = fx.workspace();
    let (rel, res) = perform(&ws, &input, case.op, case.name);

    let mut problems = Vec::new();
    match (case.expect, &res) {
        (Expect::Ok(want_rel), Ok(out)) => {
            let want_rel = fx.expand(want_rel);
            if rel.as_deref() != Some(want_rel.as_str()) {
                problems.push(format!("rel: want {want_rel:?}, got {rel:?}"));
            }
            match out {
                Out::Read(bytes) => {
                    if let Some(want) = case.content
                        && bytes.as_slice() != want.as_bytes()
                    {
                        problems.push(format!(
                            "content: want {want:?}, got {:?}",
                            String::from_utf8_lossy(bytes)
                        ));
                    }
                }
                Out::Wrote(data) => {
                    let at = fx.real_root().join(&want_rel);
                    match std::fs::read(&at) {
                        Ok(got) if &got == data => {}
                        Ok(_) => problems.push("written content not found at rel".into()),
                        Err(e) => problems.push(format!("written file missing at rel: {e}")),
                    }
                }
                Out::Listed(names) => {
                    if let Some(want) = case.listing
                        && names.iter().map(String::as_str).ne(want.iter().copied())
                    {
                        problems.push(format!("listing: want {want:?}, got {names:?}"));
                    }
                }
                Out::Resolved => {}
            }
        }
        (Expect::Err(want), Err(got)) if want != *got => {
            problems.push(format!(
                "error kind: want {want:?}, got {got:?} (rel {rel:?})"
            ));
        }
        (Expect::Err(_), Err(_)) => {}
        (Expect::Ok(want_rel), Err(got)) => {
            problems.push(format!(
                "want Ok({want_rel:?}), got Err({got:?}) (rel {rel:?})"
            ));
        }
        (Expect::Err(want), Ok(_)) => {
            problems.push(format!("want Err({want:?}), got Ok (rel {rel:?})"));
        }
    }

    // Nothing outside the root may change, whatever happened.
    let outside_after = snapshot(&fx.top, exclusion.as_deref());
    let d = diff(&outside_before, &outside_after);
    if !d.is_empty() {
        problems.push(format!("OUTSIDE THE ROOT CHANGED: {d:?}"));
    }
    // A failed operation leaves the root as it was (no half-made dirs, no temp files).
    if res.is_err() {
        let inside_after = snapshot(&fx.real_root(), None);
        let d = diff(&inside_before, &inside_after);
        if !d.is_empty() {
            problems.push(format!("failed operation changed the root: {d:?}"));
        }
    }
    match case.kind {
        RootKind::Missing if std::fs::symlink_metadata(fx.configured_root()).is_ok() => {
            problems.push("a configured root that did not exist was created".into());
        }
        RootKind::Default => {
            assert!(!root_existed);
            if !std::fs::metadata(fx.real_root()).is_ok_and(|m| m.is_dir()) {
                problems.push("the default root was not created on first use".into());
            }
            let data = snapshot(&fx.base.join("data"), None);
            if data.keys().any(|k| k != "ws" && !k.starts_with("ws/")) {
                problems.push(format!(
                    "unexpected entries next to the default root: {data:?}"
                ));
            }
        }
        _ => {}
    }
    if let Some(check) = case.check
        && let Err(p) = catch_unwind(AssertUnwindSafe(|| check(&fx)))
    {
        problems.push(format!("check failed: {}", panic_text(&p)));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "panic".into())
}

#[test]
fn containment_table() {
    let cases = cases();
    let mut names: Vec<&str> = cases.iter().map(|c| c.name).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "case names must be unique");
    assert!(cases.len() >= 50, "the table must hold at least 50 cases");

    let mut failures = Vec::new();
    for case in &cases {
        match catch_unwind(AssertUnwindSafe(|| run_case(case))) {
            Ok(Ok(())) => {}
            Ok(Err(problem)) => {
                failures.push(format!("{} ({:?}): {problem}", case.name, case.input))
            }
            Err(p) => failures.push(format!("{}: panicked: {}", case.name, panic_text(&p))),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} containment cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// A configured root that does not exist errors on every call, is never created, and starts
/// working without a restart once the user creates it.
#[test]
fn missing_root_every_call_then_recovers() {
    let fx = Fx::new(RootKind::Missing);
    let ws = fx.workspace();
    for _ in 0..3 {
        for input in ["x", "~", ".", "{root}/x", "../x"] {
            let e = ws.resolve(&fx.expand(input)).expect_err("root is missing");
            assert_eq!(e.kind(), RootMissing, "{input}");
        }
    }
    assert!(std::fs::symlink_metadata(fx.configured_root()).is_err());
    std::fs::create_dir(fx.configured_root()).unwrap();
    let t = ws.resolve("later.txt").expect("root now exists");
    t.write_atomic(b"late", &WriteOptions::default()).unwrap();
    assert_eq!(
        std::fs::read(fx.configured_root().join("later.txt")).unwrap(),
        b"late"
    );
}

/// Errors and logs never carry the root's absolute path, only what the caller typed.
#[test]
fn errors_do_not_leak_root_path() {
    let fx = Fx::new(RootKind::Rw);
    let ws = fx.workspace();
    let root = fx.std_root().display().to_string();
    for input in [
        "../x",
        "link_out_file_abs",
        "loop1",
        "app.env",
        "file.txt/x",
        "nope",
    ] {
        let e = ws
            .resolve(input)
            .and_then(|t| t.open_read().map(|_| ()))
            .unwrap_err();
        assert!(!e.to_string().contains(&root), "{input}: {e}");
        assert_eq!(e.input(), input);
    }
}

/// An internal root (spilled tool output) is reachable by absolute path for reading, but is
/// never writable through the workspace, whatever its own access level: nothing the agent
/// can call widens its own access (design §2). It is never reached by relative paths or `~`.
#[test]
fn internal_root_is_read_only_to_tools() {
    let fx = Fx::new(RootKind::Rw);
    let spill = fx.base.join("spill");
    std::fs::create_dir(&spill).unwrap();
    write(spill.join("out.txt"), "SPILL");
    let internal = Root::new(
        RootSpec {
            path: spill.clone(),
            access: Access::ReadWrite, // ringfence itself writes here
            origin: RootOrigin::Internal,
            label: "tool-output".into(),
        },
        Arc::new(Denylist::empty()),
    )
    .unwrap();
    let ws = fx.workspace().with_internal_root(Arc::new(internal));
    let abs = format!("{}/out.txt", spill.display());

    let t = ws
        .resolve(&abs)
        .expect("internal root readable by absolute path");
    assert_eq!(t.rel(), "out.txt");
    let mut s = String::new();
    t.open_read().unwrap().0.read_to_string(&mut s).unwrap();
    assert_eq!(s, "SPILL");

    let opts = WriteOptions {
        create_parents: true,
        ..WriteOptions::default()
    };
    for input in [
        abs.clone(),
        format!("{}/new.txt", spill.display()),
        format!("{}/d/n.txt", spill.display()),
    ] {
        let e = ws
            .resolve(&input)
            .unwrap()
            .write_atomic(b"X", &opts)
            .unwrap_err();
        assert_eq!(e.kind(), ReadOnly, "{input}");
    }
    assert_eq!(
        std::fs::read_to_string(spill.join("out.txt")).unwrap(),
        "SPILL"
    );
    assert_eq!(
        std::fs::read_dir(&spill).unwrap().count(),
        1,
        "nothing created"
    );
    // Not reachable relatively, and a symlink from the workspace into it leaves the root.
    assert_eq!(
        ws.resolve("out.txt")
            .unwrap()
            .open_read()
            .unwrap_err()
            .kind(),
        NotFound
    );
    link(&spill, fx.std_root().join("to_spill"));
    assert_eq!(
        ws.resolve("to_spill/out.txt").unwrap_err().kind(),
        OutsideRoot
    );
}

/// With several roots, an absolute path reaches the root that holds it (with that root's
/// access) and relative paths the current one; a symlink from one root into another is
/// refused (containment is per root).
#[test]
fn several_roots() {
    let fx = Fx::new(RootKind::Rw);
    let other = fx.base.join("other");
    std::fs::create_dir(&other).unwrap();
    write(other.join("o.txt"), "OTHER");
    let deny = Arc::new(Denylist::new(DENY).unwrap());
    let ws = Workspace::new(vec![
        Arc::new(
            Root::new(
                RootSpec::configured(fx.std_root(), Access::ReadWrite),
                deny.clone(),
            )
            .unwrap(),
        ),
        Arc::new(Root::new(RootSpec::configured(other.clone(), Access::ReadOnly), deny).unwrap()),
    ])
    .unwrap();
    let abs = format!("{}/o.txt", other.display());
    let t = ws.resolve(&abs).unwrap();
    assert_eq!(t.rel(), "o.txt");
    assert_eq!(t.root().label(), "other");
    assert_eq!(
        t.write_atomic(b"X", &WriteOptions::default())
            .unwrap_err()
            .kind(),
        ReadOnly
    );
    assert_eq!(
        ws.resolve("o.txt").unwrap().open_read().unwrap_err().kind(),
        NotFound
    );
    link(&other, fx.std_root().join("to_other"));
    assert_eq!(
        ws.resolve("to_other/o.txt").unwrap_err().kind(),
        OutsideRoot
    );
    assert!(ws.set_current(1));
    let t = ws.resolve("o.txt").unwrap();
    assert_eq!(t.root().label(), "other");
    assert_eq!(
        ws.resolve("../root/file.txt").unwrap_err().kind(),
        OutsideRoot
    );
    assert_eq!(
        std::fs::read_to_string(other.join("o.txt")).unwrap(),
        "OTHER"
    );
}

/// Design §4: an overwrite keeps the existing file's mode; a new file gets 0644 (or the
/// requested mode) whatever the umask; no temp file is left behind by a successful write.
#[test]
fn writes_keep_mode_and_leave_no_temp_files() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new(RootKind::Rw);
    let ws = fx.workspace();
    let r = fx.std_root();
    std::fs::set_permissions(r.join("file.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    ws.resolve("link_file_in")
        .unwrap()
        .write_atomic(b"new", &WriteOptions::default())
        .unwrap();
    let mode = |p: &str| std::fs::metadata(r.join(p)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode("file.txt"), 0o640);
    assert_eq!(std::fs::read(r.join("file.txt")).unwrap(), b"new");
    ws.resolve("fresh.txt")
        .unwrap()
        .write_atomic(b"x", &WriteOptions::default())
        .unwrap();
    assert_eq!(mode("fresh.txt"), 0o644);
    let opts = WriteOptions {
        new_file_mode: Some(0o600),
        ..WriteOptions::default()
    };
    ws.resolve("private.txt")
        .unwrap()
        .write_atomic(b"x", &opts)
        .unwrap();
    assert_eq!(mode("private.txt"), 0o600);
    let temps: Vec<_> = std::fs::read_dir(&r)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".rftmp"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}

/// A configured root that is a file, or a dangling symlink, is as good as missing: every
/// call fails with RootMissing and nothing is created (not even the symlink's target).
#[test]
fn configured_root_that_is_a_file_or_dangling_link() {
    let fx = Fx::new(RootKind::Rw);
    let as_file = fx.base.join("root-file");
    write(&as_file, "not a dir");
    let dangling = fx.base.join("root-link");
    link(fx.base.join("nowhere"), &dangling);
    for path in [&as_file, &dangling] {
        let ws = one_root(path, &[]);
        for input in ["x", "~", "a/b/c"] {
            let e = ws.resolve(input).unwrap_err();
            assert_eq!(e.kind(), RootMissing, "{}: {input}", path.display());
        }
    }
    assert!(std::fs::symlink_metadata(fx.base.join("nowhere")).is_err());
    assert_eq!(std::fs::read_to_string(&as_file).unwrap(), "not a dir");
}

/// With nested roots, an absolute path belongs to the most specific root: its access level
/// decides, whatever the configuration order.
#[test]
fn nested_roots_the_most_specific_root_decides() {
    let tmp = tempfile::tempdir().unwrap();
    let outer = tmp.path().join("outer");
    let inner = outer.join("inner");
    std::fs::create_dir_all(&inner).unwrap();
    let deny = std::sync::Arc::new(ringfence_fs::Denylist::empty());
    let outer_root = std::sync::Arc::new(
        ringfence_fs::Root::new(
            ringfence_fs::RootSpec::configured(outer.clone(), ringfence_fs::Access::ReadWrite),
            deny.clone(),
        )
        .unwrap(),
    );
    let inner_root = std::sync::Arc::new(
        ringfence_fs::Root::new(
            ringfence_fs::RootSpec::configured(inner.clone(), ringfence_fs::Access::ReadOnly),
            deny,
        )
        .unwrap(),
    );
    let ws = ringfence_fs::Workspace::new(vec![outer_root, inner_root]).unwrap();
    let t = ws.resolve(&format!("{}/x.txt", inner.display())).unwrap();
    assert_eq!(t.rel(), "x.txt");
    let err = t
        .write_atomic(b"x", &ringfence_fs::WriteOptions::default())
        .unwrap_err();
    assert_eq!(err.kind(), ringfence_fs::FsErrorKind::ReadOnly);
    assert!(!inner.join("x.txt").exists());
}

/// A symlink whose target is not UTF-8 is refused rather than converted lossily (which
/// could name a different file).
#[test]
fn non_utf8_symlink_target_is_refused() {
    use std::os::unix::ffi::OsStrExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(
        std::ffi::OsStr::from_bytes(b"caf\xe9.txt"),
        root.join("link"),
    )
    .unwrap();
    let ws = one_root(&root, &[]);
    let err = ws.resolve("link").unwrap_err();
    assert_eq!(err.kind(), ringfence_fs::FsErrorKind::InvalidPath);
}

/// Regression: a symlink whose target climbs out of a missing directory back to itself
/// (`loop -> nope/../loop`) used to recurse without bound and overflow the stack, killing the
/// server. It is a symlink loop like any other; `..` out of a missing part still works.
#[test]
fn symlink_loop_through_a_missing_directory_is_a_loop_not_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("file.txt"), "x").unwrap();
    std::os::unix::fs::symlink("nope/../loop", root.join("loop")).unwrap();
    std::os::unix::fs::symlink("nope/../../outside", root.join("out")).unwrap();
    let ws = one_root(&root, &[]);
    assert_eq!(
        ws.resolve("loop").unwrap_err().kind(),
        ringfence_fs::FsErrorKind::SymlinkLoop
    );
    assert_eq!(
        ws.resolve("out").unwrap_err().kind(),
        ringfence_fs::FsErrorKind::OutsideRoot
    );
    assert_eq!(ws.resolve("missing/../file.txt").unwrap().rel(), "file.txt");
    assert_eq!(ws.resolve("a/b/../../file.txt").unwrap().rel(), "file.txt");
    assert_eq!(ws.resolve("a/b/../c").unwrap().rel(), "a/c");
    assert_eq!(ws.resolve("a/..").unwrap().rel(), "");
    assert_eq!(
        ws.resolve("a/../../x").unwrap_err().kind(),
        ringfence_fs::FsErrorKind::OutsideRoot
    );
}

/// Passing through a denied entry is denied, so errors cannot reveal what a denied directory
/// holds (`secrets/k.txt/..` used to answer "is a file, not a directory").
#[test]
fn paths_through_denied_entries_reveal_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(root.join("secrets/sub")).unwrap();
    std::fs::create_dir_all(root.join("pub")).unwrap();
    std::fs::write(root.join("secrets/k.txt"), "k").unwrap();
    std::fs::write(root.join(".env"), "E").unwrap();
    std::fs::write(root.join("pub/a.txt"), "a").unwrap();
    let ws = one_root(&root, &["secrets/", "*.env"]);
    for input in [
        "secrets/k.txt/../../pub/a.txt",
        "secrets/nope.txt/../../pub/a.txt",
        "secrets/sub/../../pub/a.txt",
        ".env/../pub/a.txt",
    ] {
        assert_eq!(
            ws.resolve(input).unwrap_err().kind(),
            ringfence_fs::FsErrorKind::Denied,
            "{input}"
        );
    }
    // A denied name that does not exist answers the same: existence is not revealed.
    assert_eq!(
        ws.resolve("x.env/../pub/a.txt").unwrap_err().kind(),
        ringfence_fs::FsErrorKind::Denied
    );
    assert_eq!(
        ws.resolve("new.env").unwrap_err().kind(),
        ringfence_fs::FsErrorKind::Denied
    );
    assert_eq!(ws.resolve("pub/a.txt").unwrap().rel(), "pub/a.txt");
}

/// A write that creates a file never replaces one that appeared after resolution: that file
/// was never read, so replacing it would bypass the read-first gate.
#[test]
fn creating_a_file_never_replaces_one_that_appeared_meanwhile() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let ws = one_root(&root, &[]);
    let target = ws.resolve("new.txt").unwrap();
    assert!(!target.exists());
    std::fs::write(root.join("new.txt"), "theirs").unwrap();
    let err = target
        .write_atomic(b"ours", &ringfence_fs::WriteOptions::default())
        .unwrap_err();
    assert_eq!(err.kind(), ringfence_fs::FsErrorKind::AlreadyExists);
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).unwrap(),
        "theirs"
    );
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(&root).unwrap().count(), 1);
}
