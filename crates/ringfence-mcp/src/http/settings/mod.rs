//! The settings page at `/settings`, on the same origin as `/mcp`: a person signs in with
//! their own MCP credential and sees and changes what their assistant keeps — each family's
//! [`Section`] serves its part. This module knows no family: it signs people in and out,
//! lays pages out, and guards them.
//!
//! Guards, each on every request it applies to:
//! - the `Host` must be one the server answers to (as for `/mcp`: DNS rebinding);
//! - a state-changing request (POST) from a browser must come from this origin: an
//!   `Origin` other than the server's own, or a `Sec-Fetch-Site` other than `same-origin`
//!   or `none`, is refused (403) — and must carry the session's CSRF token (403 without);
//! - the session cookie is `HttpOnly`, `SameSite=Lax` (the Google sign-in comes back by a
//!   cross-site navigation), `Secure` with the `__Host-` prefix over HTTPS, and only its
//!   SHA-256 is stored;
//! - failed sign-ins are counted per client address (429 past [`signin::MAX_FAILURES`]);
//! - every response forbids scripts, framing and sniffing (`Content-Security-Policy:
//!   default-src 'none'; style-src 'self'; …`), and is never cached;
//! - every value on a page goes through `maud`'s escaping; a section answers for its user
//!   alone, so another user's ids are not found (404).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method as HttpMethod, StatusCode, header};
use axum::response::{IntoResponse, Response};
use ringfence_core::page::{
    CSRF_FIELD, Markup, Method, PageRequest, PreEscaped, Reply, Section, encode, html,
};

use ringfence_core::time::now_ms;

use super::auth::Auth;

pub mod oauth;
pub mod signin;

pub use oauth::OauthSignIn;
use signin::{Attempts, WebSession, WebSessions};

/// What the settings page serves.
#[derive(Clone)]
pub struct SettingsPage {
    /// The families' sections, in navigation order.
    pub sections: Vec<Arc<dyn Section>>,
    /// Where sessions are kept.
    pub sessions: Arc<dyn WebSessions>,
    /// How long a sign-in lasts.
    pub session_ttl: Duration,
    /// The key ([`one_time_key`]) of a link that signs `local` in once (`ringfence ui`).
    pub one_time: Option<String>,
    /// The origin browsers use (`https://assistant.example.org`) when it is not the
    /// server's own (behind a proxy that serves HTTPS): forms must come from it, the
    /// cookie is `Secure` when it is HTTPS, and addresses given to other sites use it.
    pub public_origin: Option<String>,
    /// Signing in through the OAuth authorization server (with `[http.oauth]`'s JWTs).
    pub oauth: Option<OauthSignIn>,
}

/// A new one-time sign-in token (for the link `ringfence ui` prints).
pub fn one_time_token() -> String {
    signin::random_token()
}

/// What [`SettingsPage::one_time`] holds for `token`.
pub fn one_time_key(token: &str) -> String {
    signin::key_of(token)
}

impl std::fmt::Debug for SettingsPage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.sections.iter().map(|s| s.name()).collect();
        f.debug_struct("SettingsPage")
            .field("sections", &names)
            .field("sessions", &self.sessions)
            .field("session_ttl", &self.session_ttl)
            .finish()
    }
}

impl SettingsPage {
    /// `sections` with sessions in this instance's memory, for 12 hours.
    pub fn new(sections: Vec<Arc<dyn Section>>) -> SettingsPage {
        SettingsPage {
            sections,
            sessions: Arc::new(signin::MemoryWebSessions::default()),
            session_ttl: Duration::from_secs(12 * 3600),
            one_time: None,
            public_origin: None,
            oauth: None,
        }
    }
}

/// The client's address, put in each request by the listener.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer(pub(crate) SocketAddr);

