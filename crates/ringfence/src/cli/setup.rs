//! `setup <client>`: puts a `ringfence` entry into an MCP client's own configuration file, at
//! the place that client documents for this system, keeping every other server and setting.
//! The previous file is kept beside it (`….ringfence-backup`); a second run that would change
//! nothing writes nothing; `--print` only shows the entry. A file with comments (JSONC) is
//! not rewritten — a rewrite would drop them — the entry is shown to add by hand.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use indexmap::IndexMap;
use serde_json::{Value, json};

use super::{fail, print_out, say};
use crate::config::{Os, ProcessEnv};

#[derive(Debug, clap::Args)]
pub(super) struct SetupArgs {
    /// The client: claude-desktop, claude-code, cursor, vscode, windsurf, zed, gemini, codex
    /// or lm-studio.
    #[arg(value_parser = CLIENTS.iter().map(|c| c.name).collect::<Vec<_>>())]
    client: String,
    /// Directories the assistant may reach (`PATH` or `PATH:ro`; `~` is your home): written
    /// as arguments of `ringfence serve`. Without any, the configured roots.
    roots: Vec<String>,
    /// Only print the entry and where it goes; change nothing.
    #[arg(long)]
    print: bool,
    /// The project's file in the current directory (claude-code `.mcp.json`, cursor
    /// `.cursor/mcp.json`, vscode `.vscode/mcp.json`, zed `.zed/settings.json`, gemini
    /// `.gemini/settings.json`) instead of your own.
    #[arg(long)]
    project: bool,
    /// The server's name in the client (default ringfence).
    #[arg(long, default_value = "ringfence", value_name = "NAME")]
    name: String,
}

/// How a client lists servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// JSON `{key: {name: {command, args}}}`.
    Json { key: &'static str, typed: bool },
    /// TOML `[mcp_servers.<name>]` with `command` and `args` (Codex).
    Toml,
}

#[derive(Debug)]
struct Client {
    name: &'static str,
    title: &'static str,
    shape: Shape,
    /// What to do after (restart, approve).
    after: &'static str,
}

const CLIENTS: &[Client] = &[
    Client {
        name: "claude-desktop",
        title: "Claude Desktop",
        shape: Shape::Json {
            key: "mcpServers",
            typed: false,
        },
        after: "Quit Claude Desktop completely and start it again.",
    },
    Client {
        name: "claude-code",
        title: "Claude Code",
        shape: Shape::Json {
            key: "mcpServers",
            typed: true,
        },
        after: "Start a new Claude Code session; `/mcp` lists the servers (a project's servers ask for approval once).",
    },
    Client {
        name: "cursor",
        title: "Cursor",
        shape: Shape::Json {
            key: "mcpServers",
            typed: false,
        },
        after: "Reload Cursor (or its MCP settings page).",
    },
    Client {
        name: "vscode",
        title: "VS Code",
        shape: Shape::Json {
            key: "servers",
            typed: true,
        },
        after: "Run \"MCP: List Servers\" in VS Code and start ringfence.",
    },
    Client {
        name: "windsurf",
        title: "Windsurf",
        shape: Shape::Json {
            key: "mcpServers",
            typed: false,
        },
        after: "Press refresh in Windsurf's MCP panel.",
    },
    Client {
        name: "zed",
        title: "Zed",
        shape: Shape::Json {
            key: "context_servers",
            typed: false,
        },
        after: "Zed picks the change up by itself; the agent panel's settings list the server.",
    },
    Client {
        name: "gemini",
        title: "Gemini CLI",
        shape: Shape::Json {
            key: "mcpServers",
            typed: false,
        },
        after: "Start gemini again; `/mcp` lists the servers.",
    },
    Client {
        name: "codex",
        title: "Codex CLI",
        shape: Shape::Toml,
        after: "Start codex again; `/mcp` lists the servers.",
    },
    Client {
        name: "lm-studio",
        title: "LM Studio",
        shape: Shape::Json {
            key: "mcpServers",
            typed: false,
        },
        after: "Restart LM Studio's chat (or the app).",
    },
];

