//! `init`: writes a person's configuration file, every optional family's table present and
//! commented (the families' own samples), the common answers set from flags. It never
//! replaces a file. The result is loaded before it is written; what it lacks in this
//! environment (an API key's variable) is said, since the client that launches ringfence
//! may well set it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use super::{fail, print_out, say};
use crate::config::{Config, Overrides, ProcessEnv};
use crate::families::FAMILIES;

#[derive(Debug, clap::Args)]
pub(super) struct InitArgs {
    /// A directory the assistant may reach: `PATH` or `PATH:ro` (read-only); `~` is your home.
    /// Repeatable. Without any, it works in `<data dir>/workspace`.
    #[arg(long = "root", value_name = "ROOT")]
    roots: Vec<String>,
    /// Turn the shell on (`[shell] enabled = true`): run_shell_command, sandboxed.
    #[arg(long)]
    shell: bool,
    /// The web search provider (its key in the provider's usual variable, e.g.
    /// BRAVE_API_KEY). SearXNG needs its address: set `[web.search]` in the file.
    #[arg(long, value_name = "PROVIDER", value_parser = ["brave", "tavily", "serper"])]
    search: Option<String>,
    /// Where the calendar lives: local (a file in the data directory) or google (then run
    /// `ringfence calendar connect google`). CalDAV needs its address and login: set
    /// `[calendar]` in the file.
    #[arg(long, value_name = "PROVIDER", value_parser = ["local", "google"])]
    calendar: Option<String>,
    /// The model ringfence's own features use (delegation, follow-up messages): openai (any
    /// compatible endpoint), anthropic, or sampling (the connected client's model).
    #[arg(long, value_name = "PROVIDER", value_parser = ["openai", "anthropic", "sampling"])]
    llm: Option<String>,
    /// With --llm openai or anthropic (required there): the model's name.
    #[arg(
        long,
        value_name = "NAME",
        requires = "llm",
        required_if_eq_any([("llm", "openai"), ("llm", "anthropic")])
    )]
    model: Option<String>,
    /// With --llm openai: the endpoint (default https://api.openai.com/v1; Ollama:
    /// http://127.0.0.1:11434/v1).
    #[arg(long, value_name = "URL", requires = "llm")]
    base_url: Option<String>,
    /// Turn proactive messages on: follow-ups are delivered when due.
    #[arg(long)]
    proactive: bool,
    /// Print the configuration instead of writing it.
    #[arg(long)]
    print: bool,
}

/// Where `init` writes: `--config`, else `RINGFENCE_CONFIG`, else the default place.
fn target(explicit: Option<&Path>, cwd: &Path) -> Result<PathBuf, String> {
    let env = ProcessEnv;
    let chosen = match explicit {
        Some(p) => Some(p.to_owned()),
        None => ringfence_core::plug::Env::get(&env, crate::env_vars::RINGFENCE_CONFIG)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
    };
    let path = match chosen {
        Some(p) => {
            let p = crate::config::expand_home(&p.to_string_lossy(), &env, "--config")
                .map_err(|e| e.to_string())?;
            cwd.join(p)
        }
        None => crate::config::default_config_file(&env).ok_or(
            "cannot tell where your configuration goes: HOME is not set; name the file with --config",
        )?,
    };
    Ok(ringfence_fs::normalize_lexically(&path))
}

pub(super) fn run(args: &InitArgs, explicit: Option<&Path>) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let text = match configuration(args) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    if args.print {
        print_out(&text);
        return ExitCode::SUCCESS;
    }
    let path = match target(explicit, &cwd) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    if exists(&path) {
        say(&format!(
            "ringfence: a configuration already exists at {}; init never replaces one. Edit it, or move it away and run init again (`ringfence init --print` shows what init would write).",
            path.display()
        ));
        return ExitCode::from(1);
    }
    // Loaded from a copy first. What it lacks in this environment (a key's variable, which
    // the client may set) is said once it is written; anything else stops here.
    let lacking = check(&text, &cwd).err();
    if let Some(e) = &lacking
        && !(e.contains("environment") || e.contains("variable"))
    {
        return fail(&format!(
            "these answers make a configuration that would not load ({e}); nothing was written"
        ));
    }
    if let Some(dir) = path.parent()
        && let Err(e) = ringfence_fs::create_private_dir_all(dir)
    {
        return fail(&format!("cannot create {}: {e}", dir.display()));
    }
    match ringfence_fs::create_private_file(&path, text.as_bytes()) {
        Ok(()) => {
            say(&format!("Wrote {} (readable by you only).", path.display()));
            if let Some(e) = lacking {
                say(&format!(
                    "Before it is used, in the environment ringfence runs in: {e}"
                ));
            }
            say(
                "Next: `ringfence doctor` checks it; `ringfence setup <client>` connects your assistant (claude-desktop, claude-code, cursor, vscode, windsurf, …).",
            );
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            say(&format!(
                "ringfence: a configuration appeared at {} meanwhile; init never replaces one",
                path.display()
            ));
            ExitCode::from(1)
        }
        Err(e) => fail(&format!("cannot write {}: {e}", path.display())),
    }
}

