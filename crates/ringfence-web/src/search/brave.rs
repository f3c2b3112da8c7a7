//! The Brave Search API: `GET {url}/res/v1/web/search?q=…&count=…`, the key in the
//! `X-Subscription-Token` header. Results are `web.results[]` with `title`, `url`,
//! `description` (matches marked with `<strong>`), `page_age` (an ISO date-time, when Brave
//! dated the page) and `age` (the same for people: "3 days ago", "August 1, 2023"). Domain
//! lists go into the query as `site:` operators, which Brave supports; at most 20 results.

use crate::tools::{SearchHit, SearchQuery, WebError};
use serde::Deserialize;

use super::{Inner, RawHit, tidy, wanted, with_site_operators};

#[derive(Deserialize)]
struct Response {
    web: Option<Web>,
}

#[derive(Deserialize)]
struct Web {
    #[serde(default)]
    results: Vec<RawHit>,
}

pub(super) async fn search(inner: &Inner, query: &SearchQuery) -> Result<Vec<SearchHit>, WebError> {
    let api = &inner.api;
    let key = api.key()?;
    let mut url = inner.endpoint("res/v1/web/search")?;
    url.query_pairs_mut()
        .append_pair("q", &with_site_operators(query))
        .append_pair("count", &wanted(query).to_string());
    let reply = api
        .send(|| {
            api.client
                .get(url.clone())
                .header("Accept", "application/json")
                .header("X-Subscription-Token", key)
        })
        .await?;
    api.check(&reply)?;
    let response: Response = api.json(&reply)?;
    Ok(tidy(response.web.map(|w| w.results).unwrap_or_default()))
}
