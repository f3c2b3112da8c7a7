//! The streamable HTTP transport: authentication, limits, session ownership, shutdown.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::oauth::{AuthFailure, JwtValidator};
use crate::{AuthUser, McpServer, Metrics};

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
            if user == ringfence_tools::LOCAL_USER {
                return Err(format!(
                    "http.tokens[{i}]: the user name `local` is reserved for the stdio user; choose another"
                ));
            }
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

/// Who may use the HTTP transport: bearer tokens from the configuration, JWT access tokens
/// of an OAuth 2.1 authorization server, or both.
#[derive(Debug, Clone, Default)]
pub struct Auth {
    pub tokens: TokenAuth,
    pub jwt: Option<Arc<JwtValidator>>,
}

impl Auth {
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty() && self.jwt.is_none()
    }

    /// The user a presented bearer credential belongs to.
    async fn user_of(&self, token: &str) -> Result<String, AuthFailure> {
        if let Some(user) = self.tokens.user_of(token) {
            return Ok(user.to_owned());
        }
        match &self.jwt {
            // A JWT is three base64url parts; anything else cannot be one.
            Some(jwt) if token.split('.').count() == 3 => jwt.validate(token).await,
            _ => Err(AuthFailure::invalid("the token is not valid")),
        }
    }
}

/// Per-user limits on `/mcp` requests. `0` turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimits {
    /// Requests of one user being answered at once (long-lived event streams not counted).
    pub concurrent: usize,
    /// Sustained requests per second of one user.
    pub rate: f64,
    /// Requests one user may send in a burst above the rate.
    pub burst: f64,
}

impl RateLimits {
    /// Concurrent requests one user may have (`0`: unbounded).
    fn permits(&self) -> usize {
        if self.concurrent == 0 {
            tokio::sync::Semaphore::MAX_PERMITS
        } else {
            self.concurrent
        }
    }
}

impl Default for RateLimits {
    fn default() -> RateLimits {
        RateLimits {
            concurrent: 16,
            rate: 20.0,
            burst: 100.0,
        }
    }
}

/// The TLS settings of HTTPS (made by [`load_tls`]).
pub type TlsConfig = tokio_rustls::rustls::ServerConfig;

/// How the HTTP transport is set up.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Credentials; `None` or empty: no authentication (loopback only).
    pub auth: Option<Arc<Auth>>,
    /// Accepted `Host` names besides the loopback ones (for a non-loopback bind).
    pub allowed_hosts: Vec<String>,
    /// Served at `/metrics` (behind the same authentication as `/mcp`).
    pub metrics: Option<Arc<Metrics>>,
    pub limits: RateLimits,
    /// Serve HTTPS with this certificate chain and key.
    pub tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    /// On shutdown, how long calls already running may take to finish.
    pub shutdown_grace: Duration,
    /// The protected resource metadata (RFC 9728), served at
    /// `/.well-known/oauth-protected-resource` and named in challenges.
    pub resource_metadata: Option<ResourceMetadata>,
}

