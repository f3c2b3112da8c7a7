//! The MCP adapter: serves a [`Toolbox`] over the Model Context Protocol with rmcp.
//!
//! This crate knows tools only through the `Tool` trait — names, schemas, annotations,
//! `call` — and nothing of files or roots. Tool failures become `isError: true` results the
//! model can act on; an unknown tool is a protocol error (`-32602`). Cancellation
//! (`notifications/cancelled`) reaches the tool as its context's token; a tool's progress
//! reports become `notifications/progress` when the client sent a progress token.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
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

/// Counters for `/metrics` (Prometheus text format): tool calls by tool and outcome, their
/// latency as a histogram, and the MCP sessions alive.
#[derive(Debug, Default)]
pub struct Metrics {
    calls: Mutex<std::collections::BTreeMap<String, ToolStats>>,
    sessions: std::sync::atomic::AtomicI64,
}

#[derive(Debug, Default, Clone)]
struct ToolStats {
    ok: u64,
    error: u64,
    /// Counts per bucket of [`BUCKETS`] (not cumulative), plus one for larger.
    buckets: [u64; BUCKETS.len() + 1],
    sum_seconds: f64,
}

/// Latency bucket bounds, seconds.
const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 10.0];

impl Metrics {
    fn record(&self, tool: &str, ok: bool, seconds: f64) {
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        let st = calls.entry(tool.to_owned()).or_default();
        if ok {
            st.ok += 1;
        } else {
            st.error += 1;
        }
        let i = BUCKETS
            .iter()
            .position(|b| seconds <= *b)
            .unwrap_or(BUCKETS.len());
        st.buckets[i] += 1;
        st.sum_seconds += seconds;
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        use std::fmt::Write as _;
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut out = String::new();
        out.push_str("# HELP ringfence_tool_calls_total Tool calls by tool and outcome.\n");
        out.push_str("# TYPE ringfence_tool_calls_total counter\n");
        for (tool, st) in &calls {
            let _ = writeln!(
                out,
                "ringfence_tool_calls_total{{tool=\"{tool}\",outcome=\"ok\"}} {}",
                st.ok
            );
            let _ = writeln!(
                out,
                "ringfence_tool_calls_total{{tool=\"{tool}\",outcome=\"error\"}} {}",
                st.error
            );
        }
        out.push_str("# HELP ringfence_tool_call_duration_seconds Tool call latency.\n");
        out.push_str("# TYPE ringfence_tool_call_duration_seconds histogram\n");
        for (tool, st) in &calls {
            let mut cumulative = 0;
            for (i, bound) in BUCKETS.iter().enumerate() {
                cumulative += st.buckets[i];
                let _ = writeln!(
                    out,
                    "ringfence_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let total = st.ok + st.error;
            let _ = writeln!(
                out,
                "ringfence_tool_call_duration_seconds_bucket{{tool=\"{tool}\",le=\"+Inf\"}} {total}"
            );
            let _ = writeln!(
                out,
                "ringfence_tool_call_duration_seconds_sum{{tool=\"{tool}\"}} {}",
                st.sum_seconds
            );
            let _ = writeln!(
                out,
                "ringfence_tool_call_duration_seconds_count{{tool=\"{tool}\"}} {total}"
            );
        }
        out.push_str("# HELP ringfence_active_sessions MCP sessions alive.\n");
        out.push_str("# TYPE ringfence_active_sessions gauge\n");
        let _ = writeln!(
            out,
            "ringfence_active_sessions {}",
            self.sessions.load(std::sync::atomic::Ordering::Relaxed)
        );
        out
    }

    /// Counts a session alive until the returned guard (held by every clone of its server)
    /// is dropped.
    pub fn session(self: &Arc<Self>) -> Arc<SessionGuard> {
        self.sessions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Arc::new(SessionGuard(self.clone()))
    }
}

/// Keeps a session counted in [`Metrics`] while it lives.
#[derive(Debug)]
pub struct SessionGuard(Arc<Metrics>);

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.0
            .sessions
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
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
            audit: None,
            metrics: None,
            session_id: uuid::Uuid::new_v4().simple().to_string().into(),
            identity: Arc::new(identity),
            roots_ready: Arc::new(RootsReady::default()),
        }
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
        let audited_args = self.audit.as_ref().map(|_| redact_args(&args));
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
        if let Some((metrics, _)) = &self.metrics {
            metrics.record(&name, result.is_ok(), elapsed_ms / 1000.0);
        }
        if let (Some(audit), Some(args)) = (&self.audit, audited_args) {
            let user = ctx
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|p| p.extensions.get::<AuthUser>())
                .map(|u| u.0.clone())
                .unwrap_or_else(|| "local".to_owned());
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

/// Largest JSON-RPC request body accepted over HTTP (a write_file of a big file fits).
const MAX_HTTP_BODY: usize = 64 * 1024 * 1024;

/// Bearer tokens accepted by the HTTP transport, each mapped to a user. Only BLAKE3 hashes of
/// the tokens are kept (the configuration never holds a token in plain text).
#[derive(Debug, Clone, Default)]
pub struct TokenAuth {
    /// (hash of the token, user)
    tokens: Vec<([u8; 32], String)>,
}

impl TokenAuth {
    /// `entries`: (user, `blake3:<64 hex>`). Errors name the entry.
    pub fn new(entries: &[(String, String)]) -> Result<TokenAuth, String> {
        let mut tokens = Vec::new();
        for (i, (user, hash)) in entries.iter().enumerate() {
            if user.trim().is_empty() {
                return Err(format!("http.tokens[{i}]: `user` is empty"));
            }
            let hex = hash.strip_prefix("blake3:").ok_or_else(|| {
                format!(
                    "http.tokens[{i}]: `hash` must look like blake3:<64 hex digits>; make one with `ringfence token-hash`"
                )
            })?;
            let bytes = parse_hex32(hex).ok_or_else(|| {
                format!("http.tokens[{i}]: `hash` is not 64 hex digits after `blake3:`")
            })?;
            if tokens.iter().any(|(h, _)| *h == bytes) {
                return Err(format!(
                    "http.tokens[{i}]: the same token hash appears twice"
                ));
            }
            tokens.push((bytes, user.clone()));
        }
        Ok(TokenAuth { tokens })
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The user a presented token belongs to. Every stored hash is compared, in constant
    /// time per comparison, so timing does not tell which entry matched or how much of it.
    pub fn user_of(&self, token: &str) -> Option<&str> {
        let presented = *blake3::hash(token.as_bytes()).as_bytes();
        let mut found = None;
        for (hash, user) in &self.tokens {
            let diff = hash
                .iter()
                .zip(presented.iter())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b));
            if diff == 0 {
                found = Some(user.as_str());
            }
        }
        found
    }
}

