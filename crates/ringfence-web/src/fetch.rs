//! The fetcher behind `web_fetch`: one GET, redirects followed hop by hop (each through the
//! SSRF guard, the operator's domain policy and robots.txt), the body read up to a cap,
//! decompressed within the same cap, decoded and rendered by type.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::tools::{
    FetchRequest, Fetched, Fetcher, Format, WebError, WebErrorKind, host_in_domain,
};
use ringfence_core::BoxFuture;
use ringfence_net::{ClientError, Guard, GuardError, Outbound};
use url::Url;

use crate::render;
use crate::robots::{MAX_ROBOTS_BYTES, Robots};

/// How the fetcher behaves (`[web]` in the configuration).
#[derive(Debug, Clone)]
pub struct FetchSettings {
    /// Only these domains (and their subdomains) may be fetched, when not empty.
    pub allowed_domains: Vec<String>,
    /// These domains (and their subdomains) are never fetched.
    pub blocked_domains: Vec<String>,
    /// Honour robots.txt (default true).
    pub robots: bool,
    /// The most bytes of a document read, after decompression (default 10 MB).
    pub max_bytes: usize,
    /// The largest image returned as image content (default 5 MB).
    pub max_image_bytes: usize,
    /// Redirects followed (default 10).
    pub max_redirects: usize,
    /// Connect timeout (default 10 s) and whole-fetch timeout, redirects included (30 s).
    pub connect_timeout: Duration,
    pub timeout: Duration,
    /// An outbound proxy for every fetch (none by default; proxy variables are ignored).
    pub proxy: Option<String>,
}

impl Default for FetchSettings {
    fn default() -> FetchSettings {
        FetchSettings {
            allowed_domains: Vec::new(),
            blocked_domains: Vec::new(),
            robots: true,
            max_bytes: 10_000_000,
            max_image_bytes: 5_000_000,
            max_redirects: 10,
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(30),
            proxy: None,
        }
    }
}

/// How long a site's robots.txt is trusted.
const ROBOTS_TTL: Duration = Duration::from_secs(600);
/// Sites whose robots.txt is remembered.
const ROBOTS_SITES: usize = 256;
/// The product token robots.txt groups are matched against.
const ROBOTS_TOKEN: &str = "ringfence";

const ACCEPT: &str = "text/html,application/xhtml+xml,text/plain;q=0.9,text/markdown;q=0.9,application/json;q=0.9,application/pdf;q=0.8,image/*;q=0.7,*/*;q=0.5";

/// Fetches URLs for `web_fetch`, through the SSRF guard. Cheap to clone.
#[derive(Clone)]
pub struct WebFetcher(Arc<Inner>);

struct Inner {
    client: reqwest::Client,
    guard: Arc<Guard>,
    settings: FetchSettings,
    robots: Mutex<HashMap<String, (Instant, Arc<Robots>)>>,
}

impl std::fmt::Debug for WebFetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFetcher")
            .field("guard", &self.0.guard)
            .field("settings", &self.0.settings)
            .finish()
    }
}

impl WebFetcher {
    /// A fetcher checking every address with `guard`.
    pub fn new(settings: FetchSettings, guard: Guard) -> Result<WebFetcher, ClientError> {
        let guard = Arc::new(guard);
        let outbound = Outbound {
            connect_timeout: settings.connect_timeout,
            timeout: settings.timeout,
        };
        let client =
            ringfence_net::guarded_client(&outbound, guard.clone(), settings.proxy.as_deref())?;
        Ok(WebFetcher(Arc::new(Inner {
            client,
            guard,
            settings,
            robots: Mutex::new(HashMap::new()),
        })))
    }

    /// Fetches and renders `url` (the whole of `web_fetch`'s work but paging).
    pub async fn get(&self, url: &str, format: Format) -> Result<Fetched, WebError> {
        self.0.get(url, format).await
    }
}

impl Inner {
    async fn get(&self, url: &str, format: Format) -> Result<Fetched, WebError> {
        let started = Instant::now();
        let deadline = self.settings.timeout;
        match tokio::time::timeout(deadline, self.get_inner(url, format)).await {
            Ok(result) => result,
            Err(_) => Err(WebError::new(
                WebErrorKind::Timeout,
                format!(
                    "timed out after {} s fetching {url} (the whole fetch, redirects included, may take {} s)",
                    started.elapsed().as_secs(),
                    deadline.as_secs()
                ),
            )),
        }
    }