impl Default for HttpOptions {
    fn default() -> HttpOptions {
        HttpOptions {
            auth: None,
            allowed_hosts: Vec::new(),
            metrics: None,
            limits: RateLimits::default(),
            tls: None,
            shutdown_grace: Duration::from_secs(30),
            resource_metadata: None,
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

/// The TLS settings for HTTPS from PEM files: a certificate chain (leaf first) and its
/// private key (PKCS#8, PKCS#1 or SEC1). Errors name the file and the problem.
#[allow(clippy::disallowed_methods)] // the operator's certificate files, not under a root
pub fn load_tls(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<tokio_rustls::rustls::ServerConfig>, String> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("http.tls_cert {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("http.tls_cert {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "http.tls_cert {}: no PEM certificate in the file",
            cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "http.tls_key {}: no usable PEM private key ({e})",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| format!("http.tls_cert/http.tls_key: the key does not fit the certificate or is unsupported ({e})"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Header read timeout: a client that does not finish its request headers is dropped.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// After the last running call of a shutdown, how long clients get to read its answer.
const LINGER: Duration = Duration::from_secs(1);
/// A TLS handshake that takes longer is dropped.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// State shared by every request: limits, session owners, calls in flight.
#[derive(Debug)]
struct Shared {
    auth: Option<Arc<Auth>>,
    limits: RateLimits,
    users: Mutex<HashMap<String, Arc<UserLimiter>>>,
    /// MCP session id -> the user who opened it.
    owners: Mutex<HashMap<String, String>>,
    draining: AtomicBool,
    inflight: AtomicUsize,
    idle: tokio::sync::Notify,
    challenge_base: String,
    metrics: Option<Arc<Metrics>>,
}

#[derive(Debug)]
struct UserLimiter {
    concurrent: Arc<tokio::sync::Semaphore>,
    /// (tokens left, when last refilled)
    bucket: Mutex<(f64, Instant)>,
}

impl UserLimiter {
    fn is_idle(&self, limits: &RateLimits) -> bool {
        let full = {
            let bucket = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
            limits.rate <= 0.0
                || bucket.0 + bucket.1.elapsed().as_secs_f64() * limits.rate
                    >= limits.burst.max(1.0)
        };
        full && self.concurrent.available_permits() == limits.permits()
    }
}

impl Shared {
    fn limiter(&self, user: &str) -> Arc<UserLimiter> {
        let mut users = self.users.lock().unwrap_or_else(|e| e.into_inner());
        users
            .entry(user.to_owned())
            .or_insert_with(|| {
                Arc::new(UserLimiter {
                    concurrent: Arc::new(tokio::sync::Semaphore::new(self.limits.permits())),
                    bucket: Mutex::new((self.limits.burst.max(1.0), Instant::now())),
                })
            })
            .clone()
    }

    /// Takes one request from `user`'s token bucket; `Err(seconds to wait)` when empty.
    fn take_token(&self, limiter: &UserLimiter) -> Result<(), u64> {
        if self.limits.rate <= 0.0 {
            return Ok(());
        }
        let capacity = self.limits.burst.max(1.0);
        let mut bucket = limiter.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let refill = now.duration_since(bucket.1).as_secs_f64() * self.limits.rate;
        bucket.0 = (bucket.0 + refill).min(capacity);
        bucket.1 = now;
        if bucket.0 >= 1.0 {
            bucket.0 -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - bucket.0) / self.limits.rate).ceil().max(1.0) as u64)
        }
    }

    fn begin(self: &Arc<Self>) -> InflightGuard {
        self.inflight.fetch_add(1, Ordering::SeqCst);
        InflightGuard(self.clone())
    }

    /// The `WWW-Authenticate` value for a failure (or a plain challenge).
    fn challenge(&self, failure: Option<&AuthFailure>) -> String {
        let mut c = self.challenge_base.clone();
        if let Some(f) = failure {
            c.push_str(&format!(
                ", error=\"{}\", error_description=\"{}\"",
                f.error,
                f.description.replace(['"', '\\'], "'")
            ));
            if let Some(scope) = &f.scope {
                c.push_str(&format!(", scope=\"{scope}\""));
            }
        }
        c
    }
}

/// Counts a request in flight until dropped (when its response body has been sent).
#[derive(Debug)]
struct InflightGuard(Arc<Shared>);

impl Drop for InflightGuard {
    fn drop(&mut self) {
        if self.0.inflight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.idle.notify_waiters();
        }
    }
}

/// A response body that keeps its request counted (in flight, and against its user's
/// concurrency) until the last byte is sent: a tool call's answer streams after the
/// handler returned.
struct GuardedBody {
    inner: axum::body::Body,
    _inflight: Option<InflightGuard>,
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

impl http_body::Body for GuardedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        std::pin::Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// MCP streamable HTTP at `/mcp` on `listener`, until `shutdown` is cancelled. Every MCP
/// session gets its own server from `factory` (its own workspace state, read tracker and
/// client roots), bound to the user who opened it.
///
/// Protection: rmcp validates the `Host` header (loopback names, plus `allowed_hosts`) and
/// the `Origin` header (none allowed: a web page cannot drive it) against DNS rebinding, and
/// bounds request bodies. With credentials configured, every `/mcp` request needs
/// `Authorization: Bearer <token>` (401 with a `WWW-Authenticate` challenge otherwise); a
/// session id used by anyone but its owner is answered 404; each user's requests are
/// limited in rate and concurrency (429 with `Retry-After`). Request headers must arrive
/// within 30 s. On shutdown no new request is accepted (503), calls already running get
/// `shutdown_grace` to finish, then sessions are closed.
///
/// `/healthz` answers `ok` without authentication; `/metrics` (when given) needs it;
/// `/.well-known/oauth-protected-resource` serves the RFC 9728 document when configured.
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
    // No browser origin is allowed (an MCP client is not a web page); requests without an
    // `Origin` header — every native client — pass.
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .enforce_origin_validation()
        .with_cancellation_token(sessions_ct.clone())
        .with_max_request_body_bytes(MAX_HTTP_BODY);
    let manager = Arc::new(LocalSessionManager::default());
    let service = StreamableHttpService::new(factory, manager.clone(), config);
    let mut challenge_base = "Bearer realm=\"ringfence\"".to_owned();
    if let Some(meta) = &options.resource_metadata {
        challenge_base.push_str(&format!(", resource_metadata=\"{}\"", meta.url));
    }
    let shared = Arc::new(Shared {
        auth: options.auth.clone().filter(|a| !a.is_empty()),
        limits: options.limits,
        users: Mutex::new(HashMap::new()),
        owners: Mutex::new(HashMap::new()),
        draining: AtomicBool::new(false),
        inflight: AtomicUsize::new(0),
        idle: tokio::sync::Notify::new(),
        challenge_base,
        metrics: options.metrics.clone(),
    });

    let mut protected = axum::Router::new().nest_service("/mcp", service);
    if let Some(metrics) = options.metrics.clone() {
        protected = protected.route(
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
        );
    }
    let gate_state = shared.clone();
    protected = protected.layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let shared = gate_state.clone();
            async move { gate(shared, req, next).await }
        },
    ));
    let mut router = protected.route("/healthz", axum::routing::get(|| async { "ok\n" }));
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

