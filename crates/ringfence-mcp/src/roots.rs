//! The client's MCP roots: asked for after `initialized` and on `roots/list_changed`, handed
//! to the session (which decides, by the operator's policy, what they may change), and
//! waited for before a tool call runs.
//!
//! Protocol 2026-07-28 has no sessions and forbids server-to-client requests: each request
//! carries the client's capabilities in its `_meta`. A tool call whose client declares roots
//! there is answered with an `input_required` result asking for `roots/list` (SEP-2322,
//! multi round-trip requests); the client's retry carries the answer, which is applied before
//! the call runs — never the wider configured roots in its place. Over stdio the answer
//! narrows the connection's one session (an unchanged answer leaves it as it is); over HTTP,
//! where each such request gets a server of its own, it picks the session of the user's
//! stateless requests made for that answer (`UserSessions::stateless`), narrowed once when
//! made; an answer that cannot be read runs the call in a fresh session, blocked.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::RoleServer;
#[allow(deprecated)] // MCP roots (SEP-2577 deprecates them; clients still send them)
use rmcp::model::ListRootsRequest;
use rmcp::model::{CallToolRequestParams, InputRequest, InputRequiredResult, ProtocolVersion};
use rmcp::service::{Peer, RequestContext};

use ringfence_core::{Session, ToolError, ToolErrorKind};

use crate::server::McpServer;

/// Set once the client's roots (if it has any) were applied; tool calls wait for it.
#[derive(Debug, Default)]
pub(crate) struct RootsReady {
    done: AtomicBool,
    notify: tokio::sync::Notify,
    /// The roots last applied from a 2026-07-28 request's answer: a later request answering
    /// the same leaves the session as it is (its sub-roots, so its read records, stay).
    applied: Mutex<Option<Vec<String>>>,
}

/// The key of the `roots/list` request in an `input_required` result, and of its answer in
/// the retry's `inputResponses`.
const ROOTS_INPUT: &str = "roots";

