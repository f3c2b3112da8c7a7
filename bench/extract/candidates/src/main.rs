//! Runs one third-party extractor over pages for bench/extract/bench.py.
//!
//! Usage: `extract-candidates NAME < pages.tsv`, one page per input line: `id<TAB>path<TAB>url`.
//! Prints one JSON object per page: `{"id", "ms", "title", "text", "markdown", "error"}`.
//! `ms` times the extraction only (the file is read before the clock starts).
#![allow(clippy::print_stdout)]

use std::io::{BufRead, Write};
use std::time::Instant;

struct Out {
    title: Option<String>,
    text: String,
    markdown: Option<String>,
}

fn smoothie(html: &str, url: &str, mode: dom_smoothie::TextMode) -> Result<Out, String> {
    let cfg = dom_smoothie::Config {
        text_mode: mode,
        ..Default::default()
    };
    let mut r = dom_smoothie::Readability::new(html, Some(url), Some(cfg)).map_err(|e| e.to_string())?;
    let a = r.parse().map_err(|e| e.to_string())?;
    Ok(Out {
        title: Some(a.title.clone()),
        text: a.text_content.to_string(),
        markdown: Some(a.content.to_string()),
    })
}

fn run(name: &str, html: &str, url: &str) -> Result<Out, String> {
    match name {
        // text_content in Readability's raw text mode; markdown = dom_smoothie's own Markdown mode.
        "dom_smoothie" => {
            let mut o = smoothie(html, url, dom_smoothie::TextMode::Formatted)?;
            o.markdown = None;
            Ok(o)
        }
        "dom_smoothie_md" => {
            let o = smoothie(html, url, dom_smoothie::TextMode::Markdown)?;
            Ok(Out { markdown: Some(o.text.clone()), ..o })
        }
        // dom_smoothie's cleaned HTML converted by htmd.
        "dom_smoothie_htmd" => {
            let o = smoothie(html, url, dom_smoothie::TextMode::Raw)?;
            let md = htmd::convert(o.markdown.as_deref().unwrap_or("")).map_err(|e| e.to_string())?;
            Ok(Out { title: o.title, text: o.text, markdown: Some(md) })
        }
        "readability" => {
            let u = url::Url::parse(url).map_err(|e| e.to_string())?;
            let p = readability::extractor::extract(&mut html.as_bytes(), &u).map_err(|e| e.to_string())?;
            Ok(Out { title: Some(p.title), text: p.text, markdown: None })
        }
        "rs_trafilatura" => {
            let opts = rs_trafilatura::Options {
                output_markdown: true,
                url: Some(url.to_string()),
                ..Default::default()
            };
            let r = rs_trafilatura::extract_with_options(html, &opts).map_err(|e| e.to_string())?;
            Ok(Out { title: r.metadata.title, text: r.content_text, markdown: r.content_markdown })
        }
        other => Err(format!("unknown candidate {other}")),
    }
}

fn main() {
    let name = std::env::args().nth(1).expect("candidate name");
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let mut f = line.split('\t');
        let (id, path, url) = (f.next().unwrap(), f.next().unwrap(), f.next().unwrap_or(""));
        let bytes = std::fs::read(path).expect("page");
        let html = String::from_utf8_lossy(&bytes);
        let t = Instant::now();
        let r = std::panic::catch_unwind(|| run(&name, &html, url));
        let ms = t.elapsed().as_secs_f64() * 1e3;
        let v = match r {
            Ok(Ok(o)) => serde_json::json!({"id": id, "ms": ms, "title": o.title, "text": o.text, "markdown": o.markdown}),
            Ok(Err(e)) => serde_json::json!({"id": id, "ms": ms, "text": "", "error": e}),
            Err(_) => serde_json::json!({"id": id, "ms": ms, "text": "", "error": "panic"}),
        };
        writeln!(out, "{v}").unwrap();
        out.flush().unwrap();
    }
}
