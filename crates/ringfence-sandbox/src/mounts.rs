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

/// A step of the sandbox's setup that failed: what it was, and the system's error.
#[derive(Debug, thiserror::Error)]
#[error("{what}: {source}")]
pub(crate) struct SysError {
    pub what: String,
    #[source]
    pub source: std::io::Error,
}

impl SysError {
    pub(crate) fn new(what: impl Into<String>, source: std::io::Error) -> SysError {
        SysError {
            what: what.into(),
            source,
        }
    }
}

fn c_path(path: &Path) -> Result<CString, SysError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        SysError::new(
            format!("{} holds a NUL byte", path.display()),
            std::io::ErrorKind::InvalidInput.into(),
        )
    })
}

/// The failure of the system call just made, for `what`.
fn os_error(what: &str) -> SysError {
    SysError::new(what, std::io::Error::last_os_error())
}

impl std::fmt::Display for MountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MountError::Unavailable(s) | MountError::Broken(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for MountError {}

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
pub fn read_only_outside(writable: &[PathBuf], kind: NamespaceKind) -> Result<Entered, MountError> {
    let dirs = writable_dirs(writable)?;
    let entered = enter_namespace(kind)?;
    make_private().map_err(|e| MountError::Unavailable(e.to_string()))?;
    read_only_except(&dirs)?;
    Ok(entered)
}

/// The writable directories by their real paths: a root reached through a symlink is
/// cloned and put back where it really is (move_mount does not follow a symlink at its
/// target).
#[allow(
    clippy::disallowed_methods,
    reason = "the policy's own paths, to tell directories from device files"
)]
pub(crate) fn writable_dirs(writable: &[PathBuf]) -> Result<Vec<CString>, MountError> {
    writable
        .iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.is_dir()))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .map(|p| c_path(&p))
        .collect::<Result<_, _>>()
        .map_err(|e| MountError::Unavailable(e.to_string()))
}

/// Makes every mount of this (new) mount namespace private, so that nothing done here
/// propagates back to the machine's mounts. The first step in a new namespace, before any
/// mount is made.
#[allow(unsafe_code)]
pub(crate) fn make_private() -> Result<(), SysError> {
    // SAFETY: mount(2) with a NUL-terminated target and null source, type and data;
    // MS_REC | MS_PRIVATE only changes propagation within this (new) namespace.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(os_error("cannot make the mounts private"));
    }
    Ok(())
}

/// Mounts a `/proc` of the caller's PID namespace over the machine's: the command sees its
/// own processes only. Call it in the namespace's first process, after [`make_private`].
#[allow(unsafe_code)]
pub(crate) fn mount_proc() -> Result<(), SysError> {
    // SAFETY: mount(2) with NUL-terminated source, target and type, and null data.
    let r = unsafe {
        libc::mount(
            c"proc".as_ptr(),
            c"/proc".as_ptr(),
            c"proc".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if r != 0 {
        return Err(os_error(
            "cannot mount /proc for the command's PID namespace (a container that hides parts of /proc forbids it)",
        ));
    }
    Ok(())
}

/// Mounts a new `tmpfs` of at most `size` bytes on `dir` (private to the command, mode
/// 0700, no set-user-ID or device files): what the command writes there is memory, counted
/// in its memory cgroup, and gone with its namespace.
#[allow(unsafe_code)]
pub(crate) fn mount_tmp(dir: &Path, size: u64) -> Result<(), SysError> {
    let target = c_path(dir)?;
    // Files too are bounded (an inode and its name are memory outside `size`): one per 16 KiB
    // allowed, at least 1024.
    let inodes = (size / (16 << 10)).max(1024);
    let data = CString::new(format!("size={size},nr_inodes={inodes},mode=0700"))
        .expect("no NUL in digits");
    // SAFETY: mount(2) with NUL-terminated source, target, type and option string.
    let r = unsafe {
        libc::mount(
            c"tmpfs".as_ptr(),
            target.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(os_error(&format!(
            "cannot mount the command's temporary directory {}",
            dir.display()
        )));
    }
    Ok(())
}

/// Makes every mount read-only but the directories `dirs` (from [`writable_dirs`]).
#[allow(unsafe_code)]
pub(crate) fn read_only_except(dirs: &[CString]) -> Result<(), MountError> {
    use MountError::{Broken, Unavailable};
    let root = c"/";
    // Writable copies first, detached, so that the read-only change below does not reach
    // them.
    let mut copies = Vec::new();
    for dir in dirs {
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
            return Err(Unavailable(
                os_error(&format!(
                    "cannot copy the mount of {}",
                    dir.to_string_lossy()
                ))
                .to_string(),
            ));
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
        return Err(Unavailable(
            os_error("cannot make the mounts read-only").to_string(),
        ));
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
            return Err(Broken(
                os_error(&format!(
                    "cannot mount {} writable again",
                    dir.to_string_lossy()
                ))
                .to_string(),
            ));
        }
    }
    Ok(())
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
        return Err(MountError::Unavailable(
            os_error("cannot make a user and mount namespace").to_string(),
        ));
    }
    crate::ns::map_ids(uid, gid).map_err(|e| MountError::Broken(e.to_string()))?;
    Ok(Entered::UserAndMount)
}

/// Why the init's mounts could not be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NamespaceSetupError {
    #[error(transparent)]
    Sys(#[from] SysError),
    #[error(transparent)]
    Mount(#[from] MountError),
}

/// The init's mounts in the command's new namespaces (issue 29), in order: every mount
/// private (nothing propagates back to the machine), the PID namespace's own `/proc`, the
/// IPC namespace's limits (where no memory cgroup bounds shared memory), everything
/// read-only but the writable directories, and `$TMPDIR` as a size-capped `tmpfs`. Returns
/// whether the IPC namespace's shared memory is bounded by its limits: in a user namespace
/// that maps only the server's own user they cannot be set (the kernel gives them to a root
/// the namespace does not map), and the caller refuses System V IPC instead.
pub(crate) fn namespace_mounts(
    policy: &crate::Policy,
    memory_cgroup: bool,
) -> Result<bool, NamespaceSetupError> {
    let dirs = writable_dirs(&policy.write)?;
    make_private()?;
    mount_proc()?;
    let mut ipc_bounded = false;
    if !memory_cgroup && let Some(bytes) = policy.limits.memory {
        match ipc_limits(bytes) {
            Ok(()) => ipc_bounded = true,
            Err(why) => tracing::debug!(%why, "System V IPC is refused instead"),
        }
    }
    read_only_except(&dirs)?;
    if let Some(tmp) = &policy.tmp {
        mount_tmp(&tmp.path, tmp.size)?;
    }
    Ok(ipc_bounded)
}

/// Bounds System V shared memory and message queues of the command's own IPC namespace
/// (its defaults allow far more than the machine has): at most `bytes` of shared memory in
/// all, and a few small message queues.
#[allow(
    clippy::disallowed_methods,
    reason = "/proc/sys of the command's namespace"
)]
fn ipc_limits(bytes: u64) -> Result<(), String> {
    let page = rustix::param::page_size() as u64;
    for (name, value) in [
        ("shmmax", bytes),
        ("shmall", bytes.div_ceil(page)),
        ("msgmni", 16),
    ] {
        std::fs::write(format!("/proc/sys/kernel/{name}"), value.to_string())
            .map_err(|e| format!("cannot set kernel.{name} in the command's IPC namespace: {e}"))?;
    }
    Ok(())
}
