//! The command's cgroups, where the machine lets us make them: `pids` (a process limit that
//! binds root too, which the kernel's per-user limit does not, and that a fork bomb cannot
//! outrun) and `memory` (issue 29: a bound on everything the command holds — anonymous,
//! shared, `memfd` and `tmpfs` pages — which the address-space limit is not: pages of a
//! `memfd` never mapped count against no rlimit).
//!
//! The helper makes `ringfence-<its pid>` beneath its own cgroup in each hierarchy that has
//! the controller (cgroup v1: the `pids` and `memory` hierarchies; v2: one directory, where
//! the controllers are enabled for children of its cgroup or, for a server placed in a leaf
//! of a delegated subtree, of the parent), sets the limits, and moves the command's second
//! stage in before it runs anything; the helper itself stays outside, so an out-of-memory
//! kill can never choose it. The server removes the directories once the helper has exited.
//! Where none can be made (an unprivileged user without delegation), the result says which
//! limits applied instead.
#![allow(clippy::disallowed_methods)] // cgroupfs, not a workspace

use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup";

/// A controller the command's cgroups may use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Controller {
    Pids,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Controller::Pids => "pids",
            Controller::Memory => "memory",
        }
    }
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `unified` beside the v1
/// hierarchies).
fn v2_root() -> Option<PathBuf> {
    [ROOT.to_owned(), format!("{ROOT}/unified")]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.join("cgroup.controllers").exists())
}

/// The directories under which a child cgroup with `controller` may be made, best first.
fn bases(controller: Controller) -> Vec<PathBuf> {
    let Ok(own) = std::fs::read_to_string("/proc/self/cgroup") else {
        return Vec::new();
    };
    bases_in(&own, controller, v2_root().as_deref())
        .into_iter()
        .filter(|dir| {
            if dir.join("cgroup.subtree_control").exists() {
                std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                    .is_ok_and(|t| t.split_whitespace().any(|c| c == controller.name()))
            } else {
                dir.join("tasks").exists()
            }
        })
        .collect()
}

/// The candidate directories of `controller` from a `/proc/self/cgroup` text: the v1
/// hierarchy's own cgroup, else v2's own cgroup and its parent.
fn bases_in(own: &str, controller: Controller, v2: Option<&Path>) -> Vec<PathBuf> {
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.split(',').any(|c| c == controller.name()) {
            return vec![
                Path::new(ROOT)
                    .join(controller.name())
                    .join(path.trim_start_matches('/')),
            ];
        }
    }
    let (Some(v2), Some(path)) = (v2, own.lines().find_map(|l| l.strip_prefix("0::"))) else {
        return Vec::new();
    };
    let own = v2.join(path.trim_start_matches('/'));
    let mut found = vec![own.clone()];
    if let Some(parent) = own.parent().filter(|p| p.starts_with(v2) && *p != v2) {
        found.push(parent.to_path_buf());
    }
    found
}

/// What the command's memory cgroup allows and reports.
#[derive(Debug, Clone)]
struct MemoryDir {
    dir: PathBuf,
    /// cgroup v2 (`memory.max`, `memory.events`), else v1.
    v2: bool,
}

/// The command's cgroups.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cgroups {
    pids: Option<PathBuf>,
    memory: Option<MemoryDir>,
}

impl Cgroups {
    /// Makes the cgroups this machine allows: a `pids` one allowing `pids_max` tasks and a
    /// `memory` one allowing `memory_max` bytes (and no swap beyond it), each where asked.
    pub(crate) fn make(pids_max: Option<u64>, memory_max: Option<u64>) -> Cgroups {
        let name = format!("ringfence-{}", std::process::id());
        let mut made = Cgroups::default();
        if let Some(max) = pids_max {
            made.pids = bases(Controller::Pids).into_iter().find_map(|base| {
                let dir = base.join(&name);
                make_dir(&dir)?;
                if std::fs::write(dir.join("pids.max"), max.to_string()).is_ok() {
                    Some(dir)
                } else {
                    let _ = std::fs::remove_dir(&dir);
                    None
                }
            });
        }
        if let Some(max) = memory_max {
            made.memory = bases(Controller::Memory).into_iter().find_map(|base| {
                let dir = base.join(&name);
                make_dir(&dir)?;
                let v2 = dir.join("memory.max").exists();
                let set = if v2 {
                    // The whole command is killed when it runs out (the helper is outside).
                    let _ = std::fs::write(dir.join("memory.oom.group"), "1");
                    let _ = std::fs::write(dir.join("memory.swap.max"), "0");
                    std::fs::write(dir.join("memory.max"), max.to_string()).is_ok()
                } else {
                    // memsw (memory and swap together) must stay at least the memory limit:
                    // set memory first.
                    let ok =
                        std::fs::write(dir.join("memory.limit_in_bytes"), max.to_string()).is_ok();
                    let _ =
                        std::fs::write(dir.join("memory.memsw.limit_in_bytes"), max.to_string());
                    ok
                };
                if set {
                    Some(MemoryDir { dir, v2 })
                } else {
                    let _ = std::fs::remove_dir(&dir);
                    None
                }
            });
        }
        made
    }

