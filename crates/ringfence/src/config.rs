//! Configuration: defaults, then the TOML file, then `RINGFENCE_*` variables, then flags.
//! Validated once at start; anything wrong is an error naming the key, and the server does
//! not start (fail closed).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use ringfence_fs::{Access, ClientRoots, RootSpec};
use ringfence_tools::{Limits, Preset};

use crate::env_vars;

/// The TOML file's shape. Every key is optional.
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

/// The resolved embedding provider.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbeddingProvider {
    Local {
        model_dir: PathBuf,
    },
    OpenAi {
        url: String,
        model: String,
        /// The variable to read the key from at start.
        api_key_env: Option<String>,
        dimensions: Option<usize>,
        timeout_secs: u64,
    },
    None,
}

/// The resolved `[memory]` settings.
#[derive(Debug, Clone)]
pub struct MemorySettings {
    pub database: PathBuf,
    pub pinned_in_instructions: bool,
    pub provider: EmbeddingProvider,
    pub rank: ringfence_store::memory::RankConfig,
}

impl MemorySettings {
    fn resolve(
        file: Option<&MemoryConfig>,
        env: &dyn Env,
        data_dir: &Path,
    ) -> Result<MemorySettings, String> {
        let empty = MemoryConfig::default();
        let file = file.unwrap_or(&empty);
        let database = match &file.database {
            Some(p) if !p.is_absolute() => {
                return Err(format!(
                    "memory.database: `{}` must be an absolute path",
                    p.display()
                ));
            }
            Some(p) => p.clone(),
            None => data_dir.join("memory.db"),
        };
        let e = file.embeddings.clone().unwrap_or_default();
        let provider_name = env
            .get(env_vars::RINGFENCE_EMBEDDINGS)
            .filter(|s| !s.trim().is_empty())
            .or(e.provider.clone())
            .unwrap_or_else(|| "local".into());
        let model_dir = match env
            .get(env_vars::RINGFENCE_MODEL_DIR)
            .filter(|s| !s.trim().is_empty())
        {
            Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
            Some(d) => {
                return Err(format!(
                    "{}: `{d}` must be an absolute path",
                    env_vars::RINGFENCE_MODEL_DIR
                ));
            }
            None => match &e.model_dir {
                Some(d) if !d.is_absolute() => {
                    return Err(format!(
                        "memory.embeddings.model_dir: `{}` must be an absolute path",
                        d.display()
                    ));
                }
                Some(d) => d.clone(),
                None => default_model_dir(data_dir),
            },
        };
        let provider = match provider_name.trim() {
            "local" => EmbeddingProvider::Local { model_dir },
            "none" => EmbeddingProvider::None,
            "openai" => {
                let url = e.url.clone().filter(|u| !u.trim().is_empty()).ok_or(
                    "memory.embeddings.url: required with provider = \"openai\" (e.g. http://127.0.0.1:11434/v1)",
                )?;
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(format!(
                        "memory.embeddings.url: `{url}` must start with http:// or https://"
                    ));
                }
                let model = e.model.clone().filter(|m| !m.trim().is_empty()).ok_or(
                    "memory.embeddings.model: required with provider = \"openai\" (e.g. nomic-embed-text)",
                )?;
                if let Some(var) = &e.api_key_env
                    && env.get(var).filter(|k| !k.is_empty()).is_none()
                {
                    return Err(format!(
                        "memory.embeddings.api_key_env: the variable {var} is not set"
                    ));
                }
                if e.dimensions == Some(0) {
                    return Err("memory.embeddings.dimensions: must be at least 1".into());
                }
                EmbeddingProvider::OpenAi {
                    url,
                    model,
                    api_key_env: e.api_key_env.clone(),
                    dimensions: e.dimensions,
                    timeout_secs: e.timeout_secs.unwrap_or(30).max(1),
                }
            }
            other => {
                return Err(format!(
                    "memory.embeddings.provider: `{other}` is not valid; use `local`, `openai` or `none`"
                ));
            }
        };
        let mut rank = ringfence_store::memory::RankConfig::default();
        if let Some(sc) = &file.search {
            let unit = |key: &str, v: Option<f32>, into: &mut f32| -> Result<(), String> {
                if let Some(v) = v {
                    if !(0.0..=1.0).contains(&v) {
                        return Err(format!("memory.search.{key}: {v} must be between 0 and 1"));
                    }
                    *into = v;
                }
                Ok(())
            };
            unit(
                "lexical_weight",
                sc.lexical_weight,
                &mut rank.lexical_weight,
            )?;
            unit(
                "recency_weight",
                sc.recency_weight,
                &mut rank.recency_weight,
            )?;
            unit("usage_weight", sc.usage_weight, &mut rank.usage_weight)?;
            unit("min_relevance", sc.min_relevance, &mut rank.min_relevance)?;
            unit("min_lexical", sc.min_lexical, &mut rank.min_lexical)?;
            unit(
                "duplicate_threshold",
                sc.duplicate_threshold,
                &mut rank.duplicate_threshold,
            )?;
            if let Some(h) = sc.recency_half_life_days {
                if h.is_nan() || h <= 0.0 {
                    return Err(format!(
                        "memory.search.recency_half_life_days: {h} must be more than 0"
                    ));
                }
                rank.recency_half_life_days = h;
            }
        }
        Ok(MemorySettings {
            database,
            pinned_in_instructions: file.pinned_in_instructions.unwrap_or(false),
            provider,
            rank,
        })
    }
}

