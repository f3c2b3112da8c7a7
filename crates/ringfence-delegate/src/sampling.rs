//! The MCP client's own model as a [`ChatModel`]: each request becomes a
//! `sampling/createMessage` through the session's [`ClientSampler`]. A client that takes
//! tools in sampling gets them; any other is asked to answer with one JSON object
//! `{"tool": name, "arguments": {...}}` per turn, which is parsed back into a tool call.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ringfence_llm::{
    Block, BoxFuture, ChatModel, ChatRequest, ChatResponse, LlmError, Message, Role, StopReason,
    Usage,
};
use serde_json::{Value, json};

use super::ModelSource;
use ringfence_core::error::{ToolError, ToolErrorKind};
use ringfence_core::session::{
    ClientSampler, SamplingContent, SamplingMessage, SamplingReply, SamplingRequest, SamplingRole,
    SamplingTool,
};
use ringfence_core::tool::ToolContext;

/// `[llm] provider = "sampling"`: the model of the client that made the call.
pub struct SamplingSource {
    /// A model name to suggest to the client.
    pub model_hint: Option<String>,
}

impl ModelSource for SamplingSource {
    fn model(&self, ctx: &ToolContext) -> Result<Arc<dyn ChatModel>, ToolError> {
        match &ctx.sampler {
            Some(sampler) => Ok(Arc::new(SamplingModel::new(
                sampler.clone(),
                self.model_hint.clone(),
            ))),
            None => Err(ToolError::new(
                ToolErrorKind::Unavailable,
                "delegate_task: [llm] provider = \"sampling\" uses the MCP client's own model, and this client does not offer it: the client must declare the `sampling` capability and answer sampling/createMessage. Use a client that supports sampling, or configure provider = \"openai\" or \"anthropic\" in [llm]",
            )),
        }
    }
}

/// A [`ChatModel`] over the client's sampling.
pub struct SamplingModel {
    sampler: Arc<dyn ClientSampler>,
    model_hint: Option<String>,
    last_model: Arc<Mutex<Option<String>>>,
    calls: Arc<AtomicU64>,
}

