//! The follow-up family's plug: its `[followups]` settings, its state in the store, its four
//! tools over the store, and (in `serve`) the scheduler that delivers what falls due.

use std::path::Path;
use std::sync::Arc;

use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::live::LiveSessions;
use ringfence_core::plug::{
    BuildError, Check, FamilyEnv, FamilyPlug, Lazy, ProbeEnv, SectionInput, SettingsError, Shown,
};
use ringfence_llm::{ChatModel, LlmSettings};
use ringfence_store::pg::copy;
use ringfence_store::{OpenError, SharedStore};

use crate::scheduler::Scheduler;
use crate::settings::{self, ChannelKind, FollowupSettings};
use crate::store::{FollowupDb, FollowupStore};
use crate::{
    ChangeOutcome, DeliveryPolicy, Followup, FollowupBackend, FollowupServices, ListFilter, Listed,
    SystemClock, UserDelivery,
};
use ringfence_core::error::BackendError;

pub struct FollowupsPlug;

impl FamilyPlug for FollowupsPlug {
    type Settings = FollowupSettings;
    const SECTION: Option<&'static str> = Some(settings::SECTION);
    const SAMPLE: Option<&'static str> = Some(settings::SAMPLE);
    const ENV_VARS: &'static [&'static str] = settings::ENV_VARS;

    fn info(&self) -> &'static FamilyInfo {
        &crate::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<FollowupSettings, SettingsError> {
        FollowupSettings::resolve(input)
    }

    fn state(&self, settings: &FollowupSettings, _data_dir: &Path) -> Vec<copy::Family> {
        vec![crate::store::state(settings.db_path.clone())]
    }

    fn shown(&self, s: &FollowupSettings) -> Shown {
        let channels: Vec<&str> = s.channels.iter().map(|c| c.name()).collect();
        let users: Vec<&str> = s.users.keys().map(String::as_str).collect();
        let names = |names: &[&str], none: &str| {
            if names.is_empty() {
                none.to_owned()
            } else {
                names.join(", ")
            }
        };
        Shown::default()
            .value("proactive", s.proactive)
            .value("user_choices", s.user_choices)
            .value("timezone", s.zone_name.as_str())
            .raw(
                "quiet_hours",
                s.quiet_hours
                    .map_or("(none)".to_owned(), |q| format!("\"{}\"", q.describe())),
            )
            .number("max_attempts", s.max_attempts.max(0) as u64)
            .number("lease_secs", s.lease.as_secs())
            .raw("channels", names(&channels, "(none)"))
            .raw(
                "users",
                names(&users, "(none: every user has the defaults)"),
            )
    }

    fn checks(&self, settings: &FollowupSettings, _data_dir: &std::path::Path) -> Vec<Check> {
        let channels: Vec<&str> = settings.channels.iter().map(|c| c.name()).collect();
        let mut checks = vec![if settings.delivers_for_anyone() {
            Check::ok(
                "follow-up delivery",
                format!("on, through {}", channels.join(", ")),
            )
        } else if settings.user_choices {
            Check::note(
                "follow-up delivery",
                "proactive messages are off in the configuration: follow-ups are delivered only to people who turn theirs on, on their settings page",
                "set [followups] proactive = true (or per user in [followups.users.NAME]) to turn them on for everyone",
            )
        } else {
            Check::note(
                "follow-up delivery",
                "proactive messages are off: follow-ups are kept but nothing is delivered",
                "set [followups] proactive = true (or per user in [followups.users.NAME])",
            )
        }];
        for c in &settings.channels {
            if let crate::settings::ChannelKind::Command { argv, .. } = &c.kind
                && let Some(program) = argv.first()
                && !executable(std::path::Path::new(program))
            {
                checks.push(Check::problem(
                    "follow-up command channel",
                    format!("{program} is not an executable file"),
                    "name the program by its absolute path in [[followups.channels]] command",
                ));
            }
        }
        checks
    }

    /// Each e-mail channel's server: connected, STARTTLS and the login accepted; nothing sent.
    fn probe<'a>(
        &'a self,
        settings: &'a FollowupSettings,
        _env: &'a ProbeEnv<'a>,
    ) -> ringfence_core::BoxFuture<'a, Vec<Check>> {
        Box::pin(async move {
            let mut checks = Vec::new();
            for c in &settings.channels {
                match &c.kind {
                    crate::settings::ChannelKind::Email(mail) => {
                        checks.push(crate::scheduler::probe_smtp(mail).await)
                    }
                    crate::settings::ChannelKind::Desktop { timeout } => {
                        let timeout = *timeout;
                        let found = tokio::task::spawn_blocking(move || {
                            crate::desktop::server_information(timeout)
                        })
                        .await;
                        checks.push(match found {
                            Ok(Ok(server)) => Check::ok(
                                "follow-up desktop notifications",
                                format!("the notification service answers: {server}"),
                            ),
                            Ok(Err(e)) => Check::problem(
                                "follow-up desktop notifications",
                                e.to_string(),
                                "run ringfence inside your desktop session (DBUS_SESSION_BUS_ADDRESS set, a notification service running), or use another channel",
                            ),
                            Err(e) => Check::problem(
                                "follow-up desktop notifications",
                                e.to_string(),
                                "report this",
                            ),
                        });
                    }
                    _ => {}
                }
            }
            checks
        })
    }

    fn build(
        &self,
        settings: &FollowupSettings,
        env: &FamilyEnv<'_>,
    ) -> Result<Family, BuildError> {
        let (store, path) = (env.store.clone(), settings.db_path.clone());
        let db: Arc<Lazy<dyn FollowupStore>> = Arc::new(Lazy::new(move || open(&store, &path)));
        // `serve` delivers what falls due while it runs — through the `mcp` channel to the
        // sessions it serves too (registered in the shared `LiveSessions`, which the server
        // finds there). It runs even when delivery is off for everyone in the configuration
        // while people's own choices count: one may turn theirs on, on the settings page.
        if env.background && (settings.delivers_for_anyone() || settings.user_choices) {
            let (db, settings) = (db.clone(), settings.clone());
            let writer = check_in_writer(env.llm);
            let live = settings
                .channels
                .iter()
                .any(|c| c.kind == ChannelKind::Mcp)
                .then(|| env.shared.get_or_init(LiveSessions::default));
            env.supervisor.spawn("followup-scheduler", move |stop| {
                let db = match db.open() {
                    Ok(db) => db.clone(),
                    Err(e) => {
                        tracing::error!(error = %e, "the follow-up scheduler cannot start");
                        return;
                    }
                };
                match Scheduler::new(db, settings, writer) {
                    Ok(s) => Arc::new(s.with_live(live)).run_blocking(&|wait| stop.wait(wait)),
                    Err(e) => tracing::error!(error = %e, "the follow-up scheduler cannot start"),
                }
            });
        }
        let backend: Arc<dyn FollowupBackend> = Arc::new(LazyFollowups(db.clone()));
        Ok(crate::family(FollowupServices {
            backend: backend.clone(),
            delivery: Arc::new(Policy {
                settings: settings.clone(),
                db: db.clone(),
            }),
            clock: Arc::new(SystemClock),
        })
        .with_section(Arc::new(crate::page::FollowupPage {
            backend,
            db,
            settings: settings.clone(),
            live: settings
                .channels
                .iter()
                .any(|c| c.kind == ChannelKind::Mcp)
                .then(|| env.shared.get_or_init(LiveSessions::default)),
            tested: Default::default(),
        })))
    }
}

