//! The family's section of the settings page, `/settings/calendar`: which calendar the
//! person's assistant uses and, for Google Calendar, connecting it in the browser (the web
//! authorization-code flow with PKCE and a checked `state`; the refresh token stored for
//! this user where `ringfence calendar connect google` stores it) and disconnecting it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ringfence_core::page::{Method, PageRequest, Reply, Section, html};

use crate::google::{self, GoogleAccounts, GoogleCalendar, Pending};
use crate::plug::Accounts;
use crate::settings::{CalendarSettings, Provider};

/// How long a person has to come back from Google's consent page.
const PENDING_MS: i64 = 15 * 60 * 1000;

pub(crate) struct CalendarPage {
    pub(crate) settings: CalendarSettings,
    pub(crate) accounts: Arc<Accounts>,
    pub(crate) google: GoogleCalendar,
    /// Each user's authorization request on its way (this instance's: the person comes
    /// back to the instance that sent them, or starts again).
    pub(crate) pending: Mutex<HashMap<String, (Pending, i64)>>,
}

impl Section for CalendarPage {
    fn name(&self) -> &'static str {
        "calendar"
    }

    fn title(&self) -> &'static str {
        "Calendar"
    }

    fn handle(&self, req: &PageRequest<'_>) -> Reply {
        let path = req.path();
        match (req.method, path.as_slice()) {
            (Method::Get, []) => self.overview(req),
            (Method::Get, ["google", "connect"]) => self.connect(req),
            (Method::Get, ["google"]) => self.returned(req),
            (Method::Post, ["google", "disconnect"]) => self.disconnect(req),
            _ => Reply::NotFound,
        }
    }
}

impl CalendarPage {
    fn redirect_uri(req: &PageRequest<'_>) -> String {
        format!("{}{}/google", req.origin, req.base)
    }

    /// The user's Google account, when their calendar is Google's.
    fn account(&self, user: &str) -> Option<google::GoogleAccount> {
        match self.settings.account(user).provider {
            Provider::Google { .. } => self.accounts.account(user).ok(),
            _ => None,
        }
    }

    fn overview(&self, req: &PageRequest<'_>) -> Reply {
        let account = self.settings.account(req.user);
        let body = match &account.provider {
            Provider::Local => html! {
                p { "Your assistant keeps your events in ringfence's own calendar on this server: there is nothing to connect." }
                dl { dt { "Time zone" } dd { (account.zone_name) } }
            },
            Provider::NotForUser => html! {
                p { "No calendar is set up for you on this server. The server's operator gives you one with a table of your own in its configuration ([calendar.users." (req.user) "]), for Google Calendar or CalDAV." }
            },
            Provider::CalDav {
                url,
                username,
                password,
            } => html! {
                p { "Your assistant uses a CalDAV calendar the server's operator set up for you." }
                dl {
                    dt { "Server" }
                    dd { (url.as_ref().and_then(|u| u.host_str()).unwrap_or("(not set)")) }
                    dt { "Account" }
                    dd { @if username.is_some() { "set" } @else { "(none)" } }
                    dt { "Password" }
                    dd { @match password { Ok(Some(_)) => "set", Ok(None) => "none", Err(why) => { "missing: " (why) } } }
                    dt { "Time zone" }
                    dd { (account.zone_name) }
                }
                p.hint { "The operator changes these in the configuration ([calendar.users." (req.user) "])." }
            },
            Provider::Google { .. } => {
                let connected = self.account(req.user).map(|a| a.tokens.load()).transpose();
                match connected {
                    Err(e) => return Reply::Failed(e.to_string()),
                    Ok(doc) => {
                        let doc = doc.flatten();
                        let since = doc
                            .as_deref()
                            .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
                            .and_then(|v| v["connected_at"].as_str().map(str::to_owned));
                        html! {
                            p { "Your assistant uses your Google Calendar." }
                            @if doc.is_some() {
                                p.status { strong { "Connected" } @if let Some(at) = since { " since " (at) } "." }
                                form method="post" action=(format!("{}/google/disconnect", req.base)) {
                                    (req.csrf())
                                    button.danger type="submit" { "Disconnect Google Calendar" }
                                }
                                p.hint { "Disconnecting forgets the permission here; you can also remove ringfence in your Google account's security settings." }
                            } @else {
                                p.status { strong { "Not connected." } " Your assistant cannot see or change your events until you connect." }
                                a.button href=(format!("{}/google/connect", req.base)) { "Connect Google Calendar" }
                            }
                            dl { dt { "Time zone" } dd { (account.zone_name) } }
                        }
                    }
                }
            }
        };
        Reply::page("Calendar", body)
    }

    /// Off to Google's consent page, with a fresh `state` and PKCE challenge kept for this
    /// user.
    fn connect(&self, req: &PageRequest<'_>) -> Reply {
        let Some(account) = self.account(req.user) else {
            return Reply::Invalid(
                "Your calendar is not Google Calendar here: there is nothing to connect.".into(),
            );
        };
        let (url, pending) = google::begin(&account, &Self::redirect_uri(req));
        let now = ringfence_core::time::now_ms();
        let mut map = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|_, (_, at)| now - *at < PENDING_MS);
        map.insert(req.user.to_owned(), (pending, now));
        Reply::Leave(url.to_string())
    }

    /// Back from Google: the `state` must be the one sent for this user; the code is then
    /// exchanged (with the PKCE verifier) and the refresh token stored.
    fn returned(&self, req: &PageRequest<'_>) -> Reply {
        let taken = {
            let mut map = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            match map.get(req.user) {
                Some((p, at))
                    if p.state == req.param("state")
                        && ringfence_core::time::now_ms() - at < PENDING_MS =>
                {
                    map.remove(req.user).map(|(p, _)| p)
                }
                _ => None,
            }
        };
        // A refusal counts only with the state of this user's request (a link of anyone's
        // may carry `error`); its words are ours, not the link's.
        if taken.is_some() && !req.param("error").is_empty() {
            let why = match req.param("error") {
                "access_denied" => "you did not allow it",
                _ => "Google refused the request",
            };
            return Reply::Invalid(format!(
                "Google Calendar was not connected: {why}. Nothing changed."
            ));
        }
        let (Some(pending), Some(account)) = (taken, self.account(req.user)) else {
            return Reply::Invalid(
                "This answer from Google is not for a connection you started here (or it took more than 15 minutes). Start again with Connect Google Calendar.".into(),
            );
        };
        let code = req.param("code").to_owned();
        if code.is_empty() {
            return Reply::Invalid("Google sent no code back. Start again.".into());
        }
        let done = tokio::runtime::Handle::current().block_on(google::finish(
            &account,
            code,
            &Self::redirect_uri(req),
            pending.verifier,
        ));
        match done {
            Ok(_) => {
                self.google.forget(req.user);
                Reply::redirect(req.base, "Google Calendar is connected.")
            }
            Err(e) => Reply::Invalid(format!("Connecting Google Calendar failed: {e}")),
        }
    }

    fn disconnect(&self, req: &PageRequest<'_>) -> Reply {
        let Some(account) = self.account(req.user) else {
            return Reply::NotFound;
        };
        match account.tokens.remove() {
            Ok(()) => {
                self.google.forget(req.user);
                Reply::redirect(req.base, "Google Calendar is disconnected.")
            }
            Err(e) => Reply::Failed(e.to_string()),
        }
    }
}
