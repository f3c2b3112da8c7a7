//! The raw layer: the TOML file's shape, exactly as written. Every key is optional and an
//! unknown key is an error (`deny_unknown_fields` in every table); turning these values into
//! resolved ones is the job of the section modules beside this one. The tables that belong to
//! a family (`[memory]`, ...) are kept aside here unread: each family's plug parses its own
//! (see `sections.rs`), and a top-level key that is neither a setting below nor a family's
//! table is refused when the configuration loads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IgnoredAny;

use ringfence_core::Limits;

use super::ConfigError;
use ringfence_core::plug::FileText;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
pub struct FileConfig {
    pub data_dir: Option<PathBuf>,
    pub roots: Option<Vec<RootEntry>>,
    pub denylist: Option<Vec<String>>,
    pub log: Option<String>,
    /// `text` (default) or `json`: one JSON object per log line.
    pub log_format: Option<String>,
    /// What the MCP client's roots may do: `narrow` (default), `ignore`, `extend` (adds read-only), `extend-write`.
    pub client_roots: Option<String>,
    pub limits: Option<Limits>,
    pub tools: Option<ToolsConfig>,
    pub http: Option<HttpConfig>,
    /// `[llm]`: the language model that features such as `delegate_task` talk to.
    pub llm: Option<LlmTable>,
    /// `[store]`: SQLite under the data directory (default) or a shared PostgreSQL.
    pub store: Option<StoreTable>,
    /// Every other top-level key: the families' tables, parsed by their plugs. (serde cannot
    /// combine this with `deny_unknown_fields`; `Config::load` refuses names no family takes.)
    #[serde(flatten)]
    pub sections: BTreeMap<String, IgnoredAny>,
}

/// The top-level keys [`FileConfig`] reads itself (for the message naming an unknown one).
pub const CORE_KEYS: &[&str] = &[
    "data_dir",
    "roots",
    "denylist",
    "log",
    "log_format",
    "client_roots",
    "limits",
    "tools",
    "http",
    "llm",
    "store",
];

impl FileConfig {
    /// Reads and parses the file at `path`; its text is kept for the family sections.
    #[allow(clippy::disallowed_methods)] // the config file is the user's, read before any root exists
    pub fn read(path: &Path) -> Result<(FileConfig, FileText), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let file = toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })?;
        Ok((
            file,
            FileText {
                path: path.to_owned(),
                text,
            },
        ))
    }
}

/// Whether the (default) configuration file is there to be read.
#[allow(clippy::disallowed_methods)] // the config file is the user's, read before any root exists
pub fn file_exists(path: &Path) -> bool {
    path.is_file()
}

/// A root in the file: `"/path"`, `"/path:ro"`, or `{ path = "/path", access = "read" }`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum RootEntry {
    Short(String),
    Table(RootTable),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RootTable {
    pub path: PathBuf,
    /// `read` or `write` (default `write`).
    #[serde(default)]
    pub access: Option<String>,
}

/// `[tools]`: which tools are offered.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// A named tool set: `full` (default), `iris`, `llm-chat`.
    pub preset: Option<String>,
    /// Tools or families to offer, instead of a preset.
    pub enable: Option<Vec<String>>,
    /// Tools or families to add to the preset.
    pub add: Option<Vec<String>>,
    /// Tools or families to remove.
    pub disable: Option<Vec<String>>,
}

/// `[llm]`: which language model ringfence's own features use (shared by delegate_task
/// and later ones).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LlmTable {
    /// `openai` (any OpenAI-compatible endpoint), `anthropic` or `sampling` (the connected
    /// MCP client's model).
    pub provider: Option<String>,
    /// The API's base URL (default: the provider's public one).
    pub base_url: Option<String>,
    /// The model's name (required for openai and anthropic).
    pub model: Option<String>,
    /// The environment variable holding the key (default OPENAI_API_KEY / ANTHROPIC_API_KEY).
    pub api_key_env: Option<String>,
    /// Seconds one request to the model may take (default 120).
    pub timeout_secs: Option<u64>,
}

/// `[store]`: where state lives.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreTable {
    /// `sqlite` (default without a URL) or `postgres` (default with one).
    pub backend: Option<String>,
    /// `postgres://user:password@host:5432/database?sslmode=require`.
    pub url: Option<String>,
    /// Connections per instance (default 16).
    pub pool_size: Option<u64>,
    /// PEM file of the certificate authorities trusted for the server (default: the
    /// public web roots).
    pub ca_file: Option<PathBuf>,
    /// Seconds to wait for a connection (default 10).
    pub connect_timeout_secs: Option<u64>,
    /// Seconds one statement may run before the database cancels it (default 60; 0: no
    /// limit).
    pub statement_timeout_secs: Option<u64>,
}