/// Whether `ctx` is a request of protocol 2026-07-28 or later (its own `_meta` carries the
/// client's capabilities; the server may not send requests to the client).
pub(crate) fn is_inline(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// Whether the request's own `_meta` declares the roots capability.
#[allow(deprecated)]
fn request_declares_roots(ctx: &RequestContext<RoleServer>) -> bool {
    ctx.meta
        .client_capabilities()
        .is_some_and(|caps| caps.roots.is_some())
}

/// What a tool call's request says about the client's roots.
pub(crate) enum RootsAnswer {
    /// Roots play no part: an older protocol (the session's roots apply), a client without
    /// the roots capability, or the policy `ignore`.
    NotInPlay,
    /// The client declares roots but sent no answer: ask for them (`input_required`).
    Ask(InputRequiredResult),
    /// The client's answer: its roots' URIs, in its order.
    Roots(Vec<String>),
    /// The client's answer is not a roots list (the reason, for the refusal): fail closed.
    Unreadable(String),
}

/// The roots a 2026-07-28 request declaring the roots capability brings: the answer in its
/// `inputResponses`, or the request to ask for it. `uses_client_roots`: the policy is not
/// `ignore`.
#[allow(deprecated)]
pub(crate) fn roots_answer(
    ctx: &RequestContext<RoleServer>,
    request: &CallToolRequestParams,
    uses_client_roots: bool,
) -> RootsAnswer {
    if !is_inline(ctx) || !request_declares_roots(ctx) || !uses_client_roots {
        return RootsAnswer::NotInPlay;
    }
    let Some(answer) = request
        .input_responses
        .as_ref()
        .and_then(|r| r.get(ROOTS_INPUT))
    else {
        let ask = BTreeMap::from([(
            ROOTS_INPUT.to_owned(),
            InputRequest::ListRoots(ListRootsRequest::default()),
        )]);
        return RootsAnswer::Ask(InputRequiredResult::from_input_requests(ask));
    };
    match serde_json::from_value::<rmcp::model::ListRootsResult>(answer.clone()) {
        Ok(result) => match too_many(result.roots.len()) {
            Some(why) => RootsAnswer::Unreadable(why),
            None => RootsAnswer::Roots(result.roots.into_iter().map(|r| r.uri).collect()),
        },
        Err(e) => {
            tracing::warn!(error = %e.to_string().escape_debug(), "the request's roots answer is unreadable; refusing file access");
            RootsAnswer::Unreadable(format!("its roots/list answer is not valid: {e}"))
        }
    }
}

/// The most roots a client's answer may name. Each one inside a configured root is opened
/// and held as a directory handle for as long as the session lives (a user's stateless
/// sessions are kept between requests), so the count is bounded; an answer naming more
/// fails closed, like an unreadable one.
const MAX_CLIENT_ROOTS: usize = 64;

/// Why an answer naming `count` roots is refused, if it names too many.
fn too_many(count: usize) -> Option<String> {
    (count > MAX_CLIENT_ROOTS)
        .then(|| format!("it names {count} roots; at most {MAX_CLIENT_ROOTS} are accepted"))
}

/// How long a tool call waits for the client to answer `roots/list`.
const ROOTS_WAIT: Duration = Duration::from_secs(10);

/// Whether the client declared the roots capability.
#[allow(deprecated)]
fn declares_roots(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info()
        .is_some_and(|info| info.capabilities.roots.is_some())
}

impl McpServer {
    /// Asks a client that announces roots for them and hands them to the session. Roots are
    /// deprecated by the specification's SEP-2577 but still what desktop clients send;
    /// without them the configured roots apply unchanged.
    #[allow(deprecated)]
    pub(crate) async fn refresh_client_roots(&self, peer: Peer<RoleServer>, user: &str) {
        let session = match self.scope_for(user) {
            Ok(scope) => scope.session,
            Err(why) => {
                tracing::warn!(why = %why.message.escape_debug(), "client roots not applied");
                return;
            }
        };
        if declares_roots(&peer) && session.uses_client_roots() {
            // Whatever a 2026-07-28 request applied before is replaced.
            *self
                .roots_ready()
                .applied
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
            match peer.list_roots().await {
                Ok(result) => match too_many(result.roots.len()) {
                    Some(why) => {
                        tracing::warn!(why = %why.escape_debug(), "roots/list answer refused; refusing file access");
                        session.client_roots_failed(&why);
                    }
                    None => {
                        let uris: Vec<String> = result.roots.into_iter().map(|r| r.uri).collect();
                        let summary = session.apply_client_roots(&uris);
                        tracing::info!(summary = %summary.escape_debug(), "client roots applied");
                    }
                },
                Err(e) => {
                    // Fail closed: without the client's answer, the narrowing it asked for
                    // (by declaring roots) cannot be honoured.
                    tracing::warn!(error = %e.to_string().escape_debug(), "roots/list failed; refusing file access");
                    session.client_roots_failed(&e.to_string());
                }
            }
        }
        let ready = self.roots_ready();
        ready.done.store(true, Ordering::SeqCst);
        ready.notify.notify_waiters();
    }

    /// Before a tool call of protocol 2026-07-28 or later whose client declares roots in the
    /// request's `_meta`, in a session of its own (stdio): apply the answer the client sent
    /// with the request to the session, or return the `input_required` result asking for it
    /// (the call does not run then). An answer that cannot be read blocks file access (fail
    /// closed), as a failed `roots/list` does for a session. Other requests are left to the
    /// session's roots ([`Self::wait_for_roots`]). Stateless HTTP requests do not come here:
    /// they pick their user's session by the answer (`McpServer::stateless_scope`).
    pub(crate) fn roots_for_request(
        &self,
        ctx: &RequestContext<RoleServer>,
        request: &CallToolRequestParams,
        session: &Session,
    ) -> Option<InputRequiredResult> {
        let uris = match roots_answer(ctx, request, session.uses_client_roots()) {
            RootsAnswer::NotInPlay => return None,
            RootsAnswer::Ask(ask) => return Some(ask),
            RootsAnswer::Roots(uris) => uris,
            RootsAnswer::Unreadable(why) => {
                session.client_roots_failed(&why);
                *self
                    .roots_ready()
                    .applied
                    .lock()
                    .unwrap_or_else(|e| e.into_inner()) = None;
                return None;
            }
        };
        let mut applied = self
            .roots_ready()
            .applied
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if applied.as_ref() != Some(&uris) || session.workspace.blocked().is_some() {
            let summary = session.apply_client_roots(&uris);
            tracing::debug!(summary = %summary.escape_debug(), "client roots of the request applied");
            *applied = Some(uris);
        }
        None
    }

    /// Before a tool call: if the client declared roots, wait until they were applied, so no
    /// call runs against the wider configured roots in the meantime.
    pub(crate) async fn wait_for_roots(
        &self,
        peer: &Peer<RoleServer>,
        session: &Session,
    ) -> Result<(), ToolError> {
        if !declares_roots(peer) || !session.uses_client_roots() {
            return Ok(());
        }
        let ready = self.roots_ready();
        let notified = ready.notify.notified();
        if ready.done.load(Ordering::SeqCst) {
            return Ok(());
        }
        match tokio::time::timeout(ROOTS_WAIT, notified).await {
            Ok(()) => Ok(()),
            Err(_) if ready.done.load(Ordering::SeqCst) => Ok(()),
            Err(_) => Err(ToolError::new(
                ToolErrorKind::OutsideWorkspace,
                format!(
                    "the MCP client declared roots but has not answered roots/list within {} s; file access is refused until it does",
                    ROOTS_WAIT.as_secs()
                ),
            )),
        }
    }
}
