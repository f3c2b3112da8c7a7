//! The search providers behind `web_search`: SearXNG (self-hosted), Brave Search, Tavily and
//! Serper (Google results). Each speaks its provider's documented API; [`searcher`] makes
//! the one a [`SearchConfig`] names.
//!
//! Every provider's base URL is configurable (a self-hosted proxy, or a local fake in
//! tests). Endpoints are the operator's, trusted as configured: they do not go through the
//! SSRF guard. Domain lists are passed to the provider where it takes them (Tavily's
//! include/exclude fields, `site:` operators elsewhere); the tool filters the results again
//! whatever the provider did with them.

mod brave;
mod searxng;
mod serper;
mod tavily;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::tools::{SearchHit, SearchQuery, Searcher, WebError};
use ringfence_core::BoxFuture;

pub use ringfence_net::RetryPolicy;
use ringfence_net::service::{Service as Api, SetupError};

/// The longest snippet kept, in characters.
const SNIPPET_CHARS: usize = 500;
/// The most results any provider is asked for (Brave's and Tavily's ceiling).
const PROVIDER_MAX: usize = 20;

/// A search provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Provider {
    /// A SearXNG instance's JSON API (`GET {url}/search?q=…&format=json`); no key.
    Searxng,
    /// The Brave Search API (`GET /res/v1/web/search`, key in `X-Subscription-Token`).
    Brave,
    /// Tavily (`POST /search`, key as a bearer token).
    Tavily,
    /// Serper, Google results (`POST /search`, key in `X-API-KEY`).
    Serper,
}

impl Provider {
    /// Every provider, in the order messages list them.
    pub const ALL: [Provider; 4] = [
        Provider::Searxng,
        Provider::Brave,
        Provider::Tavily,
        Provider::Serper,
    ];

