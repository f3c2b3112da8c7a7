//! Starting a command: a clean environment (nothing of ringfence's own — API keys, tokens —
//! reaches it), stdin from `/dev/null`, and a process group of its own, so that a timeout or
//! a cancellation can kill everything it started in that group at once.
//!
//! Not covered yet (issue 15): a process that leaves the group (`setsid`, a double-forked
//! daemon) survives [`kill_group`]; the sandbox-mode parent will reap those as a subreaper.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use rustix::process::{Pid, Signal, kill_process_group};

/// The search path commands get.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// The environment of a command: `PATH`, `HOME` (the workspace), `LANG`, `TERM=dumb`,
/// `TMPDIR`, then the operator's `extra` variables (which may override none of these but
/// `PATH` and `LANG`).
pub fn clean_env(home: &Path, tmp: &Path, extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_owned(), PATH.to_owned()),
        ("HOME".to_owned(), home.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
        ("TERM".to_owned(), "dumb".to_owned()),
        ("TMPDIR".to_owned(), tmp.display().to_string()),
    ];
    for (k, v) in extra {
        match k.as_str() {
            "HOME" | "TERM" | "TMPDIR" => continue,
            _ => {}
        }
        env.retain(|(name, _)| name != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// `program args…` in `cwd` with exactly `env`, stdin from `/dev/null`, stdout and stderr
/// piped, in a new process group.
pub fn command(program: &Path, args: &[String], cwd: &Path, env: &[(String, String)]) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// Kills every process in `child`'s group (the group [`command`] made for it).
pub fn kill_group(child: &Child) -> std::io::Result<()> {
    let pgid = Pid::from_child(child);
    match kill_process_group(pgid, Signal::KILL) {
        Ok(()) => Ok(()),
        // Already gone.
        Err(e) if e == rustix::io::Errno::SRCH => Ok(()),
        Err(e) => Err(e.into()),
    }
}
