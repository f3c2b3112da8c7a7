//! `run_shell_command` (seed 003): a command, run with `/bin/sh -c` in the sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ringfence_fs::Access;
use ringfence_sandbox::{
    Applied, Ended, Enforcement, Exit, Limits, MemoryLimit, Network, Policy, ProcessLimit,
    Requirement, Spec, Stream, TmpDir, UserNamespace, clean_env, device_write_paths, granted_over,
    system_read_paths,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::output::{Capture, Captured};
use super::{ALWAYS_REFUSED, Running, ShellConfig};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, AsyncTool, BoxFuture, ToolContext, ToolOutput};

/// Seconds a command may run unless the call says otherwise, and at most.
pub const DEFAULT_TIMEOUT_SECS: f64 = 30.0;
pub const MAX_TIMEOUT_SECS: f64 = 300.0;
/// How often progress notifications may go out.
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunShellCommandArgs {
    /// The shell command to execute
    pub command: String,
    /// Directory for command execution (default: the current workspace)
    #[serde(rename = "workingDirectory")]
    pub working_directory: Option<String>,
    /// Timeout in seconds (default: 30, max: 300)
    #[schemars(extend("exclusiveMinimum" = 0, "maximum" = 300))]
    pub timeout: Option<f64>,
}

pub struct RunShellCommand {
    pub(crate) config: Arc<ShellConfig>,
    pub(crate) running: Arc<Running>,
}

const DESCRIPTION: &str = "Execute a shell command (/bin/sh -c) and return its exit code, stdout and stderr. It runs in a kernel sandbox: it can write only inside the writable roots and its own temporary directory ($TMPDIR) (elsewhere the file system is read-only), read the roots and the system directories, and has no network unless the operator allowed it; privilege escalation (sudo, su) is refused. workingDirectory defaults to the current workspace and must lie inside a root. timeout: seconds, default 30, max 300; on timeout the command and every process it started are killed. Each stream shows up to 30,000 characters (beginning and end); the whole output is saved to a file whose path the result gives. stdin is empty; the environment is clean (PATH, HOME, LANG, TERM=dumb, TMPDIR).";

impl AsyncTool for RunShellCommand {
    type Args = RunShellCommandArgs;
    const NAME: &'static str = "run_shell_command";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const ANNOTATIONS: Annotations = Annotations {
        title: "Run shell command",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    };

    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: RunShellCommandArgs,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        Box::pin(async move { self.execute(ctx, args).await })
    }
}

/// The first refused command word in `command`, if any: a word in command position
/// (after `;`, `&`, `|`, `(`, `` ` ``, `$(`, a newline, or at the start), compared by its
/// last path component. A courtesy only: spellings that dodge it meet the sandbox.
pub fn refused_word(command: &str, extra: &[String]) -> Option<String> {
    // Words with whether each stands in command position.
    let mut words: Vec<(String, bool)> = Vec::new();
    let mut word = String::new();
    let mut command_position = true;
    let mut word_in_position = true;
    let flush = |word: &mut String, pos: bool, words: &mut Vec<(String, bool)>| {
        if !word.is_empty() {
            words.push((std::mem::take(word), pos));
        }
    };
    for c in command.chars() {
        if c.is_whitespace() && c != '\n' {
            if !word.is_empty() {
                flush(&mut word, word_in_position, &mut words);
                command_position = false;
            }
        } else if ";&|()`\n".contains(c) {
            flush(&mut word, word_in_position, &mut words);
            command_position = true;
        } else {
            if word.is_empty() {
                word_in_position = command_position;
            }
            word.push(c);
        }
    }
    flush(&mut word, word_in_position, &mut words);
    let mut keep_position = false;
    for (word, pos) in words {
        let pos = pos || keep_position;
        let bare = word.trim_start_matches('$').trim_start_matches('\\');
        let base = bare.rsplit('/').next().unwrap_or(bare);
        if pos && (ALWAYS_REFUSED.contains(&base) || extra.iter().any(|e| e == base)) {
            return Some(base.to_owned());
        }
        // Words that keep the next word in command position.
        keep_position =
            pos && matches!(base, "exec" | "env" | "nohup" | "command" | "time" | "nice");
    }
    None
}