    /// The name in the configuration (`provider = "brave"`) and in results.
    pub fn name(self) -> &'static str {
        match self {
            Provider::Searxng => "searxng",
            Provider::Brave => "brave",
            Provider::Tavily => "tavily",
            Provider::Serper => "serper",
        }
    }

    /// The provider called `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<Provider> {
        Provider::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
    }

    /// The public API's base URL; `None` for SearXNG, which is always self-hosted.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Provider::Searxng => None,
            Provider::Brave => Some("https://api.search.brave.com"),
            Provider::Tavily => Some("https://api.tavily.com"),
            Provider::Serper => Some("https://google.serper.dev"),
        }
    }

    /// The environment variables the provider's own tools read the key from, in the order
    /// they are tried (empty: no key needed).
    pub fn key_vars(self) -> &'static [&'static str] {
        match self {
            Provider::Searxng => &[],
            Provider::Brave => &["BRAVE_API_KEY", "BRAVE_SEARCH_API_KEY"],
            Provider::Tavily => &["TAVILY_API_KEY"],
            Provider::Serper => &["SERPER_API_KEY"],
        }
    }

    /// Whether the provider needs a key.
    pub fn needs_key(self) -> bool {
        !self.key_vars().is_empty()
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to reach a provider. `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct SearchConfig {
    pub provider: Provider,
    /// The API's base URL (no trailing `/search`); `None` takes the provider's public one.
    /// Required for SearXNG.
    pub base_url: Option<String>,
    pub api_key: Option<String>,
    /// Where the key came from or should be put (`BRAVE_API_KEY`, `web.search.api_key`),
    /// for messages; never the key.
    pub api_key_source: String,
    /// The whole-request timeout (connecting included).
    pub timeout: Duration,
    /// How rate limits (HTTP 429) are retried.
    pub retry: RetryPolicy,
}

impl SearchConfig {
    /// `provider` at its public URL, with no key, a 20 s timeout and the default retries.
    pub fn new(provider: Provider) -> SearchConfig {
        SearchConfig {
            provider,
            base_url: None,
            api_key: None,
            api_key_source: provider
                .key_vars()
                .first()
                .map_or_else(|| "web.search.api_key".to_owned(), |v| (*v).to_owned()),
            timeout: Duration::from_secs(20),
            retry: RetryPolicy::default(),
        }
    }
}

impl fmt::Debug for SearchConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("api_key_source", &self.api_key_source)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

/// The searcher `config` describes. Fails when the base URL is not an http(s) URL or
/// SearXNG has none; a missing key is reported by each search instead (so the tool is
/// listed and says how to fix it).
pub fn searcher(config: SearchConfig) -> Result<Arc<dyn Searcher>, SetupError> {
    let provider = config.provider;
    let base = match (&config.base_url, provider.default_base_url()) {
        (Some(url), _) => url.trim().to_owned(),
        (None, Some(url)) => url.to_owned(),
        (None, None) => {
            return Err(SetupError::Url(format!(
                "{provider} needs the URL of its instance (e.g. http://127.0.0.1:8888)"
            )));
        }
    };
    let mut base = url::Url::parse(&base)
        .map_err(|e| SetupError::Url(format!("{provider}: `{base}` is not a URL: {e}")))?;
    if !matches!(base.scheme(), "http" | "https") {
        return Err(SetupError::Url(format!(
            "{provider}: `{base}` must start with http:// or https://"
        )));
    }
    if base.cannot_be_a_base() {
        return Err(SetupError::Url(format!(
            "{provider}: `{base}` cannot be a base URL"
        )));
    }
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    let api = Api::new(
        provider.name(),
        config.timeout,
        config.retry,
        config.api_key,
        config.api_key_source,
    )?;
    Ok(Arc::new(ProviderSearcher {
        provider,
        inner: Arc::new(Inner { api, base }),
    }))
}

/// What a provider's request is made from.
pub(crate) struct Inner {
    api: Api,
    /// The base URL, ending in `/`.
    base: url::Url,
}

impl Inner {
    /// `path` (relative, no leading `/`) under the base URL.
    fn endpoint(&self, path: &str) -> Result<url::Url, WebError> {
        self.base.join(path).map_err(|e| {
            WebError::new(
                crate::tools::WebErrorKind::NotConfigured,
                format!("{}: cannot make the request URL: {e}", self.api.name),
            )
        })
    }
}

struct ProviderSearcher {
    provider: Provider,
    inner: Arc<Inner>,
}

impl Searcher for ProviderSearcher {
    fn provider(&self) -> &str {
        self.provider.name()
    }

    fn search(&self, query: SearchQuery) -> BoxFuture<'static, Result<Vec<SearchHit>, WebError>> {
        let inner = self.inner.clone();
        let provider = self.provider;
        Box::pin(async move {
            let hits = match provider {
                Provider::Searxng => searxng::search(&inner, &query).await?,
                Provider::Brave => brave::search(&inner, &query).await?,
                Provider::Tavily => tavily::search(&inner, &query).await?,
                Provider::Serper => serper::search(&inner, &query).await?,
            };
            Ok(hits)
        })
    }
}

/// How many results to ask for: what the model asked for, or the provider's most when
/// domain lists will filter some away afterwards.
fn wanted(query: &SearchQuery) -> usize {
    if query.allowed_domains.is_empty() && query.blocked_domains.is_empty() {
        query.max_results.clamp(1, PROVIDER_MAX)
    } else {
        PROVIDER_MAX
    }
}

/// The query with `site:` operators for the domain lists, for providers that take them in
/// the query (Brave, Google through Serper): one allowed domain as `site:d`, several as
/// `(site:a OR site:b)`, each blocked one as `-site:d`.
fn with_site_operators(query: &SearchQuery) -> String {
    let mut q = query.query.clone();
    match query.allowed_domains.as_slice() {
        [] => {}
        [one] => q.push_str(&format!(" site:{one}")),
        many => {
            let sites: Vec<String> = many.iter().map(|d| format!("site:{d}")).collect();
            q.push_str(&format!(" ({})", sites.join(" OR ")));
        }
    }
    for d in &query.blocked_domains {
        q.push_str(&format!(" -site:{d}"));
    }
    q
}

/// One result in any provider's shape: the fields the providers call by different names
/// (`url`/`link`; `content`/`description`/`snippet`; `publishedDate`/`published_date`/
/// `page_age`/`date`), each read under any of its names.
#[derive(Debug, Default, serde::Deserialize)]
pub(crate) struct RawHit {
    title: Option<String>,
    #[serde(alias = "link")]
    url: Option<String>,
    #[serde(alias = "content", alias = "description")]
    snippet: Option<String>,
    #[serde(alias = "publishedDate", alias = "published_date", alias = "page_age")]
    date: Option<String>,
    /// Brave's date for people ("3 days ago"), used when there is no `page_age`.
    age: Option<String>,
}

/// The results as the provider gave them, made tidy: text without HTML tags or entities,
/// snippets cut to length, dates as `YYYY-MM-DD` where they were ISO date-times, results
/// without a URL dropped, a missing title replaced by the URL.
fn tidy(raw: Vec<RawHit>) -> Vec<SearchHit> {
    raw.into_iter().filter_map(hit).collect()
}

fn hit(raw: RawHit) -> Option<SearchHit> {
    let url = raw
        .url
        .as_deref()
        .map(str::trim)
        .filter(|u| !u.is_empty())?
        .to_owned();
    let title = raw
        .title
        .as_deref()
        .map(plain)
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| url.clone());
    let snippet = raw.snippet.as_deref().map(plain).unwrap_or_default();
    let snippet = if snippet.chars().count() > SNIPPET_CHARS {
        let mut s: String = snippet.chars().take(SNIPPET_CHARS).collect();
        s.push('…');
        s
    } else {
        snippet
    };
    let date = [raw.date.as_deref(), raw.age.as_deref()]
        .into_iter()
        .flatten()
        .map(str::trim)
        .find(|d| !d.is_empty())
        .map(|d| {
            let iso = d.len() > 10 && d.as_bytes()[4] == b'-' && d.as_bytes()[10] == b'T';
            if iso {
                d[..10].to_owned()
            } else {
                d.to_owned()
            }
        });
    Some(SearchHit {
        title,
        url,
        snippet,
        date,
    })
}

/// `text` without HTML tags (Brave marks matches with `<strong>`), with the common entities
/// decoded and runs of whitespace collapsed.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    let out = out
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", " ")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(allowed: &[&str], blocked: &[&str]) -> SearchQuery {
        SearchQuery {
            query: "rust async".into(),
            max_results: 5,
            allowed_domains: allowed.iter().map(|s| s.to_string()).collect(),
            blocked_domains: blocked.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn site_operators_narrow_the_query() {
        assert_eq!(with_site_operators(&query(&[], &[])), "rust async");
        assert_eq!(
            with_site_operators(&query(&["docs.rs"], &["reddit.com"])),
            "rust async site:docs.rs -site:reddit.com"
        );
        assert_eq!(
            with_site_operators(&query(&["docs.rs", "rust-lang.org"], &[])),
            "rust async (site:docs.rs OR site:rust-lang.org)"
        );
    }

    #[test]
    fn more_results_are_asked_for_when_domains_filter_them() {
        assert_eq!(wanted(&query(&[], &[])), 5);
        assert_eq!(wanted(&query(&["docs.rs"], &[])), PROVIDER_MAX);
    }

    #[test]
    fn results_are_made_tidy() {
        let raw = |json: serde_json::Value| serde_json::from_value::<RawHit>(json).unwrap();
        let h = hit(raw(serde_json::json!({
            "url": " https://a.example/ ",
            "description": "<strong>Rust</strong> &amp; tokio\n  guide",
            "page_age": "",
            "age": "3 days ago",
        })))
        .unwrap();
        assert_eq!(h.title, "https://a.example/");
        assert_eq!(h.snippet, "Rust & tokio guide");
        assert_eq!(h.date.as_deref(), Some("3 days ago"));
        let h = hit(raw(
            serde_json::json!({"link": "u", "publishedDate": "2024-05-01T10:00:00"}),
        ));
        assert_eq!(h.unwrap().date.as_deref(), Some("2024-05-01"));
        assert!(hit(raw(serde_json::json!({"title": "t"}))).is_none());
        let long = "x".repeat(SNIPPET_CHARS + 10);
        let h = hit(raw(serde_json::json!({"url": "u", "snippet": long}))).unwrap();
        assert_eq!(h.snippet.chars().count(), SNIPPET_CHARS + 1);
    }

    #[test]
    fn providers_are_named_and_found_by_name() {
        for p in Provider::ALL {
            assert_eq!(Provider::from_name(p.name()), Some(p));
        }
        assert_eq!(Provider::from_name(" Brave "), Some(Provider::Brave));
        assert_eq!(Provider::from_name("google"), None);
    }

    #[test]
    fn debug_never_shows_the_key() {
        let mut c = SearchConfig::new(Provider::Brave);
        c.api_key = Some("sk-very-secret".into());
        let shown = format!("{c:?}");
        assert!(!shown.contains("sk-very-secret"), "{shown}");
        assert!(shown.contains("<set>"), "{shown}");
    }

    #[test]
    fn searxng_needs_its_url_and_urls_must_be_http() {
        let err = searcher(SearchConfig::new(Provider::Searxng))
            .err()
            .unwrap();
        assert!(err.to_string().contains("URL"), "{err}");
        let mut c = SearchConfig::new(Provider::Brave);
        c.base_url = Some("ftp://x.example".into());
        let err = searcher(c).err().unwrap();
        assert!(err.to_string().contains("http://"), "{err}");
    }
}
