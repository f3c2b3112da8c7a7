//! Per-session state: the workspace view and the read tracker behind the read-first gate.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use std::path::PathBuf;

use ringfence_fs::{ClientRoots, Target, Workspace};

use crate::error::BackendError;

/// What was known about a file when this session last read (or wrote) it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadRecord {
    /// BLAKE3 of the whole file content.
    pub hash: [u8; 32],
    pub size: u64,
    pub mtime: Option<SystemTime>,
}

/// Read records kept where several instances find them: an MCP session served by any
/// instance of a deployment keeps one set of records, keyed by the session's key and the
/// file's absolute path (instances mount shared files at the same place).
pub trait SharedReads: Send + Sync + std::fmt::Debug {
    fn get(&self, session: &str, path: &str) -> Result<Option<ReadRecord>, BackendError>;
    fn record(&self, session: &str, path: &str, record: &ReadRecord) -> Result<(), BackendError>;
    fn forget(&self, session: &str, path: &str) -> Result<(), BackendError>;
}

/// Files this session has read, keyed by root and resolved root-relative path (so `a/../b`
/// and `b` and a symlink to `b` are the same file). Where the session is shared with other
/// instances (a [`SharedReads`] store and the session's key), the records live there too,
/// and the shared ones are what counts.
#[derive(Debug, Default)]
pub struct ReadTracker {
    records: HashMap<(usize, String), ReadRecord>,
    shared: Option<Arc<dyn SharedReads>>,
    key: Option<String>,
}

fn key(target: &Target) -> (usize, String) {
    (Arc::as_ptr(target.root()) as usize, target.rel().to_owned())
}

impl ReadTracker {
    /// The store and key records are shared under, once both are known.
    fn shared(&self) -> Option<(&Arc<dyn SharedReads>, &str)> {
        Some((self.shared.as_ref()?, self.key.as_deref()?))
    }

    pub fn record(&mut self, target: &Target, record: ReadRecord) {
        if let Some((store, session)) = self.shared()
            && let Err(e) = store.record(session, &path_key(target), &record)
        {
            // Another instance will then ask for a fresh read: safe, if a nuisance.
            tracing::warn!(error = %e, "cannot share a read record; other instances will ask for a fresh read");
        }
        self.records.insert(key(target), record);
    }

    /// What is known of `target`: where records are shared, the shared record (another
    /// instance may have made, replaced or forgotten it); else, or when the store cannot be
    /// read, this instance's own.
    pub fn get(&self, target: &Target) -> Option<ReadRecord> {
        if let Some((store, session)) = self.shared() {
            match store.get(session, &path_key(target)) {
                Ok(found) => return found,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the shared read records; using this instance's")
                }
            }
        }
        self.records.get(&key(target)).cloned()
    }

    pub fn forget(&mut self, target: &Target) {
        if let Some((store, session)) = self.shared()
            && let Err(e) = store.forget(session, &path_key(target))
        {
            tracing::warn!(error = %e, "cannot forget a shared read record");
        }
        self.records.remove(&key(target));
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

/// A file as the shared records name it: its absolute path.
fn path_key(target: &Target) -> String {
    target.absolute().to_string_lossy().into_owned()
}

/// The user of a stdio server, or of HTTP without authentication.
pub const LOCAL_USER: &str = "local";

/// One client's session: its roots, current workspace and what it has read.
#[derive(Debug)]
pub struct Session {
    pub workspace: Workspace,
    pub reads: Mutex<ReadTracker>,
    /// What the client's announced roots may do to the configured ones.
    pub client_roots: ClientRoots,
    /// Who this session works for: the authenticated user over HTTP, `local` over stdio.
    /// Tools that keep per-user data (memories, follow-ups, calendars) key it by this.
    user: std::sync::Arc<str>,
}

impl Session {
    pub fn new(workspace: Workspace) -> Session {
        Session {
            workspace,
            reads: Mutex::new(ReadTracker::default()),
            client_roots: ClientRoots::default(),
            user: LOCAL_USER.into(),
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

    pub fn reads(&self) -> std::sync::MutexGuard<'_, ReadTracker> {
        self.reads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Read records of this session are kept in `store` too, once the session's key is
    /// known ([`share_reads_as`](Self::share_reads_as)).
    pub fn with_shared_reads(self, store: Arc<dyn SharedReads>) -> Session {
        self.reads().shared = Some(store);
        self
    }

    /// This session's records are shared under `key` (the transport's session id); the
    /// first key given stays.
    pub fn share_reads_as(&self, key: &str) {
        let mut reads = self.reads();
        if reads.shared.is_some() && reads.key.is_none() {
            reads.key = Some(key.to_owned());
        }
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