/// Whether anything (a file, a link, even a broken one) has the name `path`.
#[allow(clippy::disallowed_methods)] // the person's own configuration file, not a root
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Loads `text` as the configuration (from a private temporary file), with this process's
/// environment.
fn check(text: &str, cwd: &Path) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("config.toml");
    ringfence_fs::write_private_file(&file, text.as_bytes()).map_err(|e| e.to_string())?;
    let over = Overrides {
        config: Some(file),
        data_dir: Some(dir.path().join("data")),
        ..Overrides::default()
    };
    Config::load(&over, &ProcessEnv, cwd)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// The file's text: the core's settings, then each family's sample, then `[llm]`, with
/// the flags' answers made settings.
fn configuration(args: &InitArgs) -> Result<String, String> {
    let mut text = String::from(HEADER);
    text.push('\n');
    if args.roots.is_empty() {
        text.push_str("# roots = [\"~/Documents\", \"~/code:ro\"]\n");
    } else {
        let quoted: Vec<String> = args.roots.iter().map(|r| toml_string(r)).collect();
        text.push_str(&format!("roots = [{}]\n", quoted.join(", ")));
    }
    text.push_str(CORE);
    for sample in FAMILIES.iter().filter_map(|p| p.sample()) {
        text.push('\n');
        text.push_str(sample);
        text.push('\n');
    }
    text.push('\n');
    text.push_str(ringfence_llm::LLM_SAMPLE);
    text.push('\n');
    if args.shell {
        text = activate(&text, "shell", &[("enabled", "true".into())])?;
    }
    if let Some(p) = &args.search {
        text = activate(&text, "web.search", &[("provider", toml_string(p))])?;
    }
    if let Some(p) = &args.calendar {
        text = activate(&text, "calendar", &[("provider", toml_string(p))])?;
    }
    if args.proactive {
        text = activate(&text, "followups", &[("proactive", "true".into())])?;
    }
    if session_bus() {
        // On a desktop, follow-ups show as notifications (and still reach the client).
        text = uncomment_array(&text, "followups.channels");
    }
    if let Some(p) = &args.llm {
        if p == "sampling" && args.base_url.is_some() {
            return Err(
                "--llm sampling uses the connected client's own model: it takes no --base-url"
                    .into(),
            );
        }
        let mut keys = vec![("provider", toml_string(p))];
        if let Some(m) = &args.model {
            keys.push(("model", toml_string(m)));
        }
        if let Some(u) = &args.base_url {
            keys.push(("base_url", toml_string(u)));
        }
        text = activate(&text, "llm", &keys)?;
    }
    Ok(text)
}

const HEADER: &str = "\
## ringfence's configuration, written by `ringfence init`.
## A line `# key = value` is a setting left at its default: remove the `# ` to use it.
## Every key, with its default: docs/configuration.md. Roots, data_dir and the
## configuration's own path may start with `~`.
## Check the file with `ringfence doctor`; see what ringfence makes of it with
## `ringfence config show`.

## The directories your assistant may reach: \"PATH\" (read and write) or \"PATH:ro\"
## (read only). Without any, it works in <data dir>/workspace.";

const CORE: &str = "
## Files never shown or changed, whatever the roots (gitignore patterns).
# denylist = [\".env\", \"*.pem\", \"id_*\"]

## Which tools your assistant gets. \"assistant\" leaves out the file tools that do what
## another does (a third fewer tools for every conversation to carry); \"full\" is every
## tool (what ringfence offers without a file: agents written for the llm-chat file tools
## need it); \"iris\" and \"llm-chat\" are file tools only. `ringfence tools --names`
## lists the set.
[tools]
preset = \"assistant\"
# disable = [\"delete_file\"]   # tools or families to leave out
";

/// Whether this process runs in a desktop session (a session bus is named).
fn session_bus() -> bool {
    std::env::var_os("DBUS_SESSION_BUS_ADDRESS").is_some_and(|a| !a.is_empty())
}

/// `text` with every commented `[[table]]` block made settings.
fn uncomment_array(text: &str, table: &str) -> String {
    let header = format!("# [[{table}]]");
    let mut inside = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_end() == header {
            inside = true;
        } else if !line.starts_with("# ") || line.starts_with("# [") {
            inside = false;
        }
        out.push_str(match line.strip_prefix("# ") {
            Some(setting) if inside => setting,
            _ => line,
        });
        out.push('\n');
    }
    out
}