/// The longest command accepted.
const MAX_COMMAND_BYTES: usize = 64 * 1024;

impl RunShellCommand {
    async fn execute(&self, ctx: ToolContext, args: RunShellCommandArgs) -> ToolResult<ToolOutput> {
        let cfg = &self.config;
        if args.command.trim().is_empty() {
            return Err(ToolError::invalid(
                "run_shell_command: command is empty; give the shell command to run",
            ));
        }
        if args.command.contains('\0') {
            return Err(ToolError::invalid(
                "run_shell_command: command contains a NUL character, which no shell accepts",
            ));
        }
        // The command reaches the sandbox's second stage in its environment, where Linux
        // allows one string of at most 128 KiB (with the policy beside it).
        if args.command.len() > MAX_COMMAND_BYTES {
            return Err(ToolError::invalid(format!(
                "run_shell_command: command is {} bytes, at most {MAX_COMMAND_BYTES}; write long content to a file with write_file and run that",
                args.command.len()
            )));
        }
        let timeout = args.timeout.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !timeout.is_finite() || timeout <= 0.0 || timeout > MAX_TIMEOUT_SECS {
            return Err(ToolError::invalid(format!(
                "run_shell_command: timeout must be more than 0 and at most {MAX_TIMEOUT_SECS} seconds (got {timeout})"
            )));
        }
        if let Some(word) = refused_word(&args.command, &cfg.refused) {
            return Err(ToolError::new(
                ToolErrorKind::Refused,
                format!(
                    "run_shell_command: `{word}` is refused: commands run with the user's own rights and no way to gain others (the sandbox would refuse it too). Run the command without it"
                ),
            ));
        }
        let workspace = &ctx.session.workspace;
        // Opening the current root makes it where it is made on first use (the default
        // workspace, a user's own); a configured root that is missing fails here, by name.
        workspace.current_root().dir()?;
        let cwd = match args.working_directory.as_deref() {
            Some(dir) if !dir.trim().is_empty() => {
                let target = workspace.resolve(dir)?;
                if !target.exists() {
                    return Err(ToolError::new(
                        ToolErrorKind::NotFound,
                        format!(
                            "run_shell_command: workingDirectory {} does not exist",
                            target.display()
                        ),
                    ));
                }
                if !target.is_dir() {
                    return Err(ToolError::new(
                        ToolErrorKind::WrongType,
                        format!(
                            "run_shell_command: workingDirectory {} is not a directory",
                            target.display()
                        ),
                    ));
                }
                target.absolute()
            }
            _ => workspace.current().absolute(),
        };
        // Landlock grants by path, and rights only add up: a root inside a writable root
        // would be writable whatever its own access, and a command could swap its
        // directory for a symlink so that the next call grants rights beneath the target.
        let roots = workspace.roots();
        for inner in roots.iter() {
            if let Some(outer) = roots.iter().find(|outer| {
                outer.access() == Access::ReadWrite
                    && strictly_inside(inner.absolute_path(), outer.absolute_path())
            }) {
                return Err(ToolError::new(
                    ToolErrorKind::Refused,
                    format!(
                        "run_shell_command: the root {} lies inside the writable root {}, which the kernel sandbox cannot keep apart (a command could rewrite or replace it); an operator must not nest roots while the shell is on",
                        inner.label(),
                        outer.label()
                    ),
                ));
            }
        }
        let mut read = Vec::new();
        let mut write = Vec::new();
        for root in roots.iter() {
            let path = root.absolute_path().to_path_buf();
            if let Some(p) = cfg.protected.iter().find(|p| contains_protected(&path, p)) {
                return Err(ToolError::new(
                    ToolErrorKind::Refused,
                    format!(
                        "run_shell_command: the root {} overlaps ringfence's data directory ({}), which commands must not reach; the kernel sandbox cannot exclude a directory inside a root. An operator must move the data directory (RINGFENCE_DATA_DIR) out of the roots or narrow the root",
                        root.label(),
                        p.display()
                    ),
                ));
            }
            if root.access() == Access::ReadWrite
                && let Some((file, what)) = cfg
                    .unwritable
                    .iter()
                    .find(|(file, _)| contains_protected(&path, file))
            {
                return Err(ToolError::new(
                    ToolErrorKind::Refused,
                    format!(
                        "run_shell_command: the writable root {} holds {what} ({}), which a command could replace to run the next command without the sandbox. An operator must install ringfence outside the writable roots (or move the file) or make that root read-only",
                        root.label(),
                        file.display()
                    ),
                ));
            }
            match root.access() {
                Access::ReadOnly => read.push(path),
                Access::ReadWrite => write.push(path),
            }
        }
        let sandboxed = cfg.sandbox != Requirement::Off;
        let system = if sandboxed {
            system_read_paths()
        } else {
            Vec::new()
        };
        if let Some(message) = private_paths_granted(&cfg.private, &system) {
            return Err(ToolError::new(
                ToolErrorKind::Refused,
                format!("run_shell_command: {message}"),
            ));
        }
        let _slot = self
            .running
            .take(ctx.session.user(), cfg.concurrent_per_user)
            .map_err(|n| {
                ToolError::new(
                    ToolErrorKind::Refused,
                    format!(
                        "run_shell_command: {n} of your commands are running already (at most {} at once); wait for one to finish",
                        cfg.concurrent_per_user
                    ),
                )
            })?;
        let tmp = PrivateTmp::create()?;
        let home = workspace.current().absolute();
        let (read, write, network) = if sandboxed {
            let mut r = system;
            r.extend(read);
            let mut w = write;
            w.push(tmp.path.clone());
            w.extend(device_write_paths());
            (r, w, cfg.network)
        } else {
            (Vec::new(), vec![PathBuf::from("/")], Network::Full)
        };
        let spec = Spec {
            shell: PathBuf::from("/bin/sh"),
            command: args.command.clone(),
            cwd: cwd.clone(),
            env: clean_env(&home, &tmp.path, &cfg.env),
            policy: Policy {
                read,
                write,
                limits: cfg.limits,
                network,
                require: cfg.sandbox,
                // Counted by the helper, outside the sandbox.
                others_processes: 0,
                namespaces: sandboxed,
                user_namespace: UserNamespace::Auto,
                tmp: sandboxed.then(|| TmpDir {
                    path: tmp.path.clone(),
                    size: cfg.max_tmp,
                }),
                landlock_abi_cap: None,
            },
            max_processes: Some(cfg.max_processes),
        };

        let mut out = Capture::new(cfg.shown_chars);
        let mut err = Capture::new(cfg.shown_chars);
        let started = Instant::now();
        let mut last_progress = Instant::now();
        let progress = ctx.progress.clone();
        let spill = ctx.spill.clone();
        let cancel = ctx.cancel.clone();
        let result = ringfence_sandbox::run(
            &cfg.helper,
            &spec,
            Duration::from_secs_f64(timeout),
            async move { cancel.cancelled().await },
            |stream, bytes| {
                match stream {
                    Stream::Stdout => out.push(bytes, &spill),
                    Stream::Stderr => err.push(bytes, &spill),
                }
                if progress.is_enabled() && last_progress.elapsed() >= PROGRESS_EVERY {
                    last_progress = Instant::now();
                    let mut lines = out.take_lines();
                    lines.extend(err.take_lines());
                    if !lines.is_empty() {
                        progress.report(
                            started.elapsed().as_secs_f64(),
                            Some(timeout),
                            lines.join("\n"),
                        );
                    }
                }
            },
        )
        .await;
        drop(tmp);
        if ctx.cancel.is_cancelled() && result.is_err() {
            // Cancelled before the sandbox had even reported: the call was cancelled.
            return Err(ToolError::cancelled());
        }
        let outcome = result.map_err(|e| match e {
            ringfence_sandbox::SandboxError::NotStarted(_) => {
                ToolError::new(ToolErrorKind::Timeout, format!("run_shell_command: {e}"))
            }
            e => ToolError::new(
                ToolErrorKind::Unavailable,
                format!("run_shell_command: the command could not be run: {e}"),
            ),
        })?;
        if outcome.ended == Some(Ended::Cancelled) {
            return Err(ToolError::cancelled());
        }
        let out = out.finish();
        let err = err.finish();
        Ok(render(
            &args.command,
            &cwd,
            timeout,
            cfg,
            &outcome,
            out,
            err,
        ))
    }
}

