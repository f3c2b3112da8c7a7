//! The search providers against local fakes of each provider's documented API: what is sent
//! (the key in the right header, the domain lists, the count) and what comes of each answer
//! (results mapped, refused keys, rate limits retried and bounded, bad JSON, timeouts).

use std::time::Duration;

use ringfence_net::fake_api::{FakeApi, Reply};
use ringfence_web::search::{Provider, RetryPolicy, SearchConfig, searcher};
use ringfence_web::tools::{SearchHit, SearchQuery, WebError, WebErrorKind};
use serde_json::json;

const KEY: &str = "test-key-7f3a9c";

fn config(provider: Provider, url: &str) -> SearchConfig {
    let mut c = SearchConfig::new(provider);
    c.base_url = Some(url.to_owned());
    c.api_key = provider.needs_key().then(|| KEY.to_owned());
    c.timeout = Duration::from_secs(5);
    c.retry = RetryPolicy {
        retries: 2,
        backoff: Duration::from_millis(20),
        max_wait: Duration::from_secs(2),
    };
    c
}

fn query(q: &str, max: usize) -> SearchQuery {
    SearchQuery {
        query: q.into(),
        max_results: max,
        allowed_domains: vec![],
        blocked_domains: vec![],
    }
}

/// A search for "x" asked of `fake` as `provider`, with the test configuration.
async fn ask(provider: Provider, fake: &FakeApi) -> Result<Vec<SearchHit>, WebError> {
    searcher(config(provider, &fake.url))
        .unwrap()
        .search(query("x", 3))
        .await
}

/// A successful answer in each provider's documented shape, holding two results.
fn success(provider: Provider) -> serde_json::Value {
    match provider {
        Provider::Searxng => json!({
            "query": "tokio",
            "number_of_results": 0,
            "results": [
                {"url": "https://tokio.rs/", "title": "Tokio", "content": "An asynchronous runtime", "engine": "duckduckgo", "publishedDate": "2024-05-01T00:00:00", "score": 1.0},
                {"url": "https://docs.rs/tokio", "title": "tokio - Rust", "content": "A runtime for writing reliable apps", "engine": "google", "publishedDate": null}
            ],
            "answers": [], "suggestions": [], "unresponsive_engines": []
        }),
        Provider::Brave => json!({
            "type": "search",
            "query": {"original": "tokio"},
            "web": {"type": "search", "results": [
                {"title": "Tokio", "url": "https://tokio.rs/", "description": "An <strong>asynchronous</strong> runtime", "page_age": "2024-05-01T10:00:00", "age": "May 1, 2024"},
                {"title": "tokio - Rust", "url": "https://docs.rs/tokio", "description": "A runtime for writing reliable apps"}
            ]}
        }),
        Provider::Tavily => json!({
            "query": "tokio",
            "response_time": 0.5,
            "results": [
                {"title": "Tokio", "url": "https://tokio.rs/", "content": "An asynchronous runtime", "score": 0.9, "published_date": "2024-05-01"},
                {"title": "tokio - Rust", "url": "https://docs.rs/tokio", "content": "A runtime for writing reliable apps", "score": 0.8}
            ]
        }),
        Provider::Serper => json!({
            "searchParameters": {"q": "tokio", "type": "search"},
            "organic": [
                {"title": "Tokio", "link": "https://tokio.rs/", "snippet": "An asynchronous runtime", "date": "May 1, 2024", "position": 1},
                {"title": "tokio - Rust", "link": "https://docs.rs/tokio", "snippet": "A runtime for writing reliable apps", "position": 2}
            ]
        }),
    }
}

#[tokio::test]
async fn each_provider_maps_titles_urls_snippets_and_dates() {
    for provider in Provider::ALL {
        let fake = FakeApi::start(move |_, _| Reply::json(200, success(provider))).await;
        let s = searcher(config(provider, &fake.url)).unwrap();
        assert_eq!(s.provider(), provider.name());
        let hits = s.search(query("tokio", 5)).await.unwrap();
        assert_eq!(hits.len(), 2, "{provider}");
        assert_eq!(hits[0].title, "Tokio", "{provider}");
        assert_eq!(hits[0].url, "https://tokio.rs/", "{provider}");
        assert_eq!(hits[0].snippet, "An asynchronous runtime", "{provider}");
        let date = hits[0].date.as_deref().unwrap_or_default();
        assert!(
            date.starts_with("2024-05-01") || date == "May 1, 2024",
            "{provider}: {date}"
        );
        assert_eq!(hits[1].url, "https://docs.rs/tokio", "{provider}");
        assert_eq!(hits[1].date, None, "{provider}");
    }
}

