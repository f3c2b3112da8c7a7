//! CalDAV (RFC 4791) servers: calendars found from the configured URL (the principal's
//! calendar home, or the URL itself when it is a calendar), time-range `REPORT`s, `PUT` with
//! `If-None-Match: *` to create and `If-Match` to change, `DELETE` with `If-Match`. A
//! precondition that fails (412) is a conflict: someone else changed the event, and nothing
//! is overwritten. Credentials go in `Authorization` only; they never appear in errors.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::tools::{CalendarError, CalendarResult};
use reqwest::{Method, StatusCode};
use ringfence_core::BoxFuture;

use crate::backend::{CalendarInfo, ObjectStore, Stored};
use crate::event::compact_utc;

const DAV: &str = "DAV:";
const CALDAV: &str = "urn:ietf:params:xml:ns:caldav";

/// Where a user's CalDAV calendars are, and the login.
#[derive(Clone, PartialEq, Eq)]
pub struct CalDavAccount {
    /// The server, principal or calendar URL.
    pub url: url::Url,
    pub username: Option<String>,
    pub password: Option<String>,
}

impl std::fmt::Debug for CalDavAccount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CalDavAccount")
            .field("url", &self.url.as_str())
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// One user's CalDAV calendars.
#[derive(Debug, Clone)]
pub struct CalDavStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    http: reqwest::Client,
    account: CalDavAccount,
    /// The login the user entered on the settings page (not the operator's), whose URL is
    /// held to the SSRF guard.
    own: bool,
    /// The calendars found, kept for a minute.
    found: Mutex<Option<(std::time::Instant, Vec<CalendarInfo>)>>,
}

/// How long the list of calendars is kept before it is asked for again.
const CALENDARS_KEPT: Duration = Duration::from_secs(60);

impl CalDavStore {
    pub fn new(
        account: CalDavAccount,
        timeout: Duration,
    ) -> Result<CalDavStore, ringfence_net::ClientError> {
        let loopback = match account.url.host() {
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            Some(url::Host::Domain(d)) => d == "localhost",
            None => false,
        };
        if account.url.scheme() == "http" && account.username.is_some() && !loopback {
            tracing::warn!(host = %host(&account.url), "the CalDAV login goes over plain http: anyone on the way can read it; use https");
        }
        let http = crate::http_client(timeout)?;
        Ok(CalDavStore {
            inner: Arc::new(Inner {
                http,
                account,
                own: false,
                found: Mutex::new(None),
            }),
        })
    }

    /// The store of a login the user entered themselves: its URL (an address in it) is
    /// checked by `guard` now, and every host name when the client connects (the guard is
    /// its resolver, so each connection's addresses are the ones checked; the environment's
    /// proxy is not used).
    pub fn guarded(
        account: CalDavAccount,
        timeout: Duration,
        guard: Arc<ringfence_net::Guard>,
    ) -> CalendarResult<CalDavStore> {
        guard.check_url(&account.url).map_err(|e| refused(&e))?;
        let outbound = ringfence_net::Outbound {
            connect_timeout: Duration::from_secs(10),
            timeout,
        };
        let http = ringfence_net::guarded_client(&outbound, guard, None)
            .map_err(|e| CalendarError::Failed(e.to_string()))?;
        Ok(CalDavStore {
            inner: Arc::new(Inner {
                http,
                account,
                own: true,
                found: Mutex::new(None),
            }),
        })
    }

    /// Whether this store is for `account` (the user's own login or the operator's).
    pub(crate) fn is_for(&self, account: &CalDavAccount, own: bool) -> bool {
        self.inner.own == own && self.inner.account == *account
    }
}

/// The guard refused the user's own CalDAV URL.
fn refused(e: &ringfence_net::GuardError) -> CalendarError {
    CalendarError::NotConnected(format!(
        "CalDAV calendar is not connected: {} Change the URL on your settings page (Calendar).",
        crate::login::refusal_text(e)
    ))
}

fn host(u: &url::Url) -> String {
    u.host_str().unwrap_or("the CalDAV server").to_owned()
}

