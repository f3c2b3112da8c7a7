//! `web_search` (seed 003): search the web through the configured provider.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{SearchQuery, Searcher, domain_name, host_in_domain};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, AsyncTool, BoxFuture, ToolContext, ToolOutput};

/// The longest query accepted, in characters.
pub const MAX_QUERY_CHARS: usize = 2000;
/// Domains per list.
pub const MAX_DOMAINS: usize = 50;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// What to search for.
    pub query: String,
    /// How many results to return, 1 to 20 (default 10).
    #[schemars(range(min = 1, max = 20))]
    pub max_results: Option<usize>,
    /// Only return results from these domains (and their subdomains).
    pub allowed_domains: Option<Vec<String>>,
    /// Never return results from these domains (and their subdomains).
    pub blocked_domains: Option<Vec<String>>,
}

pub struct WebSearch {
    pub(crate) searcher: Option<Arc<dyn Searcher>>,
}

impl AsyncTool for WebSearch {
    type Args = WebSearchArgs;
    const NAME: &'static str = "web_search";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Search the web for current information: recent news and events, current documentation, fact-checking, research. Returns numbered results with title, URL, snippet and date where known; read a result in full with web_fetch. allowed_domains / blocked_domains narrow the results to (or away from) domains and their subdomains.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Search the web",
        read_only: true,
        destructive: false,
        idempotent: false,
        open_world: true,
    };

    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: WebSearchArgs,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        Box::pin(async move {
            let query = args.query.trim().to_owned();
            if query.is_empty() {
                return Err(ToolError::invalid("query is empty: say what to search for"));
            }
            if query.chars().count() > MAX_QUERY_CHARS {
                return Err(ToolError::invalid(format!(
                    "query is longer than {MAX_QUERY_CHARS} characters; shorten it"
                )));
            }
            let max_results = args.max_results.unwrap_or(10);
            if !(1..=20).contains(&max_results) {
                return Err(ToolError::invalid(format!(
                    "max_results must be between 1 and 20, got {max_results}"
                )));
            }
            let allowed = domains("allowed_domains", args.allowed_domains)?;
            let blocked = domains("blocked_domains", args.blocked_domains)?;
            let Some(searcher) = self.searcher.clone() else {
                return Err(ToolError::new(
                    ToolErrorKind::Disabled,
                    "web search is not configured: an operator sets [web.search] provider = \"searxng\" (with url), \"brave\", \"tavily\" or \"serper\" (with an API key) in the configuration file; see the README's web section",
                ));
            };
            let request = SearchQuery {
                query: query.clone(),
                max_results,
                allowed_domains: allowed.clone(),
                blocked_domains: blocked.clone(),
            };
            let hits = tokio::select! {
                hits = searcher.search(request) => hits?,
                _ = ctx.cancel.cancelled() => return Err(ToolError::cancelled()),
            };
            // The provider may not honour the domain lists itself: they are applied here too.
            let hits: Vec<_> = hits
                .into_iter()
                .filter(|h| {
                    let host = url_host(&h.url);
                    (allowed.is_empty() || allowed.iter().any(|d| host_in_domain(host, d)))
                        && !blocked.iter().any(|d| host_in_domain(host, d))
                })
                .take(max_results)
                .collect();
            let mut text = if hits.is_empty() {
                format!("No results for \"{query}\" ({}).", searcher.provider())
            } else {
                format!(
                    "{} result{} for \"{query}\" ({}):\n",
                    hits.len(),
                    if hits.len() == 1 { "" } else { "s" },
                    searcher.provider()
                )
            };
            for (i, hit) in hits.iter().enumerate() {
                text.push_str(&format!("\n{}. {}\n   {}\n", i + 1, hit.title, hit.url));
                if let Some(date) = &hit.date {
                    text.push_str(&format!("   Date: {date}\n"));
                }
                if !hit.snippet.is_empty() {
                    text.push_str(&format!("   {}\n", hit.snippet));
                }
            }
            Ok(
                ToolOutput::text(text.trim_end().to_owned()).with_structured(json!({
                    "query": query,
                    "provider": searcher.provider(),
                    "results": hits,
                })),
            )
        })
    }
}

/// A domain list as given: trimmed, lower-cased, each a plain host name.
fn domains(param: &str, list: Option<Vec<String>>) -> ToolResult<Vec<String>> {
    let list = list.unwrap_or_default();
    if list.len() > MAX_DOMAINS {
        return Err(ToolError::invalid(format!(
            "{param} has {} entries; at most {MAX_DOMAINS}",
            list.len()
        )));
    }
    list.into_iter()
        .map(|d| {
            domain_name(&d).ok_or_else(|| {
                ToolError::invalid(format!(
                    "{param}: `{}` is not a domain name; give names like example.com (no scheme or path)",
                    d.trim()
                ))
            })
        })
        .collect()
}

/// The host part of a result URL (empty when it has none).
fn url_host(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return host_port
            .split(']')
            .next()
            .unwrap_or("")
            .trim_start_matches('[');
    }
    host_port.split(':').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::{domains, url_host};

    #[test]
    fn hosts_are_read_from_result_urls() {
        assert_eq!(url_host("https://docs.rs/tokio/latest"), "docs.rs");
        assert_eq!(
            url_host("http://user@Example.com:8080/x?y#z"),
            "Example.com"
        );
        assert_eq!(url_host("https://[2001:db8::1]:443/"), "2001:db8::1");
        assert_eq!(url_host("example.org/path"), "example.org");
    }

    #[test]
    fn domain_lists_take_plain_names_only() {
        assert_eq!(
            domains("allowed_domains", Some(vec![" *.Rust-lang.org ".into()])).unwrap(),
            vec!["rust-lang.org"]
        );
        let err = domains("blocked_domains", Some(vec!["https://x.com/".into()])).unwrap_err();
        assert!(err.message.contains("blocked_domains"), "{}", err.message);
    }
}
