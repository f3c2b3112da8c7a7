//! The data directory's own records are private (issue 13, item 5): `create_private_dir_all`
//! makes 0700 directories whatever the umask allows, and `make_private` tightens what an
//! earlier version made wider — without following a symbolic link out, opening a FIFO, or
//! going further than asked.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use ringfence_fs::{Reach, create_private_dir_all, make_private};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn private_directories_are_0700_with_their_parents() {
    let tmp = tempfile::tempdir().unwrap();
    let deep = tmp.path().join("data/tool-output/key/user");
    create_private_dir_all(&deep).unwrap();
    for p in [
        "data",
        "data/tool-output",
        "data/tool-output/key",
        "data/tool-output/key/user",
    ] {
        assert_eq!(mode(&tmp.path().join(p)), 0o700, "{p}");
    }
    // An existing directory is left to make_private.
    chmod(&deep, 0o755);
    create_private_dir_all(&deep).unwrap();
    assert_eq!(mode(&deep), 0o755);
}

#[test]
fn make_private_tightens_a_tree_and_nothing_outside_it() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path();
    let outside = base.join("outside.txt");
    std::fs::write(&outside, "o").unwrap();
    chmod(&outside, 0o644);
    let outside_dir = base.join("outside-dir");
    std::fs::create_dir(&outside_dir).unwrap();
    chmod(&outside_dir, 0o755);

    let data = base.join("data");
    std::fs::create_dir_all(data.join("a/b")).unwrap();
    std::fs::write(data.join("a/b/saved"), "s").unwrap();
    std::fs::write(data.join("a/setuid"), "s").unwrap();
    chmod(&data.join("a/setuid"), 0o4755);
    std::os::unix::fs::symlink(&outside, data.join("a/link")).unwrap();
    std::os::unix::fs::symlink(&outside_dir, data.join("a/dirlink")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        data.join("a/fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .unwrap();
    chmod(&data.join("a/fifo"), 0o644);
    for d in ["", "a", "a/b"] {
        chmod(&data.join(d), 0o755);
    }
    chmod(&data.join("a/b/saved"), 0o644);

    let changed = make_private(&data, Reach::Tree).unwrap();
    assert_eq!(changed, 5);
    for d in ["", "a", "a/b"] {
        assert_eq!(mode(&data.join(d)), 0o700, "{d}");
    }
    assert_eq!(mode(&data.join("a/b/saved")), 0o600);
    assert_eq!(mode(&data.join("a/setuid")), 0o700);
    // Links are neither followed nor changed; a FIFO is left alone.
    assert_eq!(mode(&outside), 0o644);
    assert_eq!(mode(&outside_dir), 0o755);
    assert_eq!(mode(&data.join("a/fifo")), 0o644);
    // Nothing left to do the second time; a missing path is fine; a link given as the
    // path itself is not followed either.
    assert_eq!(make_private(&data, Reach::Tree).unwrap(), 0);
    assert_eq!(make_private(&base.join("missing"), Reach::Tree).unwrap(), 0);
    assert_eq!(
        make_private(&data.join("a/dirlink"), Reach::Tree).unwrap(),
        0
    );
    assert_eq!(mode(&outside_dir), 0o755);
}

#[test]
fn make_private_goes_no_further_than_asked() {
    let tmp = tempfile::tempdir().unwrap();
    let users = tmp.path().join("users");
    let ws = users.join("bob/workspace");
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    std::fs::write(users.join("bob/note"), "n").unwrap();
    std::fs::write(ws.join("report.txt"), "r").unwrap();
    for p in ["", "bob", "bob/workspace", "bob/workspace/docs"] {
        chmod(&users.join(p), 0o755);
    }
    chmod(&users.join("bob/note"), 0o644);
    chmod(&ws.join("report.txt"), 0o644);

    make_private(&users, Reach::Dirs(2)).unwrap();
    for p in ["", "bob", "bob/workspace"] {
        assert_eq!(mode(&users.join(p)), 0o700, "{p}");
    }
    // Deeper directories and the files at any level are not ringfence's to change.
    assert_eq!(mode(&ws.join("docs")), 0o755);
    assert_eq!(mode(&ws.join("report.txt")), 0o644);
    assert_eq!(mode(&users.join("bob/note")), 0o644);

    let itself = tmp.path().join("workspace");
    std::fs::create_dir(&itself).unwrap();
    std::fs::write(itself.join("plan.txt"), "p").unwrap();
    chmod(&itself, 0o755);
    chmod(&itself.join("plan.txt"), 0o644);
    assert_eq!(make_private(&itself, Reach::Itself).unwrap(), 1);
    assert_eq!(mode(&itself), 0o700);
    assert_eq!(mode(&itself.join("plan.txt")), 0o644);
}