impl Inner {
    fn request(&self, method: Method, url: &url::Url) -> reqwest::RequestBuilder {
        let mut r = self
            .http
            .request(method, url.clone())
            .header("User-Agent", ringfence_net::user_agent());
        if let Some(user) = &self.account.username {
            r = r.basic_auth(user, self.account.password.as_deref());
        }
        r
    }

    async fn send(
        &self,
        r: reqwest::RequestBuilder,
        url: &url::Url,
    ) -> CalendarResult<reqwest::Response> {
        let resp = r.send().await.map_err(|e| {
            if let Some(g) = ringfence_net::refusal_in(&e) {
                return refused(g);
            }
            CalendarError::Failed(format!(
                "the CalDAV server {} could not be reached: {}",
                host(url),
                ringfence_net::error_chain(&e.without_url())
            ))
        })?;
        match resp.status() {
            StatusCode::FORBIDDEN => Err(CalendarError::Failed(format!(
                "the CalDAV server {} does not allow this (403 Forbidden): the calendar may be read-only, or shared with you without write access",
                host(url)
            ))),
            StatusCode::UNAUTHORIZED => Err(CalendarError::NotConnected(format!(
                "CalDAV calendar is not connected: {} refused the login ({}); {}",
                host(url),
                resp.status(),
                if self.own {
                    "enter your username and password again on your settings page (Calendar)"
                } else {
                    "check [calendar] username and password (or password_env)"
                }
            ))),
            _ => Ok(resp),
        }
    }

    async fn propfind(
        &self,
        url: &url::Url,
        depth: &str,
        props: &str,
    ) -> CalendarResult<Vec<DavResponse>> {
        let body = format!(
            r#"<?xml version="1.0" encoding="utf-8"?><d:propfind xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:prop>{props}</d:prop></d:propfind>"#
        );
        let r = self
            .request(Method::from_bytes(b"PROPFIND").expect("a method"), url)
            .header("Depth", depth)
            .header("Content-Type", "application/xml; charset=utf-8")
            .body(body);
        let resp = self.send(r, url).await?;
        multistatus(resp, url).await
    }

    async fn discover(&self) -> CalendarResult<Vec<CalendarInfo>> {
        let base = &self.account.url;
        let at_base = self
            .propfind(
                base,
                "0",
                "<d:resourcetype/><d:displayname/><d:current-user-principal/><c:calendar-home-set/>",
            )
            .await?;
        let first = at_base.first();
        if let Some(r) = first
            && r.is_calendar
        {
            return Ok(vec![r.calendar(base)]);
        }
        let mut home = first.and_then(|r| r.home.clone());
        if home.is_none()
            && let Some(principal) = first.and_then(|r| r.principal.clone())
        {
            let p = join(base, &principal)?;
            home = self
                .propfind(&p, "0", "<c:calendar-home-set/>")
                .await?
                .first()
                .and_then(|r| r.home.clone());
        }
        let home = match home {
            Some(h) => join(base, &h)?,
            None => base.clone(),
        };
        let listed = self
            .propfind(
                &home,
                "1",
                "<d:resourcetype/><d:displayname/><c:supported-calendar-component-set/>",
            )
            .await?;
        let cals: Vec<CalendarInfo> = listed
            .iter()
            .filter(|r| r.is_calendar && r.events)
            .map(|r| r.calendar(base))
            .collect();
        if cals.is_empty() {
            return Err(CalendarError::NotConnected(format!(
                "CalDAV calendar is not connected: no calendar for events was found at {} ({}); set [calendar] url to the calendar's or the principal's URL",
                host(base),
                home.path()
            )));
        }
        Ok(cals)
    }

    async fn calendars(&self) -> CalendarResult<Vec<CalendarInfo>> {
        if let Some((at, cals)) = self
            .found
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            && at.elapsed() < CALENDARS_KEPT
        {
            return Ok(cals.clone());
        }
        let cals = self.discover().await?;
        *self.found.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((std::time::Instant::now(), cals.clone()));
        Ok(cals)
    }