/// The settings page as the router serves it.
pub(super) struct Settings {
    page: SettingsPage,
    /// `None`: a loopback server without credentials, whose one user is `local`.
    auth: Option<Arc<Auth>>,
    /// Host names the server answers to.
    hosts: Vec<String>,
    /// The server itself serves HTTPS.
    tls: bool,
    /// Browsers reach it over HTTPS (itself, or the proxy of `public_origin`).
    https: bool,
    attempts: Attempts,
    /// The one-time link's key and when it was made, until it is used.
    one_time: std::sync::Mutex<Option<(String, i64)>>,
    /// Requests being served ([`MAX_AT_ONCE`]).
    busy: tokio::sync::Semaphore,
    /// Signing in through the authorization server, when its tokens are accepted.
    oauth: Option<oauth::Flow>,
}

/// The largest form a settings page takes (an edited memory is far smaller).
const MAX_FORM_BYTES: usize = 1 << 20;
/// A form must have arrived whole within this.
const FORM_TIMEOUT: Duration = Duration::from_secs(30);
/// Settings requests served at once (over all users); more wait for none and get a 503,
/// so the page cannot take the descriptors and threads `/mcp` needs.
const MAX_AT_ONCE: usize = 64;
/// How long the link `ringfence ui` prints signs someone in.
const ONE_TIME_MS: i64 = 10 * 60 * 1000;

const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const STYLE: &str = include_str!("style.css");

impl Settings {
    pub(super) fn new(
        page: SettingsPage,
        auth: Option<Arc<Auth>>,
        hosts: Vec<String>,
        https: bool,
    ) -> Settings {
        let tls = https;
        let https = tls
            || page
                .public_origin
                .as_deref()
                .is_some_and(|o| o.starts_with("https://"));
        let auth = auth.filter(|a| !a.is_empty());
        // Its tokens must be checked as MCP's are: without [http.oauth] there is no flow.
        let flow = page
            .oauth
            .clone()
            .filter(|_| auth.as_ref().is_some_and(|a| a.jwt.is_some()))
            .map(oauth::Flow::new);
        Settings {
            oauth: flow,
            auth,
            hosts,
            tls,
            https,
            attempts: Attempts::default(),
            one_time: std::sync::Mutex::new(page.one_time.clone().map(|k| (k, now_ms()))),
            busy: tokio::sync::Semaphore::new(MAX_AT_ONCE),
            page,
        }
    }

    /// Whether `user` may still use the page: their token is still configured (a session
    /// outlives no removed token; a JWT's user cannot be checked here and keeps the session
    /// until it ends), or the server has no credentials and they are `local`.
    fn still_allowed(&self, user: &str) -> bool {
        match &self.auth {
            None => user == ringfence_core::LOCAL_USER,
            Some(auth) => auth.tokens.has_user(user) || auth.jwt.is_some(),
        }
    }

    fn cookie_name(&self) -> &'static str {
        if self.https {
            "__Host-ringfence-session"
        } else {
            "ringfence-session"
        }
    }

    /// The cookie a sign-in through the authorization server keeps its state in.
    fn flow_cookie_name(&self) -> &'static str {
        if self.https {
            "__Host-ringfence-signin"
        } else {
            "ringfence-signin"
        }
    }
}

/// The routes `/settings` and below.
pub(super) fn router(settings: Arc<Settings>) -> axum::Router {
    let handler = move |req: Request| {
        let settings = settings.clone();
        async move {
            let Ok(_permit) = settings.busy.try_acquire() else {
                return secured(page_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "The settings page is busy; try again in a moment.",
                ));
            };
            secured(handle(&settings, req).await)
        }
    };
    axum::Router::new()
        .route("/settings", axum::routing::any(handler.clone()))
        .route("/settings/{*rest}", axum::routing::any(handler))
}

/// The headers every settings response carries.
fn secured(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A request's path below `/settings`, its segments decoded.
fn segments(path: &str) -> Vec<String> {
    path.strip_prefix("/settings")
        .unwrap_or_default()
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| {
            url::form_urlencoded::parse(format!("x={}", s.replace('+', "%2B")).as_bytes())
                .next()
                .map_or_else(String::new, |(_, v)| v.into_owned())
        })
        .collect()
}

fn fields(bytes: &[u8]) -> BTreeMap<String, String> {
    url::form_urlencoded::parse(bytes).into_owned().collect()
}

