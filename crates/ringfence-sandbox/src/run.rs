//! The server side: start the helper, hand it the [`Spec`], pass the command's output on as
//! it comes, and stop it on a timeout or a cancellation. Output travels through a bounded
//! channel, so a command that prints without end waits for the caller instead of filling
//! memory.
//!
//! Whatever happens to the caller, nothing outlives the call: dropping the future closes the
//! helper's stdin, which makes it kill the command's whole tree; a helper that does not
//! report within [`GRACE`] of being asked to stop is killed with its process group.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin};
use tokio::sync::mpsc;

use crate::command::{Ended, Exit, Helper, Outcome, Stream};
use crate::supervise::{
    CGROUP, FAILED, FINISHED, GROUP, KillCause, MAGIC, NS_FAILED, Report, STARTED, STDERR, STDOUT,
    VERSION,
};
use crate::{Applied, Requirement, SandboxError, Spec};

/// How long a helper asked to stop may take to report.
const GRACE: Duration = Duration::from_secs(5);

/// The command's cgroups, removed once the helper has exited: at the end of the run, or
/// (on an early return) by a task after a short wait for the helper to go.
struct CgroupCleanup(Vec<PathBuf>);

impl CgroupCleanup {
    /// Kills every process still in the cgroups (a helper that died cannot have killed
    /// them).
    fn kill_all(&self) {
        for dir in &self.0 {
            crate::cgroup::kill_all(dir);
        }
    }

    /// Removes the cgroups of a helper that has exited, in the background: nothing of the
    /// result depends on it, so the caller does not wait for the kernel to let them go.
    fn remove_in_background(&mut self) {
        let dirs = std::mem::take(&mut self.0);
        if dirs.is_empty() {
            return;
        }
        // Called from the run, which is always on a runtime.
        tokio::spawn(async move {
            for dir in dirs {
                crate::cgroup::remove(&dir).await;
            }
        });
    }
}

impl Drop for CgroupCleanup {
    fn drop(&mut self) {
        let dirs = std::mem::take(&mut self.0);
        if !dirs.is_empty()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                for dir in dirs {
                    crate::cgroup::remove(&dir).await;
                }
            });
        }
    }
}

/// Closes the helper's stdin when the run is dropped: the helper then kills the command.
struct StopOnDrop(Option<ChildStdin>);

impl StopOnDrop {
    async fn stop(&mut self) {
        if let Some(mut stdin) = self.0.take() {
            let _ = stdin.write_all(b"k").await;
            let _ = stdin.flush().await;
        }
    }
}

/// Runs `spec` through `helper`, calling `output` with each piece of output as it arrives;
/// stops the command after `timeout` or when `cancel` completes.
///
/// With `sandbox = "partial"`, a command whose namespaces failed half-way (nothing ran) is
/// run again without them, within the same time limit.
pub async fn run<C, F>(
    helper: &Helper,
    spec: &Spec,
    timeout: Duration,
    cancel: C,
    mut output: F,
) -> Result<Outcome, SandboxError>
where
    C: Future<Output = ()>,
    F: FnMut(Stream, &[u8]),
{
    let started = Instant::now();
    tokio::pin!(cancel);
    match run_once(helper, spec, timeout, &mut cancel, &mut output, started).await {
        Err(SandboxError::NamespacesFailed(why)) if spec.policy.require == Requirement::Partial => {
            tracing::warn!(%why, "the command's namespaces failed; running it without them, as sandbox = \"partial\" allows");
            let mut without = spec.clone();
            without.policy.namespaces = false;
            run_once(helper, &without, timeout, &mut cancel, &mut output, started).await
        }
        other => other,
    }
}

