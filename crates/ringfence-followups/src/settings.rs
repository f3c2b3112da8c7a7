//! `[followups]`: whether due follow-ups are delivered (proactive messages), in which time
//! zone and outside which quiet hours, per user where it differs, and through which
//! channels — the table as written, then resolved. `RINGFENCE_FOLLOWUPS_PROACTIVE`
//! overrides `proactive`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ringfence_core::plug::{SectionInput, SettingsError, zone_setting};
use ringfence_core::time::{self, TimeZone};
use serde::Deserialize;

use crate::QuietHours;
use crate::store::Choices;

/// The family's table in the configuration file.
pub const SECTION: &str = "followups";

/// The family's part of the personal configuration `ringfence init` writes: every line a
/// comment, `# ` before a setting (remove it to use the setting), `## ` before prose.
pub const SAMPLE: &str = r#"## Follow-ups: "I'll check in on that later" — delivered when due, while `ringfence serve`
## or `ringfence scheduler` runs. Nothing is delivered until proactive messages are on.
# [followups]
# proactive = true                 # RINGFENCE_FOLLOWUPS_PROACTIVE=true
# timezone = "Europe/Berlin"       # default: the system's zone
# quiet_hours = "22:00-07:00"      # held until they end
# user_choices = false             # people may not change these on their settings page
## Where they go. Without any channel listed, to the connected MCP client only; webhook,
## command and email channels: docs/followups.md.
# [[followups.channels]]
# kind = "desktop"                 # a desktop notification (the session bus)
# [[followups.channels]]
# kind = "mcp"                     # the connected MCP client"#;
/// `true` turns delivery on (over `[followups] proactive`).
pub const RINGFENCE_FOLLOWUPS_PROACTIVE: &str = "RINGFENCE_FOLLOWUPS_PROACTIVE";
/// The variables this family reads.
pub const ENV_VARS: &[&str] = &[RINGFENCE_FOLLOWUPS_PROACTIVE];

/// `[followups]`, as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct FollowupsTable {
    /// Deliver due follow-ups at all (default false); per user in `users`.
    proactive: Option<bool>,
    /// IANA name; default: the system's zone.
    timezone: Option<String>,
    /// `HH:MM-HH:MM`; none by default.
    quiet_hours: Option<String>,
    /// Whether each person's own choices on their settings page count (default true).
    user_choices: Option<bool>,
    /// Delivery attempts before a follow-up is marked failed (default 5).
    max_attempts: Option<u32>,
    /// How long a scheduler's claim holds before another may take the follow-up over, if
    /// the claimant died (default 120 s).
    lease_secs: Option<u64>,
    channels: Option<Vec<ChannelTable>>,
    users: Option<BTreeMap<String, UserTable>>,
}

/// `[followups.users.<name>]`: one user's differences.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct UserTable {
    proactive: Option<bool>,
    timezone: Option<String>,
    /// `""` turns the default quiet hours off for this user.
    quiet_hours: Option<String>,
    /// Where the `email` channel writes to this user.
    email: Option<String>,
}

/// `[[followups.channels]]`, as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChannelTable {
    /// webhook | command | email | desktop | mcp
    kind: String,
    /// Only these users' follow-ups (default: everyone's).
    users: Option<Vec<String>>,
    // webhook
    url: Option<String>,
    secret: Option<String>,
    secret_env: Option<String>,
    // command
    command: Option<Vec<String>>,
    timeout_secs: Option<u64>,
    // email
    smtp_host: Option<String>,
    smtp_port: Option<u16>,
    /// STARTTLS on the submission port (default true); false is refused unless the host is
    /// loopback.
    starttls: Option<bool>,
    username: Option<String>,
    password: Option<String>,
    password_env: Option<String>,
    from: Option<String>,
    /// The address for every user (default: each user's `email`).
    to: Option<String>,
}

/// How a channel reaches the user.
#[derive(Clone, PartialEq, Eq)]
pub enum ChannelKind {
    /// POST of the delivery document, signed with HMAC-SHA256 over the body.
    Webhook {
        url: String,
        secret: String,
        timeout: Duration,
    },
    /// A program with the document on stdin.
    Command {
        argv: Vec<String>,
        timeout: Duration,
    },
    /// A mail through an SMTP server.
    Email(EmailChannel),
    /// A desktop notification through the session bus's notification service.
    Desktop { timeout: Duration },
    /// The user's connected MCP sessions.
    Mcp,
}