/// Where `client` keeps its servers on `os`, for the person (or for the project in `cwd`).
fn location(
    client: &str,
    os: Os,
    project: Option<&Path>,
    env: &dyn ringfence_core::plug::Env,
) -> Result<PathBuf, String> {
    let var = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = project {
        return match client {
            "claude-code" => Ok(dir.join(".mcp.json")),
            "cursor" => Ok(dir.join(".cursor/mcp.json")),
            "vscode" => Ok(dir.join(".vscode/mcp.json")),
            "zed" => Ok(dir.join(".zed/settings.json")),
            "gemini" => Ok(dir.join(".gemini/settings.json")),
            other => Err(format!(
                "{other} has no project file; run setup without --project"
            )),
        };
    }
    let home = match os {
        Os::Windows => var("USERPROFILE").or_else(|| var("HOME")),
        _ => var("HOME"),
    }
    .ok_or("cannot find your home directory: HOME is not set")?;
    let config = || {
        var("XDG_CONFIG_HOME")
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| home.join(".config"))
    };
    let appdata = || {
        var("APPDATA")
            .ok_or_else(|| "cannot find the application data folder: APPDATA is not set".to_owned())
    };
    let app_support = || home.join("Library/Application Support");
    Ok(match (client, os) {
        ("claude-desktop", Os::Mac) => app_support().join("Claude/claude_desktop_config.json"),
        ("claude-desktop", Os::Windows) => appdata()?.join("Claude\\claude_desktop_config.json"),
        // Anthropic ships no Linux build; the community builds read this place.
        ("claude-desktop", Os::Linux) => config().join("Claude/claude_desktop_config.json"),
        ("claude-code", _) => var("CLAUDE_CONFIG_DIR")
            .unwrap_or(home)
            .join(".claude.json"),
        ("cursor", _) => home.join(".cursor/mcp.json"),
        ("vscode", Os::Mac) => app_support().join("Code/User/mcp.json"),
        ("vscode", Os::Windows) => appdata()?.join("Code\\User\\mcp.json"),
        ("vscode", Os::Linux) => config().join("Code/User/mcp.json"),
        ("windsurf", _) => home.join(".codeium/windsurf/mcp_config.json"),
        ("zed", Os::Windows) => appdata()?.join("Zed\\settings.json"),
        ("zed", _) => config().join("zed/settings.json"),
        ("gemini", _) => home.join(".gemini/settings.json"),
        ("codex", _) => var("CODEX_HOME")
            .unwrap_or_else(|| home.join(".codex"))
            .join("config.toml"),
        ("lm-studio", _) => home.join(".lmstudio/mcp.json"),
        (other, _) => return Err(format!("unknown client {other}")),
    })
}

/// The command line the client runs: this binary, `serve`, the configuration file when one
/// was named, and the roots made absolute.
fn launch(
    roots: &[String],
    config: Option<&Path>,
    cwd: &Path,
) -> Result<(String, Vec<String>), String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot tell where this ringfence binary is: {e}"))?;
    let mut args = Vec::new();
    if let Some(c) = config {
        let c = crate::config::expand_home(&c.to_string_lossy(), &ProcessEnv, "--config")
            .map_err(|e| e.to_string())?;
        args.push("--config".to_owned());
        args.push(cwd.join(c).display().to_string());
    }
    args.push("serve".to_owned());
    for root in roots {
        let expanded =
            crate::config::expand_home(root, &ProcessEnv, "ROOT").map_err(|e| e.to_string())?;
        // The client starts ringfence from a directory of its own: a relative root would
        // mean something else there.
        let (path, suffix) = match expanded.rsplit_once(':') {
            Some((p, s @ ("ro" | "rw"))) => (p.to_owned(), format!(":{s}")),
            _ => (expanded.clone(), String::new()),
        };
        let absolute = ringfence_fs::normalize_lexically(&cwd.join(path));
        args.push(format!("{}{suffix}", absolute.display()));
    }
    Ok((exe.display().to_string(), args))
}

