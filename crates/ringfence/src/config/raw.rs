//! The raw layer: the TOML file's shape, exactly as written. Every key is optional and an
//! unknown key is an error (`deny_unknown_fields`); turning these values into resolved
//! ones is the job of the section modules beside this one.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use ringfence_tools::Limits;

use super::ConfigError;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    pub data_dir: Option<PathBuf>,
    pub roots: Option<Vec<RootEntry>>,
    pub denylist: Option<Vec<String>>,
    pub log: Option<String>,
    /// `text` (default) or `json`: one JSON object per log line.
    pub log_format: Option<String>,
    /// What the MCP client's roots may do: `narrow` (default), `ignore`, `extend`.
    pub client_roots: Option<String>,
    pub limits: Option<Limits>,
    pub tools: Option<ToolsConfig>,
    pub http: Option<HttpConfig>,
    pub memory: Option<MemoryConfig>,
}

impl FileConfig {
    /// Reads and parses the file at `path`.
    #[allow(clippy::disallowed_methods)] // the config file is the user's, read before any root exists
    pub fn read(path: &Path) -> Result<FileConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source,
        })
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

/// `[memory]`: truths and memories.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryConfig {
    /// The database file (default `<data dir>/memory.db`).
    pub database: Option<PathBuf>,
    /// Append the user's pinned truths to the instructions sent at `initialize`
    /// (default false; they are always offered as a resource and a prompt).
    pub pinned_in_instructions: Option<bool>,
    pub embeddings: Option<EmbeddingsConfig>,
    pub search: Option<SearchConfig>,
}

/// `[memory.embeddings]`: how meanings are computed.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// `local` (default: all-MiniLM-L6-v2 from `model_dir`, when installed), `openai` (an
    /// OpenAI-compatible endpoint), or `none` (words only).
    pub provider: Option<String>,
    /// The local model's directory (default `<data dir>/models/all-MiniLM-L6-v2`).
    pub model_dir: Option<PathBuf>,
    /// `openai`: the API base, e.g. `http://127.0.0.1:11434/v1`.
    pub url: Option<String>,
    /// `openai`: the model name.
    pub model: Option<String>,
    /// `openai`: the environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// `openai`: ask for vectors of this length (models that support it).
    pub dimensions: Option<usize>,
    /// `openai`: seconds before a request is abandoned (default 30).
    pub timeout_secs: Option<u64>,
}

/// `[memory.search]`: ranking weights and thresholds (see ARCHITECTURE.md).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    pub lexical_weight: Option<f32>,
    pub recency_weight: Option<f32>,
    pub usage_weight: Option<f32>,
    pub recency_half_life_days: Option<f32>,
    pub min_relevance: Option<f32>,
    pub min_lexical: Option<f32>,
    pub duplicate_threshold: Option<f32>,
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
}

/// `[http.oauth]`: JWT access tokens from an authorization server.
#[derive(Debug, Clone, Deserialize)]
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
