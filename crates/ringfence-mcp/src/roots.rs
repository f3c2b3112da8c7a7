//! The client's MCP roots: asked for after `initialized` and on `roots/list_changed`, handed
//! to the session (which decides, by the operator's policy, what they may change), and
//! waited for before a tool call runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::service::Peer;

use ringfence_tools::{Session, ToolError, ToolErrorKind};

use crate::server::McpServer;

/// Set once the client's roots (if it has any) were applied; tool calls wait for it.
#[derive(Debug, Default)]
pub(crate) struct RootsReady {
    done: AtomicBool,
    notify: tokio::sync::Notify,
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
                tracing::warn!(why = %why.message, "client roots not applied");
                return;
            }
        };
        if declares_roots(&peer) && session.uses_client_roots() {
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
        let ready = self.roots_ready();
        ready.done.store(true, Ordering::SeqCst);
        ready.notify.notify_waiters();
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
