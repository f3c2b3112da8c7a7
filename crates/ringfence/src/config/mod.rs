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
    /// The variables the file names for secrets (`password_env = "…"`, any `*_env` key):
    /// read by ringfence, so never reported as unknown.
    pub named_vars: Vec<String>,
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
        let explicit = match &over.config {
            Some(path) => Some(expand_home_path(path, env, "--config")?),
            None => match env
                .get(env_vars::RINGFENCE_CONFIG)
                .filter(|s| !s.is_empty())
            {
                Some(v) => Some(PathBuf::from(expand_home(
                    &v,
                    env,
                    env_vars::RINGFENCE_CONFIG,
                )?)),
                None => None,
            },
        };
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

        let named_vars = text
            .as_ref()
            .map(|t| named_vars(&t.text))
            .unwrap_or_default();

        Ok(Config {
            named_vars,
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

/// The values of every `*_env` key in the file, at any depth (the file parsed already).
fn named_vars(text: &str) -> Vec<String> {
    fn walk(value: &toml::Value, out: &mut Vec<String>) {
        match value {
            toml::Value::Table(table) => {
                for (key, v) in table {
                    match v {
                        toml::Value::String(name) if key.ends_with("_env") => {
                            out.push(name.clone())
                        }
                        other => walk(other, out),
                    }
                }
            }
            toml::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(table) = text.parse::<toml::Table>() {
        walk(&toml::Value::Table(table), &mut out);
    }
    out
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
        absolute(&expand_home_path(d, env, "--data-dir")?, cwd, "--data-dir")
    } else if let Some(d) = env
        .get(env_vars::RINGFENCE_DATA_DIR)
        .filter(|s| !s.is_empty())
    {
        let d = expand_home(&d, env, env_vars::RINGFENCE_DATA_DIR)?;
        absolute(Path::new(&d), cwd, env_vars::RINGFENCE_DATA_DIR)
    } else if let Some(d) = file {
        let d = &expand_home_path(d, env, "data_dir")?;
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

/// The platform whose conventions place the data directory and the configuration file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Os {
    /// Linux and every other Unix but macOS: the XDG base directories.
    Linux,
    Mac,
    Windows,
}

impl Os {
    pub(crate) fn this() -> Os {
        if cfg!(target_os = "macos") {
            Os::Mac
        } else if cfg!(windows) {
            Os::Windows
        } else {
            Os::Linux
        }
    }
}

/// The home directory: `HOME` (on Windows `USERPROFILE` first).
fn home(env: &dyn Env) -> Option<PathBuf> {
    home_on(Os::this(), env)
}

fn home_on(os: Os, env: &dyn Env) -> Option<PathBuf> {
    let var = |k: &str| env.get(k).filter(|h| !h.is_empty()).map(PathBuf::from);
    match os {
        Os::Windows => var(env_vars::USERPROFILE).or_else(|| var(env_vars::HOME)),
        _ => var(env_vars::HOME),
    }
}

/// An absolute directory named by `var`, if set.
fn absolute_var(env: &dyn Env, var: &str) -> Option<PathBuf> {
    env.get(var)
        .filter(|x| Path::new(x).is_absolute())
        .map(PathBuf::from)
}

/// The data directory by this platform's convention (see [`default_data_dir_on`]).
pub fn default_data_dir(env: &dyn Env) -> Result<PathBuf, ConfigError> {
    default_data_dir_on(Os::this(), env)
}

/// The data directory by `os`'s convention: on Linux `$XDG_DATA_HOME/ringfence`, else
/// `~/.local/share/ringfence`; on macOS `$XDG_DATA_HOME/ringfence` when set, else
/// `~/Library/Application Support/ringfence/data`; on Windows
/// `%LOCALAPPDATA%\ringfence\data`.
pub(crate) fn default_data_dir_on(os: Os, env: &dyn Env) -> Result<PathBuf, ConfigError> {
    let dir = match os {
        Os::Windows => {
            absolute_var(env, env_vars::LOCALAPPDATA).map(|d| d.join("ringfence").join("data"))
        }
        Os::Linux | Os::Mac => match absolute_var(env, env_vars::XDG_DATA_HOME) {
            Some(x) => Some(x.join("ringfence")),
            None if os == Os::Mac => {
                home_on(os, env).map(|h| h.join("Library/Application Support/ringfence/data"))
            }
            None => home_on(os, env).map(|h| h.join(".local/share/ringfence")),
        },
    };
    dir.ok_or(ConfigError::NoDataDir)
}

pub(crate) fn default_config_file(env: &dyn Env) -> Option<PathBuf> {
    default_config_file_on(Os::this(), env)
}

/// The configuration file by `os`'s convention: on Linux
/// `$XDG_CONFIG_HOME/ringfence/config.toml`, else `~/.config/ringfence/config.toml`; on macOS
/// `$XDG_CONFIG_HOME/ringfence/config.toml` when set, else
/// `~/Library/Application Support/ringfence/config.toml`; on Windows
/// `%APPDATA%\ringfence\config.toml`.
pub(crate) fn default_config_file_on(os: Os, env: &dyn Env) -> Option<PathBuf> {
    let base = match os {
        Os::Windows => absolute_var(env, env_vars::APPDATA)?,
        Os::Linux | Os::Mac => match absolute_var(env, env_vars::XDG_CONFIG_HOME) {
            Some(x) => x,
            None if os == Os::Mac => home_on(os, env)?.join("Library/Application Support"),
            None => home_on(os, env)?.join(".config"),
        },
    };
    Some(base.join("ringfence").join("config.toml"))
}

/// `value` with a leading `~` or `$HOME` (`${HOME}`) replaced by the home directory, as a
/// shell would have done (a path in a configuration file, a variable or `--flag=~/x` never
/// meets one). `~user` is refused: ringfence does not look other accounts up.
pub(crate) fn expand_home(value: &str, env: &dyn Env, key: &str) -> Result<String, ConfigError> {
    let rest = if let Some(rest) = value.strip_prefix('~') {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return Err(ConfigError::invalid(
                key,
                format!(
                    "`{value}`: `~name` (another account's home) is not expanded; write the full path"
                ),
            ));
        }
        rest
    } else if let Some(rest) = value
        .strip_prefix("${HOME}")
        .or_else(|| value.strip_prefix("$HOME"))
        .filter(|rest| rest.is_empty() || rest.starts_with('/'))
    {
        rest
    } else {
        return Ok(value.to_owned());
    };
    let Some(home) = home(env) else {
        return Err(ConfigError::invalid(
            key,
            format!(
                "`{value}` starts from the home directory, but HOME is not set; write the full path"
            ),
        ));
    };
    Ok(format!("{}{rest}", home.display()))
}

/// [`expand_home`] for a path (one that is not UTF-8 is left as it is).
fn expand_home_path(path: &Path, env: &dyn Env, key: &str) -> Result<PathBuf, ConfigError> {
    match path.to_str() {
        Some(s) => expand_home(s, env, key).map(PathBuf::from),
        None => Ok(path.to_owned()),
    }
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
            default_data_dir_on(Os::Linux, &e).unwrap(),
            PathBuf::from("/x/data/ringfence")
        );
        let e = env(&[("HOME", "/home/u")]);
        assert_eq!(
            default_data_dir_on(Os::Linux, &e).unwrap(),
            PathBuf::from("/home/u/.local/share/ringfence")
        );
        assert!(default_data_dir_on(Os::Linux, &env(&[])).is_err());
        // A relative XDG variable is ignored, as the specification says.
        let e = env(&[("XDG_CONFIG_HOME", "cfg"), ("HOME", "/home/u")]);
        assert_eq!(
            default_config_file_on(Os::Linux, &e).unwrap(),
            PathBuf::from("/home/u/.config/ringfence/config.toml")
        );
    }

    #[test]
    fn macos_and_windows_places_follow_their_conventions() {
        let e = env(&[("HOME", "/Users/u")]);
        assert_eq!(
            default_data_dir_on(Os::Mac, &e).unwrap(),
            PathBuf::from("/Users/u/Library/Application Support/ringfence/data")
        );
        assert_eq!(
            default_config_file_on(Os::Mac, &e).unwrap(),
            PathBuf::from("/Users/u/Library/Application Support/ringfence/config.toml")
        );
        // On macOS the XDG variables, when set, win: the person asked for them.
        let e = env(&[
            ("HOME", "/Users/u"),
            ("XDG_DATA_HOME", "/x/data"),
            ("XDG_CONFIG_HOME", "/x/cfg"),
        ]);
        assert_eq!(
            default_data_dir_on(Os::Mac, &e).unwrap(),
            PathBuf::from("/x/data/ringfence")
        );
        assert_eq!(
            default_config_file_on(Os::Mac, &e).unwrap(),
            PathBuf::from("/x/cfg/ringfence/config.toml")
        );
        // Windows: the local folder for data, the roaming one for the configuration; the
        // XDG variables and HOME play no part. (Paths as Linux spells them: this test checks
        // the choice of folder, the separators are the platform's own.)
        let e = env(&[
            ("LOCALAPPDATA", "/C/Users/u/AppData/Local"),
            ("APPDATA", "/C/Users/u/AppData/Roaming"),
            ("XDG_DATA_HOME", "/x/data"),
            ("HOME", "/home/u"),
        ]);
        assert_eq!(
            default_data_dir_on(Os::Windows, &e).unwrap(),
            PathBuf::from("/C/Users/u/AppData/Local/ringfence/data")
        );
        assert_eq!(
            default_config_file_on(Os::Windows, &e).unwrap(),
            PathBuf::from("/C/Users/u/AppData/Roaming/ringfence/config.toml")
        );
        let e = env(&[("HOME", "/home/u")]);
        let err = default_data_dir_on(Os::Windows, &e)
            .unwrap_err()
            .to_string();
        assert!(err.contains("on Windows LOCALAPPDATA"), "{err}");
        assert_eq!(default_config_file_on(Os::Windows, &e), None);
        assert_eq!(
            home_on(
                Os::Windows,
                &env(&[("USERPROFILE", "/C/Users/u"), ("HOME", "/h")])
            ),
            Some(PathBuf::from("/C/Users/u"))
        );
    }

    #[test]
    fn home_is_expanded_in_roots_data_dir_and_the_config_path() {
        let e = env(&[
            ("HOME", "/home/u"),
            ("RINGFENCE_ROOTS", "~/notes:ro:$HOME/code"),
        ]);
        let over = Overrides {
            data_dir: Some("~/rf-data".into()),
            ..Overrides::default()
        };
        let cfg = Config::load(&over, &e, Path::new("/cwd")).unwrap();
        assert_eq!(cfg.data_dir, PathBuf::from("/home/u/rf-data"));
        assert_eq!(cfg.roots[0].path, PathBuf::from("/home/u/notes"));
        assert_eq!(cfg.roots[0].access, Access::ReadOnly);
        assert_eq!(cfg.roots[1].path, PathBuf::from("/home/u/code"));
        let over = Overrides {
            roots: vec!["~".into(), "${HOME}/x:ro".into()],
            ..Overrides::default()
        };
        let cfg = Config::load(&over, &e, Path::new("/cwd")).unwrap();
        assert_eq!(cfg.roots[0].path, PathBuf::from("/home/u"));
        assert_eq!(cfg.roots[1].path, PathBuf::from("/home/u/x"));
        // Not a home reference: kept as written (relative to the working directory).
        let over = Overrides {
            roots: vec!["$HOMEWORK".into(), "a~b".into()],
            ..Overrides::default()
        };
        let cfg = Config::load(&over, &e, Path::new("/cwd")).unwrap();
        assert_eq!(cfg.roots[0].path, PathBuf::from("/cwd/$HOMEWORK"));
        assert_eq!(cfg.roots[1].path, PathBuf::from("/cwd/a~b"));
        // Another account's home, and no HOME at all: refused, saying what to write.
        let over = Overrides {
            roots: vec!["~bob/notes".into()],
            ..Overrides::default()
        };
        let err = Config::load(&over, &e, Path::new("/cwd"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("~bob/notes") && err.contains("full path"),
            "{err}"
        );
        let over = Overrides {
            data_dir: Some("/d".into()),
            roots: vec!["~/notes".into()],
            ..Overrides::default()
        };
        let err = Config::load(&over, &env(&[]), Path::new("/cwd"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("HOME is not set"), "{err}");
    }

    #[test]
    fn home_is_expanded_in_the_files_roots_and_data_dir() {
        let cfg = load_file(
            "data_dir = \"~/rf\"\nroots = [\"~/notes:ro\", { path = \"$HOME/code\", access = \"write\" }]\n",
            &[("HOME", "/home/u")],
        );
        // load_file gives --data-dir; the file's data_dir is checked below on its own.
        let cfg = cfg.unwrap();
        assert_eq!(cfg.roots[0].path, PathBuf::from("/home/u/notes"));
        assert_eq!(cfg.roots[1].path, PathBuf::from("/home/u/code"));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        #[allow(clippy::disallowed_methods)] // the test's own config file
        std::fs::write(&path, "data_dir = \"~/rf\"\n").unwrap();
        let over = Overrides {
            config: Some(path),
            ..Overrides::default()
        };
        let cfg = Config::load(&over, &env(&[("HOME", "/home/u")]), dir.path()).unwrap();
        assert_eq!(cfg.data_dir, PathBuf::from("/home/u/rf"));
    }

    #[test]
    fn variables_the_file_names_are_collected_at_any_depth() {
        let vars = named_vars(
            "[llm]\napi_key_env = \"MY_KEY\"\n[calendar]\npassword_env = \"RINGFENCE_CALDAV_PASSWORD\"\n[[followups.channels]]\nsecret_env = \"HOOK_SECRET\"\nname_env = 3\n",
        );
        let mut vars = vars;
        vars.sort();
        assert_eq!(vars, ["HOOK_SECRET", "MY_KEY", "RINGFENCE_CALDAV_PASSWORD"]);
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
