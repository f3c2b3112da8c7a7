//! The command's own namespaces (issue 29). The second stage moves into new mount, IPC,
//! UTS, PID and cgroup namespaces — and a network namespace when commands have no network —
//! before anything of the command runs, so that what the kernel keeps per namespace is the
//! command's alone and goes away with it:
//!
//! - **IPC**: System V shared memory, message queues and semaphores (and POSIX message
//!   queues) made by the command vanish with its last process; the machine's segments are
//!   out of its sight.
//! - **PID**: the command sees only its own processes (its own `/proc`), and can name no
//!   other process to signal, trace or read: the guarantee Landlock's signal scope (ABI 6)
//!   gives, on any kernel.
//! - **network** (`network = "none"`): only a loopback device, down; abstract Unix sockets
//!   are the namespace's own.
//! - **UTS** and **cgroup**: the host name and the cgroup paths are the command's own view.
//!
//! Where the process may not make namespaces directly (it lacks `CAP_SYS_ADMIN`), they are
//! made inside a new user namespace that maps only its own user and group to themselves.

use std::io;

pub use crate::command::{Made, UserNamespace};

/// Why the namespaces could not be made.
#[derive(Debug)]
pub enum NsError {
    /// Nothing changed: the process is where it was.
    Unavailable(String),
    /// A user namespace was entered but could not be set up: the command must not run.
    Broken(String),
}

impl std::fmt::Display for NsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NsError::Unavailable(s) | NsError::Broken(s) => f.write_str(s),
        }
    }
}

/// Enters new namespaces for the command: mount, IPC, UTS and PID (for the children of the
/// caller: the next process it starts is the namespace's first), and network when `net`.
/// Call it single-threaded when a user namespace may be needed.
#[allow(unsafe_code)]
pub fn enter(user: UserNamespace, net: bool) -> Result<Made, NsError> {
    let mut flags =
        libc::CLONE_NEWNS | libc::CLONE_NEWIPC | libc::CLONE_NEWUTS | libc::CLONE_NEWPID;
    if net {
        flags |= libc::CLONE_NEWNET;
    }
    let made = Made {
        user: false,
        mount: true,
        pid: true,
        ipc: true,
        uts: true,
        net,
        // Made by [`enter_cgroup`], once the process is in the command's cgroups.
        cgroup: false,
    };
    let mut direct = None;
    if user == UserNamespace::Auto {
        // SAFETY: unshare(2) with namespace flags only; it touches no memory of ours.
        if unsafe { libc::unshare(flags) } == 0 {
            return Ok(made);
        }
        direct = Some(io::Error::last_os_error());
    }
    let uid = rustix::process::getuid().as_raw();
    let gid = rustix::process::getgid().as_raw();
    // SAFETY: as above; a user namespace needs a single-threaded caller (else EINVAL).
    if unsafe { libc::unshare(libc::CLONE_NEWUSER | flags) } != 0 {
        let e = io::Error::last_os_error();
        return Err(NsError::Unavailable(match direct {
            Some(d) => format!(
                "cannot make namespaces for the command ({d}), nor inside a user namespace ({e})"
            ),
            None => format!("cannot make a user namespace for the command: {e}"),
        }));
    }
    map_ids(uid, gid).map_err(|e| NsError::Broken(e.to_string()))?;
    Ok(Made { user: true, ..made })
}

/// Maps this process's user and group to themselves in the user namespace it just entered
/// (nothing else is mapped: files of other users show as the overflow user, and no
/// privilege outside is gained).
#[allow(clippy::disallowed_methods, reason = "/proc, not a user's file")]
pub(crate) fn map_ids(uid: u32, gid: u32) -> Result<(), crate::mounts::SysError> {
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text).map_err(|e| {
            crate::mounts::SysError::new(
                format!("cannot write /proc/self/{file} in the command's user namespace"),
                e,
            )
        })
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// Enters a new cgroup namespace, rooted at the cgroups the process is in now (the
/// command's, once the helper has moved it): the command sees its own cgroup as `/`.
#[allow(unsafe_code)]
pub fn enter_cgroup() -> bool {
    // SAFETY: unshare(2) with a namespace flag only; it touches no memory of ours.
    unsafe { libc::unshare(libc::CLONE_NEWCGROUP) == 0 }
}