impl std::fmt::Debug for ChannelKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChannelKind::Webhook { url, timeout, .. } => f
                .debug_struct("Webhook")
                // The host only: a chat webhook's path is its secret.
                .field(
                    "url",
                    &url::Url::parse(url)
                        .ok()
                        .and_then(|u| u.host_str().map(str::to_owned)),
                )
                .field("secret", &"<redacted>")
                .field("timeout", timeout)
                .finish(),
            ChannelKind::Command { argv, timeout } => f
                .debug_struct("Command")
                .field("argv", argv)
                .field("timeout", timeout)
                .finish(),
            ChannelKind::Desktop { timeout } => {
                f.debug_struct("Desktop").field("timeout", timeout).finish()
            }
            ChannelKind::Email(e) => f
                .debug_struct("Email")
                .field("host", &e.host)
                .field("port", &e.port)
                .field("from", &e.from)
                .finish(),
            ChannelKind::Mcp => f.write_str("Mcp"),
        }
    }
}

/// An SMTP submission channel.
#[derive(Clone, PartialEq, Eq)]
pub struct EmailChannel {
    pub host: String,
    pub port: u16,
    pub starttls: bool,
    pub credentials: Option<(String, String)>,
    pub from: String,
    /// `None`: each user's configured address.
    pub to: Option<String>,
    pub timeout: Duration,
}

/// A resolved channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    pub kind: ChannelKind,
    /// `None`: every user.
    pub users: Option<Vec<String>>,
}

impl Channel {
    pub fn name(&self) -> &'static str {
        match self.kind {
            ChannelKind::Webhook { .. } => "webhook",
            ChannelKind::Command { .. } => "command",
            ChannelKind::Email(_) => "email",
            ChannelKind::Desktop { .. } => "desktop",
            ChannelKind::Mcp => "mcp",
        }
    }

    /// The longest a delivery through this channel may take.
    pub fn timeout(&self) -> Duration {
        match &self.kind {
            ChannelKind::Webhook { timeout, .. } | ChannelKind::Command { timeout, .. } => *timeout,
            ChannelKind::Email(e) => e.timeout,
            ChannelKind::Desktop { timeout } => *timeout,
            ChannelKind::Mcp => Duration::from_secs(10),
        }
    }

    pub fn serves(&self, user: &str) -> bool {
        self.users
            .as_ref()
            .is_none_or(|u| u.iter().any(|n| n == user))
    }
}

/// One user's differences from the defaults.
#[derive(Debug, Clone, Default)]
pub struct UserSettings {
    pub proactive: Option<bool>,
    pub zone: Option<(String, TimeZone)>,
    /// `Some(None)`: no quiet hours for this user.
    pub quiet_hours: Option<Option<QuietHours>>,
    pub email: Option<String>,
}

/// The resolved `[followups]` settings.
#[derive(Debug, Clone)]
pub struct FollowupSettings {
    pub proactive: bool,
    /// Each person's own choices (the settings page) count over these.
    pub user_choices: bool,
    /// Where `proactive` came from, for the hint how to turn it on.
    pub zone_name: String,
    pub zone: TimeZone,
    pub quiet_hours: Option<QuietHours>,
    pub max_attempts: i64,
    pub lease: Duration,
    pub channels: Vec<Channel>,
    pub users: BTreeMap<String, UserSettings>,
    /// `followups.db` under the data directory.
    pub db_path: PathBuf,
}