    // Forget owners of sessions rmcp has closed (ended, expired after inactivity).
    let sweeper_state = shared.clone();
    let sweeper_manager = manager.clone();
    let sweeper_ct = sessions_ct.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = sweeper_ct.cancelled() => break,
            }
            let alive: std::collections::HashSet<String> = sweeper_manager
                .sessions
                .read()
                .await
                .keys()
                .map(|k| k.to_string())
                .collect();
            sweeper_state
                .owners
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|id, _| alive.contains(id));
            // Forget limiters of users who are idle: nothing in flight, budget full again.
            let limits = sweeper_state.limits;
            sweeper_state
                .users
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, l| Arc::strong_count(l) > 1 || !l.is_idle(&limits));
        }
    });

    let tls = options.tls.clone().map(tokio_rustls::TlsAcceptor::from);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    // Connections are still accepted while running calls finish: a client may need a new
    // one to deliver what those calls wait for (an answer to roots/list).
    let stop_accepting = tokio_util::sync::CancellationToken::new();
    let accept_stop = stop_accepting.clone();
    let acceptor = tokio::spawn(async move {
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of descriptors and the like: wait a moment rather than spin.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
                _ = accept_stop.cancelled() => break,
            };
            let _ = stream.set_nodelay(true);
            let router = router.clone();
            match &tls {
                None => {
                    let conn = http1().serve_connection(
                        hyper_util::rt::TokioIo::new(stream),
                        hyper_util::service::TowerToHyperService::new(router),
                    );
                    let conn = graceful.watch(conn);
                    tokio::spawn(async move {
                        if let Err(e) = conn.await {
                            tracing::debug!(%peer, error = %e, "HTTP connection ended with an error");
                        }
                    });
                }
                Some(acceptor) => {
                    let acceptor = acceptor.clone();
                    let watcher = graceful.watcher();
                    tokio::spawn(async move {
                        let stream = match tokio::time::timeout(
                            TLS_HANDSHAKE_TIMEOUT,
                            acceptor.accept(stream),
                        )
                        .await
                        {
                            Ok(Ok(s)) => s,
                            Ok(Err(e)) => {
                                tracing::debug!(%peer, error = %e, "TLS handshake failed");
                                return;
                            }
                            Err(_) => {
                                tracing::debug!(%peer, "TLS handshake timed out");
                                return;
                            }
                        };
                        let conn = http1().serve_connection(
                            hyper_util::rt::TokioIo::new(stream),
                            hyper_util::service::TowerToHyperService::new(router),
                        );
                        if let Err(e) = watcher.watch(conn).await {
                            tracing::debug!(%peer, error = %e, "HTTPS connection ended with an error");
                        }
                    });
                }
            }
        }
        graceful
    });

    shutdown.cancelled().await;
    // Shutdown: refuse new requests, let running calls finish, then close the sessions.
    shared.draining.store(true, Ordering::SeqCst);
    let running = shared.inflight.load(Ordering::SeqCst);
    if running > 0 {
        tracing::info!(
            running,
            grace_s = options.shutdown_grace.as_secs_f64(),
            "waiting for running calls to finish"
        );
        let deadline = tokio::time::Instant::now() + options.shutdown_grace;
        loop {
            let idle = shared.idle.notified();
            if shared.inflight.load(Ordering::SeqCst) == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, idle).await.is_err() {
                tracing::warn!(
                    still_running = shared.inflight.load(Ordering::SeqCst),
                    "shutdown grace period over; cancelling the calls still running"
                );
                break;
            }
        }
        // Give clients a moment to take their last answers and end their sessions before
        // the event streams close under them.
        tokio::time::sleep(LINGER).await;
    }
    stop_accepting.cancel();
    let graceful = acceptor.await.map_err(std::io::Error::other)?;
    sessions_ct.cancel();
    if tokio::time::timeout(Duration::from_secs(5), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("some HTTP connections did not close within 5 s");
    }
    Ok(())
}

