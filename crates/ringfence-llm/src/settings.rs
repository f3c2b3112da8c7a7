//! `[llm]` as the binary resolved it: which model ringfence's own features talk to, and how
//! to reach it.

use std::sync::Arc;
use std::time::Duration;

use crate::{Anthropic, ChatModel, LlmError, OpenAiCompatible, Provider, ProviderConfig};

/// Where the model is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LlmSource {
    /// An HTTP API (OpenAI-compatible or Anthropic), reached by ringfence itself.
    Api(ProviderConfig),
    /// The connected MCP client's model, through `sampling/createMessage`. `model` is a
    /// hint passed to the client, if configured.
    Sampling { model: Option<String> },
}

/// The resolved `[llm]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LlmSettings {
    pub source: LlmSource,
    /// Per-request timeout (None: the client's default, 120 s).
    pub timeout: Option<Duration>,
}

impl LlmSettings {
    /// `provider = "..."` as written, for messages.
    pub fn provider_name(&self) -> &'static str {
        match &self.source {
            LlmSource::Api(c) if c.provider == Provider::OpenAi => "openai",
            LlmSource::Api(_) => "anthropic",
            LlmSource::Sampling { .. } => "sampling",
        }
    }

    /// The model of an HTTP API (`None` with `sampling`, which has no model of its own).
    pub fn api_model(&self) -> Option<Result<Arc<dyn ChatModel>, LlmError>> {
        match &self.source {
            LlmSource::Api(cfg) => Some(api_model(cfg, self.timeout)),
            LlmSource::Sampling { .. } => None,
        }
    }
}

/// The model of an HTTP API, its key read from the process environment.
pub fn api_model(
    cfg: &ProviderConfig,
    timeout: Option<Duration>,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    let lookup = |var: &str| std::env::var(var).ok();
    Ok(match (cfg.provider, timeout) {
        (Provider::OpenAi, Some(t)) => {
            Arc::new(OpenAiCompatible::new(cfg, lookup)?.with_timeout(t))
        }
        (Provider::Anthropic, Some(t)) => Arc::new(Anthropic::new(cfg, lookup)?.with_timeout(t)),
        (_, None) => crate::build(cfg, lookup)?,
    })
}

/// `[llm]` in the personal configuration `ringfence init` writes (see a family's `SAMPLE`).
pub const SAMPLE: &str = r#"## The language model ringfence's own features use (delegation, follow-up messages):
## "openai" (any compatible endpoint: OpenAI, Ollama, vLLM, llama.cpp), "anthropic", or
## "sampling" (the connected client's own model).
# [llm]
# provider = "openai"
# base_url = "http://127.0.0.1:11434/v1"   # default https://api.openai.com/v1
# model = "qwen3:8b"
# api_key_env = "OPENAI_API_KEY"           # the variable holding the key"#;