impl FollowupSettings {
    pub fn resolve(input: &SectionInput<'_>) -> Result<FollowupSettings, SettingsError> {
        let t: FollowupsTable = input.table(SECTION)?;
        let key = |k: &str| format!("{SECTION}.{k}");
        let proactive = input
            .flag(RINGFENCE_FOLLOWUPS_PROACTIVE)?
            .unwrap_or(t.proactive.unwrap_or(false));
        let (zone_name, zone) = match t.timezone.as_deref() {
            Some(name) => (
                name.trim().to_owned(),
                zone_setting(&key("timezone"), name)?,
            ),
            None => time::system_zone(),
        };
        let quiet_hours = parse_quiet(&key("quiet_hours"), t.quiet_hours.as_deref())?;
        let max_attempts = match t.max_attempts {
            None => 5,
            Some(n @ 1..=100) => i64::from(n),
            Some(n) => {
                return Err(SettingsError::invalid(
                    key("max_attempts"),
                    format!("{n} is out of range: 1 to 100"),
                ));
            }
        };
        let lease = match t.lease_secs {
            None => Duration::from_secs(120),
            Some(n @ 5..=3600) => Duration::from_secs(n),
            Some(n) => {
                return Err(SettingsError::invalid(
                    key("lease_secs"),
                    format!("{n} is out of range: 5 to 3600"),
                ));
            }
        };
        let mut users = BTreeMap::new();
        for (name, u) in t.users.unwrap_or_default() {
            let k = |f: &str| format!("{SECTION}.users.{name}.{f}");
            let zone = match u.timezone.as_deref() {
                Some(z) => Some((z.trim().to_owned(), zone_setting(&k("timezone"), z)?)),
                None => None,
            };
            let quiet = match u.quiet_hours.as_deref() {
                None => None,
                Some(q) => Some(parse_quiet(&k("quiet_hours"), Some(q))?),
            };
            if let Some(e) = &u.email
                && !looks_like_address(e)
            {
                return Err(SettingsError::invalid(
                    k("email"),
                    format!("`{e}` is not an e-mail address"),
                ));
            }
            users.insert(
                name,
                UserSettings {
                    proactive: u.proactive,
                    zone,
                    quiet_hours: quiet,
                    email: u.email,
                },
            );
        }
        let mut channels = Vec::new();
        for (i, c) in t.channels.unwrap_or_default().into_iter().enumerate() {
            channels.push(resolve_channel(input, i, c, &users)?);
        }
        // A claim must outlast any delivery, or a slow one could be taken over and sent twice.
        if let Some(slowest) = channels.iter().map(Channel::timeout).max()
            && slowest >= lease
        {
            return Err(SettingsError::invalid(
                key("lease_secs"),
                format!(
                    "{} s is not longer than a channel's timeout_secs ({} s): a slow delivery could be claimed again and sent twice; raise lease_secs or lower the timeout",
                    lease.as_secs(),
                    slowest.as_secs()
                ),
            ));
        }
        // The MCP channel is on whenever delivery is, unless an operator listed it already.
        if !channels.iter().any(|c| c.kind == ChannelKind::Mcp) {
            channels.push(Channel {
                kind: ChannelKind::Mcp,
                users: None,
            });
        }
        Ok(FollowupSettings {
            proactive,
            user_choices: t.user_choices.unwrap_or(true),
            zone_name,
            zone,
            quiet_hours,
            max_attempts,
            lease,
            channels,
            users,
            db_path: input.data_dir.join("followups.db"),
        })
    }

    /// Whether anyone's follow-ups are delivered (the default, or a user's override).
    pub fn delivers_for_anyone(&self) -> bool {
        self.proactive || self.users.values().any(|u| u.proactive == Some(true))
    }

    /// `user`'s time zone (their own, else the default) and its name.
    pub fn zone_of(&self, user: &str) -> (String, TimeZone) {
        self.users
            .get(user)
            .and_then(|u| u.zone.clone())
            .unwrap_or_else(|| (self.zone_name.clone(), self.zone.clone()))
    }

    /// Whether `user`'s follow-ups are delivered.
    pub fn proactive_for(&self, user: &str) -> bool {
        self.users
            .get(user)
            .and_then(|u| u.proactive)
            .unwrap_or(self.proactive)
    }

    /// `user`'s quiet hours (their own, else the default).
    pub fn quiet_hours_of(&self, user: &str) -> Option<QuietHours> {
        self.users
            .get(user)
            .and_then(|u| u.quiet_hours)
            .unwrap_or(self.quiet_hours)
    }

