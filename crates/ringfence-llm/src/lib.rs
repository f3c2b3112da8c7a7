//! ringfence's language-model client: what a tool-calling sub-agent loop (the coming
//! `delegate_task` tool) uses to talk to a model.
//!
//! A conversation is held in provider-neutral types ([`Message`], [`Block`], [`ToolSpec`]);
//! a [`ChatModel`] turns one [`ChatRequest`] into one [`ChatResponse`] — the model's text
//! and tool calls, why it stopped, and the tokens it used. Two wire formats are spoken:
//!
//! - [`OpenAiCompatible`]: `POST {base_url}/chat/completions`, the format of OpenAI and of
//!   the local servers that copy it (Ollama, vLLM, llama.cpp). A local server on loopback
//!   may go without a key.
//! - [`Anthropic`]: `POST {base_url}/v1/messages`, Anthropic's Messages API, which always
//!   needs a key.
//!
//! [`build`] makes either from a [`ProviderConfig`], reading the key from the environment
//! variable the configuration names. Endpoints are trusted as an operator configured them,
//! so requests go through `ringfence_net::client` (not the SSRF guard). What every call
//! shares lives in one place: a per-request timeout (120 s by default), rate limits (HTTP
//! 429) retried at most twice honouring `Retry-After` up to 10 s, refused keys reported
//! with the variable that holds them, and the key kept out of every error message and
//! `Debug` output — it is sent only in a header and scrubbed from any response text quoted.

mod anthropic;
mod error;
mod http;
mod openai;
mod settings;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub use anthropic::Anthropic;
pub use error::LlmError;
pub use http::RetryPolicy;
pub use openai::OpenAiCompatible;
pub use settings::{LlmSettings, LlmSource, SAMPLE as LLM_SAMPLE, api_model};

/// A boxed future that can be sent across threads: what [`ChatModel::chat`] returns, so
/// the trait stays object-safe without an async-trait dependency.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The caller: the task, and the results of the tools the model called.
    User,
    /// The model: its text and its tool calls.
    Assistant,
}

/// One piece of a message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Plain text.
    Text(String),
    /// The model asks for a tool to be run. `input` is a JSON object matching the tool's
    /// schema — except when the model wrote arguments that are not a JSON object: `input`
    /// is then the raw text as a JSON string, and the same response already holds the
    /// [`Block::ToolResult`] error answering it (see [`ChatResponse::tool_uses`]).
    ToolUse {
        /// The call's id, which its result must quote.
        id: String,
        /// The tool's name.
        name: String,
        /// The tool's arguments.
        input: serde_json::Value,
    },
    /// The outcome of a tool call, sent back in a [`Role::User`] message.
    ToolResult {
        /// The id of the [`Block::ToolUse`] this answers.
        id: String,
        /// What the tool returned, or what went wrong.
        content: String,
        /// Whether the call failed (the model is told so).
        is_error: bool,
    },
}

impl Block {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Block {
        Block::Text(text.into())
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// Who said it.
    pub role: Role,
    /// What was said, in order.
    pub content: Vec<Block>,
}

impl Message {
    /// A user message holding only `text`.
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: Role::User,
            content: vec![Block::text(text)],
        }
    }
}

/// A tool the model may call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does and when to use it, for the model.
    pub description: String,
    /// The JSON Schema (an object schema) of its arguments.
    pub input_schema: serde_json::Value,
}

/// One request to the model: the whole conversation so far.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The system prompt (left out of the request when empty).
    pub system: String,
    /// The conversation, oldest first, starting with a user message.
    pub messages: Vec<Message>,
    /// The tools the model may call (none: a plain chat).
    pub tools: Vec<ToolSpec>,
    /// The most tokens the model may write in its answer.
    pub max_tokens: u32,
}

/// Why the model stopped writing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// It finished its turn.
    EndTurn,
    /// It wants the tools it called to be run.
    ToolUse,
    /// It ran into [`ChatRequest::max_tokens`].
    MaxTokens,
    /// Anything else, as the provider named it (`stop_sequence`, `content_filter`, …).
    Other(String),
}

/// Tokens a request used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Tokens read (for Anthropic, cached tokens included).
    pub input_tokens: u64,
    /// Tokens written.
    pub output_tokens: u64,
}

/// The model's answer to one [`ChatRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// Text and tool calls, in the model's order. A tool call whose arguments could not be
    /// read is followed by the [`Block::ToolResult`] error that answers it.
    pub content: Vec<Block>,
    /// Why the model stopped.
    pub stop: StopReason,
    /// The tokens used.
    pub usage: Usage,
}

impl ChatResponse {
    /// The text blocks, joined by blank lines.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|b| match b {
                Block::Text(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n\n")
    }

    /// The tool calls to run: `(id, name, input)` of every [`Block::ToolUse`] the response
    /// does not already answer itself.
    pub fn tool_uses(&self) -> Vec<(&str, &str, &serde_json::Value)> {
        self.content
            .iter()
            .filter_map(|b| match b {
                Block::ToolUse { id, name, input } if !self.answers(id) => {
                    Some((id.as_str(), name.as_str(), input))
                }
                _ => None,
            })
            .collect()
    }

    /// The results the response already holds (the errors answering tool calls whose
    /// arguments could not be read): send them back with the results of [`tool_uses`],
    /// in the next user message.
    ///
    /// [`tool_uses`]: ChatResponse::tool_uses
    pub fn prepared_results(&self) -> Vec<Block> {
        self.content
            .iter()
            .filter(|b| matches!(b, Block::ToolResult { .. }))
            .cloned()
            .collect()
    }

