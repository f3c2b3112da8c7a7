//! SearXNG: a self-hosted metasearch engine's JSON API, `GET {url}/search?q=…&format=json`
//! (the instance must list `json` under `search.formats` in its settings.yml). No key.
//!
//! Results carry `title`, `url`, `content` (the snippet) and `publishedDate` (null when the
//! engines gave none). SearXNG has no count parameter: a page holds what its engines
//! returned, and the tool keeps the first `max_results`. One allowed domain is passed as a
//! `site:` operator, which the general engines it queries understand.

use crate::tools::{SearchHit, SearchQuery, WebError, WebErrorKind};
use serde::Deserialize;

use super::{Inner, RawHit, tidy};

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    results: Vec<RawHit>,
    /// `[engine, reason]` pairs for the engines that failed.
    #[serde(default)]
    unresponsive_engines: Vec<Vec<String>>,
}

pub(super) async fn search(inner: &Inner, query: &SearchQuery) -> Result<Vec<SearchHit>, WebError> {
    let mut q = query.query.clone();
    if let [one] = query.allowed_domains.as_slice() {
        q.push_str(&format!(" site:{one}"));
    }
    let mut url = inner.endpoint("search")?;
    url.query_pairs_mut()
        .append_pair("q", &q)
        .append_pair("format", "json")
        .append_pair("pageno", "1");
    let api = &inner.api;
    let reply = api
        .send(|| {
            api.client
                .get(url.clone())
                .header("Accept", "application/json")
        })
        .await?;
    if reply.status == reqwest::StatusCode::FORBIDDEN {
        return Err(WebError::new(
            WebErrorKind::NotConfigured,
            "the SearXNG instance refused the JSON API (HTTP 403): an operator adds `json` to search.formats in its settings.yml",
        ));
    }
    api.check(&reply)?;
    let response: Response = api.json(&reply)?;
    let hits = tidy(response.results);
    if hits.is_empty() && !response.unresponsive_engines.is_empty() {
        let failed: Vec<String> = response
            .unresponsive_engines
            .iter()
            .map(|e| e.join(": "))
            .collect();
        return Err(WebError::new(
            WebErrorKind::Upstream,
            format!(
                "searxng found nothing because its engines failed ({}); try again later",
                failed.join(", ")
            ),
        ));
    }
    Ok(hits)
}
