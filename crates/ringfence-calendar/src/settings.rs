//! `[calendar]`: which provider holds a user's calendars (`local`, `caldav`, `google`), how
//! to reach it, and the user's time zone — a default, and per user over HTTP
//! (`[calendar.users.<name>]`, each field falling back to the default's).
//!
//! Missing credentials do not stop the server: the tools answer "CalDAV calendar is not
//! connected" with what to set, as seed 003 words it for Google.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ringfence_core::plug::{SectionInput, SettingsError, zone_setting};
use ringfence_core::time::{TimeZone, system_zone};
use serde::Deserialize;

pub const SECTION: &str = "calendar";

/// The family's part of the personal configuration `ringfence init` writes: every line a
/// comment, `# ` before a setting (remove it to use the setting), `## ` before prose.
pub const SAMPLE: &str = r#"## Calendar: list, create, update and delete events. "local" keeps them in the data
## directory; "google" needs `ringfence calendar connect google` once; "caldav" any CalDAV
## server (Nextcloud, Fastmail, iCloud, …). With "caldav", each person may also enter their
## own server and login on their settings page (`ringfence ui`, or /settings over HTTP),
## which then comes first for them; with no url here, that is how each person connects.
# [calendar]
# provider = "caldav"              # local (default) | google | caldav
# timezone = "America/New_York"    # default: the system's zone
# url = "https://dav.example.org/alice/"
# username = "alice"
# password_env = "RINGFENCE_CALDAV_PASSWORD"   # the variable holding the password
# user_allow_private = ["10.1.2.0/24"]   # private servers people's own CalDAV URLs may reach"#;

/// `[calendar]` as written, and each `[calendar.users.<name>]` (the same keys, less
/// `timeout_secs`, `user_allow_private` and `users`, which belong to the whole section).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct AccountTable {
    /// local (default) | caldav | google
    provider: Option<String>,
    /// CalDAV: the server, principal or calendar URL.
    url: Option<String>,
    username: Option<String>,
    password: Option<String>,
    password_env: Option<String>,
    /// IANA name; default: the system zone.
    timezone: Option<String>,
    /// Google: the OAuth client (a "Desktop app" client of the user's Google Cloud project).
    client_id: Option<String>,
    client_secret: Option<String>,
    client_secret_env: Option<String>,
    /// Google's endpoints, for a proxy or a test stand-in.
    google_auth_url: Option<String>,
    google_token_url: Option<String>,
    google_api_url: Option<String>,
    /// How long one request to a calendar server may take (default 30 s).
    timeout_secs: Option<u64>,
    /// Non-public networks, addresses and host names a CalDAV URL a user entered on the
    /// settings page may reach (as `[web] allow_private`).
    user_allow_private: Option<Vec<String>>,
    users: Option<BTreeMap<String, AccountTable>>,
}

/// Where a user's calendars are.
#[derive(Clone, PartialEq, Eq)]
pub enum Provider {
    Local,
    /// The default account is the local user's login; this user has no table of their own.
    NotForUser,
    CalDav {
        url: Option<url::Url>,
        username: Option<String>,
        /// The password, or why there is none (the variable named is not set).
        password: Result<Option<String>, String>,
    },
    Google {
        client_id: Option<String>,
        /// The client secret, or why there is none (the variable named is not set).
        client_secret: Result<Option<String>, String>,
        endpoints: crate::google::Endpoints,
    },
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Provider::Local => f.write_str("Local"),
            Provider::NotForUser => f.write_str("NotForUser"),
            Provider::Google { client_id, .. } => f
                .debug_struct("Google")
                .field("client_id", client_id)
                .field("client_secret", &"<redacted>")
                .finish(),
            Provider::CalDav { url, username, .. } => f
                .debug_struct("CalDav")
                .field("url", &url.as_ref().map(|u| u.as_str()))
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
        }
    }
}

/// One user's (or the default) calendar settings.
#[derive(Debug, Clone)]
pub struct Account {
    pub provider: Provider,
    pub zone_name: String,
    pub zone: TimeZone,
}

/// The resolved `[calendar]`.
#[derive(Debug, Clone)]
pub struct CalendarSettings {
    pub default: Account,
    /// What a user without a table gets when the default is someone's login.
    unconfigured: Account,
    pub users: BTreeMap<String, Account>,
    pub timeout: Duration,
    /// `calendar.db` under the data directory (the local provider).
    pub db_path: PathBuf,
    /// `user_allow_private` as written (for `doctor`).
    pub user_allow_private: Vec<String>,
    /// What a CalDAV URL a user entered may reach besides the public internet.
    pub user_allow: ringfence_net::AllowList,
}