    async fn get_inner(&self, url: &str, format: Format) -> Result<Fetched, WebError> {
        let mut current = Url::parse(url.trim()).map_err(|e| {
            WebError::new(
                WebErrorKind::Invalid,
                format!("`{url}` is not a valid URL ({e}); give a full http or https URL such as https://example.com/page"),
            )
        })?;
        let mut hops = 0;
        let response = loop {
            self.admit(&current).await?;
            let response = self.send(&current, ACCEPT).await?;
            let status = response.status();
            if !status.is_redirection() {
                break response;
            }
            let Some(location) = response
                .headers()
                .get(reqwest::header::LOCATION)
                .map(|l| String::from_utf8_lossy(l.as_bytes()).into_owned())
            else {
                break response;
            };
            let location = location.as_str();
            let next = current.join(location).map_err(|e| {
                WebError::new(
                    WebErrorKind::Upstream,
                    format!("{current} redirected to `{location}`, which is not a valid URL ({e})"),
                )
            })?;
            hops += 1;
            if hops > self.settings.max_redirects {
                return Err(WebError::new(
                    WebErrorKind::Upstream,
                    format!(
                        "too many redirects: more than {} starting from {url}; the last pointed to {next}",
                        self.settings.max_redirects
                    ),
                ));
            }
            current = next;
        };
        let status = response.status();
        if !status.is_success() {
            return Err(WebError::new(
                WebErrorKind::Upstream,
                format!(
                    "{current} answered HTTP {}{}",
                    status.as_u16(),
                    status
                        .canonical_reason()
                        .map(|r| format!(" {r}"))
                        .unwrap_or_default()
                ),
            ));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let (body, truncated) = read_capped(response, self.settings.max_bytes, &current).await?;
        let mut notices = Vec::new();
        if truncated {
            notices.push(format!(
                "the document is larger than the download cap of {} bytes; only the first {} bytes were read",
                self.settings.max_bytes, self.settings.max_bytes
            ));
        }
        render::render(render::Input {
            url: current,
            content_type: content_type.as_deref(),
            body,
            truncated,
            format,
            max_image_bytes: self.settings.max_image_bytes,
            notices,
        })
        .await
    }

    /// Whether `url` may be requested: the guard's checks of the URL itself, the operator's
    /// domain lists, and the site's robots.txt.
    async fn admit(&self, url: &Url) -> Result<(), WebError> {
        self.check_target(url).await?;
        if self.settings.robots {
            let host = url.host_str().unwrap_or("");
            let robots = self.robots_for(url).await?;
            let path = match url.query() {
                Some(q) => format!("{}?{q}", url.path()),
                None => url.path().to_owned(),
            };
            if !robots.allows(&path) {
                return Err(WebError::new(
                    WebErrorKind::Refused,
                    format!(
                        "refused: {host}'s robots.txt disallows {path} for automated agents; an operator can turn robots.txt checks off with [web] robots = false"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The checks every request's URL passes, robots.txt's included: the guard's (with a
    /// proxy, the name is resolved and checked here, since the proxy resolves it), then the
    /// operator's domain lists.
    async fn check_target(&self, url: &Url) -> Result<(), WebError> {
        let target = self.guard.check_url(url).map_err(refused)?;
        if self.settings.proxy.is_some() && target.literal.is_none() {
            let guard = self.guard.clone();
            let (host, port) = (target.host.clone(), target.port);
            tokio::task::spawn_blocking(move || guard.resolve_checked(&host, port))
                .await
                .map_err(|e| WebError::new(WebErrorKind::Upstream, e.to_string()))?
                .map_err(refused)?;
        }
        let host = url.host_str().unwrap_or("");
        if let Some(d) = self
            .settings
            .blocked_domains
            .iter()
            .find(|d| host_in_domain(host, d))
        {
            return Err(WebError::new(
                WebErrorKind::Refused,
                format!(
                    "refused: {host} is blocked by the operator's policy ([web] blocked_domains has {d})"
                ),
            ));
        }
        if !self.settings.allowed_domains.is_empty()
            && !self
                .settings
                .allowed_domains
                .iter()
                .any(|d| host_in_domain(host, d))
        {
            return Err(WebError::new(
                WebErrorKind::Refused,
                format!(
                    "refused: {host} is not in the operator's [web] allowed_domains ({})",
                    self.settings.allowed_domains.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// The robots.txt rules of `url`'s site (cached for [`ROBOTS_TTL`]).
    async fn robots_for(&self, url: &Url) -> Result<Arc<Robots>, WebError> {
        let origin = url.origin().ascii_serialization();
        {
            let cache = self.robots.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((at, robots)) = cache.get(&origin)
                && at.elapsed() < ROBOTS_TTL
            {
                return Ok(robots.clone());
            }
        }
        let robots = Arc::new(self.fetch_robots(url).await?);
        let mut cache = self.robots.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= ROBOTS_SITES {
            cache.retain(|_, (at, _)| at.elapsed() < ROBOTS_TTL);
            if cache.len() >= ROBOTS_SITES {
                cache.clear();
            }
        }
        cache.insert(origin, (Instant::now(), robots.clone()));
        Ok(robots)
    }

    /// Reads a site's robots.txt: redirects followed within the same checks (up to five),
    /// a 4xx means no rules, a 5xx means the site is off limits for now (RFC 9309).
    async fn fetch_robots(&self, url: &Url) -> Result<Robots, WebError> {
        let mut current = url.join("/robots.txt").map_err(|e| {
            WebError::new(
                WebErrorKind::Invalid,
                format!("{url} has no robots.txt URL ({e})"),
            )
        })?;
        for _ in 0..=5 {
            self.check_target(&current).await?;
            let response = self.send(&current, "text/plain,*/*;q=0.5").await?;
            let status = response.status();
            if status.is_redirection()
                && let Some(next) = response
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| current.join(&String::from_utf8_lossy(l.as_bytes())).ok())
            {
                current = next;
                continue;
            }
            if status.is_server_error() {
                return Ok(Robots::disallow_all());
            }
            if !status.is_success() {
                return Ok(Robots::allow_all());
            }
            let (body, _) = read_capped(response, MAX_ROBOTS_BYTES, &current).await?;
            return Ok(Robots::parse(&String::from_utf8_lossy(&body), ROBOTS_TOKEN));
        }
        Ok(Robots::allow_all())
    }

    async fn send(&self, url: &Url, accept: &str) -> Result<reqwest::Response, WebError> {
        self.client
            .get(url.clone())
            .header(reqwest::header::ACCEPT, accept)
            .send()
            .await
            .map_err(|e| transport_error(&e, url, &self.settings))
    }
}

impl Fetcher for WebFetcher {
    fn fetch(&self, request: FetchRequest) -> BoxFuture<'static, Result<Fetched, WebError>> {
        let inner = self.0.clone();
        Box::pin(async move { inner.get(&request.url, request.format).await })
    }
}

/// A guard refusal as a tool error (its message already says why and what to do); a name
/// that does not resolve is a failure to reach, not a refusal.
fn refused(e: GuardError) -> WebError {
    let kind = match e {
        GuardError::Invalid { .. } => WebErrorKind::Invalid,
        GuardError::NoAddress { .. } => WebErrorKind::Upstream,
        _ => WebErrorKind::Refused,
    };
    WebError::new(kind, e.to_string())
}

/// A failed request as a tool error: the guard's refusal when that is the cause, else what
/// went wrong on the way.
fn transport_error(e: &reqwest::Error, url: &Url, settings: &FetchSettings) -> WebError {
    if let Some(g) = ringfence_net::refusal_in(e) {
        return refused(g.clone());
    }
    let host = url.host_str().unwrap_or("the server");
    if e.is_timeout() {
        return WebError::new(
            WebErrorKind::Timeout,
            format!(
                "timed out fetching {url} (connect timeout {} s, whole fetch {} s)",
                settings.connect_timeout.as_secs(),
                settings.timeout.as_secs()
            ),
        );
    }
    let cause = root_cause(e);
    if e.is_connect() {
        return WebError::new(
            WebErrorKind::Upstream,
            format!("cannot connect to {host}: {cause}"),
        );
    }
    WebError::new(
        WebErrorKind::Upstream,
        format!("fetching {url} failed: {cause}"),
    )
}

/// The innermost cause's message (reqwest's own wrap says little).
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = e;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// The body, at most `cap` bytes of it (decompressed), and whether there was more.
async fn read_capped(
    mut response: reqwest::Response,
    cap: usize,
    url: &Url,
) -> Result<(Vec<u8>, bool), WebError> {
    let mut body = Vec::new();
    loop {
        let chunk = response.chunk().await.map_err(|e| {
            if e.is_timeout() {
                WebError::new(WebErrorKind::Timeout, format!("timed out reading {url}"))
            } else {
                WebError::new(
                    WebErrorKind::Upstream,
                    format!("reading {url} failed: {}", root_cause(&e)),
                )
            }
        })?;
        let Some(chunk) = chunk else {
            return Ok((body, false));
        };
        let room = cap - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
}
