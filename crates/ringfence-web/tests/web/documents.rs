//! What web_fetch makes of each kind of document, and robots.txt.

use std::sync::Arc;

use crate::common::{Script, fetcher, quick, response, serve};
use ringfence_web::FetchSettings;
use ringfence_web::tools::{FetchedBody, Format, WebErrorKind};

fn text(body: &FetchedBody) -> &str {
    match body {
        FetchedBody::Text(t) => t,
        FetchedBody::Image { .. } => panic!("an image"),
    }
}

/// A two-page PDF with one line of Helvetica text on each page (offsets computed).
fn two_page_pdf() -> Vec<u8> {
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_owned(),
        "<< /Type /Pages /Kids [3 0 R 4 0 R] /Count 2 >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /Font << /F1 7 0 R >> >> >>".to_owned(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 6 0 R /Resources << /Font << /F1 7 0 R >> >> >>".to_owned(),
        stream("BT /F1 24 Tf 72 700 Td (Hello from page one) Tj ET"),
        stream("BT /F1 24 Tf 72 700 Td (Greetings from page two) Tj ET"),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_owned(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, obj) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{obj}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for off in offsets {
        out.extend_from_slice(format!("{off:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn stream(content: &str) -> String {
    format!(
        "<< /Length {} >>\nstream\n{content}\nendstream",
        content.len()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_type_is_rendered_its_own_way() {
    let pdf = Arc::new(two_page_pdf());
    let server = serve(
        "127.0.0.1".parse().unwrap(),
        0,
        Arc::new(move |head: &str| {
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            match path {
                "/doc.pdf" => response("200 OK", &[("Content-Type", "application/pdf")], &pdf),
                "/data" => response("200 OK", &[("Content-Type", "application/json")], br#"{"a":[1,2],"b":{"c":"d"}}"#),
                "/notes.txt" => response("200 OK", &[("Content-Type", "text/plain; charset=iso-8859-1")], b"caf\xe9 au lait\n"),
                "/page" => response(
                    "200 OK",
                    &[("Content-Type", "text/html")],
                    b"<html><head><title>The Title</title></head><body><p>Body text</p></body></html>",
                ),
                _ => response("404 Not Found", &[], b"gone"),
            }
        }),
    )
    .await
    .unwrap();
    let base = format!("http://127.0.0.1:{}", server.addr.port());
    let fetch = fetcher(&["127.0.0.1"], &Script::default(), quick());

    if cfg!(feature = "pdf") {
        let doc = fetch
            .get(&format!("{base}/doc.pdf"), Format::Markdown)
            .await
            .unwrap();
        let t = text(&doc.body);
        let one = t.find("--- Page 1 of 2 ---").expect(t);
        let two = t.find("--- Page 2 of 2 ---").expect(t);
        let hello = t.find("Hello from page one").expect(t);
        let greet = t.find("Greetings from page two").expect(t);
        assert!(one < hello && hello < two && two < greet, "{t}");
    }
    let doc = fetch
        .get(&format!("{base}/data"), Format::Markdown)
        .await
        .unwrap();
    assert_eq!(
        text(&doc.body),
        "{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": {\n    \"c\": \"d\"\n  }\n}"
    );
    let doc = fetch
        .get(&format!("{base}/notes.txt"), Format::Markdown)
        .await
        .unwrap();
    assert_eq!(text(&doc.body), "café au lait\n");
    let doc = fetch
        .get(&format!("{base}/page"), Format::Html)
        .await
        .unwrap();
    assert_eq!(doc.title.as_deref(), Some("The Title"));
    assert!(text(&doc.body).starts_with("<html>"));
    let doc = fetch
        .get(&format!("{base}/page"), Format::Markdown)
        .await
        .unwrap();
    assert!(text(&doc.body).contains("Body text"));
    let err = fetch
        .get(&format!("{base}/missing"), Format::Markdown)
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Upstream);
    assert!(err.message.contains("404"), "{}", err.message);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_txt_is_honoured_read_once_and_can_be_turned_off() {
    let server = serve(
        "127.0.0.1".parse().unwrap(),
        0,
        Arc::new(|head: &str| {
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            match path {
                "/robots.txt" => response(
                    "200 OK",
                    &[("Content-Type", "text/plain")],
                    b"User-agent: *\nDisallow: /private\n",
                ),
                _ => response("200 OK", &[("Content-Type", "text/plain")], b"content"),
            }
        }),
    )
    .await
    .unwrap();
    let base = format!("http://127.0.0.1:{}", server.addr.port());
    let honour = fetcher(
        &["127.0.0.1"],
        &Script::default(),
        FetchSettings {
            robots: true,
            ..quick()
        },
    );
    let err = honour
        .get(&format!("{base}/private/x"), Format::Text)
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Refused);
    assert!(
        err.message.contains("robots.txt") && err.message.contains("[web] robots = false"),
        "{}",
        err.message
    );
    honour
        .get(&format!("{base}/public"), Format::Text)
        .await
        .unwrap();
    let lines = server.request_lines();
    assert_eq!(
        lines.iter().filter(|l| l.contains("/robots.txt")).count(),
        1,
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.contains("/private")), "{lines:?}");
    let ignore = fetcher(
        &["127.0.0.1"],
        &Script::default(),
        FetchSettings {
            robots: false,
            ..quick()
        },
    );
    ignore
        .get(&format!("{base}/private/x"), Format::Text)
        .await
        .unwrap();
}
