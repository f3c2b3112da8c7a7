//! Embeds texts for offline experiments (the memory retrieval bench learns its fusion from
//! these): reads one JSON string per line on stdin, writes one JSON array of floats per line
//! on stdout, in the same order, with the model in the directory given.
//!
//!     cargo run --release -p ringfence-embed --example embed_lines -- MODEL_DIR < texts.jsonl

use std::io::{BufRead, BufWriter, Write};

use ringfence_embed::{Embedder, LocalModel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args()
        .nth(1)
        .ok_or("usage: embed_lines MODEL_DIR < texts.jsonl > vectors.jsonl")?;
    let model = LocalModel::load(std::path::Path::new(&dir))?;
    let texts: Vec<String> = std::io::stdin()
        .lock()
        .lines()
        .map(|l| -> Result<String, Box<dyn std::error::Error>> { Ok(serde_json::from_str(&l?)?) })
        .collect::<Result<_, _>>()?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    for chunk in texts.chunks(256) {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        for v in model.embed(&refs)? {
            serde_json::to_writer(&mut out, &v)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(())
}