#[tokio::test]
async fn each_provider_is_asked_as_its_api_documents() {
    for provider in Provider::ALL {
        let fake = FakeApi::start(move |_, _| Reply::json(200, success(provider))).await;
        let s = searcher(config(provider, &fake.url)).unwrap();
        s.search(query("rust async", 7)).await.unwrap();
        let seen = fake.requests();
        assert_eq!(seen.len(), 1);
        let r = &seen[0];
        match provider {
            Provider::Searxng => {
                assert_eq!(r.method, "GET");
                assert!(r.target.starts_with("/search?"), "{}", r.target);
                assert_eq!(r.query("q").as_deref(), Some("rust async"));
                assert_eq!(r.query("format").as_deref(), Some("json"));
            }
            Provider::Brave => {
                assert_eq!(r.method, "GET");
                assert!(r.target.starts_with("/res/v1/web/search?"), "{}", r.target);
                assert_eq!(r.header("x-subscription-token"), Some(KEY));
                assert_eq!(r.query("q").as_deref(), Some("rust async"));
                assert_eq!(r.query("count").as_deref(), Some("7"));
            }
            Provider::Tavily => {
                assert_eq!(r.method, "POST");
                assert_eq!(r.target, "/search");
                assert_eq!(
                    r.header("authorization"),
                    Some(format!("Bearer {KEY}").as_str())
                );
                let body = r.json();
                assert_eq!(body["query"], "rust async");
                assert_eq!(body["max_results"], 7);
                assert!(body.get("include_domains").is_none());
            }
            Provider::Serper => {
                assert_eq!(r.method, "POST");
                assert_eq!(r.target, "/search");
                assert_eq!(r.header("x-api-key"), Some(KEY));
                let body = r.json();
                assert_eq!(body["q"], "rust async");
                assert_eq!(body["num"], 7);
            }
        }
        // The key travels only where the API wants it: never in the URL.
        assert!(!r.target.contains(KEY), "{provider}: {}", r.target);
        assert!(
            r.header("user-agent")
                .is_some_and(|ua| ua.starts_with("ringfence/")),
            "{provider}"
        );
    }
}

#[tokio::test]
async fn domain_lists_are_passed_to_the_provider() {
    let mut q = query("async runtime", 5);
    q.allowed_domains = vec!["docs.rs".into()];
    q.blocked_domains = vec!["reddit.com".into()];
    for provider in Provider::ALL {
        let fake = FakeApi::start(move |_, _| Reply::json(200, success(provider))).await;
        searcher(config(provider, &fake.url))
            .unwrap()
            .search(q.clone())
            .await
            .unwrap();
        let r = &fake.requests()[0];
        match provider {
            Provider::Searxng => {
                assert_eq!(r.query("q").as_deref(), Some("async runtime site:docs.rs"));
            }
            Provider::Brave => {
                assert_eq!(
                    r.query("q").as_deref(),
                    Some("async runtime site:docs.rs -site:reddit.com")
                );
                // More are asked for, since the lists filter some away.
                assert_eq!(r.query("count").as_deref(), Some("20"));
            }
            Provider::Tavily => {
                let body = r.json();
                assert_eq!(body["query"], "async runtime");
                assert_eq!(body["include_domains"], json!(["docs.rs"]));
                assert_eq!(body["exclude_domains"], json!(["reddit.com"]));
            }
            Provider::Serper => {
                assert_eq!(r.json()["q"], "async runtime site:docs.rs -site:reddit.com");
            }
        }
    }
}

#[tokio::test]
async fn a_refused_key_names_the_variable_and_never_the_key() {
    for provider in [Provider::Brave, Provider::Tavily, Provider::Serper] {
        let fake = FakeApi::start(|_, _| {
            Reply::json(
                401,
                json!({"error": {"message": format!("invalid key {KEY}")}}),
            )
        })
        .await;
        let err = ask(provider, &fake).await.unwrap_err();
        assert_eq!(
            err.kind,
            WebErrorKind::NotConfigured,
            "{provider}: {}",
            err.message
        );
        assert!(err.message.contains("HTTP 401"), "{}", err.message);
        assert!(
            err.message.contains(provider.key_vars()[0]),
            "{provider}: {}",
            err.message
        );
        assert!(!err.message.contains(KEY), "{provider}: {}", err.message);
        assert_eq!(fake.requests().len(), 1, "a refused key is not retried");
    }
}

#[tokio::test]
async fn without_a_key_nothing_is_sent_and_the_error_says_where_to_put_one() {
    let fake = FakeApi::start(|_, _| Reply::json(200, success(Provider::Brave))).await;
    let mut c = config(Provider::Brave, &fake.url);
    c.api_key = None;
    let err = searcher(c)
        .unwrap()
        .search(query("x", 3))
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::NotConfigured);
    assert!(err.message.contains("BRAVE_API_KEY"), "{}", err.message);
    assert!(fake.requests().is_empty());
}