/// The `Host` header's name (without the port), if it is one the server answers to.
fn host_allowed<'h>(headers: &'h HeaderMap, hosts: &[String]) -> Option<&'h str> {
    let host = headers.get(header::HOST)?.to_str().ok()?;
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.ends_with(']') || host.starts_with('[') => {
            if port.chars().all(|c| c.is_ascii_digit()) {
                name
            } else {
                host
            }
        }
        _ => host,
    };
    hosts
        .iter()
        .any(|h| h.eq_ignore_ascii_case(name))
        .then_some(host)
}

/// Why a browser's state-changing request is refused as cross-site, if it is.
fn cross_site(headers: &HeaderMap, own: &[&str]) -> Option<String> {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && !matches!(site, "same-origin" | "none")
    {
        return Some(format!(
            "this form was sent from another site (Sec-Fetch-Site: {site}); changes are taken only from this page"
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let origin = origin.to_str().unwrap_or_default();
        if !own.iter().any(|o| origin.eq_ignore_ascii_case(o)) {
            return Some(format!(
                "this form was sent from another origin ({origin}); changes are taken only from {}",
                own.last().copied().unwrap_or_default()
            ));
        }
    }
    None
}

/// The cookie `name`, when the request carries exactly one: two mean another page of this
/// host planted one (cookies do not tell ports apart), and neither is trusted.
fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|c| c.trim().split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v);
    let first = found.next();
    match found.next() {
        None => first,
        Some(_) => None,
    }
}

