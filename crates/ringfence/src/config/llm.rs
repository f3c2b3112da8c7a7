//! `[llm]`: the language model ringfence's own features talk to (`delegate_task` now, later
//! ones too). Absent table: no model (`Config::llm` is `None`), and what needs one is withheld.

use std::time::Duration;

use ringfence_llm::{LlmSettings, LlmSource, Provider, ProviderConfig};

use super::ConfigError;
use super::raw::LlmTable;

/// Resolves `[llm]`; `None` when the file has no such table.
pub fn resolve(table: Option<&LlmTable>) -> Result<Option<LlmSettings>, ConfigError> {
    let Some(t) = table else {
        return Ok(None);
    };
    let nonempty = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
    };
    let provider = match nonempty(&t.provider).as_deref() {
        Some("openai") => Some(Provider::OpenAi),
        Some("anthropic") => Some(Provider::Anthropic),
        Some("sampling") => None,
        Some(other) => {
            return Err(ConfigError::invalid(
                "llm.provider",
                format!("`{other}` is not \"openai\", \"anthropic\" or \"sampling\""),
            ));
        }
        None => {
            return Err(ConfigError::invalid(
                "llm.provider",
                "missing: set provider = \"openai\" (any OpenAI-compatible endpoint), \"anthropic\" or \"sampling\" (the MCP client's model)",
            ));
        }
    };
    let timeout = match t.timeout_secs {
        None => None,
        Some(n) if (1..=3600).contains(&n) => Some(Duration::from_secs(n)),
        Some(n) => {
            return Err(ConfigError::invalid(
                "llm.timeout_secs",
                format!("{n} is out of range: 1 to 3600"),
            ));
        }
    };
    let model = nonempty(&t.model);
    let source = match provider {
        None => {
            for (key, v) in [("base_url", &t.base_url), ("api_key_env", &t.api_key_env)] {
                if v.is_some() {
                    return Err(ConfigError::invalid(
                        format!("llm.{key}"),
                        "does not apply to provider = \"sampling\" (the MCP client's own model is used)",
                    ));
                }
            }
            LlmSource::Sampling { model }
        }
        Some(provider) => {
            let Some(model) = model else {
                return Err(ConfigError::invalid(
                    "llm.model",
                    format!(
                        "missing: provider = \"{}\" needs the model's name (model = \"qwen3:8b\", \"gpt-4.1-mini\", \"claude-sonnet-4-5\")",
                        if provider == Provider::OpenAi {
                            "openai"
                        } else {
                            "anthropic"
                        }
                    ),
                ));
            };
            let base_url = nonempty(&t.base_url);
            if let Some(url) = &base_url
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(ConfigError::invalid(
                    "llm.base_url",
                    format!("`{url}` is not an http:// or https:// URL"),
                ));
            }
            let api_key_env = nonempty(&t.api_key_env);
            if let Some(var) = &api_key_env
                && !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                return Err(ConfigError::invalid(
                    "llm.api_key_env",
                    format!(
                        "`{var}` is not a variable name (the key itself never goes in the file)"
                    ),
                ));
            }
            LlmSource::Api(ProviderConfig {
                provider,
                base_url,
                model,
                api_key_env,
            })
        }
    };
    Ok(Some(LlmSettings { source, timeout }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::tests::load_file;

    #[test]
    fn no_table_no_model() {
        assert_eq!(load_file("log = \"info\"\n", &[]).unwrap().llm, None);
    }

    #[test]
    fn an_openai_compatible_endpoint() {
        let c = load_file(
            "[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"qwen3:8b\"\napi_key_env = \"MY_KEY\"\ntimeout_secs = 30\n",
            &[],
        )
        .unwrap();
        let llm = c.llm.unwrap();
        assert_eq!(llm.timeout, Some(Duration::from_secs(30)));
        assert_eq!(llm.provider_name(), "openai");
        let LlmSource::Api(p) = llm.source else {
            panic!("not an API")
        };
        assert_eq!(p.provider, Provider::OpenAi);
        assert_eq!(p.model, "qwen3:8b");
        assert_eq!(p.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
        assert_eq!(p.key_var(), "MY_KEY");
    }

    #[test]
    fn anthropic_defaults_its_key_variable_and_sampling_needs_no_model() {
        let c = load_file(
            "[llm]\nprovider = \"anthropic\"\nmodel = \"claude-x\"\n",
            &[],
        )
        .unwrap();
        let LlmSource::Api(p) = c.llm.unwrap().source else {
            panic!("not an API")
        };
        assert_eq!(p.key_var(), "ANTHROPIC_API_KEY");
        assert_eq!(p.base_url, None);
        let c = load_file("[llm]\nprovider = \"sampling\"\n", &[]).unwrap();
        assert_eq!(c.llm.unwrap().source, LlmSource::Sampling { model: None });
    }

    #[test]
    fn mistakes_name_the_key() {
        for (toml, needle) in [
            (
                "[llm]\nprovider = \"gemini\"\nmodel = \"m\"\n",
                "llm.provider: `gemini` is not",
            ),
            ("[llm]\nmodel = \"m\"\n", "llm.provider: missing"),
            ("[llm]\nprovider = \"openai\"\n", "llm.model: missing"),
            (
                "[llm]\nprovider = \"anthropic\"\nmodel = \" \"\n",
                "llm.model: missing",
            ),
            (
                "[llm]\nprovider = \"openai\"\nmodel = \"m\"\nbase_url = \"ftp://x\"\n",
                "llm.base_url",
            ),
            (
                "[llm]\nprovider = \"openai\"\nmodel = \"m\"\ntimeout_secs = 0\n",
                "llm.timeout_secs",
            ),
            (
                "[llm]\nprovider = \"openai\"\nmodel = \"m\"\napi_key_env = \"sk-123 456\"\n",
                "llm.api_key_env",
            ),
            (
                "[llm]\nprovider = \"sampling\"\nbase_url = \"http://x\"\n",
                "llm.base_url",
            ),
            (
                "[llm]\nprovider = \"openai\"\nmodel = \"m\"\nkey = \"x\"\n",
                "unknown key `key`",
            ),
        ] {
            let err = load_file(toml, &[]).unwrap_err().to_string();
            assert!(err.contains(needle), "{toml}: {err}");
        }
    }
}