/// Where `ringfence model install` puts the model and the server looks for it by default.
pub fn default_model_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models").join(ringfence_embed::DEFAULT_MODEL)
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

/// Values given on the command line (highest precedence).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub roots: Vec<String>,
    pub deny: Vec<String>,
    pub log: Option<String>,
    pub log_format: Option<String>,
    pub client_roots: Option<String>,
    pub preset: Option<String>,
    pub enable: Vec<String>,
    pub add: Vec<String>,
    pub disable: Vec<String>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    /// Empty means: the default workspace `<data_dir>/workspace`.
    pub roots: Vec<RootSpec>,
    pub denylist: Vec<String>,
    pub log: String,
    pub log_json: bool,
    pub limits: Limits,
    pub http: HttpConfig,
    pub memory: MemorySettings,
    pub client_roots: ClientRoots,
    pub preset: Preset,
    pub enable: Option<Vec<String>>,
    pub add: Vec<String>,
    pub disable: Vec<String>,
    /// Which file was read, if any.
    pub config_file: Option<PathBuf>,
}

#[cfg(test)]
impl Config {
    /// The defaults, with the data directory at `data_dir` and nothing from the process
    /// environment.
    pub fn for_tests(data_dir: &Path) -> Config {
        let over = Overrides {
            data_dir: Some(data_dir.to_owned()),
            ..Overrides::default()
        };
        Config::load(&over, &BTreeMap::new(), data_dir).expect("default configuration")
    }
}

/// Where environment values come from (a map in tests, the process environment otherwise).
pub trait Env {
    fn get(&self, key: &str) -> Option<String>;
}

pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn get(&self, key: &str) -> Option<String> {
        std::env::var(key).ok()
    }
}

impl Env for BTreeMap<String, String> {
    fn get(&self, key: &str) -> Option<String> {
        BTreeMap::get(self, key).cloned()
    }
}

fn home(env: &dyn Env) -> Option<PathBuf> {
    env.get(env_vars::HOME)
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `$XDG_DATA_HOME/ringfence`, else `~/.local/share/ringfence`.
pub fn default_data_dir(env: &dyn Env) -> Result<PathBuf, String> {
    if let Some(x) = env
        .get(env_vars::XDG_DATA_HOME)
        .filter(|x| Path::new(x).is_absolute())
    {
        return Ok(PathBuf::from(x).join("ringfence"));
    }
    home(env)
        .map(|h| h.join(".local/share/ringfence"))
        .ok_or_else(|| {
            format!(
                "cannot find a data directory: set {} or HOME",
                env_vars::RINGFENCE_DATA_DIR
            )
        })
}

fn default_config_file(env: &dyn Env) -> Option<PathBuf> {
    let base = env
        .get(env_vars::XDG_CONFIG_HOME)
        .filter(|x| Path::new(x).is_absolute())
        .map(PathBuf::from)
        .or_else(|| home(env).map(|h| h.join(".config")))?;
    Some(base.join("ringfence/config.toml"))
}

fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Splits `RINGFENCE_ROOTS`: `:`-separated absolute paths, a `ro`/`rw` token after a path
/// being its access suffix.
fn split_roots_env(value: &str) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for token in value.split(':') {
        if token.is_empty() {
            continue;
        }
        if token == "ro" || token == "rw" {
            match out.last_mut() {
                Some(last) => {
                    last.push(':');
                    last.push_str(token);
                }
                None => {
                    return Err(format!(
                        "{}: `{token}` must follow a path",
                        env_vars::RINGFENCE_ROOTS
                    ));
                }
            }
        } else {
            out.push(token.to_owned());
        }
    }
    Ok(out)
}

