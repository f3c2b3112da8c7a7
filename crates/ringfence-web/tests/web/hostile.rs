//! Hostile servers: each is answered in bounded time and memory, with a clear result or
//! error.

use std::sync::Arc;
use std::time::Duration;

use crate::common::{Reply, Script, fetcher, quick, redirect, response, serve};
use ringfence_web::FetchSettings;
use ringfence_web::tools::{FetchedBody, Format, WebErrorKind};

async fn one(
    handler: impl Fn(&str) -> Reply + Send + Sync + 'static,
) -> (String, crate::common::Server) {
    let server = serve("127.0.0.1".parse().unwrap(), 0, Arc::new(handler))
        .await
        .unwrap();
    (format!("http://127.0.0.1:{}", server.addr.port()), server)
}

fn allowed(settings: FetchSettings) -> ringfence_web::WebFetcher {
    fetcher(&["127.0.0.1"], &Script::default(), settings)
}

fn text(body: &FetchedBody) -> &str {
    match body {
        FetchedBody::Text(t) => t,
        FetchedBody::Image { .. } => panic!("an image"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_body_stops_at_the_cap_with_a_notice() {
    let (base, _s) = one(|_| Reply::Endless {
        head: b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n".to_vec(),
        chunk: vec![b'a'; 64 << 10],
        delay: Duration::ZERO,
    })
    .await;
    let fetch = allowed(FetchSettings {
        max_bytes: 2_000_000,
        ..quick()
    });
    let doc = fetch.get(&format!("{base}/"), Format::Text).await.unwrap();
    assert_eq!(text(&doc.body).len(), 2_000_000);
    assert!(
        doc.notices.iter().any(|n| n.contains("download cap")),
        "{:?}",
        doc.notices
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_drip_times_out() {
    let (base, _s) = one(|_| Reply::Endless {
        head: b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n".to_vec(),
        chunk: b"<p>x".to_vec(),
        delay: Duration::from_millis(100),
    })
    .await;
    let fetch = allowed(FetchSettings {
        timeout: Duration::from_secs(2),
        ..quick()
    });
    let err = fetch
        .get(&format!("{base}/"), Format::Markdown)
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Timeout, "{}", err.message);
    assert!(err.message.contains("timed out"), "{}", err.message);
    // Bounded by the 2 s deadline, not the server's patience: the kind says which ended it.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gzip_bomb_is_cut_at_the_cap() {
    use std::io::Write;
    // 256 MB of zeros, about 250 KB compressed.
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..256 {
        enc.write_all(&zeros).unwrap();
    }
    let bomb = Arc::new(enc.finish().unwrap());
    assert!(bomb.len() < 2 << 20);
    let (base, _s) = one(move |_| {
        response(
            "200 OK",
            &[("Content-Type", "text/plain"), ("Content-Encoding", "gzip")],
            &bomb,
        )
    })
    .await;
    let fetch = allowed(FetchSettings {
        max_bytes: 1_000_000,
        ..quick()
    });
    let doc = fetch.get(&format!("{base}/"), Format::Text).await.unwrap();
    assert_eq!(text(&doc.body).len(), 1_000_000);
    assert!(
        doc.notices.iter().any(|n| n.contains("download cap")),
        "{:?}",
        doc.notices
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_charset_is_overruled() {
    let latin = "<html><head><title>Caf\u{e9}</title></head><body><article><p>Un caf\u{e9} tr\u{e8}s cr\u{e9}meux, pr\u{e8}s de la f\u{ea}te: \u{e9}l\u{e8}ve, \u{e9}t\u{e9}, \u{e0} c\u{f4}t\u{e9}, na\u{ef}ve fa\u{e7}ade.</p></article></body></html>";
    let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode(latin);
    let bytes = bytes.into_owned();
    let (base, _s) = one(move |_| {
        response(
            "200 OK",
            &[("Content-Type", "text/html; charset=utf-8")],
            &bytes,
        )
    })
    .await;
    let doc = allowed(quick())
        .get(&format!("{base}/"), Format::Html)
        .await
        .unwrap();
    assert!(
        text(&doc.body).contains("tr\u{e8}s cr\u{e9}meux"),
        "{:?}",
        doc.body
    );
    assert!(
        doc.notices.iter().any(|n| n.contains("declared utf-8")),
        "{:?}",
        doc.notices
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_redirects_are_followed_and_the_eleventh_is_refused() {
    let (base, server) = one(|head| {
        let path = head.split_whitespace().nth(1).unwrap_or("/");
        let n: usize = path.trim_start_matches("/hop/").parse().unwrap_or(0);
        if path.starts_with("/end") {
            crate::common::html("<p>arrived</p>")
        } else if path.starts_with("/ten/") {
            let k: usize = path.trim_start_matches("/ten/").parse().unwrap();
            if k == 10 {
                redirect("302 Found", "/end")
            } else {
                redirect("302 Found", &format!("/ten/{}", k + 1))
            }
        } else {
            redirect("302 Found", &format!("/hop/{}", n + 1))
        }
    })
    .await;
    let fetch = allowed(quick());
    // /ten/1 → … → /ten/10 → /end: ten redirects.
    let doc = fetch
        .get(&format!("{base}/ten/1"), Format::Html)
        .await
        .unwrap();
    assert!(text(&doc.body).contains("arrived"));
    assert!(doc.url.ends_with("/end"));
    // Endless: refused after the tenth, naming the limit and the next hop.
    let before = server.request_lines().len();
    let err = fetch
        .get(&format!("{base}/hop/0"), Format::Html)
        .await
        .unwrap_err();
    assert!(
        err.message.contains("too many redirects") && err.message.contains("10"),
        "{}",
        err.message
    );
    assert!(err.message.contains("/hop/11"), "{}", err.message);
    assert_eq!(
        server.request_lines().len() - before,
        11,
        "the start and ten hops"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_headers_are_an_error() {
    let (base, _s) = one(|_| {
        let mut head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n".to_vec();
        for i in 0..20_000 {
            head.extend_from_slice(format!("X-Filler-{i}: {}\r\n", "y".repeat(100)).as_bytes());
        }
        head.extend_from_slice(b"Content-Length: 2\r\n\r\nok");
        Reply::Once(head)
    })
    .await;
    let err = allowed(quick())
        .get(&format!("{base}/"), Format::Text)
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Upstream, "{}", err.message);
    assert!(err.message.contains("127.0.0.1"), "{}", err.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_types_are_refused_by_name_and_images_come_back_as_images() {
    let (base, _s) = one(|head| {
        if head.contains("/zip") {
            response(
                "200 OK",
                &[("Content-Type", "application/zip")],
                b"PK\x03\x04....",
            )
        } else if head.contains("/big.png") {
            let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
            png.resize(3_000, 0);
            response("200 OK", &[("Content-Type", "image/png")], &png)
        } else {
            response("200 OK", &[], b"\x89PNG\r\n\x1a\nrest")
        }
    })
    .await;
    let fetch = allowed(FetchSettings {
        max_image_bytes: 1_000,
        ..quick()
    });
    let err = fetch
        .get(&format!("{base}/zip"), Format::Markdown)
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Unsupported);
    assert!(err.message.contains("application/zip"), "{}", err.message);
    let doc = fetch
        .get(&format!("{base}/small"), Format::Markdown)
        .await
        .unwrap();
    assert_eq!(doc.content_type, "image/png");
    assert!(matches!(doc.body, FetchedBody::Image { ref data, .. } if data.len() == 12));
    let err = fetch
        .get(&format!("{base}/big.png"), Format::Markdown)
        .await
        .unwrap_err();
    assert!(
        err.message.contains("3000 bytes") && err.message.contains("1000"),
        "{}",
        err.message
    );
}

/// A PDF whose content stream inflates to 300 MB (about 300 KB on the wire): within the
/// download cap, refused before the PDF parser inflates it.
#[cfg(feature = "pdf")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdf_bomb_is_refused_before_it_is_inflated() {
    use std::io::Write;
    let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1 << 20];
    for _ in 0..300 {
        enc.write_all(&zeros).unwrap();
    }
    let data = enc.finish().unwrap();
    let mut pdf = b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n3 0 obj\n<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>\nendobj\n".to_vec();
    pdf.extend_from_slice(
        format!(
            "4 0 obj\n<< /Length {} /Filter /FlateDecode >>\nstream\n",
            data.len()
        )
        .as_bytes(),
    );
    pdf.extend_from_slice(&data);
    pdf.extend_from_slice(b"\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n");
    let pdf = Arc::new(pdf);
    let (base, _s) =
        one(move |_| response("200 OK", &[("Content-Type", "application/pdf")], &pdf)).await;
    let err = allowed(quick())
        .get(&format!("{base}/bomb.pdf"), Format::Markdown)
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Unsupported, "{}", err.message);
    assert!(
        err.message.contains("decompression bomb"),
        "{}",
        err.message
    );
}
