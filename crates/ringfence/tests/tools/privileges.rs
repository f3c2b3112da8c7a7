//! No privilege gained through copies, moves, writes or undo (issue 13, item 2).
//!
//! A server running as root that copied another user's setuid program made a setuid-*root*
//! copy; `delete_file` then `undo_edit` restored one likewise. Set-user-ID and set-group-ID
//! bits now survive only where the new file has exactly the source's owner and group (as
//! `cp` keeps them only when it keeps the ownership), and content ringfence writes never
//! carries them (as the kernel clears them on a write by anyone without CAP_FSETID).
//!
//! The foreign-owner cases need root (to chown a file to someone else): they are skipped,
//! saying so, when the tests do not run as root. CI runs them as root.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use ringfence_core::Limits;
use ringfence_fs::Access;
use serde_json::json;

use crate::common::Fx;

/// A user and group no account on the machine is likely to have.
const OTHER: u32 = 4242;
const SET_ID: u32 = 0o6000;

/// Whether the tests run as root (the owner of a directory they just made).
fn is_root() -> bool {
    let dir = tempfile::tempdir().unwrap();
    std::fs::metadata(dir.path()).unwrap().uid() == 0
}

/// Skips the calling test (returning true) unless it runs as root.
fn skip_unless_root(test: &str) -> bool {
    if is_root() {
        return false;
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("SKIPPED {test}: needs root to give a file to another user");
    }
    true
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// `rel` in the fixture's root: a setuid and setgid program owned by another user.
fn plant_foreign_setuid(fx: &Fx, rel: &str) {
    fx.write(rel, "#!/bin/sh\nid\n");
    let p = fx.path(rel);
    std::os::unix::fs::chown(&p, Some(OTHER), Some(OTHER)).unwrap();
    // chown clears the set-id bits: set them afterwards.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o6755)).unwrap();
    assert_eq!(mode(&p), 0o6755);
}

#[tokio::test]
async fn copy_of_another_users_setuid_program_is_not_setuid() {
    if skip_unless_root("copy_of_another_users_setuid_program_is_not_setuid") {
        return;
    }
    let fx = Fx::new();
    plant_foreign_setuid(&fx, "su-like");
    fx.ok(
        "copy_file",
        json!({"source": "su-like", "destination": "copy"}),
    )
    .await;
    let copy = fx.path("copy");
    let meta = std::fs::metadata(&copy).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (0, 0),
        "the copy belongs to the server"
    );
    assert_eq!(
        mode(&copy),
        0o755,
        "a root-owned copy of another user's setuid program must lose the set-id bits"
    );
    // The same inside a directory copy.
    fx.write("tree/readme", "r\n");
    plant_foreign_setuid(&fx, "tree/bin/tool");
    fx.ok(
        "copy_file",
        json!({"source": "tree", "destination": "tree2"}),
    )
    .await;
    assert_eq!(mode(&fx.path("tree2/bin/tool")), 0o755);
}

#[tokio::test]
async fn undo_of_a_delete_never_restores_set_id_bits() {
    if skip_unless_root("undo_of_a_delete_never_restores_set_id_bits") {
        return;
    }
    let fx = Fx::new();
    plant_foreign_setuid(&fx, "su-like");
    fx.ok("delete_file", json!({"path": "su-like"})).await;
    fx.ok("undo_edit", json!({"path": "su-like"})).await;
    let p = fx.path("su-like");
    assert_eq!(std::fs::read_to_string(&p).unwrap(), "#!/bin/sh\nid\n");
    assert_eq!(
        mode(&p),
        0o755,
        "a file restored by undo must not come back set-id"
    );
}

#[tokio::test]
async fn writing_over_a_setuid_file_clears_the_set_id_bits() {
    if skip_unless_root("writing_over_a_setuid_file_clears_the_set_id_bits") {
        return;
    }
    let fx = Fx::new();
    plant_foreign_setuid(&fx, "su-like");
    fx.ok("read_file", json!({"path": "su-like"})).await;
    fx.ok(
        "write_file",
        json!({"path": "su-like", "content": "#!/bin/sh\nexec /bin/sh\n"}),
    )
    .await;
    let p = fx.path("su-like");
    let meta = std::fs::metadata(&p).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid()),
        (OTHER, OTHER),
        "the owner is kept"
    );
    assert_eq!(
        mode(&p),
        0o755,
        "new content must not run with the old set-id bits"
    );
    // An edit too; and undo of it does not bring the bits back.
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o6755)).unwrap();
    fx.ok("read_file", json!({"path": "su-like"})).await;
    fx.ok(
        "edit_file",
        json!({"path": "su-like", "old_string": "exec", "new_string": "exec -l"}),
    )
    .await;
    assert_eq!(mode(&p), 0o755);
    fx.ok("undo_edit", json!({"path": "su-like"})).await;
    assert_eq!(mode(&p), 0o755);
}

#[tokio::test]
async fn new_files_are_never_set_id() {
    let fx = Fx::new();
    fx.ok("write_file", json!({"path": "new.sh", "content": "x\n"}))
        .await;
    assert_eq!(mode(&fx.path("new.sh")) & SET_ID, 0);
}

/// The bits stay where nothing changes hands: a copy of the server's own setuid file, owned
/// by the same user and group, keeps its mode (as `cp -p` would).
#[tokio::test]
async fn copy_of_an_own_setuid_file_keeps_its_mode() {
    let fx = Fx::new();
    fx.write("mine", "x\n");
    let p = fx.path("mine");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4750)).unwrap();
    fx.ok(
        "copy_file",
        json!({"source": "mine", "destination": "mine2"}),
    )
    .await;
    assert_eq!(mode(&fx.path("mine2")), 0o4750);
}

/// A move to another file system copies, then removes: the copy follows the copy rule.
#[tokio::test]
async fn move_across_file_systems_drops_set_id_bits() {
    if skip_unless_root("move_across_file_systems_drops_set_id_bits") {
        return;
    }
    let shm = Path::new("/dev/shm");
    let Ok(other_fs) = tempfile::tempdir_in(shm) else {
        #[allow(clippy::print_stderr)]
        {
            eprintln!("SKIPPED move_across_file_systems_drops_set_id_bits: no /dev/shm");
        }
        return;
    };
    let other = other_fs.path().to_path_buf();
    let fx = Fx::with_roots(
        Limits::default(),
        &[],
        // An absolute name replaces the fixture's base directory.
        &[
            ("ws", Access::ReadWrite),
            (other.to_str().unwrap(), Access::ReadWrite),
        ],
    );
    if std::fs::metadata(&other).unwrap().dev() == std::fs::metadata(&fx.root).unwrap().dev() {
        #[allow(clippy::print_stderr)]
        {
            eprintln!(
                "SKIPPED move_across_file_systems_drops_set_id_bits: /dev/shm is on the same file system"
            );
        }
        return;
    }
    plant_foreign_setuid(&fx, "su-like");
    let dest = other.join("su-like");
    fx.ok(
        "move_file",
        json!({"source": "su-like", "destination": dest.display().to_string()}),
    )
    .await;
    assert!(!fx.path("su-like").exists());
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "#!/bin/sh\nid\n");
    assert_eq!(mode(&dest), 0o755);
}
