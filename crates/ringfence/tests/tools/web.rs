//! The web tools over fake services: paging, the per-user cache, formats, argument errors,
//! search results and domain filtering, and the not-configured answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringfence_core::{BoxFuture, Content, Session, ToolContext, ToolErrorKind, Toolbox};
use ringfence_web::tools::{
    self as web, FetchRequest, Fetched, FetchedBody, Fetcher, SearchHit, SearchQuery, Searcher,
    WebError, WebErrorKind, WebServices,
};
use serde_json::{Value, json};

use crate::common::Fx;

/// Serves one long Markdown document per URL and counts the fetches (and who asked).
#[derive(Default)]
struct FakeFetcher {
    calls: AtomicUsize,
    seen: Mutex<Vec<(String, String, &'static str)>>,
}

/// 1,000 lines `line NNN: …` of 20 characters each (with the newline).
fn long_text() -> String {
    (0..1000)
        .map(|i| format!("line {i:03}: abcdefghi\n"))
        .collect()
}

impl Fetcher for FakeFetcher {
    fn fetch(&self, request: FetchRequest) -> BoxFuture<'static, Result<Fetched, WebError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.seen.lock().unwrap().push((
            request.user.clone(),
            request.url.clone(),
            request.format.as_str(),
        ));
        let url = request.url.clone();
        Box::pin(async move {
            if url.contains("refuse") {
                return Err(WebError::new(
                    WebErrorKind::Refused,
                    "refused: 127.0.0.1 is a loopback address; an operator can allow it with [web] allow_private",
                ));
            }
            if url.contains("slow") {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            let body = if url.contains("image") {
                FetchedBody::Image {
                    mime: "image/png".into(),
                    data: b"\x89PNG\r\n\x1a\nfake".to_vec(),
                }
            } else {
                FetchedBody::Text(long_text())
            };
            Ok(Fetched {
                url,
                content_type: "text/html".into(),
                title: Some("A long page".into()),
                body,
                notices: vec![],
            })
        })
    }
}

struct FakeSearch(Mutex<Vec<SearchQuery>>);

impl Searcher for FakeSearch {
    fn provider(&self) -> &str {
        "fake"
    }
    fn search(&self, query: SearchQuery) -> BoxFuture<'static, Result<Vec<SearchHit>, WebError>> {
        self.0.lock().unwrap().push(query);
        let hit = |t: &str, u: &str, d: Option<&str>| SearchHit {
            title: t.into(),
            url: u.into(),
            snippet: format!("about {t}"),
            date: d.map(Into::into),
        };
        Box::pin(async move {
            Ok(vec![
                hit("Rust", "https://www.rust-lang.org/", Some("2026-11-01")),
                hit("Docs", "https://docs.rs/tokio", None),
                hit("Spam", "https://spam.example.net/x", None),
                hit("Blog", "https://blog.rust-lang.org/2026/", None),
            ])
        })
    }
}

struct Web {
    fx: Fx,
    fetcher: Arc<FakeFetcher>,
    search: Arc<FakeSearch>,
    toolbox: Toolbox,
}

fn web(with_search: bool) -> Web {
    let fetcher = Arc::new(FakeFetcher::default());
    let search = Arc::new(FakeSearch(Mutex::new(Vec::new())));
    let family = web::family(WebServices {
        fetcher: fetcher.clone(),
        searcher: with_search.then(|| search.clone() as Arc<dyn Searcher>),
        cache: web::CacheLimits {
            ttl: Duration::from_secs(60),
            entries_per_user: 8,
            bytes_per_user: 1 << 20,
            total_bytes: 4 << 20,
        },
    });
    Web {
        fx: Fx::new(),
        fetcher,
        search,
        toolbox: Toolbox::of(&[family]),
    }
}

impl Web {
    fn ctx_for(&self, user: &str) -> ToolContext {
        let mut ctx = self.fx.ctx.clone();
        let ws = self.fx.ctx.session.workspace.clone();
        ctx.session = Arc::new(Session::new(ws).with_user(user));
        ctx
    }

