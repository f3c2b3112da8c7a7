//! Google Calendar (API v3): `ringfence calendar connect google` runs OAuth 2.0 for
//! installed apps (a loopback redirect, PKCE with S256) and keeps the refresh token in a
//! 0600 file; the tools then get access tokens as needed (refreshed a minute before they
//! expire) and call the API: events of every calendar in the user's list (`singleEvents`, so
//! Google expands series and each occurrence has its own ID), insert (a Meet link through
//! `conferenceData`), patch (only the given fields; `If-Match` with the ETag the user saw)
//! and delete. Endpoints are configurable so the tests can stand in for Google.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::tools::{
    CalendarBackend, CalendarError, CalendarEvent, CalendarResult, Deleted, EventPatch, GivenTime,
    NewEvent, When,
};
use reqwest::StatusCode;
use ringfence_core::BoxFuture;
use ringfence_core::time::TimeZone;
use serde_json::{Value, json};

use crate::backend::{CalendarInfo, SeenEtags, event_id, not_found, parse_event_id, pick};

/// The scope asked for: read and write events.
pub const SCOPE: &str = "https://www.googleapis.com/auth/calendar";

/// Where Google (or a stand-in) is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    pub auth: url::Url,
    pub token: url::Url,
    /// `https://www.googleapis.com/calendar/v3/`
    pub api: url::Url,
}

impl Default for Endpoints {
    fn default() -> Endpoints {
        Endpoints {
            auth: url::Url::parse("https://accounts.google.com/o/oauth2/v2/auth").expect("a URL"),
            token: url::Url::parse("https://oauth2.googleapis.com/token").expect("a URL"),
            api: url::Url::parse("https://www.googleapis.com/calendar/v3/").expect("a URL"),
        }
    }
}

/// One user's Google account settings: the OAuth client and where the token is kept.
#[derive(Clone)]
pub struct GoogleAccount {
    pub client_id: String,
    pub client_secret: Option<String>,
    pub endpoints: Endpoints,
    /// Where the connection (the refresh token) is kept.
    pub tokens: Arc<dyn TokenStore>,
}

/// Why connecting Google Calendar failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot listen on loopback: {0}")]
    Listen(#[source] std::io::Error),
    #[error("the browser's answer could not be read: {0}")]
    Browser(#[source] std::io::Error),
    #[error("Google refused: {0}")]
    Refused(String),
    #[error("no answer from the browser within {0} s")]
    NoAnswer(u64),
    #[error(transparent)]
    Client(#[from] ringfence_net::ClientError),
    #[error(transparent)]
    Token(#[from] TokenEndpointError),
    #[error(
        "Google gave no refresh token (revoke ringfence's access in your Google account, then connect again)"
    )]
    NoRefreshToken,
    #[error(transparent)]
    Kept(#[from] TokenStoreError),
}

/// The token endpoint could not be reached, or refused the request (its error code, never
/// the secrets sent).
#[derive(Debug, thiserror::Error)]
pub enum TokenEndpointError {
    #[error("the token endpoint could not be reached: {0}")]
    Unreachable(String),
    #[error("the token endpoint answered {status}: {error}")]
    Refused {
        status: reqwest::StatusCode,
        error: String,
    },
}

/// A kept connection could not be read or written: what was tried, where, and why.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {place}: {source}")]
pub struct TokenStoreError {
    pub action: &'static str,
    pub place: String,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

/// Where one user's Google connection is kept: a JSON document holding the refresh token.
pub trait TokenStore: Send + Sync + std::fmt::Debug {
    /// The document, if the user connected.
    fn load(&self) -> Result<Option<String>, TokenStoreError>;
    /// Saves (replacing) the document.
    fn save(&self, doc: &str) -> Result<(), TokenStoreError>;
    /// Forgets it (disconnecting); nothing to forget is no error.
    fn remove(&self) -> Result<(), TokenStoreError>;
    /// Returns and forgets it at once: of two takers, one gets it.
    fn take(&self) -> Result<Option<String>, TokenStoreError>;
    /// Where it is, for messages.
    fn place(&self) -> String;
}

/// The connection in a file (`<data dir>/calendar/google-<user>.json`, 0600, in a 0700
/// directory).
#[derive(Debug, Clone)]
pub struct TokenFile(pub PathBuf);

impl TokenFile {
    fn failed(&self, action: &'static str, e: std::io::Error) -> TokenStoreError {
        TokenStoreError {
            action,
            place: self.place(),
            source: Box::new(e),
        }
    }
}

impl TokenStore for TokenFile {
    #[allow(clippy::disallowed_methods)] // ringfence's own token file, 0600
    fn load(&self) -> Result<Option<String>, TokenStoreError> {
        match std::fs::read_to_string(&self.0) {
            Ok(text) => Ok(Some(text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.failed("read", e)),
        }
    }

    fn save(&self, doc: &str) -> Result<(), TokenStoreError> {
        if let Some(dir) = self.0.parent() {
            ringfence_fs::create_private_dir_all(dir).map_err(|e| TokenStoreError {
                action: "create the directory of",
                place: self.place(),
                source: Box::new(e),
            })?;
        }
        ringfence_fs::write_private_file(&self.0, doc.as_bytes())
            .map_err(|e| self.failed("write", e))
    }

    /// Renamed to a name of this taker's own first (a rename happens once), then read.
    #[allow(clippy::disallowed_methods)] // ringfence's own token file
    fn take(&self) -> Result<Option<String>, TokenStoreError> {
        let mine = self.0.with_extension(format!("taken-{}", random_token(9)));
        match std::fs::rename(&self.0, &mine) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(self.failed("take", e)),
        }
        let text = std::fs::read_to_string(&mine).map_err(|e| self.failed("read", e));
        let _ = std::fs::remove_file(&mine);
        text.map(Some)
    }

    #[allow(clippy::disallowed_methods)] // ringfence's own token file
    fn remove(&self) -> Result<(), TokenStoreError> {
        match std::fs::remove_file(&self.0) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.failed("remove", e)),
        }
    }

    fn place(&self) -> String {
        self.0.display().to_string()
    }
}

impl std::fmt::Debug for GoogleAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GoogleAccount")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .field("tokens", &self.tokens)
            .finish()
    }
}

