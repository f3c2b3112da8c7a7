//! `[shell]`: whether `run_shell_command` is offered and how commands run — the table as
//! written, then resolved. `RINGFENCE_SHELL_ENABLED` overrides `enabled`.

use ringfence_sandbox::{Limits, Network, Requirement};
use serde::Deserialize;

use ringfence_core::plug::{SectionInput, SettingsError};

/// The family's table in the configuration file.
pub const SECTION: &str = "shell";

/// The family's part of the personal configuration `ringfence init` writes: every line a
/// comment, `# ` before a setting (remove it to use the setting), `## ` before prose.
pub const SAMPLE: &str = r#"## Shell: run_shell_command, in a sandbox confined to the roots (Linux). Off until enabled.
# [shell]
# enabled = true                   # RINGFENCE_SHELL_ENABLED=true
# network = "none"                 # none | full (full: commands reach the network directly)"#;
/// `true` turns the shell on (over `[shell] enabled`).
pub const RINGFENCE_SHELL_ENABLED: &str = "RINGFENCE_SHELL_ENABLED";
/// The variables this family reads.
pub const ENV_VARS: &[&str] = &[RINGFENCE_SHELL_ENABLED];
/// Seed 003's switch for the same, honoured as an alias (`RINGFENCE_SHELL_ENABLED` wins).
pub const IRIS_SHELL_ENABLED: &str = "IRIS_SHELL_ENABLED";

/// `[shell]`, as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShellTable {
    /// Offer run_shell_command (default false).
    enabled: Option<bool>,
    /// "none" (default) or "full".
    network: Option<String>,
    /// "on" (default: Landlock and the command's own namespaces), "partial" (without the
    /// namespaces where the machine cannot make them) or "off" (commands run unconfined;
    /// logged as a warning).
    sandbox: Option<String>,
    /// Names of ringfence's own environment variables passed on to commands.
    env: Option<Vec<String>>,
    /// Command words refused besides sudo, su, doas, pkexec and runuser.
    blocked: Option<Vec<String>>,
    /// Processes one command may have at once (default 256).
    max_processes: Option<u64>,
    /// Open files per process (default 1024).
    max_open_files: Option<u64>,
    /// The largest file a command may write, in megabytes (default 1024).
    max_file_size_mb: Option<u64>,
    /// CPU seconds per process (default 300).
    max_cpu_secs: Option<u64>,
    /// Memory of the whole command, in megabytes (default 4096): a memory cgroup where one
    /// can be made, else the address space of each process.
    max_memory_mb: Option<u64>,
    /// The most a command's $TMPDIR may hold, in megabytes (default 512; counted in its
    /// memory).
    max_tmp_mb: Option<u64>,
    /// Commands one user may run at once (default 4).
    concurrent_per_user: Option<usize>,
}

/// The resolved `[shell]` settings.
#[derive(Debug, Clone)]
pub struct ShellSettings {
    pub enabled: bool,
    pub network: Network,
    pub sandbox: Requirement,
    /// Passed-on variables with their values (read when the configuration loads).
    pub env: Vec<(String, String)>,
    pub blocked: Vec<String>,
    pub limits: Limits,
    pub max_processes: u64,
    pub concurrent_per_user: usize,
    /// The most a command's `$TMPDIR` may hold, in bytes.
    pub max_tmp: u64,
}

