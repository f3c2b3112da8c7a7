//! Killing a process by pid without the pid-reuse race: the process is pinned with a pidfd
//! (Linux 5.3) *before* it is checked, and the signal goes to the pinned process. If the
//! pid was freed and reused before the pin, the check sees the newcomer and refuses; if the
//! pinned process ends after the check, the signal goes nowhere. Either way no process that
//! is not the command's receives it.

use rustix::io::Errno;
use rustix::process::{Pid, PidfdFlags, Signal, kill_process, pidfd_open, pidfd_send_signal};

/// Sends SIGKILL to `pid` if, once pinned, `is_ours(pid)` still recognises it. Where a pidfd
/// cannot be had or used (a kernel before 5.3, a container's filter refusing the call, no
/// descriptor left) the check and the kill are by pid (a window of microseconds): a process
/// of the command is never spared for want of a pidfd.
pub(crate) fn kill_pinned(pid: i32, is_ours: impl FnOnce(i32) -> bool) {
    let Some(p) = Pid::from_raw(pid) else { return };
    match pidfd_open(p, PidfdFlags::empty()) {
        Ok(fd) => {
            if is_ours(pid) {
                match pidfd_send_signal(&fd, Signal::KILL) {
                    // Sent, or the pinned process ended: either way nothing more to do.
                    Ok(()) | Err(Errno::SRCH) => {}
                    Err(_) => {
                        let _ = kill_process(p, Signal::KILL);
                    }
                }
            }
        }
        // Gone already.
        Err(Errno::SRCH) => {}
        Err(_) => {
            if is_ours(pid) {
                let _ = kill_process(p, Signal::KILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn only_a_process_still_recognised_is_killed() {
        #[allow(clippy::disallowed_methods, reason = "a test's own child process")]
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        // Checked after the pin: not ours any more, so left alone.
        let mut asked = None;
        kill_pinned(pid, |p| {
            asked = Some(p);
            false
        });
        assert_eq!(asked, Some(pid));
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            child.try_wait().unwrap().is_none(),
            "killed though not ours"
        );
        kill_pinned(pid, |_| true);
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9));
    }
}