async fn handle(settings: &Settings, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let Some(host) = host_allowed(&parts.headers, &settings.hosts).map(str::to_owned) else {
        return page_error(
            StatusCode::FORBIDDEN,
            "This server does not answer to that host name.",
        );
    };
    // The origin the request came to, and the public one behind a proxy (which is the
    // one given to other sites).
    let here = format!("{}://{host}", if settings.tls { "https" } else { "http" });
    let own_origin = settings.page.public_origin.clone().unwrap_or(here.clone());
    let method = match parts.method {
        HttpMethod::GET | HttpMethod::HEAD => Method::Get,
        HttpMethod::POST => Method::Post,
        _ => {
            return page_error(
                StatusCode::METHOD_NOT_ALLOWED,
                "The settings page takes GET and POST only.",
            );
        }
    };
    let path = segments(parts.uri.path());
    let query = fields(parts.uri.query().unwrap_or_default().as_bytes());
    let form = if method == Method::Post {
        if let Some(why) = cross_site(&parts.headers, &[&here, &own_origin]) {
            tracing::warn!(reason = %why, "settings page: cross-site request refused");
            return page_error(StatusCode::FORBIDDEN, &why);
        }
        match tokio::time::timeout(FORM_TIMEOUT, axum::body::to_bytes(body, MAX_FORM_BYTES)).await {
            Ok(Ok(b)) => fields(&b),
            Ok(Err(_)) => {
                return page_error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "The form is larger than the settings page takes (1 MiB).",
                );
            }
            Err(_) => {
                return page_error(
                    StatusCode::REQUEST_TIMEOUT,
                    "The form did not arrive whole within 30 seconds.",
                );
            }
        }
    } else {
        BTreeMap::new()
    };
    let peer = parts
        .extensions
        .get::<Peer>()
        .map_or(IpAddr::from([0, 0, 0, 0]), |p| p.0.ip());
    let cookie_value = cookie(&parts.headers, settings.cookie_name()).map(str::to_owned);
    let session = match &cookie_value {
        None => None,
        Some(value) => {
            let key = signin::key_of(value);
            let store = settings.page.sessions.clone();
            match blocking(move || store.find(&key, now_ms())).await {
                Ok(found) => found.filter(|s| settings.still_allowed(&s.user)),
                Err(e) => {
                    tracing::error!(error = %e, "settings page: the session store failed");
                    return page_error(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "Sessions cannot be read just now; try again in a moment.",
                    );
                }
            }
        }
    };
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    match (method, path.as_slice()) {
        (Method::Get, ["style.css"]) => (
            [
                (header::CONTENT_TYPE, "text/css; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            STYLE,
        )
            .into_response(),
        (Method::Get, ["login"]) => match (session, query.get("once")) {
            (_, Some(once)) => {
                let taken = {
                    let mut slot = settings.one_time.lock().unwrap_or_else(|e| e.into_inner());
                    let ok = slot.as_ref().is_some_and(|(k, made)| {
                        signin::same_secret(k, &signin::key_of(once))
                            && now_ms() - made < ONE_TIME_MS
                    });
                    if ok {
                        *slot = None;
                    }
                    ok
                };
                if taken {
                    start_session(settings, ringfence_core::LOCAL_USER.to_owned()).await
                } else {
                    settings.attempts.failed(peer, Instant::now());
                    login_page(
                        settings,
                        StatusCode::UNAUTHORIZED,
                        Some(
                            "This sign-in link was used already, is more than 10 minutes old, or is not this server's: run `ringfence ui` again for a new one.",
                        ),
                    )
                }
            }
            (Some(_), None) => see_other("/settings"),
            (None, None) => login_page(settings, StatusCode::OK, None),
        },
        (Method::Post, ["login"]) => sign_in(settings, &form, peer).await,
        (Method::Get, ["login", "oauth"]) => start_flow(settings, &own_origin, peer).await,
        (Method::Get, ["login", "callback"]) => {
            let flow_cookie = cookie(&parts.headers, settings.flow_cookie_name());
            finish_flow(settings, &own_origin, &query, flow_cookie, peer).await
        }
        (Method::Post, ["logout"]) => {
            let Some(session) = session else {
                return see_other("/settings/login");
            };
            if !csrf_ok(&form, &session) {
                return csrf_refused();
            }
            if let Some(value) = cookie_value {
                let key = signin::key_of(&value);
                let store = settings.page.sessions.clone();
                if let Err(e) = blocking(move || store.remove(&key)).await {
                    tracing::error!(error = %e, "settings page: the session store failed");
                }
            }
            tracing::info!(user = %session.user.escape_debug(), "settings page: signed out");
            let mut response = see_other("/settings/login");
            set_cookie(&mut response, settings, "", 0);
            response
        }
        _ => {
            let Some(session) = session else {
                return see_other("/settings/login");
            };
            if method == Method::Post && !csrf_ok(&form, &session) {
                return csrf_refused();
            }
            let notice = notice_of(&query, &session);
            match path.as_slice() {
                [] => layout(settings, &session, "Settings", notice, overview(settings)),
                [name, rest @ ..] => {
                    let Some(section) = settings
                        .page
                        .sections
                        .iter()
                        .find(|s| s.name() == *name)
                        .cloned()
                    else {
                        return not_found(settings, &session);
                    };
                    let rest: Vec<String> = rest.iter().map(|s| (*s).to_owned()).collect();
                    let mut form = form;
                    form.remove(CSRF_FIELD);
                    let (user, csrf) = (session.user.clone(), session.csrf.clone());
                    let base = format!("/settings/{name}");
                    let origin = own_origin.clone();
                    let reply = blocking(move || {
                        Ok(section.handle(&PageRequest {
                            user: &user,
                            method,
                            rest: &rest,
                            query: &query,
                            form: &form,
                            csrf_token: &csrf,
                            base: &base,
                            origin: &origin,
                        }))
                    })
                    .await
                    .unwrap_or_else(|e| Reply::Failed(e.to_string()));
                    answer(settings, &session, notice, reply)
                }
            }
        }
    }
}

/// Runs `work` on a blocking thread (stores are synchronous).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(std::io::Error::other)?
}

fn csrf_ok(form: &BTreeMap<String, String>, session: &WebSession) -> bool {
    form.get(CSRF_FIELD)
        .is_some_and(|t| signin::same_secret(t, &session.csrf))
}

fn csrf_refused() -> Response {
    tracing::warn!("settings page: a form without its CSRF token refused");
    page_error(
        StatusCode::FORBIDDEN,
        "This form did not come from your settings page (its security token is missing or old). Reload the page and try again.",
    )
}

/// A notice the page was redirected with: only one this session's own redirect signed.
fn notice_of(query: &BTreeMap<String, String>, session: &WebSession) -> Option<String> {
    let text = query.get("notice")?;
    let sig = query.get("n")?;
    signin::same_secret(sig, &notice_sig(text, &session.csrf)).then(|| text.clone())
}

