//! Hostile and malformed HTML: extraction never panics, never exhausts the stack and finishes on
//! large pages. Each case runs on a thread with a 2 MiB stack, the size of a tokio worker's, as
//! `web_fetch` would. Wall time is not asserted (BENCHMARKS.md measures it).

use ringfence_web::extract::{Extracted, extract};

fn run(html: String) -> Extracted {
    let base = url::Url::parse("https://example.com/a/page.html").unwrap();
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || extract(&html, Some(&base)))
        .unwrap()
        .join()
        .expect("extraction panicked")
}

#[test]
fn nesting_100k_deep_keeps_the_text() {
    for tag in ["div", "span", "b", "a", "li", "blockquote", "table", "p"] {
        let html = format!(
            "<html><body>{}deep words here{}</body></html>",
            format!("<{tag}>").repeat(100_000),
            format!("</{tag}>").repeat(100_000)
        );
        let e = run(html);
        assert!(
            e.text.contains("deep words here"),
            "{tag}: {:?}",
            &e.text[..e.text.len().min(200)]
        );
    }
}

#[test]
fn nesting_100k_deep_unclosed() {
    let e = run(format!(
        "<body><p>intro text</p>{}leaf",
        "<div><section>".repeat(50_000)
    ));
    assert!(e.text.contains("leaf"));
    assert!(e.text.contains("intro text"));
}

#[test]
fn huge_attribute_and_nul_bytes() {
    let big = "x".repeat(8 << 20);
    let e = run(format!(
        "<body><p title=\"{big}\" data-a='{big}'>visible\0text after a NUL</p><img src=\"{big}\"></body>"
    ));
    assert!(e.text.contains("visible"));
    assert!(e.text.contains("text after a NUL"));
    let e = run("\0\0\0<\0p>\0".repeat(10_000));
    assert!(e.markdown.len() < 200_000);
}

#[test]
fn unclosed_everything() {
    let e = run("<html><head><title>Unclosed<body><div><p>first para<p>second <b>bold <i>both <a href='/x'>link <table><tr><td>cell <ul><li>item <pre>code".into());
    for word in [
        "first para",
        "second",
        "bold",
        "link",
        "cell",
        "item",
        "code",
    ] {
        assert!(e.text.contains(word), "{word} missing from {:?}", e.text);
    }
}

#[test]
fn empty_and_not_html() {
    let e = run(String::new());
    assert_eq!(e.text, "");
    assert_eq!(e.title, None);
    let e = run("just some plain text, no markup at all.\nsecond line".into());
    assert!(e.text.contains("just some plain text"));
    let e = run("{\"json\": [1, 2, 3], \"key\": \"value\"}".into());
    assert!(e.text.contains("value"));
    let e = run(
        "<<<>>><</>/><!--<!-- --!><![CDATA[x]]><?php echo 1 ?>&#0;&#xD800;&#x110000;&bogus;".into(),
    );
    assert!(!e.text.contains('\0'));
}

#[test]
fn binary_garbage() {
    let mut bytes = Vec::with_capacity(1 << 20);
    let mut x: u32 = 12345;
    for _ in 0..(1 << 20) {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        bytes.push((x >> 16) as u8);
    }
    let _ = run(String::from_utf8_lossy(&bytes).into_owned());
}

/// A 10 MB article page: many paragraphs, links, nested boxes and tables.
#[test]
fn ten_megabyte_page_finishes() {
    let mut html = String::from(
        "<html><head><title>Big</title></head><body><nav><a href='/'>Home</a></nav><article>",
    );
    let mut i = 0;
    while html.len() < 10 << 20 {
        html.push_str(&format!(
            "<div class='box'><h2>Section {i}</h2><p>Paragraph {i} has some words, commas, and a <a href='/l/{i}'>link</a>. \
             More text follows here so that the paragraph is long enough to count.</p>\
             <table><tr><td>a{i}</td><td>b{i}</td></tr></table><ul><li>one</li><li>two</li></ul></div>"
        ));
        i += 1;
    }
    html.push_str("</article><footer>foot</footer></body></html>");
    let e = run(html);
    assert!(e.text.contains("Paragraph 0 has some words"));
    assert!(e.text.contains(&format!("Paragraph {} has", i - 1)));
}

/// 10 MB in one flat run of siblings and in one text node.
#[test]
fn ten_megabyte_flat_and_single_text() {
    let e = run(format!("<body>{}</body>", "<p>x, y</p>".repeat(1 << 20)));
    assert!(e.text.contains("x, y"));
    let e = run(format!("<body><p>{}</p></body>", "word ".repeat(2 << 20)));
    assert!(e.text.starts_with("word word"));
    let e = run(format!(
        "<body>{}</body>",
        "<a href='/x'>l</a> ".repeat(400_000)
    ));
    assert!(e.text.contains('l'));
}
