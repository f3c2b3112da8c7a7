//! Per-session state: the workspace view every family works in, who the session is for,
//! its key, and what each family keeps per session (their own types; the core knows none).

use std::path::PathBuf;
use std::sync::OnceLock;

use ringfence_fs::{ClientRoots, Workspace};

use crate::plug::Shared;

/// The user of a stdio server, or of HTTP without authentication.
pub const LOCAL_USER: &str = "local";

/// One client's session: its roots and current workspace, its user, and the state families
/// keep for it.
#[derive(Debug)]
pub struct Session {
    pub workspace: Workspace,
    /// What the client's announced roots may do to the configured ones.
    pub client_roots: ClientRoots,
    /// Who this session works for: the authenticated user over HTTP, `local` over stdio.
    /// Tools that keep per-user data (memories, follow-ups, calendars) key it by this.
    user: std::sync::Arc<str>,
    /// The transport's name for this session, once it has one (see [`Session::set_key`]).
    key: OnceLock<String>,
    /// What each family keeps for this session, one value per type.
    state: Shared,
}

impl Session {
    pub fn new(workspace: Workspace) -> Session {
        Session {
            workspace,
            client_roots: ClientRoots::default(),
            user: LOCAL_USER.into(),
            key: OnceLock::new(),
            state: Shared::default(),
        }
    }

    /// This session works for `user`.
    pub fn with_user(mut self, user: &str) -> Session {
        self.user = user.into();
        self
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    pub fn with_client_roots(mut self, policy: ClientRoots) -> Session {
        self.client_roots = policy;
        self
    }

    /// Whether the client's roots matter in this session (the policy is not `ignore`).
    pub fn uses_client_roots(&self) -> bool {
        self.client_roots != ClientRoots::Ignore
    }

    /// The client's roots could not be obtained: fail closed, every call refused.
    pub fn client_roots_failed(&self, why: &str) {
        self.workspace.block(format!(
            "no directory is available: the MCP client's roots could not be read ({why}), so ringfence cannot tell which directories this session may use"
        ));
    }

    /// Applies the roots a client announced (`file://` URIs; others are ignored) under this
    /// session's policy. Returns a one-line summary for the log.
    pub fn apply_client_roots(&self, uris: &[String]) -> String {
        let paths: Vec<PathBuf> = uris.iter().filter_map(|u| file_uri_path(u)).collect();
        let effective = self.workspace.apply_client_roots(&paths, self.client_roots);
        format!(
            "{} client roots ({} usable file paths) -> {} effective roots (policy {:?})",
            uris.len(),
            paths.len(),
            effective.len(),
            self.client_roots
        )
    }

    /// Names this session as the transport does (its MCP session id), so that state a
    /// family shares with other instances follows the session; the first key given stays.
    pub fn set_key(&self, key: &str) {
        let _ = self.key.set(key.to_owned());
    }

    /// The transport's name for this session: `None` over stdio or before it is known.
    pub fn key(&self) -> Option<&str> {
        self.key.get().map(String::as_str)
    }

    /// What families keep for this session (`session.state().get_or_init(Mine::default)`).
    pub fn state(&self) -> &Shared {
        &self.state
    }
}

/// Who said a sampled message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SamplingRole {
    User,
    Assistant,
}

/// One piece of a sampled message (provider- and transport-neutral).
#[derive(Debug, Clone, PartialEq)]
pub enum SamplingContent {
    Text(String),
    /// The model asks for a tool (only where the client supports tools in sampling).
    ToolUse {
        id: String,
        name: String,
        input: serde_json::Value,
    },
    /// A tool's outcome, sent back in a user message.
    ToolResult {
        id: String,
        content: String,
        is_error: bool,
    },
}

/// One message of a sampling conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingMessage {
    pub role: SamplingRole,
    pub content: Vec<SamplingContent>,
}

/// A tool offered to the client's model.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingTool {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Map<String, serde_json::Value>,
}

/// What the server asks the client's model (`sampling/createMessage`).
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingRequest {
    pub system: String,
    pub messages: Vec<SamplingMessage>,
    /// Empty unless [`ClientSampler::supports_tools`].
    pub tools: Vec<SamplingTool>,
    pub max_tokens: u32,
    /// A model name the operator prefers (a hint the client may ignore).
    pub model_hint: Option<String>,
}

/// The client's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplingReply {
    pub content: Vec<SamplingContent>,
    /// The model the client used.
    pub model: String,
    /// `endTurn`, `toolUse`, `maxTokens`, or what the client said.
    pub stop_reason: Option<String>,
}

/// The connected MCP client's model, reached with `sampling/createMessage`. Implemented by
/// the transport (tools know nothing of MCP); handed to the one call its client made
/// ([`crate::ToolContext::sampler`]).
pub trait ClientSampler: Send + Sync + std::fmt::Debug {
    /// Whether the client takes `tools` in a sampling request.
    fn supports_tools(&self) -> bool;
    fn create_message(
        &self,
        request: SamplingRequest,
    ) -> crate::tool::BoxFuture<'static, Result<SamplingReply, crate::error::BackendError>>;
}

/// The path of a `file://` URI (`file:///x`, `file://localhost/x`), percent-decoded; `None`
/// for other schemes, remote hosts, or paths that do not decode to UTF-8.
pub fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let path = if rest.starts_with('/') {
        rest
    } else {
        rest.strip_prefix("localhost")?
    };
    let path = path.split(['?', '#']).next().unwrap_or(path);
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let s = String::from_utf8(out).ok()?;
    if s.contains('\0') || !s.starts_with('/') {
        return None;
    }
    Some(PathBuf::from(s))
}

#[cfg(test)]
mod tests {
    use super::file_uri_path;
    use std::path::PathBuf;

    #[test]
    fn file_uris() {
        assert_eq!(
            file_uri_path("file:///home/a/b"),
            Some(PathBuf::from("/home/a/b"))
        );
        assert_eq!(
            file_uri_path("file://localhost/x%20y"),
            Some(PathBuf::from("/x y"))
        );
        assert_eq!(
            file_uri_path("file:///caf%C3%A9"),
            Some(PathBuf::from("/café"))
        );
        assert_eq!(file_uri_path("file://server/share"), None);
        assert_eq!(file_uri_path("https://example.com/"), None);
        assert_eq!(file_uri_path("file:///a%00b"), None);
        assert_eq!(file_uri_path("file:///bad%zz"), None);
        assert_eq!(
            file_uri_path("file:///trailing%2"),
            Some(PathBuf::from("/trailing%2"))
        );
    }
}