fn http1() -> hyper::server::conn::http1::Builder {
    let mut b = hyper::server::conn::http1::Builder::new();
    b.timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(Some(HEADER_TIMEOUT));
    b
}

/// In front of `/mcp` and `/metrics`: shutdown, authentication, session ownership, limits.
/// A refusal usually leaves the request body unread, so the connection is closed after it
/// (said in `Connection: close`) rather than reused with stray bytes in it.
async fn gate(
    shared: Arc<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let metrics = shared.metrics.clone();
    let mut response = admit(shared, req, next).await;
    let status = response.status().as_u16();
    if matches!(status, 401 | 403 | 404 | 413 | 429 | 503) {
        if let Some(m) = &metrics {
            m.refused(status);
        }
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

async fn admit(
    shared: Arc<Shared>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    // Shutting down: no new work. Answers and notifications the client owes to calls still
    // running (a roots/list result, a cancellation) still pass, or those calls could not end.
    let req = if shared.draining.load(Ordering::SeqCst) {
        match admit_while_draining(req).await {
            Ok(req) => req,
            Err(refused) => return refused,
        }
    } else {
        req
    };
    let mut req = req;
    let user = match &shared.auth {
        None => ringfence_tools::LOCAL_USER.to_owned(),
        Some(auth) => {
            let presented = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| {
                    v.strip_prefix("Bearer ")
                        .or_else(|| v.strip_prefix("bearer "))
                })
                .map(|t| t.trim().to_owned());
            let result = match &presented {
                None => Err(None),
                Some(token) => auth.user_of(token).await.map_err(Some),
            };
            match result {
                Ok(user) => {
                    req.extensions_mut().insert(AuthUser(user.clone()));
                    user
                }
                Err(failure) => {
                    let why = failure
                        .as_ref()
                        .map(|f| f.description.clone())
                        .unwrap_or_else(|| "missing bearer token".to_owned());
                    tracing::warn!(reason = %why, "HTTP request refused");
                    let status = failure
                        .as_ref()
                        .map(|f| f.status)
                        .unwrap_or(StatusCode::UNAUTHORIZED);
                    let challenge = shared.challenge(failure.as_ref());
                    return (
                        status,
                        [(header::WWW_AUTHENTICATE, challenge)],
                        format!("{why}: send Authorization: Bearer <token>\n"),
                    )
                        .into_response();
                }
            }
        }
    };

    // A session belongs to the user who opened it; to anyone else it does not exist.
    let session_id = req
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if let Some(id) = &session_id {
        let owner = shared
            .owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned();
        if owner.as_deref().is_some_and(|o| o != user) {
            tracing::warn!(%user, "request for another user's MCP session refused");
            return (StatusCode::NOT_FOUND, "session not found\n").into_response();
        }
    }

    let limiter = shared.limiter(&user);
    if let Err(wait) = shared.take_token(&limiter) {
        tracing::info!(%user, wait, "rate limit reached");
        return too_many(
            wait,
            &format!(
                "rate limit: at most {} requests per second (burst {}) per user; retry after {wait} s",
                shared.limits.rate, shared.limits.burst
            ),
        );
    }
    // Event streams (GET) stay open for the whole session: they are not "calls".
    let is_call = req.method() == Method::POST;
    let permit = if is_call {
        match limiter.concurrent.clone().try_acquire_owned() {
            Ok(p) => Some(p),
            Err(_) => {
                tracing::info!(%user, "concurrency limit reached");
                return too_many(
                    1,
                    &format!(
                        "concurrency limit: at most {} requests of one user at a time; retry after 1 s",
                        shared.limits.concurrent
                    ),
                );
            }
        }
    } else {
        None
    };
    let inflight = is_call.then(|| shared.begin());
    let is_delete = req.method() == Method::DELETE;
    let response = next.run(req).await;

    if session_id.is_none()
        && let Some(id) = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
    {
        shared
            .owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_owned(), user.clone());
    }
    if is_delete
        && response.status().is_success()
        && let Some(id) = &session_id
    {
        shared
            .owners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
    }
    if permit.is_none() && inflight.is_none() {
        return response;
    }
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        axum::body::Body::new(GuardedBody {
            inner: body,
            _inflight: inflight,
            _permit: permit,
        }),
    )
}

