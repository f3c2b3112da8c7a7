//! The MCP adapter: serves a [`Toolbox`] over the Model Context Protocol with rmcp.
//!
//! This crate knows tools only through the `Tool` trait — names, schemas, annotations,
//! `call` — and nothing of files or roots. Tool failures become `isError: true` results the
//! model can act on; an unknown tool is a protocol error (`-32602`). Cancellation
//! (`notifications/cancelled`) reaches the tool as its context's token; a tool's progress
//! reports become `notifications/progress` when the client sent a progress token.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use ringfence_tools::{
    Content, Journal, Limits, Progress, Session, SpillStore, Tool, ToolContext, ToolError,
    ToolErrorKind, Toolbox,
};

/// Identity and instructions the server announces at `initialize`.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    pub name: String,
    pub version: String,
    pub instructions: String,
}

/// Everything a served session needs. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    toolbox: Arc<Toolbox>,
    tools: Arc<Vec<McpTool>>,
    session: Arc<Session>,
    limits: Arc<Limits>,
    spill: Arc<SpillStore>,
    journal: Option<Arc<dyn Journal>>,
    identity: Arc<ServerIdentity>,
    /// Set once the client's roots (if it has any) were applied; tool calls wait for it.
    roots_ready: Arc<RootsReady>,
}

#[derive(Debug, Default)]
struct RootsReady {
    done: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

/// How long a tool call waits for the client to answer `roots/list`.
const ROOTS_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("tools", &self.toolbox)
            .finish_non_exhaustive()
    }
}

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

impl McpServer {
    pub fn new(
        toolbox: Toolbox,
        session: Arc<Session>,
        limits: Arc<Limits>,
        spill: Arc<SpillStore>,
        identity: ServerIdentity,
    ) -> McpServer {
        let tools = toolbox.iter().map(|t| mcp_tool(t.as_ref())).collect();
        McpServer {
            toolbox: Arc::new(toolbox),
            tools: Arc::new(tools),
            session,
            limits,
            spill,
            journal: None,
            identity: Arc::new(identity),
            roots_ready: Arc::new(RootsReady::default()),
        }
    }

    /// Journals writes and edits for `undo_edit`.
    pub fn with_journal(mut self, journal: Arc<dyn Journal>) -> McpServer {
        self.journal = Some(journal);
        self
    }

    /// Serves MCP over this process's stdin/stdout until the client closes the stream.
    pub async fn serve_stdio(self) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let running = self.serve(rmcp::transport::stdio()).await?;
        let reason = running.waiting().await?;
        tracing::info!(?reason, "stdio session ended");
        Ok(())
    }

    /// Serves MCP over any async byte stream pair (used by in-process tests).
    pub async fn serve_io<R, W>(
        self,
        read: R,
        write: W,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
    where
        R: tokio::io::AsyncRead + Send + Unpin + 'static,
        W: tokio::io::AsyncWrite + Send + Unpin + 'static,
    {
        let running = self.serve((read, write)).await?;
        running.waiting().await?;
        Ok(())
    }
}

impl McpServer {
    /// Asks a client that announces roots for them and hands them to the session (which
    /// decides, by the operator's policy, what they may change). Roots are deprecated by the
    /// specification's SEP-2577 but still what desktop clients send; without them the
    /// configured roots apply unchanged.
    #[allow(deprecated)]
    async fn refresh_client_roots(&self, peer: Peer<RoleServer>) {
        let supports = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if supports && self.session.uses_client_roots() {
            match peer.list_roots().await {
                Ok(result) => {
                    let uris: Vec<String> = result.roots.into_iter().map(|r| r.uri).collect();
                    let summary = self.session.apply_client_roots(&uris);
                    tracing::info!(%summary, "client roots applied");
                }
                Err(e) => {
                    // Fail closed: without the client's answer, the narrowing it asked for
                    // (by declaring roots) cannot be honoured.
                    tracing::warn!(error = %e, "roots/list failed; refusing file access");
                    self.session.client_roots_failed(&e.to_string());
                }
            }
        }
        self.roots_ready
            .done
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.roots_ready.notify.notify_waiters();
    }

