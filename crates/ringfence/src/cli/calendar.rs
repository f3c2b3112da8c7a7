//! `calendar export`, `calendar import`: the local calendar as iCalendar (RFC 5545) files,
//! to move events in from another calendar application or out of ringfence.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Subcommand;

use ringfence_calendar::event::Zones;
use ringfence_calendar::local::DEFAULT_CALENDAR;
use ringfence_calendar::store::CalendarStore;
use ringfence_calendar::transfer;
use ringfence_core::LOCAL_USER;

use super::{fail, read_input, say, write_output};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub(super) enum CalendarCommand {
    /// Connect a Google account (OAuth for installed apps): prints an address to open in a
    /// browser on this machine, waits for Google's answer, keeps the refresh token (0600).
    Connect {
        /// The provider to connect: `google`.
        provider: String,
        /// For this user (default: the local user).
        #[arg(long)]
        user: Option<String>,
        /// How long to wait for the browser, in seconds.
        #[arg(long, default_value_t = 300)]
        wait_secs: u64,
    },
    /// Write a user's local events as one iCalendar file (to stdout, or --output).
    Export {
        /// Whose events (default: the local user's).
        #[arg(long)]
        user: Option<String>,
        /// Only this calendar (its ID, e.g. `personal`).
        #[arg(long)]
        calendar: Option<String>,
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Store the events of an iCalendar file in a user's local calendar; events already
    /// there (the same UID) are skipped, so an import can be repeated.
    Import {
        /// The .ics file, or `-` for stdin.
        file: PathBuf,
        #[arg(long)]
        user: Option<String>,
        /// Into this calendar (made if missing; default: `personal`).
        #[arg(long)]
        calendar: Option<String>,
    },
}

fn calendar_settings(config: &Config) -> &ringfence_calendar::settings::CalendarSettings {
    config.families.get(ringfence_calendar::tools::FAMILY)
}

pub(super) fn run(config: &Config, cmd: CalendarCommand) -> ExitCode {
    let settings = calendar_settings(config);
    let db = match ringfence_calendar::open(&config.store.shared_store(), &settings.db_path) {
        Ok(db) => db,
        Err(e) => return fail(&e.to_string()),
    };
    if let CalendarCommand::Connect {
        provider,
        user,
        wait_secs,
    } = &cmd
    {
        return connect(
            config,
            provider,
            user.as_deref().unwrap_or(LOCAL_USER),
            *wait_secs,
        );
    }
    match cmd {
        CalendarCommand::Connect { .. } => unreachable!("handled above"),
        CalendarCommand::Export {
            user,
            calendar,
            output,
        } => export(
            &*db,
            user.as_deref().unwrap_or(LOCAL_USER),
            calendar.as_deref(),
            output.as_deref(),
        ),
        CalendarCommand::Import {
            file,
            user,
            calendar,
        } => {
            let user = user.as_deref().unwrap_or(LOCAL_USER);
            let account = settings.account(user);
            let zones = Zones::new(&account.zone_name, account.zone.clone());
            import(&*db, &file, user, calendar.as_deref(), &zones)
        }
    }
}

fn connect(config: &Config, provider: &str, user: &str, wait_secs: u64) -> ExitCode {
    use ringfence_calendar::google::GoogleAccounts;
    if provider != "google" {
        return fail(&format!(
            "`{provider}` needs no connecting: only `google` does (CalDAV takes url, username and password_env in [calendar])"
        ));
    }
    let settings = calendar_settings(config);
    let accounts = ringfence_calendar::Accounts::new(
        settings,
        &config.data_dir,
        std::sync::Arc::new(config.store.shared_store()),
    );
    let account = match accounts.account(user) {
        Ok(a) => a,
        Err(e) => return fail(&e.to_string()),
    };
    let done = super::runtime().block_on(ringfence_calendar::google::connect(
        &account,
        |url| {
            say("Open this address in a browser on this machine and allow ringfence to use your calendar:");
            say(url);
        },
        std::time::Duration::from_secs(wait_secs),
    ));
    match done {
        Ok(scope) => {
            say(&format!(
                "Google Calendar is connected for {user} (scope {scope}); the token is kept in {}",
                account.tokens.place()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("connecting Google Calendar failed: {e}")),
    }
}

fn export(
    db: &dyn CalendarStore,
    user: &str,
    calendar: Option<&str>,
    output: Option<&Path>,
) -> ExitCode {
    let objects = match db.all(user, calendar) {
        Ok(o) => o,
        Err(e) => return fail(&e.to_string()),
    };
    let texts: Vec<String> = objects.into_iter().map(|o| o.ics).collect();
    if let Err(e) = write_output(&transfer::export(&texts), output) {
        return fail(&e);
    }
    say(&format!("exported {} events", texts.len()));
    ExitCode::SUCCESS
}

fn import(
    db: &dyn CalendarStore,
    file: &Path,
    user: &str,
    calendar: Option<&str>,
    zones: &Zones,
) -> ExitCode {
    let text = match read_input(file) {
        Ok(t) => t,
        Err(e) => return fail(&e),
    };
    let objects = match transfer::split(&text, zones) {
        Ok(o) => o,
        Err(e) => return fail(&format!("{}: {e}", file.display())),
    };
    let now = ringfence_core::time::now_ms();
    let cal = match calendar {
        Some(c) => {
            if let Err(e) = db.ensure_calendar(user, c, c, now) {
                return fail(&e.to_string());
            }
            c.to_owned()
        }
        None => match db.calendars(user, DEFAULT_CALENDAR, now) {
            Ok(cs) => cs
                .first()
                .map(|(id, _)| id.clone())
                .unwrap_or_else(|| DEFAULT_CALENDAR.0.to_owned()),
            Err(e) => return fail(&e.to_string()),
        },
    };
    let items: Vec<(String, String, (i64, i64))> = objects
        .into_iter()
        .map(|o| (o.uid, o.ics, o.span))
        .collect();
    // One transaction: the file is stored whole or not at all.
    let (imported, skipped) = match db.insert_many(user, &cal, &items, now) {
        Ok(r) => r,
        Err(e) => return fail(&format!("storing the events failed: {e}")),
    };
    say(&format!(
        "imported {imported} events into calendar {cal} of {user} ({skipped} already there)"
    ));
    ExitCode::SUCCESS
}