/// Finds each user's Google account and zone (the binary's configuration).
pub trait GoogleAccounts: Send + Sync + std::fmt::Debug {
    fn account(&self, user: &str) -> CalendarResult<GoogleAccount>;
    fn zone(&self, user: &str) -> (String, TimeZone);
}

fn not_connected(why: &str) -> CalendarError {
    CalendarError::NotConnected(format!(
        "Google Calendar is not connected: {why}. Connect it with `ringfence calendar connect google` (on the machine ringfence runs on; over HTTP with --user NAME)"
    ))
}

fn failed(doing: &str, e: impl std::fmt::Display) -> CalendarError {
    CalendarError::Failed(format!("{doing} failed: {e}"))
}

fn http_client(timeout: Duration) -> CalendarResult<reqwest::Client> {
    crate::http_client(timeout).map_err(|e| failed("making the HTTP client", e))
}

// --- connecting ----------------------------------------------------------------------------

use ringfence_net::pkce::{challenge, random_token};

/// Runs the installed-app flow: listens on a loopback port, hands `show` the address to open
/// in a browser, waits (at most `wait`) for Google's redirect with the code, exchanges it
/// (with the PKCE verifier) for tokens, and stores the refresh token in the account's file
/// (0600). Returns the scope granted.
pub async fn connect(
    account: &GoogleAccount,
    show: impl Fn(&str),
    wait: Duration,
) -> Result<String, ConnectError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(ConnectError::Listen)?;
    let port = listener.local_addr().map_err(ConnectError::Listen)?.port();
    let redirect = format!("http://127.0.0.1:{port}/");
    let (url, Pending { state, verifier }) = begin(account, &redirect);
    show(url.as_str());
    let code = tokio::time::timeout(wait, async {
        loop {
            let (mut sock, _) = listener.accept().await.map_err(ConnectError::Browser)?;
            let mut buf = vec![0u8; 8192];
            let n = sock.read(&mut buf).await.map_err(ConnectError::Browser)?;
            let head = String::from_utf8_lossy(&buf[..n]).into_owned();
            let target = head
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .unwrap_or("/")
                .to_owned();
            let params: HashMap<String, String> = url::Url::parse(&format!("http://x{target}"))
                .map(|u| u.query_pairs().into_owned().collect())
                .unwrap_or_default();
            let (status, page, outcome) = match (params.get("code"), params.get("state"), params.get("error")) {
                (_, _, Some(err)) => ("400 Bad Request", format!("Google said: {err}. You can close this window."), Some(Err(ConnectError::Refused(err.clone())))),
                (Some(code), Some(s), None) if *s == state => ("200 OK", "ringfence is connected to Google Calendar. You can close this window.".to_owned(), Some(Ok(code.clone()))),
                (Some(_), _, None) => ("400 Bad Request", "This answer is not for the request ringfence made.".to_owned(), None),
                _ => ("404 Not Found", "Nothing here.".to_owned(), None),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = sock.write_all(response.as_bytes()).await;
            if let Some(o) = outcome {
                return o;
            }
        }
    })
    .await
    .map_err(|_| ConnectError::NoAnswer(wait.as_secs()))??;
    finish(account, code, &redirect, verifier).await
}