/// Says which private path (the data directory, the configuration file, other users'
/// workspaces) a system directory granted for reading would give commands, and what an
/// operator does about it; `None` when none.
pub fn private_paths_granted(private: &[(PathBuf, String)], system: &[PathBuf]) -> Option<String> {
    let paths: Vec<&Path> = private.iter().map(|(p, _)| p.as_path()).collect();
    let over = granted_over(&paths, system);
    private.iter().zip(over).find_map(|((path, what), granted)| {
        granted.map(|granted| {
            format!(
                "{what} ({}) lies beneath {}, which the sandbox lets every command read, so commands are not run. An operator must move it out of the system directories (a data directory under the home directory or /var/lib, RINGFENCE_DATA_DIR) or make its directory private (chmod o-rx: only entries every user may read are given under /opt and /usr/local)",
                path.display(),
                granted.display()
            )
        })
    })
}

/// Whether granting `root` would grant `protected` (the root is it or holds it). A root
/// inside the protected directory (the default workspace under the data directory) grants
/// only itself.
fn contains_protected(root: &Path, protected: &Path) -> bool {
    ringfence_fs::paths_overlap(root, protected) && !strictly_inside(root, protected)
}

/// Whether `inner` lies beneath `outer` and is not `outer` itself, by their spellings.
fn strictly_inside(inner: &Path, outer: &Path) -> bool {
    let inner = ringfence_fs::normalize_lexically(inner);
    let outer = ringfence_fs::normalize_lexically(outer);
    inner != outer && inner.starts_with(&outer)
}

