//! The calendar family's plug: the four tools over each user's provider — the local calendar
//! (`calendar.db`, opened on first use), a CalDAV server (one client per user, made on first
//! use, with the login the user entered on the settings page or else the operator's), or
//! Google Calendar (connected with `ringfence calendar connect google`). A router sends each
//! call to the backend of the caller's provider.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

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
            .value("user_allow_private", s.user_allow_private.clone())
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
        let accounts = Arc::new(Accounts::new(settings, env.data_dir, env.store.clone()));
        let stores = Arc::new(Stores::new(settings, env.store.clone(), accounts.clone()));
        let google = GoogleCalendar::new(accounts.clone(), settings.timeout).map_err(|e| {
            BuildError::new(family::FAMILY, format!("the Google Calendar client: {e}"))
        })?;
        let page = crate::page::CalendarPage {
            settings: settings.clone(),
            accounts,
            google: google.clone(),
            stores: stores.clone(),
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
pub(crate) struct Stores {
    settings: CalendarSettings,
    db: Lazy<dyn CalendarStore>,
    /// One CalDAV client per user (it keeps the calendars it found for a minute), for the
    /// login it was made with: a call finding another login kept (changed on the settings
    /// page, through this instance or another) makes a new one.
    caldav: Mutex<HashMap<String, CalDavStore>>,
    /// Where users' own logins are kept.
    accounts: Arc<Accounts>,
    /// The SSRF guard of the URLs users entered.
    pub(crate) guard: Arc<ringfence_net::Guard>,
}

impl Stores {
    pub(crate) fn new(
        settings: &CalendarSettings,
        store: Arc<SharedStore>,
        accounts: Arc<Accounts>,
    ) -> Stores {
        let path = settings.db_path.clone();
        Stores {
            settings: settings.clone(),
            db: Lazy::new(move || open(&store, &path)),
            caldav: Mutex::default(),
            guard: crate::login::guard(&settings.user_allow),
            accounts,
        }
    }

    /// Drops `user`'s CalDAV client (their login changed): the next call makes a new one.
    pub(crate) fn forget(&self, user: &str) {
        self.caldav
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(user);
    }

    /// `user`'s CalDAV account: the login they entered on the settings page, else the
    /// configured one; `true` when it is their own.
    fn caldav_account(
        &self,
        user: &str,
        url: &Option<url::Url>,
        username: &Option<String>,
        password: &Result<Option<String>, String>,
    ) -> CalendarResult<(CalDavAccount, bool)> {
        if let Some(own) = self.accounts.own_caldav(user)? {
            return Ok((
                CalDavAccount {
                    url: own.url,
                    username: Some(own.username),
                    password: Some(own.password),
                },
                true,
            ));
        }
        let how = "enter your CalDAV URL, username and password on your settings page (Calendar: `ringfence ui` on this machine, /settings on a shared server), or the operator sets [calendar] url, username and password_env (over HTTP per user in [calendar.users.<name>])";
        let url = url.clone().ok_or_else(|| {
            CalendarError::NotConnected(format!(
                "CalDAV calendar is not connected: no CalDAV server is set for you; {how}"
            ))
        })?;
        let password = password.clone().map_err(|why| {
            CalendarError::NotConnected(format!("CalDAV calendar is not connected: {why}; {how}"))
        })?;
        if username.is_some() && password.is_none() {
            return Err(CalendarError::NotConnected(format!(
                "CalDAV calendar is not connected: a username but no password is configured; {how}"
            )));
        }
        Ok((
            CalDavAccount {
                url,
                username: username.clone(),
                password,
            },
            false,
        ))
    }
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
                let (account, own) = self.caldav_account(user, url, username, password)?;
                let mut cache = self.caldav.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(s) = cache.get(user)
                    && s.is_for(&account, own)
                {
                    return Ok(Arc::new(s.clone()));
                }
                let s = if own {
                    CalDavStore::guarded(account, self.settings.timeout, self.guard.clone())?
                } else {
                    CalDavStore::new(account, self.settings.timeout)
                        .map_err(|e| CalendarError::Failed(e.to_string()))?
                };
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

/// Each user's Google account (the configured OAuth client) and where each user's logins
/// are kept — their Google connection and the CalDAV login they entered: a 0600 file of the
/// data directory (`calendar/<kind>-<user>.json`, the directory 0700), or the shared store's
/// credentials table with PostgreSQL.
#[derive(Debug)]
pub struct Accounts {
    settings: CalendarSettings,
    data_dir: std::path::PathBuf,
    store: Arc<SharedStore>,
    /// The credentials table, once opened (PostgreSQL).
    credentials: OnceLock<Arc<PgCredentials>>,
}

impl Accounts {
    pub fn new(settings: &CalendarSettings, data_dir: &Path, store: Arc<SharedStore>) -> Accounts {
        Accounts {
            settings: settings.clone(),
            data_dir: data_dir.to_owned(),
            store,
            credentials: OnceLock::new(),
        }
    }

    /// Where `user`'s login of `kind` (`google`, `caldav`) is kept.
    pub(crate) fn kept(
        &self,
        user: &str,
        kind: &'static str,
    ) -> CalendarResult<Arc<dyn TokenStore>> {
        let credentials = match self.credentials.get() {
            Some(c) => Some(c.clone()),
            None => self
                .store
                .open_shared("credentials table", |pg| {
                    Ok(Arc::new(PgCredentials::open(pg)?))
                })
                .map_err(|e| CalendarError::Failed(e.to_string()))?
                .inspect(|c| {
                    let _ = self.credentials.set(c.clone());
                }),
        };
        Ok(match credentials {
            Some(credentials) => Arc::new(SharedToken {
                credentials,
                user: user.to_owned(),
                kind,
            }),
            None => Arc::new(TokenFile(
                self.data_dir
                    .join("calendar")
                    .join(format!("{kind}-{}.json", ringfence_fs::user_dir_name(user))),
            )),
        })
    }

    /// The CalDAV login `user` entered on the settings page, if one is kept.
    pub(crate) fn own_caldav(&self, user: &str) -> CalendarResult<Option<crate::login::UserLogin>> {
        let kept = self.kept(user, crate::login::KIND)?;
        let Some(doc) = kept
            .load()
            .map_err(|e| CalendarError::Failed(format!("reading your CalDAV login failed: {e}")))?
        else {
            return Ok(None);
        };
        crate::login::from_doc(&doc).map(Some).map_err(|why| {
            CalendarError::NotConnected(format!(
                "CalDAV calendar is not connected: the CalDAV login kept for you cannot be used ({why}); enter it again on your settings page (Calendar)"
            ))
        })
    }
}

/// One user's login of one kind in the shared store.
#[derive(Debug)]
struct SharedToken {
    credentials: Arc<PgCredentials>,
    user: String,
    kind: &'static str,
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
            .load(&self.user, self.kind)
            .map_err(|e| self.failed("read", e))
    }

    fn save(&self, doc: &str) -> Result<(), TokenStoreError> {
        self.credentials
            .save(&self.user, self.kind, doc, ringfence_core::time::now_ms())
            .map_err(|e| self.failed("write", e))
    }

    fn remove(&self) -> Result<(), TokenStoreError> {
        self.credentials
            .remove(&self.user, self.kind)
            .map_err(|e| self.failed("remove", e))
    }

    fn take(&self) -> Result<Option<String>, TokenStoreError> {
        self.credentials
            .take(&self.user, self.kind)
            .map_err(|e| self.failed("take", e))
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
        let tokens = self.kept(user, "google")?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::login::{self, UserLogin};

    fn setup(toml: &str, dir: &Path) -> (Arc<Accounts>, Stores) {
        let settings: CalendarSettings =
            ringfence_core::plug::resolve_text(&CalendarPlug, toml, &[], dir).unwrap();
        let shared = Arc::new(SharedStore::default());
        let accounts = Arc::new(Accounts::new(&settings, dir, shared.clone()));
        let stores = Stores::new(&settings, shared, accounts.clone());
        (accounts, stores)
    }

    fn save(accounts: &Accounts, user: &str, url: &str, username: &str, password: &str) {
        let l = UserLogin {
            url: url::Url::parse(url).unwrap(),
            username: username.into(),
            password: password.into(),
        };
        accounts
            .kept(user, login::KIND)
            .unwrap()
            .save(&login::to_doc(&l, 0))
            .unwrap();
    }

    fn not_connected(r: CalendarResult<Arc<dyn ObjectStore>>) -> String {
        match r {
            Err(CalendarError::NotConnected(why)) => why,
            Err(e) => panic!("another error: {e}"),
            Ok(_) => panic!("connected"),
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // the test's own directory
    fn a_login_entered_takes_precedence_is_kept_0600_and_reaches_the_next_call() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let (accounts, stores) = setup(
            "[calendar]\nprovider = \"caldav\"\nurl = \"https://operator.example/dav/\"\nusername = \"op\"\npassword = \"op-pw\"\n",
            dir.path(),
        );
        let user = ringfence_core::LOCAL_USER;
        let Provider::CalDav {
            url,
            username,
            password,
        } = &stores.settings.account(user).provider
        else {
            panic!("not caldav")
        };
        let operator = stores
            .caldav_account(user, url, username, password)
            .unwrap();
        assert_eq!(
            (operator.0.url.as_str(), operator.1),
            ("https://operator.example/dav/", false)
        );
        stores.store(user).unwrap();
        let made = |stores: &Stores| stores.caldav.lock().unwrap().get(user).cloned().unwrap();
        assert!(made(&stores).is_for(&operator.0, false));

        save(
            &accounts,
            user,
            "https://dav.example.org/me/",
            "me",
            "my-pw",
        );
        let path = dir.path().join("calendar").join("caldav-local.json");
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("calendar")), 0o700);
        assert!(
            !dir.path()
                .join("calendar")
                .join("caldav-local.partial")
                .exists()
        );
        let own = stores
            .caldav_account(user, url, username, password)
            .unwrap();
        assert_eq!(
            (
                own.0.url.as_str(),
                own.0.username.as_deref(),
                own.0.password.as_deref(),
                own.1
            ),
            (
                "https://dav.example.org/me/",
                Some("me"),
                Some("my-pw"),
                true
            )
        );
        // The cached client was made for the operator's login: the next call makes one for
        // the login now kept, without being told (another instance saved it, say).
        stores.store(user).unwrap();
        assert!(made(&stores).is_for(&own.0, true));
        // Forgotten: the operator's login again.
        accounts.kept(user, login::KIND).unwrap().remove().unwrap();
        assert!(!path.exists());
        stores.store(user).unwrap();
        assert!(made(&stores).is_for(&operator.0, false));
        // Another user's login is not this one's.
        save(
            &accounts,
            "bob",
            "https://dav.example.org/bob/",
            "bob",
            "bob-pw",
        );
        assert_eq!(accounts.own_caldav(user).unwrap(), None);
        assert!(
            stores
                .caldav_account(user, url, username, password)
                .unwrap()
                .0
                .username
                .as_deref()
                == Some("op")
        );
    }

    #[test]
    fn with_caldav_alone_each_user_brings_their_own_and_other_providers_ignore_one() {
        let dir = tempfile::tempdir().unwrap();
        let (accounts, stores) = setup(
            "[calendar]\nprovider = \"caldav\"\n[calendar.users.carol]\nprovider = \"local\"\n",
            dir.path(),
        );
        for user in ["alice", "bob", ringfence_core::LOCAL_USER] {
            let why = not_connected(stores.store(user));
            assert!(why.contains("settings page"), "{why}");
        }
        save(
            &accounts,
            "alice",
            "https://dav.example.org/a/",
            "alice",
            "pw",
        );
        assert!(stores.store("alice").is_ok());
        assert!(not_connected(stores.store("bob")).contains("settings page"));
        // Carol's calendar is the local one: a CalDAV login kept for her changes nothing.
        save(
            &accounts,
            "carol",
            "https://dav.example.org/c/",
            "carol",
            "pw",
        );
        assert_eq!(stores.store("carol").unwrap().provider(), "Local");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_private_address_is_refused_when_connecting_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let (accounts, stores) = setup("[calendar]\nprovider = \"caldav\"\n", dir.path());
        // Kept by hand (the page refuses these): refused before any request.
        for (url, says) in [
            ("http://127.0.0.1:9/", "loopback"),
            ("http://169.254.169.254/latest/", "link-local"),
            ("http://[::ffff:10.0.0.1]/", "private-network"),
        ] {
            save(&accounts, "alice", url, "alice", "pw");
            let why = not_connected(stores.store("alice"));
            assert!(
                why.contains(says) && why.contains("user_allow_private"),
                "{url}: {why}"
            );
        }
        // A name is checked when the client connects, as it resolves then.
        save(&accounts, "alice", "http://localhost:9/", "alice", "pw");
        let store = stores.store("alice").unwrap();
        let err = store.calendars().await.unwrap_err();
        assert!(
            matches!(&err, CalendarError::NotConnected(w) if w.contains("not a public server")),
            "{err}"
        );
        // Allowed by the operator: the request is sent (and nothing listens there).
        let (accounts, stores) = setup(
            "[calendar]\nprovider = \"caldav\"\nuser_allow_private = [\"127.0.0.1\", \"localhost\"]\n",
            dir.path(),
        );
        save(&accounts, "alice", "http://localhost:9/", "alice", "pw");
        let err = stores
            .store("alice")
            .unwrap()
            .calendars()
            .await
            .unwrap_err();
        assert!(
            matches!(&err, CalendarError::Failed(w) if w.contains("could not be reached")),
            "{err}"
        );
    }
}