/// The configuration form of a token's hash.
pub fn token_hash(token: &str) -> String {
    format!("blake3:{}", blake3::hash(token.as_bytes()).to_hex())
}

fn parse_hex32(hex: &str) -> Option<[u8; 32]> {
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

/// How the HTTP transport is set up.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Bearer tokens; `None` or empty: no authentication (loopback only).
    pub auth: Option<Arc<TokenAuth>>,
    /// Accepted `Host` names besides the loopback ones (for a non-loopback bind).
    pub allowed_hosts: Vec<String>,
    /// Served at `/metrics` (behind the same authentication as `/mcp`).
    pub metrics: Option<Arc<Metrics>>,
}

/// MCP streamable HTTP at `/mcp` on `listener`, until `shutdown` is cancelled. Every MCP
/// session gets its own server from `factory` (its own workspace state, read tracker and
/// client roots). rmcp validates the `Host` header (loopback names, plus `allowed_hosts`)
/// and the `Origin` header (none allowed: a web page cannot drive it), against DNS
/// rebinding, and bounds request bodies. With tokens, every `/mcp` request needs
/// `Authorization: Bearer <token>` (401 with a `WWW-Authenticate` challenge otherwise).
/// `/healthz` answers `ok` without authentication; `/metrics` (when given) needs it.
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    factory: impl Fn() -> Result<McpServer, std::io::Error> + Send + Sync + 'static,
    shutdown: tokio_util::sync::CancellationToken,
    options: HttpOptions,
) -> std::io::Result<()> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "::1", "[::1]"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    hosts.extend(options.allowed_hosts.iter().cloned());
    // No browser origin is allowed (an MCP client is not a web page); requests without an
    // `Origin` header — every native client — pass.
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .enforce_origin_validation()
        .with_cancellation_token(shutdown.child_token())
        .with_max_request_body_bytes(MAX_HTTP_BODY);
    let service =
        StreamableHttpService::new(factory, Arc::new(LocalSessionManager::default()), config);
    let mut mcp = axum::Router::new().nest_service("/mcp", service);
    if let Some(metrics) = options.metrics.clone() {
        mcp = mcp.route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "text/plain; version=0.0.4",
                        )],
                        metrics.render(),
                    )
                }
            }),
        );
    }
    if let Some(auth) = options.auth.filter(|a| !a.is_empty()) {
        mcp = mcp.layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let auth = auth.clone();
                async move { authenticate(&auth, req, next).await }
            },
        ));
    }
    let router = mcp.route("/healthz", axum::routing::get(|| async { "ok\n" }));
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
}