/// What the authorization request was made with, kept until Google sends the person back.
#[derive(Debug, Clone)]
pub struct Pending {
    /// Sent, and checked on the way back (`state`).
    pub state: String,
    /// The PKCE verifier (its challenge was sent).
    pub verifier: String,
}

/// The address of Google's consent page for `account`, sending the person back to
/// `redirect` (with a fresh `state` and PKCE challenge, kept in the [`Pending`]).
pub fn begin(account: &GoogleAccount, redirect: &str) -> (url::Url, Pending) {
    let verifier = random_token(48);
    let state = random_token(16);
    let mut url = account.endpoints.auth.clone();
    url.query_pairs_mut()
        .append_pair("client_id", &account.client_id)
        .append_pair("redirect_uri", redirect)
        .append_pair("response_type", "code")
        .append_pair("scope", SCOPE)
        .append_pair("code_challenge", &challenge(&verifier))
        .append_pair("code_challenge_method", "S256")
        .append_pair("state", &state)
        .append_pair("access_type", "offline")
        .append_pair("prompt", "consent");
    (url, Pending { state, verifier })
}

/// Exchanges the `code` Google sent back (to `redirect`) with the PKCE `verifier` for tokens
/// and stores the refresh token in the account's place. Returns the scope granted.
pub async fn finish(
    account: &GoogleAccount,
    code: String,
    redirect: &str,
    verifier: String,
) -> Result<String, ConnectError> {
    let redirect = redirect.to_owned();
    let http = crate::http_client(Duration::from_secs(30))?;
    let mut form = vec![
        ("grant_type", "authorization_code".to_owned()),
        ("code", code),
        ("redirect_uri", redirect),
        ("client_id", account.client_id.clone()),
        ("code_verifier", verifier),
    ];
    if let Some(s) = &account.client_secret {
        form.push(("client_secret", s.clone()));
    }
    let answer = token_request(&http, &account.endpoints.token, &form).await?;
    let refresh = answer["refresh_token"]
        .as_str()
        .ok_or(ConnectError::NoRefreshToken)?;
    let doc = json!({
        "refresh_token": refresh,
        "scope": answer["scope"],
        "connected_at": ringfence_core::time::format_iso_ms(ringfence_core::time::now_ms()),
    });
    account.tokens.save(&doc.to_string())?;
    Ok(answer["scope"].as_str().unwrap_or(SCOPE).to_owned())
}

/// A POST to the token endpoint; the answer's JSON, or its error (never the secrets sent).
async fn token_request(
    http: &reqwest::Client,
    url: &url::Url,
    form: &[(&str, String)],
) -> Result<Value, TokenEndpointError> {
    let resp = http
        .post(url.clone())
        .form(form)
        .send()
        .await
        .map_err(|e| {
            TokenEndpointError::Unreachable(ringfence_net::error_chain(&e.without_url()))
        })?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let error = body["error"].as_str().unwrap_or("unknown error").to_owned();
        return Err(TokenEndpointError::Refused { status, error });
    }
    Ok(body)
}

// --- the backend ---------------------------------------------------------------------------

/// [`CalendarBackend`] over Google Calendar.
#[derive(Debug, Clone)]
pub struct GoogleCalendar {
    accounts: Arc<dyn GoogleAccounts>,
    http: reqwest::Client,
    /// user → (access token, when it stops being used).
    tokens: Arc<Mutex<HashMap<String, (String, Instant)>>>,
    /// The ETag each user last saw of each event.
    seen: Arc<SeenEtags>,
}

