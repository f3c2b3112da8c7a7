//! Which session a request runs in, and for whom.
//!
//! An MCP session (stdio, or an HTTP session opened by `initialize`) has a session of its
//! own. A stateless request (protocol 2026-07-28 over HTTP: no MCP session, a fresh server
//! per request) runs in a session its user's stateless requests share, one per roots answer,
//! kept by the [`UserSessions`] maker between requests.

use std::sync::{Arc, Mutex};

use ringfence_core::{BackendError, CallScope, ToolError, ToolErrorKind};

/// The user an HTTP request was authenticated as (put in the request's extensions by the
/// authentication middleware).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUser(pub String);

/// Makes the scopes (session and spill store) of authenticated users: their roots, their
/// spill directory, and the sessions their stateless requests share.
pub trait UserSessions: Send + Sync {
    /// A new session for one MCP session of `user`: its own current workspace and read
    /// records, which no other session sees.
    fn session(&self, user: &str) -> Result<CallScope, BackendError>;

    /// The session `user`'s stateless requests share, for requests whose client announced
    /// `roots` (`None`: no client roots). Made on first use, narrowed to `roots` before any
    /// request runs in it, and kept between requests, so reads and the current workspace
    /// carry over from one request to the next. Never shared between users; a different
    /// answer gets a different session.
    fn stateless(&self, user: &str, roots: Option<&[String]>) -> Result<CallScope, BackendError>;

    /// Whether the client's roots matter (the configured policy is not `ignore`).
    fn uses_client_roots(&self) -> bool;
}

/// The scope an MCP session works in: fixed (stdio), or made for the user who sent its
/// first request and bound to them from then on (HTTP).
pub(crate) struct SessionSlot {
    make: Option<Arc<dyn UserSessions>>,
    bound: Mutex<Option<(String, CallScope)>>,
}

impl SessionSlot {
    pub(crate) fn fixed(scope: CallScope) -> SessionSlot {
        let user = scope.session.user().to_owned();
        SessionSlot {
            make: None,
            bound: Mutex::new(Some((user, scope))),
        }
    }

    pub(crate) fn per_user(make: Arc<dyn UserSessions>) -> SessionSlot {
        SessionSlot {
            make: Some(make),
            bound: Mutex::new(None),
        }
    }

    /// The maker of users' sessions, when this slot is not fixed (HTTP).
    pub(crate) fn maker(&self) -> Option<&Arc<dyn UserSessions>> {
        self.make.as_ref()
    }

    /// The scope for `user`: made and bound on first use; refused for anyone else.
    pub(crate) fn scope_for(&self, user: &str, session_id: &str) -> Result<CallScope, ToolError> {
        let mut bound = self.bound.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((owner, scope)) = bound.as_ref() {
            if owner == user {
                return Ok(scope.clone());
            }
            tracing::warn!(user = %user.escape_debug(), session = %session_id.escape_debug(), "request for another user's MCP session refused");
            return Err(ToolError::new(
                ToolErrorKind::Refused,
                "this MCP session belongs to another user; start your own session",
            ));
        }
        let make = self
            .make
            .as_ref()
            .ok_or_else(|| ToolError::new(ToolErrorKind::Refused, "this server has no session"))?;
        let scope = make
            .session(user)
            .map_err(|e| ToolError::new(ToolErrorKind::Refused, e.to_string()))?;
        *bound = Some((user.to_owned(), scope.clone()));
        Ok(scope)
    }
}

/// The user a request came from: the one its HTTP authentication named, else the local user.
pub(crate) fn request_user(extensions: &rmcp::model::Extensions) -> String {
    extensions
        .get::<axum::http::request::Parts>()
        .and_then(|p| p.extensions.get::<AuthUser>())
        .map(|u| u.0.clone())
        .unwrap_or_else(|| ringfence_core::LOCAL_USER.to_owned())
}
