//! The shell family (seed 003): `run_shell_command` runs a command with `/bin/sh` inside the
//! kernel sandbox of `ringfence-sandbox` — write access only to the session's writable roots
//! and a private temporary directory, read access to those, the read-only roots and the
//! system directories, no network unless the operator allows it, no privileges, bounded
//! processes, files and time — and kills everything it started when it ends.
//!
//! The family is off unless an operator turns it on (`[shell] enabled = true`); the binary
//! then withholds the tool. A list of refused command words (`sudo`, `su`, …) answers at
//! once, as a courtesy: the sandbox, not the list, is the boundary.

mod output;
mod plug;
mod run_shell_command;
pub mod settings;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ringfence_sandbox::{Helper, Limits, Network, Requirement};

use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::tool::Async;

pub use output::{Capture, Captured, MAX_SPILL_BYTES};
pub use plug::ShellPlug;
pub use run_shell_command::{RunShellCommand, private_paths_granted, refused_word};

/// The tool family name (`tools.disable = ["shell"]`).
pub const FAMILY: &str = "shell";

/// The family's one tool.
pub const TOOL: &str = "run_shell_command";

pub const INFO: FamilyInfo = FamilyInfo {
    name: FAMILY,
    summary: "run shell commands in a kernel sandbox confined to the roots (off unless [shell] enabled = true)",
    tools: &[TOOL],
    presets: &[ringfence_core::PresetPart {
        name: ringfence_core::family::ASSISTANT,
        summary: ringfence_core::family::ASSISTANT_SUMMARY,
        tools: ringfence_core::family::EVERY_TOOL,
    }],
};

/// Command words refused at once (the seed's "privilege escalation commands").
pub const ALWAYS_REFUSED: &[&str] = &["sudo", "su", "doas", "pkexec", "runuser"];

/// How commands run.
#[derive(Debug, Clone)]
pub struct ShellConfig {
    /// The sandbox helper (ringfence's own binary).
    pub helper: Helper,
    pub network: Network,
    /// How much of the kernel sandbox must hold (`Full` unless an operator chose
    /// `sandbox = "partial"` or `"off"`; with `Off` commands run without Landlock
    /// confinement, and every result says so).
    pub sandbox: Requirement,
    /// Variables an operator passes to commands (name, value).
    pub env: Vec<(String, String)>,
    /// Command words refused besides [`ALWAYS_REFUSED`].
    pub refused: Vec<String>,
    pub limits: Limits,
    /// Processes one command may have at once.
    pub max_processes: u64,
    /// Commands one user may run at once.
    pub concurrent_per_user: usize,
    /// Characters of each stream shown in a result.
    pub shown_chars: usize,
    /// Paths no root may overlap for commands to run (ringfence's data directory): Landlock
    /// cannot carve them out of a root that contains them.
    pub protected: Vec<PathBuf>,
    /// Files no writable root may hold, each with what it is: ringfence's own executables
    /// and configuration, which a command could replace to lift the sandbox next time.
    pub unwritable: Vec<(PathBuf, String)>,
    /// Paths commands must never read, each with what it is (the data directory, the
    /// configuration file, other users' workspaces): commands are refused while one of
    /// them lies beneath a system directory the sandbox grants for reading.
    pub private: Vec<(PathBuf, String)>,
    /// The most a command's `$TMPDIR` may hold, in bytes (a `tmpfs` of its own).
    pub max_tmp: u64,
}

impl ShellConfig {
    /// Defaults around `helper`: network off, sandbox on, the default limits, 256
    /// processes, 4 commands per user, 30,000 characters per stream, 512 MiB of `$TMPDIR`.
    pub fn new(helper: Helper) -> ShellConfig {
        ShellConfig {
            helper,
            network: Network::None,
            sandbox: Requirement::Full,
            env: Vec::new(),
            refused: Vec::new(),
            limits: Limits::default(),
            max_processes: 256,
            concurrent_per_user: 4,
            shown_chars: 30_000,
            protected: Vec::new(),
            unwritable: Vec::new(),
            private: Vec::new(),
            max_tmp: 512 << 20,
        }
    }
}

/// Commands running per user.
#[derive(Debug, Default)]
pub struct Running {
    by_user: Mutex<HashMap<String, usize>>,
}

/// One running command; dropping it frees its slot.
pub struct Slot {
    running: Arc<Running>,
    user: String,
}

impl Running {
    /// Takes a slot for `user`, or says how many run already.
    pub fn take(self: &Arc<Running>, user: &str, limit: usize) -> Result<Slot, usize> {
        let mut map = self.by_user.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(user.to_owned()).or_default();
        if *n >= limit {
            return Err(*n);
        }
        *n += 1;
        Ok(Slot {
            running: self.clone(),
            user: user.to_owned(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut map = self
            .running
            .by_user
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = map.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.user);
            }
        }
    }
}

/// The shell family, counting its running commands on its own.
pub fn family(config: ShellConfig) -> Family {
    family_with(config, Arc::new(Running::default()))
}

/// The shell family, counting running commands in `running` (shared by every build of the
/// family in one server, so that a delegated task's commands count against its user).
pub fn family_with(config: ShellConfig, running: Arc<Running>) -> Family {
    Family::new(
        &INFO,
        vec![Async::arc(RunShellCommand {
            config: Arc::new(config),
            running,
        })],
    )
}
