//! The shell family's plug: `run_shell_command` in the kernel sandbox, withheld unless an operator
//! turned it on (`[shell] enabled = true` or `RINGFENCE_SHELL_ENABLED=true`).

use ringfence_core::plug::{
    BuildError, FamilyEnv, FamilyPlug, Offer, ProbeCall, SectionInput, SettingsError, Shown,
};
use ringfence_core::{Family, FamilyInfo};
use ringfence_sandbox::{Helper, Network, Requirement};

use crate::settings::{self as config, ShellSettings};
use crate::{self as family, ShellConfig};

pub struct ShellPlug;

impl FamilyPlug for ShellPlug {
    type Settings = ShellSettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);
    const SAMPLE: Option<&'static str> = Some(config::SAMPLE);
    const ENV_VARS: &'static [&'static str] = config::ENV_VARS;

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<ShellSettings, SettingsError> {
        ShellSettings::resolve(input)
    }

    fn withheld(&self, settings: &ShellSettings, _: &Offer<'_>) -> Option<String> {
        withheld_on(std::env::consts::OS, settings)
    }

    fn shown(&self, s: &ShellSettings) -> Shown {
        const MB: u64 = 1 << 20;
        let names: Vec<String> = s.env.iter().map(|(name, _)| name.clone()).collect();
        Shown::default()
            .value("enabled", s.enabled)
            .value(
                "network",
                match s.network {
                    Network::None => "none",
                    Network::Full => "full",
                },
            )
            .value(
                "sandbox",
                match s.sandbox {
                    Requirement::Full => "on",
                    Requirement::Partial => "partial",
                    Requirement::Off => "off",
                },
            )
            .value("env", names)
            .value("blocked", s.blocked.clone())
            .number("max_processes", s.max_processes)
            .number("max_open_files", s.limits.open_files.unwrap_or(0))
            .megabytes("max_file_size_mb", s.limits.file_size.unwrap_or(0), MB)
            .number("max_cpu_secs", s.limits.cpu_secs.unwrap_or(0))
            .megabytes("max_memory_mb", s.limits.memory.unwrap_or(0), MB)
            .megabytes("max_tmp_mb", s.max_tmp, MB)
            .number("concurrent_per_user", s.concurrent_per_user as u64)
    }

    /// `true` in the sandbox: what this kernel gives a command (Landlock, namespaces, cgroups).
    fn probe_call(&self, _: &ShellSettings) -> Option<ProbeCall> {
        Some(ProbeCall {
            subject: "shell sandbox".into(),
            tool: "run_shell_command",
            args: serde_json::json!({"command": "true"}),
            line: Some("Sandbox: "),
        })
    }

    fn build(&self, settings: &ShellSettings, env: &FamilyEnv<'_>) -> Result<Family, BuildError> {
        let helper = Helper::current_exe().map_err(|e| {
            BuildError::new(
                family::FAMILY,
                format!("cannot find ringfence's own binary for the sandbox: {e}"),
            )
        })?;
        if settings.sandbox == Requirement::Off && settings.enabled && env.background {
            tracing::warn!(
                "[shell] sandbox = \"off\": commands run WITHOUT the kernel sandbox and can reach everything ringfence can"
            );
        }
        let mut cfg = ShellConfig::new(helper);
        cfg.network = settings.network;
        cfg.sandbox = settings.sandbox;
        cfg.env = settings.env.clone();
        cfg.refused = settings.blocked.clone();
        cfg.limits = settings.limits;
        cfg.max_processes = settings.max_processes;
        cfg.concurrent_per_user = settings.concurrent_per_user;
        cfg.max_tmp = settings.max_tmp;
        cfg.protected = vec![env.data_dir.to_owned()];
        cfg.private = env.private.to_vec();
        if settings.enabled
            && settings.sandbox != Requirement::Off
            && env.background
            && let Some(message) =
                family::private_paths_granted(&cfg.private, &ringfence_sandbox::system_read_paths())
        {
            tracing::error!("run_shell_command will refuse every command: {message}");
        }
        cfg.unwritable.push((
            cfg.helper.program.clone(),
            "the sandbox helper executable".to_owned(),
        ));
        if let Ok(exe) = std::env::current_exe() {
            cfg.unwritable
                .push((exe, "the ringfence executable".to_owned()));
        }
        if let Some(file) = env.config_file {
            cfg.unwritable
                .push((file.to_owned(), "ringfence's configuration file".to_owned()));
        }
        // One count of running commands per server: the sub-agent's shell (built again by the
        // delegate plug) takes its slots from the same users' counts.
        let running = env.shared.get_or_init(family::Running::default);
        Ok(family::family_with(cfg, running))
    }
}

/// Why `run_shell_command` is not offered on `os` under `settings`: off on every platform
/// without a sandbox this release has tested (turned on or not, whatever `sandbox` says),
/// else off until an operator turns it on.
fn withheld_on(os: &str, settings: &ShellSettings) -> Option<String> {
    if let Some(why) = ringfence_sandbox::unsupported(os) {
        return Some(format!("shell commands are off: {why}"));
    }
    (!settings.enabled).then(|| {
        format!(
            "shell commands are off: set [shell] enabled = true in the configuration file or {}=true to offer run_shell_command",
            config::RINGFENCE_SHELL_ENABLED
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str) -> ShellSettings {
        let dir = tempfile::tempdir().unwrap();
        ringfence_core::plug::resolve_text(&ShellPlug, toml, &[], dir.path()).unwrap()
    }

    #[test]
    fn off_linux_the_shell_is_withheld_even_turned_on_and_with_the_sandbox_off() {
        let on = settings("[shell]\nenabled = true\n");
        let unconfined = settings("[shell]\nenabled = true\nsandbox = \"off\"\n");
        let off = settings("[shell]\nenabled = false\n");
        for os in ["macos", "windows"] {
            for s in [&on, &unconfined, &off] {
                let why = withheld_on(os, s).expect("withheld off Linux");
                assert!(
                    why.starts_with("shell commands are off: commands cannot run on"),
                    "{why}"
                );
                assert!(
                    why.contains("sandbox = \"off\" would run commands"),
                    "{why}"
                );
            }
        }
        // On Linux: offered once turned on, with the sandbox on or off.
        assert_eq!(withheld_on("linux", &on), None);
        assert_eq!(withheld_on("linux", &unconfined), None);
        let why = withheld_on("linux", &off).unwrap();
        assert!(why.contains("[shell] enabled = true"), "{why}");
    }
}
