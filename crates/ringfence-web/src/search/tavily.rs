//! Tavily: `POST {url}/search` with a JSON body (`query`, `max_results` up to 20,
//! `include_domains`, `exclude_domains`), the key as `Authorization: Bearer`. Results are
//! `results[]` with `title`, `url`, `content` (the snippet) and, for news, `published_date`.

use crate::tools::{SearchHit, SearchQuery, WebError};
use serde::Deserialize;
use serde_json::json;

use super::{Inner, RawHit, tidy, wanted};

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    results: Vec<RawHit>,
}

pub(super) async fn search(inner: &Inner, query: &SearchQuery) -> Result<Vec<SearchHit>, WebError> {
    let api = &inner.api;
    let key = api.key()?;
    let url = inner.endpoint("search")?;
    let mut body = json!({
        "query": query.query,
        "max_results": wanted(query),
        "search_depth": "basic",
    });
    if !query.allowed_domains.is_empty() {
        body["include_domains"] = json!(query.allowed_domains);
    }
    if !query.blocked_domains.is_empty() {
        body["exclude_domains"] = json!(query.blocked_domains);
    }
    let body = body.to_string();
    let reply = api
        .send(|| {
            api.client
                .post(url.clone())
                .header("Content-Type", "application/json")
                .header("Accept", "application/json")
                .bearer_auth(key)
                .body(body.clone())
        })
        .await?;
    api.check(&reply)?;
    let response: Response = api.json(&reply)?;
    Ok(tidy(response.results))
}