fn notice_sig(text: &str, csrf: &str) -> String {
    signin::key_of(&format!("{csrf}\n{text}"))[..32].to_owned()
}

fn see_other(to: &str) -> Response {
    (StatusCode::SEE_OTHER, [(header::LOCATION, to.to_owned())]).into_response()
}

fn set_cookie(response: &mut Response, settings: &Settings, value: &str, max_age: u64) {
    set_named_cookie(response, settings, settings.cookie_name(), value, max_age);
}

fn set_named_cookie(
    response: &mut Response,
    settings: &Settings,
    name: &str,
    value: &str,
    max_age: u64,
) {
    let cookie = format!(
        "{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{}",
        if settings.https { "; Secure" } else { "" }
    );
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
}

async fn sign_in(settings: &Settings, form: &BTreeMap<String, String>, peer: IpAddr) -> Response {
    let now = Instant::now();
    if let Some(wait) = settings.attempts.refused(peer, now) {
        let mut response = login_page(
            settings,
            StatusCode::TOO_MANY_REQUESTS,
            Some(&format!(
                "Too many sign-in attempts from your address: wait {} minutes and try again.",
                wait.div_ceil(60)
            )),
        );
        if let Ok(v) = HeaderValue::from_str(&wait.to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return response;
    }
    let user = match &settings.auth {
        None => Ok(ringfence_core::LOCAL_USER.to_owned()),
        Some(auth) => {
            let token = form.get("token").map_or("", |t| t.trim());
            if token.is_empty() {
                Err("Enter your access token.".to_owned())
            } else {
                auth.user_of(token).await.map_err(|f| {
                    format!(
                        "That access token is not valid ({}). Use the token your MCP client sends.",
                        f.description
                    )
                })
            }
        }
    };
    let user = match user {
        Ok(u) => u,
        Err(why) => {
            settings.attempts.failed(peer, now);
            tracing::warn!(%peer, "settings page: a sign-in failed");
            return login_page(settings, StatusCode::UNAUTHORIZED, Some(&why));
        }
    };
    // Failures are not forgiven by a success: a person with a token of their own must not
    // be able to guess others' between sign-ins.
    start_session(settings, user).await
}

/// Where the authorization server sends the browser back.
fn callback_uri(own_origin: &str) -> String {
    format!("{own_origin}/settings/login/callback")
}

/// Starts a sign-in through the authorization server: a new state and PKCE verifier in the
/// flow cookie, and the browser sent to the authorization endpoint.
async fn start_flow(settings: &Settings, own_origin: &str, peer: IpAddr) -> Response {
    let Some(flow) = &settings.oauth else {
        return login_page(
            settings,
            StatusCode::NOT_FOUND,
            Some(
                "This server does not sign people in through an authorization server: use your access token.",
            ),
        );
    };
    if let Some(wait) = settings.attempts.refused(peer, Instant::now()) {
        return login_page(
            settings,
            StatusCode::TOO_MANY_REQUESTS,
            Some(&format!(
                "Too many sign-in attempts from your address: wait {} minutes and try again.",
                wait.div_ceil(60)
            )),
        );
    }
    let endpoints = match flow.endpoints().await {
        Ok(e) => e,
        Err(e) => return login_page(settings, StatusCode::BAD_GATEWAY, Some(&e.0)),
    };
    let (state, verifier) = (signin::random_token(), signin::random_token());
    let to = flow.authorize_url(
        &endpoints.authorization,
        &callback_uri(own_origin),
        &state,
        &verifier,
    );
    let mut response = see_other(&to);
    set_named_cookie(
        &mut response,
        settings,
        settings.flow_cookie_name(),
        &oauth::cookie_value(&state, &verifier),
        oauth::FLOW_SECS,
    );
    response
}

/// Finishes a sign-in through the authorization server: the state must be the browser's
/// own, the code is exchanged with the verifier, and the token must be one `/mcp` accepts.
async fn finish_flow(
    settings: &Settings,
    own_origin: &str,
    query: &BTreeMap<String, String>,
    flow_cookie: Option<&str>,
    peer: IpAddr,
) -> Response {
    let (Some(flow), Some(auth)) = (&settings.oauth, &settings.auth) else {
        return see_other("/settings/login");
    };
    let now = Instant::now();
    let fail = |status: StatusCode, why: &str| {
        let mut r = login_page(settings, status, Some(why));
        set_named_cookie(&mut r, settings, settings.flow_cookie_name(), "", 0);
        r
    };
    if let Some(wait) = settings.attempts.refused(peer, now) {
        return fail(
            StatusCode::TOO_MANY_REQUESTS,
            &format!(
                "Too many sign-in attempts from your address: wait {} minutes and try again.",
                wait.div_ceil(60)
            ),
        );
    }
    let started = flow_cookie.and_then(oauth::parse_cookie);
    let state = query.get("state").map_or("", String::as_str);
    let Some((_, verifier)) = started.filter(|(s, _)| signin::same_secret(s, state)) else {
        settings.attempts.failed(peer, now);
        tracing::warn!(%peer, "settings page: a sign-in came back without this browser's state");
        return fail(
            StatusCode::BAD_REQUEST,
            "This sign-in was not started in this browser, or took more than 10 minutes: start it again.",
        );
    };
    if let Some(error) = query.get("error") {
        tracing::info!(error = %error.escape_debug(), "settings page: the authorization server did not sign the person in");
        return fail(StatusCode::UNAUTHORIZED, oauth::refusal_words(error));
    }
    let Some(code) = query
        .get("code")
        .filter(|c| !c.is_empty() && c.len() <= 4096)
    else {
        return fail(
            StatusCode::BAD_REQUEST,
            "The sign-in service sent you back without a code: start again.",
        );
    };
    let endpoints = match flow.endpoints().await {
        Ok(e) => e,
        Err(e) => return fail(StatusCode::BAD_GATEWAY, &e.0),
    };
    let token = match flow
        .exchange(&endpoints.token, code, &callback_uri(own_origin), verifier)
        .await
    {
        Ok(t) => t,
        // Not counted against the address: the browser's own state came back, so this is
        // the authorization server's failure (or its answer), not someone guessing.
        Err(e) => return fail(StatusCode::BAD_GATEWAY, &e.0),
    };
    let user = match auth.user_of(&token).await {
        Ok(u) => u,
        Err(f) => {
            tracing::warn!(reason = %f.description, "settings page: the authorization server's token is not accepted");
            return fail(
                StatusCode::UNAUTHORIZED,
                &format!(
                    "The sign-in service's token for you is not accepted by this server ({}): the operator must check [http.oauth].",
                    f.description
                ),
            );
        }
    };
    let mut response = start_session(settings, user).await;
    set_named_cookie(&mut response, settings, settings.flow_cookie_name(), "", 0);
    response
}

/// Signs `user` in: a new session stored, its cookie set, on to the settings.
async fn start_session(settings: &Settings, user: String) -> Response {
    let value = signin::random_token();
    let session = WebSession {
        user: user.clone(),
        csrf: signin::random_token(),
    };
    let ttl = settings.page.session_ttl;
    let expires = now_ms() + ttl.as_millis() as i64;
    let (store, key) = (settings.page.sessions.clone(), signin::key_of(&value));
    if let Err(e) = blocking(move || store.create(&key, &session, expires)).await {
        tracing::error!(error = %e, "settings page: the session store failed");
        return page_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "You could not be signed in: sessions cannot be stored just now. Try again in a moment.",
        );
    }
    tracing::info!(user = %user.escape_debug(), "settings page: signed in");
    let mut response = see_other("/settings");
    set_cookie(&mut response, settings, &value, ttl.as_secs());
    response
}

