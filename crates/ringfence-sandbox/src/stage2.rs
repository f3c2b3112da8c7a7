//! The second stage: the process that turns into the command's sandbox. The helper forks it
//! (a copy of itself, single-threaded, which saves executing the binary again) with a
//! socket as its stdin, moves it into the command's cgroups, and sends one byte saying which
//! of them hold. Then:
//!
//! - **With namespaces** (the default; issue 29): the stage enters new user (where needed),
//!   mount, IPC, UTS, PID and — without network — network namespaces (and, once in the
//!   command's cgroups, a cgroup namespace), and forks the
//!   namespace's first process, its **init**. The init mounts the namespace's own `/proc`,
//!   makes every mount read-only but the writable roots, mounts the command's `$TMPDIR` as
//!   a size-capped `tmpfs`, restricts itself ([`crate::confine`]: limits, `no_new_privs`,
//!   Landlock, capabilities, the system-call filter), says so on stdout, and starts the
//!   shell as its child. It reaps every orphan of the command; when the shell ends it
//!   counts the processes left, kills them, and sends how the shell ended to the stage,
//!   which passes it to the helper on its socket. The stage itself waits outside the PID
//!   namespace, where no process of the command can name it; each of the two dies with its
//!   parent (`PR_SET_PDEATHSIG`), and the kernel ends every process of the namespace when
//!   its init goes — nothing of the command can outlive it.
//! - **Without** (`sandbox = "off"`, or `"partial"` where the machine cannot make them):
//!   the stage restricts itself ([`crate::restrict_self`]) and executes the shell.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::ns::{self, NsError};
use crate::{Applied, Policy, ProcessLimit, Requirement};

/// How the second stage's word to the helper starts (one line, first on its stdout; a
/// test harness may print before it).
pub(crate) const STAGE2_WORD: &[u8] = b"\0ringfence-sandbox-stage2 ";

/// Bits of the helper's go byte: which of the command's cgroups hold.
pub(crate) const GO_PIDS_CGROUP: u8 = 1;
pub(crate) const GO_MEMORY_CGROUP: u8 = 2;

/// What the second stage needs.
pub(crate) struct Stage2 {
    pub shell: PathBuf,
    pub command: String,
    pub cwd: PathBuf,
    pub env: Vec<(String, String)>,
    pub policy: Policy,
    pub process_limit: Option<ProcessLimit>,
}

/// How the shell ended, as the init (or the stage) tells the helper: one JSON line on the
/// stage's socket.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct ShellEnd {
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    /// Processes of the command still running when the shell ended, killed by the init.
    pub leftovers: usize,
}

/// Says `word` and `text` to the helper, on stdout.
fn say(word: &str, text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(STAGE2_WORD);
    let _ = out.write_all(format!("{word} {}\n", text.replace('\n', " ")).as_bytes());
    let _ = out.flush();
}

/// The second stage's whole life, in the process the helper forked (stdin its socket,
/// stdout and stderr its pipes); returns its exit code (when it does not become the shell).
pub(crate) fn run(mut stage: Stage2) -> i32 {
    // The helper's socket (stdin until the command's own is opened), kept apart from fd 0.
    let mut helper = match rustix::io::fcntl_dupfd_cloexec(std::io::stdin(), 3) {
        Ok(fd) => UnixStream::from(fd),
        Err(e) => {
            say("failed", &format!("cannot keep the helper's socket: {e}"));
            return 127;
        }
    };
    // Each stage dies with its parent: the helper, killed, takes the command with it.
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    let policy = &stage.policy;
    if !policy.namespaces || policy.require == Requirement::Off {
        let Some(memory_cgroup) = wait_for_go(&mut helper, &mut stage) else {
            return 127;
        };
        return without_namespaces(&stage, memory_cgroup);
    }
    // The namespaces are made while the helper moves this process into the command's
    // cgroups (a move may wait for the kernel's RCU grace period); nothing is started before
    // its go, so every process of the command is born in them.
    let entered = ns::enter(
        policy.user_namespace,
        policy.network == crate::Network::None,
    );
    let Some(memory_cgroup) = wait_for_go(&mut helper, &mut stage) else {
        return 127;
    };
    let policy = &stage.policy;
    match entered {
        Ok(mut made) => {
            made.cgroup = ns::enter_cgroup();
            with_namespaces(&stage, made, memory_cgroup, helper)
        }
        Err(NsError::Unavailable(why)) if policy.require == Requirement::Partial => {
            tracing::debug!(%why, "commands run without namespaces of their own");
            without_namespaces(&stage, memory_cgroup)
        }
        Err(NsError::Unavailable(why)) => {
            say(
                "failed",
                &crate::SandboxError::no_namespaces(&why).to_string(),
            );
            127
        }
        Err(NsError::Broken(why)) => {
            namespace_failure(policy.require, &why);
            127
        }
    }
}

