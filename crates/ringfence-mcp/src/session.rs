//! Which session an MCP session's requests run in, and for whom.

use std::sync::{Arc, Mutex};

use ringfence_tools::{BackendError, CallScope, ToolError, ToolErrorKind};

/// The user an HTTP request was authenticated as (put in the request's extensions by the
/// authentication middleware).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthUser(pub String);

/// Makes the scope (session and spill store) of an authenticated user: their roots, their
/// spill directory.
pub type UserSessions = Arc<dyn Fn(&str) -> Result<CallScope, BackendError> + Send + Sync>;

/// The scope an MCP session works in: fixed (stdio), or made for the user who sent its
/// first request and bound to them from then on (HTTP).
pub(crate) struct SessionSlot {
    make: Option<UserSessions>,
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

    pub(crate) fn per_user(make: UserSessions) -> SessionSlot {
        SessionSlot {
            make: Some(make),
            bound: Mutex::new(None),
        }
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
        let scope =
            make(user).map_err(|e| ToolError::new(ToolErrorKind::Refused, e.to_string()))?;
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
        .unwrap_or_else(|| ringfence_tools::LOCAL_USER.to_owned())
}
