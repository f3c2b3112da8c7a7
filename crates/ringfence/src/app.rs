//! Turns a [`Config`] into the pieces a server or a one-off call needs: the selected
//! families (built by their plugs), the tool runner, the sessions, and the supervisor that
//! owns every background job.

use std::sync::Arc;
use std::time::Duration;

use ringfence_core::live::LiveSessions;
use ringfence_core::{
    AuditSink, BackendError, CallMetrics, CallScope, Limits, ResourceSet, ToolRunner, Toolbox,
};
use ringfence_mcp::{McpServer, ServerIdentity, UserSessions};

use crate::config::Config;
use crate::families;
use crate::sessions::{SessionError, Sessions};
use ringfence_core::plug::Shared;
use ringfence_core::supervisor::Supervisor;

/// The instructions when no family offers any.
const DEFAULT_INSTRUCTIONS: &str = "ringfence gives you tools confined to what the user allowed.";

/// How long shutdown waits for background jobs before the exit steps run.
const JOB_GRACE: Duration = Duration::from_secs(1);

/// Everything built from the configuration.
pub struct App {
    /// The tools offered, in listing order.
    pub toolbox: Toolbox,
    pub limits: Arc<Limits>,
    /// The offered families' resources and prompts.
    resources: Arc<ResourceSet>,
    /// The instructions at `initialize`: the offered families' paragraphs.
    instructions: String,
    pub sessions: Sessions,
    /// `[http]` settings for `serve --http`.
    pub http: crate::config::HttpConfig,
    /// The audit trail (opened for `serve`).
    audit: Option<Arc<crate::audit::AuditFile>>,
    supervisor: Arc<Supervisor>,
    data_dir: std::path::PathBuf,
    /// Families whose tools are not offered under this configuration, and why.
    pub withheld: Vec<(&'static str, String)>,
    /// Every tool ringfence has that is not offered, and how the operator turns it on.
    not_offered: std::collections::HashMap<String, String>,
    /// Where MCP sessions register to be told what falls due, when a family delivers
    /// through them (follow-ups with the `mcp` channel, in `serve`).
    live: Option<Arc<LiveSessions>>,
    /// The state store `[store]` names (shared with the families).
    store: Arc<ringfence_store::SharedStore>,
    /// The built families' sections of the settings page.
    pub sections: Vec<Arc<dyn ringfence_core::page::Section>>,
}

/// Each tool of the catalogue not among `offered`, with how the operator turns it on: its
/// family's reason when the family is withheld, else the tool selection that left it out.
fn not_offered(
    offered: &[&str],
    withheld: &[(&'static str, &'static [&'static str], String)],
    iris_files_off: bool,
) -> std::collections::HashMap<String, String> {
    let catalogue = families::catalogue();
    catalogue
        .tools()
        .filter(|(_, tool)| !offered.contains(tool))
        .map(|(family, tool)| {
            let why = match withheld.iter().find(|(_, tools, _)| tools.contains(&tool)) {
                Some((_, _, why)) => why.clone(),
                None if iris_files_off && family.name == ringfence_files::FAMILY => {
                    "IRIS_FILESYSTEM_ENABLED=false is set in the server's environment, which turns every file tool off over any tool selection: unset it (or set it to true) to have them back".to_owned()
                }
                None => format!(
                    "the tool selection (tools.preset, tools.enable, tools.disable) leaves it out (the {} family); add it with tools.add = [\"{tool}\"] in the configuration file, or remove it from tools.disable",
                    family.name
                ),
            };
            (tool.to_owned(), why)
        })
        .collect()
}

/// Why a one-off call could not be made (its tool's own failure is its result).
#[derive(Debug, thiserror::Error)]
pub enum OneCallError {
    #[error(transparent)]
    Session(#[from] SessionError),
    #[error(transparent)]
    Unknown(#[from] ringfence_core::UnknownTool),
}

/// Why the server could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Sessions(#[from] SessionError),
    #[error(transparent)]
    Selection(#[from] ringfence_core::SelectionError),
    /// Every selected tool's family is withheld (the reasons, joined).
    #[error("tools: every tool is disabled; enable at least one ({0})")]
    NothingOffered(String),
    #[error(transparent)]
    Build(#[from] ringfence_core::BuildError),
}

impl App {
    /// Resolves the tool selection against the catalogue, then builds the families that
    /// offer a selected tool. With `background`, their background work (opening databases,
    /// loading the model) starts now.
    pub fn build(config: &Config, background: bool) -> Result<App, AppError> {
        let sessions = Sessions::new(config)?;
        let mut names = families::catalogue().select(&config.tools)?;
        let withheld = families::withheld(config);
        names.retain(|n| !withheld.iter().any(|(_, tools, _)| tools.contains(n)));
        let not_offered = not_offered(&names, &withheld, config.iris_files_off);
        if names.is_empty() {
            let why: Vec<&str> = withheld.iter().map(|(_, _, why)| why.as_str()).collect();
            return Err(AppError::NothingOffered(why.join("; ")));
        }
        let withheld = withheld
            .into_iter()
            .map(|(family, _, why)| (family, why))
            .collect();
        let supervisor = Supervisor::new();
        let shared = Shared::default();
        let built = families::build(config, &supervisor, background, &shared, &names)?;
        let toolbox = Toolbox::select(&built, &names);
        let resources = ResourceSet::new(
            built
                .iter()
                .flat_map(|f| f.resources().iter().cloned())
                .collect(),
        );
        let sections = built
            .iter()
            .flat_map(|f| f.sections().iter().cloned())
            .collect();
        let paragraphs: Vec<&str> = built.iter().filter_map(|f| f.instructions()).collect();
        let instructions = if paragraphs.is_empty() {
            DEFAULT_INSTRUCTIONS.to_owned()
        } else {
            paragraphs.join("\n\n")
        };
        Ok(App {
            toolbox,
            limits: Arc::new(config.limits.clone()),
            resources: Arc::new(resources),
            instructions,
            sessions,
            http: config.http.clone(),
            audit: None,
            supervisor,
            data_dir: config.data_dir.clone(),
            withheld,
            not_offered,
            live: shared.get::<LiveSessions>(),
            store: shared.get_or_init(|| config.store.shared_store()),
            sections,
        })
    }

    fn identity(&self) -> ServerIdentity {
        ServerIdentity {
            name: "ringfence".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            instructions: self.instructions.clone(),
        }
    }

    /// One tool call as `user`, outside any MCP session (`ringfence call`, `doctor`'s
    /// probes): through the runner like any call, in a fresh session of the user's roots.
    pub async fn call_once(
        &self,
        user: &str,
        session_id: &str,
        tool: &str,
        args: serde_json::Value,
    ) -> Result<Result<ringfence_core::ToolOutput, ringfence_core::error::ToolError>, OneCallError>
    {
        let scope = self.sessions.scope_for(user)?;
        let runner = self.runner(None, None);
        Ok(runner
            .call(ringfence_core::CallRequest {
                tool,
                args,
                user,
                session_id,
                scope: Ok(scope),
                received: std::time::Instant::now(),
                cancel: tokio_util::sync::CancellationToken::new(),
                progress: ringfence_core::Progress::none(),
                ready: None,
                sampler: None,
            })
            .await?)
    }

    /// The runner every caller uses: the offered tools, the limits, the audit trail (when
    /// open), and for HTTP a time limit and metrics.
    pub fn runner(
        &self,
        call_timeout: Option<Duration>,
        metrics: Option<Arc<dyn CallMetrics>>,
    ) -> Arc<ToolRunner> {
        ToolRunner::new(self.toolbox.clone(), self.limits.clone())
            .with_not_offered(self.not_offered.clone())
            .with_call_timeout(call_timeout)
            .with_audit(self.audit.clone().map(|a| a as Arc<dyn AuditSink>))
            .with_metrics(metrics)
            .shared()
    }

    /// The server for one stdio client (the local user).
    pub fn server(&self) -> Result<McpServer, SessionError> {
        let scope = self.sessions.local()?;
        Ok(McpServer::new(
            self.runner(None, None),
            self.resources.clone(),
            scope,
            self.identity(),
        )
        .with_live(self.live.clone()))
    }

    /// The server for one HTTP MCP session, or for one stateless request: in a session it
    /// takes the session of the user who authenticated its first request and refuses every
    /// other user; a stateless request runs in the session its user's stateless requests
    /// share (kept by [`Sessions`]).
    pub fn user_server(self: &Arc<Self>, runner: &Arc<ToolRunner>) -> McpServer {
        McpServer::for_users(
            runner.clone(),
            self.resources.clone(),
            Arc::new(AppSessions(self.clone())),
            self.identity(),
        )
        .with_live(self.live.clone())
    }

    /// Starts the audit trail (`<data dir>/audit/audit.jsonl`). Without it the server still
    /// runs; the failure is logged.
    pub fn open_audit(&mut self) {
        let shared = crate::store::audit(&self.store).unwrap_or_else(|e| {
            tracing::error!(error = %e, "the audit trail is written to the data directory only");
            None
        });
        match crate::audit::AuditFile::open(&self.data_dir, shared) {
            Ok(a) => {
                let closing = a.clone();
                self.supervisor
                    .at_exit("audit trail", move || closing.close());
                self.audit = Some(a);
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot open the audit log; tool calls are not audited")
            }
        }
    }

    /// Stops the background jobs and runs the exit steps (the journal stores every change,
    /// memory its access counts, the audit trail every line) before the process exits.
    pub fn shutdown(&self) {
        self.supervisor.shutdown(JOB_GRACE);
    }

    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    pub fn store(&self) -> &ringfence_store::SharedStore {
        &self.store
    }

    /// The settings page's sections: the families' (what they keep for a person), then the
    /// server's own (activity, tools).
    pub fn settings_sections(&self) -> Vec<Arc<dyn ringfence_core::page::Section>> {
        let mut offered: Vec<(&'static str, Vec<String>)> = Vec::new();
        for tool in self.toolbox.iter() {
            match offered.iter_mut().find(|(f, _)| *f == tool.family()) {
                Some((_, tools)) => tools.push(tool.name().to_owned()),
                None => offered.push((tool.family(), vec![tool.name().to_owned()])),
            }
        }
        let mut sections = self.sections.clone();
        sections.push(Arc::new(crate::pages::Activity {
            store: self.store.clone(),
            data_dir: self.data_dir.clone(),
        }));
        sections.push(Arc::new(crate::pages::Tools {
            offered,
            withheld: self.withheld.clone(),
        }));
        sections
    }

    /// Deletes saved outputs older than the retention period (every user's).
    pub fn prune_spill(&self) {
        self.sessions.prune_spill(self.limits.spill_retention_days);
    }

    /// Warns (once, at start) about configured roots that do not exist yet.
    pub fn check_roots(&self) {
        self.sessions.check_roots();
    }
}

/// The app's sessions, as the MCP servers of HTTP users ask for them.
struct AppSessions(Arc<App>);

impl UserSessions for AppSessions {
    fn session(&self, user: &str) -> Result<CallScope, BackendError> {
        self.0.sessions.scope_for(user).map_err(BackendError::new)
    }

    fn stateless(&self, user: &str, roots: Option<&[String]>) -> Result<CallScope, BackendError> {
        self.0
            .sessions
            .stateless_scope(user, roots)
            .map_err(BackendError::new)
    }

    fn uses_client_roots(&self) -> bool {
        self.0.sessions.client_roots() != ringfence_fs::ClientRoots::Ignore
    }
}