fn entry(shape: Shape, command: &str, args: &[String]) -> Value {
    match shape {
        Shape::Json { typed: true, .. } => {
            json!({"type": "stdio", "command": command, "args": args})
        }
        _ => json!({"command": command, "args": args}),
    }
}

pub(super) fn run(a: &SetupArgs, config: Option<&Path>) -> ExitCode {
    let client = CLIENTS
        .iter()
        .find(|c| c.name == a.client)
        .expect("clap checked the name");
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    // The file the person chose (flag or variable) goes into the entry: the client starts
    // ringfence without this shell's variables.
    let chosen = config.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(crate::env_vars::RINGFENCE_CONFIG)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    });
    let (command, args) = match launch(&a.roots, chosen.as_deref(), &cwd) {
        Ok(l) => l,
        Err(e) => return fail(&e),
    };
    let path = match location(
        client.name,
        Os::this(),
        a.project.then_some(cwd.as_path()),
        &ProcessEnv,
    ) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    let snippet = snippet(client.shape, &a.name, &command, &args);
    if a.print {
        say(&format!("{}: add this to {}", client.title, path.display()));
        print_out(&snippet);
        return ExitCode::SUCCESS;
    }
    let before = match read_existing(&path) {
        Ok(b) => b,
        Err(e) => return fail(&e),
    };
    let after = match merge(client.shape, before.as_deref(), &a.name, &command, &args) {
        Ok(Merged::Same) => {
            say(&format!(
                "{} already has this {} entry in {}; nothing changed.",
                client.title,
                a.name,
                path.display()
            ));
            return ExitCode::SUCCESS;
        }
        Ok(Merged::Text(t)) => t,
        Err(Refusal::HasComments) => {
            say(&format!(
                "{} has comments, which rewriting it would lose; nothing changed. Add this under \"{}\" by hand:",
                path.display(),
                json_key(client.shape)
            ));
            print_out(&snippet);
            return ExitCode::from(1);
        }
        Err(Refusal::Invalid(e)) => {
            return fail(&format!(
                "{} is not a configuration setup can read ({e}); nothing changed. Fix it, or add the entry by hand (`ringfence setup {} --print` shows it)",
                path.display(),
                client.name
            ));
        }
    };
    match write(&path, before.as_deref(), &after) {
        Ok(backup) => {
            say(&format!(
                "Added {} to {} ({}).",
                a.name,
                client.title,
                path.display()
            ));
            if let Some(b) = backup {
                say(&format!("The previous file is kept as {}.", b.display()));
            }
            say(client.after);
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot write {}: {e}", path.display())),
    }
}

fn json_key(shape: Shape) -> &'static str {
    match shape {
        Shape::Json { key, .. } => key,
        Shape::Toml => "mcp_servers",
    }
}

/// The entry alone, as it would sit in the client's file.
fn snippet(shape: Shape, name: &str, command: &str, args: &[String]) -> String {
    match shape {
        Shape::Json { key, .. } => {
            let value = json!({ key: { name: entry(shape, command, args) } });
            serde_json::to_string_pretty(&value).expect("JSON of strings")
        }
        Shape::Toml => {
            let mut doc = toml_edit::DocumentMut::new();
            set_toml(&mut doc, name, command, args);
            doc.to_string()
        }
    }
}

fn set_toml(doc: &mut toml_edit::DocumentMut, name: &str, command: &str, args: &[String]) {
    let servers = doc.entry("mcp_servers").or_insert_with(|| {
        let mut t = toml_edit::Table::new();
        t.set_implicit(true);
        toml_edit::Item::Table(t)
    });
    let mut server = toml_edit::Table::new();
    server["command"] = toml_edit::value(command);
    let mut list = toml_edit::Array::new();
    for a in args {
        list.push(a.as_str());
    }
    server["args"] = toml_edit::value(list);
    if let Some(table) = servers.as_table_like_mut() {
        // Keep what the person added to an existing entry (env, timeouts), replacing the
        // command line only.
        match table.get_mut(name).and_then(|t| t.as_table_like_mut()) {
            Some(existing) => {
                existing.insert("command", server["command"].clone());
                existing.insert("args", server["args"].clone());
            }
            None => {
                table.insert(name, toml_edit::Item::Table(server));
            }
        }
    }
}