/// What one call needs: the client, the account and its token, and the user's zone.
#[derive(Clone)]
struct Call {
    http: reqwest::Client,
    api: url::Url,
    token: String,
    zone: (String, TimeZone),
    user: String,
    seen: Arc<SeenEtags>,
}

impl GoogleCalendar {
    pub fn new(
        accounts: Arc<dyn GoogleAccounts>,
        timeout: Duration,
    ) -> CalendarResult<GoogleCalendar> {
        Ok(GoogleCalendar {
            accounts,
            http: http_client(timeout)?,
            tokens: Arc::default(),
            seen: Arc::default(),
        })
    }

    /// Drops the access token held for `user` (they disconnected: the next call needs their
    /// connection again).
    pub fn forget(&self, user: &str) {
        self.tokens
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(user);
    }

    /// An access token for `user`: the one held, or a fresh one from the refresh token.
    fn call(&self, user: &str) -> BoxFuture<'static, CalendarResult<Call>> {
        let account = self.accounts.account(user);
        let zone = self.accounts.zone(user);
        let (http, tokens, seen, user) = (
            self.http.clone(),
            self.tokens.clone(),
            self.seen.clone(),
            user.to_owned(),
        );
        Box::pin(async move {
            let account = account?;
            let held = tokens
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&user)
                .filter(|(_, until)| Instant::now() < *until)
                .map(|(t, _)| t.clone());
            let token = match held {
                Some(t) => t,
                None => {
                    let text = account
                        .tokens
                        .load()
                        .map_err(|e| failed("reading the stored connection", e))?
                        .ok_or_else(|| {
                            not_connected("no Google account is connected for this user")
                        })?;
                    let doc: Value = serde_json::from_str(&text)
                        .map_err(|_| not_connected("the stored connection is unreadable"))?;
                    let refresh = doc["refresh_token"].as_str().ok_or_else(|| {
                        not_connected("the stored connection has no refresh token")
                    })?;
                    let mut form = vec![
                        ("grant_type", "refresh_token".to_owned()),
                        ("refresh_token", refresh.to_owned()),
                        ("client_id", account.client_id.clone()),
                    ];
                    if let Some(s) = &account.client_secret {
                        form.push(("client_secret", s.clone()));
                    }
                    let answer = token_request(&http, &account.endpoints.token, &form)
                        .await
                        .map_err(|e| match e {
                            TokenEndpointError::Refused { error, .. } if error == "invalid_grant" => {
                                not_connected("Google no longer accepts the stored connection (access was revoked or expired)")
                            }
                            e => CalendarError::Failed(e.to_string()),
                        })?;
                    let access = answer["access_token"]
                        .as_str()
                        .ok_or_else(|| {
                            failed(
                                "refreshing the access token",
                                "no access_token in the answer",
                            )
                        })?
                        .to_owned();
                    let life = answer["expires_in"].as_u64().unwrap_or(3600);
                    let until =
                        Instant::now() + Duration::from_secs(life.saturating_sub(60).max(1));
                    tokens
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(user.clone(), (access.clone(), until));
                    access
                }
            };
            Ok(Call {
                http,
                api: account.endpoints.api,
                token,
                zone,
                user,
                seen,
            })
        })
    }
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

impl Call {
    fn url(&self, path: &str) -> CalendarResult<url::Url> {
        self.api
            .join(path)
            .map_err(|e| failed("making the request address", e))
    }

    async fn send(
        &self,
        r: reqwest::RequestBuilder,
        doing: &str,
    ) -> CalendarResult<(StatusCode, Value)> {
        let resp = r.bearer_auth(&self.token).send().await.map_err(|e| {
            failed(
                doing,
                format!(
                    "Google Calendar could not be reached: {}",
                    ringfence_net::error_chain(&e.without_url())
                ),
            )
        })?;
        let status = resp.status();
        let body: Value = if status == StatusCode::NO_CONTENT {
            Value::Null
        } else {
            resp.json().await.unwrap_or(Value::Null)
        };
        match status {
            s if s.is_success() => Ok((s, body)),
            StatusCode::UNAUTHORIZED => Err(not_connected("Google refused the access token")),
            StatusCode::PRECONDITION_FAILED => Err(conflict()),
            StatusCode::NOT_FOUND | StatusCode::GONE => Err(CalendarError::NotFound(
                "no such event in Google Calendar (deleted, or never there); list_calendar_events gives the IDs of the events there are".into(),
            )),
            s => Err(failed(
                doing,
                format!(
                    "Google Calendar answered {s}: {}",
                    body["error"]["message"].as_str().unwrap_or("no reason given")
                ),
            )),
        }
    }