/// The follow-ups the store names: `followups.db` at `path` (made 0600, its directory 0700
/// if missing), or PostgreSQL's tables.
pub fn open(store: &SharedStore, path: &Path) -> Result<Arc<dyn FollowupStore>, OpenError> {
    store.open(
        "follow-up database",
        || Ok(Arc::new(FollowupDb::open(path)?) as Arc<dyn FollowupStore>),
        |pg| Ok(Arc::new(crate::store::pg::PgFollowups::open(pg)?) as Arc<dyn FollowupStore>),
    )
}

/// The model that writes check-ins: `[llm]` when it is an HTTP API (with `sampling` there is
/// no client to ask when a follow-up falls due), else none — the context is sent as is.
pub fn check_in_writer(llm: Option<&LlmSettings>) -> Option<Arc<dyn ChatModel>> {
    match llm?.api_model()? {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(error = %e, "follow-ups are sent with their context as written: the [llm] model cannot be used");
            None
        }
    }
}

/// What the tools say of a user only the `mcp` channel serves.
const ONLY_MCP: &str = "It reaches the user through their MCP client (a message, and the resource ringfence://followups/due): if none is connected when it falls due, it comes when one connects.";

/// The users' delivery settings: the configuration, with each person's own choices over it.
#[derive(Debug)]
struct Policy {
    settings: FollowupSettings,
    db: Arc<Lazy<dyn FollowupStore>>,
}

