//! The family's section of the settings page, `/settings/calendar`: which calendar the
//! person's assistant uses and, for Google Calendar, connecting it in the browser (the web
//! authorization-code flow with PKCE and a checked `state`; the refresh token stored for
//! this user where `ringfence calendar connect google` stores it) and disconnecting it; for
//! CalDAV, the person's own URL, username and password (checked, the URL by the SSRF guard;
//! kept where the Google connection is; the password never shown again) and forgetting
//! them.

use std::sync::Arc;

use ringfence_core::page::{Method, PageRequest, Reply, Section, html};

use crate::google::{self, GoogleAccounts, GoogleCalendar, Pending};
use crate::login::{self, UserLogin};
use crate::plug::{Accounts, Stores};
use crate::settings::{CalendarSettings, Provider};

/// How long a person has to come back from Google's consent page.
const PENDING_MS: i64 = 15 * 60 * 1000;

pub(crate) struct CalendarPage {
    pub(crate) settings: CalendarSettings,
    pub(crate) accounts: Arc<Accounts>,
    pub(crate) google: GoogleCalendar,
    /// The CalDAV clients (dropped for a user whose login changes) and the URLs' guard.
    pub(crate) stores: Arc<Stores>,
}

/// Where a user's Google authorization request waits for Google's answer: beside their
/// connection (a 0600 file, or the shared store's credentials table, so the instance the
/// person comes back to finds it).
/// (Not `google-…`: that file name is a user's connection, and a user may be called
/// `pending-alice`.)
const PENDING_KIND: &str = "google.pending";

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
            (Method::Post, ["caldav"]) => self.save_caldav(req),
            (Method::Post, ["caldav", "forget"]) => self.forget_caldav(req),
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
        let own = match self.accounts.own_caldav(req.user) {
            Ok(own) => Ok(own),
            Err(crate::tools::CalendarError::NotConnected(why)) => Err(why),
            Err(e) => return Reply::Failed(e.to_string()),
        };
        // A login kept while the calendar is not CalDAV (the operator changed it) is not
        // used; it can still be forgotten.
        let unused = match (&account.provider, &own) {
            (Provider::CalDav { .. }, _) | (_, Ok(None)) => html! {},
            _ => html! {
                p.hint { "A CalDAV login you saved earlier is still kept here, but it is not used while your calendar is not CalDAV." }
                (self.forget_form(req))
            },
        };
        let body = match &account.provider {
            Provider::Local => html! {
                p { "Your assistant keeps your events in ringfence's own calendar on this server: there is nothing to connect." }
                p.hint { "Your calendar here is the local one, set by the server's operator; a CalDAV login of your own can be entered only where the operator sets CalDAV." }
                dl { dt { "Time zone" } dd { (account.zone_name) } }
                (unused)
            },
            Provider::NotForUser => html! {
                p { "No calendar is set up for you on this server. The server's operator gives you one with a table of your own in its configuration ([calendar.users." (req.user) "]), for Google Calendar or CalDAV." }
                (unused)
            },
            Provider::CalDav {
                url,
                username,
                password,
            } => html! {
                p { "Your assistant uses a CalDAV calendar." }
                @match &own {
                    Ok(Some(l)) => {
                        p.status { strong { "Your own CalDAV login is in use." } }
                        dl {
                            dt { "CalDAV URL" } dd { (l.url.as_str()) }
                            dt { "Username" } dd { (l.username) }
                            dt { "Password" } dd { "saved (never shown)" }
                            dt { "Time zone" } dd { (account.zone_name) }
                        }
                        (self.forget_form(req))
                        p.hint { "Forgetting it removes it from this server; your assistant then uses the login the operator configured for you, if any." }
                    }
                    Err(why) => {
                        p.problem role="alert" { (why) }
                        (self.forget_form(req))
                    }
                    Ok(None) if url.is_some() => {
                        p { "The server's operator set up this login for you:" }
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
                        p.hint { "The operator changes these in the configuration ([calendar.users." (req.user) "]). A login you enter below takes their place for you." }
                    }
                    Ok(None) => {
                        p.status { strong { "Not connected." } " Enter your CalDAV login below: your assistant cannot see or change your events until you do." }
                        dl { dt { "Time zone" } dd { (account.zone_name) } }
                    }
                }
                (self.caldav_form(req, own.as_ref().ok().and_then(Option::as_ref)))
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
                            p { "Your assistant uses your Google Calendar, set by the server's operator." }
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
                            (unused)
                        }
                    }
                }
            }
        };
        Reply::page("Calendar", body)
    }

    /// The form of the user's own CalDAV login: the URL and username they saved shown
    /// again, the password never.
    fn caldav_form(&self, req: &PageRequest<'_>, own: Option<&UserLogin>) -> maud::Markup {
        html! {
            section aria-labelledby="caldav-login" {
                h2 #caldav-login { @if own.is_some() { "Change your CalDAV login" } @else { "Your CalDAV login" } }
                form method="post" action=(format!("{}/caldav", req.base)) {
                    (req.csrf())
                    p {
                        label for="caldav-url" { "CalDAV URL" }
                        input #caldav-url type="url" name="url" required maxlength=(login::MAX_URL) autocomplete="url"
                            placeholder="https://dav.example.org/remote.php/dav/" value=(own.map_or("", |l| l.url.as_str()));
                    }
                    p {
                        label for="caldav-username" { "Username" }
                        input #caldav-username type="text" name="username" required maxlength=(login::MAX_USERNAME) autocomplete="username"
                            value=(own.map_or("", |l| l.username.as_str()));
                    }
                    p {
                        label for="caldav-password" { "Password" }
                        input #caldav-password type="password" name="password" required maxlength=(login::MAX_PASSWORD) autocomplete="new-password";
                    }
                    button type="submit" { "Save" }
                }
                p.hint { "Your server's address (its principal or calendar URL, as your provider's help pages give it) and your login, best an app password. They are kept on this server for you alone, and the password is never shown again: enter it again with any change. The address must be a server on the internet unless the operator allows others." }
            }
        }
    }

    fn forget_form(&self, req: &PageRequest<'_>) -> maud::Markup {
        html! {
            form method="post" action=(format!("{}/caldav/forget", req.base)) {
                (req.csrf())
                button.danger type="submit" { "Forget CalDAV login" }
            }
        }
    }

    /// Saves the user's own CalDAV login: only where their calendar is CalDAV, every field
    /// checked, the URL's server resolved and held to the guard; nothing is kept otherwise.
    fn save_caldav(&self, req: &PageRequest<'_>) -> Reply {
        let provider = match self.settings.account(req.user).provider {
            Provider::CalDav { .. } => None,
            Provider::Local => {
                Some("Your calendar here is ringfence's own, set by the server's operator")
            }
            Provider::Google { .. } => {
                Some("Your calendar here is Google Calendar, set by the server's operator")
            }
            Provider::NotForUser => {
                Some("No calendar is set up for you here by the server's operator")
            }
        };
        if let Some(p) = provider {
            return Reply::Invalid(format!(
                "{p}: a CalDAV login of yours would not be used, so none was saved. Ask the operator for CalDAV ([calendar.users.{}] provider = \"caldav\").",
                req.user
            ));
        }
        let nothing = "Nothing was saved.";
        let login = match login::parse_form(
            req.field("url"),
            req.field("username"),
            req.field("password"),
        ) {
            Ok(l) => l,
            Err(why) => return Reply::Invalid(format!("{why} {nothing}")),
        };
        if let Err(why) = login::check_reach(&login, &self.stores.guard) {
            return Reply::Invalid(format!("{why} {nothing}"));
        }
        let kept = match self.accounts.kept(req.user, login::KIND) {
            Ok(k) => k,
            Err(e) => return Reply::Failed(e.to_string()),
        };
        match kept.save(&login::to_doc(&login, ringfence_core::time::now_ms())) {
            Ok(()) => {
                self.stores.forget(req.user);
                tracing::info!(
                    user = req.user,
                    host = login.url.host_str().unwrap_or(""),
                    "settings page: a CalDAV login was saved"
                );
                Reply::redirect(
                    req.base,
                    "Your CalDAV login is saved: your assistant uses it from its next calendar request.",
                )
            }
            Err(e) => Reply::Failed(format!("Your CalDAV login was not saved: {e}")),
        }
    }

    /// Forgets the user's own CalDAV login (nothing kept is no error).
    fn forget_caldav(&self, req: &PageRequest<'_>) -> Reply {
        let kept = match self.accounts.kept(req.user, login::KIND) {
            Ok(k) => k,
            Err(e) => return Reply::Failed(e.to_string()),
        };
        match kept.remove() {
            Ok(()) => {
                self.stores.forget(req.user);
                tracing::info!(
                    user = req.user,
                    "settings page: a CalDAV login was forgotten"
                );
                Reply::redirect(req.base, "Your CalDAV login is forgotten.")
            }
            Err(e) => Reply::Failed(format!("Your CalDAV login was not forgotten: {e}")),
        }
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
        let doc = serde_json::json!({
            "state": pending.state,
            "verifier": pending.verifier,
            "made_ms": ringfence_core::time::now_ms(),
        });
        let kept = self
            .accounts
            .kept(req.user, PENDING_KIND)
            .map_err(|e| e.to_string())
            .and_then(|k| k.save(&doc.to_string()).map_err(|e| e.to_string()));
        match kept {
            Ok(()) => Reply::Leave(url.to_string()),
            Err(e) => Reply::Failed(format!("Connecting Google Calendar could not start: {e}")),
        }
    }

    /// Back from Google: the `state` must be the one sent for this user; the code is then
    /// exchanged (with the PKCE verifier) and the refresh token stored.
    fn returned(&self, req: &PageRequest<'_>) -> Reply {
        let taken = self.take_pending(req.user, req.param("state"));
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

    /// The user's request on its way, when `state` is its own and it is recent: taken once
    /// (whichever instance the person comes back to).
    fn take_pending(&self, user: &str, state: &str) -> Option<Pending> {
        if state.is_empty() {
            return None;
        }
        let kept = self.accounts.kept(user, PENDING_KIND).ok()?;
        // Taken, whatever it holds: once, on one instance (an answer that does not match
        // ends the request; the person starts again).
        let doc: serde_json::Value = serde_json::from_str(&kept.take().ok()??).ok()?;
        let text = |k: &str| doc.get(k).and_then(|v| v.as_str()).unwrap_or_default();
        let made = doc.get("made_ms").and_then(|v| v.as_i64()).unwrap_or(0);
        let fresh = ringfence_core::time::now_ms() - made < PENDING_MS;
        (text("state") == state && fresh).then(|| Pending {
            state: text("state").to_owned(),
            verifier: text("verifier").to_owned(),
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::path::Path;

    use ringfence_store::SharedStore;

    fn section(toml: &str, dir: &Path) -> CalendarPage {
        let settings: CalendarSettings =
            ringfence_core::plug::resolve_text(&crate::CalendarPlug, toml, &[], dir).unwrap();
        let shared = Arc::new(SharedStore::default());
        let accounts = Arc::new(Accounts::new(&settings, dir, shared.clone()));
        let google =
            GoogleCalendar::new(accounts.clone(), std::time::Duration::from_secs(5)).unwrap();
        CalendarPage {
            stores: Arc::new(Stores::new(&settings, shared, accounts.clone())),
            settings,
            accounts,
            google,
        }
    }

    fn ask(page: &CalendarPage, user: &str, post: Option<(&str, &[(&str, &str)])>) -> Reply {
        let (method, rest, form) = match post {
            None => (Method::Get, vec![], BTreeMap::new()),
            Some((path, fields)) => (
                Method::Post,
                path.split('/').map(str::to_owned).collect(),
                fields
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
        };
        page.handle(&PageRequest {
            user,
            method,
            rest: &rest,
            query: &BTreeMap::new(),
            form: &form,
            csrf_token: "t",
            base: "/settings/calendar",
            origin: "http://127.0.0.1",
        })
    }

    fn html_of(r: Reply) -> String {
        match r {
            Reply::Page { body, .. } => body.into_string(),
            other => panic!("not a page: {other:?}"),
        }
    }

    fn refused(r: Reply) -> String {
        match r {
            Reply::Invalid(why) => why,
            other => panic!("not refused: {other:?}"),
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // the test's own directory
    fn a_login_is_checked_saved_shown_without_its_password_and_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let page = section(
            "[calendar]\nprovider = \"caldav\"\nuser_allow_private = [\"127.0.0.1\"]\n",
            dir.path(),
        );
        let kept = dir.path().join("calendar").join("caldav-alice.json");
        let first = html_of(ask(&page, "alice", None));
        for label in [
            "CalDAV URL",
            "Username",
            "Password",
            ">Save<",
            "Not connected",
        ] {
            assert!(first.contains(label), "{label}: {first}");
        }
        assert!(!first.contains("Forget CalDAV login"));
        let url = "http://127.0.0.1:5232/alice/";
        for (fields, says) in [
            (
                [("url", ""), ("username", "alice"), ("password", "pw")],
                "URL is empty",
            ),
            (
                [
                    ("url", "ftp://x.example/"),
                    ("username", "alice"),
                    ("password", "pw"),
                ],
                "`ftp:`",
            ),
            (
                [
                    ("url", "http://a:b@127.0.0.1/"),
                    ("username", "alice"),
                    ("password", "pw"),
                ],
                "leave them out",
            ),
            (
                [("url", url), ("username", ""), ("password", "pw")],
                "username is empty",
            ),
            (
                [("url", url), ("username", "alice"), ("password", "")],
                "password is empty",
            ),
            (
                [
                    ("url", "http://169.254.169.254/latest/"),
                    ("username", "alice"),
                    ("password", "pw"),
                ],
                "link-local",
            ),
            (
                [
                    ("url", "http://10.0.0.1/"),
                    ("username", "alice"),
                    ("password", "pw"),
                ],
                "user_allow_private",
            ),
        ] {
            let why = refused(ask(&page, "alice", Some(("caldav", &fields))));
            assert!(
                why.contains(says) && why.contains("Nothing was saved"),
                "{why}"
            );
            assert!(!kept.exists());
        }
        let secret = "correct-horse-7f3a";
        let saved = ask(
            &page,
            "alice",
            Some((
                "caldav",
                &[("url", url), ("username", "alice"), ("password", secret)],
            )),
        );
        assert!(matches!(saved, Reply::Redirect { .. }), "{saved:?}");
        assert!(kept.exists());
        let after = html_of(ask(&page, "alice", None));
        assert!(after.contains(url) && after.contains("alice"), "{after}");
        assert!(after.contains("Forget CalDAV login"));
        assert!(!after.contains(secret), "{after}");
        // Bob sees nothing of Alice's.
        let bob = html_of(ask(&page, "bob", None));
        assert!(!bob.contains(url) && bob.contains("Not connected"), "{bob}");
        assert!(matches!(
            ask(&page, "alice", Some(("caldav/forget", &[]))),
            Reply::Redirect { .. }
        ));
        assert!(!kept.exists());
        assert!(!html_of(ask(&page, "alice", None)).contains("Forget CalDAV login"));
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // the test's own directory
    fn another_provider_offers_no_form_and_takes_no_login() {
        let dir = tempfile::tempdir().unwrap();
        let page = section("", dir.path());
        let body = html_of(ask(&page, "alice", None));
        assert!(!body.contains("CalDAV URL"), "{body}");
        assert!(body.contains("set by the server's operator"), "{body}");
        let why = refused(ask(
            &page,
            "alice",
            Some((
                "caldav",
                &[
                    ("url", "https://dav.example.org/"),
                    ("username", "a"),
                    ("password", "b"),
                ],
            )),
        ));
        assert!(why.contains("set by the server's operator"), "{why}");
        assert!(!dir.path().join("calendar").exists());
    }
}
