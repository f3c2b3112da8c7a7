//! The follow-up family: the four tools over `followups.db`, and (in `serve`, and in
//! `ringfence scheduler`) the scheduler that delivers what falls due.

use std::sync::{Arc, OnceLock};

use ringfence_followups::store::FollowupStore;
use ringfence_followups::{
    self as family, ChangeOutcome, DeliveryPolicy, Followup, FollowupBackend, FollowupServices,
    ListFilter, Listed, SystemClock, UserDelivery,
};
use ringfence_tools::error::BackendError;
use ringfence_tools::live::LiveSessions;
use ringfence_tools::{Family, FamilyInfo};

use super::{FamilyEnv, FamilyPlug};
use crate::config::{Config, ConfigError, SectionInput};
use crate::store::SharedStore;

pub(crate) mod config;
pub mod scheduler;

pub use config::{ChannelKind, FollowupSettings};

pub struct FollowupsPlug;

impl FamilyPlug for FollowupsPlug {
    type Settings = FollowupSettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);
    const ENV_VARS: &'static [&'static str] = config::ENV_VARS;

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<FollowupSettings, ConfigError> {
        FollowupSettings::resolve(input)
    }

    fn build(&self, settings: &FollowupSettings, env: &FamilyEnv<'_>) -> Result<Family, String> {
        let db = Arc::new(LazyFollowups {
            cell: OnceLock::new(),
            path: settings.db_path.clone(),
            store: env
                .shared
                .get_or_init(|| SharedStore::new(env.config.store.clone())),
        });
        // `serve` delivers what falls due while it runs, when anyone's follow-ups can be —
        // through the `mcp` channel to the sessions it serves (registered in the shared
        // `LiveSessions`, which the server finds there).
        if env.background && settings.delivers_for_anyone() {
            let (db, settings) = (db.clone(), settings.clone());
            let writer = check_in_writer(env.config);
            let live = settings
                .channels
                .iter()
                .any(|c| c.kind == config::ChannelKind::Mcp)
                .then(|| env.shared.get_or_init(LiveSessions::default));
            env.supervisor.spawn("followup-scheduler", move |stop| {
                match db.get().map_err(|e| e.to_string()).and_then(|db| {
                    scheduler::Scheduler::new(db.clone(), settings, writer)
                        .map(|s| Arc::new(s.with_live(live)))
                }) {
                    Ok(s) => s.run_blocking(&|wait| stop.wait(wait)),
                    Err(e) => tracing::error!(error = %e, "the follow-up scheduler cannot start"),
                }
            });
        }
        Ok(family::family(FollowupServices {
            backend: db,
            delivery: Arc::new(Policy(settings.clone())),
            clock: Arc::new(SystemClock),
        }))
    }
}

/// The model that writes check-ins: `[llm]` when it is an HTTP API (with `sampling` there is
/// no client to ask when a follow-up falls due), else none — the context is sent as is.
pub fn check_in_writer(config: &Config) -> Option<Arc<dyn ringfence_llm::ChatModel>> {
    let llm = config.llm.as_ref()?;
    let crate::config::LlmSource::Api(cfg) = &llm.source else {
        return None;
    };
    match super::delegate::api_model(cfg, llm.timeout) {
        Ok(m) => Some(m),
        Err(e) => {
            tracing::warn!(error = %e, "follow-ups are sent with their context as written: the [llm] model cannot be used");
            None
        }
    }
}

/// The resolved `[followups]` settings (for the scheduler and the `followups` commands).
pub fn settings(config: &Config) -> &FollowupSettings {
    config.families.get(family::INFO.name)
}

/// What the tools say of a user only the `mcp` channel serves.
const ONLY_MCP: &str = "It reaches the user through their MCP client (a message, and the resource ringfence://followups/due): if none is connected when it falls due, it comes when one connects.";

/// The users' delivery settings, from the configuration.
#[derive(Debug)]
struct Policy(FollowupSettings);

impl DeliveryPolicy for Policy {
    fn for_user(&self, user: &str) -> UserDelivery {
        let s = &self.0;
        let own = s.users.get(user);
        let serving: Vec<_> = s.channels.iter().filter(|c| c.serves(user)).collect();
        let (zone_name, zone) = own
            .and_then(|u| u.zone.clone())
            .unwrap_or_else(|| (s.zone_name.clone(), s.zone.clone()));
        UserDelivery {
            proactive: s.proactive_for(user),
            enable_hint: format!(
                "an operator sets [followups] proactive = true, or followups.users.{user}.proactive = true, or {}=true",
                config::RINGFENCE_FOLLOWUPS_PROACTIVE
            ),
            zone,
            zone_name,
            quiet_hours: own.and_then(|u| u.quiet_hours).unwrap_or(s.quiet_hours),
            channels: serving.iter().map(|c| c.name().to_owned()).collect(),
            undeliverable: serving.is_empty().then(|| {
                format!("no [[followups.channels]] entry serves the user {user}: add one (webhook, command, email or mcp) without `users`, or name them in its `users`")
            }),
            caveat: (!serving.is_empty()
                && serving.iter().all(|c| c.kind == config::ChannelKind::Mcp))
            .then(|| ONLY_MCP.to_owned()),
        }
    }
}

/// The follow-ups `[store]` names (for the `followups` and `scheduler` commands):
/// `followups.db` (made 0600, its directory 0700 if missing) or PostgreSQL's tables.
pub fn open_db(config: &Config) -> Result<Arc<dyn FollowupStore>, String> {
    SharedStore::new(config.store.clone()).followups(&settings(config).db_path)
}

/// The follow-ups, opened on first use.
#[derive(Debug)]
struct LazyFollowups {
    cell: OnceLock<Result<Arc<dyn FollowupStore>, String>>,
    path: std::path::PathBuf,
    store: Arc<SharedStore>,
}

impl LazyFollowups {
    fn get(&self) -> Result<&Arc<dyn FollowupStore>, BackendError> {
        self.cell
            .get_or_init(|| self.store.followups(&self.path))
            .as_ref()
            .map_err(|e| BackendError::new(std::io::Error::other(e.clone())))
    }
}

impl FollowupBackend for LazyFollowups {
    fn schedule(
        &self,
        user: &str,
        context: &str,
        due_ms: i64,
        now_ms: i64,
    ) -> Result<Followup, BackendError> {
        self.get()?.schedule(user, context, due_ms, now_ms)
    }

    fn list(&self, user: &str, filter: ListFilter, limit: usize) -> Result<Listed, BackendError> {
        self.get()?.list(user, filter, limit)
    }

    fn update(
        &self,
        user: &str,
        id: i64,
        context: Option<&str>,
        due_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<ChangeOutcome, BackendError> {
        self.get()?.update(user, id, context, due_ms, now_ms)
    }

    fn cancel(
        &self,
        user: &str,
        id: i64,
        reason: Option<&str>,
        now_ms: i64,
    ) -> Result<ChangeOutcome, BackendError> {
        self.get()?.cancel(user, id, reason, now_ms)
    }

    fn due(
        &self,
        user: &str,
        since_ms: i64,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<Followup>, BackendError> {
        self.get()?.due(user, since_ms, now_ms, limit)
    }
}
