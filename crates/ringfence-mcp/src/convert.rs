//! Conversions between ringfence's transport-neutral types and rmcp's.

use base64::Engine as _;
use rmcp::RoleServer;
use rmcp::model::{
    ContentBlock, JsonObject, ProgressNotificationParam, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::RequestContext;

use ringfence_core::{Content, Progress, ProgressUpdate, Tool};

/// The MCP form of one tool definition.
pub fn mcp_tool(tool: &dyn Tool) -> McpTool {
    let a = tool.annotations();
    let schema: JsonObject = tool.input_schema();
    McpTool::new(tool.name(), tool.description(), schema)
        .with_title(a.title)
        .with_annotations(
            ToolAnnotations::new()
                .read_only(a.read_only)
                .destructive(a.destructive)
                .idempotent(a.idempotent)
                .open_world(a.open_world),
        )
}

/// One result block; media is base64-encoded (standard alphabet, padded) as MCP requires.
pub(crate) fn content_block(content: Content) -> ContentBlock {
    let b64 = |data: &[u8]| base64::engine::general_purpose::STANDARD.encode(data);
    match content {
        Content::Text(text) => ContentBlock::text(text),
        Content::Image { mime, data } => ContentBlock::image(b64(&data), mime),
        Content::Audio { mime, data } => ContentBlock::audio(b64(&data), mime),
    }
}

/// Forwards a tool's progress reports, in order, as `notifications/progress` (a no-op
/// reporter when the client sent no progress token).
pub(crate) fn progress_for(ctx: &RequestContext<RoleServer>) -> Progress {
    let Some(token) = ctx.meta.get_progress_token() else {
        return Progress::none();
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ProgressUpdate>();
    let peer = ctx.peer.clone();
    let cancel = ctx.ct.clone();
    tokio::spawn(async move {
        while let Some(update) = rx.recv().await {
            if cancel.is_cancelled() {
                break;
            }
            let mut param = ProgressNotificationParam::new(token.clone(), update.progress);
            if let Some(total) = update.total {
                param = param.with_total(total);
            }
            if let Some(message) = update.message {
                param = param.with_message(message);
            }
            if peer.notify_progress(param).await.is_err() {
                break;
            }
        }
    });
    Progress::new(move |update| {
        let _ = tx.send(update);
    })
}

/// Runs short blocking work (a database read) from async code: in place on a
/// multi-threaded runtime (other tasks move to other workers), directly elsewhere.
pub(crate) fn quick_blocking<T>(f: impl FnOnce() -> T) -> T {
    if ringfence_core::tool::on_multi_thread_runtime() {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn media_is_standard_padded_base64() {
        let block = super::content_block(ringfence_core::Content::Image {
            mime: "image/png".into(),
            data: b"fooba".to_vec(),
        });
        let json = serde_json::to_value(&block).unwrap();
        assert_eq!(json["data"], "Zm9vYmE=");
        assert_eq!(json["mimeType"], "image/png");
    }
}
