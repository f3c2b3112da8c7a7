//! The helper: the process between the server and a command. The server starts its own
//! binary with [`HELPER_ARG`] (the binary calls [`helper_main`] before anything else); the
//! helper reads a [`Spec`] from its stdin, then
//!
//! 1. starts a session of its own (no controlling terminal; its process group is the
//!    command's) and becomes a **child subreaper**, so every process the command starts —
//!    a background job, a double-forked daemon that called `setsid` — stays its descendant;
//! 2. starts a second stage — this binary again, in the command's new process group, with
//!    stdin from `/dev/null` — which restricts itself ([`restrict_self`]: resource limits,
//!    `no_new_privs`, Landlock, capabilities dropped, the system-call filter), says so on
//!    its stdout, and executes `sh -c <command>` in the working directory with exactly the
//!    given environment. The helper itself is never restricted: it stays outside the
//!    command's Landlock domain, where the command cannot signal or trace it or reach its
//!    pipes through `/proc`;
//! 3. relays the command's stdout and stderr to the server as frames;
//! 4. when the shell ends — or the server asks (a timeout, a cancellation), or the server
//!    goes away (its end of stdin closes), or the command has more processes than allowed —
//!    kills every descendant left, reaps them, and reports how the command ended.
//!
//! Frames on the helper's stdout: a kind byte, a little-endian `u32` length, the payload.
//! Kinds: [`STDOUT`], [`STDERR`] (raw bytes), [`STARTED`] (JSON [`Applied`]), [`FINISHED`]
//! (JSON [`Report`], the last frame), [`FAILED`] (a message: nothing was run).

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions, getpid};
use serde::{Deserialize, Serialize};

use crate::cgroup::Cgroups;
use crate::stage2::{GO_MEMORY_CGROUP, GO_PIDS_CGROUP, STAGE2_WORD, ShellEnd, Stage2};
use crate::{ProcessLimit, Spec};

/// Written first on the helper's stdout, followed by [`VERSION`] and a line break; the
/// server skips anything before it (a test harness's banner when a test binary stands in
/// for the helper).
pub(crate) const MAGIC: &[u8] = b"\0ringfence-sandbox-";

/// The helper's build and protocol: a server only talks to a helper of its own build (a
/// stale `ringfence-sandbox` beside a newer binary could ignore restrictions it does not
/// know of). Bump the protocol number whenever the specification or the frames change.
pub(crate) const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "+p3");

pub(crate) const STDOUT: u8 = 1;
pub(crate) const STDERR: u8 = 2;
pub(crate) const STARTED: u8 = 3;
pub(crate) const FINISHED: u8 = 4;
pub(crate) const FAILED: u8 = 5;
/// The command's process group (a little-endian `u32`), for the server's last resort.
pub(crate) const GROUP: u8 = 6;
/// A cgroup directory of the command (one frame each), which the server removes once the
/// helper is gone.
pub(crate) const CGROUP: u8 = 7;
/// The command's namespaces failed half-way with `sandbox = "partial"` (a message; nothing
/// ran): the server runs it again without them.
pub(crate) const NS_FAILED: u8 = 8;

/// The second stage and the namespace's init, in the command's cgroup beside it.
const STAGE_TASKS: u64 = 2;

/// How often the process count of a command is checked.
const WATCH_INTERVAL: Duration = Duration::from_millis(20);

/// Why the helper killed the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum KillCause {
    /// The server asked (a timeout or a cancellation) or went away.
    Requested,
    ProcessLimit,
    /// The command ran out of the memory its cgroup allows.
    Memory,
}

/// How the command ended.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Report {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub killed: Option<KillCause>,
    /// Processes still running when the shell ended (background jobs, daemons), killed.
    pub leftovers: usize,
}

/// The helper's whole life; returns its exit code. Call it first thing in `main` when the
/// first argument is [`HELPER_ARG`], before any thread exists (the restrictions apply to the
/// calling thread and what it starts).
pub fn helper_main() -> i32 {
    let out = Arc::new(Mutex::new(std::io::stdout()));
    {
        let mut o = out.lock().unwrap_or_else(|e| e.into_inner());
        let hello = [MAGIC, VERSION.as_bytes(), b"\n"].concat();
        if o.write_all(&hello).and_then(|()| o.flush()).is_err() {
            return 2;
        }
    }
    let mut line = String::new();
    if let Err(e) = std::io::stdin().lock().read_line(&mut line) {
        return failed(&out, &format!("cannot read the command specification: {e}"));
    }
    let spec: Spec = match serde_json::from_str(&line) {
        Ok(spec) => spec,
        Err(e) => return failed(&out, &format!("bad command specification: {e}")),
    };
    match run(spec, &out) {
        Ok(report) => {
            let _ = frame(
                &out,
                FINISHED,
                &serde_json::to_vec(&report).unwrap_or_default(),
            );
            0
        }
        Err(Failure::Setup(message)) => failed(&out, &message),
        Err(Failure::Namespaces(message)) => {
            let _ = frame(&out, NS_FAILED, message.as_bytes());
            2
        }
    }
}

