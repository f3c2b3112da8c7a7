//! Command-line interface: the arguments, the start every command shares (configuration,
//! logging, the [`App`]), and the dispatch to one module per command.

mod audit;
mod banner;
mod calendar;
mod call;
mod config_show;
mod doctor;
mod followups;
mod init;

mod memory;
mod model;
mod scheduler;
mod serve;
mod serve_http;
mod setup;
mod stop;
mod store;
mod token_hash;
mod tools;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::app::App;
use crate::config::{Config, Overrides, ProcessEnv};

#[derive(Debug, Parser)]
#[command(
    name = "ringfence",
    version,
    about = "A contained tool runtime for AI assistants, served over MCP"
)]
struct Cli {
    /// Configuration file (TOML). Default, if it exists: $XDG_CONFIG_HOME/ringfence/config.toml
    /// (else ~/.config/ringfence/config.toml; on macOS ~/Library/Application
    /// Support/ringfence/config.toml, on Windows %APPDATA%\ringfence\config.toml).
    /// [env: RINGFENCE_CONFIG]
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (default workspace, saved tool output). Default:
    /// $XDG_DATA_HOME/ringfence, else ~/.local/share/ringfence (on macOS ~/Library/Application
    /// Support/ringfence/data, on Windows %LOCALAPPDATA%\ringfence\data).
    /// [env: RINGFENCE_DATA_DIR]
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Denylist pattern (gitignore syntax); repeatable; adds to the configured denylist.
    /// [env: RINGFENCE_DENYLIST, comma-separated]
    #[arg(long = "deny", global = true, value_name = "PATTERN")]
    deny: Vec<String>,
    /// Tool preset: full (every tool, the default), assistant (every feature, less the file
    /// tools that do what another does), iris (the Iris workspace tools: five file tools),
    /// llm-chat (the llm-chat file tools: thirteen). [env: RINGFENCE_PRESET]
    #[arg(long, global = true, value_name = "PRESET")]
    preset: Option<String>,
    /// Offer only these tools or families (comma-separated), instead of a preset.
    /// [env: RINGFENCE_TOOLS]
    #[arg(long, global = true, value_delimiter = ',', value_name = "TOOLS")]
    tools: Vec<String>,
    /// Add these tools or families to the preset (comma-separated).
    /// [env: RINGFENCE_ADD_TOOLS]
    #[arg(long, global = true, value_delimiter = ',', value_name = "TOOLS")]
    add_tools: Vec<String>,
    /// Remove these tools or families (comma-separated). [env: RINGFENCE_DISABLE_TOOLS]
    #[arg(long, global = true, value_delimiter = ',', value_name = "TOOLS")]
    disable_tools: Vec<String>,
    /// What the MCP client's roots may do: narrow (default: keep only what lies inside both
    /// the configured roots and the client's), ignore, extend (also add client roots
    /// outside the configured ones, read-only) or extend-write (writable). Never the data
    /// directory; no extension on an HTTP server with users. [env: RINGFENCE_CLIENT_ROOTS]
    #[arg(long, global = true, value_name = "POLICY")]
    client_roots: Option<String>,
    /// Log filter for stderr (error, warn, info, debug, trace). [env: RINGFENCE_LOG]
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    /// Log line format on stderr: text (default) or json (one object per line).
    /// [env: RINGFENCE_LOG_FORMAT]
    #[arg(long, global = true, value_name = "FORMAT")]
    log_format: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP over stdio (how desktop clients launch servers).
    Serve {
        /// Directories the tools may reach, each `PATH` or `PATH:ro` (read-only); `~` is your
        /// home. Default: the configured roots, else `<data dir>/workspace`.
        /// [env: RINGFENCE_ROOTS, `:`-separated]
        roots: Vec<String>,
        /// Serve MCP streamable HTTP at `http://ADDR/mcp` instead of stdio (e.g.
        /// `127.0.0.1:8765`). Any address but loopback needs authentication configured.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// With --http: serve HTTPS with this PEM certificate chain (overrides http.tls_cert).
        #[arg(long, value_name = "FILE", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// With --http: the PEM private key of --tls-cert (overrides http.tls_key).
        #[arg(long, value_name = "FILE", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
    },
    /// Open your settings page (memories, follow-ups, activity, tools) in a browser: serves
    /// it (and MCP) on loopback and prints a one-time sign-in link for the `local` user —
    /// the user of stdio clients.
    Ui {
        /// The loopback port (default: any free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Print the link without opening a browser.
        #[arg(long)]
        no_open: bool,
    },
    /// Run one tool call and print its result.
    Call {
        /// Tool name, e.g. read_file.
        tool: String,
        /// Arguments as a JSON object, or `-` to read them from stdin.
        json: String,
        /// Roots for this call (`PATH` or `PATH:ro`); repeatable.
        #[arg(long = "root", value_name = "ROOT")]
        roots: Vec<String>,
        /// Make the call as this user (their memories, follow-ups, calendar and per-user
        /// roots); default `local`, the stdio user.
        #[arg(long)]
        user: Option<String>,
        /// Let write_file, edit_file and the other writing tools change an existing file
        /// that this one-shot call has not read first. The read-first rule is there for
        /// models, which must see what they replace; a person at the keyboard has.
        #[arg(long)]
        overwrite: bool,
    },
    /// Read a bearer token from stdin and print the hash to put in `[http] tokens`.
    TokenHash,
    /// Print the audit trail's calls matching every filter given, oldest first: a table on
    /// a terminal, JSON lines otherwise (or with --json).
    Audit(audit::AuditArgs),
    /// Print the tool definitions.
    Tools {
        #[arg(long, value_enum, default_value_t = tools::Format::Mcp)]
        format: tools::Format,
        /// Only the tools' names, one a line (and, on stderr, what tools/list weighs).
        #[arg(long, conflicts_with = "format")]
        names: bool,
    },
    /// The embedding model that memory search uses (all-MiniLM-L6-v2).
    #[command(subcommand)]
    Model(model::ModelCommand),
    /// Truths and memories: list, search, show, edit, pin, unpin, delete, clear, export,
    /// import.
    #[command(subcommand)]
    Memory(ringfence_memory::cli::MemoryCommand),
    /// Deliver follow-ups as they fall due, until SIGTERM or SIGINT (beside `serve` or
    /// instead of it; any number may share a data directory).
    Scheduler,
    /// Follow-ups: list, cancel, reschedule, export, import.
    #[command(subcommand)]
    Followups(ringfence_followups::cli::FollowupsCommand),
    /// The local calendar: back up, move events in and out (iCalendar files).
    #[command(subcommand)]
    Calendar(calendar::CalendarCommand),
    /// The state store: move state between SQLite and PostgreSQL.
    #[command(subcommand)]
    Store(store::StoreCommand),
    /// Print a completion script for a shell (e.g. `ringfence completions bash >
    /// ~/.local/share/bash-completion/completions/ringfence`).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff; `ringfence man | man -l -`).
    Man,
    /// Write your configuration file (~/.config/ringfence/config.toml, or --config): every
    /// optional feature's table present and commented, the flags' answers set. Never
    /// replaces a file.
    Init(init::InitArgs),
    /// Add ringfence to an MCP client's configuration (claude-desktop, claude-code, cursor,
    /// vscode, windsurf, zed, gemini, codex, lm-studio), keeping everything else in it and a
    /// backup of the previous file; `--print` only shows the entry.
    Setup(setup::SetupArgs),
    /// Check the setup and say what to fix: the configuration, the data directory, the
    /// roots, each feature, the shell's sandbox on this kernel, and what the configuration
    /// reaches (search, calendar, mail, PostgreSQL, the model). Exit status 1 on a problem.
    Doctor(doctor::DoctorArgs),
    /// The configuration: `config show` prints what is in effect, each value with where it
    /// came from (default, file, environment, flag); secrets as set or unset.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// The configuration in effect, each value with where it came from.
    Show,
}