impl SamplingModel {
    pub fn new(sampler: Arc<dyn ClientSampler>, model_hint: Option<String>) -> SamplingModel {
        SamplingModel {
            sampler,
            model_hint,
            last_model: Arc::new(Mutex::new(None)),
            calls: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl ChatModel for SamplingModel {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'static, Result<ChatResponse, LlmError>> {
        let with_tools = self.sampler.supports_tools();
        let estimate_in = (req.system.len()
            + req
                .messages
                .iter()
                .flat_map(|m| &m.content)
                .map(block_len)
                .sum::<usize>()) as u64
            / 4;
        let request = if with_tools {
            SamplingRequest {
                system: req.system.clone(),
                messages: req.messages.iter().map(native_message).collect(),
                tools: req
                    .tools
                    .iter()
                    .map(|t| SamplingTool {
                        name: t.name.clone(),
                        description: t.description.clone(),
                        input_schema: t.input_schema.as_object().cloned().unwrap_or_default(),
                    })
                    .collect(),
                max_tokens: req.max_tokens,
                model_hint: self.model_hint.clone(),
            }
        } else {
            SamplingRequest {
                system: text_protocol_system(&req),
                messages: text_messages(&req.messages),
                tools: Vec::new(),
                max_tokens: req.max_tokens,
                model_hint: self.model_hint.clone(),
            }
        };
        let fut = self.sampler.create_message(request);
        let last_model = self.last_model.clone();
        let calls = self.calls.clone();
        Box::pin(async move {
            let reply = fut.await.map_err(|e| {
                LlmError::Setup(format!(
                    "the MCP client's sampling/createMessage failed: {e}"
                ))
            })?;
            *last_model.lock().unwrap_or_else(|e| e.into_inner()) = Some(reply.model.clone());
            let n = calls.fetch_add(1, Ordering::Relaxed);
            let estimate_out = reply.content.iter().map(sampling_len).sum::<usize>() as u64 / 4;
            let usage = Usage {
                input_tokens: estimate_in,
                output_tokens: estimate_out,
            };
            Ok(if with_tools {
                native_response(reply, usage)
            } else {
                text_response(reply, usage, n)
            })
        })
    }

    fn describe(&self) -> String {
        match self
            .last_model
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_deref()
        {
            Some(m) => format!("MCP client sampling ({m})"),
            None => "MCP client sampling".to_owned(),
        }
    }
}

pub(super) fn block_len(b: &Block) -> usize {
    match b {
        Block::Text(t) => t.len(),
        Block::ToolUse { input, .. } => input.to_string().len(),
        Block::ToolResult { content, .. } => content.len(),
    }
}

fn sampling_len(c: &SamplingContent) -> usize {
    match c {
        SamplingContent::Text(t) => t.len(),
        SamplingContent::ToolUse { input, .. } => input.to_string().len(),
        SamplingContent::ToolResult { content, .. } => content.len(),
    }
}

fn role(r: Role) -> SamplingRole {
    match r {
        Role::User => SamplingRole::User,
        Role::Assistant => SamplingRole::Assistant,
    }
}

fn native_message(m: &Message) -> SamplingMessage {
    SamplingMessage {
        role: role(m.role),
        content: m
            .content
            .iter()
            .map(|b| match b {
                Block::Text(t) => SamplingContent::Text(t.clone()),
                Block::ToolUse { id, name, input } => SamplingContent::ToolUse {
                    id: id.clone(),
                    name: name.clone(),
                    input: input.clone(),
                },
                Block::ToolResult {
                    id,
                    content,
                    is_error,
                } => SamplingContent::ToolResult {
                    id: id.clone(),
                    content: content.clone(),
                    is_error: *is_error,
                },
            })
            .collect(),
    }
}

fn native_response(reply: SamplingReply, usage: Usage) -> ChatResponse {
    let content: Vec<Block> = reply
        .content
        .into_iter()
        .filter_map(|c| match c {
            SamplingContent::Text(t) => Some(Block::Text(t)),
            SamplingContent::ToolUse { id, name, input } => {
                let input = match input {
                    Value::Null => json!({}),
                    v => v,
                };
                Some(Block::ToolUse { id, name, input })
            }
            SamplingContent::ToolResult { .. } => None,
        })
        .collect();
    let stop = match reply.stop_reason.as_deref() {
        Some("toolUse") => StopReason::ToolUse,
        Some("maxTokens") => StopReason::MaxTokens,
        Some("endTurn") | None => StopReason::EndTurn,
        Some(other) => StopReason::Other(other.to_owned()),
    };
    ChatResponse {
        content,
        stop,
        usage,
    }
}

/// The system prompt of the text protocol: the task's, the tools, and how to call one.
fn text_protocol_system(req: &ChatRequest) -> String {
    let mut s = req.system.clone();
    s.push_str("\n\n## How to call a tool\nAnswer every turn with exactly one JSON object and nothing else:\n{\"tool\": \"<tool name>\", \"arguments\": {<the tool's arguments>}}\nThe next message gives you the tool's result. The tools:\n");
    for t in &req.tools {
        s.push_str(&format!(
            "\n### {}\n{}\nArguments (JSON Schema): {}\n",
            t.name, t.description, t.input_schema
        ));
    }
    s
}

/// The conversation as plain text: calls as the JSON the model wrote, results as user text.
fn text_messages(messages: &[Message]) -> Vec<SamplingMessage> {
    messages
        .iter()
        .map(|m| {
            let parts: Vec<String> = m
                .content
                .iter()
                .filter_map(|b| match b {
                    // A call's JSON is the assistant's text already.
                    Block::Text(t) if m.role == Role::Assistant => None,
                    Block::Text(t) => Some(t.clone()),
                    Block::ToolUse { name, input, .. } => Some(match input {
                        Value::String(raw) => raw.clone(),
                        _ => json!({"tool": name, "arguments": input}).to_string(),
                    }),
                    Block::ToolResult {
                        content, is_error, ..
                    } => Some(format!(
                        "{}\n{content}",
                        if *is_error {
                            "Tool error:"
                        } else {
                            "Tool result:"
                        }
                    )),
                })
                .collect();
            let text = if parts.is_empty() {
                // An assistant answer that held only text.
                m.content
                    .iter()
                    .filter_map(|b| match b {
                        Block::Text(t) => Some(t.as_str()),
                        _ => None,
                    })
                    .collect::<Vec<_>>()
                    .join("\n")
            } else {
                parts.join("\n\n")
            };
            SamplingMessage {
                role: role(m.role),
                content: vec![SamplingContent::Text(text)],
            }
        })
        .collect()
}

/// Reads the one JSON object a text-protocol answer must be.
fn parse_call(text: &str) -> Result<(String, Value), String> {
    let trimmed = text.trim();
    let start = trimmed.find('{').ok_or("it holds no JSON object")?;
    let end = trimmed.rfind('}').ok_or("it holds no JSON object")?;
    if end < start {
        return Err("it holds no JSON object".into());
    }
    let value: Value = serde_json::from_str(&trimmed[start..=end])
        .map_err(|e| format!("its JSON does not parse: {e}"))?;
    let name = value
        .get("tool")
        .and_then(Value::as_str)
        .ok_or("the object has no string \"tool\"")?
        .to_owned();
    let args = match value.get("arguments") {
        None | Some(Value::Null) => json!({}),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(_) => return Err("\"arguments\" is not an object".into()),
    };
    Ok((name, args))
}

fn text_response(reply: SamplingReply, usage: Usage, n: u64) -> ChatResponse {
    let text: String = reply
        .content
        .iter()
        .filter_map(|c| match c {
            SamplingContent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let id = format!("call_{n}");
    let content = match parse_call(&text) {
        Ok((name, input)) => vec![Block::ToolUse { id, name, input }],
        Err(why) => vec![
            Block::ToolUse {
                id: id.clone(),
                name: "(unreadable)".into(),
                input: Value::String(text.clone()),
            },
            Block::ToolResult {
                id,
                content: format!(
                    "error: your answer could not be read as a tool call ({why}). Answer with exactly one JSON object: {{\"tool\": \"<tool name>\", \"arguments\": {{...}}}}"
                ),
                is_error: true,
            },
        ],
    };
    ChatResponse {
        content,
        stop: StopReason::ToolUse,
        usage,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_protocol_calls_are_parsed_and_mistakes_answered() {
        assert_eq!(
            parse_call("```json\n{\"tool\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```")
                .unwrap(),
            ("read_file".to_owned(), json!({"path": "a"}))
        );
        assert!(
            parse_call("I will read it")
                .unwrap_err()
                .contains("no JSON")
        );
        assert!(
            parse_call("{\"name\": \"x\"}")
                .unwrap_err()
                .contains("no string \"tool\"")
        );
        let r = text_response(
            SamplingReply {
                content: vec![SamplingContent::Text("hmm".into())],
                model: "m".into(),
                stop_reason: None,
            },
            Usage::default(),
            3,
        );
        assert!(r.tool_uses().is_empty());
        let prepared = r.prepared_results();
        assert_eq!(prepared.len(), 1);
        assert!(
            matches!(&prepared[0], Block::ToolResult { content, is_error: true, .. } if content.contains("exactly one JSON object"))
        );
    }
}
