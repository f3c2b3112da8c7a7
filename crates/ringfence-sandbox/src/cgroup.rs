//! A process-count cgroup per command, where the machine lets us make one. The kernel's
//! per-user process limit does not bind root, and a fork bomb outruns any watcher (tens of
//! thousands of processes in 50 ms on two cores), so for a server run as root the `pids`
//! controller is the limit that holds: forks beyond it fail with `EAGAIN`.
//!
//! The helper makes `ringfence-<its pid>` beneath its own `pids` cgroup (cgroup v1's `pids`
//! hierarchy, or v2 where `pids` is enabled for children), sets `pids.max` and moves itself
//! in, before Landlock closes `/sys`; the server removes the directory once the helper has
//! exited. Where no cgroup can be made (an unprivileged user without delegation), the
//! kernel's per-user limit and the helper's own count are what remain, and the result says
//! which limit applied.
#![allow(clippy::disallowed_methods)] // cgroupfs, not a workspace

use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";

/// The directory under which this process may make a child `pids` cgroup.
fn base() -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    // cgroup v1: "<n>:pids:<path>"
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "pids") {
            let dir = Path::new(ROOT)
                .join("pids")
                .join(path.trim_start_matches('/'));
            if dir.join("pids.max").exists() || dir.join("tasks").exists() {
                return Some(dir);
            }
        }
    }
    // cgroup v2: "0::<path>", with pids enabled for the children of our cgroup.
    let path = own.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = Path::new(ROOT).join(path.trim_start_matches('/'));
    let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
    enabled
        .split_whitespace()
        .any(|c| c == "pids")
        .then_some(dir)
}

/// Makes a cgroup allowing `max` tasks (threads count) and moves this process into it;
/// returns its directory, or `None` where that is not possible here.
pub(crate) fn enter(max: u64) -> Option<PathBuf> {
    let dir = base()?.join(format!("ringfence-{}", std::process::id()));
    std::fs::create_dir(&dir).ok()?;
    let entered = std::fs::write(dir.join("pids.max"), max.to_string()).is_ok()
        && std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).is_ok();
    if entered {
        Some(dir)
    } else {
        let _ = std::fs::remove_dir(&dir);
        None
    }
}

/// Removes a helper's cgroup after it exited (retrying briefly while the kernel lets go of
/// the last tasks). Only directories named like ours are touched.
pub(crate) async fn remove(dir: &Path) {
    let ours = dir
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("ringfence-"));
    if !ours || !dir.starts_with(ROOT) {
        return;
    }
    for _ in 0..50 {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
        }
    }
    tracing::warn!(dir = %dir.display(), "could not remove a command's cgroup");
}

/// Removes the cgroups of helpers that are gone (a run dropped while its helper was still
/// exiting leaves one behind). A live helper's cgroup is never touched.
pub(crate) fn sweep() {
    let Some(base) = base() else { return };
    let Ok(entries) = std::fs::read_dir(&base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("ringfence-"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// Kills every process in a helper's cgroup, until it is empty or a second has passed.
/// Each process is pinned before it is killed, and killed only if it is still a member
/// ([`crate::kill::kill_pinned`]): a pid freed and reused meanwhile is left alone.
pub(crate) fn kill_all(dir: &Path) {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while std::time::Instant::now() < until {
        let Some(pids) = procs(dir) else { return };
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            crate::kill::kill_pinned(pid, |p| is_member(p, dir));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Whether process `pid` is in the cgroup `dir` now (read from `/proc/<pid>/cgroup`).
pub(crate) fn is_member(pid: i32, dir: &Path) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .is_ok_and(|text| lists_cgroup(&text, dir))
}

/// Whether a `/proc/<pid>/cgroup` text places the process in `dir` (one of ours, named
/// `ringfence-<pid>`), in any hierarchy.
fn lists_cgroup(text: &str, dir: &Path) -> bool {
    let Some(name) = dir.file_name() else {
        return false;
    };
    text.lines().any(|line| {
        let path = Path::new(
            line.splitn(3, ':')
                .nth(2)
                .unwrap_or("")
                .trim_start_matches('/'),
        );
        path.file_name() == Some(name) && dir.ends_with(path)
    })
}

/// The processes in a cgroup (`None` when it cannot be read).
pub(crate) fn procs(dir: &Path) -> Option<Vec<i32>> {
    let text = std::fs::read_to_string(dir.join("cgroup.procs")).ok()?;
    Some(text.lines().filter_map(|l| l.trim().parse().ok()).collect())
}

/// How many forks the cgroup's limit refused (`max` in `pids.events`).
pub(crate) fn refused_forks(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("pids.events"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("max ").and_then(|n| n.trim().parse().ok()))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn membership_is_read_from_the_process_cgroup_lines() {
        let v1 = Path::new("/sys/fs/cgroup/pids/ringfence-42");
        let v2 = Path::new("/sys/fs/cgroup/user.slice/ringfence-42");
        assert!(lists_cgroup(
            "9:name=systemd:/\n8:pids:/ringfence-42\n0::/\n",
            v1
        ));
        assert!(lists_cgroup("0::/user.slice/ringfence-42\n", v2));
        // Another helper's cgroup, the parent, a look-alike name: not members.
        assert!(!lists_cgroup("8:pids:/ringfence-43\n", v1));
        assert!(!lists_cgroup("8:pids:/\n0::/\n", v1));
        assert!(!lists_cgroup("0::/other/ringfence-42\n", v2));
        assert!(!lists_cgroup("", v1));
    }
}