impl Cli {
    /// The values the command line sets in the configuration (highest precedence).
    fn overrides(&self) -> Overrides {
        let roots = match &self.command {
            Command::Serve { roots, .. } | Command::Call { roots, .. } => roots.clone(),
            Command::Tools { .. }
            | Command::Ui { .. }
            | Command::TokenHash
            | Command::Audit(_)
            | Command::Model(_)
            | Command::Memory(_)
            | Command::Followups(_)
            | Command::Calendar(_)
            | Command::Store(_)
            | Command::Completions { .. }
            | Command::Man
            | Command::Init(_)
            | Command::Setup(_)
            | Command::Doctor(_)
            | Command::Config(_)
            | Command::Scheduler => Vec::new(),
        };
        Overrides {
            config: self.config.clone(),
            data_dir: self.data_dir.clone(),
            roots,
            deny: self.deny.clone(),
            log: self.log.clone(),
            log_format: self.log_format.clone(),
            client_roots: self.client_roots.clone(),
            preset: self.preset.clone(),
            enable: self.tools.clone(),
            add: self.add_tools.clone(),
            disable: self.disable_tools.clone(),
        }
    }
}

pub fn run_main() -> ExitCode {
    let cli = Cli::parse();
    // What needs no configuration runs before any is read: a broken file must not stop them.
    match &cli.command {
        Command::Completions { shell } => return completions(*shell),
        Command::Man => return manual(),
        Command::Init(args) => return init::run(args, cli.config.as_deref()),
        Command::Setup(args) => return setup::run(args, cli.config.as_deref()),
        Command::Doctor(args) => return doctor::run(args, &cli.overrides()),
        Command::Config(ConfigCommand::Show) => return config_show::run(&cli.overrides()),
        _ => {}
    }
    let over = cli.overrides();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let mut config = match Config::load(&over, &ProcessEnv, &cwd) {
        Ok(c) => c,
        Err(e) => return fail(&format!("configuration error: {e}")),
    };
    if let Command::Call {
        overwrite: true, ..
    } = &cli.command
    {
        config.limits.require_read_before_write = false;
    }
    if let Err(e) = init_logging(&config.log, config.log_json) {
        return fail(&e);
    }
    if let Some(file) = &config.config_file {
        tracing::debug!(file = %file.display(), "configuration file loaded");
    }
    warn_unknown_variables(&config.named_vars);
    // Only a server starts background work (opening databases, loading the model, writing
    // access counts): a one-off `call` opens what its tool needs when it needs it, and does
    // not wait at exit for a model it never used.
    let background = matches!(cli.command, Command::Serve { .. } | Command::Ui { .. });
    if matches!(
        cli.command,
        Command::Serve { .. } | Command::Ui { .. } | Command::Call { .. } | Command::Scheduler
    ) {
        // What an earlier version left readable by every local account (0644 in 0755
        // directories) becomes private before anything is served.
        let databases: Vec<_> = crate::families::state(&config)
            .into_iter()
            .map(|s| s.file)
            .collect();
        crate::data_dir::make_private(&config.data_dir, &databases);
    }
    let mut app = match App::build(&config, background) {
        Ok(a) => a,
        Err(e) => return fail(&format!("configuration error: {e}")),
    };
    match cli.command {
        Command::TokenHash => token_hash::run(),
        Command::Audit(args) => audit::run(&app, args),
        Command::Model(cmd) => model::run(&config, cmd),
        Command::Memory(cmd) => memory::run(&config, cmd),
        Command::Scheduler => scheduler::run(&config),
        Command::Followups(cmd) => followups::run(&config, cmd),
        Command::Calendar(cmd) => calendar::run(&config, cmd),
        Command::Store(cmd) => store::run(&config, cmd),
        Command::Serve {
            http,
            tls_cert,
            tls_key,
            ..
        } => {
            app.open_audit();
            banner::log(&config, &app);
            match http {
                Some(addr) => serve_http::run(app, &addr, tls_cert.zip(tls_key)),
                None => serve::run(app),
            }
        }
        Command::Ui { port, no_open } => {
            app.open_audit();
            banner::log(&config, &app);
            serve_http::run_ui(app, port, !no_open)
        }
        Command::Call {
            tool, json, user, ..
        } => call::run(app, &tool, &json, user.as_deref()),
        Command::Tools { format, names } => tools::run(&app, format, names),
        Command::Completions { .. }
        | Command::Man
        | Command::Init(_)
        | Command::Setup(_)
        | Command::Doctor(_)
        | Command::Config(_) => {
            unreachable!("handled before the configuration")
        }
    }
}

