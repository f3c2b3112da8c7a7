//! Anthropic's Messages API (`POST {base_url}/v1/messages`).
//!
//! The format's particulars: the key goes in `x-api-key` beside `anthropic-version`; the
//! system prompt is a top-level field; tools carry their schema as `input_schema`; a tool
//! call is a `tool_use` content block whose `input` is already an object, and its result a
//! `tool_result` block (first in the next user message) quoting the call's id.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{Auth, Base, Endpoint};
use crate::{
    Block, BoxFuture, ChatModel, ChatRequest, ChatResponse, LlmError, Provider, ProviderConfig,
    RetryPolicy, Role, StopReason, Usage,
};

/// The API version every request names.
const VERSION: &str = "2023-06-01";

/// A model behind Anthropic's Messages API.
#[derive(Clone)]
pub struct Anthropic {
    endpoint: Endpoint,
    model: String,
}

impl std::fmt::Debug for Anthropic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anthropic")
            .field("model", &self.model)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl Anthropic {
    /// The model `cfg` names (its `provider` is not looked at), the key read through
    /// `env_lookup`; without a key, [`LlmError::NoKey`]. A base URL ending in `/v1` is
    /// accepted as well as one ending before it.
    pub fn new(
        cfg: &ProviderConfig,
        env_lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Anthropic, LlmError> {
        let base = Base::parse(
            cfg.base_url
                .as_deref()
                .unwrap_or(Provider::Anthropic.default_base_url()),
        )?;
        let (key, var) = crate::key_for(cfg, env_lookup);
        if key.is_none() {
            return Err(LlmError::NoKey {
                var,
                endpoint: base.label,
            });
        }
        let url = if base.url.ends_with("/v1") {
            format!("{}/messages", base.url)
        } else {
            format!("{}/v1/messages", base.url)
        };
        let endpoint = Endpoint::new(url, base.label, key, var, Auth::Header("x-api-key"))?;
        Ok(Anthropic {
            endpoint,
            model: cfg.model.clone(),
        })
    }

    /// The same model with each request given up after `timeout` (default 120 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Anthropic {
        self.endpoint.timeout = timeout;
        self
    }

    /// The same model with rate limits retried as `retry` says.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Anthropic {
        self.endpoint.api.retry = retry;
        self
    }

    async fn send(self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let body = self
            .endpoint
            .post(
                &request_body(&self.model, &req),
                &[("anthropic-version", VERSION)],
            )
            .await?;
        let answer: MessageResponse = self.endpoint.parse(&body)?;
        let mut content = Vec::new();
        for block in answer.content {
            match block.get("type").and_then(Value::as_str) {
                Some("text") => {
                    if let Some(text) = block.get("text").and_then(Value::as_str)
                        && !text.is_empty()
                    {
                        content.push(Block::Text(text.to_owned()));
                    }
                }
                Some("tool_use") => {
                    let (Some(id), Some(name)) = (
                        block.get("id").and_then(Value::as_str),
                        block.get("name").and_then(Value::as_str),
                    ) else {
                        return Err(self
                            .endpoint
                            .bad("a tool_use block without its id or name", &body));
                    };
                    crate::push_tool_call(
                        &mut content,
                        id.to_owned(),
                        name.to_owned(),
                        block.get("input").cloned(),
                    );
                }
                // Thinking and server-side tool blocks are not the loop's business.
                _ => {}
            }
        }
        let called = content.iter().any(|b| matches!(b, Block::ToolUse { .. }));
        let stop = match answer.stop_reason.as_deref() {
            Some("end_turn") => StopReason::EndTurn,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_owned()),
            None if called => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        let u = answer.usage;
        Ok(ChatResponse {
            content,
            stop,
            usage: Usage {
                input_tokens: u.input_tokens
                    + u.cache_creation_input_tokens.unwrap_or(0)
                    + u.cache_read_input_tokens.unwrap_or(0),
                output_tokens: u.output_tokens,
            },
        })
    }
}

impl ChatModel for Anthropic {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'static, Result<ChatResponse, LlmError>> {
        Box::pin(self.clone().send(req))
    }

    fn describe(&self) -> String {
        format!("anthropic {} at {}", self.model, self.endpoint.label)
    }
}

/// The request `req` is in this format.
fn request_body(model: &str, req: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    for message in &req.messages {
        // In a user message, tool results must come before anything else.
        let mut results = Vec::new();
        let mut rest = Vec::new();
        for block in &message.content {
            match block {
                // The API refuses empty text blocks.
                Block::Text(t) if t.is_empty() => {}
                Block::Text(t) => rest.push(json!({"type": "text", "text": t})),
                Block::ToolUse { id, name, input } if message.role == Role::Assistant => {
                    // An input that is not an object (unreadable arguments from another
                    // provider) would be refused; the call is kept with no arguments.
                    let input = if input.is_object() {
                        input.clone()
                    } else {
                        json!({})
                    };
                    rest.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
                }
                Block::ToolResult {
                    id,
                    content,
                    is_error,
                } if message.role == Role::User => {
                    let mut r =
                        json!({"type": "tool_result", "tool_use_id": id, "content": content});
                    if *is_error {
                        r["is_error"] = Value::Bool(true);
                    }
                    results.push(r);
                }
                // A user's tool call or an assistant's result has no place in this format.
                _ => {}
            }
        }
        results.append(&mut rest);
        if results.is_empty() {
            continue;
        }
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({"role": role, "content": results}));
    }
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_tokens,
        "messages": messages,
    });
    if !req.system.is_empty() {
        body["system"] = Value::from(req.system.as_str());
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name,
                    "description": t.description,
                    "input_schema": t.input_schema,
                })
            })
            .collect();
    }
    body
}

/// A Messages API answer, as much of it as is read.
#[derive(Deserialize)]
struct MessageResponse {
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    usage: MessageUsage,
}

#[derive(Deserialize)]
struct MessageUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}
