//! Runs ringfence's main-content extractor over pages, for bench/extract/run.sh.
//!
//! `extract_pages < pages.tsv`, one page per line: `id<TAB>path<TAB>url`. Prints one JSON object
//! per page: `{"id", "ms", "title", "text", "markdown"}`; `ms` times `extract` alone (the file
//! is read and decoded before the clock starts).
// A benchmark tool: prints its results and reads the pages it is given from the ambient file system.
#![allow(clippy::print_stdout, clippy::disallowed_methods)]

use std::io::{BufRead, Write};
use std::time::Instant;

fn main() -> std::io::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut fields = line.split('\t');
        let (Some(id), Some(path)) = (fields.next(), fields.next()) else {
            continue;
        };
        let base = fields.next().and_then(|u| url::Url::parse(u).ok());
        let html = String::from_utf8_lossy(&std::fs::read(path)?).into_owned();
        let start = Instant::now();
        let page = ringfence_web::extract::extract(&html, base.as_ref());
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let row = serde_json::json!({
            "id": id, "ms": ms, "title": page.title, "text": page.text, "markdown": page.markdown,
        });
        writeln!(out, "{row}")?;
    }
    out.flush()
}