/// The completion script for `shell`, made from the command line's own definition.
fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut command = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut command, "ringfence", &mut out);
    print_out(&String::from_utf8_lossy(&out));
    ExitCode::SUCCESS
}

/// The manual page, in roff, made from the command line's own definition: the commands and
/// global flags, then one section per command with its own flags.
fn manual() -> ExitCode {
    let command = <Cli as clap::CommandFactory>::command();
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(command.clone());
    if let Err(e) = man.render(&mut out) {
        return fail(&format!("cannot write the manual: {e}"));
    }
    for sub in command.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = format!("ringfence {}", sub.get_name());
        let page = clap_mangen::Man::new(sub.clone());
        out.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        let mut section = Vec::new();
        if let Err(e) = page.render_description_section(&mut section) {
            return fail(&format!("cannot write the manual: {e}"));
        }
        if let Err(e) = page.render_options_section(&mut section) {
            return fail(&format!("cannot write the manual: {e}"));
        }
        // Each command's sections become subsections of its own.
        out.extend_from_slice(
            String::from_utf8_lossy(&section)
                .replace(".SH ", ".SS ")
                .as_bytes(),
        );
    }
    print_out(&String::from_utf8_lossy(&out));
    ExitCode::SUCCESS
}

/// The log filter as given, with the MCP library's own INFO lines (a client's whole
/// `initialize` request, debug-formatted) moved to DEBUG: at `info` they drown the lines an
/// operator reads. A filter that names `rmcp`, or asks for debug or trace, is kept as it is.
fn quiet_libraries(filter: &str) -> String {
    let lower = filter.to_ascii_lowercase();
    if lower.contains("rmcp") || lower.contains("debug") || lower.contains("trace") {
        filter.to_owned()
    } else if lower.contains("info") {
        format!("{filter},rmcp=warn")
    } else {
        filter.to_owned()
    }
}