/// `s` as a TOML basic string.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// `text` with the commented table `[table]` made a table and each of `keys` set in it: the
/// commented setting of that name uncommented with the new value (its comment kept), or a
/// new line under the table's header.
fn activate(text: &str, table: &str, keys: &[(&str, String)]) -> Result<String, String> {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let header = format!("# [{table}]");
    let at = lines
        .iter()
        .position(|l| l.trim_end() == header)
        .ok_or_else(|| format!("the sample has no [{table}] table"))?;
    lines[at] = format!("[{table}]");
    let end = lines[at + 1..]
        .iter()
        .position(|l| !l.starts_with("# ") || l.starts_with("# ["))
        .map_or(lines.len(), |n| at + 1 + n);
    for (key, value) in keys {
        let found = (at + 1..end).find(|&i| {
            lines[i]
                .strip_prefix("# ")
                .and_then(|l| l.split_once('='))
                .is_some_and(|(k, _)| k.trim() == *key)
        });
        match found {
            Some(i) => {
                let comment = comment_of(&lines[i][2..]);
                lines[i] = match comment {
                    Some(c) => format!("{key} = {value}   {c}"),
                    None => format!("{key} = {value}"),
                };
            }
            None => lines.insert(at + 1, format!("{key} = {value}")),
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    Ok(out)
}

/// The trailing `# comment` of a TOML line, if any (a `#` inside a string is not one).
fn comment_of(line: &str) -> Option<&str> {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return Some(&line[i..]),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> InitArgs {
        InitArgs {
            roots: Vec::new(),
            shell: false,
            search: None,
            calendar: None,
            llm: None,
            model: None,
            base_url: None,
            proactive: false,
            print: true,
        }
    }

    /// Every `# ` line made a line of its own: what a person gets who uncomments everything.
    fn uncommented(text: &str) -> String {
        text.lines()
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n")
    }

    fn load(text: &str, vars: &[(&str, &str)]) -> Result<Config, crate::config::ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("config.toml");
        ringfence_fs::write_private_file(&file, text.as_bytes()).unwrap();
        let over = Overrides {
            config: Some(file),
            data_dir: Some(dir.path().join("data")),
            ..Overrides::default()
        };
        let mut env: std::collections::BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        env.insert("HOME".into(), dir.path().display().to_string());
        Config::load(&over, &env, dir.path())
    }

    #[test]
    fn the_written_file_loads_and_has_every_optional_table_commented() {
        let text = configuration(&args()).unwrap();
        load(&text, &[]).unwrap();
        for table in [
            "[shell]",
            "[web.search]",
            "[images]",
            "[calendar]",
            "[followups]",
            "[llm]",
            "[memory]",
            "[delegate]",
        ] {
            assert!(text.contains(&format!("\n# {table}\n")), "{table}:\n{text}");
        }
    }

    #[test]
    fn uncommenting_every_setting_leaves_a_file_that_loads() {
        let text = uncommented(&configuration(&args()).unwrap());
        let config = load(
            &text,
            &[
                ("RINGFENCE_HOOK_SECRET", "s"),
                ("RINGFENCE_CALDAV_PASSWORD", "p"),
                ("BRAVE_API_KEY", "k"),
                ("OPENAI_API_KEY", "k"),
            ],
        );
        assert!(
            config.is_ok(),
            "{:?}\n{text}",
            config.err().map(|e| e.to_string())
        );
    }

    #[test]
    fn flags_set_the_common_answers() {
        let text = configuration(&InitArgs {
            roots: vec!["~/notes".into(), "~/code:ro".into()],
            shell: true,
            search: Some("brave".into()),
            calendar: Some("google".into()),
            llm: Some("openai".into()),
            model: Some("qwen3:8b".into()),
            base_url: Some("http://127.0.0.1:11434/v1".into()),
            proactive: true,
            ..args()
        })
        .unwrap();
        assert!(
            text.contains("roots = [\"~/notes\", \"~/code:ro\"]\n"),
            "{text}"
        );
        assert!(text.contains("\n[shell]\nenabled = true   # "), "{text}");
        assert!(
            text.contains("\n[web.search]\nprovider = \"brave\"   # "),
            "{text}"
        );
        assert!(
            text.contains("\n[calendar]\nprovider = \"google\"   # "),
            "{text}"
        );
        assert!(
            text.contains("\n[followups]\nproactive = true   # "),
            "{text}"
        );
        assert!(text.contains("\n[llm]\nprovider = \"openai\"\n"), "{text}");
        assert!(text.contains("\nmodel = \"qwen3:8b\"\n"), "{text}");
        let config = load(&text, &[("BRAVE_API_KEY", "k")]).unwrap();
        assert_eq!(config.roots.len(), 2);
        assert!(config.llm.is_some());
        // The rest stays commented.
        assert!(text.contains("\n# network = \"none\""), "{text}");
    }

    #[test]
    fn on_a_desktop_follow_ups_go_to_notifications_and_the_client() {
        let text = uncomment_array(&configuration(&args()).unwrap(), "followups.channels");
        assert!(
            text.contains("\n[[followups.channels]]\nkind = \"desktop\"")
                && text.contains("\n[[followups.channels]]\nkind = \"mcp\""),
            "{text}"
        );
        // The rest of [followups] stays as it was.
        assert!(
            text.contains("\n# [followups]\n# proactive = true"),
            "{text}"
        );
        load(&text, &[]).unwrap();
    }

    #[test]
    fn a_comment_is_found_outside_strings_only() {
        assert_eq!(comment_of("a = \"x#y\"  # z"), Some("# z"));
        assert_eq!(comment_of("a = 1"), None);
    }
}
