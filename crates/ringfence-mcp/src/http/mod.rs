//! The streamable HTTP transport: authentication, limits, session ownership, shutdown.
//!
//! [`serve_http`] wires the parts: [`auth`] tells who sends a request, [`limits`] bounds each
//! user's requests and streams, [`sessions`] counts each user's MCP sessions, [`body`] reads
//! request bodies under their limits, [`admission`] is the gate every `/mcp` request passes
//! (authentication first, session ownership, shutdown, limits, calls in flight), [`refusal`]
//! is the shape of every refusal, [`listener`] accepts the connections, [`tls`] loads HTTPS.

use std::sync::Arc;
use std::time::Duration;

use axum::http::header;

use crate::{McpServer, Metrics};

mod admission;
mod auth;
pub(crate) mod body;
mod limits;
mod listener;
mod origins;
mod refusal;
mod sessions;
pub mod settings;
mod shared;
mod streams;
mod tls;

pub use auth::{Auth, MetricsToken, TokenAuth, TokenConfigError, token_hash};
pub use limits::{RateLimits, open_request_slots};
pub use origins::{InvalidOrigin, normalize_origin};
pub use shared::SessionDirectory;
pub(crate) use streams::{StreamWatch, event_stream_check};
pub use tls::{TlsConfig, TlsError, load_tls};

/// How the HTTP transport is set up.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Credentials; `None` or empty: no authentication (loopback only).
    pub auth: Option<Arc<Auth>>,
    /// Accepted `Host` names besides the loopback ones (for a non-loopback bind).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted besides the server's own (each accepted host on the port it
    /// listens on), as [`normalize_origin`] writes them.
    pub allowed_origins: Vec<String>,
    /// Served at `/metrics`, to the operator only: with credentials configured, to
    /// `metrics_token` (no one without it); without, on the loopback-only server, to anyone.
    pub metrics: Option<Arc<Metrics>>,
    pub metrics_token: Option<MetricsToken>,
    pub limits: RateLimits,
    /// Largest request body (a write_file of a big file fits the default 64 MiB).
    pub max_body_bytes: usize,
    /// Bytes of request bodies held at once over all requests.
    pub max_buffered_bytes: usize,
    /// A request body must have arrived whole within this (`None`: no limit).
    pub body_timeout: Option<Duration>,
    /// An event stream that carries nothing (keep-alive pings aside) for this long is
    /// closed; clients reconnect when they need it (`None`: never).
    pub stream_idle: Option<Duration>,
    /// Calls and event streams open at once over all users (`0`: no cap); see
    /// [`open_request_slots`] for a value that keeps a reserve of descriptors.
    pub max_open_requests: usize,
    /// Serve HTTPS with this certificate chain and key.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// On shutdown, how long calls already running may take to finish.
    pub shutdown_grace: Duration,
    /// The protected resource metadata (RFC 9728), served at
    /// `/.well-known/oauth-protected-resource` and named in challenges.
    pub resource_metadata: Option<ResourceMetadata>,
    /// Sessions shared with other instances (see [`SessionDirectory`]); `None`: this
    /// instance's sessions live in its memory only.
    pub shared_sessions: Option<Arc<dyn SessionDirectory>>,
    /// The settings page at `/settings` (`None`: not served).
    pub settings: Option<settings::SettingsPage>,
}

impl Default for HttpOptions {
    fn default() -> HttpOptions {
        HttpOptions {
            auth: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            metrics: None,
            metrics_token: None,
            limits: RateLimits::default(),
            max_body_bytes: 64 << 20,
            max_buffered_bytes: 256 << 20,
            body_timeout: Some(Duration::from_secs(60)),
            stream_idle: Some(Duration::from_secs(300)),
            max_open_requests: 0,
            tls: None,
            shutdown_grace: Duration::from_secs(30),
            resource_metadata: None,
            shared_sessions: None,
            settings: None,
        }
    }
}

/// RFC 9728 protected resource metadata: the document and the URL it is published at.
#[derive(Debug, Clone)]
pub struct ResourceMetadata {
    pub document: serde_json::Value,
    /// Absolute URL of the document, given to clients in `WWW-Authenticate`.
    pub url: String,
}

