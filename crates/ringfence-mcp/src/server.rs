//! `McpServer`: rmcp's `ServerHandler` over a [`ToolRunner`] and a [`ResourceSet`].

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, InitializeRequestParams, InitializeResult,
    ListPromptsResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams, Prompt,
    PromptMessage, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, Role as PromptMessageRole, ServerCapabilities, ServerConfig, Tool as McpTool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use ringfence_core::live::{LiveSessions, Registration};
use ringfence_core::{CallRequest, CallScope, ResourceSet, ToolError, ToolRunner};

use crate::convert::{content_block, mcp_tool, progress_for, quick_blocking};
use crate::metrics::{Metrics, SessionGuard};
use crate::notices::{ListenNotices, SessionNotices, Wants};

use crate::roots::{RootsAnswer, RootsReady, is_inline, roots_answer};
use crate::session::{SessionSlot, UserSessions, request_user};

/// Identity and instructions the server announces at `initialize`.
#[derive(Debug, Clone)]
pub struct ServerIdentity {
    pub name: String,
    pub version: String,
    pub instructions: String,
}

/// One MCP session's server. Cheap to clone.
#[derive(Clone)]
pub struct McpServer {
    runner: Arc<ToolRunner>,
    /// The runner's tools in MCP form, made once.
    tools: Arc<Vec<McpTool>>,
    resources: Arc<ResourceSet>,
    slot: Arc<SessionSlot>,
    /// Counts this session while any clone of the server lives.
    session_guard: Option<Arc<SessionGuard>>,
    /// Names this MCP session in the audit trail.
    session_id: Arc<str>,
    identity: Arc<ServerIdentity>,
    roots_ready: Arc<RootsReady>,
    /// Where this session registers to be told things (due follow-ups), if anywhere.
    live: Option<Arc<LiveSessions>>,
    /// What the client asked to hear (log level, resource subscriptions).
    wants: Arc<Wants>,
    /// This session's place in `live`, from `notifications/initialized` until the last
    /// clone of the server is gone with the session.
    registration: Arc<std::sync::Mutex<Option<Registration>>>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("tools", self.runner.toolbox())
            .field("session", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl McpServer {
    /// A server for one session (stdio, tests): every call runs in `scope`.
    pub fn new(
        runner: Arc<ToolRunner>,
        resources: Arc<ResourceSet>,
        scope: CallScope,
        identity: ServerIdentity,
    ) -> McpServer {
        Self::with_slot(runner, resources, SessionSlot::fixed(scope), identity)
    }

    /// A server for HTTP, where several users connect. In an MCP session the scope is made
    /// by `sessions` for the user of the first request, and requests of anyone else are
    /// refused. A stateless request (protocol 2026-07-28: no MCP session, this server made
    /// for it alone) runs in the session its user's stateless requests share.
    pub fn for_users(
        runner: Arc<ToolRunner>,
        resources: Arc<ResourceSet>,
        sessions: Arc<dyn UserSessions>,
        identity: ServerIdentity,
    ) -> McpServer {
        Self::with_slot(runner, resources, SessionSlot::per_user(sessions), identity)
    }

    fn with_slot(
        runner: Arc<ToolRunner>,
        resources: Arc<ResourceSet>,
        slot: SessionSlot,
        identity: ServerIdentity,
    ) -> McpServer {
        let tools = runner
            .toolbox()
            .iter()
            .map(|t| mcp_tool(t.as_ref()))
            .collect();
        McpServer {
            runner,
            tools: Arc::new(tools),
            resources,
            slot: Arc::new(slot),
            session_guard: None,
            session_id: uuid::Uuid::new_v4().simple().to_string().into(),
            identity: Arc::new(identity),
            roots_ready: Arc::new(RootsReady::default()),
            live: None,
            wants: Arc::default(),
            registration: Arc::default(),
        }
    }

    /// Registers the session in `live` once the client is initialized, so that it is told
    /// what falls due (`notifications/message`, resource updates, `subscriptions/listen`).
    pub fn with_live(mut self, live: Option<Arc<LiveSessions>>) -> McpServer {
        self.live = live;
        self
    }

    /// Registers this session of `user` (after `notifications/initialized`): reachable at
    /// any time over stdio; over HTTP only while an event stream of its session is open.
    fn register(&self, ctx: &NotificationContext<RoleServer>, user: &str) {
        let Some(live) = &self.live else { return };
        let watch = crate::http::event_stream_check(&ctx.extensions);
        let reachable: Arc<dyn Fn() -> bool + Send + Sync> = match &watch {
            Some(w) => w.open.clone(),
            None if ctx.extensions.get::<axum::http::request::Parts>().is_some() => {
                // HTTP without a session id: nothing can reach it between requests.
                Arc::new(|| false)
            }
            None => Arc::new(|| true),
        };
        if let Some(w) = watch {
            keep_alive(ctx.peer.clone(), w, Arc::downgrade(&self.registration));
        }
        let sink = Arc::new(SessionNotices {
            peer: ctx.peer.clone(),
            wants: self.wants.clone(),
            reachable,
        });
        let registration = live.register(user, sink);
        *self.registration.lock().unwrap_or_else(|e| e.into_inner()) = Some(registration);
    }

    /// Counts this session in `metrics` while it lives (calls are counted by the runner).
    pub fn with_metrics(mut self, metrics: &Arc<Metrics>) -> McpServer {
        self.session_guard = Some(metrics.session());
        self
    }

    /// Refuses a URI no resource of this server has.
    fn known_resource(&self, uri: &str) -> Result<(), ErrorData> {
        if self.resources.resources().iter().any(|r| r.uri == uri) {
            Ok(())
        } else {
            Err(ErrorData::resource_not_found(
                format!("no resource {uri}; resources/list names the ones there are"),
                None,
            ))
        }
    }

    pub(crate) fn roots_ready(&self) -> &RootsReady {
        &self.roots_ready
    }

    /// The scope for `user`: made and bound on first use; refused for anyone else.
    pub(crate) fn scope_for(&self, user: &str) -> Result<CallScope, ToolError> {
        self.slot.scope_for(user, &self.session_id)
    }

    /// Whether `ctx` is a stateless HTTP request: protocol 2026-07-28 or later on a server
    /// made per request (stdio keeps its one session in every protocol version).
    fn is_stateless(&self, ctx: &RequestContext<RoleServer>) -> bool {
        self.slot.maker().is_some() && is_inline(ctx)
    }

    /// The user a request acts for: in an MCP session, once the session is bound to them (a
    /// request from anyone else is refused, as tool calls are); a stateless request acts
    /// for the user who sent it.
    fn acting_user(&self, ctx: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
        let user = request_user(&ctx.extensions);
        if self.is_stateless(ctx) {
            return Ok(user);
        }
        self.scope_for(&user)
            .map(|scope| scope.session.user().to_owned())
            .map_err(|why| ErrorData::invalid_request(why.message, None))
    }

    /// The scope of a stateless request of `user`: the session their stateless requests
    /// share for the roots this one brings (asking for them first when the client declares
    /// roots and sent none). An unreadable answer gets a session of its own, blocked (fail
    /// closed), so it neither runs wide nor spoils the shared ones.
    fn stateless_scope(
        &self,
        ctx: &RequestContext<RoleServer>,
        request: &CallToolRequestParams,
        make: &Arc<dyn UserSessions>,
        user: &str,
    ) -> Result<Result<CallScope, ToolError>, rmcp::model::InputRequiredResult> {
        let refused = |e: ringfence_core::BackendError| {
            ToolError::new(ringfence_core::ToolErrorKind::Refused, e.to_string())
        };
        Ok(match roots_answer(ctx, request, make.uses_client_roots()) {
            RootsAnswer::Ask(ask) => return Err(ask),
            RootsAnswer::NotInPlay => make.stateless(user, None).map_err(refused),
            RootsAnswer::Roots(uris) => make.stateless(user, Some(&uris)).map_err(refused),
            RootsAnswer::Unreadable(why) => make.session(user).map_err(refused).inspect(|scope| {
                scope.session.client_roots_failed(&why);
            }),
        })
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

/// While the session lives (its server's `registration` is held) and its client has an event
/// stream open, pings the client every `watch.ping_every`: traffic that keeps rmcp's session
/// and the gate's idle stream from being ended under a client that is only listening.
fn keep_alive(
    peer: rmcp::Peer<RoleServer>,
    watch: crate::http::StreamWatch,
    alive: std::sync::Weak<std::sync::Mutex<Option<Registration>>>,
) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(watch.ping_every).await;
            if alive.strong_count() == 0 || peer.is_transport_closed() {
                return;
            }
            if (watch.open)() {
                let ping = rmcp::model::ServerRequest::PingRequest(Default::default());
                let answer = tokio::time::timeout(
                    std::time::Duration::from_secs(30),
                    peer.send_request(ping),
                )
                .await;
                tracing::debug!(
                    answered = matches!(answer, Ok(Ok(_))),
                    "pinged a listening client"
                );
            }
        }
    });
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let capabilities = if self.resources.is_empty() {
            ServerCapabilities::builder().enable_tools().build()
        } else if self.live.is_some() {
            // Clients may subscribe to resources (told when due follow-ups change) and
            // hear notices as log messages.
            #[allow(deprecated)]
            let c = ServerCapabilities::builder()
                .enable_logging()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .build();
            c
        } else {
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .enable_resources()
                .build()
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
        if !self.resources.is_empty()
            && let Ok(user) = self.acting_user(&ctx)
            && let Some(extra) = quick_blocking(|| self.resources.instructions(&user))
        {
            result.instructions = Some(format!(
                "{}\n\n{extra}",
                result.instructions.unwrap_or_default()
            ));
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
            .resources()
            .into_iter()
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
        let user = self.acting_user(&ctx)?;
        let uri = request.uri.clone();
        match quick_blocking(|| self.resources.read(&user, &uri)) {
            None => Err(ErrorData::resource_not_found(
                format!("no resource {uri}; resources/list names the ones there are"),
                None,
            )),
            Some(Err(e)) => Err(ErrorData::internal_error(e.to_string(), None)),
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
            .prompts()
            .into_iter()
            .map(|p| Prompt::new(p.name, Some(p.description), None).with_title(p.title))
            .collect();
        Ok(ListPromptsResult::with_all_items(items))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let user = self.acting_user(&ctx)?;
        let name = request.name.clone();
        match quick_blocking(|| self.resources.prompt(&user, &name)) {
            None => Err(ErrorData::invalid_params(
                format!("no prompt `{name}`; prompts/list names the ones there are"),
                None,
            )),
            Some(Err(e)) => Err(ErrorData::internal_error(e.to_string(), None)),
            Some(Ok(prompt)) => {
                let mut result = GetPromptResult::new(vec![PromptMessage::new_text(
                    PromptMessageRole::User,
                    prompt.text,
                )]);
                result.description = Some(prompt.description);
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
        self.register(&ctx, &user);
        self.refresh_client_roots(ctx.peer, &user).await;
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.acting_user(&ctx)?;
        self.wants.set_level(request.level);
        Ok(())
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.acting_user(&ctx)?;
        self.known_resource(&request.uri)?;
        self.wants.subscribe(&request.uri, true);
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        ctx: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.acting_user(&ctx)?;
        self.wants.subscribe(&request.uri, false);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &rmcp::model::SubscriptionFilter,
    ) -> Option<rmcp::model::SubscriptionFilter> {
        self.live.as_ref()?;
        let ours: Vec<String> = self
            .resources
            .resources()
            .into_iter()
            .map(|r| r.uri.to_owned())
            .filter(|u| {
                requested
                    .resource_subscriptions
                    .as_ref()
                    .is_some_and(|asked| asked.contains(u))
            })
            .collect();
        Some(
            rmcp::model::SubscriptionFilter::builder()
                .resource_subscriptions(ours)
                .build(),
        )
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let user = self.acting_user(subscription.request_context())?;
        let _registration = self.live.as_ref().map(|live| {
            live.register(
                &user,
                Arc::new(ListenNotices {
                    sink: subscription.sink().clone(),
                }),
            )
        });
        subscription.cancelled().await;
        Ok(())
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
        let received = std::time::Instant::now();
        let user = request_user(&ctx.extensions);
        let (scope, ready) = if self.is_stateless(&ctx)
            && let Some(make) = self.slot.maker()
        {
            // Stateless: the user's shared session, already narrowed to this request's
            // roots; nothing to wait for.
            match self.stateless_scope(&ctx, &request, make, &user) {
                Ok(scope) => (scope, None),
                Err(ask) => return Ok(CallToolResponse::InputRequired(ask)),
            }
        } else {
            let scope = self.scope_for(&user);
            // Where the session may move between instances, what families share of it
            // follows it under the transport's session id.
            if let Ok(scope) = &scope
                && let Some(id) = transport_session_id(&ctx)
            {
                scope.session.set_key(id);
            }
            // A 2026-07-28 request declaring roots runs narrowed to the roots it sent, or
            // asks for them first; never against the wider configured roots.
            if let Ok(scope) = &scope
                && let Some(ask) = self.roots_for_request(&ctx, &request, &scope.session)
            {
                return Ok(CallToolResponse::InputRequired(ask));
            }
            // The call may start once the client's roots (if it declared any) are applied.
            let ready = scope.as_ref().ok().map(|scope| {
                let session = scope.session.clone();
                let peer = ctx.peer.clone();
                let server = self.clone();
                Box::pin(async move { server.wait_for_roots(&peer, &session).await })
                    as ringfence_core::BoxFuture<'static, _>
            });
            (scope, ready)
        };
        let outcome = self
            .runner
            .call(CallRequest {
                tool: &request.name,
                args: Value::Object(request.arguments.unwrap_or_default()),
                user: &user,
                session_id: &self.session_id,
                scope,
                received,
                cancel: ctx.ct.clone(),
                progress: progress_for(&ctx),
                ready,
                // The client's own model, for tools that sample it (delegate_task with
                // [llm] provider = "sampling"): this call's client, if it offers sampling.
                sampler: crate::sampling::sampler_for(&ctx.peer),
            })
            .await;
        let result = match outcome {
            Err(unknown) => {
                return Err(ErrorData::invalid_params(
                    unknown.to_string(),
                    Some(json!({ "name": unknown.name })),
                ));
            }
            Ok(result) => result,
        };
        let response = match result {
            Ok(output) => {
                let blocks = output.content.into_iter().map(content_block).collect();
                let mut r = CallToolResult::success(blocks);
                r.structured_content = output.structured;
                r
            }
            Err(err) => {
                // The message as it is: `isError` says it is one, and the seeds quote their
                // errors without a prefix (prompts written for them match on the words).
                let mut r = CallToolResult::error(vec![ContentBlock::text(err.message.clone())]);
                r.structured_content =
                    Some(json!({ "error": err.kind.as_str(), "message": err.message }));
                r
            }
        };
        Ok(response.into())
    }
}

/// The transport's id of the MCP session a request came in (HTTP), if it has one.
fn transport_session_id(ctx: &RequestContext<RoleServer>) -> Option<&str> {
    ctx.extensions
        .get::<axum::http::request::Parts>()?
        .headers
        .get("mcp-session-id")?
        .to_str()
        .ok()
}
