//! The SSRF table: every way of spelling an internal address — as a URL, through a name,
//! through a redirect from an allowed server, through a name that answers differently the
//! second time — is refused with a tool error that says why, and the loopback servers this
//! test starts see no connection at all.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::common::{Script, fetcher, html, quick, redirect, serve_on_all};
use ringfence_web::tools::{Format, WebErrorKind};

/// Names the test resolver knows (as a hostile DNS server would answer them).
fn script() -> Script {
    Script::default()
        .answer("localhost", &[&["127.0.0.1", "::1"]])
        .answer("internal.test", &[&["127.0.0.1"]])
        .answer("mixed.test", &[&["93.184.215.14", "127.0.0.1"]])
        .answer("v6.test", &[&["::1"]])
        .answer("mapped.test", &[&["::ffff:127.0.0.1"]])
        .answer("nat64.test", &[&["64:ff9b::7f00:1"]])
        .answer("zero.test", &[&["0.0.0.0"]])
        .answer("metadata.google.internal", &[&["169.254.169.254"]])
        .answer("allowed.test", &[&["127.0.0.4"]])
}

/// (URL, a fragment the error must contain). `{P}` is the servers' port.
const CASES: &[(&str, &str)] = &[
    // 127.0.0.1, spelled every way a URL parser accepts.
    ("http://127.0.0.1:{P}/", "loopback"),
    ("http://2130706433:{P}/", "loopback"),
    ("http://0x7f000001:{P}/", "loopback"),
    ("http://0x7f.1:{P}/", "loopback"),
    ("http://0177.0.0.1:{P}/", "loopback"),
    ("http://0177.1:{P}/", "loopback"),
    ("http://127.1:{P}/", "loopback"),
    ("http://127.0.1:{P}/", "loopback"),
    ("http://0x7F.0.0.1:{P}/", "loopback"),
    ("http://017700000001:{P}/", "loopback"),
    ("http://127.000.000.001:{P}/", "loopback"),
    ("http://127.0.0.1.:{P}/", "loopback"),
    ("http://%31%32%37.0.0.1:{P}/", "loopback"),
    ("http://127%2E0%2E0%2E1:{P}/", "loopback"),
    (
        "http://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}:{P}/",
        "loopback",
    ),
    ("http://127\u{3002}0\u{3002}0\u{3002}1:{P}/", "loopback"),
    ("HTTP://127.0.0.1:{P}/", "loopback"),
    ("http:/127.0.0.1:{P}/", "loopback"),
    ("http:127.0.0.1:{P}/", "loopback"),
    ("  http://127.0.0.1:{P}/  ", "loopback"),
    // Other loopback addresses.
    ("http://127.0.0.2:{P}/", "loopback"),
    ("http://127.0.0.3:{P}/", "loopback"),
    ("http://127.255.255.254:{P}/", "loopback"),
    // IPv6 loopback and the IPv6 forms that carry 127.0.0.1.
    ("http://[::1]:{P}/", "loopback"),
    ("http://[0:0:0:0:0:0:0:1]:{P}/", "loopback"),
    ("http://[::ffff:127.0.0.1]:{P}/", "loopback"),
    ("http://[::ffff:7f00:1]:{P}/", "loopback"),
    ("http://[::127.0.0.1]:{P}/", "refused"),
    ("http://[64:ff9b::127.0.0.1]:{P}/", "loopback"),
    ("http://[2002:7f00:1::]:{P}/", "loopback"),
    (
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{P}/",
        "loopback",
    ),
    // The unspecified address (connecting to it reaches this host).
    ("http://0:{P}/", "unspecified"),
    ("http://0.0.0.0:{P}/", "unspecified"),
    ("http://[::]:{P}/", "unspecified"),
    // Names that resolve inward.
    ("http://localhost:{P}/", "loopback"),
    ("http://LocalHost.:{P}/", "loopback"),
    ("http://internal.test:{P}/", "loopback"),
    ("http://INTERNAL.TEST.:{P}/", "loopback"),
    ("http://mixed.test:{P}/", "loopback"),
    ("http://v6.test:{P}/", "loopback"),
    ("http://mapped.test:{P}/", "loopback"),
    ("http://nat64.test:{P}/", "loopback"),
    ("http://zero.test:{P}/", "unspecified"),
    (
        "http://metadata.google.internal/computeMetadata/v1/",
        "link-local",
    ),
    // Cloud metadata and private networks.
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://[fd00:ec2::254]/latest/meta-data/", "unique-local"),
    ("http://10.0.0.1/", "private"),
    ("http://172.16.0.1/", "private"),
    ("http://192.168.1.1/", "private"),
    ("http://100.64.0.1/", "shared"),
    ("http://[fc00::1]/", "unique-local"),
    ("http://[fe80::1]/", "link-local"),
    ("http://224.0.0.1/", "multicast"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://192.0.2.1/", "documentation"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://240.0.0.1/", "reserved"),
    // Other schemes.
    ("file:///etc/passwd", "only http and https"),
    ("ftp://127.0.0.1:{P}/", "only http and https"),
    ("gopher://127.0.0.1:{P}/_GET%20/", "only http and https"),
    ("dict://127.0.0.1:{P}/info", "only http and https"),
    ("ws://127.0.0.1:{P}/", "only http and https"),
    ("data:text/html,<p>hi</p>", "only http and https"),
    ("javascript:alert(1)", "only http and https"),
    ("jar:http://127.0.0.1:{P}/x.jar!/", "only http and https"),
    ("view-source:http://127.0.0.1:{P}/", "only http and https"),
    // User-info tricks.
    ("http://example.com@127.0.0.1:{P}/", "user name or password"),
    ("http://127.0.0.1:{P}@example.com/", "user name or password"),
    (
        "http://user:pass@allowed.test:{P}/",
        "user name or password",
    ),
    ("http://127.0.0.1:{P}#@allowed.test/", "loopback"),
    ("http://127.0.0.1:{P}?@allowed.test/", "loopback"),
    // Redirects from a server the operator allowed (by name) into what it did not.
    ("http://allowed.test:{P}/r/0", "loopback"),
    ("http://allowed.test:{P}/r/1", "link-local"),
    ("http://allowed.test:{P}/r/2", "only http and https"),
    ("http://allowed.test:{P}/r/3", "loopback"),
    ("http://allowed.test:{P}/r/4", "loopback"),
    ("http://allowed.test:{P}/r/5", "loopback"),
    ("http://allowed.test:{P}/r/6", "only http and https"),
    ("http://allowed.test:{P}/r/7", "loopback"),
    ("http://allowed.test:{P}/r/8", "loopback"),
    ("http://allowed.test:{P}/r/9", "user name or password"),
    ("http://allowed.test:{P}/r/10", "loopback"),
    ("http://allowed.test:{P}/r/11", "loopback"),
];

/// Where the allowed server's `/r/N` redirects (with the status used).
fn redirect_target(n: usize, port: u16) -> (String, &'static str) {
    let p = port;
    match n {
        0 => (format!("http://127.0.0.1:{p}/"), "302 Found"),
        1 => (
            "http://169.254.169.254/latest/meta-data/iam/".into(),
            "301 Moved Permanently",
        ),
        2 => ("file:///etc/passwd".into(), "302 Found"),
        // The allowed server itself, spelled as its address: the name was allowed, not
        // the loopback address behind it.
        3 => (format!("http://2130706436:{p}/"), "302 Found"),
        4 => (format!("http://localhost:{p}/"), "303 See Other"),
        5 => (format!("http://[::1]:{p}/"), "307 Temporary Redirect"),
        6 => (format!("gopher://127.0.0.1:{p}/_x"), "302 Found"),
        7 => (format!("//127.0.0.2:{p}/"), "302 Found"),
        8 => (
            format!("http://internal.test:{p}/"),
            "307 Temporary Redirect",
        ),
        9 => (format!("http://user:pw@allowed.test:{p}/"), "302 Found"),
        10 => (
            format!("http://[::ffff:127.0.0.1]:{p}/"),
            "308 Permanent Redirect",
        ),
        11 => ("/r/12".into(), "302 Found"),
        12 => (format!("http://0x7f.1:{p}/"), "302 Found"),
        _ => (String::new(), "404 Not Found"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_spelling_of_an_internal_address_is_reached() {
    let internal = Arc::new(|_: &str| html("<p>internal secret</p>")) as crate::common::Handler;
    let (port, inside) =
        serve_on_all(&["127.0.0.1", "127.0.0.2", "127.0.0.3", "::1"], internal).await;
    // The allowed server, on the same port of 127.0.0.4.
    let allowed_handler = Arc::new(move |head: &str| {
        let path = head.split_whitespace().nth(1).unwrap_or("/");
        match path
            .strip_prefix("/r/")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(n) => {
                let (to, status) = redirect_target(n, port);
                redirect(status, &to)
            }
            None => html("<p>allowed</p>"),
        }
    }) as crate::common::Handler;
    let allowed = crate::common::serve("127.0.0.4".parse().unwrap(), port, allowed_handler)
        .await
        .expect("127.0.0.4 on the same port");

    let script = script();
    let fetch = fetcher(&["allowed.test"], &script, quick());
    assert!(CASES.len() >= 50);
    for (template, fragment) in CASES {
        let url = template.replace("{P}", &port.to_string());
        let err = fetch
            .get(&url, Format::Markdown)
            .await
            .err()
            .unwrap_or_else(|| panic!("{url} was fetched"));
        assert!(
            matches!(err.kind, WebErrorKind::Refused | WebErrorKind::Invalid),
            "{url}: {:?} {}",
            err.kind,
            err.message
        );
        assert!(
            err.message.contains(fragment),
            "{url}: `{}` does not say `{fragment}`",
            err.message
        );
        if err.kind == WebErrorKind::Refused && !fragment.contains("only http") {
            assert!(err.message.contains("refused"), "{url}: {}", err.message);
        }
        for s in &inside {
            assert_eq!(s.connections(), 0, "{url} reached {}", s.addr);
        }
    }
    // The allowed server saw each redirect case exactly once (13 requests: /r/0..=12), and
    // never the second request of case 3 (itself spelled as its address).
    let lines = allowed.request_lines();
    assert_eq!(lines.len(), 13, "{lines:?}");
    assert!(lines.iter().all(|l| l.starts_with("GET /r/")), "{lines:?}");
    // And it is reachable when asked directly: the refusals above were not a broken fetcher.
    let ok = fetch
        .get(&format!("http://allowed.test:{port}/"), Format::Html)
        .await
        .unwrap();
    assert!(format!("{:?}", ok.body).contains("allowed"));
}

/// DNS rebinding: a name that answered an allowed address answers loopback the next time.
/// Each connection resolves once, in the guard, and the second answer is checked as the
/// first was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_that_rebinds_to_loopback_is_refused_the_second_time() {
    let handler = Arc::new(|head: &str| {
        let path = head.split_whitespace().nth(1).unwrap_or("/");
        html(&format!("<p>served {path}</p>"))
    }) as crate::common::Handler;
    let (port, servers) = serve_on_all(&["127.0.0.4", "127.0.0.1"], handler).await;
    let (public, internal) = (&servers[0], &servers[1]);
    let script = Script::default().answer("rebind.test", &[&["127.0.0.4"], &["127.0.0.1"]]);
    let fetch = fetcher(&["127.0.0.4"], &script, quick());

    let first = fetch
        .get(&format!("http://rebind.test:{port}/a"), Format::Html)
        .await
        .unwrap();
    assert!(format!("{:?}", first.body).contains("served /a"));
    assert_eq!(
        script.asked.load(Ordering::SeqCst),
        1,
        "resolved once, by what connected"
    );

    let err = fetch
        .get(&format!("http://rebind.test:{port}/b"), Format::Html)
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Refused, "{}", err.message);
    assert!(
        err.message.contains("loopback") && err.message.contains("127.0.0.1"),
        "{}",
        err.message
    );
    assert_eq!(script.asked.load(Ordering::SeqCst), 2);
    assert_eq!(internal.connections(), 0);
    assert_eq!(public.request_lines(), ["GET /a HTTP/1.1"]);
}

/// Without any allow-list, even the test's own servers are out of reach; with one, exactly
/// what it names is reachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_allow_list_admits_what_it_names_and_nothing_else() {
    let handler = Arc::new(|_: &str| html("<p>ok</p>")) as crate::common::Handler;
    let (port, servers) = serve_on_all(&["127.0.0.5", "127.0.0.6"], handler).await;
    let script = Script::default();
    let fetch = fetcher(&["127.0.0.5/32"], &script, quick());
    assert!(
        fetch
            .get(&format!("http://127.0.0.5:{port}/"), Format::Html)
            .await
            .is_ok()
    );
    let err = fetch
        .get(&format!("http://127.0.0.6:{port}/"), Format::Html)
        .await
        .unwrap_err();
    assert!(
        err.message.contains("[web] allow_private"),
        "{}",
        err.message
    );
    assert_eq!(servers[1].connections(), 0);
    let none = fetcher(&[], &script, quick());
    assert!(
        none.get(&format!("http://127.0.0.5:{port}/"), Format::Html)
            .await
            .is_err()
    );
    assert_eq!(servers[0].connections(), 1);
}

