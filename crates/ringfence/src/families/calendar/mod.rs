//! The calendar family: the four tools over each user's provider — the local calendar
//! (`calendar.db`, opened on first use), a CalDAV server (one client per user, made on first
//! use), or Google Calendar (not built yet: the tools say so).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use ringfence_calendar::caldav::{CalDavAccount, CalDavStore};
use ringfence_calendar::local::LocalStore;
use ringfence_calendar::{ObjectCalendar, ObjectStore, UserStores};
use ringfence_store::calendar::CalendarDb;
use ringfence_tools::calendar::{self as family, CalendarError, CalendarResult};
use ringfence_tools::time::TimeZone;
use ringfence_tools::{Family, FamilyInfo};

use super::{FamilyEnv, FamilyPlug};
use crate::config::{Config, ConfigError, SectionInput};

mod config;

pub use config::{CalendarSettings, Provider};

pub struct CalendarPlug;

impl FamilyPlug for CalendarPlug {
    type Settings = CalendarSettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<CalendarSettings, ConfigError> {
        CalendarSettings::resolve(input)
    }

    fn build(&self, settings: &CalendarSettings, _env: &FamilyEnv<'_>) -> Result<Family, String> {
        let stores = Arc::new(Stores {
            settings: settings.clone(),
            db: OnceLock::new(),
            caldav: Mutex::default(),
        });
        Ok(family::family(Arc::new(ObjectCalendar::new(stores))))
    }
}

/// The resolved `[calendar]` (for the `calendar` commands).
pub fn settings(config: &Config) -> &CalendarSettings {
    config.families.get(family::INFO.name)
}

/// Opens `calendar.db` (0600 by the store), making its directory (0700) if missing.
pub fn open_db(path: &std::path::Path) -> Result<Arc<CalendarDb>, String> {
    super::open_private_db(path, "calendar", CalendarDb::open)
}

/// Each user's store, by their account.
#[derive(Debug)]
struct Stores {
    settings: CalendarSettings,
    db: OnceLock<Result<Arc<CalendarDb>, String>>,
    /// One CalDAV client per user (it keeps the calendars it found for a minute).
    caldav: Mutex<HashMap<String, CalDavStore>>,
}

const GOOGLE_NOT_BUILT: &str = "Google Calendar is not connected: this version of ringfence cannot connect to Google Calendar yet (provider = \"google\" is still to come). Use the local calendar ([calendar] provider = \"local\", the default) or a CalDAV server (provider = \"caldav\" with url, username and password_env).";

impl UserStores for Stores {
    fn store(&self, user: &str) -> CalendarResult<Arc<dyn ObjectStore>> {
        match &self.settings.account(user).provider {
            Provider::Local => {
                let db = self
                    .db
                    .get_or_init(|| open_db(&self.settings.db_path))
                    .as_ref()
                    .map_err(|e| CalendarError::Failed(e.clone()))?;
                Ok(Arc::new(LocalStore::new(db.clone(), user)))
            }
            Provider::Google => Err(CalendarError::NotConnected(GOOGLE_NOT_BUILT.into())),
            Provider::CalDav {
                url,
                username,
                password,
            } => {
                let how = "set [calendar] provider = \"caldav\" with url, username and password_env (or password); over HTTP per user in [calendar.users.<name>]";
                let url = url.clone().ok_or_else(|| {
                    CalendarError::NotConnected(format!(
                        "CalDAV calendar is not connected: no server URL is configured; {how}"
                    ))
                })?;
                let password = password.clone().map_err(|why| {
                    CalendarError::NotConnected(format!(
                        "CalDAV calendar is not connected: {why}; {how}"
                    ))
                })?;
                if username.is_some() && password.is_none() {
                    return Err(CalendarError::NotConnected(format!(
                        "CalDAV calendar is not connected: a username but no password is configured; {how}"
                    )));
                }
                let mut cache = self.caldav.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(s) = cache.get(user) {
                    return Ok(Arc::new(s.clone()));
                }
                let s = CalDavStore::new(
                    CalDavAccount {
                        url,
                        username: username.clone(),
                        password,
                    },
                    self.settings.timeout,
                )
                .map_err(CalendarError::Failed)?;
                cache.insert(user.to_owned(), s.clone());
                Ok(Arc::new(s))
            }
        }
    }

    fn zone(&self, user: &str) -> (String, TimeZone) {
        let a = self.settings.account(user);
        (a.zone_name.clone(), a.zone.clone())
    }
}