/// Waits for the helper's go (it has moved this process into the command's cgroups);
/// whether a memory cgroup holds. `None`: the helper is gone.
fn wait_for_go(helper: &mut UnixStream, stage: &mut Stage2) -> Option<bool> {
    let mut go = [0u8; 1];
    helper.read_exact(&mut go).ok()?;
    if go[0] & GO_PIDS_CGROUP != 0 && stage.process_limit.is_some() {
        stage.process_limit = Some(ProcessLimit::Cgroup);
    }
    Some(go[0] & GO_MEMORY_CGROUP != 0)
}

/// Says that the namespaces failed half-way: with `partial` the server runs the command
/// again without them; otherwise it is refused.
fn namespace_failure(require: Requirement, why: &str) {
    if require == Requirement::Partial {
        say("nsfailed", why);
    } else {
        say(
            "failed",
            &crate::SandboxError::no_namespaces(why).to_string(),
        );
    }
}

/// The path without namespaces: restrict this process, then become the shell.
fn without_namespaces(stage: &Stage2, memory_cgroup: bool) -> i32 {
    let mut policy = stage.policy.clone();
    policy.namespaces = false;
    let mut applied: Applied = match crate::restrict_self_with(&policy, memory_cgroup) {
        Ok(a) => a,
        Err(e) => {
            say("failed", &e.to_string());
            return 127;
        }
    };
    applied.process_limit = stage.process_limit;
    if !ready(stage, &applied) {
        return 127;
    }
    let err = shell(stage).exec();
    let _ = writeln!(
        std::io::stderr(),
        "ringfence: cannot run {}: {err}",
        stage.shell.display()
    );
    127
}

/// The last step before the shell: the descriptors as the command gets them, and the word
/// to the helper saying what was applied (or why the command cannot start: `false`).
fn ready(stage: &Stage2, applied: &Applied) -> bool {
    if let Err(message) = prepare_descriptors(stage) {
        say("failed", &message);
        return false;
    }
    say(
        "applied",
        &serde_json::to_string(applied).unwrap_or_default(),
    );
    true
}

/// The command `sh -c <command>` in its working directory with exactly its environment.
fn shell(stage: &Stage2) -> Command {
    let mut c = Command::new(&stage.shell);
    c.arg("-c")
        .arg(&stage.command)
        .env_clear()
        .envs(stage.env.iter().map(|(k, v)| (k, v)));
    c
}

/// stdin made the namespace's `/dev/null` (it was the helper's socket, and before that a
/// descriptor of the machine's `/dev`), the working directory checked, and every descriptor
/// above stderr kept from the command.
fn prepare_descriptors(stage: &Stage2) -> Result<(), String> {
    reopen_stdin().map_err(|e| format!("cannot reopen the command's stdin: {e}"))?;
    std::env::set_current_dir(&stage.cwd).map_err(|e| {
        format!(
            "cannot start {} in {}: {e}",
            stage.shell.display(),
            stage.cwd.display()
        )
    })?;
    // A descriptor the server inherited without close-on-exec (a launcher's pipe, a
    // socket, `3>file`) would hand the command a file Landlock never checks again.
    cloexec_above_stderr()
        .map_err(|e| format!("cannot keep inherited file descriptors from the command: {e}"))
}

