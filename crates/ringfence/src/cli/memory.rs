//! `memory …`: the memory family's own commands (`ringfence_memory::cli`), on its database.

use std::process::ExitCode;

use ringfence_memory::cli::MemoryCommand;
use ringfence_memory::settings::MemorySettings;

use super::{Terminal, ended, fail};
use crate::config::Config;

pub(super) fn run(config: &Config, cmd: MemoryCommand) -> ExitCode {
    let settings = config
        .families
        .get::<MemorySettings>(ringfence_memory::FAMILY);
    let db = match ringfence_memory::open(&config.store.shared_store(), settings) {
        Ok(db) => db,
        Err(e) => return fail(&e.to_string()),
    };
    let done = ringfence_memory::cli::run(&db, cmd, &mut Terminal);
    db.flush();
    ended(done)
}