fn document(title: &str, header_part: Markup, main: Markup) -> Markup {
    html! {
        (PreEscaped("<!DOCTYPE html>"))
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · ringfence" }
                link rel="stylesheet" href="/settings/style.css";
            }
            body {
                (header_part)
                main { h1 { (title) } (main) }
            }
        }
    }
}

fn login_page(settings: &Settings, status: StatusCode, problem: Option<&str>) -> Response {
    let main = html! {
        @if let Some(p) = problem { p.problem role="alert" { (p) } }
        @if let Some(flow) = &settings.oauth {
            p.oauth {
                a.button href="/settings/login/oauth" { "Sign in with " (flow.config.name) }
            }
            p { "Or:" }
        }
        form.signin method="post" action="/settings/login" {
            @if settings.auth.is_some() {
                p { "Sign in with the access token your assistant's MCP client uses for this server." }
                label for="token" { "Access token" }
                input #token type="password" name="token" autocomplete="current-password" required autofocus;
            } @else {
                p { "This server runs on this machine without credentials: its one user is " code { "local" } "." }
            }
            button type="submit" { "Sign in" }
        }
    };
    let header_part = html! { header { p.brand { "ringfence" } } };
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        document("Sign in", header_part, main).into_string(),
    )
        .into_response()
}

fn page_header(settings: &Settings, session: &WebSession) -> Markup {
    html! {
        header {
            p.brand { a href="/settings" { "ringfence" } }
            nav aria-label="Sections" {
                ul {
                    @for s in &settings.page.sections {
                        li { a href=(format!("/settings/{}", s.name())) { (s.title()) } }
                    }
                }
            }
            form.signout method="post" action="/settings/logout" {
                span.user { "Signed in as " strong { (session.user) } }
                input type="hidden" name=(CSRF_FIELD) value=(session.csrf);
                button type="submit" { "Sign out" }
            }
        }
    }
}