/// `[http]`: the streamable HTTP transport.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// Bearer tokens, as hashes (`ringfence token-hash` makes one), each for a user.
    #[serde(default)]
    pub tokens: Vec<TokenEntry>,
    /// `Host` names accepted besides the loopback ones (needed when binding elsewhere).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to send requests besides the server's own (a web client
    /// served elsewhere): `https://app.example.com`, `http://localhost:3000`, `http://localhost:*`.
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Serve HTTPS: a PEM certificate chain and its PEM private key.
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// A tool call running longer is stopped with a `timeout` error (default 300; 0: never).
    pub call_timeout_secs: Option<u64>,
    /// On SIGTERM, how long running calls may take to finish (default 30).
    pub shutdown_grace_secs: Option<u64>,
    /// The address clients reach this server at (`https://mcp.example.com`), used in the
    /// OAuth metadata; default: the scheme and the bound address.
    pub public_url: Option<String>,
    /// The operator's token for `/metrics`, as a hash (`ringfence token-hash`); with user
    /// credentials configured and no operator token, `/metrics` answers no one.
    pub metrics_token_hash: Option<String>,
    /// A request body must arrive whole within this (default 60; 0: no limit).
    pub body_timeout_secs: Option<u64>,
    /// Largest request body, MiB (default 64).
    pub max_body_mib: Option<u64>,
    /// Request bodies held at once over all requests, MiB (default 256).
    pub max_buffered_mib: Option<u64>,
    /// An event stream carrying nothing for this long is closed (default 300; 0: never).
    pub stream_idle_secs: Option<u64>,
    /// Calls and event streams open at once over all users (default: three quarters of the
    /// descriptor limit; 0: no cap).
    pub max_open_requests: Option<usize>,
    /// Per-user request limits.
    pub limits: Option<HttpLimits>,
    /// OAuth 2.1 resource-server mode: JWT access tokens.
    pub oauth: Option<OauthConfig>,
}

/// `[http.limits]`: per user; `0` turns a limit off.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpLimits {
    /// Requests answered at once (default 16).
    pub concurrent: Option<usize>,
    /// Sustained requests per second (default 20).
    pub rate: Option<f64>,
    /// Burst above the rate (default 100).
    pub burst: Option<f64>,
    /// MCP sessions open at once (default 16).
    pub sessions: Option<usize>,
    /// Event streams (GET) open at once (default 32).
    pub streams: Option<usize>,
}

/// `[http.oauth]`: JWT access tokens from an authorization server.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OauthConfig {
    /// The authorization server's issuer identifier (exact `iss`).
    pub issuer: String,
    /// Accepted `aud` values (default: `<public_url>/mcp`).
    #[serde(default)]
    pub audience: Option<OneOrMany>,
    /// The signing keys: a JWKS file, or a JWKS URL (https, or http on loopback).
    pub jwks_file: Option<PathBuf>,
    pub jwks_url: Option<String>,
    /// The claim naming the user (default `sub`).
    pub user_claim: Option<String>,
    /// Scopes every token must carry.
    #[serde(default)]
    pub required_scopes: Vec<String>,
    /// The settings page's client id at the authorization server: with it, people sign in
    /// to `/settings` there (authorization code with PKCE). Register the return address
    /// `<public_url>/settings/login/callback`.
    pub client_id: Option<String>,
    /// The variable holding that client's secret, for a confidential client.
    pub client_secret_env: Option<String>,
    /// Where people sign in (default: from the issuer's metadata).
    pub authorization_endpoint: Option<String>,
    /// Where the code is exchanged (default: from the issuer's metadata).
    pub token_endpoint: Option<String>,
    /// Scopes asked for at sign-in (default: `required_scopes`).
    pub scopes: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenEntry {
    pub user: String,
    pub hash: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name in [`CORE_KEYS`] is a field of [`FileConfig`] (a wrong value is a type
    /// error, never an unknown key set aside for the families).
    #[test]
    fn the_core_keys_are_the_file_config_fields() {
        for key in CORE_KEYS {
            match toml::from_str::<FileConfig>(&format!("{key} = 1.5\n")) {
                Err(_) => {}
                Ok(file) => assert!(file.sections.is_empty(), "{key} is not a field"),
            }
        }
        let file: FileConfig = toml::from_str("memroy = 1\n").unwrap();
        assert!(file.sections.contains_key("memroy"));
    }

    #[test]
    fn a_typo_inside_a_core_table_is_still_refused_with_its_line() {
        let err =
            toml::from_str::<FileConfig>("log = \"info\"\n[tools]\npreset = \"full\"\nprest = 1\n")
                .unwrap_err()
                .to_string();
        assert!(err.contains("prest") && err.contains("line 4"), "{err}");
    }
}
