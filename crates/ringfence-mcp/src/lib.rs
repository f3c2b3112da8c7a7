//! The MCP adapter: serves a [`ToolRunner`](ringfence_core::ToolRunner) and the families'
//! resources and prompts over the Model Context Protocol with rmcp.
//!
//! This crate knows tools only through the runner and the `Tool` trait — names, schemas,
//! annotations — and nothing of files, memories or roots' meaning. Tool failures become
//! `isError: true` results the model can act on; an unknown tool is a protocol error
//! (`-32602`). Cancellation (`notifications/cancelled`) reaches the tool as its context's
//! token; a tool's progress reports become `notifications/progress` when the client sent a
//! progress token.

mod convert;
mod http;
mod metrics;
mod notices;

mod oauth;
mod roots;
mod sampling;
mod server;
mod session;

pub use convert::mcp_tool;
pub use http::settings::signin::{MemoryWebSessions, WebSession, WebSessions};
pub use http::settings::{OauthSignIn, SettingsPage, one_time_key, one_time_token};
pub use http::{
    Auth, HttpOptions, InvalidOrigin, MetricsToken, RateLimits, ResourceMetadata, SessionDirectory,
    TlsConfig, TlsError, TokenAuth, TokenConfigError, load_tls, normalize_origin,
    open_request_slots, serve_http, token_hash,
};
pub use metrics::{Metrics, SessionGuard};
pub use oauth::{
    AuthFailure, JwksError, JwtConfig, JwtConfigError, JwtValidator, KeySetError, KeySource,
    https_or_loopback,
};
pub use server::{McpServer, ServerIdentity};

/// Entry points for the fuzz targets (`fuzz/`); not an API.
#[doc(hidden)]
pub mod fuzzing {
    /// The drain's body check: whether a JSON-RPC body holds only answers and notifications.
    pub fn only_answers_and_notifications(json: &[u8]) -> bool {
        crate::http::body::only_answers_and_notifications(json)
    }
}
pub use session::{AuthUser, UserSessions};