    /// The assistant message to append to the conversation: the response's text and tool
    /// calls, without its prepared results (those belong in the next user message).
    pub fn assistant_message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self
                .content
                .iter()
                .filter(|b| !matches!(b, Block::ToolResult { .. }))
                .cloned()
                .collect(),
        }
    }

    fn answers(&self, call: &str) -> bool {
        self.content
            .iter()
            .any(|b| matches!(b, Block::ToolResult { id, .. } if id == call))
    }
}

/// A language model that chats with tools.
pub trait ChatModel: Send + Sync {
    /// Sends one request and waits for the whole answer. The future owns what it needs, so
    /// it may outlive `self`'s borrow (and be spawned).
    fn chat(&self, req: ChatRequest) -> BoxFuture<'static, Result<ChatResponse, LlmError>>;

    /// The model and where it is, for logs and messages — never the key
    /// (`openai-compatible qwen3:8b at http://127.0.0.1:11434/v1`).
    fn describe(&self) -> String;
}

/// Which wire format a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI's chat completions, as OpenAI and local servers (Ollama, vLLM) speak it.
    OpenAi,
    /// Anthropic's Messages API.
    Anthropic,
}

impl Provider {
    /// Where requests go when no base URL is configured.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
        }
    }

    /// The environment variable the key is read from when none is configured.
    pub fn default_key_var(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_API_KEY",
            Provider::Anthropic => "ANTHROPIC_API_KEY",
        }
    }
}

/// Which model to use and where: what an operator configures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    /// The wire format.
    pub provider: Provider,
    /// The API's base URL (default: [`Provider::default_base_url`]). For an OpenAI-compatible
    /// server it ends before `/chat/completions` (`http://127.0.0.1:11434/v1` for Ollama);
    /// for Anthropic, before `/v1/messages`.
    pub base_url: Option<String>,
    /// The model's name as the provider knows it (`qwen3:8b`, `claude-sonnet-4-5`).
    pub model: String,
    /// The environment variable holding the key (default: [`Provider::default_key_var`]).
    /// The key itself is never part of the configuration.
    pub api_key_env: Option<String>,
}

impl ProviderConfig {
    /// The key's environment variable, configured or default.
    pub fn key_var(&self) -> String {
        self.api_key_env
            .clone()
            .unwrap_or_else(|| self.provider.default_key_var().to_owned())
    }
}

/// The model `cfg` describes, its key read through `env_lookup` (`std::env::var` in
/// production, a map in tests). An empty variable counts as unset. Fails with
/// [`LlmError::NoKey`] when the provider needs a key and the variable is unset — Anthropic
/// always does, an OpenAI-compatible server unless it is on loopback — and with
/// [`LlmError::Setup`] when the base URL is unusable.
pub fn build(
    cfg: &ProviderConfig,
    env_lookup: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn ChatModel>, LlmError> {
    Ok(match cfg.provider {
        Provider::OpenAi => Arc::new(OpenAiCompatible::new(cfg, env_lookup)?),
        Provider::Anthropic => Arc::new(Anthropic::new(cfg, env_lookup)?),
    })
}

/// The key `cfg` names, read through `env_lookup` (surrounding whitespace removed; empty
/// counts as unset), and the variable it was looked for in.
pub(crate) fn key_for(
    cfg: &ProviderConfig,
    env_lookup: impl Fn(&str) -> Option<String>,
) -> (Option<String>, String) {
    let var = cfg.key_var();
    let key = env_lookup(&var)
        .map(|k| k.trim().to_owned())
        .filter(|k| !k.is_empty());
    (key, var)
}

/// A tool call's arguments as the object the tool takes. `Err` holds the raw arguments (as
/// a JSON string, for [`Block::ToolUse::input`]) and the error result answering the call,
/// which tells the model what was wrong so it can call again.
pub(crate) fn tool_arguments(
    id: &str,
    name: &str,
    raw: Option<serde_json::Value>,
) -> Result<serde_json::Value, (serde_json::Value, Block)> {
    use serde_json::Value;
    let text = match raw {
        None | Some(Value::Null) => return Ok(Value::Object(Default::default())),
        Some(v @ Value::Object(_)) => return Ok(v),
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
    };
    // Some servers send "" for a call without arguments.
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let reason = match serde_json::from_str::<Value>(&text) {
        Ok(v @ Value::Object(_)) => return Ok(v),
        // Some models encode the object twice: a JSON string holding the object's JSON.
        Ok(Value::String(inner)) => match serde_json::from_str::<Value>(&inner) {
            Ok(v @ Value::Object(_)) => return Ok(v),
            _ => "a JSON string, not an object".to_owned(),
        },
        Ok(_) => "JSON, but not an object".to_owned(),
        Err(e) => format!("not valid JSON: {e}"),
    };
    let mut quote: String = text.chars().take(300).collect();
    if quote.len() < text.len() {
        quote.push('…');
    }
    let result = Block::ToolResult {
        id: id.to_owned(),
        content: format!(
            "error: the arguments of this call to `{name}` were {reason}: {quote}; the tool was not run — call it again with its arguments as one JSON object matching its schema"
        ),
        is_error: true,
    };
    Err((Value::String(text), result))
}

/// The content blocks of one tool call read from a response: the call, and when its
/// arguments could not be read, the error result answering it.
pub(crate) fn push_tool_call(
    content: &mut Vec<Block>,
    id: String,
    name: String,
    raw: Option<serde_json::Value>,
) {
    match tool_arguments(&id, &name, raw) {
        Ok(input) => content.push(Block::ToolUse { id, name, input }),
        Err((input, result)) => {
            tracing::debug!(tool = %name, "the model sent tool arguments that are not a JSON object");
            content.push(Block::ToolUse { id, name, input });
            content.push(result);
        }
    }
}
