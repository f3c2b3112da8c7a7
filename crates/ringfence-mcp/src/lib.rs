//! The MCP adapter: serves a [`Toolbox`] over the Model Context Protocol with rmcp.
//!
//! This crate knows tools only through the `Tool` trait — names, schemas, annotations,
//! `call` — and nothing of files or roots. Tool failures become `isError: true` results the
//! model can act on; an unknown tool is a protocol error (`-32602`). Cancellation
//! (`notifications/cancelled`) reaches the tool as its context's token; a tool's progress
//! reports become `notifications/progress` when the client sent a progress token.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod http;
mod metrics;
mod oauth;

pub use http::{
    Auth, HttpOptions, RateLimits, ResourceMetadata, TlsConfig, TlsError, TokenAuth,
    TokenConfigError, load_tls, serve_http, token_hash,
};
pub use metrics::{Metrics, SessionGuard};
pub use oauth::{
    AuthFailure, JwksError, JwtConfig, JwtConfigError, JwtValidator, KeySetError, KeySource,
};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, InitializeRequestParams, InitializeResult,
    JsonObject, ListPromptsResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProgressNotificationParam, Prompt, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents,
    Role as PromptMessageRole, ServerCapabilities, ServerConfig, Tool as McpTool, ToolAnnotations,
};
use rmcp::service::{NotificationContext, Peer, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use ringfence_tools::{
    Content, Journal, Limits, MemoryBackend, Progress, Resources, Session, SpillStore, Tool,
    ToolContext, ToolError, ToolErrorKind, Toolbox,
};

/// Identity and instructions the server announces at `initialize`.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    pub name: String,
    pub version: String,
    pub instructions: String,
}

/// The user an HTTP request was authenticated as (put in the request's extensions by the
/// bearer-token middleware).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUser(pub String);

/// One tool call, as the audit trail records it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditEvent {
    /// RFC 3339 UTC, milliseconds.
    pub time: String,
    pub user: String,
    pub session: String,
    pub tool: String,
    /// The arguments with file contents replaced by their length and hash.
    pub args: Value,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'static str>,
    pub duration_ms: f64,
}

/// Where audit events go. Implementations must not block the call (queue and return).
pub trait AuditSink: Send + Sync + std::fmt::Debug {
    fn record(&self, event: AuditEvent);
}

/// Argument keys whose values are file contents: recorded as length and hash only.
const CONTENT_KEYS: &[&str] = &[
    "content",
    "old_string",
    "new_string",
    "old_content",
    "new_content",
];

/// The arguments with every content value (and any string over 512 bytes) replaced by
/// `{"len": bytes, "blake3": first 16 hex digits}`.
pub fn redact_args(args: &Value) -> Value {
    fn walk(v: &Value, content: bool) -> Value {
        match v {
            Value::String(s) if content || s.len() > 512 => json!({
                "len": s.len(),
                "blake3": &blake3::hash(s.as_bytes()).to_hex()[..16],
            }),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| (k.clone(), walk(v, CONTENT_KEYS.contains(&k.as_str()))))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|v| walk(v, content)).collect()),
            other => other.clone(),
        }
    }
    walk(args, false)
}

/// What a tool call runs in: the client's session and where its long outputs are saved.
#[derive(Debug, Clone)]
pub struct SessionParts {
    pub session: Arc<Session>,
    pub spill: Arc<SpillStore>,
}

/// Makes the session of an authenticated user (their roots, their spill directory).
pub type UserSessions = Arc<dyn Fn(&str) -> Result<SessionParts, String> + Send + Sync>;

/// The session an MCP session works in: fixed (stdio), or made for the user who sent its
/// first request and bound to them from then on (HTTP).
struct SessionSlot {
    make: Option<UserSessions>,
    bound: Mutex<Option<(String, SessionParts)>>,
}

