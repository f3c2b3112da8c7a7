//! `config show`: the configuration in effect, each value with where it came from — the
//! default, the file, the environment or a flag. Secrets are shown as set or unset, never
//! their value.
//!
//! Where a value came from is found by loading the configuration again with layers left
//! out (no flags; then no variables but those that find the file; then no file either) and
//! seeing where the value changes. Each family lists its own settings in effect
//! ([`ringfence_core::plug::FamilyPlug::shown`]), found the same way; what its table in the
//! file holds beyond them (per-user tables, channels) is shown as written.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;

use ringfence_core::plug::Env;

use super::{fail, print_out};
use crate::config::{Config, Overrides, ProcessEnv};
use crate::families::FAMILIES;

/// The process environment, noting each variable read that is set.
struct Noting<'a> {
    inner: &'a dyn Env,
    set: std::cell::RefCell<BTreeSet<String>>,
}

impl Env for Noting<'_> {
    fn get(&self, key: &str) -> Option<String> {
        let value = self.inner.get(key);
        if value.as_deref().is_some_and(|v| !v.is_empty()) {
            self.set.borrow_mut().insert(key.to_owned());
        }
        value
    }
}

/// Variables that only say where things are (the file, the home directory): kept when the
/// other variables are left out.
const PLACES: &[&str] = &[
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    crate::env_vars::RINGFENCE_CONFIG,
];

/// Whether a key or variable holds a secret (its value is never shown).
fn secret(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    !n.ends_with("_env")
        && (["password", "secret", "api_key", "apikey", "database_url"]
            .iter()
            .any(|s| n.contains(s))
            || n.ends_with("_key")
            || n.ends_with("token"))
}

pub(super) fn run(over: &Overrides) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let noting = Noting {
        inner: &ProcessEnv,
        set: Default::default(),
    };
    let config = match Config::load(over, &noting, &cwd) {
        Ok(c) => c,
        Err(e) => return fail(&format!("configuration error: {e}")),
    };
    let read: BTreeSet<String> = noting.set.into_inner();
    let places: BTreeMap<String, String> = PLACES
        .iter()
        .filter_map(|k| ProcessEnv.get(k).map(|v| ((*k).to_owned(), v)))
        .collect();
    let no_flags = Overrides {
        config: over.config.clone(),
        ..Overrides::default()
    };
    let mut no_file_env = places.clone();
    no_file_env.remove(crate::env_vars::RINGFENCE_CONFIG);
    // Nowhere: the default file is not found.
    no_file_env.insert(
        "XDG_CONFIG_HOME".into(),
        "/nonexistent/ringfence-config-show".into(),
    );
    let reduced = [
        Config::load(&no_flags, &ProcessEnv, &cwd).ok(),
        Config::load(&no_flags, &places, &cwd).ok(),
        Config::load(&Overrides::default(), &no_file_env, &cwd).ok(),
    ];
    let each = |f: &dyn Fn(&Config) -> Lines| -> Layers {
        [
            Some(f(&config)),
            reduced[0].as_ref().map(f),
            reduced[1].as_ref().map(f),
            reduced[2].as_ref().map(f),
        ]
    };
    let core_layers = each(&core);
    let families: Vec<Layers> = FAMILIES
        .iter()
        .map(|p| each(&|c: &Config| p.shown(&c.families).0))
        .collect();
    print_out(&render(&config, &core_layers, &families, &read));
    ExitCode::SUCCESS
}

/// Settings as `key = value` lines, in the file's terms.
type Lines = Vec<(String, String)>;
/// The same settings under each layer: all of them, then without flags, without variables,
/// without the file (`None`: that reduced configuration does not load).
type Layers = [Option<Lines>; 4];

