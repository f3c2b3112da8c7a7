//! OpenAI's chat completions (`POST {base_url}/chat/completions`), as OpenAI serves it and
//! as local servers (Ollama, vLLM, llama.cpp) copy it.
//!
//! The format's particulars: the system prompt is the first message; tools are `function`
//! tools whose `parameters` is the schema; a tool call's `arguments` is a JSON object
//! *written as a string*, which models sometimes get wrong (an unreadable one becomes an
//! error result the loop sends back); and each tool result is a message of its own, role
//! `tool`, linked to its call by `tool_call_id`.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::http::{Auth, Base, Endpoint};
use crate::{
    Block, BoxFuture, ChatModel, ChatRequest, ChatResponse, LlmError, Provider, ProviderConfig,
    RetryPolicy, Role, StopReason, Usage,
};

/// A model behind an OpenAI-compatible chat-completions endpoint.
#[derive(Clone)]
pub struct OpenAiCompatible {
    endpoint: Endpoint,
    model: String,
}

impl std::fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("model", &self.model)
            .field("endpoint", &self.endpoint)
            .finish()
    }
}

impl OpenAiCompatible {
    /// The model `cfg` names (its `provider` is not looked at), the key read through
    /// `env_lookup`. A server on loopback (Ollama) may go without a key; any other needs
    /// one ([`LlmError::NoKey`]).
    pub fn new(
        cfg: &ProviderConfig,
        env_lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<OpenAiCompatible, LlmError> {
        let base = Base::parse(
            cfg.base_url
                .as_deref()
                .unwrap_or(Provider::OpenAi.default_base_url()),
        )?;
        let (key, var) = crate::key_for(cfg, env_lookup);
        if key.is_none() && !base.loopback {
            return Err(LlmError::NoKey {
                var,
                endpoint: base.label,
            });
        }
        let endpoint = Endpoint::new(
            format!("{}/chat/completions", base.url),
            base.label,
            key,
            var,
            Auth::Bearer,
        )?;
        Ok(OpenAiCompatible {
            endpoint,
            model: cfg.model.clone(),
        })
    }

    /// The same model with each request given up after `timeout` (default 120 s).
    pub fn with_timeout(mut self, timeout: Duration) -> OpenAiCompatible {
        self.endpoint.timeout = timeout;
        self
    }

    /// The same model with rate limits retried as `retry` says.
    pub fn with_retry(mut self, retry: RetryPolicy) -> OpenAiCompatible {
        self.endpoint.api.retry = retry;
        self
    }

    async fn send(self, req: ChatRequest) -> Result<ChatResponse, LlmError> {
        let body = self
            .endpoint
            .post(&request_body(&self.model, &req), &[])
            .await?;
        let completion: Completion = self.endpoint.parse(&body)?;
        let Some(choice) = completion.choices.into_iter().next() else {
            return Err(self.endpoint.bad("it holds no choices", &body));
        };
        let mut content = Vec::new();
        match choice.message.content {
            Some(Value::String(text)) if !text.is_empty() => content.push(Block::Text(text)),
            // Some servers answer with content parts, as requests may send them.
            Some(Value::Array(parts)) => content.extend(
                parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .filter(|t| !t.is_empty())
                    .map(|t| Block::Text(t.to_owned())),
            ),
            _ => {}
        }
        let calls = choice.message.tool_calls.unwrap_or_default();
        let called = !calls.is_empty();
        for (i, call) in calls.into_iter().enumerate() {
            // A server that leaves out the id still needs the result linked to the call.
            let id = call
                .id
                .filter(|id| !id.is_empty())
                .unwrap_or_else(|| format!("call_{i}"));
            crate::push_tool_call(
                &mut content,
                id,
                call.function.name,
                call.function.arguments,
            );
        }
        let stop = match choice.finish_reason.as_deref() {
            Some("length") => StopReason::MaxTokens,
            // Some servers (older Ollama) say "stop" when the model called tools.
            _ if called => StopReason::ToolUse,
            None | Some("stop") => StopReason::EndTurn,
            Some("tool_calls" | "function_call") => StopReason::ToolUse,
            Some(other) => StopReason::Other(other.to_owned()),
        };
        let usage = completion.usage.unwrap_or_default();
        Ok(ChatResponse {
            content,
            stop,
            usage: Usage {
                input_tokens: usage.prompt_tokens,
                output_tokens: usage.completion_tokens,
            },
        })
    }
}

impl ChatModel for OpenAiCompatible {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'static, Result<ChatResponse, LlmError>> {
        Box::pin(self.clone().send(req))
    }

    fn describe(&self) -> String {
        format!(
            "openai-compatible {} at {}",
            self.model, self.endpoint.label
        )
    }
}

/// The request `req` is in this format. `max_tokens` is the name every compatible server
/// reads (OpenAI itself still accepts it for its chat models).
fn request_body(model: &str, req: &ChatRequest) -> Value {
    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for message in &req.messages {
        let mut texts = Vec::new();
        let mut calls = Vec::new();
        for block in &message.content {
            match block {
                Block::Text(t) => texts.push(t.as_str()),
                Block::ToolUse { id, name, input } if message.role == Role::Assistant => {
                    // Unreadable arguments are kept as a string: sent back as they came.
                    let arguments = match input {
                        Value::String(raw) => raw.clone(),
                        other => other.to_string(),
                    };
                    calls.push(json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }));
                }
                // Results go first, each a message of its own, right after the call's turn.
                Block::ToolResult {
                    id,
                    content,
                    is_error,
                } if message.role == Role::User => {
                    let content = if *is_error && !content.starts_with("error") {
                        format!("error: {content}")
                    } else {
                        content.clone()
                    };
                    messages.push(json!({"role": "tool", "tool_call_id": id, "content": content}));
                }
                // A user's tool call or an assistant's result has no place in this format.
                _ => {}
            }
        }
        match message.role {
            Role::User if !texts.is_empty() => {
                messages.push(json!({"role": "user", "content": texts.join("\n\n")}));
            }
            Role::User => {}
            Role::Assistant if texts.is_empty() && calls.is_empty() => {}
            Role::Assistant => {
                let mut m = json!({
                    "role": "assistant",
                    "content": if texts.is_empty() { Value::Null } else { Value::from(texts.join("\n\n")) },
                });
                if !calls.is_empty() {
                    m["tool_calls"] = Value::Array(calls);
                }
                messages.push(m);
            }
        }
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "max_tokens": req.max_tokens,
        "stream": false,
    });
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                })
            })
            .collect();
    }
    body
}

/// A chat completion, as much of it as is read.
#[derive(Deserialize)]
struct Completion {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<CompletionUsage>,
}

#[derive(Deserialize)]
struct Choice {
    message: AssistantMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct AssistantMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCall>>,
}

#[derive(Deserialize)]
struct ToolCall {
    #[serde(default)]
    id: Option<String>,
    function: FunctionCall,
}

#[derive(Deserialize)]
struct FunctionCall {
    name: String,
    /// A string holding JSON, as documented; some servers send the object itself.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Deserialize, Default)]
struct CompletionUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}