fn parse_access(value: &str, key: &str) -> Result<Access, String> {
    match value {
        "read" | "ro" | "read-only" => Ok(Access::ReadOnly),
        "write" | "rw" | "read-write" => Ok(Access::ReadWrite),
        other => Err(format!(
            "{key}: access `{other}` is not valid; use `read` or `write`"
        )),
    }
}

/// Makes a root spec absolute against `cwd`, with a clear error for empty input.
fn root_spec(spec: &str, cwd: &Path, key: &str, allow_relative: bool) -> Result<RootSpec, String> {
    let mut rs = RootSpec::parse_cli(spec).map_err(|e| format!("{key}: {e}"))?;
    if !rs.path.is_absolute() {
        if !allow_relative {
            return Err(format!("{key}: root `{spec}` must be an absolute path"));
        }
        rs.path = cwd.join(&rs.path);
        rs.label = ringfence_fs::normalize_lexically(&rs.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into());
    }
    rs.path = ringfence_fs::normalize_lexically(&rs.path);
    Ok(rs)
}

impl Config {
    /// Loads the configuration with the documented precedence.
    pub fn load(over: &Overrides, env: &dyn Env, cwd: &Path) -> Result<Config, String> {
        // 1. The file: --config, else RINGFENCE_CONFIG, else the default location if present.
        let explicit = over.config.clone().or_else(|| {
            env.get(env_vars::RINGFENCE_CONFIG)
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        });
        let (file, config_file) = match explicit {
            Some(path) => {
                let path = if path.is_absolute() {
                    path
                } else {
                    cwd.join(path)
                };
                (read_file_config(&path)?, Some(path))
            }
            None => match default_config_file(env) {
                Some(path) if file_exists(&path) => (read_file_config(&path)?, Some(path)),
                _ => (FileConfig::default(), None),
            },
        };

        // 2. Data directory.
        let data_dir = if let Some(d) = &over.data_dir {
            absolute(d, cwd, "--data-dir")?
        } else if let Some(d) = env
            .get(env_vars::RINGFENCE_DATA_DIR)
            .filter(|s| !s.is_empty())
        {
            absolute(Path::new(&d), cwd, env_vars::RINGFENCE_DATA_DIR)?
        } else if let Some(d) = &file.data_dir {
            if !d.is_absolute() {
                return Err(format!(
                    "data_dir: `{}` must be an absolute path",
                    d.display()
                ));
            }
            d.clone()
        } else {
            default_data_dir(env)?
        };

        // 3. Roots.
        let mut roots = Vec::new();
        if !over.roots.is_empty() {
            for r in &over.roots {
                roots.push(root_spec(r, cwd, "ROOT", true)?);
            }
        } else if let Some(value) = env
            .get(env_vars::RINGFENCE_ROOTS)
            .filter(|s| !s.trim().is_empty())
        {
            for r in split_roots_env(&value)? {
                roots.push(root_spec(&r, cwd, env_vars::RINGFENCE_ROOTS, false)?);
            }
        } else if let Some(entries) = &file.roots {
            if entries.is_empty() {
                return Err("roots: the list is empty; remove the key to use the default workspace, or list at least one directory".into());
            }
            for (i, entry) in entries.iter().enumerate() {
                let key = format!("roots[{i}]");
                let spec = match entry {
                    RootEntry::Short(s) => root_spec(s, cwd, &key, false)?,
                    RootEntry::Table(t) => {
                        let access = match &t.access {
                            Some(a) => parse_access(a, &format!("{key}.access"))?,
                            None => Access::ReadWrite,
                        };
                        let s = t
                            .path
                            .to_str()
                            .ok_or_else(|| format!("{key}.path: not valid UTF-8"))?;
                        let mut spec = root_spec(s, cwd, &format!("{key}.path"), false)?;
                        spec.access = access;
                        spec
                    }
                };
                roots.push(spec);
            }
        }
        for (i, a) in roots.iter().enumerate() {
            if roots[..i].iter().any(|b| b.path == a.path) {
                return Err(format!("root `{}` is listed twice", a.path.display()));
            }
        }

        // 4. Denylist: file, then env, then flags — they add up (a denylist only narrows).
        let mut denylist = file.denylist.clone().unwrap_or_default();
        if let Some(v) = env.get(env_vars::RINGFENCE_DENYLIST) {
            denylist.extend(list(&v));
        }
        denylist.extend(over.deny.iter().cloned());
        ringfence_fs::Denylist::new(&denylist).map_err(|e| format!("denylist: {e}"))?;

        // 5. Log level.
        let log = over
            .log
            .clone()
            .or_else(|| env.get(env_vars::RINGFENCE_LOG).filter(|s| !s.is_empty()))
            .or_else(|| file.log.clone())
            .unwrap_or_else(|| "info".into());

        let log_json = match over
            .log_format
            .clone()
            .or_else(|| {
                env.get(env_vars::RINGFENCE_LOG_FORMAT)
                    .filter(|s| !s.is_empty())
            })
            .or_else(|| file.log_format.clone())
            .as_deref()
            .map(str::trim)
        {
            None | Some("text") => false,
            Some("json") => true,
            Some(other) => {
                return Err(format!(
                    "log_format: `{other}` is not valid; use `text` or `json`"
                ));
            }
        };

        // 5b. The client's MCP roots.
        let client_roots = match over
            .client_roots
            .clone()
            .or_else(|| {
                env.get(env_vars::RINGFENCE_CLIENT_ROOTS)
                    .filter(|s| !s.trim().is_empty())
            })
            .or_else(|| file.client_roots.clone())
        {
            Some(v) => ClientRoots::parse(v.trim()).map_err(|e| format!("client_roots: {e}"))?,
            None => ClientRoots::default(),
        };

        // 6. Limits (seed 002's LLM_CHAT_FS_* variables are honoured too).
        let mut limits = file.limits.clone().unwrap_or_default();
        seed_002_limits(env, &mut limits)?;
        limits.validate().map_err(|e| e.to_string())?;

        // 7. Tools: a preset or an explicit list as the base (the highest layer that sets
        // either decides; one layer setting both is an error), then additions, then removals.
        let file_tools = file.tools.unwrap_or_default();
        let env_enable = env
            .get(env_vars::RINGFENCE_TOOLS)
            .filter(|s| !s.trim().is_empty())
            .map(|v| list(&v));
        let env_preset = env
            .get(env_vars::RINGFENCE_PRESET)
            .filter(|s| !s.trim().is_empty());
        let layers = [
            (
                "command line (--preset, --tools)",
                over.preset.clone(),
                (!over.enable.is_empty()).then(|| over.enable.clone()),
            ),
            (
                "environment (RINGFENCE_PRESET, RINGFENCE_TOOLS)",
                env_preset,
                env_enable,
            ),
            (
                "config file (tools.preset, tools.enable)",
                file_tools.preset.clone(),
                file_tools.enable.clone(),
            ),
        ];
        let mut preset = Preset::Full;
        let mut enable = None;
        for (layer, p, e) in layers {
            match (p, e) {
                (Some(_), Some(_)) => {
                    return Err(format!(
                        "tools: the {layer} sets both a preset and a tool list; use one of them (add tools to a preset with tools.add)"
                    ));
                }
                (Some(p), None) => {
                    preset = Preset::parse(p.trim()).map_err(|e| format!("tools.preset: {e}"))?;
                    break;
                }
                (None, Some(e)) => {
                    if e.is_empty() {
                        return Err(
                            "tools.enable: the list is empty; no tool would be offered".into()
                        );
                    }
                    enable = Some(e);
                    break;
                }
                (None, None) => {}
            }
        }
        let mut add = file_tools.add.unwrap_or_default();
        if let Some(v) = env.get(env_vars::RINGFENCE_ADD_TOOLS) {
            add.extend(list(&v));
        }
        add.extend(over.add.iter().cloned());
        let mut disable = file_tools.disable.unwrap_or_default();
        if let Some(v) = env.get(env_vars::RINGFENCE_DISABLE_TOOLS) {
            disable.extend(list(&v));
        }
        disable.extend(over.disable.iter().cloned());

        let memory = MemorySettings::resolve(file.memory.as_ref(), env, &data_dir)?;

        Ok(Config {
            memory,
            data_dir,
            roots,
            denylist,
            log,
            log_json,
            limits,
            http: file.http.clone().unwrap_or_default(),
            client_roots,
            preset,
            enable,
            add,
            disable,
            config_file,
        })
    }
}

