//! Embedding speed of the local model: one short query at a time (what a search pays) and
//! batches of stored sentences (what an import pays).
//!
//!   RINGFENCE_TEST_MODEL_DIR=... cargo bench -p ringfence-embed --bench embed
#![allow(clippy::print_stdout)] // a benchmark program reports

use std::path::PathBuf;
use std::time::Instant;

use ringfence_embed::{Embedder, LocalModel};

const QUERIES: [&str; 8] = [
    "dietary restrictions food allergies",
    "what does the significant other do for work",
    "identity career location relationships",
    "who treats their furry companions when they're ill",
    "when did they last get a step up in title",
    "pro sports team they follow",
    "how should responses be formatted",
    "where and when do they stock up on provisions",
];

fn main() {
    let dir = PathBuf::from(
        std::env::var("RINGFENCE_TEST_MODEL_DIR").expect("set RINGFENCE_TEST_MODEL_DIR"),
    );
    let model = LocalModel::load(&dir).unwrap();
    if std::env::var_os("EMBED_PROFILE").is_some() {
        let tok = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
        let t = Instant::now();
        for _ in 0..200 {
            tok.encode(QUERIES[0], true).unwrap();
        }
        println!(
            "tokenize: {:.3} ms",
            t.elapsed().as_secs_f64() * 1000.0 / 200.0
        );
    }
    let mut single = Vec::new();
    for round in 0..25 {
        for q in QUERIES {
            let t = Instant::now();
            model.embed(&[q]).unwrap();
            if round > 0 {
                single.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }
    }
    single.sort_by(|a, b| a.total_cmp(b));
    if std::env::var_os("EMBED_SINGLE_ONLY").is_some() {
        println!("single_query_p50_ms {:.2}", single[single.len() / 2]);
        return;
    }
    let sentences: Vec<String> = (0..512)
        .map(|i| format!("User's colleague number {i} recommended a novel about sailing across the Atlantic last spring."))
        .collect();
    let refs: Vec<&str> = sentences.iter().map(String::as_str).collect();
    model.embed(&refs[..32]).unwrap();
    let t = Instant::now();
    model.embed(&refs).unwrap();
    let per_s = refs.len() as f64 / t.elapsed().as_secs_f64();
    println!(
        "{{\"single_query_p50_ms\": {:.2}, \"single_query_p95_ms\": {:.2}, \"batch_sentences_per_s\": {:.1}}}",
        single[single.len() / 2],
        single[single.len() * 95 / 100],
        per_s
    );
}
