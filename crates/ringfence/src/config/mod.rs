//! Configuration: defaults, then the TOML file, then `RINGFENCE_*` variables, then flags.
//! Validated once at start; anything wrong is an error naming the key, and the server does
//! not start (fail closed).
//!
//! `raw` is the file as written; each section module turns its raw values (with the
//! environment and the flags) into resolved ones, and [`Config::load`] runs them in order.

mod error;
mod http;
mod limits;
mod llm;
mod raw;
mod roots;
mod store;
mod tools;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ringfence_core::{Limits, Selection};
use ringfence_fs::{ClientRoots, RootSpec};

use crate::env_vars;

pub use error::ConfigError;
pub use http::HttpPlan;
pub use raw::HttpConfig;
pub use ringfence_core::plug::{Env, FamilySettings, ProcessEnv, SectionInput};
pub use ringfence_llm::LlmSettings;
pub use roots::check_client_roots_for_http;
pub use store::StoreSettings;

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
    /// `[http]` as written: only `serve --http` resolves it, into an [`HttpPlan`].
    pub http: HttpConfig,
    /// Every family's resolved section (`[memory]`, ...), read through its plug.
    pub families: FamilySettings,
    /// `[llm]`: the language model ringfence's own features use; `None` without the table.
    pub llm: Option<LlmSettings>,
    /// `[store]`: where state lives.
    pub store: StoreSettings,
    pub client_roots: ClientRoots,
    /// The preset or tool list, additions and removals.
    pub tools: Selection,
    /// Which file was read, if any.
    pub config_file: Option<PathBuf>,
    /// Seed 000's `IRIS_FILESYSTEM_ENABLED=false` turned the file tools off.
    pub iris_files_off: bool,
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

impl Config {
    /// Loads the configuration with the documented precedence.
    pub fn load(over: &Overrides, env: &dyn Env, cwd: &Path) -> Result<Config, ConfigError> {
        // 1. The file: --config, else RINGFENCE_CONFIG, else the default location if present.
        let explicit = over.config.clone().or_else(|| {
            env.get(env_vars::RINGFENCE_CONFIG)
                .filter(|s| !s.is_empty())
                .map(PathBuf::from)
        });
        let (file, text) = match explicit {
            Some(path) => {
                let path = if path.is_absolute() {
                    path
                } else {
                    cwd.join(path)
                };
                let (file, text) = raw::FileConfig::read(&path)?;
                (file, Some(text))
            }
            None => match default_config_file(env) {
                Some(path) if raw::file_exists(&path) => {
                    let (file, text) = raw::FileConfig::read(&path)?;
                    (file, Some(text))
                }
                _ => (raw::FileConfig::default(), None),
            },
        };
        let config_file = text.as_ref().map(|t| t.path.clone());

        // 2. Data directory.
        let data_dir = data_dir(over, env, file.data_dir.as_deref(), cwd)?;

        // 3. Roots.
        let roots = roots::resolve(&over.roots, env, file.roots.as_deref(), cwd)?;
        // 4. Denylist: file, then env, then flags — they add up (a denylist only narrows).
        let denylist = roots::denylist(file.denylist.as_deref(), env, &over.deny)?;

        // 5. Logging.
        let log = over
            .log
            .clone()
            .or_else(|| env.get(env_vars::RINGFENCE_LOG).filter(|s| !s.is_empty()))
            .or_else(|| file.log.clone())
            .unwrap_or_else(|| "info".into());
        let log_json = log_json(over, env, file.log_format.as_deref())?;

        // 5b. The client's MCP roots.
        let client_roots = roots::client_roots(
            over.client_roots.as_deref(),
            env,
            file.client_roots.as_deref(),
        )?;

        // 6. Limits (seed 002's LLM_CHAT_FS_* variables are honoured too).
        let limits = limits::resolve(file.limits.as_ref(), env)?;

        // 7. Tools.
        let iris_files_off = tools::iris_files_off(env)?;
        let tools = tools::resolve(over, env, file.tools, iris_files_off)?;

        // 7b. The language model.
        let llm = llm::resolve(file.llm.as_ref())?;
        let store = store::resolve(file.store.as_ref(), env)?;

        // 8. The families' sections, each resolved by its plug.
        let families = family_sections(&file.sections, text.as_ref(), env, &data_dir)?;

        Ok(Config {
            families,
            llm,
            store,
            data_dir,
            roots,
            denylist,
            log,
            log_json,
            limits,
            http: file.http.unwrap_or_default(),
            client_roots,
            tools,
            config_file,
            iris_files_off,
        })
    }
}

/// Refuses a top-level key that is neither a core setting nor a family's table, then lets
/// every family's plug resolve its section.
fn family_sections(
    tables: &BTreeMap<String, serde::de::IgnoredAny>,
    text: Option<&ringfence_core::plug::FileText>,
    env: &dyn Env,
    data_dir: &Path,
) -> Result<FamilySettings, ConfigError> {
    let plugs = crate::families::FAMILIES;
    let taken: Vec<&str> = plugs.iter().filter_map(|p| p.section()).collect();
    if let (Some(text), Some(key)) = (text, tables.keys().find(|k| !taken.contains(&k.as_str()))) {
        let mut known: Vec<&str> = raw::CORE_KEYS.iter().copied().chain(taken).collect();
        known.sort_unstable();
        return Err(ConfigError::UnknownKey {
            path: text.path.clone(),
            key: key.clone(),
            known: known.join(", "),
        });
    }
    let input = SectionInput {
        file: text,
        env,
        data_dir,
    };
    let mut settings = FamilySettings::default();
    for plug in plugs {
        settings.insert(plug.info().name, plug.resolve(&input)?);
    }
    Ok(settings)
}