/// The command's private temporary directory (0700, removed with everything in it).
struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    fn create() -> ToolResult<PrivateTmp> {
        let path = std::env::temp_dir().join(format!("ringfence-cmd-{}", uuid::Uuid::new_v4()));
        ringfence_fs::create_private_dir_all(&path).map_err(|e| {
            ToolError::new(
                ToolErrorKind::Io,
                format!("run_shell_command: cannot make the command's temporary directory: {e}"),
            )
        })?;
        Ok(PrivateTmp { path })
    }
}

impl Drop for PrivateTmp {
    #[allow(clippy::disallowed_methods)] // ringfence's own temporary directory, not a root
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        24 => "SIGXCPU",
        25 => "SIGXFSZ",
        31 => "SIGSYS",
        _ => "signal",
    }
}

/// One line on the sandbox that held: which layer holds each guarantee.
fn sandbox_line(enabled: bool, network: Network, limits: &Limits, applied: &Applied) -> String {
    if !enabled {
        return "OFF (the operator set [shell] sandbox = \"off\": the command could reach everything ringfence can)".to_owned();
    }
    let landlock = match applied.enforcement {
        Enforcement::Full => format!("Landlock ABI {} (files)", applied.landlock_abi),
        Enforcement::Partial => format!(
            "Landlock ABI {} (files; partial: an older kernel)",
            applied.landlock_abi
        ),
        Enforcement::None => "no Landlock".to_owned(),
    };
    let mut parts = vec![landlock];
    match applied.namespaces {
        Some(ns) => {
            let mut names = vec!["pid (own /proc)", "ipc", "mount", "uts"];
            if ns.net {
                names.push("net");
            }
            if ns.user {
                names.push("in a user namespace");
            }
            parts.push(format!("namespaces: {}", names.join(", ")));
        }
        None => parts.push(format!(
            "NO namespaces of its own (the operator allowed a partial sandbox): other processes are visible{}",
            if applied.ipc_refused {
                ", System V IPC refused by seccomp"
            } else {
                ""
            }
        )),
    }
    parts.push(
        match (applied.processes_hidden(), applied.scoped) {
            (true, true) => "signals: PID namespace and Landlock scope",
            (true, false) => "signals: PID namespace",
            (false, true) => "signals: Landlock scope",
            (false, false) => "signals NOT scoped (an older kernel and no PID namespace)",
        }
        .to_owned(),
    );
    parts.push(if applied.read_only_outside {
        "read-only outside the writable roots".into()
    } else {
        "no mount namespace here: modes and times of the user's files outside the roots are not protected".into()
    });
    parts.push(if applied.seccomp {
        format!("seccomp filter (network {})", network.as_str())
    } else {
        "no seccomp filter on this architecture".into()
    });
    if applied.no_new_privs {
        parts.push("no_new_privs".into());
    }
    parts.push(match applied.process_limit {
        Some(ProcessLimit::Cgroup) => "processes: cgroup".into(),
        Some(ProcessLimit::UserLimit) => "processes: per-user rlimit".into(),
        Some(ProcessLimit::Watch) => "processes: watched only".into(),
        None => "no process limit".into(),
    });
    let mib = |b: Option<u64>| b.map(|b| format!(" {} MiB", b >> 20)).unwrap_or_default();
    parts.push(match applied.memory_limit {
        Some(MemoryLimit::Cgroup) => format!("memory: cgroup{}", mib(limits.memory)),
        Some(MemoryLimit::AddressSpace) | None => format!(
            "memory: address space per process{} only (no memory cgroup here; memfd refused)",
            mib(limits.address_space)
        ),
    });
    if let Some(size) = applied.tmp_size {
        parts.push(format!("$TMPDIR: tmpfs {} MiB", size >> 20));
    }
    parts.join(", ")
}

