//! Everything outside the writable roots, read-only: what Landlock cannot say. Landlock
//! controls opening, creating, renaming and removing files, but not changing a file's mode,
//! owner or times: without this a command could `chmod 0777` or `touch` any file its Unix
//! user owns anywhere on the machine (a key in the home directory, another workspace).
//!
//! The second stage, before it restricts itself, moves into a mount namespace of its own
//! (and, where the process may not make one directly, a user namespace around it that maps
//! only its own user and group), makes every mount read-only and puts back a writable copy
//! of each writable directory. A mode, owner or time change outside those directories then
//! fails with `EROFS`, whatever the path. Device files (`/dev/null`) are not affected by a
//! read-only mount. Nothing propagates back to the machine's mounts (the namespace is
//! private), and the namespace ends with the command's last process.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// How the namespace is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamespaceKind {
    /// Try a mount namespace alone (the process has `CAP_SYS_ADMIN`), else one inside a
    /// new user namespace.
    Auto,
    /// Always inside a new user namespace (what an ordinary user gets; for tests).
    User,
}

/// Why the outside could not be made read-only.
#[derive(Debug)]
pub enum MountError {
    /// Nothing changed that matters: the command may run without this layer.
    Unavailable(String),
    /// Half done: the command must not run.
    Broken(String),
}

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const OPEN_TREE_CLONE: libc::c_uint = 0x1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} holds a NUL byte", path.display()))
}

fn os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// Makes every mount read-only except the directories of `writable` (non-directories, the
/// device files, are skipped: a read-only mount does not stop writing to a device). Call it
/// single-threaded, before Landlock and the system-call filter (which forbid all of this).
///
/// [`MountError::Unavailable`]: nothing was made read-only (no namespace could be made
/// here), and the writable directories are as they were. [`MountError::Broken`]: the change
/// was only partly made; the command must not run.
///
/// Descriptors opened before the call still reach the file systems as they were: the
/// caller must reopen its stdin (`/dev/null`) afterwards, or a command could change the
/// mode of the file behind it through `/dev/stdin`.
#[allow(unsafe_code)]
#[allow(
    clippy::disallowed_methods,
    reason = "the policy's own paths, to tell directories from device files"
)]
pub fn read_only_outside(writable: &[PathBuf], kind: NamespaceKind) -> Result<Entered, MountError> {
    use MountError::{Broken, Unavailable};
    // Each directory by its real path: a root reached through a symlink is cloned and put
    // back where it really is (move_mount does not follow a symlink at its target).
    let dirs: Vec<CString> = writable
        .iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_dir()))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .map(|p| c_path(&p))
        .collect::<Result<_, _>>()
        .map_err(Unavailable)?;
    let entered = enter_namespace(kind)?;
    let root = c"/";
    // SAFETY: mount(2) with a NUL-terminated target and null source, type and data;
    // MS_REC | MS_PRIVATE only changes propagation within this (new) namespace.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(Unavailable(os_error("cannot make the mounts private")));
    }
    // Writable copies first, detached, so that the read-only change below does not reach
    // them.
    let mut copies = Vec::new();
    for dir in &dirs {
        // SAFETY: open_tree(2) with AT_FDCWD and a NUL-terminated path; the returned
        // descriptor is owned below.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                dir.as_ptr(),
                OPEN_TREE_CLONE | AT_RECURSIVE | libc::O_CLOEXEC as libc::c_uint,
            )
        };
        if fd < 0 {
            return Err(Unavailable(os_error(&format!(
                "cannot copy the mount of {}",
                dir.to_string_lossy()
            ))));
        }
        // SAFETY: a new descriptor returned by the kernel, owned by nothing else.
        let fd =
            unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd as i32) };
        copies.push((dir, fd));
    }
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr(2) reads `attr` (of the size passed) and a NUL-terminated path.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            root.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        // (mount_setattr changes all the mounts or, failing, none.)
        return Err(Unavailable(os_error("cannot make the mounts read-only")));
    }
    for (dir, fd) in &copies {
        // SAFETY: move_mount(2) from the detached tree's descriptor (empty path) onto a
        // NUL-terminated path.
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_mount,
                std::os::fd::AsRawFd::as_raw_fd(fd),
                c"".as_ptr(),
                libc::AT_FDCWD,
                dir.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            )
        };
        if r != 0 {
            return Err(Broken(os_error(&format!(
                "cannot mount {} writable again",
                dir.to_string_lossy()
            ))));
        }
    }
    Ok(entered)
}

/// Which namespaces [`read_only_outside`] entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entered {
    /// A mount namespace alone.
    Mount,
    /// A mount namespace inside a new user namespace (in which the kernel counts the
    /// process limit for the command's own processes only, from Linux 5.14).
    UserAndMount,
}

/// Enters a new mount namespace: directly when allowed, else inside a new user namespace
/// mapping this process's user and group to themselves (nothing else is mapped: files of
/// other users show as the overflow user, and no privilege outside is gained).
/// Nothing has changed when it fails before `unshare` succeeds; once in a user namespace, a
/// failure to map the ids is [`MountError::Broken`] (files made there would have no owner).
#[allow(unsafe_code)]
fn enter_namespace(kind: NamespaceKind) -> Result<Entered, MountError> {
    if kind == NamespaceKind::Auto {
        // SAFETY: unshare(2) of the mount namespace (the caller is single-threaded, or the
        // thread gets a private copy of its file-system context).
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } == 0 {
            return Ok(Entered::Mount);
        }
    }
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    // SAFETY: as above; a user namespace needs a single-threaded caller (else EINVAL).
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) } != 0 {
        return Err(MountError::Unavailable(os_error(
            "cannot make a user and mount namespace",
        )));
    }
    #[allow(clippy::disallowed_methods, reason = "/proc, not a user's file")]
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .map_err(|e| MountError::Broken(format!("cannot write /proc/self/{file}: {e}")))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(Entered::UserAndMount)
}