impl CalendarSettings {
    pub fn resolve(input: &SectionInput<'_>) -> Result<CalendarSettings, SettingsError> {
        let mut base: AccountTable = input.table(SECTION)?;
        let timeout = match base.timeout_secs {
            None => Duration::from_secs(30),
            Some(n @ 1..=300) => Duration::from_secs(n),
            Some(n) => {
                return Err(SettingsError::invalid(
                    format!("{SECTION}.timeout_secs"),
                    format!("{n} is out of range: 1 to 300"),
                ));
            }
        };
        let user_allow_private = base.user_allow_private.take().unwrap_or_default();
        let user_allow = ringfence_net::AllowList::parse(&user_allow_private).map_err(|e| {
            SettingsError::invalid(
                format!("{SECTION}.user_allow_private"),
                format!("{e}; list networks (10.1.2.0/24), addresses or host names"),
            )
        })?;
        let default = account(input, SECTION, &base, None)?;
        let mut users = BTreeMap::new();
        for (name, u) in base.users.take().unwrap_or_default() {
            let prefix = format!("{SECTION}.users.{name}");
            for (key, set) in [
                ("timeout_secs", u.timeout_secs.is_some()),
                ("user_allow_private", u.user_allow_private.is_some()),
                ("users", u.users.is_some()),
            ] {
                if set {
                    return Err(SettingsError::invalid(
                        format!("{prefix}.{key}"),
                        format!("belongs to [{SECTION}] itself, not to one user"),
                    ));
                }
            }
            // The server and the OAuth client may be shared; a login never is: a user's
            // table gives their own username and password, or has none.
            let merged = AccountTable {
                provider: u.provider.or(base.provider.clone()),
                url: u.url.or(base.url.clone()),
                username: u.username,
                password: u.password,
                password_env: u.password_env,
                timezone: u.timezone,
                client_id: u.client_id.or(base.client_id.clone()),
                client_secret: u.client_secret.or(base.client_secret.clone()),
                client_secret_env: u.client_secret_env.or(base.client_secret_env.clone()),
                google_auth_url: u.google_auth_url.or(base.google_auth_url.clone()),
                google_token_url: u.google_token_url.or(base.google_token_url.clone()),
                google_api_url: u.google_api_url.or(base.google_api_url.clone()),
                timeout_secs: None,
                user_allow_private: None,
                users: None,
            };
            users.insert(name, account(input, &prefix, &merged, Some(&default))?);
        }
        let unconfigured = Account {
            provider: Provider::NotForUser,
            zone_name: default.zone_name.clone(),
            zone: default.zone.clone(),
        };
        Ok(CalendarSettings {
            unconfigured,
            default,
            users,
            timeout,
            db_path: input.data_dir.join("calendar.db"),
            user_allow_private,
            user_allow,
        })
    }

    /// A user's settings: their own table; else the default — which holds a login (CalDAV)
    /// or a Google connection only for the local user: another user without a table of
    /// their own gets "not connected", never the operator's calendar. A CalDAV default with
    /// neither a URL nor a login (`provider = "caldav"` alone) is everyone's: each person
    /// enters their own login on the settings page.
    pub fn account(&self, user: &str) -> &Account {
        if let Some(own) = self.users.get(user) {
            return own;
        }
        match &self.default.provider {
            Provider::Local => &self.default,
            Provider::CalDav {
                url: None,
                username: None,
                password: Ok(None),
            } => &self.default,
            _ if user == ringfence_core::LOCAL_USER => &self.default,
            _ => &self.unconfigured,
        }
    }
}