async fn run_once<C, F>(
    helper: &Helper,
    spec: &Spec,
    timeout: Duration,
    cancel: &mut std::pin::Pin<&mut C>,
    output: &mut F,
    started: Instant,
) -> Result<Outcome, SandboxError>
where
    C: Future<Output = ()>,
    F: FnMut(Stream, &[u8]),
{
    if spec.max_processes.is_some() || spec.policy.limits.memory.is_some() {
        crate::cgroup::sweep();
    }
    let mut child = tokio::process::Command::new(&helper.program)
        .args(&helper.args)
        .env_clear()
        .envs(helper.env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            SandboxError::Helper(format!(
                "cannot start the sandbox helper {}: {e}",
                helper.program.display()
            ))
        })?;
    let stdin = child.stdin.take().expect("piped");
    // Sent once the helper has said it is of this build.
    let mut line = serde_json::to_vec(spec).map_err(|e| SandboxError::Helper(e.to_string()))?;
    line.push(b'\n');
    let mut guard = StopOnDrop(Some(stdin));
    let stderr = child.stderr.take().expect("piped");
    let diagnostics = tokio::spawn(read_capped(stderr, 4096));
    let (tx, mut frames) = mpsc::channel::<(u8, Vec<u8>)>(16);
    tokio::spawn(read_frames(child.stdout.take().expect("piped"), tx));

    // The time limit counts from the call, the helper's start included: a limit shorter
    // than setting the sandbox up ends the call before the command is sent.
    let until = tokio::time::Instant::from_std(started) + timeout;
    let deadline = tokio::time::sleep_until(until);
    tokio::pin!(deadline);
    let mut ended = None;
    let mut grace_end = None;
    let mut applied = None;
    let mut group = None;
    let mut cgroup = CgroupCleanup(Vec::new());
    let report: Report = loop {
        let grace = async {
            match grace_end {
                Some(t) => tokio::time::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            frame = frames.recv() => match frame {
                Some((STDOUT, bytes)) => output(Stream::Stdout, &bytes),
                Some((STDERR, bytes)) => output(Stream::Stderr, &bytes),
                Some((STARTED, json)) => applied = serde_json::from_slice::<Applied>(&json).ok(),
                Some((CGROUP, raw)) => {
                    cgroup.0.extend(String::from_utf8(raw).ok().map(PathBuf::from));
                }
                Some((GROUP, raw)) => {
                    group = <[u8; 4]>::try_from(raw.as_slice())
                        .ok()
                        .and_then(|b| Pid::from_raw(u32::from_le_bytes(b) as i32));
                }
                Some((FINISHED, json)) => match serde_json::from_slice(&json) {
                    Ok(report) => break report,
                    Err(e) => return Err(SandboxError::Helper(format!("unreadable report: {e}"))),
                },
                Some((FAILED, _)) if ended == Some(Ended::Timeout) && applied.is_none() => {
                    let _ = child.wait().await;
                    return Err(SandboxError::NotStarted(timeout));
                }
                Some((FAILED, message)) => {
                    let _ = child.wait().await;
                    let message = String::from_utf8_lossy(&message).into_owned();
                    return Err(if message.starts_with(crate::NO_NAMESPACES) {
                        SandboxError::NoNamespaces(message)
                    } else {
                        SandboxError::Setup(message)
                    });
                }
                Some((NS_FAILED, message)) => {
                    let _ = child.wait().await;
                    return Err(SandboxError::NamespacesFailed(String::from_utf8_lossy(&message).into_owned()));
                }
                Some((READY, _)) => {
                    if tokio::time::Instant::now() >= until && ended.is_none() {
                        // The time ran out while the sandbox was being set up: the command
                        // is not sent at all.
                        ended = Some(Ended::Timeout);
                        grace_end = Some(tokio::time::Instant::now() + GRACE);
                        guard.stop().await;
                        continue;
                    }
                    // A helper that cannot take it ends at once; its missing report says so.
                    if let Some(stdin) = guard.0.as_mut() {
                        let _ = stdin.write_all(&line).await;
                    }
                }
                Some((OTHER_VERSION, theirs)) => {
                    force_kill(&mut child, group).await;
                    return Err(SandboxError::Helper(format!(
                        "the sandbox helper {} is another build ({}) than this server ({VERSION}); install ringfence and ringfence-sandbox from the same build",
                        helper.program.display(),
                        String::from_utf8_lossy(&theirs)
                    )));
                }
                Some((kind, _)) => return Err(SandboxError::Helper(format!("unknown frame {kind}"))),
                None => {
                    force_kill(&mut child, group).await;
                    cgroup.kill_all();
                    let said = diagnostics.await.unwrap_or_default();
                    return Err(SandboxError::Helper(format!(
                        "the sandbox helper ended without a report{}",
                        said_suffix(&said)
                    )));
                }
            },
            () = &mut deadline, if ended.is_none() => {
                ended = Some(Ended::Timeout);
                grace_end = Some(tokio::time::Instant::now() + GRACE);
                guard.stop().await;
            }
            () = cancel.as_mut(), if ended.is_none() => {
                ended = Some(Ended::Cancelled);
                grace_end = Some(tokio::time::Instant::now() + GRACE);
                guard.stop().await;
            }
            () = grace => {
                force_kill(&mut child, group).await;
                cgroup.kill_all();
                let said = diagnostics.await.unwrap_or_default();
                return Err(SandboxError::Helper(format!(
                    "the sandbox helper did not stop the command in time; its process group was killed{}",
                    said_suffix(&said)
                )));
            }
        }
    };
    // The report is in; the helper exits right after it. One that does not (it never should)
    // is killed with everything left in its groups and cgroup.
    if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
        force_kill(&mut child, group).await;
        cgroup.kill_all();
    }
    drop(guard);
    let applied = match (applied, ended) {
        (Some(applied), _) => applied,
        // Stopped before the sandbox was in place: the command never started.
        (None, Some(Ended::Timeout)) => return Err(SandboxError::NotStarted(timeout)),
        (None, _) => return Err(SandboxError::Helper("no sandbox report".into())),
    };
    cgroup.remove_in_background();
    let ended = match report.killed {
        Some(KillCause::ProcessLimit) => Some(Ended::ProcessLimit),
        Some(KillCause::Memory) => Some(Ended::Memory),
        _ => ended,
    };
    let exit = match (report.exit_code, report.signal) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(sig)) => Exit::Signal(sig),
        (None, None) => Exit::Signal(9),
    };
    Ok(Outcome {
        applied,
        exit,
        ended,
        leftovers: report.leftovers,
        duration: started.elapsed(),
    })
}

