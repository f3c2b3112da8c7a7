//! Serper (Google results): `POST {url}/search` with a JSON body (`q`, `num`), the key in
//! the `X-API-KEY` header. Results are `organic[]` with `title`, `link`, `snippet` and
//! `date` where Google shows one. Domain lists go into the query as `site:` operators,
//! which Google supports.

use crate::tools::{SearchHit, SearchQuery, WebError};
use serde::Deserialize;
use serde_json::json;

use super::{Inner, RawHit, tidy, wanted, with_site_operators};

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    organic: Vec<RawHit>,
}

pub(super) async fn search(inner: &Inner, query: &SearchQuery) -> Result<Vec<SearchHit>, WebError> {
    let api = &inner.api;
    let key = api.key()?;
    let url = inner.endpoint("search")?;
    let body = json!({
        "q": with_site_operators(query),
        "num": wanted(query),
    })
    .to_string();
    let reply = api
        .send(|| {
            api.client
                .post(url.clone())
                .header("Content-Type", "application/json")
                .header("X-API-KEY", key)
                .body(body.clone())
        })
        .await?;
    api.check(&reply)?;
    let response: Response = api.json(&reply)?;
    Ok(tidy(response.organic))
}
