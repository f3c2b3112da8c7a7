//! Which tools are offered: a preset or an explicit list as the base (the highest layer
//! that sets either decides; one layer setting both is an error), then additions, then
//! removals — the [`Selection`] the catalogue resolves.

use ringfence_core::Selection;
use ringfence_core::family::FULL;

use super::raw::ToolsConfig;
use super::{ConfigError, Env, Overrides, list};
use crate::env_vars;

pub(super) fn resolve(
    over: &Overrides,
    env: &dyn Env,
    file: Option<ToolsConfig>,
    iris_files_off: bool,
) -> Result<Selection, ConfigError> {
    let file = file.unwrap_or_default();
    let env_enable = env
        .get(env_vars::RINGFENCE_TOOLS)
        .filter(|s| !s.trim().is_empty())
        .map(|v| list(&v));
    let env_preset = env
        .get(env_vars::RINGFENCE_PRESET)
        .filter(|s| !s.trim().is_empty());
    let layers = [
        (
            "command line (--preset, --tools)",
            over.preset.clone(),
            (!over.enable.is_empty()).then(|| over.enable.clone()),
        ),
        (
            "environment (RINGFENCE_PRESET, RINGFENCE_TOOLS)",
            env_preset,
            env_enable,
        ),
        (
            "config file (tools.preset, tools.enable)",
            file.preset.clone(),
            file.enable.clone(),
        ),
    ];
    let mut preset = None;
    let mut enable = None;
    for (layer, p, e) in layers {
        match (p, e) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    "tools",
                    format!(
                        "the {layer} sets both a preset and a tool list; use one of them (add tools to a preset with tools.add)"
                    ),
                ));
            }
            (Some(p), None) => {
                let name = p.trim();
                crate::families::catalogue()
                    .preset(name)
                    .map_err(ConfigError::Preset)?;
                preset = (name != FULL).then(|| name.to_owned());
                break;
            }
            (None, Some(e)) => {
                if e.is_empty() {
                    return Err(ConfigError::invalid(
                        "tools.enable",
                        "the list is empty; no tool would be offered",
                    ));
                }
                enable = Some(e);
                break;
            }
            (None, None) => {}
        }
    }
    let mut add = file.add.unwrap_or_default();
    if let Some(v) = env.get(env_vars::RINGFENCE_ADD_TOOLS) {
        add.extend(list(&v));
    }
    add.extend(over.add.iter().cloned());
    let mut disable = file.disable.unwrap_or_default();
    if let Some(v) = env.get(env_vars::RINGFENCE_DISABLE_TOOLS) {
        disable.extend(list(&v));
    }
    disable.extend(over.disable.iter().cloned());
    // Seed 000's switch: an explicit false turns the file tools off, over any selection.
    if iris_files_off {
        disable.push("files".into());
    }
    Ok(Selection {
        preset,
        enable,
        add,
        disable,
    })
}

/// Whether seed 000's `IRIS_FILESYSTEM_ENABLED` is an explicit false (true changes nothing:
/// the file tools are on unless the selection leaves them out).
pub(super) fn iris_files_off(env: &dyn Env) -> Result<bool, ConfigError> {
    let Some(v) = env
        .get(env_vars::IRIS_FILESYSTEM_ENABLED)
        .filter(|s| !s.trim().is_empty())
    else {
        return Ok(false);
    };
    match v.trim() {
        "true" | "1" | "yes" => Ok(false),
        "false" | "0" | "no" => Ok(true),
        other => Err(ConfigError::invalid(
            env_vars::IRIS_FILESYSTEM_ENABLED,
            format!("`{other}` is not true or false"),
        )),
    }
}