/// The last resort: the command's process group, the helper's, then the helper.
async fn force_kill(child: &mut Child, group: Option<Pid>) {
    if let Some(group) = group {
        let _ = kill_process_group(group, Signal::KILL);
    }
    if let Some(pid) = child.id().and_then(|id| Pid::from_raw(id as i32)) {
        let _ = kill_process_group(pid, Signal::KILL);
    }
    let _ = child.kill().await;
}

/// The helper's own words, as the end of a message.
fn said_suffix(said: &str) -> String {
    if said.trim().is_empty() {
        String::new()
    } else {
        format!(" (the helper said: {})", said.trim())
    }
}

/// Not frames of the helper's: it announced another build (the payload names it), or this
/// build (it waits for the specification).
const OTHER_VERSION: u8 = 0xfe;
const READY: u8 = 0xff;

/// Reads frames until the helper's stdout ends (or the receiver is gone).
async fn read_frames(mut out: impl AsyncRead + Unpin, tx: mpsc::Sender<(u8, Vec<u8>)>) {
    // Skip to the magic (at most 64 KiB of anything before it), then read the version.
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !seen.ends_with(MAGIC) {
        if seen.len() > 64 << 10 || out.read_exact(&mut byte).await.is_err() {
            return;
        }
        seen.push(byte[0]);
    }
    let mut version = Vec::new();
    loop {
        if version.len() > 64 || out.read_exact(&mut byte).await.is_err() {
            return;
        }
        if byte[0] == b'\n' {
            break;
        }
        version.push(byte[0]);
    }
    if version != VERSION.as_bytes() {
        let _ = tx.send((OTHER_VERSION, version)).await;
        return;
    }
    if tx.send((READY, Vec::new())).await.is_err() {
        return;
    }
    let mut header = [0u8; 5];
    loop {
        if out.read_exact(&mut header).await.is_err() {
            return;
        }
        let len = u32::from_le_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if len > 16 << 20 {
            return;
        }
        let mut payload = vec![0u8; len];
        if out.read_exact(&mut payload).await.is_err() {
            return;
        }
        if tx.send((header[0], payload)).await.is_err() {
            return;
        }
    }
}

/// Up to `cap` bytes of a stream (the helper's own messages), the rest drained.
async fn read_capped(mut stream: impl AsyncRead + Unpin, cap: usize) -> String {
    let mut kept = Vec::new();
    let mut buf = [0u8; 1024];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    String::from_utf8_lossy(&kept).into_owned()
}