fn account(
    input: &SectionInput<'_>,
    prefix: &str,
    t: &AccountTable,
    default: Option<&Account>,
) -> Result<Account, SettingsError> {
    let key = |k: &str| format!("{prefix}.{k}");
    let (zone_name, zone) = match (t.timezone.as_deref(), default) {
        (Some(name), _) => (
            name.trim().to_owned(),
            zone_setting(&key("timezone"), name)?,
        ),
        (None, Some(d)) => (d.zone_name.clone(), d.zone.clone()),
        (None, None) => system_zone(),
    };
    let provider = match t.provider.as_deref().map(str::trim).unwrap_or("local") {
        "local" => Provider::Local,
        "google" => {
            let mut endpoints = crate::google::Endpoints::default();
            for (k, v, slot) in [
                ("google_auth_url", &t.google_auth_url, &mut endpoints.auth),
                (
                    "google_token_url",
                    &t.google_token_url,
                    &mut endpoints.token,
                ),
                ("google_api_url", &t.google_api_url, &mut endpoints.api),
            ] {
                if let Some(v) = v {
                    let mut u = url::Url::parse(v.trim())
                        .map_err(|e| SettingsError::invalid(key(k), format!("not a URL: {e}")))?;
                    if !matches!(u.scheme(), "http" | "https") {
                        return Err(SettingsError::invalid(key(k), "not http or https"));
                    }
                    if k == "google_api_url" && !u.path().ends_with('/') {
                        u.set_path(&format!("{}/", u.path()));
                    }
                    *slot = u;
                }
            }
            Provider::Google {
                client_id: t.client_id.clone(),
                client_secret: secret_or_why(
                    input,
                    &key("client_secret"),
                    &t.client_secret,
                    &t.client_secret_env,
                )?,
                endpoints,
            }
        }
        "caldav" => {
            let url = match t.url.as_deref() {
                None => None,
                Some(u) => {
                    let parsed = url::Url::parse(u.trim()).map_err(|e| {
                        SettingsError::invalid(key("url"), format!("not a URL: {e}"))
                    })?;
                    if !matches!(parsed.scheme(), "http" | "https") {
                        return Err(SettingsError::invalid(
                            key("url"),
                            format!("`{}:` is not http or https", parsed.scheme()),
                        ));
                    }
                    if !parsed.username().is_empty() || parsed.password().is_some() {
                        return Err(SettingsError::invalid(
                            key("url"),
                            "put the login in username and password (or password_env), not in the URL",
                        ));
                    }
                    Some(parsed)
                }
            };
            let password = secret_or_why(input, &key("password"), &t.password, &t.password_env)?;
            Provider::CalDav {
                url,
                username: t.username.clone(),
                password,
            }
        }
        other => {
            return Err(SettingsError::invalid(
                key("provider"),
                format!("`{other}` is not a calendar provider; use local, caldav or google"),
            ));
        }
    };
    Ok(Account {
        provider,
        zone_name,
        zone,
    })
}

