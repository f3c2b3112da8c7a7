//! What a server says when it starts (at INFO, on stderr): where its configuration came from,
//! where it keeps its data, what the tools may reach, and which families are on — each off
//! one with why, each on one with what it found about its setup.

use ringfence_core::plug::Outcome;
use ringfence_fs::Access;

use crate::app::App;
use crate::config::Config;
use crate::families::FAMILIES;

pub(super) fn log(config: &Config, app: &App) {
    let file = config
        .config_file
        .as_ref()
        .map(|f| f.display().to_string())
        .unwrap_or_else(|| "none (embedded defaults; `ringfence init` writes one)".into());
    tracing::info!(config = %file, data_dir = %config.data_dir.display(), "configuration");
    if config.roots.is_empty() {
        tracing::info!(
            root = %config.data_dir.join("workspace").display(),
            access = "read-write",
            "root (the default workspace: name directories as arguments of `serve` or as roots in the configuration)"
        );
    }
    for root in &config.roots {
        let access = match root.access {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        };
        tracing::info!(root = %root.path.display(), access, "root");
    }
    for plug in FAMILIES {
        let info = plug.info();
        let offered: Vec<&str> = info
            .tools
            .iter()
            .copied()
            .filter(|t| app.toolbox.get(t).is_some())
            .collect();
        if offered.is_empty() {
            let why = app
                .withheld
                .iter()
                .find(|(family, _)| *family == info.name)
                .map(|(_, why)| why.as_str())
                .unwrap_or("the tool selection leaves its tools out");
            tracing::info!(family = info.name, why = %why, "family off");
            continue;
        }
        tracing::info!(family = info.name, tools = offered.len(), "family on");
        for check in plug.checks(&config.families, &config.data_dir) {
            let fix = check.fix.as_deref().unwrap_or("");
            match check.outcome {
                Outcome::Problem => {
                    tracing::warn!(
                        family = info.name,
                        fix,
                        "{}: {}",
                        check.subject,
                        check.detail
                    )
                }
                Outcome::Ok | Outcome::Note => {
                    tracing::info!(
                        family = info.name,
                        fix,
                        "{}: {}",
                        check.subject,
                        check.detail
                    )
                }
            }
        }
    }
}