/// `settings` with `user`'s own choices over them (the configuration's alone when they
/// cannot be read, with a warning).
pub(crate) fn effective(
    settings: &FollowupSettings,
    db: &Lazy<dyn FollowupStore>,
    user: &str,
) -> FollowupSettings {
    match db
        .get()
        .map_err(|e| e.to_string())
        .and_then(|db| db.choices_of(user).map_err(|e| e.to_string()))
    {
        Ok(Some(c)) => settings.with_choices(&[(user.to_owned(), c)]),
        Ok(None) => settings.clone(),
        Err(e) => {
            tracing::warn!(user = %user, error = %e, "cannot read the person's own delivery choices: the configuration's apply");
            settings.clone()
        }
    }
}

impl DeliveryPolicy for Policy {
    fn for_user(&self, user: &str) -> UserDelivery {
        let s = &effective(&self.settings, &self.db, user);
        let serving: Vec<_> = s.channels.iter().filter(|c| c.serves(user)).collect();
        let (zone_name, zone) = s.zone_of(user);
        UserDelivery {
            proactive: s.proactive_for(user),
            enable_hint: format!(
                "the user turns proactive messages on on their settings page (/settings/followups), or an operator sets [followups] proactive = true, or followups.users.{user}.proactive = true, or {}=true",
                settings::RINGFENCE_FOLLOWUPS_PROACTIVE
            ),
            zone,
            zone_name,
            quiet_hours: s.quiet_hours_of(user),
            channels: serving.iter().map(|c| c.name().to_owned()).collect(),
            undeliverable: serving.is_empty().then(|| {
                format!("no [[followups.channels]] entry serves the user {user}: add one (webhook, command, email or mcp) without `users`, or name them in its `users`")
            }),
            caveat: (!serving.is_empty() && serving.iter().all(|c| c.kind == ChannelKind::Mcp))
                .then(|| ONLY_MCP.to_owned()),
        }
    }
}

/// The follow-ups, opened on first use.
#[derive(Debug)]
struct LazyFollowups(Arc<Lazy<dyn FollowupStore>>);

impl FollowupBackend for LazyFollowups {
    fn schedule(
        &self,
        user: &str,
        context: &str,
        due_ms: i64,
        now_ms: i64,
    ) -> Result<Followup, BackendError> {
        self.0.get()?.schedule(user, context, due_ms, now_ms)
    }

    fn list(&self, user: &str, filter: ListFilter, limit: usize) -> Result<Listed, BackendError> {
        self.0.get()?.list(user, filter, limit)
    }

    fn update(
        &self,
        user: &str,
        id: i64,
        context: Option<&str>,
        due_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<ChangeOutcome, BackendError> {
        self.0.get()?.update(user, id, context, due_ms, now_ms)
    }

    fn cancel(
        &self,
        user: &str,
        id: i64,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<ChangeOutcome, BackendError> {
        self.0.get()?.cancel(user, id, reason, now_ms)
    }

    fn due(
        &self,
        user: &str,
        since_ms: i64,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<Followup>, BackendError> {
        self.0.get()?.due(user, since_ms, now_ms, limit)
    }
}

/// Whether `path` is a file this account may execute (a program named without a directory
/// is looked up on `PATH`).
#[allow(clippy::disallowed_methods)] // the operator's own program, not a root
fn executable(path: &std::path::Path) -> bool {
    let runs = |p: &std::path::Path| {
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        }
        // No execute bit: any file (Windows runs what its extension says).
        #[cfg(not(unix))]
        {
            std::fs::metadata(p).is_ok_and(|m| m.is_file())
        }
    };
    if path.components().count() > 1 {
        return runs(path);
    }
    std::env::var_os("PATH")
        .is_some_and(|dirs| std::env::split_paths(&dirs).any(|d| runs(&d.join(path))))
}
