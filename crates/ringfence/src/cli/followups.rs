//! `followups …`: the follow-ups family's own commands (`ringfence_followups::cli`).

use std::process::ExitCode;

use ringfence_followups::cli::FollowupsCommand;
use ringfence_followups::settings::FollowupSettings;

use super::{Terminal, ended, fail};
use crate::config::Config;

pub(super) fn run(config: &Config, cmd: FollowupsCommand) -> ExitCode {
    let settings = config
        .families
        .get::<FollowupSettings>(ringfence_followups::FAMILY);
    let db = match ringfence_followups::open(&config.store.shared_store(), &settings.db_path) {
        Ok(db) => db,
        Err(e) => return fail(&e.to_string()),
    };
    ended(ringfence_followups::cli::run(
        &*db,
        settings,
        cmd,
        &mut Terminal,
    ))
}
