//! What a sandboxed run is given and what it reports: the types the server, its families
//! and the helper share, on every platform (the sandbox itself is Linux's; elsewhere
//! [`crate::run`] refuses).

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Applied, Policy};

/// The argument that starts the binary as the helper.
pub const HELPER_ARG: &str = "__sandbox-helper";

/// What the helper runs, and how.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    /// The shell that runs `command` (`/bin/sh`).
    pub shell: PathBuf,
    pub command: String,
    pub cwd: PathBuf,
    /// The whole environment of the command.
    pub env: Vec<(String, String)>,
    pub policy: Policy,
    /// The most processes the command may have at once (its whole tree, counted by the
    /// helper, so that the limit holds for root, whom the kernel's process limit exempts);
    /// more, and everything is killed.
    pub max_processes: Option<u64>,
}

/// Whether commands may use the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// No sockets at all (the default).
    #[default]
    None,
    /// Sockets as the machine allows them.
    Full,
}

impl Network {
    pub fn as_str(self) -> &'static str {
        match self {
            Network::None => "none",
            Network::Full => "full",
        }
    }
}

/// Which namespaces were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Made {
    /// A user namespace around the others (an unprivileged server).
    pub user: bool,
    pub mount: bool,
    pub pid: bool,
    pub ipc: bool,
    pub uts: bool,
    pub net: bool,
    pub cgroup: bool,
}

/// How the user namespace is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UserNamespace {
    /// Only where the namespaces cannot be made without one.
    #[default]
    Auto,
    /// Always (what an ordinary user's server does; tests take this path as root too).
    Always,
}

/// The file name of the small helper executable.
pub const SMALL_HELPER: &str = "ringfence-sandbox";

/// Whether `path` is an executable file (installation layout, not a workspace path).
#[allow(clippy::disallowed_methods)]
fn is_executable(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        std::fs::metadata(path).is_ok_and(|m| m.is_file())
    }
}

/// How the helper is started: a program (ringfence's own binary) and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The helper's environment (nothing else of the server's reaches it; the command's own
    /// is in the [`Spec`]).
    pub env: Vec<(String, String)>,
}

impl Helper {
    /// The helper of the running binary: the small `ringfence-sandbox` executable when it is
    /// installed beside it (it starts several times faster), else the running binary itself
    /// (it must dispatch [`HELPER_ARG`] to [`crate::helper_main`]).
    pub fn current_exe() -> std::io::Result<Helper> {
        let exe = std::env::current_exe()?;
        let small = exe.with_file_name(SMALL_HELPER);
        if is_executable(&small) {
            return Ok(Helper {
                program: small,
                args: Vec::new(),
                env: Vec::new(),
            });
        }
        Ok(Helper::binary(exe))
    }

    /// `program` (a ringfence binary) as the helper.
    pub fn binary(program: PathBuf) -> Helper {
        Helper {
            program,
            args: vec![HELPER_ARG.to_owned()],
            env: Vec::new(),
        }
    }
}

/// Which stream a piece of output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// How the command's shell ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// Why the command was stopped before it ended by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    Timeout,
    Cancelled,
    /// It had more processes at once than allowed.
    ProcessLimit,
    /// It ran out of the memory allowed (its memory cgroup killed it).
    Memory,
}

/// What a finished run reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// What the sandbox applied.
    pub applied: Applied,
    pub exit: Exit,
    pub ended: Option<Ended>,
    /// Processes still running when the shell ended (background jobs, daemons), killed.
    pub leftovers: usize,
    pub duration: Duration,
}
