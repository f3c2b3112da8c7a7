//! The calendar family's plug: the four tools over each user's provider — the local calendar
//! (`calendar.db`, opened on first use), a CalDAV server (one client per user, made on first
//! use), or Google Calendar (connected with `ringfence calendar connect google`). A router
//! sends each call to the backend of the caller's provider.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ringfence_core::BoxFuture;
use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::plug::{
    BuildError, FamilyEnv, FamilyPlug, Lazy, ProbeCall, SectionInput, SettingsError, Shown,
};
use ringfence_core::time::TimeZone;
use ringfence_store::pg::copy;
use ringfence_store::pg::credentials::PgCredentials;
use ringfence_store::{OpenError, SharedStore};

use crate::caldav::{CalDavAccount, CalDavStore};
use crate::google::{
    GoogleAccount, GoogleAccounts, GoogleCalendar, TokenFile, TokenStore, TokenStoreError,
};
use crate::local::LocalStore;
use crate::settings::{self as config, CalendarSettings, Provider};
use crate::store::{CalendarDb, CalendarStore};
use crate::tools::{
    self as family, CalendarBackend, CalendarError, CalendarEvent, CalendarResult, Deleted,
    EventPatch, NewEvent,
};
use crate::{ObjectCalendar, ObjectStore, UserStores};

pub struct CalendarPlug;

impl FamilyPlug for CalendarPlug {
    type Settings = CalendarSettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);
    const SAMPLE: Option<&'static str> = Some(config::SAMPLE);

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<CalendarSettings, SettingsError> {
        CalendarSettings::resolve(input)
    }

    fn state(&self, settings: &CalendarSettings, _data_dir: &Path) -> Vec<copy::Family> {
        vec![crate::store::state(settings.db_path.clone())]
    }

    /// Today's events of the local user: the server answers and takes the login (the local
    /// calendar reaches nothing).
    fn shown(&self, s: &CalendarSettings) -> Shown {
        let mut shown = Shown::default();
        shown = match &s.default.provider {
            Provider::Local | Provider::NotForUser => shown.value("provider", "local"),
            Provider::CalDav {
                url,
                username,
                password,
            } => shown
                .value("provider", "caldav")
                .value("url", url.as_ref().map_or("", |u| u.as_str()))
                .raw(
                    "username",
                    if username.is_some() {
                        "(set)"
                    } else {
                        "(none)"
                    }
                    .to_owned(),
                )
                .secret("password", matches!(password, Ok(Some(_)))),
            Provider::Google {
                client_id,
                client_secret,
                endpoints,
            } => shown
                .value("provider", "google")
                .secret("client_id", client_id.is_some())
                .secret("client_secret", matches!(client_secret, Ok(Some(_))))
                .value("google_api_url", endpoints.api.as_str()),
        };
        let users: Vec<String> = s.users.keys().cloned().collect();
        shown
            .value("timezone", s.default.zone_name.as_str())
            .number("timeout_secs", s.timeout.as_secs())
            .raw(
                "users",
                if users.is_empty() {
                    "(none: every user has the default)".to_owned()
                } else {
                    users.join(", ")
                },
            )
    }

    fn probe_call(&self, settings: &CalendarSettings) -> Option<ProbeCall> {
        let provider = match settings.default.provider {
            crate::settings::Provider::Local => return None,
            crate::settings::Provider::CalDav { .. } => "caldav",
            crate::settings::Provider::Google { .. } => "google",
            // Each HTTP user has their own login: there is no local one to try.
            crate::settings::Provider::NotForUser => return None,
        };
        Some(ProbeCall {
            subject: format!("calendar ({provider})"),
            tool: "list_calendar_events",
            args: serde_json::json!({"days": 1}),
            line: None,
        })
    }

    fn build(
        &self,
        settings: &CalendarSettings,
        env: &FamilyEnv<'_>,
    ) -> Result<Family, BuildError> {
        let (store, path) = (env.store.clone(), settings.db_path.clone());
        let stores = Arc::new(Stores {
            settings: settings.clone(),
            db: Lazy::new(move || open(&store, &path)),
            caldav: Mutex::default(),
        });
        let accounts = Arc::new(Accounts::new(settings, env.data_dir, env.store.clone()));
        let google = GoogleCalendar::new(accounts.clone(), settings.timeout).map_err(|e| {
            BuildError::new(family::FAMILY, format!("the Google Calendar client: {e}"))
        })?;
        let page = crate::page::CalendarPage {
            settings: settings.clone(),
            accounts,
            google: google.clone(),
            pending: Mutex::default(),
        };
        Ok(family::family(Arc::new(Router {
            settings: settings.clone(),
            objects: ObjectCalendar::new(stores),
            google,
        }))
        .with_section(Arc::new(page)))
    }
}

/// The local calendars `[store]` names: `calendar.db` at `path` (0600, its directory 0700 if
/// missing) or PostgreSQL's tables.
pub fn open(store: &SharedStore, path: &Path) -> Result<Arc<dyn CalendarStore>, OpenError> {
    store.open(
        "calendar database",
        || Ok(Arc::new(CalendarDb::open(path)?) as Arc<dyn CalendarStore>),
        |pg| Ok(Arc::new(crate::store::pg::PgCalendar::open(pg)?) as Arc<dyn CalendarStore>),
    )
}

/// Each user's store, by their account.
#[derive(Debug)]
struct Stores {
    settings: CalendarSettings,
    db: Lazy<dyn CalendarStore>,
    /// One CalDAV client per user (it keeps the calendars it found for a minute).
    caldav: Mutex<HashMap<String, CalDavStore>>,
}