    fn remember(&self, cal: &str, id: &str, etag: Option<&str>) {
        self.seen.record(&self.user, cal, id, etag);
    }

    fn seen_etag(&self, cal: &str, id: &str) -> Option<String> {
        self.seen.get(&self.user, cal, id)
    }

    /// The calendar, event ID and address an event ID names (among the user's calendars).
    async fn locate(&self, id: &str) -> CalendarResult<(CalendarInfo, String, url::Url)> {
        let (cal_id, ev_id, _) = parse_event_id(id).ok_or_else(|| not_found(id))?;
        let cal = self
            .calendars()
            .await?
            .into_iter()
            .find(|c| c.id == cal_id)
            .ok_or_else(|| not_found(id))?;
        let url = self.url(&format!(
            "calendars/{}/events/{}",
            enc(&cal.id),
            enc(&ev_id)
        ))?;
        Ok((cal, ev_id, url))
    }

    async fn calendars(&self) -> CalendarResult<Vec<CalendarInfo>> {
        let (_, body) = self
            .send(
                self.http.get(self.url("users/me/calendarList")?),
                "listing your calendars",
            )
            .await?;
        let mut cals: Vec<(String, String, bool)> = body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| {
                Some((
                    c["id"].as_str()?.to_owned(),
                    c["summaryOverride"]
                        .as_str()
                        .or(c["summary"].as_str())
                        .unwrap_or("calendar")
                        .to_owned(),
                    c["primary"].as_bool().unwrap_or(false),
                ))
            })
            .collect();
        // The primary calendar first: new events go there.
        cals.sort_by_key(|c| !c.2);
        Ok(cals
            .into_iter()
            .map(|(id, name, _)| CalendarInfo { id, name })
            .collect())
    }

    fn event(&self, cal: &CalendarInfo, e: &Value) -> Option<CalendarEvent> {
        let when = |v: &Value| -> Option<When> {
            if let Some(d) = v["date"].as_str() {
                return d.parse().ok().map(When::Date);
            }
            let ts: jiff::Timestamp = v["dateTime"].as_str()?.parse().ok()?;
            Some(When::At(ts.as_millisecond()))
        };
        let id = e["id"].as_str()?;
        let meet = e["hangoutLink"].as_str().map(str::to_owned).or_else(|| {
            e["conferenceData"]["entryPoints"]
                .as_array()?
                .iter()
                .find(|p| p["entryPointType"] == "video")?["uri"]
                .as_str()
                .map(str::to_owned)
        });
        let text = |k: &str| {
            e[k].as_str()
                .map(str::to_owned)
                .filter(|s| !s.trim().is_empty())
        };
        Some(CalendarEvent {
            id: event_id(&cal.id, id, None),
            calendar_id: cal.id.clone(),
            calendar_name: cal.name.clone(),
            title: text("summary").unwrap_or_else(|| "(no title)".into()),
            start: when(&e["start"])?,
            end: when(&e["end"])?,
            zone: e["start"]["timeZone"].as_str().map(str::to_owned),
            location: text("location"),
            description: text("description"),
            recurring: e["recurringEventId"].is_string() || e["recurrence"].is_array(),
            meet_link: meet,
        })
    }

    /// A time for the API: RFC 3339 as given, and the user's zone when the offset is its.
    fn time(&self, g: GivenTime) -> Value {
        let ts = jiff::Timestamp::from_millisecond(g.ms).unwrap_or_default();
        let off = jiff::tz::Offset::from_seconds(g.offset_secs).unwrap_or(jiff::tz::Offset::UTC);
        let text = ts
            .to_zoned_datetime(TimeZone::fixed(off))
            .strftime("%Y-%m-%dT%H:%M:%S%:z")
            .to_string();
        if self.zone.1.to_offset(ts).seconds() == g.offset_secs {
            json!({"dateTime": text, "timeZone": self.zone.0})
        } else {
            json!({"dateTime": text})
        }
    }
}

fn conflict() -> CalendarError {
    CalendarError::Conflict(
        "the event was changed in Google Calendar by someone else since you last saw it; nothing was overwritten. List the events again to see the change, then make yours".into(),
    )
}