    async fn query(
        &self,
        cal: &CalendarInfo,
        from_ms: i64,
        to_ms: i64,
    ) -> CalendarResult<Vec<Stored>> {
        let url = join(&self.account.url, &cal.id)?;
        let body = format!(
            r#"<?xml version="1.0" encoding="utf-8"?><c:calendar-query xmlns:d="DAV:" xmlns:c="urn:ietf:params:xml:ns:caldav"><d:prop><d:getetag/><c:calendar-data/></d:prop><c:filter><c:comp-filter name="VCALENDAR"><c:comp-filter name="VEVENT"><c:time-range start="{}" end="{}"/></c:comp-filter></c:comp-filter></c:filter></c:calendar-query>"#,
            compact_utc(from_ms),
            compact_utc(to_ms)
        );
        let r = self
            .request(Method::from_bytes(b"REPORT").expect("a method"), &url)
            .header("Depth", "1")
            .header("Content-Type", "application/xml; charset=utf-8")
            .body(body);
        let resp = self.send(r, &url).await?;
        Ok(multistatus(resp, &url)
            .await?
            .into_iter()
            .filter_map(|r| {
                Some(Stored {
                    href: r.href,
                    etag: r.etag,
                    ics: r.data?,
                })
            })
            .collect())
    }

    async fn get(&self, href: &str) -> CalendarResult<Option<Stored>> {
        let url = join(&self.account.url, href)?;
        let resp = self.send(self.request(Method::GET, &url), &url).await?;
        match resp.status() {
            StatusCode::NOT_FOUND | StatusCode::GONE => Ok(None),
            s if s.is_success() => {
                let etag = etag_of(&resp);
                let ics = resp
                    .text()
                    .await
                    .map_err(|e| CalendarError::Failed(format!("reading the event failed: {e}")))?;
                Ok(Some(Stored {
                    href: href.to_owned(),
                    etag,
                    ics,
                }))
            }
            s => Err(status_error(s, &url, "reading the event")),
        }
    }

    async fn put(
        &self,
        href: &str,
        ics: String,
        precondition: Precondition,
    ) -> CalendarResult<Stored> {
        let url = join(&self.account.url, href)?;
        let mut r = self
            .request(Method::PUT, &url)
            .header("Content-Type", "text/calendar; charset=utf-8");
        r = match &precondition {
            Precondition::New => r.header("If-None-Match", "*"),
            Precondition::Match(e) => r.header("If-Match", e),
        };
        let resp = self.send(r.body(ics.clone()), &url).await?;
        match resp.status() {
            s if s.is_success() => {
                let etag = etag_of(&resp);
                if etag.is_some() {
                    return Ok(Stored {
                        href: href.to_owned(),
                        etag,
                        ics,
                    });
                }
                // The server changed what it stored (no ETag given): read it back.
                Ok(self.get(href).await?.unwrap_or(Stored {
                    href: href.to_owned(),
                    etag: None,
                    ics,
                }))
            }
            StatusCode::PRECONDITION_FAILED => Err(match precondition {
                Precondition::New => CalendarError::Failed(
                    "an event with this name exists already on the server".into(),
                ),
                Precondition::Match(_) => conflict(),
            }),
            StatusCode::NOT_FOUND | StatusCode::GONE => Err(gone()),
            s => Err(status_error(s, &url, "saving the event")),
        }
    }

    async fn delete(&self, href: &str, etag: String) -> CalendarResult<()> {
        let url = join(&self.account.url, href)?;
        let r = self.request(Method::DELETE, &url).header("If-Match", etag);
        let resp = self.send(r, &url).await?;
        match resp.status() {
            s if s.is_success() => Ok(()),
            StatusCode::PRECONDITION_FAILED => Err(conflict()),
            StatusCode::NOT_FOUND | StatusCode::GONE => Err(gone()),
            s => Err(status_error(s, &url, "deleting the event")),
        }
    }
}

enum Precondition {
    New,
    Match(String),
}

/// A change without the ETag it was read at could overwrite someone else's: refused.
fn no_etag() -> CalendarError {
    CalendarError::Failed(
        "the server gave no ETag for this event, so it cannot be changed without risking someone else's change; change it in another calendar application".into(),
    )
}