fn layout(
    settings: &Settings,
    session: &WebSession,
    title: &str,
    notice: Option<String>,
    body: Markup,
) -> Response {
    let main = html! {
        @if let Some(n) = notice { p.notice role="status" { (n) } }
        (body)
    };
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        document(title, page_header(settings, session), main).into_string(),
    )
        .into_response()
}

fn overview(settings: &Settings) -> Markup {
    html! {
        p { "What your assistant keeps about you and does for you. Each part below is yours alone." }
        @if settings.page.sections.is_empty() {
            p { "No feature that keeps anything for you is on in this server." }
        } @else {
            ul.sections {
                @for s in &settings.page.sections {
                    li { a href=(format!("/settings/{}", s.name())) { (s.title()) } }
                }
            }
        }
    }
}

fn not_found(settings: &Settings, session: &WebSession) -> Response {
    let mut response = layout(
        settings,
        session,
        "Not found",
        None,
        html! { p { "There is nothing here for you. " a href="/settings" { "Back to your settings" } } },
    );
    *response.status_mut() = StatusCode::NOT_FOUND;
    response
}

fn page_error(status: StatusCode, message: &str) -> Response {
    let main = html! { p.problem role="alert" { (message) } p { a href="/settings" { "Back to your settings" } } };
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        document(
            status.canonical_reason().unwrap_or("Error"),
            html! { header { p.brand { "ringfence" } } },
            main,
        )
        .into_string(),
    )
        .into_response()
}