async fn authenticate(
    auth: &TokenAuth,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::http::{StatusCode, header};
    use axum::response::IntoResponse;
    let presented = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        });
    let (user, why) = match presented {
        None => (None, "missing bearer token"),
        Some(token) => match auth.user_of(token.trim()) {
            Some(user) => (Some(user.to_owned()), ""),
            None => (None, "invalid token"),
        },
    };
    match user {
        Some(user) => {
            tracing::debug!(%user, "authenticated HTTP request");
            let mut req = req;
            req.extensions_mut().insert(AuthUser(user));
            next.run(req).await
        }
        None => {
            tracing::warn!(reason = why, "HTTP request refused");
            let challenge = if presented.is_some() {
                "Bearer realm=\"ringfence\", error=\"invalid_token\""
            } else {
                "Bearer realm=\"ringfence\""
            };
            (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, challenge)],
                format!("{why}: send Authorization: Bearer <token>\n"),
            )
                .into_response()
        }
    }
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
    fn metrics_render_counts_and_histograms() {
        let m = std::sync::Arc::new(super::Metrics::default());
        let guard = m.session();
        m.record("read_file", true, 0.002);
        m.record("read_file", false, 3.0);
        let text = m.render();
        assert!(text.contains("ringfence_tool_calls_total{tool=\"read_file\",outcome=\"ok\"} 1"));
        assert!(
            text.contains("ringfence_tool_calls_total{tool=\"read_file\",outcome=\"error\"} 1")
        );
        assert!(text.contains(
            "ringfence_tool_call_duration_seconds_bucket{tool=\"read_file\",le=\"0.0025\"} 1"
        ));
        assert!(text.contains(
            "ringfence_tool_call_duration_seconds_bucket{tool=\"read_file\",le=\"+Inf\"} 2"
        ));
        assert!(text.contains("ringfence_active_sessions 1"));
        drop(guard);
        assert!(m.render().contains("ringfence_active_sessions 0"));
    }

    #[test]
    fn rfc3339_shape() {
        let t = super::rfc3339_now();
        assert_eq!(t.len(), 24, "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
    }

    #[test]
    fn token_hashes_verify_and_reject() {
        let auth = super::TokenAuth::new(&[
            ("alice".into(), super::token_hash("alice-secret-token")),
            ("bob".into(), super::token_hash("bob-secret-token-2")),
        ])
        .unwrap();
        assert_eq!(auth.user_of("alice-secret-token"), Some("alice"));
        assert_eq!(auth.user_of("bob-secret-token-2"), Some("bob"));
        assert_eq!(auth.user_of("alice-secret-token "), None);
        assert_eq!(auth.user_of(""), None);
        for bad in [
            vec![("".to_string(), super::token_hash("x"))],
            vec![("u".to_string(), "sha256:00".to_string())],
            vec![("u".to_string(), "blake3:zz".to_string())],
            vec![
                ("u".to_string(), super::token_hash("same")),
                ("v".to_string(), super::token_hash("same")),
            ],
        ] {
            assert!(super::TokenAuth::new(&bad).is_err(), "{bad:?}");
        }
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