impl CalendarBackend for GoogleCalendar {
    fn zone(&self, user: &str) -> (String, TimeZone) {
        self.accounts.zone(user)
    }

    fn list(
        &self,
        user: &str,
        from_ms: i64,
        to_ms: i64,
        calendar: Option<String>,
    ) -> BoxFuture<'static, CalendarResult<Vec<CalendarEvent>>> {
        let call = self.call(user);
        Box::pin(async move {
            let call = call.await?;
            let mut cals = call.calendars().await?;
            if let Some(want) = calendar {
                cals = vec![pick(&cals, &want)?];
            }
            let mut out = Vec::new();
            for cal in &cals {
                let mut page: Option<String> = None;
                loop {
                    let mut url = call.url(&format!("calendars/{}/events", enc(&cal.id)))?;
                    url.query_pairs_mut()
                        .append_pair("timeMin", &ringfence_core::time::format_iso_ms(from_ms))
                        .append_pair("timeMax", &ringfence_core::time::format_iso_ms(to_ms))
                        .append_pair("singleEvents", "true")
                        .append_pair("orderBy", "startTime")
                        .append_pair("maxResults", "2500");
                    if let Some(p) = &page {
                        url.query_pairs_mut().append_pair("pageToken", p);
                    }
                    let (_, body) = call.send(call.http.get(url), "listing events").await?;
                    for e in body["items"].as_array().into_iter().flatten() {
                        if e["status"] == "cancelled" {
                            continue;
                        }
                        if let Some(ev) = call.event(cal, e) {
                            if let (Some(id), Some(etag)) = (e["id"].as_str(), e["etag"].as_str()) {
                                call.remember(&cal.id, id, Some(etag));
                            }
                            out.push(ev);
                        }
                    }
                    page = body["nextPageToken"].as_str().map(str::to_owned);
                    if page.is_none() || out.len() > 20_000 {
                        break;
                    }
                }
            }
            let key = |e: &CalendarEvent| match e.start {
                When::At(ms) => ms,
                When::Date(d) => d
                    .to_datetime(jiff::civil::Time::midnight())
                    .to_zoned_datetime(call.zone.1.clone())
                    .map(|z| z.timestamp().as_millisecond())
                    .unwrap_or(0),
            };
            out.sort_by_key(key);
            Ok(out)
        })
    }

    fn create(
        &self,
        user: &str,
        event: NewEvent,
    ) -> BoxFuture<'static, CalendarResult<CalendarEvent>> {
        let call = self.call(user);
        Box::pin(async move {
            let call = call.await?;
            let cals = call.calendars().await?;
            let cal = cals.first().cloned().ok_or_else(|| {
                CalendarError::NotFound("the Google account has no calendar".into())
            })?;
            let mut body = json!({
                "summary": event.title,
                "start": call.time(event.start),
                "end": call.time(event.end),
            });
            if let Some(d) = &event.description {
                body["description"] = d.clone().into();
            }
            if let Some(l) = &event.location {
                body["location"] = l.clone().into();
            }
            let mut url = call.url(&format!("calendars/{}/events", enc(&cal.id)))?;
            if event.add_meet_link {
                body["conferenceData"] = json!({"createRequest": {
                    "requestId": uuid::Uuid::new_v4().to_string(),
                    "conferenceSolutionKey": {"type": "hangoutsMeet"},
                }});
                url.query_pairs_mut()
                    .append_pair("conferenceDataVersion", "1");
            }
            let (_, made) = call
                .send(call.http.post(url).json(&body), "creating the event")
                .await?;
            if event.add_meet_link && made["hangoutLink"].as_str().is_none() {
                tracing::warn!("Google made the event but no Meet link (yet)");
            }
            if let (Some(id), Some(etag)) = (made["id"].as_str(), made["etag"].as_str()) {
                call.remember(&cal.id, id, Some(etag));
            }
            call.event(&cal, &made)
                .ok_or_else(|| failed("creating the event", "Google's answer has no event"))
        })
    }

    fn update(
        &self,
        user: &str,
        id: String,
        patch: EventPatch,
    ) -> BoxFuture<'static, CalendarResult<CalendarEvent>> {
        let call = self.call(user);
        Box::pin(async move {
            let call = call.await?;
            let (cal, ev_id, url) = call.locate(&id).await?;
            let mut body = json!({});
            if let Some(t) = &patch.title {
                body["summary"] = t.clone().into();
            }
            if let Some(d) = &patch.description {
                body["description"] = d.clone().into();
            }
            if let Some(l) = &patch.location {
                body["location"] = l.clone().into();
            }
            if patch.start.is_some() != patch.end.is_some() {
                // One end given: the other follows from the event as it is (its length kept
                // for a new start), so read it.
                let (_, current) = call
                    .send(call.http.get(url.clone()), "reading the event")
                    .await?;
                let ev = call.event(&cal, &current).ok_or_else(|| not_found(&id))?;
                let (When::At(s), When::At(e)) = (ev.start, ev.end) else {
                    return Err(CalendarError::Invalid(
                        "an all-day event needs both startDateTime and endDateTime to get times"
                            .into(),
                    ));
                };
                let (ns, ne) = match (patch.start, patch.end) {
                    (Some(g), None) => (
                        g,
                        GivenTime {
                            ms: g.ms + (e - s),
                            offset_secs: g.offset_secs,
                        },
                    ),
                    (None, Some(g)) => (
                        GivenTime {
                            ms: s,
                            offset_secs: g.offset_secs,
                        },
                        g,
                    ),
                    _ => unreachable!("one of them is given"),
                };
                if ne.ms <= ns.ms {
                    return Err(CalendarError::Invalid("the event would end before it starts; give both startDateTime and endDateTime".into()));
                }
                body["start"] = call.time(ns);
                body["end"] = call.time(ne);
            } else if let (Some(s), Some(e)) = (patch.start, patch.end) {
                body["start"] = call.time(s);
                body["end"] = call.time(e);
            }
            let mut r = call.http.patch(url).json(&body);
            if let Some(etag) = call.seen_etag(&cal.id, &ev_id) {
                r = r.header("If-Match", etag);
            }
            let (_, changed) = call.send(r, "changing the event").await?;
            call.remember(&cal.id, &ev_id, changed["etag"].as_str());
            call.event(&cal, &changed)
                .ok_or_else(|| failed("changing the event", "Google's answer has no event"))
        })
    }

    fn delete(&self, user: &str, id: String) -> BoxFuture<'static, CalendarResult<Deleted>> {
        let call = self.call(user);
        Box::pin(async move {
            let call = call.await?;
            let (cal, ev_id, url) = call.locate(&id).await?;
            let (_, current) = call
                .send(call.http.get(url.clone()), "reading the event")
                .await?;
            let ev = call.event(&cal, &current).ok_or_else(|| not_found(&id))?;
            let mut r = call.http.delete(url);
            if let Some(etag) = call.seen_etag(&cal.id, &ev_id) {
                r = r.header("If-Match", etag);
            }
            call.send(r, "deleting the event").await?;
            call.remember(&cal.id, &ev_id, None);
            Ok(Deleted {
                title: ev.title,
                calendar_name: cal.name,
                occurrence_only: current["recurringEventId"].is_string(),
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::disallowed_methods)] // the test's own directory
    fn a_token_file_is_taken_by_one_taker() {
        let dir = tempfile::tempdir().unwrap();
        let file = TokenFile(
            dir.path()
                .join("calendar")
                .join("google.pending-alice.json"),
        );
        assert_eq!(file.take().unwrap(), None);
        file.save("doc").unwrap();
        let got: Vec<Option<String>> = std::thread::scope(|s| {
            let running: Vec<_> = (0..4)
                .map(|_| s.spawn(|| file.clone().take().unwrap()))
                .collect();
            running.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(got.iter().flatten().collect::<Vec<_>>(), ["doc"]);
        assert_eq!(file.load().unwrap(), None);
        assert_eq!(
            std::fs::read_dir(dir.path().join("calendar"))
                .unwrap()
                .count(),
            0,
            "nothing left behind"
        );
    }

    #[test]
    fn pkce_challenge_is_base64url_sha256_of_the_verifier() {
        // Computed independently (Python's hashlib and base64.urlsafe_b64encode).
        assert_eq!(
            challenge("ringfence-pkce-verifier-0123456789-abcdefghijklmnop"),
            "xnERb-icuv8daY99QW55SBlPsp-4uk_vfKZiu6V9GOI"
        );
        assert_ne!(random_token(48), random_token(48));
    }
}