/// The path with namespaces (entered already): fork the init, wait for it, pass on how the
/// shell ended.
#[allow(unsafe_code)]
fn with_namespaces(
    stage: &Stage2,
    made: ns::Made,
    memory_cgroup: bool,
    mut helper: UnixStream,
) -> i32 {
    let (mut ours, theirs) = match UnixStream::pair() {
        Ok(pair) => pair,
        Err(e) => {
            say(
                "failed",
                &format!("cannot make the sandbox's status socket: {e}"),
            );
            return 127;
        }
    };
    // SAFETY: fork(2). The stage is single-threaded (a fork of the helper taken before it
    // started any thread). The child never returns from `init`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        say(
            "failed",
            &format!(
                "cannot start the command's namespace: {}",
                std::io::Error::last_os_error()
            ),
        );
        return 127;
    }
    if pid == 0 {
        drop(ours);
        drop(helper);
        let code = init(stage, made, memory_cgroup, theirs);
        // SAFETY: ends the init without running the stage's exit handlers.
        unsafe { libc::_exit(code) };
    }
    drop(theirs);
    let status = loop {
        match rustix::process::waitpid(
            rustix::process::Pid::from_raw(pid),
            rustix::process::WaitOptions::empty(),
        ) {
            Ok(Some((_, status))) => break Some(status),
            Err(rustix::io::Errno::INTR) => continue,
            _ => break None,
        }
    };
    let mut line = String::new();
    let _ = ours.read_to_string(&mut line);
    let end = serde_json::from_str::<ShellEnd>(line.trim()).unwrap_or(ShellEnd {
        // The init was killed (a timeout, the process limit, the memory limit) or failed
        // to set up (its word says why).
        exit_code: status.and_then(|s| s.exit_status()),
        signal: status.and_then(|s| s.terminating_signal()),
        leftovers: 0,
    });
    let mut out = serde_json::to_vec(&end).unwrap_or_default();
    out.push(b'\n');
    let _ = helper.write_all(&out);
    0
}

/// The namespace's first process: set up, restrict, run the shell, reap, report.
#[allow(unsafe_code)]
fn init(stage: &Stage2, made: ns::Made, memory_cgroup: bool, mut status: UnixStream) -> i32 {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL));
    // The stage may have died before the line above took effect: then its end of the status
    // socket is closed (it never writes on it), and the init must not go on alone.
    if stage_gone(&status) {
        return 127;
    }
    let policy = &stage.policy;
    let ipc_bounded = match crate::mounts::namespace_mounts(policy, memory_cgroup) {
        Ok(bounded) => bounded,
        Err(why) => {
            namespace_failure(policy.require, &why.to_string());
            return 127;
        }
    };
    let mut applied = match crate::confine(
        policy,
        crate::Base {
            read_only_outside: true,
            own_user_namespace: made.user,
            // An IPC namespace whose shared memory nothing bounds (no memory cgroup, and its
            // limits could not be set) gets System V IPC refused too.
            ipc_isolated: made.ipc && (memory_cgroup || ipc_bounded),
            memory_cgroup,
        },
    ) {
        Ok(a) => a,
        Err(e) => {
            say("failed", &e.to_string());
            return 127;
        }
    };
    applied.process_limit = stage.process_limit;
    applied.namespaces = Some(made);
    applied.tmp_size = policy.tmp.as_ref().map(|t| t.size);
    // The init's own /proc entries (its descriptors, among them the status socket) are
    // closed to the command.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    // A session of the command's own: `kill 0` of a command reaches the namespace's
    // processes, never the stage outside it (whose process group the init was born in).
    let _ = rustix::process::setsid();
    if !ready(stage, &applied) {
        return 127;
    }
    let child = match shell(stage).spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = writeln!(
                std::io::stderr(),
                "ringfence: cannot run {}: {e}",
                stage.shell.display()
            );
            return 127;
        }
    };
    let shell_pid = child.id() as i32;
    // Reap every process of the namespace (orphans come here) until the shell ends.
    let ended = loop {
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some((pid, st))) if pid.as_raw_nonzero().get() == shell_pid => break Some(st),
            Ok(Some(_)) => continue,
            Err(rustix::io::Errno::INTR) => continue,
            _ => break None,
        }
    };
    // Only as the first process of a PID namespace of its own does "every process" mean the
    // command's: anywhere else kill(-1) would reach every process of the user. (Without one,
    // the helper's tree kill finds what is left.)
    let own_namespace = made.pid && rustix::process::getpid().as_raw_nonzero().get() == 1;
    let leftovers = if own_namespace { end_the_rest() } else { 0 };
    let end = ShellEnd {
        exit_code: ended.and_then(|s| s.exit_status()),
        signal: ended.and_then(|s| s.terminating_signal()),
        leftovers,
    };
    let _ = status.write_all(&serde_json::to_vec(&end).unwrap_or_default());
    0
}

