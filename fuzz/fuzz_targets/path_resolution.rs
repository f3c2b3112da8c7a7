//! Path resolution: whatever string the model sends, a resolved target lies inside the root
//! (by its spelling, and — where it exists — by the real path the kernel gives it), and a
//! path the denylist covers never resolves.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use libfuzzer_sys::fuzz_target;
use ringfence_fs::{Access, Denylist, Root, RootSpec, Workspace};

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    workspace: Workspace,
}

/// A root with nested directories, a denied file, links that stay inside, links that lead
/// out (absolute and relative), a dangling link and a link loop; a secret beside the root.
static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    let root = base.join("root");
    std::fs::create_dir_all(root.join("a/b/c")).unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/secret.txt"), "secret").unwrap();
    std::fs::write(root.join("a/b/file.txt"), "x").unwrap();
    std::fs::write(root.join(".env"), "KEY=1").unwrap();
    symlink("b", root.join("a/in")).unwrap();
    symlink("../../outside", root.join("a/up")).unwrap();
    symlink(base.join("outside"), root.join("abs")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    symlink("loop", root.join("loop")).unwrap();
    symlink(".env", root.join("env-link")).unwrap();
    let denylist = Arc::new(Denylist::new(&[".env"]).unwrap());
    let spec = RootSpec::configured(root.clone(), Access::ReadWrite);
    let workspace = Workspace::new(vec![Arc::new(Root::new(spec, denylist).unwrap())]).unwrap();
    // Start inside a sub-directory so `..` has somewhere to climb.
    let a = workspace.resolve("a").unwrap();
    workspace.switch_to(&a).unwrap();
    Fixture {
        _dir: dir,
        root,
        workspace,
    }
});

fn check(root: &Path, input: &str, target: &ringfence_fs::Target, follows: bool) {
    let abs = target.absolute();
    assert!(
        abs.starts_with(root),
        "{input:?} resolved to {abs:?}, outside {root:?}"
    );
    if follows && let Ok(real) = std::fs::canonicalize(&abs) {
        assert!(
            real.starts_with(root),
            "{input:?} resolved to {abs:?}, whose real path {real:?} is outside"
        );
    }
    assert!(
        !target.rel().split('/').any(|c| c == ".env"),
        "{input:?} reached the denied .env as {:?}",
        target.rel()
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(input) = std::str::from_utf8(data) else {
        return;
    };
    let fx = &*FIXTURE;
    if let Ok(t) = fx.workspace.resolve(input) {
        check(&fx.root, input, &t, true);
    }
    if let Ok(t) = fx.workspace.resolve_entry(input) {
        check(&fx.root, input, &t, false);
    }
});