    pub(crate) fn has_pids(&self) -> bool {
        self.pids.is_some()
    }

    pub(crate) fn has_memory(&self) -> bool {
        self.memory.is_some()
    }

    /// Every directory made (one per hierarchy).
    pub(crate) fn dirs(&self) -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = self.pids.iter().cloned().collect();
        if let Some(m) = &self.memory
            && !dirs.contains(&m.dir)
        {
            dirs.push(m.dir.clone());
        }
        dirs
    }

    /// The directory that lists the command's processes.
    pub(crate) fn members(&self) -> Option<&Path> {
        self.pids
            .as_deref()
            .or(self.memory.as_ref().map(|m| m.dir.as_path()))
    }

    /// Moves process `pid` into every cgroup made; a cgroup it cannot join is given up
    /// (and removed), so that what is reported is what holds.
    pub(crate) fn add(&mut self, pid: u32) {
        let join = |dir: &Path| std::fs::write(dir.join("cgroup.procs"), pid.to_string()).is_ok();
        if let Some(dir) = &self.pids
            && !join(dir)
        {
            let _ = std::fs::remove_dir(dir);
            self.pids = None;
        }
        if let Some(m) = &self.memory
            && !join(&m.dir)
        {
            if self.pids.as_deref() != Some(m.dir.as_path()) {
                let _ = std::fs::remove_dir(&m.dir);
            }
            self.memory = None;
        }
    }

    /// How many processes the memory controller killed for want of memory.
    pub(crate) fn oom_kills(&self) -> u64 {
        let Some(m) = &self.memory else { return 0 };
        let file = if m.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        std::fs::read_to_string(m.dir.join(file))
            .ok()
            .and_then(|t| {
                t.lines().find_map(|l| {
                    l.strip_prefix("oom_kill ")
                        .and_then(|n| n.trim().parse().ok())
                })
            })
            .unwrap_or(0)
    }

    /// How many forks the `pids` limit refused (`max` in `pids.events`).
    pub(crate) fn refused_forks(&self) -> u64 {
        self.pids.as_deref().map_or(0, refused_forks)
    }
}

/// Makes a cgroup directory (`None` where this process may not).
fn make_dir(dir: &Path) -> Option<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => Some(()),
        // Left by an earlier helper of the same pid that was killed: reuse it.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Some(()),
        Err(_) => None,
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
    for controller in [Controller::Pids, Controller::Memory] {
        for base in bases(controller) {
            let Ok(entries) = std::fs::read_dir(&base) else {
                continue;
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
fn refused_forks(dir: &Path) -> u64 {
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

    #[test]
    fn each_controller_is_looked_for_in_its_own_hierarchy() {
        let v1 = "9:name=systemd:/\n8:pids:/a\n4:memory:/process_api/x\n0::/\n";
        assert_eq!(
            bases_in(v1, Controller::Pids, None),
            vec![PathBuf::from("/sys/fs/cgroup/pids/a")]
        );
        assert_eq!(
            bases_in(v1, Controller::Memory, None),
            vec![PathBuf::from("/sys/fs/cgroup/memory/process_api/x")]
        );
        // v2: the own cgroup, then its parent (a leaf of a delegated subtree), never
        // above the hierarchy's root.
        let v2 = Path::new("/sys/fs/cgroup");
        assert_eq!(
            bases_in(
                "0::/system.slice/ringfence.service/supervisor\n",
                Controller::Memory,
                Some(v2)
            ),
            vec![
                PathBuf::from("/sys/fs/cgroup/system.slice/ringfence.service/supervisor"),
                PathBuf::from("/sys/fs/cgroup/system.slice/ringfence.service"),
            ]
        );
        assert_eq!(
            bases_in("0::/\n", Controller::Pids, Some(v2)),
            vec![PathBuf::from("/sys/fs/cgroup/")]
        );
        // A hybrid machine's v1 controller wins over the (controller-less) v2 tree.
        assert!(bases_in("0::/\n", Controller::Pids, None).is_empty());
    }
}