fn answer(
    settings: &Settings,
    session: &WebSession,
    notice: Option<String>,
    reply: Reply,
) -> Response {
    match reply {
        Reply::Page { title, body } => layout(settings, session, &title, notice, body),
        Reply::Redirect { to, notice } => {
            if !to.starts_with('/')
                || to.starts_with("//")
                || to.contains('\\')
                || to.chars().any(char::is_control)
            {
                return page_error(StatusCode::INTERNAL_SERVER_ERROR, "A bad redirect.");
            }
            let to = match notice {
                None => to,
                Some(n) => format!(
                    "{to}{}notice={}&n={}",
                    if to.contains('?') { '&' } else { '?' },
                    encode(&n),
                    notice_sig(&n, &session.csrf)
                ),
            };
            see_other(&to)
        }
        Reply::Leave(to) => {
            if !(to.starts_with("https://") || to.starts_with("http://")) {
                return page_error(StatusCode::INTERNAL_SERVER_ERROR, "A bad redirect.");
            }
            see_other(&to)
        }
        Reply::Download {
            file_name,
            content_type,
            body,
        } => {
            let disposition = format!("attachment; filename=\"{}\"", file_name.replace('"', ""));
            let mut response =
                ([(header::CONTENT_TYPE, content_type.to_owned())], body).into_response();
            if let Ok(v) = HeaderValue::from_str(&disposition) {
                response
                    .headers_mut()
                    .insert(header::CONTENT_DISPOSITION, v);
            }
            response
        }
        Reply::NotFound => not_found(settings, session),
        Reply::Invalid(why) => {
            let mut r = layout(
                settings,
                session,
                "Not done",
                None,
                html! { p.problem role="alert" { (why) } },
            );
            *r.status_mut() = StatusCode::BAD_REQUEST;
            r
        }
        Reply::Failed(why) => {
            tracing::error!(error = %why, "settings page: a section failed");
            let mut r = layout(
                settings,
                session,
                "Something failed",
                None,
                html! { p.problem role="alert" { (why) } },
            );
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn other_sites_and_origins_are_refused() {
        let own = &["http://127.0.0.1:8765", "https://assistant.example.org"][..];
        assert!(
            cross_site(&headers(&[]), own).is_none(),
            "a client without them"
        );
        assert!(
            cross_site(
                &headers(&[("origin", own[0]), ("sec-fetch-site", "same-origin")]),
                own
            )
            .is_none()
        );
        assert!(
            cross_site(
                &headers(&[("origin", "https://assistant.example.org")]),
                own
            )
            .is_none(),
            "the public origin behind a proxy"
        );
        assert!(cross_site(&headers(&[("sec-fetch-site", "none")]), own).is_none());
        assert!(cross_site(&headers(&[("sec-fetch-site", "same-site")]), own).is_some());
        assert!(cross_site(&headers(&[("sec-fetch-site", "cross-site")]), own).is_some());
        assert!(cross_site(&headers(&[("origin", "http://127.0.0.1:9999")]), own).is_some());
        assert!(cross_site(&headers(&[("origin", "null")]), own).is_some());
    }

    #[test]
    fn only_known_hosts_are_answered() {
        let hosts = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "[::1]".to_owned(),
        ];
        assert_eq!(
            host_allowed(&headers(&[("host", "127.0.0.1:8765")]), &hosts),
            Some("127.0.0.1:8765")
        );
        assert_eq!(
            host_allowed(&headers(&[("host", "localhost")]), &hosts),
            Some("localhost")
        );
        assert_eq!(
            host_allowed(&headers(&[("host", "[::1]:80")]), &hosts),
            Some("[::1]:80")
        );
        assert_eq!(
            host_allowed(&headers(&[("host", "evil.example:8765")]), &hosts),
            None
        );
        assert_eq!(host_allowed(&headers(&[]), &hosts), None);
    }

    #[test]
    fn paths_decode_and_cookies_are_found_by_name() {
        assert_eq!(
            segments("/settings/memories/memory/3/edit"),
            ["memories", "memory", "3", "edit"]
        );
        assert_eq!(segments("/settings"), Vec::<String>::new());
        assert_eq!(segments("/settings/a%2Fb/c+d"), ["a/b", "c+d"]);
        let h = headers(&[("cookie", "a=1; ringfence-session=xyz; b=2")]);
        assert_eq!(cookie(&h, "ringfence-session"), Some("xyz"));
        assert_eq!(cookie(&h, "ringfence"), None);
    }

    #[test]
    fn a_notice_shows_only_when_this_session_signed_it() {
        let s = WebSession {
            user: "a".into(),
            csrf: "c1".into(),
        };
        let q = |text: &str, sig: &str| {
            BTreeMap::from([
                ("notice".to_owned(), text.to_owned()),
                ("n".to_owned(), sig.to_owned()),
            ])
        };
        assert_eq!(
            notice_of(&q("Saved.", &notice_sig("Saved.", "c1")), &s).as_deref(),
            Some("Saved.")
        );
        assert_eq!(notice_of(&q("Go to evil.example", "0"), &s), None);
        assert_eq!(
            notice_of(&q("Saved.", &notice_sig("Saved.", "c2")), &s),
            None
        );
    }
}