/// During shutdown: a POST carrying only JSON-RPC responses or notifications passes (its
/// body put back); anything starting new work is answered 503.
async fn admit_while_draining(
    req: axum::extract::Request,
) -> Result<axum::extract::Request, Response> {
    let refuse = || {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "5")],
            "the server is shutting down; retry against the next instance\n",
        )
            .into_response()
    };
    if req.method() != Method::POST {
        // Ending a session, or resuming a stream a running call answers on, still passes.
        let resume = req.method() == Method::GET && req.headers().contains_key("last-event-id");
        return if req.method() == Method::DELETE || resume {
            Ok(req)
        } else {
            Err(refuse())
        };
    }
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_HTTP_BODY)
        .await
        .map_err(|_| refuse())?;
    let starts_work = |m: &serde_json::Value| m.get("method").is_some() && m.get("id").is_some();
    let new_work = match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(serde_json::Value::Array(batch)) => batch.iter().any(starts_work),
        Ok(message) => starts_work(&message),
        Err(_) => true,
    };
    if new_work {
        return Err(refuse());
    }
    Ok(axum::extract::Request::from_parts(
        parts,
        axum::body::Body::from(bytes),
    ))
}

fn too_many(retry_after: u64, message: &str) -> Response {
    let mut r = (StatusCode::TOO_MANY_REQUESTS, format!("{message}\n")).into_response();
    if let Ok(v) = HeaderValue::from_str(&retry_after.to_string()) {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

#[cfg(test)]
mod tests {
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
}