/// Why the command was not run.
#[derive(Debug, Clone)]
enum Failure {
    Setup(String),
    /// Its namespaces failed half-way, with `sandbox = "partial"`.
    Namespaces(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure::Setup(message)
    }
}

fn failed(out: &Mutex<std::io::Stdout>, message: &str) -> i32 {
    let _ = frame(out, FAILED, message.as_bytes());
    2
}

pub(crate) fn frame(out: &Mutex<std::io::Stdout>, kind: u8, payload: &[u8]) -> std::io::Result<()> {
    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    out.write_all(&[kind])?;
    out.write_all(&len.to_le_bytes())?;
    out.write_all(&payload[..len as usize])?;
    out.flush()
}

/// Reads the second stage's word from the start of its stdout: what it applied (sent on to
/// the server), or why it could not start the command. Whatever preceded the word is
/// dropped; what follows it on the same read is relayed as output.
fn stage2_word(
    pipe: &mut Box<dyn Read + Send>,
    out: &Mutex<std::io::Stdout>,
) -> Result<(), Failure> {
    let mut seen: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(at) = seen
            .windows(STAGE2_WORD.len())
            .position(|w| w == STAGE2_WORD)
            && let Some(end) = seen[at..].iter().position(|&b| b == b'\n')
        {
            let line =
                String::from_utf8_lossy(&seen[at + STAGE2_WORD.len()..at + end]).into_owned();
            let rest = seen[at + end + 1..].to_vec();
            return match line.split_once(' ') {
                Some(("applied", json)) => {
                    frame(out, STARTED, json.as_bytes()).map_err(|e| e.to_string())?;
                    if !rest.is_empty() {
                        frame(out, STDOUT, &rest).map_err(|e| e.to_string())?;
                    }
                    Ok(())
                }
                Some(("failed", why)) => Err(Failure::Setup(why.to_owned())),
                Some(("nsfailed", why)) => Err(Failure::Namespaces(why.to_owned())),
                _ => Err(Failure::Setup(format!(
                    "the sandbox's second stage said something unreadable: {line}"
                ))),
            };
        }
        if seen.len() > 64 << 10 {
            return Err("the sandbox's second stage did not report"
                .to_owned()
                .into());
        }
        match pipe.read(&mut buf) {
            Ok(0) => {
                return Err("the sandbox's second stage ended without a report"
                    .to_owned()
                    .into());
            }
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("cannot read the sandbox's second stage: {e}").into()),
        }
    }
}

/// What the helper's threads share.
struct Shared {
    me: Pid,
    /// A cgroup of the command's own, when there is one: it lists every process of the
    /// command, whatever it did to leave the tree, at the cost of one read.
    cgroup: Option<PathBuf>,
    /// The command's process group (the shell's pid).
    group: Pid,
    killed: Mutex<Option<KillCause>>,
    /// Why the second stage could not start the command, when it could not.
    setup: Mutex<Option<Failure>>,
    /// The shell has been reaped: the watchers stop.
    done: AtomicBool,
}

impl Shared {
    /// Records why (the first cause wins) and kills every descendant.
    fn kill_all(&self, cause: KillCause) {
        self.killed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(cause);
        kill_tree(self);
    }

    /// Whether `pid` is the command's now: in its cgroup, or (without one) below the
    /// helper — its chain of parents reaches the helper (every orphan of the command is
    /// re-parented to it, the subreaper).
    fn is_ours(&self, pid: i32) -> bool {
        if let Some(dir) = &self.cgroup {
            return crate::cgroup::is_member(pid, dir);
        }
        let me = self.me.as_raw_nonzero().get();
        let mut at = pid;
        for _ in 0..4096 {
            match parent_of(at) {
                Some(p) if p == me => return true,
                Some(p) if p > 1 => at = p,
                _ => return false,
            }
        }
        false
    }

    /// The command's processes still alive: from its cgroup, else from `/proc`.
    fn live(&self) -> Vec<i32> {
        let me = self.me.as_raw_nonzero().get();
        if let Some(dir) = &self.cgroup
            && let Some(pids) = crate::cgroup::procs(dir)
        {
            return pids.into_iter().filter(|&p| p != me).collect();
        }
        descendants(self.me)
            .into_iter()
            .filter(|p| p.1 != 'Z')
            .map(|p| p.0)
            .collect()
    }
}