impl ShellSettings {
    pub fn resolve(input: &SectionInput<'_>) -> Result<ShellSettings, SettingsError> {
        let t: ShellTable = input.table(SECTION)?;
        let key = |k: &str| format!("{SECTION}.{k}");
        let enabled = input
            .first_flag(&[RINGFENCE_SHELL_ENABLED, IRIS_SHELL_ENABLED])?
            .unwrap_or(t.enabled.unwrap_or(false));
        let network = match t.network.as_deref().map(str::trim) {
            None | Some("none") => Network::None,
            Some("full") => Network::Full,
            Some(other) => {
                return Err(SettingsError::invalid(
                    key("network"),
                    format!("`{other}` is not \"none\" or \"full\""),
                ));
            }
        };
        let sandbox = match t.sandbox.as_deref().map(str::trim) {
            None | Some("on") => Requirement::Full,
            Some("partial") => Requirement::Partial,
            Some("off") => Requirement::Off,
            Some(other) => {
                return Err(SettingsError::invalid(
                    key("sandbox"),
                    format!("`{other}` is not \"on\", \"partial\" or \"off\""),
                ));
            }
        };
        let mut env = Vec::new();
        for name in t.env.unwrap_or_default() {
            let valid = !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !name.starts_with(|c: char| c.is_ascii_digit());
            if !valid {
                return Err(SettingsError::invalid(
                    key("env"),
                    format!("`{name}` is not a variable name"),
                ));
            }
            if matches!(name.as_str(), "HOME" | "TMPDIR" | "TERM") {
                return Err(SettingsError::invalid(
                    key("env"),
                    format!(
                        "`{name}` is set by ringfence for every command and cannot be passed on"
                    ),
                ));
            }
            if let Some(value) = input.env.get(&name) {
                env.push((name, value));
            }
        }
        let positive = |name: &str, v: Option<u64>, default: u64, max: u64| match v {
            None => Ok(default),
            Some(n) if (1..=max).contains(&n) => Ok(n),
            Some(n) => Err(SettingsError::invalid(
                key(name),
                format!("{n} is out of range: 1 to {max}"),
            )),
        };
        let max_processes = positive("max_processes", t.max_processes, 256, 100_000)?;
        let memory = positive("max_memory_mb", t.max_memory_mb, 4096, 1 << 30)? << 20;
        let limits = Limits {
            processes: Some(max_processes),
            open_files: Some(positive("max_open_files", t.max_open_files, 1024, 1 << 20)?),
            file_size: Some(positive("max_file_size_mb", t.max_file_size_mb, 1024, 1 << 30)? << 20),
            cpu_secs: Some(positive("max_cpu_secs", t.max_cpu_secs, 300, 86_400)?),
            address_space: Some(memory),
            memory: Some(memory),
        };
        let max_tmp = positive("max_tmp_mb", t.max_tmp_mb, 512, 1 << 30)? << 20;
        if max_tmp > memory {
            return Err(SettingsError::invalid(
                key("max_tmp_mb"),
                format!(
                    "{} is more than max_memory_mb ({}): what $TMPDIR holds counts in the command's memory; lower max_tmp_mb or raise max_memory_mb",
                    max_tmp >> 20,
                    memory >> 20
                ),
            ));
        }
        let concurrent_per_user = positive(
            "concurrent_per_user",
            t.concurrent_per_user.map(|n| n as u64),
            4,
            1000,
        )? as usize;
        Ok(ShellSettings {
            enabled,
            network,
            sandbox,
            env,
            blocked: t.blocked.unwrap_or_default(),
            limits,
            max_processes,
            concurrent_per_user,
            max_tmp,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> Result<ShellSettings, String> {
        let dir = tempfile::tempdir().unwrap();
        ringfence_core::plug::resolve_text(&crate::ShellPlug, toml, &[], dir.path())
            .map_err(|e| e.to_string())
    }

    fn sandbox(toml: &str) -> Result<Requirement, String> {
        settings(toml).map(|s| s.sandbox)
    }

    #[test]
    fn the_sandbox_setting_takes_on_partial_and_off() {
        assert_eq!(sandbox("log = \"info\"\n"), Ok(Requirement::Full));
        assert_eq!(
            sandbox("[shell]\nsandbox = \"on\"\n"),
            Ok(Requirement::Full)
        );
        assert_eq!(
            sandbox("[shell]\nsandbox = \"partial\"\n"),
            Ok(Requirement::Partial)
        );
        assert_eq!(
            sandbox("[shell]\nsandbox = \"off\"\n"),
            Ok(Requirement::Off)
        );
        let e = sandbox("[shell]\nsandbox = \"some\"\n").unwrap_err();
        assert!(e.contains("shell.sandbox"), "{e}");
        assert!(e.contains("\"partial\""), "{e}");
    }

    #[test]
    fn memory_bounds_the_command_and_tmp_fits_in_it() {
        let d = settings("log = \"info\"\n").unwrap();
        assert_eq!(d.limits.memory, Some(4096 << 20));
        assert_eq!(d.max_tmp, 512 << 20);
        let s = settings("[shell]\nmax_memory_mb = 1024\nmax_tmp_mb = 64\n").unwrap();
        assert_eq!(s.limits.memory, Some(1024 << 20));
        assert_eq!(s.limits.address_space, Some(1024 << 20));
        assert_eq!(s.max_tmp, 64 << 20);
        let e = settings("[shell]\nmax_memory_mb = 256\n").unwrap_err();
        assert!(e.contains("shell.max_tmp_mb"), "{e}");
        assert!(e.contains("raise max_memory_mb"), "{e}");
        let e = settings("[shell]\nmax_tmp_mb = 0\n").unwrap_err();
        assert!(e.contains("out of range"), "{e}");
    }
}
