//! `scheduler`: delivers follow-ups as they fall due, in the foreground, until SIGTERM or
//! SIGINT — for people whose MCP client is not always open (a systemd user unit runs it;
//! see the README). It may run beside any number of `serve` processes on the same data
//! directory: each follow-up is claimed once.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::{fail, runtime};
use crate::config::Config;
use ringfence_core::supervisor::Supervisor;
use ringfence_followups::scheduler::Scheduler;
use ringfence_followups::settings::{ChannelKind, FollowupSettings};

pub(super) fn run(config: &Config) -> ExitCode {
    let settings = config
        .families
        .get::<FollowupSettings>(ringfence_followups::FAMILY)
        .clone();
    let db = match ringfence_followups::open(&config.store.shared_store(), &settings.db_path) {
        Ok(db) => db,
        Err(e) => return fail(&e.to_string()),
    };
    // People's own choices (the settings page) count: one may have turned theirs on.
    let chosen = match db.choices() {
        Ok(c) => settings.with_choices(&c),
        Err(e) => {
            return fail(&format!(
                "cannot read the people's own delivery choices: {e}"
            ));
        }
    };
    if !chosen.delivers_for_anyone() {
        if !settings.user_choices {
            return fail(
                "follow-up delivery is off for every user: set [followups] proactive = true (or followups.users.<name>.proactive = true), or RINGFENCE_FOLLOWUPS_PROACTIVE=true",
            );
        }
        // A person may turn theirs on later, on their settings page: wait for them.
        tracing::warn!(
            "follow-up delivery is off for every user for now: follow-ups are delivered once someone turns proactive messages on on their settings page, or [followups] proactive = true"
        );
    }
    if settings.channels.iter().all(|c| c.kind == ChannelKind::Mcp) {
        tracing::warn!(
            "the only follow-up channel is mcp, which reaches clients connected to `serve`: this scheduler has none, and leaves those follow-ups to `serve` (add a webhook, command or email channel for it to deliver)"
        );
    }
    let writer = ringfence_followups::check_in_writer(config.llm.as_ref());
    let scheduler = match Scheduler::new(db, settings, writer) {
        Ok(s) => Arc::new(s),
        Err(e) => return fail(&format!("cannot start the scheduler: {e}")),
    };
    let supervisor = Supervisor::new();
    supervisor.spawn("followup-scheduler", move |stop| {
        scheduler.run_blocking(&|wait| stop.wait(wait))
    });
    let waited = runtime().block_on(async {
        let name = super::stop::StopSignals::listen()?.recv().await;
        tracing::info!("{name} received");
        Ok::<(), std::io::Error>(())
    });
    tracing::info!("follow-up scheduler stopping");
    // A delivery in flight finishes (or its claim expires and another process takes it).
    supervisor.shutdown(Duration::from_secs(30));
    match waited {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&format!("cannot wait for signals: {e}")),
    }
}