    async fn call(
        &self,
        user: &str,
        tool: &str,
        args: Value,
    ) -> Result<ringfence_core::ToolOutput, ringfence_core::ToolError> {
        let tool = self.toolbox.get(tool).unwrap().clone();
        tool.call(self.ctx_for(user), args).await
    }
}

fn text(out: &ringfence_core::ToolOutput) -> String {
    out.all_text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_join_into_the_whole_document_with_one_fetch() {
    let w = web(false);
    let url = "https://example.com/long";
    let mut start = 0;
    let mut joined = String::new();
    let mut calls = 0;
    loop {
        let out = w
            .call(
                "ann",
                "web_fetch",
                json!({"url": url, "max_length": 3000, "start_index": start}),
            )
            .await
            .unwrap();
        calls += 1;
        let s = out.structured.clone().unwrap();
        assert_eq!(s["total_length"], 20_000);
        let body = text(&out);
        let content = body.split_once("\n\n").unwrap().1;
        let content = content.split("\n\n[Content truncated").next().unwrap();
        assert_eq!(
            content.chars().count(),
            s["returned_length"].as_u64().unwrap() as usize
        );
        joined.push_str(content);
        match s["next_start_index"].as_u64() {
            Some(next) => {
                assert!(body.contains(&format!("start_index={next}")), "{body}");
                start = next as usize;
            }
            None => {
                assert!(!body.contains("Content truncated"));
                break;
            }
        }
    }
    assert_eq!(joined, long_text());
    assert!(calls >= 7);
    assert_eq!(
        w.fetcher.calls.load(Ordering::SeqCst),
        1,
        "paging used the cache"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_is_per_user_and_per_format() {
    let w = web(false);
    let url = "https://example.com/a";
    w.call("ann", "web_fetch", json!({"url": url}))
        .await
        .unwrap();
    w.call("ann", "web_fetch", json!({"url": url, "start_index": 100}))
        .await
        .unwrap();
    w.call("bob", "web_fetch", json!({"url": url}))
        .await
        .unwrap();
    w.call("ann", "web_fetch", json!({"url": url, "format": "text"}))
        .await
        .unwrap();
    let seen = w.fetcher.seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        [
            ("ann".to_owned(), url.to_owned(), "markdown"),
            ("bob".to_owned(), url.to_owned(), "markdown"),
            ("ann".to_owned(), url.to_owned(), "text"),
        ]
    );
}

/// Issue 29: the page cache was one shared pool, so one user's fetches evicted everyone's
/// pages. Each user has a share now: Bob's hundred pages evict only his own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_fetches_never_evict_another_users_page() {
    let w = web(false);
    let mine = "https://example.com/ann";
    w.call("ann", "web_fetch", json!({"url": mine}))
        .await
        .unwrap();
    for i in 0..100 {
        w.call(
            "bob",
            "web_fetch",
            json!({"url": format!("https://example.com/{i}")}),
        )
        .await
        .unwrap();
    }
    w.call("ann", "web_fetch", json!({"url": mine, "start_index": 100}))
        .await
        .unwrap();
    let seen = w.fetcher.seen.lock().unwrap().clone();
    let anns: Vec<_> = seen.iter().filter(|(user, _, _)| user == "ann").collect();
    assert_eq!(anns.len(), 1, "Ann's page was fetched again: {anns:?}");
    assert_eq!(seen.len(), 101);
    // Bob's share holds his last eight (the test's bound); his first went.
    w.call("bob", "web_fetch", json!({"url": "https://example.com/99"}))
        .await
        .unwrap();
    w.call("bob", "web_fetch", json!({"url": "https://example.com/0"}))
        .await
        .unwrap();
    assert_eq!(w.fetcher.calls.load(Ordering::SeqCst), 102);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_refusals_are_clear_errors() {
    let w = web(false);
    for (args, kind, says) in [
        (
            json!({"url": ""}),
            ToolErrorKind::InvalidArgument,
            "url is empty",
        ),
        (
            json!({"url": "https://e.com", "format": "pdf"}),
            ToolErrorKind::InvalidArgument,
            "markdown, text, html",
        ),
        (
            json!({"url": "https://e.com", "max_length": 0}),
            ToolErrorKind::InvalidArgument,
            "between 1 and",
        ),
        (
            json!({"url": "https://e.com", "start_index": 20_000}),
            ToolErrorKind::InvalidArgument,
            "past the end",
        ),
        (
            json!({"url": "https://e.com", "bogus": 1}),
            ToolErrorKind::InvalidArgument,
            "bogus",
        ),
        (
            json!({"url": "http://refuse.test/"}),
            ToolErrorKind::Refused,
            "allow_private",
        ),
    ] {
        let err = w.call("ann", "web_fetch", args.clone()).await.unwrap_err();
        assert_eq!(err.kind, kind, "{args}: {}", err.message);
        assert!(err.message.contains(says), "{args}: {}", err.message);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_image_comes_back_as_image_content() {
    let w = web(false);
    let out = w
        .call(
            "ann",
            "web_fetch",
            json!({"url": "https://e.com/image.png"}),
        )
        .await
        .unwrap();
    assert!(
        matches!(&out.content[1], Content::Image { mime, data } if mime == "image/png" && data.len() == 12)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_fetch_stops() {
    let w = web(false);
    let ctx = w.ctx_for("ann");
    let cancel = ctx.cancel.clone();
    let tool = w.toolbox.get("web_fetch").unwrap().clone();
    let call =
        tokio::spawn(async move { tool.call(ctx, json!({"url": "https://e.com/slow"})).await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    cancel.cancel();
    let err = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_results_are_numbered_filtered_and_structured() {
    let w = web(true);
    let out = w
        .call(
            "ann",
            "web_search",
            json!({"query": "rust async", "max_results": 3, "blocked_domains": ["example.net"]}),
        )
        .await
        .unwrap();
    let t = text(&out);
    assert!(t.starts_with("3 results for \"rust async\" (fake):"), "{t}");
    assert!(
        t.contains("1. Rust\n   https://www.rust-lang.org/\n   Date: 2026-11-01\n   about Rust"),
        "{t}"
    );
    assert!(!t.contains("spam"), "{t}");
    let s = out.structured.unwrap();
    assert_eq!(s["results"].as_array().unwrap().len(), 3);
    assert_eq!(s["results"][1]["url"], "https://docs.rs/tokio");
    let out = w
        .call(
            "ann",
            "web_search",
            json!({"query": "rust", "allowed_domains": ["rust-lang.org"]}),
        )
        .await
        .unwrap();
    let urls: Vec<&str> = out.structured.as_ref().unwrap()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url"].as_str().unwrap())
        .collect();
    assert_eq!(
        urls,
        [
            "https://www.rust-lang.org/",
            "https://blog.rust-lang.org/2026/"
        ]
    );
    let asked = w.search.0.lock().unwrap().clone();
    assert_eq!(asked[1].allowed_domains, ["rust-lang.org"]);
    assert_eq!(asked[0].max_results, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn search_without_a_provider_says_how_to_configure_one() {
    let w = web(false);
    let err = w
        .call("ann", "web_search", json!({"query": "x"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Disabled);
    assert!(
        err.message.contains("[web.search] provider"),
        "{}",
        err.message
    );
    for (args, says) in [
        (json!({"query": "  "}), "query is empty"),
        (json!({"query": "x", "max_results": 21}), "between 1 and 20"),
        (
            json!({"query": "x", "allowed_domains": ["http://a.com/"]}),
            "not a domain name",
        ),
    ] {
        let err = web(true)
            .call("ann", "web_search", args.clone())
            .await
            .unwrap_err();
        assert!(err.message.contains(says), "{args}: {}", err.message);
    }
}