fn conflict() -> CalendarError {
    CalendarError::Conflict(
        "the event was changed on the server by someone else while this change was made (its ETag no longer matches); nothing was overwritten. List the events again, then retry".into(),
    )
}

fn gone() -> CalendarError {
    CalendarError::NotFound(
        "the event is gone from the server (deleted by someone else); list the events again".into(),
    )
}

fn status_error(s: StatusCode, url: &url::Url, doing: &str) -> CalendarError {
    CalendarError::Failed(format!(
        "{doing} failed: the CalDAV server {} answered {s}",
        host(url)
    ))
}

fn etag_of(resp: &reqwest::Response) -> Option<String> {
    resp.headers()
        .get("etag")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// `href` (absolute, or a path on the server) against the configured URL, on the same
/// server only: a response naming another host is not followed.
fn join(base: &url::Url, href: &str) -> CalendarResult<url::Url> {
    let u = base.join(href).map_err(|_| {
        CalendarError::Failed(format!("the server named an unusable location {href:?}"))
    })?;
    if u.origin() != base.origin() {
        return Err(CalendarError::Failed(format!(
            "the server pointed to another host ({}); only {} is used",
            host(&u),
            host(base)
        )));
    }
    Ok(u)
}

/// One `<d:response>` of a multistatus, the parts ringfence reads.
#[derive(Debug, Default)]
struct DavResponse {
    href: String,
    is_calendar: bool,
    /// The calendar takes events (no component set said, or one naming VEVENT).
    events: bool,
    name: Option<String>,
    principal: Option<String>,
    home: Option<String>,
    etag: Option<String>,
    data: Option<String>,
}

impl DavResponse {
    fn calendar(&self, base: &url::Url) -> CalendarInfo {
        let mut path = join(base, &self.href)
            .map(|u| u.path().to_owned())
            .unwrap_or_else(|_| self.href.clone());
        // A collection, whether or not the server wrote its slash: its objects are below it.
        if !path.ends_with('/') {
            path.push('/');
        }
        let name = self
            .name
            .clone()
            .filter(|n| !n.trim().is_empty())
            .unwrap_or_else(|| {
                path.trim_end_matches('/')
                    .rsplit('/')
                    .next()
                    .unwrap_or("calendar")
                    .to_owned()
            });
        CalendarInfo { id: path, name }
    }
}

async fn multistatus(resp: reqwest::Response, url: &url::Url) -> CalendarResult<Vec<DavResponse>> {
    let status = resp.status();
    if status.as_u16() != 207 {
        return Err(if status == StatusCode::NOT_FOUND {
            CalendarError::NotConnected(format!(
                "CalDAV calendar is not connected: nothing at {} on {} (404); check [calendar] url",
                url.path(),
                host(url)
            ))
        } else {
            status_error(status, url, "asking for calendars")
        });
    }
    let text = resp
        .text()
        .await
        .map_err(|e| CalendarError::Failed(format!("reading the server's answer failed: {e}")))?;
    parse_multistatus(&text).map_err(|e| {
        CalendarError::Failed(format!(
            "the CalDAV server {} sent unreadable XML: {e}",
            host(url)
        ))
    })
}

fn parse_multistatus(text: &str) -> Result<Vec<DavResponse>, roxmltree::Error> {
    let doc = roxmltree::Document::parse(text)?;
    let is = |n: &roxmltree::Node, ns: &str, name: &str| {
        n.is_element() && n.tag_name().name() == name && n.tag_name().namespace() == Some(ns)
    };
    let child_href = |n: roxmltree::Node| {
        n.children()
            .find(|c| is(c, DAV, "href"))
            .and_then(|h| h.text())
            .map(|t| t.trim().to_owned())
    };
    let mut out = Vec::new();
    for r in doc.descendants().filter(|n| is(n, DAV, "response")) {
        let mut d = DavResponse {
            href: child_href(r).unwrap_or_default(),
            events: true,
            ..DavResponse::default()
        };
        for ps in r.children().filter(|n| is(n, DAV, "propstat")) {
            let ok = ps
                .children()
                .find(|n| is(n, DAV, "status"))
                .and_then(|s| s.text())
                .is_none_or(|s| s.contains(" 200"));
            if !ok {
                continue;
            }
            let Some(prop) = ps.children().find(|n| is(n, DAV, "prop")) else {
                continue;
            };
            for p in prop.children().filter(|n| n.is_element()) {
                let (ns, name) = (p.tag_name().namespace(), p.tag_name().name());
                match (ns, name) {
                    (Some(DAV), "resourcetype") => {
                        d.is_calendar = p.children().any(|c| is(&c, CALDAV, "calendar"));
                    }
                    (Some(DAV), "displayname") => d.name = p.text().map(str::to_owned),
                    (Some(DAV), "current-user-principal") => d.principal = child_href(p),
                    (Some(CALDAV), "calendar-home-set") => d.home = child_href(p),
                    (Some(DAV), "getetag") => d.etag = p.text().map(|t| t.trim().to_owned()),
                    (Some(CALDAV), "calendar-data") => d.data = p.text().map(str::to_owned),
                    (Some(CALDAV), "supported-calendar-component-set") => {
                        d.events = p.children().filter(|c| is(c, CALDAV, "comp")).any(|c| {
                            c.attribute("name")
                                .is_some_and(|n| n.eq_ignore_ascii_case("VEVENT"))
                        });
                    }
                    _ => {}
                }
            }
        }
        out.push(d);
    }
    Ok(out)
}

/// `href` as an object of calendar `cal` (a direct child of its path on the configured
/// server), or not found: an event ID names an href, and a crafted one must not reach any
/// other resource of the server with the user's login.
fn member(base: &url::Url, cal: &CalendarInfo, href: &str) -> CalendarResult<String> {
    let u = join(base, href)?;
    let path = u.path();
    let inside = cal.id.ends_with('/')
        && path.strip_prefix(cal.id.as_str()).is_some_and(|rest| {
            !rest.is_empty()
                && !rest.contains('/')
                && rest != "."
                && rest != ".."
                && !rest.to_ascii_lowercase().contains("%2f")
        });
    if !inside || u.query().is_some() || u.fragment().is_some() {
        return Err(CalendarError::NotFound(format!(
            "no such event in calendar {}; list_calendar_events gives the IDs of the events there are",
            cal.name
        )));
    }
    Ok(path.to_owned())
}

/// A file name for a new event from its UID: safe characters only.
fn object_name(uid: &str) -> String {
    let safe: String = uid
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.@".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{safe}.ics")
}