/// Seed 002's configuration variables, for deployments moving over from it.
fn seed_002_limits(env: &dyn Env, limits: &mut Limits) -> Result<(), String> {
    let num = |key: &str| -> Result<Option<u64>, String> {
        match env.get(key).filter(|v| !v.trim().is_empty()) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| format!("{key}: `{v}` is not a whole number")),
        }
    };
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_SEARCH_RESULTS)? {
        limits.max_search_results = n as usize;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_DISPLAY_ENTRIES)? {
        limits.max_display_entries = n as usize;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_TOTAL_ENTRIES)? {
        limits.max_total_entries = n as usize;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_SEARCH_TIMEOUT)? {
        limits.search_timeout_ms = n;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_CHARS_PER_FILE)? {
        limits.max_chars_per_file = n as usize;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_FILE_SIZE)? {
        limits.max_file_size = n;
    }
    if let Some(v) = env
        .get(env_vars::LLM_CHAT_FS_REQUIRE_READ_BEFORE_WRITE)
        .filter(|v| !v.trim().is_empty())
    {
        limits.require_read_before_write = match v.trim() {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            other => {
                return Err(format!(
                    "{}: `{other}` is not true or false",
                    env_vars::LLM_CHAT_FS_REQUIRE_READ_BEFORE_WRITE
                ));
            }
        };
    }
    Ok(())
}