#[derive(Debug, PartialEq)]
enum Merged {
    /// The file already says this.
    Same,
    Text(String),
}

#[derive(Debug, PartialEq)]
enum Refusal {
    HasComments,
    Invalid(String),
}

/// The client's file with the entry set, other servers and settings kept (a JSON file's keys
/// in their order; a TOML file's comments and layout).
fn merge(
    shape: Shape,
    before: Option<&str>,
    name: &str,
    command: &str,
    args: &[String],
) -> Result<Merged, Refusal> {
    let before = before.filter(|t| !t.trim().is_empty());
    match shape {
        Shape::Toml => {
            let mut doc: toml_edit::DocumentMut = before
                .unwrap_or("")
                .parse()
                .map_err(|e: toml_edit::TomlError| Refusal::Invalid(e.message().to_owned()))?;
            if doc.get("mcp_servers").is_some_and(|s| !s.is_table_like()) {
                return Err(Refusal::Invalid(
                    "\"mcp_servers\" is not a table of servers".into(),
                ));
            }
            set_toml(&mut doc, name, command, args);
            let text = doc.to_string();
            Ok(if Some(text.as_str()) == before {
                Merged::Same
            } else {
                Merged::Text(text)
            })
        }
        Shape::Json { key, .. } => {
            let mut top = match before {
                None => IndexMap::new(),
                Some(text) => match serde_json::from_str::<Ordered>(text) {
                    Ok(Ordered::Object(t)) => t,
                    Ok(_) => return Err(Refusal::Invalid("not a JSON object".into())),
                    Err(_) if has_comments(text) => return Err(Refusal::HasComments),
                    Err(e) => return Err(Refusal::Invalid(e.to_string())),
                },
            };
            let servers = top
                .entry(key.to_owned())
                .or_insert_with(|| Ordered::Object(IndexMap::new()));
            if matches!(servers, Ordered::Leaf(Value::Null)) {
                *servers = Ordered::Object(IndexMap::new());
            }
            let Ordered::Object(servers) = servers else {
                return Err(Refusal::Invalid(format!(
                    "\"{key}\" is not an object of servers"
                )));
            };
            let mut wanted = entry(shape, command, args);
            let old = servers.get(name).map(Ordered::to_value);
            // What the person added to an existing entry (env, …) stays.
            if let (Some(Value::Object(old)), Value::Object(new)) = (&old, &mut wanted) {
                for (k, v) in old {
                    new.entry(k.clone()).or_insert_with(|| v.clone());
                }
            }
            if old.as_ref() == Some(&wanted) {
                return Ok(Merged::Same);
            }
            servers.insert(name.to_owned(), Ordered::Leaf(wanted));
            let mut text =
                serde_json::to_string_pretty(&Ordered::Object(top)).expect("JSON values");
            text.push('\n');
            Ok(Merged::Text(text))
        }
    }
}

/// A JSON value whose objects keep their keys in the file's order (serde_json's own map
/// sorts them, and a person's file should not be reordered by adding one server).
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
#[serde(untagged)]
enum Ordered {
    Object(IndexMap<String, Ordered>),
    List(Vec<Ordered>),
    Leaf(Value),
}

impl Ordered {
    fn to_value(&self) -> Value {
        match self {
            Ordered::Object(m) => {
                Value::Object(m.iter().map(|(k, v)| (k.clone(), v.to_value())).collect())
            }
            Ordered::List(l) => Value::Array(l.iter().map(Ordered::to_value).collect()),
            Ordered::Leaf(v) => v.clone(),
        }
    }
}

/// Whether JSON text holds `//` or `/* */` comments outside strings (JSONC).
fn has_comments(text: &str) -> bool {
    let mut in_string = false;
    let mut escaped = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
        } else if c == '/' && matches!(chars.peek(), Some('/') | Some('*')) {
            return true;
        }
    }
    false
}