impl ObjectStore for CalDavStore {
    fn provider(&self) -> &'static str {
        "CalDAV"
    }

    fn calendars(&self) -> BoxFuture<'static, CalendarResult<Vec<CalendarInfo>>> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.calendars().await })
    }

    fn query(
        &self,
        cal: &CalendarInfo,
        from_ms: i64,
        to_ms: i64,
    ) -> BoxFuture<'static, CalendarResult<Vec<Stored>>> {
        let (inner, cal) = (self.inner.clone(), cal.clone());
        Box::pin(async move { inner.query(&cal, from_ms, to_ms).await })
    }

    fn get(
        &self,
        cal: &CalendarInfo,
        href: &str,
    ) -> BoxFuture<'static, CalendarResult<Option<Stored>>> {
        let href = member(&self.inner.account.url, cal, href);
        let inner = self.inner.clone();
        Box::pin(async move { inner.get(&href?).await })
    }

    fn create(
        &self,
        cal: &CalendarInfo,
        uid: &str,
        ics: String,
        _span: (i64, i64),
    ) -> BoxFuture<'static, CalendarResult<Stored>> {
        let inner = self.inner.clone();
        let href = format!("{}/{}", cal.id.trim_end_matches('/'), object_name(uid));
        Box::pin(async move { inner.put(&href, ics, Precondition::New).await })
    }

    fn replace(
        &self,
        cal: &CalendarInfo,
        href: &str,
        etag: Option<String>,
        ics: String,
        _span: (i64, i64),
    ) -> BoxFuture<'static, CalendarResult<Stored>> {
        let href = member(&self.inner.account.url, cal, href);
        let inner = self.inner.clone();
        Box::pin(async move {
            let etag = etag.ok_or_else(no_etag)?;
            inner.put(&href?, ics, Precondition::Match(etag)).await
        })
    }

    fn remove(
        &self,
        cal: &CalendarInfo,
        href: &str,
        etag: Option<String>,
    ) -> BoxFuture<'static, CalendarResult<()>> {
        let href = member(&self.inner.account.url, cal, href);
        let inner = self.inner.clone();
        Box::pin(async move {
            let etag = etag.ok_or_else(no_etag)?;
            inner.delete(&href?, etag).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multistatus_answers_are_read_by_namespace() {
        let xml = r#"<?xml version="1.0"?>
<multistatus xmlns="DAV:" xmlns:C="urn:ietf:params:xml:ns:caldav">
 <response><href>/alice/work/</href>
  <propstat><prop><resourcetype><collection/><C:calendar/></resourcetype><displayname>Work</displayname>
   <C:supported-calendar-component-set><C:comp name="VEVENT"/></C:supported-calendar-component-set></prop>
   <status>HTTP/1.1 200 OK</status></propstat>
  <propstat><prop><getetag/></prop><status>HTTP/1.1 404 Not Found</status></propstat></response>
 <response><href>/alice/tasks/</href>
  <propstat><prop><resourcetype><collection/><C:calendar/></resourcetype>
   <C:supported-calendar-component-set><C:comp name="VTODO"/></C:supported-calendar-component-set></prop>
   <status>HTTP/1.1 200 OK</status></propstat></response>
 <response><href>/alice/work/e1.ics</href>
  <propstat><prop><getetag>"abc"</getetag><C:calendar-data>BEGIN:VCALENDAR&#13;
END:VCALENDAR</C:calendar-data></prop><status>HTTP/1.1 200 OK</status></propstat></response>
</multistatus>"#;
        let rs = parse_multistatus(xml).unwrap();
        assert_eq!(rs.len(), 3);
        assert!(rs[0].is_calendar && rs[0].events && rs[0].name.as_deref() == Some("Work"));
        assert!(
            rs[1].is_calendar && !rs[1].events,
            "a task list is no calendar for events"
        );
        assert_eq!(rs[2].etag.as_deref(), Some("\"abc\""));
        assert!(
            rs[2]
                .data
                .as_deref()
                .unwrap()
                .starts_with("BEGIN:VCALENDAR")
        );
        let base = url::Url::parse("https://dav.example.org/alice/").unwrap();
        let mut bare = DavResponse {
            href: "/alice/home".into(),
            ..DavResponse::default()
        };
        bare.name = Some("Home".into());
        assert_eq!(bare.calendar(&base).id, "/alice/home/");
        assert_eq!(
            rs[0].calendar(&base),
            CalendarInfo {
                id: "/alice/work/".into(),
                name: "Work".into()
            }
        );
        assert!(join(&base, "https://elsewhere.example/x").is_err());
        let work = CalendarInfo {
            id: "/alice/work/".into(),
            name: "Work".into(),
        };
        assert_eq!(
            member(&base, &work, "/alice/work/e1.ics").unwrap(),
            "/alice/work/e1.ics"
        );
        for outside in [
            "/bob/x.ics",
            "/alice/work/../../bob/x.ics",
            "/alice/work/",
            "/alice/work/sub/e1.ics",
            "https://dav.example.org/bob/x.ics",
            "/alice/work/e1.ics?x=1",
            "/alice/work/..%2Fbob.ics",
        ] {
            assert!(member(&base, &work, outside).is_err(), "{outside}");
        }
        assert_eq!(object_name("a b/c@x"), "a-b-c@x.ics");
    }

    #[test]
    fn the_password_is_never_shown() {
        let a = CalDavAccount {
            url: url::Url::parse("https://dav.example.org/").unwrap(),
            username: Some("alice".into()),
            password: Some("hunter2".into()),
        };
        assert!(!format!("{a:?}").contains("hunter2"));
    }
}
