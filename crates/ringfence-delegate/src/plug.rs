//! The delegate family's plug: `delegate_task`, withheld unless an operator turned it on
//! (`[delegate] enabled = true` or `RINGFENCE_DELEGATE_ENABLED=true`), turned the shell on,
//! and configured `[llm]`. The sub-agent's tools are the server's own files and shell tools,
//! reached through the runner of each call; the model is made on first use.

use std::sync::Arc;

use ringfence_core::plug::{
    BuildError, FamilyEnv, FamilyPlug, Offer, SectionInput, SettingsError, Shown,
};
use ringfence_core::{Family, FamilyInfo, ToolContext, ToolError, ToolErrorKind};
use ringfence_llm::{ChatModel, LlmSettings, LlmSource};

use crate::settings::{self as config, DelegateSettings};
use crate::{self as family, DelegateServices, LazyModel, ModelSource, SamplingSource};

/// The shell's tool, which the sub-agent needs (named, not imported: a family crate depends
/// on no other family; the binary's tests check the name).
pub const SHELL_TOOL: &str = "run_shell_command";

pub struct DelegatePlug;

impl FamilyPlug for DelegatePlug {
    type Settings = DelegateSettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);
    const SAMPLE: Option<&'static str> = Some(config::SAMPLE);
    const ENV_VARS: &'static [&'static str] = config::ENV_VARS;

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<DelegateSettings, SettingsError> {
        DelegateSettings::resolve(input)
    }

    fn shown(&self, s: &DelegateSettings) -> Shown {
        Shown::default()
            .value("enabled", s.enabled)
            .number("max_turns", u64::from(s.limits.max_turns))
            .number("max_tokens", u64::from(s.limits.max_tokens))
            .number("token_budget", s.limits.token_budget)
    }

    fn withheld(&self, settings: &DelegateSettings, offer: &Offer<'_>) -> Option<String> {
        withheld_on(std::env::consts::OS, settings, offer)
    }

    /// The sub-agent's tools are the server's own, reached through the runner of each call
    /// (only what the operator offers the assistant, and the same instances: one edit journal).
    fn build(
        &self,
        settings: &DelegateSettings,
        env: &FamilyEnv<'_>,
    ) -> Result<Family, BuildError> {
        if let Some(llm) = env.llm
            && env.background
            && settings.enabled
        {
            tracing::info!(
                provider = llm.provider_name(),
                "delegate_task: the sub-agent's model comes from [llm]"
            );
        }
        let model: Arc<dyn ModelSource> = match env.llm.cloned() {
            None => Arc::new(NoModel),
            Some(LlmSettings {
                source: LlmSource::Sampling { model },
                ..
            }) => Arc::new(SamplingSource { model_hint: model }),
            Some(LlmSettings {
                source: LlmSource::Api(cfg),
                timeout,
            }) => Arc::new(LazyModel::new(move || {
                ringfence_llm::api_model(&cfg, timeout)
            })),
        };
        Ok(family::family(DelegateServices {
            model,
            limits: settings.limits,
        }))
    }
}

/// Why `delegate_task` is not offered on `os`: off wherever the shell cannot run (its
/// sub-agent's commands run through it), else what its settings and the offer lack.
fn withheld_on(os: &str, settings: &DelegateSettings, offer: &Offer<'_>) -> Option<String> {
    if let Some(why) = ringfence_sandbox::unsupported(os) {
        return Some(format!(
            "task delegation is off: its sub-agent runs commands through run_shell_command, and {why}"
        ));
    }
    let mut missing = Vec::new();
    if !settings.enabled {
        missing.push(format!(
            "[delegate] enabled = true (or {}=true)",
            config::RINGFENCE_DELEGATE_ENABLED
        ));
    }
    if (offer.withheld)(SHELL_TOOL).is_some() {
        missing
            .push("the shell: [shell] enabled = true (or RINGFENCE_SHELL_ENABLED=true)".to_owned());
    }
    // The sub-agent gets the selected tools only: without the shell it could not run
    // the commands a task needs, and the seed asks for both.
    if let Some(selected) = offer.selected
        && selected.contains(&"delegate_task")
        && !selected.contains(&SHELL_TOOL)
    {
        missing.push(format!(
            "{} among the selected tools (the preset \"full\", or tools.add)",
            SHELL_TOOL
        ));
    }
    if offer.llm.is_none() {
        missing.push(
            "a model: an [llm] table with provider = \"openai\", \"anthropic\" or \"sampling\" (and model for the first two)"
                .to_owned(),
        );
    }
    (!missing.is_empty()).then(|| {
        format!(
            "task delegation is off: delegate_task needs {}",
            missing.join("; and ")
        )
    })
}

/// No `[llm]` table: the family is withheld, so this answers only if called anyway.
struct NoModel;

impl ModelSource for NoModel {
    fn model(&self, _: &ToolContext) -> Result<Arc<dyn ChatModel>, ToolError> {
        Err(ToolError::new(
            ToolErrorKind::Unavailable,
            "delegate_task: no language model is configured: add an [llm] table (provider, model) to the configuration file",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_file(toml: &str, env: &[(&str, &str)]) -> Result<DelegateSettings, SettingsError> {
        let dir = tempfile::tempdir().unwrap();
        ringfence_core::plug::resolve_text(&DelegatePlug, toml, env, dir.path())
    }

    #[test]
    fn the_section_is_resolved_and_checked() {
        let s = load_file(
            "[delegate]\nenabled = true\nmax_turns = 5\nmax_tokens = 1000\ntoken_budget = 9000\n",
            &[],
        )
        .unwrap();
        assert!(s.enabled);
        assert_eq!(s.limits.max_turns, 5);
        assert_eq!(s.limits.max_tokens, 1000);
        assert_eq!(s.limits.token_budget, 9000);
        let e = load_file("[delegate]\nmax_turns = 0\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("delegate.max_turns: 0 is out of range"), "{e}");
        let e = load_file("[delegate]\nenabled = true\nturns = 3\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown key `turns`"), "{e}");
        let e = load_file("", &[("RINGFENCE_DELEGATE_ENABLED", "maybe")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("RINGFENCE_DELEGATE_ENABLED"), "{e}");
    }

    #[test]
    fn off_linux_delegation_is_withheld_whatever_is_configured() {
        let on = load_file("[delegate]\nenabled = true\n", &[]).unwrap();
        let llm = LlmSettings {
            source: LlmSource::Sampling { model: None },
            timeout: None,
        };
        let shell_on = |_: &str| None;
        let offer = Offer {
            llm: Some(&llm),
            selected: None,
            withheld: &shell_on,
        };
        for os in ["macos", "windows"] {
            let why = withheld_on(os, &on, &offer).expect("withheld off Linux");
            assert!(why.starts_with("task delegation is off: its sub-agent runs commands through run_shell_command, and commands cannot run on"), "{why}");
            assert!(
                why.contains("sandbox = \"off\" would run commands"),
                "{why}"
            );
        }
        assert_eq!(withheld_on("linux", &on, &offer), None);
    }
}