fn run(spec: Spec, out: &Arc<Mutex<std::io::Stdout>>) -> Result<Report, Failure> {
    // A new session: no controlling terminal to inject keystrokes into, and a process
    // group of its own that the server can kill as a last resort.
    let _ = rustix::process::setsid();
    rustix::process::set_child_subreaper(Some(getpid()))
        .map_err(|e| format!("cannot become the command's subreaper: {e}"))?;
    let mut policy = spec.policy.clone();
    // The command's cgroups, where they can be made: the process limit (the second stage
    // and the namespace's init count, hence the margin) and the memory limit. Without a
    // `pids` cgroup, the kernel's per-user limit, which counts every process of the user,
    // not the command's (the ones already running beside it are allowed for), and the
    // helper's count below.
    let mut cgroups = Cgroups::make(
        spec.max_processes.map(|n| n + STAGE_TASKS),
        policy.limits.memory,
    );
    let process_limit = spec.max_processes.map(|_| {
        if rustix::process::getuid().is_root() {
            ProcessLimit::Watch
        } else {
            ProcessLimit::UserLimit
        }
    });
    if policy.limits.processes.is_some() {
        // (Root is exempt from this limit: no need to count.) The second stage adds them
        // unless it runs in a user namespace of its own.
        policy.others_processes = if rustix::process::getuid().is_root() {
            0
        } else {
            processes_of_user()
        };
    }
    // The command restricts itself in a second stage (this binary again): the helper stays
    // outside the command's Landlock domain and namespaces, so the command can neither
    // signal it, nor trace it, nor reach its pipes through /proc.
    let stage2 = Stage2 {
        shell: spec.shell.clone(),
        command: spec.command.clone(),
        cwd: spec.cwd.clone(),
        env: spec.env.clone(),
        policy,
        process_limit,
    };
    // The stage's stdin is a socket to the helper: the go byte, then how the shell ended.
    let (mut socket, theirs) =
        UnixStream::pair().map_err(|e| format!("cannot make the second stage's socket: {e}"))?;
    let (shell, stdout, stderr) = fork_stage2(stage2, theirs, &socket)
        .map_err(|e| format!("cannot start the sandbox's second stage: {e}"))?;
    // Into the cgroups before it does anything; then it may go on.
    cgroups.add(shell.as_raw_nonzero().get() as u32);
    for dir in cgroups.dirs() {
        let _ = frame(out, CGROUP, dir.as_os_str().as_encoded_bytes());
    }
    let mut go = 0u8;
    if cgroups.has_pids() {
        go |= GO_PIDS_CGROUP;
    }
    if cgroups.has_memory() {
        go |= GO_MEMORY_CGROUP;
    }
    let _ = socket.write_all(&[go]);
    let _ = frame(
        out,
        GROUP,
        &(shell.as_raw_nonzero().get() as u32).to_le_bytes(),
    );
    let shared = Arc::new(Shared {
        me: getpid(),
        group: shell,
        cgroup: cgroups.members().map(Path::to_path_buf),
        killed: Mutex::new(None),
        setup: Mutex::new(None),
        done: AtomicBool::new(false),
    });

    let (relayed_tx, relayed_rx) = std::sync::mpsc::channel::<()>();
    let relays: Vec<Box<dyn Read + Send>> = vec![Box::new(stdout), Box::new(stderr)];
    for (kind, pipe) in [STDOUT, STDERR].into_iter().zip(relays) {
        let (out, shared, tx) = (out.clone(), shared.clone(), relayed_tx.clone());
        std::thread::spawn(move || {
            let mut pipe = pipe;
            if kind == STDOUT
                && let Err(failure) = stage2_word(&mut pipe, &out)
            {
                // Unless the stage was stopped on purpose before it spoke (a cancellation
                // at once), its silence is a failure to start the command.
                let stopped = shared
                    .killed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .is_some();
                if !stopped {
                    *shared.setup.lock().unwrap_or_else(|e| e.into_inner()) = Some(failure);
                }
                shared.kill_all(KillCause::Requested);
            }
            relay(pipe, kind, &out, &shared);
            let _ = tx.send(());
        });
    }
    drop(relayed_tx);
    {
        // The server's end of stdin: a byte or its closing means "stop now".
        let shared = shared.clone();
        std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            let _ = std::io::stdin().lock().read(&mut byte);
            shared.kill_all(KillCause::Requested);
        });
    }
    if spec.max_processes.is_some() || cgroups.has_memory() {
        let shared = shared.clone();
        let cgroups = cgroups.clone();
        let max = spec.max_processes;
        std::thread::spawn(move || {
            while !shared.done.load(Ordering::Relaxed) {
                std::thread::sleep(WATCH_INTERVAL);
                // The memory controller killed a process of the command: the rest of it
                // goes too (cgroup v1 kills one process; v2 kills the group by itself).
                if cgroups.oom_kills() > 0 {
                    shared.kill_all(KillCause::Memory);
                }
                // With a cgroup the kernel refuses the forks beyond the limit and counts the
                // refusals; without one, the helper counts.
                let over = match max {
                    Some(_) if cgroups.has_pids() => cgroups.refused_forks() > 0,
                    Some(max) => shared.live().len() as u64 > max,
                    None => false,
                };
                if over {
                    shared.kill_all(KillCause::ProcessLimit);
                }
            }
        });
    }

    // Reap until the shell (or the stage around it) ends; orphans adopted meanwhile are
    // reaped on the way.
    let status = loop {
        match rustix::process::wait(WaitOptions::empty()) {
            Ok(Some((pid, status))) if pid == shell => break Some(status),
            Ok(_) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => break None,
        }
    };
    shared.done.store(true, Ordering::Relaxed);
    // How the shell ended, from the namespace's init (through the stage); without
    // namespaces the stage was the shell.
    let mut said = String::new();
    let _ = socket.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = socket.read_to_string(&mut said);
    let end = serde_json::from_str::<ShellEnd>(said.trim()).ok();
    // The init reported: it killed what was left in its PID namespace, which ended with it,
    // and no process of the command lives outside it (joining another namespace is
    // refused), so nothing is left to look for. Otherwise look, and kill what is found.
    let leftovers = match end {
        Some(e) => e.leftovers,
        None => kill_tree(&shared),
    };
    reap_all(Duration::from_secs(2));
    // The relays end when the last writer is gone, which the kills just ensured.
    let until = Instant::now() + Duration::from_secs(2);
    for _ in 0..2 {
        let left = until.saturating_duration_since(Instant::now());
        if relayed_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    if let Some(failure) = shared
        .setup
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take()
    {
        return Err(failure);
    }
    if cgroups.oom_kills() > 0 {
        shared
            .killed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(KillCause::Memory);
    }
    let killed = *shared.killed.lock().unwrap_or_else(|e| e.into_inner());
    let (exit_code, signal) = match end {
        Some(e) => (e.exit_code, e.signal),
        None => (
            status.and_then(|s| s.exit_status()),
            status.and_then(|s| s.terminating_signal()),
        ),
    };
    Ok(Report {
        exit_code,
        signal,
        killed,
        leftovers,
    })
}