/// Whether the other end of `status` (the stage) has gone: a read that does not wait
/// finds its end closed.
fn stage_gone(status: &UnixStream) -> bool {
    let _ = status.set_nonblocking(true);
    let gone = matches!((&*status).read(&mut [0u8; 1]), Ok(0));
    let _ = status.set_nonblocking(false);
    gone
}

/// Kills every other process of the init's PID namespace and reaps them; how many there
/// were. Killed again at every reap, so that a process forked meanwhile goes too; nothing is
/// judged by `/proc` (a process whose main thread exited looks like a zombie there while
/// its other threads run).
#[allow(unsafe_code)]
fn end_the_rest() -> usize {
    let mut reaped = 0;
    loop {
        // SAFETY: kill(2) of every process this init may signal: in its PID namespace, all
        // of the namespace's processes but the init itself. No memory is passed.
        unsafe { libc::kill(-1, libc::SIGKILL) };
        match rustix::process::wait(rustix::process::WaitOptions::empty()) {
            Ok(Some(_)) => reaped += 1,
            Err(rustix::io::Errno::INTR) => continue,
            _ => return reaped,
        }
    }
}

/// Makes fd 0 a `/dev/null` opened now (in the command's namespace).
#[allow(unsafe_code)]
fn reopen_stdin() -> std::io::Result<()> {
    #[allow(clippy::disallowed_methods, reason = "a device, not a user's file")]
    let null = std::fs::File::open("/dev/null")?;
    // SAFETY: dup2(2) of a descriptor this function owns onto fd 0; it reads or writes no
    // memory of this process.
    if unsafe { libc::dup2(null.as_raw_fd(), 0) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Marks every descriptor above stderr close-on-exec, so that only stdin, stdout and stderr
/// reach the command. `close_range` (Linux 5.11) does it in one call; older kernels get each
/// descriptor listed in `/proc/self/fd` marked.
#[allow(unsafe_code)]
fn cloexec_above_stderr() -> std::io::Result<()> {
    // SAFETY: the call sets the close-on-exec flag of descriptors; it closes nothing, and
    // reads or writes no memory of this process.
    let r = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    };
    if r == 0 {
        return Ok(());
    }
    // Collected first: the directory's own descriptor is among those listed.
    #[allow(clippy::disallowed_methods, reason = "/proc, not a user's file")]
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_SETFD on a number that may no longer be open fails with EBADF and
        // changes nothing; no memory is passed.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBADF) {
                return Err(e);
            }
        }
    }
    Ok(())
}