fn render(
    command: &str,
    cwd: &Path,
    timeout: f64,
    cfg: &ShellConfig,
    outcome: &ringfence_sandbox::Outcome,
    out: Captured,
    err: Captured,
) -> ToolOutput {
    let sandbox = cfg.sandbox != Requirement::Off;
    // Unconfined commands reach the network whatever the setting says.
    let network = if sandbox { cfg.network } else { Network::Full };
    let max_processes = cfg.max_processes;
    let (exit_code, signal) = match outcome.exit {
        Exit::Code(c) => (Some(c), None),
        Exit::Signal(s) => (None, Some(s)),
    };
    let status = match (outcome.ended, outcome.exit) {
        (Some(Ended::Timeout), _) => format!(
            "Timed out after {timeout} s: the command and every process it started were killed"
        ),
        (Some(Ended::Memory), _) => format!(
            "Killed: the command ran out of memory ({} MiB for the command and everything it started, its $TMPDIR included); all of its processes were killed. Use less memory, or an operator can raise [shell] max_memory_mb",
            cfg.limits.memory.unwrap_or(0) >> 20
        ),
        (Some(Ended::ProcessLimit), _) => format!(
            "Stopped: the command had more processes or threads at once than allowed ({}); all of them were killed. A parallel build may need fewer jobs, or an operator can raise [shell] max_processes",
            max_processes
        ),
        (_, Exit::Code(c)) => format!("Exit code: {c}"),
        (_, Exit::Signal(s)) => format!("Killed by signal {s} ({})", signal_name(s)),
    };
    let secs = outcome.duration.as_secs_f64();
    let mut text = format!(
        "{status}\nDuration: {secs:.2} s\nWorking directory: {}\nSandbox: {}\n",
        cwd.display(),
        sandbox_line(sandbox, network, &cfg.limits, &outcome.applied)
    );
    if outcome.leftovers > 0 {
        text.push_str(&format!(
            "Background processes still running when the command ended were killed: {}\n",
            outcome.leftovers
        ));
    }
    for (name, c) in [("stdout", &out), ("stderr", &err)] {
        if c.bytes == 0 {
            text.push_str(&format!("\n{name}: (empty)\n"));
            continue;
        }
        text.push_str(&format!("\n{name}:\n{}", c.text));
        if !c.text.ends_with('\n') {
            text.push('\n');
        }
        if c.truncated {
            match &c.file {
                Some(path) => text.push_str(&format!(
                    "[{name} cut to {} characters; {}{}]\n",
                    c.text.chars().count(),
                    ringfence_core::spill::saved_notice(path),
                    c.spill_note
                        .as_ref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                )),
                None => text.push_str(&format!(
                    "[{name} cut; the whole output could not be saved: {}]\n",
                    c.spill_note.as_deref().unwrap_or("unknown reason")
                )),
            }
        }
    }
    let structured = json!({
        "command": command,
        "exitCode": exit_code,
        "signal": signal,
        "timedOut": outcome.ended == Some(Ended::Timeout),
        "processLimitExceeded": outcome.ended == Some(Ended::ProcessLimit),
        "memoryLimitExceeded": outcome.ended == Some(Ended::Memory),
        "stdout": out.text,
        "stderr": err.text,
        "stdoutTruncated": out.truncated,
        "stderrTruncated": err.truncated,
        "stdoutFile": out.file,
        "stderrFile": err.file,
        "stdoutBytes": out.bytes,
        "stderrBytes": err.bytes,
        "durationMs": outcome.duration.as_millis() as u64,
        "workingDirectory": cwd,
        "backgroundProcessesKilled": outcome.leftovers,
        "sandbox": {
            "enabled": sandbox,
            "landlockAbi": outcome.applied.landlock_abi,
            "enforcement": outcome.applied.enforcement,
            "scoped": outcome.applied.scoped,
            "seccomp": outcome.applied.seccomp,
            "readOnlyOutside": outcome.applied.read_only_outside,
            "noNewPrivs": outcome.applied.no_new_privs,
            "network": network.as_str(),
            "processLimit": outcome.applied.process_limit,
            "memoryLimit": outcome.applied.memory_limit,
            "namespaces": outcome.applied.namespaces,
            "signalsIsolated": outcome.applied.signals_isolated(),
            "processesHidden": outcome.applied.processes_hidden(),
            "tmpBytes": outcome.applied.tmp_size,
        },
    });
    ToolOutput::text(text).with_structured(structured)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_words_in_command_position() {
        let none: Vec<String> = Vec::new();
        assert_eq!(refused_word("sudo ls", &none).as_deref(), Some("sudo"));
        assert_eq!(refused_word("ls; su -c id", &none).as_deref(), Some("su"));
        assert_eq!(
            refused_word("ls && /usr/bin/sudo x", &none).as_deref(),
            Some("sudo")
        );
        assert_eq!(
            refused_word("echo $(sudo id)", &none).as_deref(),
            Some("sudo")
        );
        assert_eq!(refused_word("env sudo id", &none).as_deref(), Some("sudo"));
        assert_eq!(refused_word("\\su", &none).as_deref(), Some("su"));
        // Not in command position: an argument.
        assert_eq!(refused_word("echo sudo", &none), None);
        assert_eq!(refused_word("grep -r su .", &none), None);
        assert_eq!(refused_word("ls", &none), None);
        let extra = vec!["shutdown".to_owned()];
        assert_eq!(
            refused_word("shutdown -h now", &extra).as_deref(),
            Some("shutdown")
        );
    }
}