/// Starts the second stage: a fork of the helper (which has no thread of its own yet), in a
/// new process group, with `theirs` as its stdin and new pipes as its stdout and stderr;
/// the child runs [`crate::stage2::run`] and never returns. Returns its pid and the read
/// ends of its pipes.
#[allow(unsafe_code)]
fn fork_stage2(
    stage: Stage2,
    theirs: UnixStream,
    ours: &UnixStream,
) -> std::io::Result<(Pid, std::fs::File, std::fs::File)> {
    use std::os::fd::AsRawFd;
    let (out_r, out_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    let (err_r, err_w) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
    // Nothing buffered may be written twice (the child's copy of stdout's buffer).
    let _ = std::io::stdout().flush();
    // SAFETY: fork(2). The helper is a fresh process with one thread here (its threads
    // start after this); under a test harness the other thread waits for the test and
    // holds no lock the child needs (glibc's fork keeps malloc usable). The child only
    // moves descriptors and runs the stage, then ends with _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: descriptor calls on descriptors this process holds; no memory is passed.
        let moved = unsafe {
            libc::setpgid(0, 0) == 0
                && libc::dup2(theirs.as_raw_fd(), 0) >= 0
                && libc::dup2(out_w.as_raw_fd(), 1) >= 0
                && libc::dup2(err_w.as_raw_fd(), 2) >= 0
                && libc::close(ours.as_raw_fd()) == 0
        };
        drop((theirs, out_r, out_w, err_r, err_w));
        let code = if moved {
            crate::stage2::run(stage)
        } else {
            127
        };
        let _ = std::io::stdout().flush();
        // SAFETY: ends the stage without running the helper's exit handlers.
        unsafe { libc::_exit(code) };
    }
    drop((theirs, out_w, err_w));
    let pid = Pid::from_raw(pid).expect("fork returned a positive pid");
    Ok((pid, std::fs::File::from(out_r), std::fs::File::from(err_r)))
}