    /// These settings with each person's own choices (made on the settings page) over the
    /// configuration's (with `user_choices` off: the configuration's alone). A choice that no longer reads (a zone the system's time zone data
    /// lost) is passed over with a warning, and the configuration's applies.
    pub fn with_choices(&self, choices: &[(String, Choices)]) -> FollowupSettings {
        let mut s = self.clone();
        if !self.user_choices {
            return s;
        }
        for (user, c) in choices {
            let own = s.users.entry(user.clone()).or_default();
            if let Some(p) = c.proactive {
                own.proactive = Some(p);
            }
            if let Some(name) = &c.timezone {
                match time::zone(name) {
                    Ok(zone) => own.zone = Some((name.clone(), zone)),
                    Err(e) => {
                        tracing::warn!(user = %user, zone = %name, error = %e, "a person's chosen time zone is not known here: the configured one applies")
                    }
                }
            }
            if let Some(q) = &c.quiet_hours {
                match parse_choice(q) {
                    Some(q) => own.quiet_hours = Some(q),
                    None => {
                        tracing::warn!(user = %user, quiet_hours = %q, "a person's chosen quiet hours do not read: the configured ones apply")
                    }
                }
            }
        }
        s
    }
}

/// Quiet hours as a person's choice keeps them: `""` for none, else `HH:MM-HH:MM`.
fn parse_choice(q: &str) -> Option<Option<QuietHours>> {
    if q.is_empty() {
        Some(None)
    } else {
        QuietHours::parse(q).map(Some)
    }
}

fn parse_quiet(key: &str, value: Option<&str>) -> Result<Option<QuietHours>, SettingsError> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => QuietHours::parse(v).map(Some).ok_or_else(|| {
            SettingsError::invalid(
                key,
                format!(
                    "`{v}` is not HH:MM-HH:MM (e.g. \"22:00-07:00\"), or the two times are equal"
                ),
            )
        }),
    }
}

fn looks_like_address(s: &str) -> bool {
    let s = s.trim();
    s.split_once('@')
        .is_some_and(|(l, d)| !l.is_empty() && d.contains('.') && !s.contains(char::is_whitespace))
}

/// A secret given in the file, or in the variable the file names.
fn secret(
    input: &SectionInput<'_>,
    key: &str,
    inline: Option<String>,
    var: Option<String>,
) -> Result<Option<String>, SettingsError> {
    match (inline, var) {
        (Some(_), Some(_)) => Err(SettingsError::invalid(
            key,
            "give the secret or the variable holding it (…_env), not both",
        )),
        (Some(s), None) => Ok(Some(s)),
        (None, Some(v)) => input
            .env
            .get(&v)
            .filter(|s| !s.is_empty())
            .map(Some)
            .ok_or_else(|| {
                SettingsError::invalid(key, format!("the variable {v} is not set or is empty"))
            }),
        (None, None) => Ok(None),
    }
}