/// `--data-dir`, else `RINGFENCE_DATA_DIR`, else the file's `data_dir`, else the default.
fn data_dir(
    over: &Overrides,
    env: &dyn Env,
    file: Option<&Path>,
    cwd: &Path,
) -> Result<PathBuf, ConfigError> {
    if let Some(d) = &over.data_dir {
        absolute(d, cwd, "--data-dir")
    } else if let Some(d) = env
        .get(env_vars::RINGFENCE_DATA_DIR)
        .filter(|s| !s.is_empty())
    {
        absolute(Path::new(&d), cwd, env_vars::RINGFENCE_DATA_DIR)
    } else if let Some(d) = file {
        if !d.is_absolute() {
            return Err(ConfigError::not_absolute("data_dir", d));
        }
        Ok(d.to_owned())
    } else {
        default_data_dir(env)
    }
}

/// The log line format: `text` (false) or `json` (true).
fn log_json(over: &Overrides, env: &dyn Env, file: Option<&str>) -> Result<bool, ConfigError> {
    match over
        .log_format
        .clone()
        .or_else(|| {
            env.get(env_vars::RINGFENCE_LOG_FORMAT)
                .filter(|s| !s.is_empty())
        })
        .or_else(|| file.map(str::to_owned))
        .as_deref()
        .map(str::trim)
    {
        None | Some("text") => Ok(false),
        Some("json") => Ok(true),
        Some(other) => Err(ConfigError::invalid(
            "log_format",
            format!("`{other}` is not valid; use `text` or `json`"),
        )),
    }
}

fn home(env: &dyn Env) -> Option<PathBuf> {
    env.get(env_vars::HOME)
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `$XDG_DATA_HOME/ringfence`, else `~/.local/share/ringfence`.
pub fn default_data_dir(env: &dyn Env) -> Result<PathBuf, ConfigError> {
    if let Some(x) = env
        .get(env_vars::XDG_DATA_HOME)
        .filter(|x| Path::new(x).is_absolute())
    {
        return Ok(PathBuf::from(x).join("ringfence"));
    }
    home(env)
        .map(|h| h.join(".local/share/ringfence"))
        .ok_or(ConfigError::NoDataDir)
}

fn default_config_file(env: &dyn Env) -> Option<PathBuf> {
    let base = env
        .get(env_vars::XDG_CONFIG_HOME)
        .filter(|x| Path::new(x).is_absolute())
        .map(PathBuf::from)
        .or_else(|| home(env).map(|h| h.join(".config")))?;
    Some(base.join("ringfence/config.toml"))
}

/// A comma-separated list, blanks dropped.
fn list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

fn absolute(p: &Path, cwd: &Path, key: &str) -> Result<PathBuf, ConfigError> {
    if p.as_os_str().is_empty() {
        return Err(ConfigError::invalid(key, "empty path"));
    }
    Ok(ringfence_fs::normalize_lexically(&if p.is_absolute() {
        p.to_path_buf()
    } else {
        cwd.join(p)
    }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ringfence_fs::Access;

    pub(crate) fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Loads `toml` as the configuration file (written to a temporary directory, which is
    /// also the data directory), with the variables `pairs`.
    #[allow(clippy::disallowed_methods)] // a test fixture writing its own config file
    pub(crate) fn load_file(toml: &str, pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        std::fs::write(&path, toml).unwrap();
        let over = Overrides {
            config: Some(path),
            data_dir: Some(dir.path().to_owned()),
            ..Overrides::default()
        };
        Config::load(&over, &env(pairs), dir.path())
    }

    #[test]
    fn an_unknown_top_level_key_is_refused_naming_what_the_file_takes() {
        let err = load_file("log = \"info\"\n[memroy]\ndatabase = \"/m.db\"\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown key `memroy`"), "{err}");
        assert!(err.contains("memory") && err.contains("data_dir"), "{err}");
        let err = load_file("colour = 1\n", &[]).unwrap_err().to_string();
        assert!(err.contains("unknown key `colour`"), "{err}");
    }

    #[test]
    fn a_family_section_is_checked_at_load_even_when_its_tools_are_off() {
        // The memory tools are not offered, and the mistake still stops the start.
        let toml = "[tools]\ndisable = [\"memory\"]\n\n[memory.search]\nlexical_weight = 2.0\n";
        let err = load_file(toml, &[]).unwrap_err().to_string();
        assert!(err.contains("memory.search.lexical_weight"), "{err}");
        // A misspelt key inside the family's table is named with its line.
        let err = load_file("log = \"info\"\n[memory]\npinned = true\n", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("pinned") && err.contains("line 3"), "{err}");
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
}
