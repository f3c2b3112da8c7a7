//! The bridge from a tool's [`ClientSampler`] to the client's `sampling/createMessage`: a
//! client that declared the `sampling` capability gets its peer set on the session of each
//! call it makes, so `delegate_task` with `[llm] provider = "sampling"` can use the client's
//! own model. Tools never see MCP; this is the only place that converts.

#![allow(deprecated)] // sampling is deprecated by SEP-2577 but is what clients offer today

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{
    ContentBlock, CreateMessageRequestParams, CreateMessageResult, ModelHint, ModelPreferences,
    Role, SamplingMessage, SamplingMessageContentBlock, Tool as McpTool,
};
use rmcp::service::Peer;
use serde_json::Value;

use ringfence_core::{
    BackendError, BoxFuture, ClientSampler, SamplingContent, SamplingReply, SamplingRequest,
    SamplingRole,
};

/// The client's model, through its peer.
pub(crate) struct PeerSampler {
    peer: Peer<RoleServer>,
    tools: bool,
}

impl std::fmt::Debug for PeerSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerSampler")
            .field("tools", &self.tools)
            .finish()
    }
}

/// The sampler of a client that declared the `sampling` capability; `None` otherwise.
pub(crate) fn sampler_for(peer: &Peer<RoleServer>) -> Option<Arc<dyn ClientSampler>> {
    let info = peer.peer_info()?;
    let sampling = info.capabilities.sampling.as_ref()?;
    Some(Arc::new(PeerSampler {
        peer: peer.clone(),
        tools: sampling.tools.is_some(),
    }))
}

impl ClientSampler for PeerSampler {
    fn supports_tools(&self) -> bool {
        self.tools
    }

    fn create_message(
        &self,
        request: SamplingRequest,
    ) -> BoxFuture<'static, Result<SamplingReply, BackendError>> {
        let peer = self.peer.clone();
        let params = to_params(request);
        Box::pin(async move {
            let result = peer
                .create_message(params)
                .await
                .map_err(|e| BackendError::new(e.to_string()))?;
            Ok(from_result(result))
        })
    }
}

fn to_params(req: SamplingRequest) -> CreateMessageRequestParams {
    let messages = req
        .messages
        .into_iter()
        .map(|m| {
            let role = match m.role {
                SamplingRole::User => Role::User,
                SamplingRole::Assistant => Role::Assistant,
            };
            let blocks = m
                .content
                .into_iter()
                .map(|c| match c {
                    SamplingContent::Text(t) => SamplingMessageContentBlock::text(t),
                    SamplingContent::ToolUse { id, name, input } => {
                        let input = match input {
                            Value::Object(map) => map,
                            _ => Default::default(),
                        };
                        SamplingMessageContentBlock::tool_use(id, name, input)
                    }
                    SamplingContent::ToolResult {
                        id,
                        content,
                        is_error,
                    } => {
                        let mut block = SamplingMessageContentBlock::tool_result(
                            id,
                            vec![ContentBlock::text(content)],
                        );
                        if let SamplingMessageContentBlock::ToolResult(r) = &mut block {
                            r.is_error = Some(is_error);
                        }
                        block
                    }
                })
                .collect();
            SamplingMessage::new_multiple(role, blocks)
        })
        .collect();
    let mut params =
        CreateMessageRequestParams::new(messages, req.max_tokens).with_system_prompt(req.system);
    if let Some(name) = req.model_hint {
        let mut prefs = ModelPreferences::new();
        prefs.hints = Some(vec![ModelHint::new(name)]);
        params = params.with_model_preferences(prefs);
    }
    if !req.tools.is_empty() {
        params.tools = Some(
            req.tools
                .into_iter()
                .map(|t| McpTool::new(t.name, t.description, Arc::new(t.input_schema)))
                .collect(),
        );
    }
    params
}

fn from_result(result: CreateMessageResult) -> SamplingReply {
    let content = result
        .message
        .content
        .into_vec()
        .into_iter()
        .filter_map(|b| match b {
            SamplingMessageContentBlock::Text(t) => Some(SamplingContent::Text(t.text)),
            SamplingMessageContentBlock::ToolUse(u) => Some(SamplingContent::ToolUse {
                id: u.id,
                name: u.name,
                input: Value::Object(u.input),
            }),
            _ => None,
        })
        .collect();
    SamplingReply {
        content,
        model: result.model,
        stop_reason: result.stop_reason,
    }
}