/// Everything a served session needs. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    toolbox: Arc<Toolbox>,
    tools: Arc<Vec<McpTool>>,
    slot: Arc<SessionSlot>,
    limits: Arc<Limits>,
    /// Calls running longer are cancelled and answered with a `timeout` error.
    call_timeout: Option<Duration>,
    journal: Option<Arc<dyn Journal>>,
    memory: Option<Arc<dyn MemoryBackend>>,
    /// Resources and prompts (the memory family's pinned truths).
    resources: Option<Arc<dyn Resources>>,
    audit: Option<Arc<dyn AuditSink>>,
    metrics: Option<(Arc<Metrics>, Arc<SessionGuard>)>,
    /// Names this MCP session in the audit trail.
    session_id: Arc<str>,
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
    /// A server for one session (stdio, tests): every call runs in `session`.
    pub fn new(
        toolbox: Toolbox,
        session: Arc<Session>,
        limits: Arc<Limits>,
        spill: Arc<SpillStore>,
        identity: ServerIdentity,
    ) -> McpServer {
        let user = session.user().to_owned();
        let slot = SessionSlot {
            make: None,
            bound: Mutex::new(Some((user, SessionParts { session, spill }))),
        };
        Self::with_slot(toolbox, slot, limits, identity)
    }

    /// A server for one HTTP MCP session of several users: the session is made by
    /// `sessions` for the user of the first request and refuses requests of anyone else.
    pub fn for_users(
        toolbox: Toolbox,
        sessions: UserSessions,
        limits: Arc<Limits>,
        identity: ServerIdentity,
    ) -> McpServer {
        let slot = SessionSlot {
            make: Some(sessions),
            bound: Mutex::new(None),
        };
        Self::with_slot(toolbox, slot, limits, identity)
    }

    fn with_slot(
        toolbox: Toolbox,
        slot: SessionSlot,
        limits: Arc<Limits>,
        identity: ServerIdentity,
    ) -> McpServer {
        let tools = toolbox.iter().map(|t| mcp_tool(t.as_ref())).collect();
        McpServer {
            toolbox: Arc::new(toolbox),
            tools: Arc::new(tools),
            slot: Arc::new(slot),
            limits,
            call_timeout: None,
            journal: None,
            memory: None,
            resources: None,
            audit: None,
            metrics: None,
            session_id: uuid::Uuid::new_v4().simple().to_string().into(),
            identity: Arc::new(identity),
            roots_ready: Arc::new(RootsReady::default()),
        }
    }

    /// Stops calls that run longer than `limit` (they answer with a `timeout` error).
    pub fn with_call_timeout(mut self, limit: Option<Duration>) -> McpServer {
        self.call_timeout = limit;
        self
    }

    /// The session for `user`: made and bound on first use; refused for anyone else.
    fn parts_for(&self, user: &str) -> Result<SessionParts, String> {
        let mut bound = self.slot.bound.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((owner, parts)) = bound.as_ref() {
            if owner == user {
                return Ok(parts.clone());
            }
            tracing::warn!(%user, session = %self.session_id, "request for another user's MCP session refused");
            return Err("this MCP session belongs to another user; start your own session".into());
        }
        let make = self
            .slot
            .make
            .as_ref()
            .ok_or_else(|| "this server has no session".to_owned())?;
        let parts = make(user)?;
        *bound = Some((user.to_owned(), parts.clone()));
        Ok(parts)
    }

    /// Counts this session and its calls in `metrics`.
    pub fn with_metrics(mut self, metrics: &Arc<Metrics>) -> McpServer {
        self.metrics = Some((metrics.clone(), metrics.session()));
        self
    }

    /// Records every tool call in an audit trail.
    pub fn with_audit(mut self, audit: Arc<dyn AuditSink>) -> McpServer {
        self.audit = Some(audit);
        self
    }

    /// Journals writes and edits for `undo_edit`.
    pub fn with_journal(mut self, journal: Arc<dyn Journal>) -> McpServer {
        self.journal = Some(journal);
        self
    }

    /// Where the memory tools keep truths and memories.
    pub fn with_memory(mut self, memory: Arc<dyn MemoryBackend>) -> McpServer {
        self.memory = Some(memory);
        self
    }

    /// Offers resources and prompts (and per-user additions to the instructions).
    pub fn with_resources(mut self, resources: Arc<dyn Resources>) -> McpServer {
        self.resources = Some(resources);
        self
    }

    /// The user a request acts for: the session's, once a session is bound (so a request
    /// from anyone else is refused as tool calls are).
    fn acting_user(&self, extensions: &rmcp::model::Extensions) -> Result<String, ErrorData> {
        let user = request_user(extensions);
        self.parts_for(&user)
            .map(|parts| parts.session.user().to_owned())
            .map_err(|why| ErrorData::invalid_request(why, None))
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
    async fn refresh_client_roots(&self, peer: Peer<RoleServer>, user: &str) {
        let supports = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        let session = match self.parts_for(user) {
            Ok(parts) => parts.session,
            Err(why) => {
                tracing::warn!(%why, "client roots not applied");
                return;
            }
        };
        if supports && session.uses_client_roots() {
            match peer.list_roots().await {
                Ok(result) => {
                    let uris: Vec<String> = result.roots.into_iter().map(|r| r.uri).collect();
                    let summary = session.apply_client_roots(&uris);
                    tracing::info!(%summary, "client roots applied");
                }
                Err(e) => {
                    // Fail closed: without the client's answer, the narrowing it asked for
                    // (by declaring roots) cannot be honoured.
                    tracing::warn!(error = %e, "roots/list failed; refusing file access");
                    session.client_roots_failed(&e.to_string());
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
    async fn wait_for_roots(
        &self,
        peer: &Peer<RoleServer>,
        session: &Session,
    ) -> Result<(), String> {
        let declared = peer
            .peer_info()
            .is_some_and(|info| info.capabilities.roots.is_some());
        if !declared || !session.uses_client_roots() {
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

impl McpServer {
    /// Runs one tool call in `parts`, after the client's roots are known, within the
    /// server's time limit.
    async fn run(
        &self,
        tool: &dyn Tool,
        parts: SessionParts,
        args: Value,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<ringfence_tools::ToolOutput, ToolError> {
        // The tool sees a child token: cancelled by the client, or by the time limit.
        let cancel = ctx.ct.child_token();
        let timed_out = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let timer = self.call_timeout.map(|limit| {
            let cancel = cancel.clone();
            let timed_out = timed_out.clone();
            tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                timed_out.store(true, std::sync::atomic::Ordering::SeqCst);
                cancel.cancel();
            })
        });
        let waited = tokio::select! {
            r = self.wait_for_roots(&ctx.peer, &parts.session) => {
                r.map_err(|why| ToolError::new(ToolErrorKind::OutsideWorkspace, why))
            }
            _ = cancel.cancelled() => Err(ToolError::new(ToolErrorKind::Cancelled, "the call was cancelled")),
        };
        let tool_ctx = ToolContext {
            session: parts.session,
            limits: self.limits.clone(),
            spill: parts.spill,
            journal: self.journal.clone(),
            memory: self.memory.clone(),
            cancel,
            progress: progress_for(ctx),
        };
        let result = match waited {
            Ok(()) => tool.call(tool_ctx, args).await,
            Err(e) => Err(e),
        };
        if let Some(timer) = timer {
            timer.abort();
        }
        match result {
            Err(e)
                if e.kind == ToolErrorKind::Cancelled
                    && timed_out.load(std::sync::atomic::Ordering::SeqCst) =>
            {
                let secs = self.call_timeout.unwrap_or_default().as_secs_f64();
                Err(ToolError::new(
                    ToolErrorKind::Timeout,
                    format!(
                        "the call ran longer than this server allows ({secs} s) and was stopped; narrow it (a smaller path, a more specific pattern, a lower limit) and try again"
                    ),
                ))
            }
            other => other,
        }
    }
}

/// The user a request came from: the one its HTTP authentication named, else the local user.
fn request_user(extensions: &rmcp::model::Extensions) -> String {
    extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<AuthUser>())
        .map(|u| u.0.clone())
        .unwrap_or_else(|| ringfence_tools::LOCAL_USER.to_owned())
}

/// Forwards a tool's progress reports, in order, as `notifications/progress`.
/// Runs short blocking work (a database read) from async code: in place on a
/// multi-threaded runtime (other tasks move to other workers), directly elsewhere.
fn quick_blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    if Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread) {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

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
        let capabilities = if self.resources.is_some() {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build()
        } else {
            ServerCapabilities::builder().enable_tools().build()
        };
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                self.identity.name.clone(),
                self.identity.version.clone(),
            ))
            .with_instructions(self.identity.instructions.clone())
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        ctx.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if let Some(resources) = &self.resources
            && let Ok(user) = self.acting_user(&ctx.extensions)
        {
            let extra = quick_blocking(|| resources.instructions(&user));
            if let Some(extra) = extra {
                result.instructions = Some(format!(
                    "{}\n\n{extra}",
                    result.instructions.unwrap_or_default()
                ));
            }
        }
        Ok(result)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let items = self
            .resources
            .iter()
            .flat_map(|r| r.resources())
            .map(|r| {
                let mut res = Resource::new(r.uri, r.name)
                    .with_title(r.title)
                    .with_description(r.description);
                res.mime_type = Some(r.mime_type.to_owned());
                res
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(items))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let user = self.acting_user(&ctx.extensions)?;
        let uri = request.uri.clone();
        let found = self
            .resources
            .as_ref()
            .and_then(|r| quick_blocking(|| r.read(&user, &uri)));
        match found {
            None => Err(ErrorData::resource_not_found(
                format!("no resource {uri}; resources/list names the ones there are"),
                None,
            )),
            Some(Err(e)) => Err(ErrorData::internal_error(e, None)),
            Some(Ok(text)) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(text, uri).with_mime_type("text/plain"),
            ])
            .into()),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let items = self
            .resources
            .iter()
            .flat_map(|r| r.prompts())
            .map(|p| Prompt::new(p.name, Some(p.description), None).with_title(p.title))
            .collect();
        Ok(ListPromptsResult::with_all_items(items))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let user = self.acting_user(&ctx.extensions)?;
        let name = request.name.clone();
        let found = self
            .resources
            .as_ref()
            .and_then(|r| quick_blocking(|| r.prompt(&user, &name)));
        match found {
            None => Err(ErrorData::invalid_params(
                format!("no prompt `{name}`; prompts/list names the ones there are"),
                None,
            )),
            Some(Err(e)) => Err(ErrorData::internal_error(e, None)),
            Some(Ok(text)) => {
                let mut result = GetPromptResult::new(vec![PromptMessage::new_text(
                    PromptMessageRole::User,
                    text,
                )]);
                result.description = Some("The user's pinned truths".into());
                Ok(result.into())
            }
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _ctx: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn on_initialized(&self, ctx: NotificationContext<RoleServer>) {
        let user = request_user(&ctx.extensions);
        self.refresh_client_roots(ctx.peer, &user).await;
    }

    async fn on_roots_list_changed(&self, ctx: NotificationContext<RoleServer>) {
        let user = request_user(&ctx.extensions);
        self.refresh_client_roots(ctx.peer, &user).await;
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
        let audited_args = self.audit.as_ref().map(|_| redact_args(&args));
        let user = request_user(&ctx.extensions);
        let started = Instant::now();
        let result = match self.parts_for(&user) {
            Ok(parts) => self.run(tool.as_ref(), parts, args, &ctx).await,
            Err(why) => Err(ToolError::new(ToolErrorKind::Refused, why)),
        };
        let elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        if let Some((metrics, _)) = &self.metrics {
            metrics.record(&name, result.is_ok(), elapsed_ms / 1000.0);
        }
        if let (Some(audit), Some(args)) = (&self.audit, audited_args) {
            audit.record(AuditEvent {
                time: rfc3339_now(),
                user,
                session: self.session_id.to_string(),
                tool: name.to_string(),
                args,
                outcome: if result.is_ok() { "ok" } else { "error" },
                error: result.as_ref().err().map(|e| e.kind.as_str()),
                duration_ms: (elapsed_ms * 1000.0).round() / 1000.0,
            });
        }
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

/// The current time as `2026-12-02T15:04:05.123Z` (the file tools' own ISO 8601 format).
fn rfc3339_now() -> String {
    ringfence_tools::files::time::format_iso(std::time::SystemTime::now())
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

#[cfg(test)]
mod tests {
    #[test]
    fn audit_args_hide_contents() {
        let args = serde_json::json!({
            "path": "notes.txt",
            "content": "secret text",
            "edits": [{"old_string": "a", "new_string": "b"}],
            "pattern": "x".repeat(600),
        });
        let r = super::redact_args(&args);
        assert_eq!(r["path"], "notes.txt");
        assert_eq!(r["content"]["len"], 11);
        assert_eq!(r["content"]["blake3"].as_str().unwrap().len(), 16);
        assert_eq!(r["edits"][0]["old_string"]["len"], 1);
        assert_eq!(r["pattern"]["len"], 600);
        assert!(!r.to_string().contains("secret"));
    }

    #[test]
    fn rfc3339_shape() {
        let t = super::rfc3339_now();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }

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