    /// Before a tool call: if the client declared roots, wait until they were applied, so no
    /// call runs against the wider configured roots in the meantime.
    #[allow(deprecated)]
    async fn wait_for_roots(&self, peer: &Peer<RoleServer>) -> Result<(), String> {
        let declared = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !declared || !self.session.uses_client_roots() {
            return Ok(());
        }
        let ready = &self.roots_ready;
        let notified = ready.notify.notified();
        if ready.done.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(());
        }
        match tokio::time::timeout(ROOTS_WAIT, notified).await {
            Ok(()) => Ok(()),
            Err(_) if ready.done.load(std::sync::atomic::Ordering::SeqCst) => Ok(()),
            Err(_) => Err(format!(
                "the MCP client declared roots but has not answered roots/list within {} s; file access is refused until it does",
                ROOTS_WAIT.as_secs()
            )),
        }
    }
}

/// Forwards a tool's progress reports, in order, as `notifications/progress`.
fn progress_for(ctx: &RequestContext<RoleServer>) -> Progress {
    let Some(token) = ctx.meta.get_progress_token() else {
        return Progress::none();
    };
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ringfence_tools::ProgressUpdate>();
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

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new(
                self.identity.name.clone(),
                self.identity.version.clone(),
            ))
            .with_instructions(self.identity.instructions.clone())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        self.refresh_client_roots(ctx.peer).await;
    }

    async fn on_roots_list_changed(&self, ctx: NotificationContext<RoleServer>) {
        self.refresh_client_roots(ctx.peer).await;
    }

    fn get_tool(&self, name: &str) -> Option<McpTool> {
        self.tools.iter().find(|t| t.name == name).cloned()
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name: Cow<'_, str> = request.name.clone();
        let Some(tool) = self.toolbox.get(&name).cloned() else {
            let known: Vec<&str> = self.toolbox.iter().map(|t| t.name()).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{name}`; available tools: {}",
                    known.join(", ")
                ),
                Some(json!({ "name": name })),
            ));
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let tool_ctx = ToolContext {
            session: self.session.clone(),
            limits: self.limits.clone(),
            spill: self.spill.clone(),
            journal: self.journal.clone(),
            cancel: ctx.ct.clone(),
            progress: progress_for(&ctx),
        };
        let started = Instant::now();
        let result = match self.wait_for_roots(&ctx.peer).await {
            Ok(()) => tool.call(tool_ctx, args).await,
            Err(why) => Err(ToolError::new(ToolErrorKind::OutsideWorkspace, why)),
        };
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        let response = match result {
            Ok(output) => {
                tracing::debug!(tool = %name, elapsed_ms, "tool call ok");
                let blocks = output.content.into_iter().map(content_block).collect();
                let mut r = CallToolResult::success(blocks);
                if let Some(structured) = output.structured {
                    r.structured_content = Some(structured);
                }
                r
            }
            Err(err) => {
                tracing::info!(tool = %name, elapsed_ms, kind = err.kind.as_str(), "tool call failed");
                let mut r = CallToolResult::error(vec![ContentBlock::text(format!(
                    "Error: {}",
                    err.message
                ))]);
                r.structured_content =
                    Some(json!({ "error": err.kind.as_str(), "message": err.message }));
                r
            }
        };
        Ok(response.into())
    }
}

fn content_block(content: Content) -> ContentBlock {
    match content {
        Content::Text(text) => ContentBlock::text(text),
        Content::Image { mime, data } => ContentBlock::image(base64(&data), mime),
        Content::Audio { mime, data } => ContentBlock::audio(base64(&data), mime),
    }
}

/// Standard base64 with padding (RFC 4648), as MCP media content requires.
fn base64(data: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Largest JSON-RPC request body accepted over HTTP (a write_file of a big file fits).
const MAX_HTTP_BODY: usize = 64 * 1024 * 1024;

/// MCP streamable HTTP at `/mcp` on `listener`, until `shutdown` is cancelled. Every MCP
/// session gets its own server from `factory` (its own workspace state, read tracker and
/// client roots). rmcp validates the `Host` header (loopback names only by default) and
/// the `Origin` header (none allowed: a web page cannot drive it), against DNS rebinding,
/// and bounds request bodies.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    factory: impl Fn() -> Result<McpServer, std::io::Error> + Send + Sync + 'static,
    shutdown: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    // No browser origin is allowed (an MCP client is not a web page); requests without an
    // `Origin` header — every native client — pass.
    let config = StreamableHttpServerConfig::default()
        .enforce_origin_validation()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(MAX_HTTP_BODY);
    let service =
        StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(input.as_bytes()), expected, "{input}");
        }
    }
}