#[tokio::test]
async fn a_rate_limit_is_retried_then_succeeds() {
    for provider in Provider::ALL {
        let fake = FakeApi::start(move |_, i| {
            if i == 0 {
                Reply::json(429, json!({"error": "slow down"})).with_header("retry-after", "0")
            } else {
                Reply::json(200, success(provider))
            }
        })
        .await;
        let hits = searcher(config(provider, &fake.url))
            .unwrap()
            .search(query("tokio", 5))
            .await
            .unwrap();
        assert_eq!(hits.len(), 2, "{provider}");
        assert_eq!(fake.requests().len(), 2, "{provider}");
    }
}

#[tokio::test]
async fn a_lasting_rate_limit_gives_up_after_the_bounded_retries() {
    let fake = FakeApi::start(|_, _| Reply::json(429, json!({"message": "quota"}))).await;
    let err = ask(Provider::Serper, &fake).await.unwrap_err();
    assert_eq!(
        fake.requests().len(),
        3,
        "the first attempt and two retries"
    );
    assert_eq!(err.kind, WebErrorKind::Upstream);
    assert!(err.message.contains("rate limited"), "{}", err.message);
    assert!(err.message.contains("serper"), "{}", err.message);
    assert!(err.message.contains("3 times"), "{}", err.message);
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_fails_at_once_saying_when() {
    let fake =
        FakeApi::start(|_, _| Reply::json(429, json!({})).with_header("retry-after", "3600")).await;
    let err = ask(Provider::Brave, &fake).await.unwrap_err();
    assert_eq!(fake.requests().len(), 1);
    assert!(err.message.contains("wait 60 min"), "{}", err.message);
}

#[tokio::test]
async fn malformed_json_is_an_upstream_error_naming_the_provider() {
    for provider in Provider::ALL {
        let fake = FakeApi::start(|_, _| Reply::text(200, "<html>not json</html>")).await;
        let err = ask(provider, &fake).await.unwrap_err();
        assert_eq!(err.kind, WebErrorKind::Upstream, "{provider}");
        assert!(
            err.message.starts_with(provider.name()) && err.message.contains("JSON"),
            "{provider}: {}",
            err.message
        );
    }
}

#[tokio::test]
async fn a_slow_provider_times_out() {
    let fake = FakeApi::start(|_, _| {
        Reply::json(200, success(Provider::Tavily)).after(Duration::from_secs(3))
    })
    .await;
    let mut c = config(Provider::Tavily, &fake.url);
    c.timeout = Duration::from_millis(300);
    let err = searcher(c)
        .unwrap()
        .search(query("x", 3))
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Timeout, "{}", err.message);
    assert!(
        err.message.contains("tavily did not answer within 1 s"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_server_error_quotes_the_provider() {
    let fake =
        FakeApi::start(|_, _| Reply::json(500, json!({"detail": {"error": "internal failure"}})))
            .await;
    let err = ask(Provider::Tavily, &fake).await.unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Upstream);
    assert_eq!(
        err.message,
        "tavily answered HTTP 500: \"internal failure\""
    );
}

#[tokio::test]
async fn searxng_without_the_json_format_says_how_to_enable_it() {
    let fake = FakeApi::start(|_, _| Reply::text(403, "Forbidden")).await;
    let err = ask(Provider::Searxng, &fake).await.unwrap_err();
    assert_eq!(err.kind, WebErrorKind::NotConfigured);
    assert!(err.message.contains("search.formats"), "{}", err.message);
}

#[tokio::test]
async fn searxng_whose_engines_all_failed_says_so() {
    let fake = FakeApi::start(|_, _| {
        Reply::json(
            200,
            json!({"query": "x", "results": [], "unresponsive_engines": [["google", "timeout"], ["bing", "CAPTCHA"]]}),
        )
    })
    .await;
    let err = ask(Provider::Searxng, &fake).await.unwrap_err();
    assert!(
        err.message.contains("google: timeout, bing: CAPTCHA"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_base_url_with_a_path_keeps_it() {
    let fake = FakeApi::start(|_, _| Reply::json(200, success(Provider::Searxng))).await;
    searcher(config(Provider::Searxng, &format!("{}/searx", fake.url)))
        .unwrap()
        .search(query("x", 3))
        .await
        .unwrap();
    assert!(fake.requests()[0].target.starts_with("/searx/search?"));
}

#[tokio::test]
async fn an_unreachable_provider_is_named() {
    // A port nothing listens on: bind, note it, close.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = searcher(config(Provider::Brave, &format!("http://{addr}")))
        .unwrap()
        .search(query("x", 3))
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Upstream);
    assert!(
        err.message.starts_with("cannot reach brave"),
        "{}",
        err.message
    );
}