/// The file's text, or `None` when there is none yet.
#[allow(clippy::disallowed_methods)] // a client's own configuration file, not a root
fn read_existing(path: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Ok(Some(t)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Writes `text` to `path` whole (beside it, then renamed, with the previous file's mode),
/// keeping the file as it was before ringfence first changed it as `<name>.ringfence-backup`
/// (a later run leaves that backup alone). A symbolic link (dotfiles kept elsewhere) is
/// followed: its target is rewritten, the link stays. Returns the backup's path.
#[allow(clippy::disallowed_methods)] // a client's own configuration file, not a root
fn write(path: &Path, before: Option<&str>, text: &str) -> std::io::Result<Option<PathBuf>> {
    let linked;
    let path = if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        linked = std::fs::canonicalize(path)?;
        linked.as_path()
    } else {
        path
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    #[cfg(unix)]
    let mode = std::fs::metadata(path)
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o7777)
        .unwrap_or(0o600);
    // (Windows: no mode bits; a mode that leaves group and others something keeps the file's
    // folder's access list — the client's configuration is the client's, under the profile.)
    #[cfg(not(unix))]
    let mode = 0o644;
    let backup = match before {
        Some(old) => {
            let mut name = path.file_name().unwrap_or_default().to_owned();
            name.push(".ringfence-backup");
            let b = path.with_file_name(name);
            // The file from before ringfence is what a person wants back.
            if std::fs::symlink_metadata(&b).is_err() {
                ringfence_fs::write_private_file(&b, old.as_bytes())?;
            }
            Some(b)
        }
        None => None,
    };
    ringfence_fs::replace_file(path, text.as_bytes(), mode)?;
    Ok(backup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn each_client_has_its_documented_place_on_each_system() {
        let e = env(&[
            ("HOME", "/home/u"),
            ("APPDATA", "C:\\Users\\u\\AppData\\Roaming"),
            ("USERPROFILE", "C:\\Users\\u"),
        ]);
        let at = |c, os| location(c, os, None, &e).unwrap().display().to_string();
        assert_eq!(
            at("claude-desktop", Os::Mac),
            "/home/u/Library/Application Support/Claude/claude_desktop_config.json"
        );
        assert_eq!(
            at("claude-desktop", Os::Windows),
            "C:\\Users\\u\\AppData\\Roaming/Claude\\claude_desktop_config.json"
        );
        assert_eq!(
            at("claude-desktop", Os::Linux),
            "/home/u/.config/Claude/claude_desktop_config.json"
        );
        assert_eq!(at("claude-code", Os::Linux), "/home/u/.claude.json");
        assert_eq!(at("cursor", Os::Linux), "/home/u/.cursor/mcp.json");
        assert_eq!(
            at("vscode", Os::Linux),
            "/home/u/.config/Code/User/mcp.json"
        );
        assert_eq!(
            at("vscode", Os::Mac),
            "/home/u/Library/Application Support/Code/User/mcp.json"
        );
        assert_eq!(
            at("windsurf", Os::Linux),
            "/home/u/.codeium/windsurf/mcp_config.json"
        );
        assert_eq!(at("zed", Os::Linux), "/home/u/.config/zed/settings.json");
        assert_eq!(at("gemini", Os::Linux), "/home/u/.gemini/settings.json");
        assert_eq!(at("codex", Os::Linux), "/home/u/.codex/config.toml");
        assert_eq!(at("lm-studio", Os::Linux), "/home/u/.lmstudio/mcp.json");
        let e = env(&[
            ("HOME", "/home/u"),
            ("XDG_CONFIG_HOME", "/x"),
            ("CLAUDE_CONFIG_DIR", "/c"),
            ("CODEX_HOME", "/k"),
        ]);
        let at = |c| {
            location(c, Os::Linux, None, &e)
                .unwrap()
                .display()
                .to_string()
        };
        assert_eq!(at("vscode"), "/x/Code/User/mcp.json");
        assert_eq!(at("claude-code"), "/c/.claude.json");
        assert_eq!(at("codex"), "/k/config.toml");
        let p = |c| location(c, Os::Linux, Some(Path::new("/repo")), &e);
        assert_eq!(p("claude-code").unwrap(), PathBuf::from("/repo/.mcp.json"));
        assert_eq!(
            p("vscode").unwrap(),
            PathBuf::from("/repo/.vscode/mcp.json")
        );
        assert!(p("claude-desktop").unwrap_err().contains("no project file"));
    }

    const CLAUDE: Shape = Shape::Json {
        key: "mcpServers",
        typed: false,
    };

    #[test]
    fn a_json_merge_keeps_everything_else_in_its_order_and_is_idempotent() {
        let before = "{\n  \"theme\": \"dark\",\n  \"mcpServers\": {\n    \"zeta\": {\"command\": \"z\"},\n    \"alpha\": {\"command\": \"a\"}\n  },\n  \"after\": 1\n}\n";
        let args = vec!["serve".to_owned(), "/home/u/notes".to_owned()];
        let Merged::Text(after) =
            merge(CLAUDE, Some(before), "ringfence", "/bin/rf", &args).unwrap()
        else {
            panic!("changed nothing")
        };
        let keys: Vec<&str> = ["theme", "mcpServers", "zeta", "alpha", "ringfence", "after"]
            .into_iter()
            .collect();
        let mut last = 0;
        for k in keys {
            let at = after
                .find(&format!("\"{k}\""))
                .unwrap_or_else(|| panic!("{k} lost: {after}"));
            assert!(at >= last, "{k} moved: {after}");
            last = at;
        }
        assert_eq!(
            merge(CLAUDE, Some(&after), "ringfence", "/bin/rf", &args).unwrap(),
            Merged::Same
        );
        // A new root replaces the command line, and the person's own env stays.
        let with_env = after.replace(
            "\"command\": \"/bin/rf\"",
            "\"env\": {\"K\": \"v\"}, \"command\": \"/bin/rf\"",
        );
        let Merged::Text(again) = merge(
            CLAUDE,
            Some(&with_env),
            "ringfence",
            "/bin/rf",
            &["serve".to_owned()],
        )
        .unwrap() else {
            panic!()
        };
        let v: Value = serde_json::from_str(&again).unwrap();
        assert_eq!(v["mcpServers"]["ringfence"]["env"]["K"], "v");
        assert_eq!(v["mcpServers"]["ringfence"]["args"], json!(["serve"]));
    }

    #[test]
    fn comments_and_broken_files_are_not_rewritten() {
        let jsonc = "{\n  // my servers\n  \"servers\": {}\n}\n";
        let vscode = Shape::Json {
            key: "servers",
            typed: true,
        };
        assert_eq!(
            merge(vscode, Some(jsonc), "ringfence", "/rf", &[]),
            Err(Refusal::HasComments)
        );
        assert!(matches!(
            merge(CLAUDE, Some("{\"a\": "), "r", "/rf", &[]),
            Err(Refusal::Invalid(_))
        ));
        assert!(matches!(
            merge(CLAUDE, Some("{\"mcpServers\": [1]}"), "r", "/rf", &[]),
            Err(Refusal::Invalid(_))
        ));
        // A URL with // inside a string is no comment.
        assert!(!has_comments("{\"u\": \"https://x\"}"));
        assert!(has_comments("{/* c */}"));
    }

    #[test]
    fn a_toml_merge_keeps_comments_and_other_servers() {
        let before = "# my codex\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\" # keep\n";
        let args = vec!["serve".to_owned()];
        let Merged::Text(after) =
            merge(Shape::Toml, Some(before), "ringfence", "/bin/rf", &args).unwrap()
        else {
            panic!()
        };
        assert!(after.starts_with(before), "{after}");
        assert!(
            after.contains("[mcp_servers.ringfence]\ncommand = \"/bin/rf\"\nargs = [\"serve\"]"),
            "{after}"
        );
        assert_eq!(
            merge(Shape::Toml, Some(&after), "ringfence", "/bin/rf", &args).unwrap(),
            Merged::Same
        );
    }
}