fn resolve_channel(
    input: &SectionInput<'_>,
    i: usize,
    c: ChannelTable,
    users: &BTreeMap<String, UserSettings>,
) -> Result<Channel, SettingsError> {
    let key = |f: &str| format!("{SECTION}.channels[{i}].{f}");
    let kind_name = c.kind.trim().to_lowercase();
    // Keys that belong to another kind are refused, so a typo does not go unnoticed.
    let given: Vec<(&str, bool)> = vec![
        ("url", c.url.is_some()),
        ("secret", c.secret.is_some()),
        ("secret_env", c.secret_env.is_some()),
        ("command", c.command.is_some()),
        ("timeout_secs", c.timeout_secs.is_some()),
        ("smtp_host", c.smtp_host.is_some()),
        ("smtp_port", c.smtp_port.is_some()),
        ("starttls", c.starttls.is_some()),
        ("username", c.username.is_some()),
        ("password", c.password.is_some()),
        ("password_env", c.password_env.is_some()),
        ("from", c.from.is_some()),
        ("to", c.to.is_some()),
    ];
    let allowed: &[&str] = match kind_name.as_str() {
        "webhook" => &["url", "secret", "secret_env", "timeout_secs"],
        "command" => &["command", "timeout_secs"],
        "email" => &[
            "smtp_host",
            "smtp_port",
            "starttls",
            "username",
            "password",
            "password_env",
            "from",
            "to",
            "timeout_secs",
        ],
        "desktop" => &["timeout_secs"],
        "mcp" => &[],
        other => {
            return Err(SettingsError::invalid(
                key("kind"),
                format!(
                    "`{other}` is not a channel kind; use webhook, command, email, desktop or mcp"
                ),
            ));
        }
    };
    if let Some((k, _)) = given.iter().find(|(k, set)| *set && !allowed.contains(k)) {
        return Err(SettingsError::invalid(
            key(k),
            format!("is not a setting of a {kind_name} channel"),
        ));
    }
    let timeout = match c.timeout_secs {
        None => Duration::from_secs(30),
        Some(n @ 1..=300) => Duration::from_secs(n),
        Some(n) => {
            return Err(SettingsError::invalid(
                key("timeout_secs"),
                format!("{n} is out of range: 1 to 300"),
            ));
        }
    };
    let kind = match kind_name.as_str() {
        "webhook" => {
            let url = c
                .url
                .ok_or_else(|| SettingsError::invalid(key("url"), "a webhook channel needs url"))?;
            let parsed = url::Url::parse(url.trim())
                .map_err(|e| SettingsError::invalid(key("url"), format!("not a URL: {e}")))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(SettingsError::invalid(
                    key("url"),
                    format!("`{}:` is not http or https", parsed.scheme()),
                ));
            }
            let secret = secret(input, &key("secret"), c.secret, c.secret_env)?.ok_or_else(|| {
                SettingsError::invalid(
                    key("secret"),
                    "a webhook channel needs secret (or secret_env): the HMAC-SHA256 key receivers check the signature with",
                )
            })?;
            ChannelKind::Webhook {
                url: parsed.to_string(),
                secret,
                timeout,
            }
        }
        "command" => {
            let argv = c.command.unwrap_or_default();
            if argv.is_empty() || argv[0].trim().is_empty() {
                return Err(SettingsError::invalid(
                    key("command"),
                    "a command channel needs command = [\"program\", \"arg\", …]",
                ));
            }
            ChannelKind::Command { argv, timeout }
        }
        "email" => {
            let host = c.smtp_host.ok_or_else(|| {
                SettingsError::invalid(key("smtp_host"), "an email channel needs smtp_host")
            })?;
            let from = c.from.ok_or_else(|| {
                SettingsError::invalid(key("from"), "an email channel needs from")
            })?;
            if !looks_like_address(&from) {
                return Err(SettingsError::invalid(
                    key("from"),
                    format!("`{from}` is not an e-mail address"),
                ));
            }
            if let Some(to) = &c.to
                && !looks_like_address(to)
            {
                return Err(SettingsError::invalid(
                    key("to"),
                    format!("`{to}` is not an e-mail address"),
                ));
            }
            let starttls = c.starttls.unwrap_or(true);
            let loopback = matches!(host.trim(), "localhost" | "127.0.0.1" | "::1");
            if !starttls && !loopback {
                return Err(SettingsError::invalid(
                    key("starttls"),
                    "mail would cross the network unencrypted: starttls = false is only allowed for a server on loopback",
                ));
            }
            let password = secret(input, &key("password"), c.password, c.password_env)?;
            let credentials = match (c.username, password) {
                (Some(u), Some(p)) => Some((u, p)),
                (None, None) => None,
                _ => {
                    return Err(SettingsError::invalid(
                        key("username"),
                        "give both username and password (or password_env), or neither",
                    ));
                }
            };
            if c.to.is_none() {
                let listed: Vec<&String> = match &c.users {
                    Some(u) => u.iter().collect(),
                    None => users.keys().collect(),
                };
                if let Some(u) = listed
                    .into_iter()
                    .find(|u| users.get(*u).and_then(|s| s.email.as_ref()).is_none())
                {
                    return Err(SettingsError::invalid(
                        key("to"),
                        format!("user {u} has no address: set to, or followups.users.{u}.email"),
                    ));
                }
            }
            ChannelKind::Email(EmailChannel {
                host: host.trim().to_owned(),
                port: c.smtp_port.unwrap_or(587),
                starttls,
                credentials,
                from,
                to: c.to,
                timeout,
            })
        }
        "desktop" => ChannelKind::Desktop { timeout },
        _ => ChannelKind::Mcp,
    };
    Ok(Channel {
        kind,
        users: c.users,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(toml: &str, env: &[(&str, &str)]) -> Result<FollowupSettings, String> {
        let dir = tempfile::tempdir().unwrap();
        ringfence_core::plug::resolve_text(&crate::FollowupsPlug, toml, env, dir.path())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_off_with_the_mcp_channel() {
        let s = settings("log = \"info\"\n", &[]).unwrap();
        assert!(!s.proactive);
        assert_eq!(s.max_attempts, 5);
        assert_eq!(s.channels.len(), 1);
        assert_eq!(s.channels[0].kind, ChannelKind::Mcp);
        assert!(s.db_path.ends_with("followups.db"));
        let on = settings(
            "log = \"info\"\n",
            &[(RINGFENCE_FOLLOWUPS_PROACTIVE, "true")],
        )
        .unwrap();
        assert!(on.proactive);
    }

    #[test]
    fn the_documented_configuration_resolves() {
        let s = settings(
            r#"
[followups]
proactive = true
timezone = "Europe/Berlin"
quiet_hours = "22:00-07:00"
[[followups.channels]]
kind = "webhook"
url = "https://hooks.example.org/ringfence"
secret_env = "HOOK_KEY"
[[followups.channels]]
kind = "command"
command = ["notify-send", "ringfence"]
[followups.users.bob]
proactive = false
timezone = "America/New_York"
quiet_hours = ""
"#,
            &[("HOOK_KEY", "k3y")],
        )
        .unwrap();
        assert!(s.proactive);
        assert_eq!(s.zone_name, "Europe/Berlin");
        assert_eq!(s.quiet_hours.unwrap().describe(), "22:00-07:00");
        assert_eq!(
            s.channels.iter().map(Channel::name).collect::<Vec<_>>(),
            ["webhook", "command", "mcp"]
        );
        assert!(
            matches!(&s.channels[0].kind, ChannelKind::Webhook { secret, .. } if secret == "k3y")
        );
        assert!(!format!("{:?}", s.channels[0]).contains("k3y"));
        assert!(s.proactive_for("alice"));
        assert!(!s.proactive_for("bob"));
        let bob = &s.users["bob"];
        assert_eq!(bob.zone.as_ref().unwrap().0, "America/New_York");
        assert_eq!(bob.quiet_hours, Some(None));
    }

    #[test]
    fn mistakes_name_their_key() {
        let cases: &[(&str, &str)] = &[
            (
                "[followups]\ntimezone = \"Mars/Olympus\"\n",
                "followups.timezone",
            ),
            (
                "[followups]\nquiet_hours = \"22-7\"\n",
                "followups.quiet_hours",
            ),
            ("[followups]\nmax_attempts = 0\n", "followups.max_attempts"),
            ("[followups]\nlease_secs = 2\n", "followups.lease_secs"),
            (
                "[followups]\nlease_secs = 10\n[[followups.channels]]\nkind = \"command\"\ncommand = [\"true\"]\ntimeout_secs = 20\n",
                "followups.lease_secs",
            ),
            ("[followups]\nsurprise = 1\n", "surprise"),
            (
                "[[followups.channels]]\nkind = \"pigeon\"\n",
                "followups.channels[0].kind",
            ),
            (
                "[[followups.channels]]\nkind = \"webhook\"\nurl = \"https://x.org\"\n",
                "followups.channels[0].secret",
            ),
            (
                "[[followups.channels]]\nkind = \"webhook\"\nurl = \"ftp://x.org\"\nsecret = \"s\"\n",
                "followups.channels[0].url",
            ),
            (
                "[[followups.channels]]\nkind = \"webhook\"\nurl = \"https://x.org\"\nsecret_env = \"NOPE_UNSET\"\n",
                "NOPE_UNSET",
            ),
            (
                "[[followups.channels]]\nkind = \"command\"\n",
                "followups.channels[0].command",
            ),
            (
                "[[followups.channels]]\nkind = \"mcp\"\nurl = \"https://x.org\"\n",
                "followups.channels[0].url",
            ),
            (
                "[[followups.channels]]\nkind = \"email\"\nsmtp_host = \"mail.example.org\"\nfrom = \"r@example.org\"\nto = \"u@example.org\"\nstarttls = false\n",
                "followups.channels[0].starttls",
            ),
            (
                "[[followups.channels]]\nkind = \"email\"\nsmtp_host = \"localhost\"\nfrom = \"r@example.org\"\n[followups.users.ann]\nproactive = true\n",
                "followups.users.ann.email",
            ),
            (
                "[followups.users.ann]\nemail = \"not-an-address\"\n",
                "followups.users.ann.email",
            ),
        ];
        for (toml, key) in cases {
            let e = settings(toml, &[]).unwrap_err();
            assert!(e.contains(key), "{toml}: {e}");
        }
    }
}