/// The core's settings as `key = value` lines, in the file's terms.
fn core(c: &Config) -> Lines {
    let q = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let list = |items: &[String]| {
        let quoted: Vec<String> = items.iter().map(|s| q(s)).collect();
        format!("[{}]", quoted.join(", "))
    };
    let mut out = vec![
        ("data_dir".to_owned(), q(&c.data_dir.display().to_string())),
        (
            "roots".to_owned(),
            if c.roots.is_empty() {
                format!(
                    "[] # the default workspace, {}",
                    c.data_dir.join("workspace").display()
                )
            } else {
                let roots: Vec<String> = c
                    .roots
                    .iter()
                    .map(|r| {
                        let ro = if r.access == ringfence_fs::Access::ReadOnly {
                            ":ro"
                        } else {
                            ""
                        };
                        format!("{}{ro}", r.path.display())
                    })
                    .collect();
                list(&roots)
            },
        ),
        ("denylist".to_owned(), list(&c.denylist)),
        ("log".to_owned(), q(&c.log)),
        (
            "log_format".to_owned(),
            q(if c.log_json { "json" } else { "text" }),
        ),
        ("client_roots".to_owned(), q(c.client_roots.as_str())),
        (
            "tools.preset".to_owned(),
            q(c.tools.preset.as_deref().unwrap_or("full")),
        ),
        (
            "tools.enable".to_owned(),
            c.tools
                .enable
                .as_deref()
                .map_or("(every tool of the preset)".to_owned(), list),
        ),
        ("tools.add".to_owned(), list(&c.tools.add)),
        ("tools.disable".to_owned(), list(&c.tools.disable)),
    ];
    if let Ok(serde_json::Value::Object(limits)) = serde_json::to_value(&c.limits) {
        for (k, v) in limits {
            out.push((format!("limits.{k}"), v.to_string()));
        }
    }
    match &c.store {
        crate::config::StoreSettings::Sqlite => out.push(("store.backend".into(), q("sqlite"))),
        crate::config::StoreSettings::Postgres(pg) => {
            out.push(("store.backend".into(), q("postgres")));
            out.push((
                "store.url".into(),
                if pg.url.is_empty() {
                    "(unset)"
                } else {
                    "(set)"
                }
                .into(),
            ));
            out.push(("store.pool_size".into(), pg.pool_size.to_string()));
        }
    }
    if let Some(llm) = &c.llm {
        out.push(("llm.provider".into(), q(llm.provider_name())));
        if let ringfence_llm::LlmSource::Api(api) = &llm.source {
            out.push(("llm.model".into(), q(&api.model)));
            out.push((
                "llm.base_url".into(),
                q(api
                    .base_url
                    .as_deref()
                    .unwrap_or(api.provider.default_base_url())),
            ));
            let var = api.key_var();
            let set = ProcessEnv.get(&var).is_some_and(|v| !v.trim().is_empty());
            out.push((
                "llm.api_key_env".into(),
                format!(
                    "{} # the key: {}",
                    q(&var),
                    if set { "set" } else { "UNSET" }
                ),
            ));
        }
    }
    out
}

/// Where `key`'s value came from: the layer (flags, variables, file, defaults) whose removal
/// changes it. A reduced configuration that does not load (the file needs a variable) is
/// skipped, and the answer then names both layers it cannot tell apart.
fn source(key: &str, layers: &Layers) -> String {
    let value = |i: usize| {
        layers[i]
            .as_ref()
            .and_then(|l| l.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()))
    };
    let names = ["flag", "environment", "file", "default"];
    let mut from = 0;
    for next in 1..names.len() {
        if layers[next].is_none() {
            continue;
        }
        if value(from) != value(next) {
            return names[from..next].join(" or ");
        }
        from = next;
    }
    names[from..].join(" or ")
}