/// With a proxy, the proxy resolves the targets: the fetcher resolves and checks each name
/// itself before sending, so an inward name never reaches the proxy; the proxy's own host
/// (configured by the operator) is reached although it is on loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_proxy_inward_names_are_refused_before_the_proxy_sees_them() {
    let proxy = crate::common::serve(
        "127.0.0.9".parse().unwrap(),
        0,
        Arc::new(|head: &str| {
            html(&format!(
                "<p>proxied {}</p>",
                head.lines().next().unwrap_or("")
            ))
        }),
    )
    .await
    .unwrap();
    let script = Script::default()
        .answer("proxy.test", &[&["127.0.0.9"]])
        .answer("internal.test", &[&["127.0.0.1"]])
        .answer("public.test", &[&["93.184.215.14"]]);
    let settings = ringfence_web::FetchSettings {
        proxy: Some(format!("http://proxy.test:{}", proxy.addr.port())),
        ..quick()
    };
    let fetch = fetcher(&[], &script, settings);
    for url in [
        "http://internal.test/",
        "http://127.0.0.1/",
        "http://localhost.internal.test/",
    ] {
        let err = fetch.get(url, Format::Html).await.unwrap_err();
        assert!(
            matches!(err.kind, WebErrorKind::Refused | WebErrorKind::Upstream),
            "{url}: {}",
            err.message
        );
    }
    assert_eq!(proxy.connections(), 0, "an inward name reached the proxy");
    let doc = fetch
        .get("http://public.test/page", Format::Html)
        .await
        .unwrap();
    assert!(
        format!("{:?}", doc.body).contains("proxied GET http://public.test/page HTTP/1.1"),
        "{:?}",
        doc.body
    );
}