fn absolute(p: &Path, cwd: &Path, key: &str) -> Result<PathBuf, String> {
    if p.as_os_str().is_empty() {
        return Err(format!("{key}: empty path"));
    }
    Ok(ringfence_fs::normalize_lexically(&if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }))
}

#[allow(clippy::disallowed_methods)] // the config file is the user's, read before any root exists
fn file_exists(path: &Path) -> bool {
    path.is_file()
}

#[allow(clippy::disallowed_methods)] // the config file is the user's, read before any root exists
fn read_file_config(path: &Path) -> Result<FileConfig, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config file {}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("config file {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn default_data_dir_follows_xdg_then_home() {
        let e = env(&[("XDG_DATA_HOME", "/x/data"), ("HOME", "/home/u")]);
        assert_eq!(
            default_data_dir(&e).unwrap(),
            PathBuf::from("/x/data/ringfence")
        );
        let e = env(&[("HOME", "/home/u")]);
        assert_eq!(
            default_data_dir(&e).unwrap(),
            PathBuf::from("/home/u/.local/share/ringfence")
        );
        assert!(default_data_dir(&env(&[])).is_err());
    }

    #[test]
    fn flags_beat_env_beat_defaults() {
        let e = env(&[
            ("HOME", "/home/u"),
            ("RINGFENCE_DATA_DIR", "/env/data"),
            ("RINGFENCE_ROOTS", "/a:ro:/b"),
        ]);
        let cfg = Config::load(&Overrides::default(), &e, Path::new("/cwd")).unwrap();
        assert_eq!(cfg.data_dir, PathBuf::from("/env/data"));
        assert_eq!(cfg.roots.len(), 2);
        assert_eq!(cfg.roots[0].access, Access::ReadOnly);
        assert_eq!(cfg.roots[1].access, Access::ReadWrite);
        let over = Overrides {
            data_dir: Some("/flag/data".into()),
            roots: vec!["rel:ro".into()],
            ..Overrides::default()
        };
        let cfg = Config::load(&over, &e, Path::new("/cwd")).unwrap();
        assert_eq!(cfg.data_dir, PathBuf::from("/flag/data"));
        assert_eq!(cfg.roots.len(), 1);
        assert_eq!(cfg.roots[0].path, PathBuf::from("/cwd/rel"));
        assert_eq!(cfg.roots[0].access, Access::ReadOnly);
    }

    #[test]
    fn env_roots_must_be_absolute_and_unique() {
        let e = env(&[("HOME", "/h"), ("RINGFENCE_ROOTS", "relative")]);
        assert!(
            Config::load(&Overrides::default(), &e, Path::new("/cwd"))
                .unwrap_err()
                .contains("absolute")
        );
        let e = env(&[("HOME", "/h"), ("RINGFENCE_ROOTS", "/a:/a/")]);
        assert!(
            Config::load(&Overrides::default(), &e, Path::new("/cwd"))
                .unwrap_err()
                .contains("twice")
        );
    }

    #[test]
    fn bad_denylist_pattern_fails_closed() {
        let e = env(&[("HOME", "/h"), ("RINGFENCE_DENYLIST", "!keep")]);
        let err = Config::load(&Overrides::default(), &e, Path::new("/cwd")).unwrap_err();
        assert!(err.contains("negation"), "{err}");
    }
}
