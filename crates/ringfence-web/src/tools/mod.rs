//! The web family (seed 003): `web_fetch` reads a page (its main content as Markdown or
//! text, a PDF's text, JSON pretty-printed, an image as image content), in pages of at most
//! `max_length` characters; `web_search` asks the configured search provider.
//!
//! The tools validate, page and format. Reaching the network lives behind [`Fetcher`] and
//! [`Searcher`] (implemented by `ringfence-web` on the SSRF-guarded client), so this crate
//! knows nothing of HTTP.

mod cache;
mod web_fetch;
mod web_search;

use std::sync::Arc;

use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::tool::{Async, BoxFuture, Tool};

pub use cache::{CacheLimits, PageCache};
pub use web_fetch::WebFetch;
pub use web_search::WebSearch;

/// The tool family name (`tools.disable = ["web"]` turns both off).
pub const FAMILY: &str = "web";

pub const INFO: FamilyInfo = FamilyInfo {
    name: FAMILY,
    summary: "fetch web pages as clean Markdown (behind an SSRF guard) and search the web through a configured provider",
    tools: &["web_fetch", "web_search"],
    presets: &[ringfence_core::PresetPart {
        name: ringfence_core::family::ASSISTANT,
        summary: ringfence_core::family::ASSISTANT_SUMMARY,
        tools: ringfence_core::family::EVERY_TOOL,
    }],
};

/// How `web_fetch` should render what it fetched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// An HTML page's main content as Markdown (the default).
    Markdown,
    /// The same content without Markdown.
    Text,
    /// The document as served (decoded to text).
    Html,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Markdown => "markdown",
            Format::Text => "text",
            Format::Html => "html",
        }
    }
}

/// One fetch: the URL the model gave, how to render it, and for whom (robots and caches
/// are per user where it matters).
#[derive(Debug, Clone)]
pub struct FetchRequest {
    pub url: String,
    pub format: Format,
    pub user: String,
}

/// What a fetch produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Fetched {
    /// The URL the content came from (after redirects).
    pub url: String,
    /// The media type the server declared (or that was sniffed), without parameters.
    pub content_type: String,
    /// The page's title, when it has one.
    pub title: Option<String>,
    pub body: FetchedBody,
    /// Things the reader should know: the download cap was hit, robots.txt was ignored as
    /// configured, the charset was guessed.
    pub notices: Vec<String>,
}

/// The content of a fetch, rendered.
#[derive(Debug, Clone, PartialEq)]
pub enum FetchedBody {
    Text(String),
    /// An image (raw bytes, within the size cap).
    Image {
        mime: String,
        data: Vec<u8>,
    },
}

pub use ringfence_net::{WebError, WebErrorKind};

/// Reaches a URL and renders what it holds.
pub trait Fetcher: Send + Sync {
    fn fetch(&self, request: FetchRequest) -> BoxFuture<'static, Result<Fetched, WebError>>;
}

/// A web search, as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub query: String,
    pub max_results: usize,
    /// Only results from these domains (and their subdomains), when not empty.
    pub allowed_domains: Vec<String>,
    /// Never results from these domains (and their subdomains).
    pub blocked_domains: Vec<String>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SearchHit {
    pub title: String,
    pub url: String,
    pub snippet: String,
    /// When the page was published or updated, as the provider gave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

/// Answers web searches (a provider's API).
pub trait Searcher: Send + Sync {
    /// The provider's name, for results and errors (`searxng`, `brave`, ...).
    fn provider(&self) -> &str;
    fn search(&self, query: SearchQuery) -> BoxFuture<'static, Result<Vec<SearchHit>, WebError>>;
}

/// What the web family is built from.
pub struct WebServices {
    pub fetcher: Arc<dyn Fetcher>,
    /// `None` when no provider is configured: `web_search` then says how to configure one.
    pub searcher: Option<Arc<dyn Searcher>>,
    /// How long and how much of the fetched documents the page cache keeps for paging: a
    /// share per user, and a bound for all users together.
    pub cache: CacheLimits,
}

/// Builds the web family.
pub fn family(services: WebServices) -> Family {
    let tools: Vec<Arc<dyn Tool>> = vec![
        Async::arc(WebFetch {
            fetcher: services.fetcher,
            cache: Arc::new(PageCache::new(services.cache)),
        }),
        Async::arc(WebSearch {
            searcher: services.searcher,
        }),
    ];
    Family::new(&INFO, tools)
}

/// A domain as written in a list (`*.Example.com` → `example.com`), or `None` when it is not
/// a plain host name (a scheme, a path, a port, empty labels).
pub fn domain_name(written: &str) -> Option<String> {
    let d = written.trim().trim_start_matches("*.").to_ascii_lowercase();
    let ok = !d.is_empty()
        && d.split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    ok.then_some(d)
}

/// Whether `host` is `domain` or one of its subdomains (both compared without case and a
/// trailing dot).
pub fn host_in_domain(host: &str, domain: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let domain = domain
        .trim()
        .trim_start_matches("*.")
        .trim_start_matches('.')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    !domain.is_empty()
        && (host == domain
            || (host.len() > domain.len()
                && host.ends_with(&domain)
                && host.as_bytes()[host.len() - domain.len() - 1] == b'.'))
}

#[cfg(test)]
mod tests {
    use super::host_in_domain;

    #[test]
    fn domains_match_themselves_and_their_subdomains_only() {
        assert!(host_in_domain("example.com", "example.com"));
        assert!(host_in_domain("docs.Example.com.", "example.com"));
        assert!(host_in_domain("a.b.example.com", "*.example.com"));
        assert!(!host_in_domain("badexample.com", "example.com"));
        assert!(!host_in_domain("example.com.evil.net", "example.com"));
        assert!(!host_in_domain("example.com", ""));
    }
}
