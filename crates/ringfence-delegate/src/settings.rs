//! `[delegate]`: whether `delegate_task` is offered and how far a task may go — the table as
//! written, then resolved. `RINGFENCE_DELEGATE_ENABLED` overrides `enabled`.

use crate::DelegateLimits;
use serde::Deserialize;

use ringfence_core::plug::{SectionInput, SettingsError};

/// The family's table in the configuration file.
pub const SECTION: &str = "delegate";

/// The family's part of the personal configuration `ringfence init` writes: every line a
/// comment, `# ` before a setting (remove it to use the setting), `## ` before prose.
pub const SAMPLE: &str = r#"## Delegation: delegate_task hands a task to a sub-agent working with the file tools and
## the shell. Needs [shell] enabled and a model in [llm].
# [delegate]
# enabled = true                   # RINGFENCE_DELEGATE_ENABLED=true
# max_turns = 30                   # model turns per task"#;
/// `true` turns delegation on (over `[delegate] enabled`).
pub const RINGFENCE_DELEGATE_ENABLED: &str = "RINGFENCE_DELEGATE_ENABLED";
/// The variables this family reads.
pub const ENV_VARS: &[&str] = &[RINGFENCE_DELEGATE_ENABLED];
/// Seed 003's switch for the same, honoured as an alias (`RINGFENCE_DELEGATE_ENABLED` wins).
pub const IRIS_SUBAGENT_ENABLED: &str = "IRIS_SUBAGENT_ENABLED";

/// `[delegate]`, as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct DelegateTable {
    /// Offer delegate_task (default false; needs the shell on and [llm]).
    enabled: Option<bool>,
    /// Model turns per task (default 30).
    max_turns: Option<u32>,
    /// Tokens the model may write per response (default 4096).
    max_tokens: Option<u32>,
    /// Tokens read and written per task (default 200000).
    token_budget: Option<u64>,
}

/// The resolved `[delegate]` settings.
#[derive(Debug, Clone)]
pub struct DelegateSettings {
    pub enabled: bool,
    pub limits: DelegateLimits,
}

impl DelegateSettings {
    pub fn resolve(input: &SectionInput<'_>) -> Result<DelegateSettings, SettingsError> {
        let t: DelegateTable = input.table(SECTION)?;
        let key = |k: &str| format!("{SECTION}.{k}");
        let enabled = input
            .first_flag(&[RINGFENCE_DELEGATE_ENABLED, IRIS_SUBAGENT_ENABLED])?
            .unwrap_or(t.enabled.unwrap_or(false));
        let d = DelegateLimits::default();
        let in_range = |name: &str, v: Option<u64>, default: u64, max: u64| match v {
            None => Ok(default),
            Some(n) if (1..=max).contains(&n) => Ok(n),
            Some(n) => Err(SettingsError::invalid(
                key(name),
                format!("{n} is out of range: 1 to {max}"),
            )),
        };
        let limits = DelegateLimits {
            max_turns: in_range(
                "max_turns",
                t.max_turns.map(u64::from),
                d.max_turns.into(),
                1000,
            )? as u32,
            max_tokens: in_range(
                "max_tokens",
                t.max_tokens.map(u64::from),
                d.max_tokens.into(),
                1_000_000,
            )? as u32,
            token_budget: in_range("token_budget", t.token_budget, d.token_budget, 1 << 40)?,
        };
        Ok(DelegateSettings { enabled, limits })
    }
}