impl UserStores for Stores {
    fn store(&self, user: &str) -> CalendarResult<Arc<dyn ObjectStore>> {
        match &self.settings.account(user).provider {
            Provider::Local => {
                let db = self
                    .db
                    .open()
                    .map_err(|e| CalendarError::Failed(e.to_string()))?;
                Ok(Arc::new(LocalStore::new(db.clone(), user)))
            }
            Provider::Google { .. } => Err(CalendarError::Failed(
                "Google Calendar is served by its own backend".into(),
            )),
            Provider::NotForUser => Err(CalendarError::NotConnected(format!(
                "your calendar is not connected: the configured [calendar] account is the operator's; an operator adds [calendar.users.{user}] with your own provider and login"
            ))),
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
                .map_err(|e| CalendarError::Failed(e.to_string()))?;
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

/// Each user's Google account: the configured OAuth client and where their connection is
/// kept (a file of the data directory, or the shared store's credentials).
#[derive(Debug)]
pub struct Accounts {
    settings: CalendarSettings,
    data_dir: std::path::PathBuf,
    store: Arc<SharedStore>,
}

impl Accounts {
    pub fn new(settings: &CalendarSettings, data_dir: &Path, store: Arc<SharedStore>) -> Accounts {
        Accounts {
            settings: settings.clone(),
            data_dir: data_dir.to_owned(),
            store,
        }
    }
}

/// One user's Google connection in the shared store.
#[derive(Debug)]
struct SharedToken {
    credentials: Arc<PgCredentials>,
    user: String,
}

impl SharedToken {
    fn failed(&self, action: &'static str, e: ringfence_store::StoreError) -> TokenStoreError {
        TokenStoreError {
            action,
            place: self.place(),
            source: Box::new(e),
        }
    }
}

impl TokenStore for SharedToken {
    fn load(&self) -> Result<Option<String>, TokenStoreError> {
        self.credentials
            .load(&self.user, "google")
            .map_err(|e| self.failed("read", e))
    }

    fn save(&self, doc: &str) -> Result<(), TokenStoreError> {
        self.credentials
            .save(&self.user, "google", doc, ringfence_core::time::now_ms())
            .map_err(|e| self.failed("write", e))
    }

    fn remove(&self) -> Result<(), TokenStoreError> {
        self.credentials
            .remove(&self.user, "google")
            .map_err(|e| self.failed("remove", e))
    }

    fn place(&self) -> String {
        "the shared store (PostgreSQL)".into()
    }
}

impl GoogleAccounts for Accounts {
    fn account(&self, user: &str) -> CalendarResult<GoogleAccount> {
        let Provider::Google {
            client_id,
            client_secret,
            endpoints,
        } = &self.settings.account(user).provider
        else {
            return Err(CalendarError::NotConnected(
                "Google Calendar is not connected: this user's [calendar] provider is not \"google\"".into(),
            ));
        };
        let how = "set [calendar] client_id (and client_secret_env) of your Google Cloud project's \"Desktop app\" OAuth client, then run `ringfence calendar connect google`";
        let client_id = client_id.clone().ok_or_else(|| {
            CalendarError::NotConnected(format!(
                "Google Calendar is not connected: no OAuth client is configured; {how}"
            ))
        })?;
        let client_secret = client_secret.clone().map_err(|why| {
            CalendarError::NotConnected(format!("Google Calendar is not connected: {why}; {how}"))
        })?;
        let credentials = self.store.open_shared("credentials table", |pg| {
            Ok(Arc::new(PgCredentials::open(pg)?))
        });
        let tokens: Arc<dyn TokenStore> = match credentials {
            Ok(Some(credentials)) => Arc::new(SharedToken {
                credentials,
                user: user.to_owned(),
            }),
            Ok(None) => Arc::new(TokenFile(
                self.data_dir
                    .join("calendar")
                    .join(format!("google-{}.json", ringfence_fs::user_dir_name(user))),
            )),
            Err(e) => return Err(CalendarError::Failed(e.to_string())),
        };
        Ok(GoogleAccount {
            client_id,
            client_secret,
            endpoints: endpoints.clone(),
            tokens,
        })
    }

    fn zone(&self, user: &str) -> (String, TimeZone) {
        let a = self.settings.account(user);
        (a.zone_name.clone(), a.zone.clone())
    }
}

/// Sends each call to the backend of the caller's provider.
#[derive(Debug)]
struct Router {
    settings: CalendarSettings,
    objects: ObjectCalendar,
    google: GoogleCalendar,
}

impl Router {
    fn pick(&self, user: &str) -> &dyn CalendarBackend {
        match self.settings.account(user).provider {
            Provider::Google { .. } => &self.google,
            _ => &self.objects,
        }
    }
}

impl CalendarBackend for Router {
    fn zone(&self, user: &str) -> (String, TimeZone) {
        self.pick(user).zone(user)
    }

    fn list(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        calendar: Option<String>,
    ) -> BoxFuture<'static, CalendarResult<Vec<CalendarEvent>>> {
        self.pick(user).list(user, from_ms, to_ms, calendar)
    }

    fn create(
        &self,
        user: &str,
        event: NewEvent,
    ) -> BoxFuture<'static, CalendarResult<CalendarEvent>> {
        self.pick(user).create(user, event)
    }

    fn update(
        &self,
        user: &str,
        id: String,
        patch: EventPatch,
    ) -> BoxFuture<'static, CalendarResult<CalendarEvent>> {
        self.pick(user).update(user, id, patch)
    }

    fn delete(&self, user: &str, id: String) -> BoxFuture<'static, CalendarResult<Deleted>> {
        self.pick(user).delete(user, id)
    }
}