fn init_logging(filter: &str, json: bool) -> Result<(), String> {
    let filter = quiet_libraries(filter);
    let filter = filter.as_str();
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| format!("log filter `{filter}` is not valid: {e}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    if json {
        // One JSON object per line: timestamp, level, target, fields, span.
        builder.json().flatten_event(true).init();
    } else {
        builder.init();
    }
    Ok(())
}

/// Warns about `RINGFENCE_*` variables ringfence does not read (a typo leaves a setting
/// silently unset otherwise); those the configuration file names (`password_env = …`) are
/// read.
fn warn_unknown_variables(named: &[String]) {
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("RINGFENCE_")
            && !crate::families::known_env_var(&key)
            && !named.iter().any(|n| *n == key)
        {
            tracing::warn!(variable = %key, "unknown RINGFENCE_ variable ignored (typo?)");
        }
    }
}

/// Lets big searches open many directories at once.
fn raise_fd_limit() {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let lim = getrlimit(Resource::Nofile);
        if let (Some(cur), Some(max)) = (lim.current, lim.maximum)
            && cur < max
        {
            let mut new = lim;
            new.current = Some(max.min(65_536).max(cur));
            let _ = setrlimit(Resource::Nofile, new);
        }
    }
}

/// Says why the command failed (on stderr) and exits with 2.
#[allow(clippy::print_stderr)] // before logging exists, stderr is the only place to say why
fn fail(msg: &str) -> ExitCode {
    eprintln!("ringfence: {msg}");
    ExitCode::from(2)
}

/// Writes an export to `output` (beside, then renamed: an interrupted export never leaves a
/// half file under the name asked for), or to stdout.
#[allow(clippy::disallowed_methods)] // the operator's own export file
fn write_output(text: &str, output: Option<&std::path::Path>) -> Result<(), String> {
    let Some(path) = output else {
        print_out(text);
        return Ok(());
    };
    // People's memories, follow-ups and events: readable by the operator's account only.
    ringfence_fs::write_private_file(path, text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The text of an import file, or of stdin for `-`.
#[allow(clippy::disallowed_methods)] // the operator's own import file
fn read_input(file: &std::path::Path) -> Result<String, String> {
    if file.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
            .map_err(|e| format!("cannot read stdin: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))
    }
}

/// The terminal a family's own commands talk to.
struct Terminal;

impl ringfence_core::console::Console for Terminal {
    fn out(&mut self, text: &str) {
        print_out(text);
    }
    fn note(&mut self, line: &str) {
        say(line);
    }
    fn is_terminal(&self) -> bool {
        std::io::IsTerminal::is_terminal(&std::io::stdout())
    }
    fn read_input(
        &mut self,
        file: &std::path::Path,
    ) -> Result<String, ringfence_core::console::CommandError> {
        read_input(file).map_err(Into::into)
    }
    fn write_output(
        &mut self,
        text: &str,
        output: Option<&std::path::Path>,
    ) -> Result<(), ringfence_core::console::CommandError> {
        write_output(text, output).map_err(Into::into)
    }
}

/// The exit status of a family's command: 0 done, 1 partly, 2 (said) stopped.
fn ended(
    result: Result<ringfence_core::console::Ended, ringfence_core::console::CommandError>,
) -> ExitCode {
    match result {
        Ok(ringfence_core::console::Ended::Done) => ExitCode::SUCCESS,
        Ok(ringfence_core::console::Ended::Partly) => ExitCode::from(1),
        Err(e) => fail(&e.to_string()),
    }
}

/// Progress and results of the model, memory and followups commands, on stderr.
#[allow(clippy::print_stderr)]
fn say(line: &str) {
    eprintln!("{line}");
}

/// Writes a command's output; a closed pipe (`| head`) is not an error.
fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    if !text.ends_with('\n') {
        let _ = out.write_all(b"\n");
    }
    let _ = out.flush();
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

#[cfg(test)]
mod tests {
    use super::quiet_libraries;

    #[test]
    fn the_mcp_library_speaks_at_info_only_when_asked() {
        assert_eq!(quiet_libraries("info"), "info,rmcp=warn");
        assert_eq!(
            quiet_libraries("ringfence=info"),
            "ringfence=info,rmcp=warn"
        );
        for kept in ["debug", "trace", "info,rmcp=info", "warn", "error", "off"] {
            assert_eq!(quiet_libraries(kept), kept);
        }
    }
}