/// MCP streamable HTTP at `/mcp` on `listener`, until `shutdown` is cancelled. Every MCP
/// session gets its own server from `factory` (its own workspace state, read tracker and
/// client roots), bound to the user who opened it.
///
/// Protection: rmcp validates the `Host` header (loopback names, plus `allowed_hosts`) and
/// the `Origin` header (the server's own origins and `allowed_origins`; see [`origins`])
/// against DNS rebinding. With
/// credentials configured, every `/mcp` request needs `Authorization: Bearer <token>` (401
/// with a `WWW-Authenticate` challenge otherwise), checked before any of its body is read; a
/// session id used by anyone but its owner is answered 404; each user's requests are limited
/// in rate and concurrency and their event streams in number as `limits` say (429 with
/// `Retry-After`), and at the cap on MCP sessions the user's longest-unused idle session
/// makes way for a new one (429 only when every one is busy); calls and streams over all
/// users are capped (503). Request headers must
/// arrive within 30 s and bodies within `body_timeout` (408), no larger than
/// `max_body_bytes` (413) and within the server's budget of buffered bytes (503). On shutdown
/// no new request is accepted (503), calls already running get `shutdown_grace` to finish,
/// then sessions are closed. Every refusal carries a JSON-RPC error naming the limit and the
/// setting that raises it.
///
/// `/healthz` answers `ok` without authentication; `/metrics` (when given) only to the
/// operator; `/.well-known/oauth-protected-resource` serves the RFC 9728 document when
/// configured.
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
    // Closing the MCP sessions (and their event streams) is the last step of a shutdown.
    let sessions_ct = tokio_util::sync::CancellationToken::new();
    // A page of the server's own origin, or of one the operator allowed, may send requests;
    // any other browser origin is refused. Requests without an `Origin` header — every
    // native client — pass.
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let settings_page = options.settings.clone().map(|page| {
        Arc::new(settings::Settings::new(
            page,
            options.auth.clone(),
            hosts.clone(),
            options.tls.is_some(),
        ))
    });
    let mut origins = origins::own_origins(scheme, &hosts, listener.local_addr()?.port());
    origins.extend(options.allowed_origins.iter().cloned());
    let mut config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_cancellation_token(sessions_ct.clone())
        .with_max_request_body_bytes(options.max_body_bytes);
    let mut manager = LocalSessionManager::default();
    if let Some(dir) = &options.shared_sessions {
        // Sessions re-created on any instance from the client's `initialize`, and every
        // event written to the shared log before it is sent (see `shared`).
        config.session_store = Some(Arc::new(shared::SharedSessions(dir.clone())));
        manager = manager.with_event_store(Arc::new(shared::SharedEvents(dir.clone())));
    }
    let manager = Arc::new(manager);
    let service = StreamableHttpService::new(factory, manager.clone(), config);
    let gate = Arc::new(admission::Gate::new(admission::GateParts {
        auth: auth::Authenticator::new(options.auth.clone(), options.resource_metadata.as_ref()),
        metrics_token: options.metrics_token.clone(),
        limiters: limits::Limiters::new(options.limits, options.max_open_requests),
        body: body::BodyLimits::new(
            options.max_body_bytes,
            options.body_timeout,
            options.max_buffered_bytes,
        ),
        stream_idle: options.stream_idle,
        manager: manager.clone(),
        metrics: options.metrics.clone(),
        directory: options.shared_sessions.clone(),
    }));

    let gate_state = gate.clone();
    let mut router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let gate = gate_state.clone();
                    async move { admission::gate(gate, req, next).await }
                },
            ));
    if let Some(metrics) = options.metrics.clone() {
        let gate_state = gate.clone();
        let metrics_route = axum::Router::new()
            .route(
                "/metrics",
                axum::routing::get(move || {
                    let metrics = metrics.clone();
                    async move {
                        (
                            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                            metrics.render(),
                        )
                    }
                }),
            )
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let gate = gate_state.clone();
                    async move { admission::operator_gate(gate, req, next).await }
                },
            ));
        router = router.merge(metrics_route);
    }
    router = router.route("/healthz", axum::routing::get(|| async { "ok\n" }));
    if let Some(page) = settings_page {
        router = router.merge(settings::router(page));
    }
    if let Some(meta) = options.resource_metadata.clone() {
        let doc = Arc::new(meta.document);
        let handler = move || {
            let doc = doc.clone();
            async move { axum::Json(doc.as_ref().clone()) }
        };
        router = router
            .route(
                "/.well-known/oauth-protected-resource",
                axum::routing::get(handler.clone()),
            )
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                axum::routing::get(handler),
            );
    }

    // Forget owners of sessions rmcp has closed (ended, expired after inactivity), and the
    // limiters of idle users.
    let sweeper_gate = gate.clone();
    let sweeper_ct = sessions_ct.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = sweeper_ct.cancelled() => break,
            }
            sweeper_gate.sweep().await;
        }
    });

    // Connections are still accepted while running calls finish: a client may need a new
    // one to deliver what those calls wait for (an answer to roots/list).
    let acceptor = listener::Acceptor::spawn(listener, router, options.tls.clone());

    shutdown.cancelled().await;
    // Shutdown: refuse new requests, let running calls finish, then close the sessions.
    gate.drain(options.shutdown_grace).await;
    let connections = acceptor.stop().await?;
    sessions_ct.cancel();
    connections.close().await;
    Ok(())
}