fn render(
    config: &Config,
    layers: &Layers,
    families: &[Layers],
    read: &BTreeSet<String>,
) -> String {
    let mut out = String::from(
        "# The configuration in effect; after each value, where it came from\n# (default, file, environment, flag). Secrets show as set or unset.\n",
    );
    out.push_str(&match &config.config_file {
        Some(f) => format!("# file: {}\n", f.display()),
        None => "# file: none (the embedded defaults)\n".to_owned(),
    });
    let mut table = "";
    for (key, value) in layers[0].as_deref().unwrap_or_default() {
        let (t, k) = key
            .split_once('.')
            .map_or(("", key.as_str()), |(t, k)| (t, k));
        if t != table {
            table = t;
            out.push_str(&format!("\n[{t}]\n"));
        }
        out.push_str(&format!("{k} = {value}   # {}\n", source(key, layers)));
    }
    let file_tables = config
        .config_file
        .as_ref()
        .and_then(|f| {
            #[allow(clippy::disallowed_methods)] // the configuration file, read again
            let text = std::fs::read_to_string(f).ok()?;
            text.parse::<toml::Table>().ok()
        })
        .unwrap_or_default();
    for (plug, layers) in FAMILIES.iter().zip(families) {
        let Some(section) = plug.section() else {
            continue;
        };
        out.push_str(&format!(
            "\n[{section}]   # the {} family\n",
            plug.info().name
        ));
        let lines = layers[0].as_deref().unwrap_or_default();
        for (key, value) in lines {
            out.push_str(&format!(
                "{key} = {}   # {}\n",
                masked(key, value),
                source(key, layers)
            ));
        }
        // What the file holds beyond the lines above (its subtables, a key the family does
        // not list), as written.
        let listed = |k: &str| lines.iter().any(|(key, _)| key == k) || listed_flat(lines, k);
        let mut any = !lines.is_empty();
        if let Some(toml::Value::Table(t)) = file_tables.get(section) {
            let rest: toml::Table = t
                .iter()
                .filter(|(k, v)| {
                    // A summary line (`users = 2 tables`) keeps the tables it sums up.
                    !listed(k) || (v.is_table() || v.is_array()) && !listed_flat(lines, k)
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for line in table_lines(section, &rest) {
                out.push_str(&line);
                any = true;
            }
        }
        for var in plug.env_vars().iter().filter(|v| read.contains(**v)) {
            let shown = if secret(var) {
                "(set)".to_owned()
            } else {
                ProcessEnv.get(var).unwrap_or_default()
            };
            out.push_str(&format!("# {var} = {shown}   # environment\n"));
            any = true;
        }
        if !any {
            out.push_str("# every key: its default (docs/configuration.md)\n");
        }
    }
    // Variables the file names for secrets (`password_env = "…"`): set or not.
    if !config.named_vars.is_empty() {
        out.push_str("\n# Variables the file names for secrets\n");
        for var in &config.named_vars {
            let set = ProcessEnv.get(var).is_some_and(|v| !v.trim().is_empty());
            out.push_str(&format!("# {var}: {}\n", if set { "set" } else { "UNSET" }));
        }
    }
    out
}

/// Whether the family lists `k`'s keys one by one (`search.provider`): its table in the file
/// then adds nothing.
fn listed_flat(lines: &[(String, String)], k: &str) -> bool {
    lines
        .iter()
        .any(|(key, _)| key.strip_prefix(k).is_some_and(|r| r.starts_with('.')))
}

/// A family's value as `config show` prints it: masked as the file's are (an address without
/// its path or login) when it reads as a TOML value, as given otherwise (`(set)`).
fn masked(key: &str, value: &str) -> String {
    let name = key.rsplit('.').next().unwrap_or(key);
    match format!("v = {value}").parse::<toml::Table>() {
        Ok(t) => t
            .get("v")
            .map_or_else(|| value.to_owned(), |v| shown(name, v)),
        Err(_) => value.to_owned(),
    }
}

/// A family's table as the file writes it, secrets masked, subtables and arrays of tables
/// under their names.
fn table_lines(name: &str, table: &toml::Table) -> Vec<String> {
    let mut lines = Vec::new();
    let mut subtables = Vec::new();
    for (k, v) in table {
        match v {
            toml::Value::Table(t) => subtables.push((format!("[{name}.{k}]"), t)),
            toml::Value::Array(items)
                if !items.is_empty() && items.iter().all(toml::Value::is_table) =>
            {
                for item in items.iter().filter_map(toml::Value::as_table) {
                    subtables.push((format!("[[{name}.{k}]]"), item));
                }
            }
            _ => lines.push(format!("{k} = {}   # file\n", shown(k, v))),
        }
    }
    for (header, t) in subtables {
        lines.push(format!("{header}\n"));
        let inner = header.trim_matches(['[', ']']);
        lines.extend(table_lines(inner, t));
    }
    lines
}

/// A value as `config show` prints it: a secret (by its key's name, or a command line or
/// proxy, which may carry one) as `(set)`; any address without its path, query or login (a
/// webhook's path is its secret, a URL may carry a password); anything else as written.
fn shown(key: &str, value: &toml::Value) -> String {
    if secret(key) || matches!(key, "command" | "proxy") {
        return "(set)".to_owned();
    }
    match value {
        toml::Value::String(text) => match url::Url::parse(text) {
            Ok(u)
                if u.has_host()
                    && (u.path() != "/"
                        || u.query().is_some()
                        || !u.username().is_empty()
                        || u.password().is_some()) =>
            {
                let port = u.port().map(|p| format!(":{p}")).unwrap_or_default();
                format!(
                    "\"{}://{}{port}/…\"",
                    u.scheme(),
                    u.host_str().unwrap_or_default()
                )
            }
            _ => value.to_string(),
        },
        toml::Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(|v| shown("", v)).collect();
            format!("[{}]", inner.join(", "))
        }
        _ => value.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::secret;

    #[test]
    fn addresses_lose_their_paths_and_logins() {
        use super::shown;
        let v = |s: &str| toml::Value::String(s.into());
        assert_eq!(
            shown("url", &v("https://hooks.example.org/T000/B000/secret")),
            "\"https://hooks.example.org/…\""
        );
        assert_eq!(
            shown("url", &v("https://u:p@dav.example.org/")),
            "\"https://dav.example.org/…\""
        );
        assert_eq!(
            shown("base_url", &v("http://127.0.0.1:11434/")),
            "\"http://127.0.0.1:11434/\""
        );
        assert_eq!(shown("url", &v("not a url")), "\"not a url\"");
        assert_eq!(shown("proxy", &v("http://u:p@proxy:3128")), "(set)");
        assert_eq!(shown("x", &v("https://:pw@host/")), "\"https://host/…\"");
        assert_eq!(
            shown("command", &v("curl -H 'Authorization: Bearer t'")),
            "(set)"
        );
        assert_eq!(
            shown(
                "allow",
                &toml::Value::Array(vec![v("https://a.example/p"), v("b")])
            ),
            "[\"https://a.example/…\", \"b\"]"
        );
        assert_eq!(shown("model", &v("m")), "\"m\"");
    }

    #[test]
    fn a_layer_that_does_not_load_is_named_with_its_neighbour() {
        use super::source;
        let l = |v: &str| Some(vec![("k".to_owned(), v.to_owned())]);
        assert_eq!(source("k", &[l("1"), l("1"), l("1"), l("1")]), "default");
        assert_eq!(source("k", &[l("2"), l("1"), l("1"), l("1")]), "flag");
        assert_eq!(
            source("k", &[l("2"), l("2"), l("1"), l("1")]),
            "environment"
        );
        assert_eq!(source("k", &[l("2"), l("2"), l("2"), l("1")]), "file");
        // Without variables the file does not load: the two cannot be told apart.
        assert_eq!(
            source("k", &[l("2"), l("2"), None, l("1")]),
            "environment or file"
        );
        assert_eq!(source("k", &[l("1"), l("1"), None, l("1")]), "default");
    }

    #[test]
    fn secrets_are_known_by_their_names() {
        for s in [
            "password",
            "api_key",
            "secret",
            "client_secret",
            "RINGFENCE_DATABASE_URL",
            "BRAVE_API_KEY",
            "token",
            "refresh_token",
            "RINGFENCE_ADMIN_TOKEN",
        ] {
            assert!(secret(s), "{s}");
        }
        for s in [
            "password_env",
            "api_key_env",
            "url",
            "base_url",
            "model",
            "RINGFENCE_SHELL_ENABLED",
            "max_tokens",
            "token_budget",
        ] {
            assert!(!secret(s), "{s}");
        }
    }
}