/// A secret given inline or by the variable `<key>_env` names: `Ok(None)` when neither is
/// given, `Err(why)` when the variable is not set (the tools say so; the start goes on).
fn secret_or_why(
    input: &SectionInput<'_>,
    key: &str,
    inline: &Option<String>,
    var: &Option<String>,
) -> Result<Result<Option<String>, String>, SettingsError> {
    Ok(match (inline, var) {
        (Some(_), Some(_)) => {
            return Err(SettingsError::invalid(
                key,
                format!("give the secret or the variable holding it ({key}_env), not both"),
            ));
        }
        (Some(p), None) => Ok(Some(p.clone())),
        (None, Some(v)) => match input.env.get(v).filter(|s| !s.is_empty()) {
            Some(p) => Ok(Some(p)),
            None => Err(format!("the variable {v} ({key}_env) is not set")),
        },
        (None, None) => Ok(None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str, env: &[(&str, &str)]) -> Result<CalendarSettings, String> {
        let dir = tempfile::tempdir().unwrap();
        ringfence_core::plug::resolve_text(&crate::CalendarPlug, toml, env, dir.path())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_documented_configuration_resolves_per_user() {
        let s = settings(
            r#"
[calendar]
provider = "caldav"
url = "https://dav.example.org/alice/"
username = "alice"
password_env = "RINGFENCE_CALDAV_PASSWORD"
timezone = "America/New_York"
[calendar.users.bob]
username = "bob"
password = "b0b"
timezone = "Europe/Berlin"
[calendar.users.carol]
provider = "local"
"#,
            &[("RINGFENCE_CALDAV_PASSWORD", "s3cret")],
        )
        .unwrap();
        // The default's login is the local user's; alice over HTTP needs a table of her own.
        assert_eq!(s.account("alice").provider, Provider::NotForUser);
        assert_eq!(s.account("dave").provider, Provider::NotForUser);
        let Provider::CalDav {
            url,
            username,
            password,
        } = &s.account("local").provider
        else {
            panic!("not caldav")
        };
        assert_eq!(
            url.as_ref().unwrap().as_str(),
            "https://dav.example.org/alice/"
        );
        assert_eq!(
            (username.as_deref(), password.clone()),
            (Some("alice"), Ok(Some("s3cret".into())))
        );
        assert_eq!(s.account("local").zone_name, "America/New_York");
        let Provider::CalDav {
            username, password, ..
        } = &s.account("bob").provider
        else {
            panic!("not caldav")
        };
        assert_eq!(
            (username.as_deref(), password.clone()),
            (Some("bob"), Ok(Some("b0b".into())))
        );
        assert_eq!(s.account("bob").zone_name, "Europe/Berlin");
        assert_eq!(s.account("carol").provider, Provider::Local);
        assert_eq!(s.account("carol").zone_name, "America/New_York");
        assert!(!format!("{s:?}").contains("s3cret") && !format!("{s:?}").contains("b0b"));
    }

    #[test]
    fn mistakes_name_the_key_and_missing_credentials_wait_for_the_call() {
        assert!(settings("", &[]).unwrap().default.provider == Provider::Local);
        for (toml, key) in [
            ("[calendar]\nprovider = \"outlook\"\n", "calendar.provider"),
            (
                "[calendar]\nprovider = \"caldav\"\nurl = \"ftp://x\"\n",
                "calendar.url",
            ),
            (
                "[calendar]\nprovider = \"caldav\"\nurl = \"https://a:b@x/\"\n",
                "calendar.url",
            ),
            (
                "[calendar]\ntimezone = \"Mars/Olympus\"\n",
                "calendar.timezone",
            ),
            ("[calendar]\ntimeout_secs = 0\n", "calendar.timeout_secs"),
            ("[calendar]\ncolour = \"red\"\n", "colour"),
            (
                "[calendar.users.bob]\ntimeout_secs = 5\n",
                "calendar.users.bob.timeout_secs",
            ),
        ] {
            let e = settings(toml, &[]).unwrap_err();
            assert!(e.contains(key), "{toml}: {e}");
        }
        let s = settings(
            "[calendar]\nprovider = \"caldav\"\npassword_env = \"NOPE\"\n",
            &[],
        )
        .unwrap();
        let Provider::CalDav { password, .. } = &s.default.provider else {
            panic!("not caldav")
        };
        assert!(password.as_ref().unwrap_err().contains("NOPE"));
    }

    #[test]
    fn users_own_caldav_urls_may_reach_only_what_the_operator_allows() {
        let s = settings(
            "[calendar]\nprovider = \"caldav\"\nuser_allow_private = [\"127.0.0.1\", \"10.1.2.0/24\", \"dav.internal.example\"]\n",
            &[],
        )
        .unwrap();
        assert_eq!(s.user_allow_private.len(), 3);
        assert!(!s.user_allow.is_empty());
        use ringfence_core::plug::FamilyPlug;
        let shown = crate::CalendarPlug.shown(&s);
        assert!(
            shown.0.iter().any(|(k, v)| k == "user_allow_private"
                && v.contains("10.1.2.0/24")
                && v.contains("dav.internal.example")),
            "{shown:?}"
        );
        // The sample, every setting uncommented, resolves.
        let uncommented: String = SAMPLE
            .lines()
            .map(|l| l.strip_prefix("# ").unwrap_or(l))
            .collect::<Vec<_>>()
            .join("\n");
        let s = settings(&uncommented, &[("RINGFENCE_CALDAV_PASSWORD", "p")]).unwrap();
        assert_eq!(s.user_allow_private, ["10.1.2.0/24"]);
        assert!(settings("", &[]).unwrap().user_allow.is_empty());
        for (toml, key) in [
            (
                "[calendar]\nuser_allow_private = [\"10.0.0.0/99\"]\n",
                "calendar.user_allow_private",
            ),
            (
                "[calendar]\nuser_allow_private = [\"\"]\n",
                "calendar.user_allow_private",
            ),
            (
                "[calendar.users.bob]\nuser_allow_private = [\"127.0.0.1\"]\n",
                "calendar.users.bob.user_allow_private",
            ),
        ] {
            let e = settings(toml, &[]).unwrap_err();
            assert!(e.contains(key), "{toml}: {e}");
        }
    }

    #[test]
    fn caldav_without_a_server_or_login_is_everyones_to_bring_their_own() {
        // Only `provider = "caldav"`: every user has CalDAV, with nothing configured.
        let s = settings("[calendar]\nprovider = \"caldav\"\n", &[]).unwrap();
        let nothing = Provider::CalDav {
            url: None,
            username: None,
            password: Ok(None),
        };
        for user in ["alice", "dave", ringfence_core::LOCAL_USER] {
            assert_eq!(s.account(user).provider, nothing, "{user}");
        }
        // A server or a login configured is the local user's, as before.
        for toml in [
            "[calendar]\nprovider = \"caldav\"\nurl = \"https://dav.example.org/\"\n",
            "[calendar]\nprovider = \"caldav\"\nusername = \"op\"\n",
            "[calendar]\nprovider = \"caldav\"\npassword_env = \"NOPE\"\n",
        ] {
            let s = settings(toml, &[]).unwrap();
            assert_eq!(s.account("alice").provider, Provider::NotForUser, "{toml}");
            assert!(matches!(
                s.account(ringfence_core::LOCAL_USER).provider,
                Provider::CalDav { .. }
            ));
        }
    }
}