/// Copies a pipe of the command to the server as frames. If the server cannot take them
/// (it went away), the command is stopped.
fn relay(mut pipe: Box<dyn Read + Send>, kind: u8, out: &Mutex<std::io::Stdout>, shared: &Shared) {
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        match pipe.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if frame(out, kind, &buf[..n]).is_err() {
                    shared.kill_all(KillCause::Requested);
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        }
    }
}

/// Kills every process of the command until none is left alive; returns how many distinct
/// processes were killed (nothing is scanned twice when none was left).
///
/// The command's process group goes first, in one signal: the kernel delivers it to every
/// member and aborts a fork racing with it, so a fork bomb that stays in its group ends at
/// once. What left the group (`setsid`, a daemon) is then found in the cgroup or `/proc`
/// and killed; a
/// process forked between a scan and the kills is caught by the next scan, and a killed
/// process cannot fork, so the rounds end.
fn kill_tree(shared: &Shared) -> usize {
    let mut killed: std::collections::HashSet<i32> = shared.live().into_iter().collect();
    if killed.is_empty() {
        return 0;
    }
    let _ = rustix::process::kill_process_group(shared.group, Signal::KILL);
    for _ in 0..1000 {
        let live = shared.live();
        if live.is_empty() {
            break;
        }
        for pid in live {
            crate::kill::kill_pinned(pid, |p| shared.is_ours(p));
            killed.insert(pid);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    killed.len()
}

/// Reaps every child (the killed processes were re-parented here), waiting at most `limit`
/// for one stuck in the kernel.
fn reap_all(limit: Duration) {
    let until = Instant::now() + limit;
    loop {
        match rustix::process::wait(WaitOptions::NOHANG) {
            Ok(Some(_)) => continue,
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(1)),
            _ => return,
        }
    }
}

/// The processes below `me`: (pid, state letter) for each, from `/proc`.
#[allow(clippy::disallowed_methods)] // /proc, not a workspace
fn descendants(me: Pid) -> Vec<(i32, char)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut children: HashMap<i32, Vec<(i32, char)>> = HashMap::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((state, ppid)) = parse_stat(&stat) {
            children.entry(ppid).or_default().push((pid, state));
        }
    }
    let mut found = Vec::new();
    let mut queue = vec![me.as_raw_nonzero().get()];
    while let Some(parent) = queue.pop() {
        for &(pid, state) in children.get(&parent).map(Vec::as_slice).unwrap_or(&[]) {
            found.push((pid, state));
            queue.push(pid);
        }
    }
    found
}

/// The parent of process `pid` now (`None` when it is gone).
#[allow(clippy::disallowed_methods)] // /proc, not a workspace
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&stat).map(|(_, ppid)| ppid)
}

/// The state letter and parent of a `/proc/<pid>/stat` line (the name in parentheses may
/// hold spaces and parentheses itself, so fields are counted after its last `)`).
fn parse_stat(stat: &str) -> Option<(char, i32)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// How many processes run as this process's user (counted where `/proc` lets us see).
#[allow(clippy::disallowed_methods)] // /proc, not a workspace
fn processes_of_user() -> u64 {
    use std::os::unix::fs::MetadataExt;
    let uid = rustix::process::getuid().as_raw();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter(|e| e.metadata().is_ok_and(|m| m.uid() == uid))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    #[test]
    fn without_a_cgroup_the_command_is_what_descends_from_the_helper() {
        let me = getpid();
        let shared = Shared {
            me,
            cgroup: None,
            group: me,
            killed: Mutex::new(None),
            setup: Mutex::new(None),
            done: AtomicBool::new(false),
        };
        #[allow(clippy::disallowed_methods, reason = "a test's own child process")]
        let mut child = Command::new("/bin/sh")
            .args(["-c", "sleep 30 & echo $!; wait"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        assert!(shared.is_ours(child.id() as i32));
        assert!(shared.is_ours(grandchild));
        // The helper's own parent and init are not the command's.
        let parent = parent_of(me.as_raw_nonzero().get()).unwrap();
        assert!(!shared.is_ours(parent));
        assert!(!shared.is_ours(1));
        crate::kill::kill_pinned(grandchild, |p| shared.is_ours(p));
        let _ = child.wait();
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        assert_eq!(parse_stat("42 (sh) S 7 42 42 0"), Some(('S', 7)));
        assert_eq!(parse_stat("43 (a) b (c) Z 1 43"), Some(('Z', 1)));
        assert_eq!(parse_stat("44 (x"), None);
    }
}
