//! Memory engine benchmark: embedding throughput, and store/search latency and recall@5 at
//! growing sizes, with the real all-MiniLM-L6-v2. Run by `bash bench/memory.sh`, which
//! prepares the inputs; by hand:
//!
//!   RINGFENCE_TEST_MODEL_DIR=... MEMORY_CORPUS=bench/.corpus/memories-100k.jsonl \
//!   MEMORY_SIZES=10000,100000 cargo bench -p ringfence-memory --bench memory
//!
//! One user holds the project's eval set (168 memories) plus the first N synthetic ones;
//! the eval set's 128 paraphrased queries are timed and scored at each size. Prints one
//! JSON object (also written to MEMORY_OUT when set).
//!
//! MEMORY_DATABASE_URL keeps the rows in that PostgreSQL
//! database instead of a SQLite file (`STORE=postgres bash bench/memory.sh`).
//!
//! MEMORY_VECTORS names a cache of the corpus with its vectors (JSON lines, as `memory
//! export` writes them): written after a run that embedded the corpus, read by
//! the next, whose imports then store rows without embedding them (reported as
//! `"vectors": "cached"`; import speed is then not embedding speed).
#![allow(clippy::disallowed_methods)] // reads its inputs, writes its result file
#![allow(clippy::print_stdout, clippy::print_stderr)] // a benchmark program reports

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use ringfence_embed::{Embedder, LocalModel};
use ringfence_memory::store::{EmbedderLoader, ExportRecord, MemoryDb, Prepared, RankConfig};
use ringfence_memory::{Kind, MemoryBackend, NewItem, Query, StoreOutcome};
use serde_json::{Value, json};

#[path = "../tests/eval_set/mod.rs"]
mod eval_set;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn summary(mut ms: Vec<f64>) -> Value {
    ms.sort_by(|a, b| a.total_cmp(b));
    json!({
        "n": ms.len(),
        "p50_ms": round(percentile(&ms, 0.5)),
        "p95_ms": round(percentile(&ms, 0.95)),
        "p99_ms": round(percentile(&ms, 0.99)),
        "mean_ms": round(ms.iter().sum::<f64>() / ms.len().max(1) as f64),
    })
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kb| round(kb / 1024.0))
        .unwrap_or(0.0)
}

fn open_postgres(url: &str, loader: EmbedderLoader) -> Arc<MemoryDb> {
    use ringfence_store::pg::{Pg, PgOptions};
    let pg = Pg::connect(&PgOptions::new(url.to_owned())).expect("MEMORY_DATABASE_URL");
    MemoryDb::open_postgres(pg, Some(loader), rank()).unwrap()
}

/// The default ranking, or other weights to compare (MEMORY_LEXICAL_WEIGHT,
/// MEMORY_TIME_WEIGHT).
fn rank() -> RankConfig {
    let weight = |name: &str, default: f32| {
        std::env::var(name)
            .ok()
            .map(|v| v.parse().expect("a number"))
            .unwrap_or(default)
    };
    let d = RankConfig::default();
    RankConfig {
        lexical_weight: weight("MEMORY_LEXICAL_WEIGHT", d.lexical_weight),
        time_weight: weight("MEMORY_TIME_WEIGHT", d.time_weight),
        ..d
    }
}

fn main() {
    let model_dir = PathBuf::from(
        std::env::var("RINGFENCE_TEST_MODEL_DIR").expect("set RINGFENCE_TEST_MODEL_DIR"),
    );
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = std::env::var("MEMORY_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| root.join("bench/.corpus/memories-100k.jsonl"));
    let sizes: Vec<usize> = std::env::var("MEMORY_SIZES")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .map(|s| s.trim().parse().expect("MEMORY_SIZES: numbers"))
        .collect();
    let eval = eval_set::load();
    let vectors_cache = std::env::var("MEMORY_VECTORS").ok().map(PathBuf::from);
    let read_lines = |path: &PathBuf| -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("{}: {e} (bench/memory.sh generates it)", path.display()))
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let max_size = *sizes.iter().max().unwrap();
    let cached: Option<Vec<String>> = vectors_cache
        .as_ref()
        .filter(|p| p.exists())
        .map(read_lines)
        .filter(|l| l.len() >= max_size);
    let vectors_cached = cached.is_some();
    let lines: Vec<String> = cached.unwrap_or_else(|| read_lines(&corpus));
    assert!(lines.len() >= max_size, "corpus too small");

    let load_started = Instant::now();
    let model: Arc<dyn Embedder> = Arc::new(LocalModel::load(&model_dir).unwrap());
    let model_load_ms = load_started.elapsed().as_secs_f64() * 1000.0;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);

    // --- embedding throughput -------------------------------------------------------------
    let sample: Vec<String> = lines[..1024]
        .iter()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let refs: Vec<&str> = sample.iter().map(String::as_str).collect();
    model.embed(&refs[..64]).unwrap(); // warm-up
    let t = Instant::now();
    model.embed(&refs).unwrap();
    let batch_s = t.elapsed().as_secs_f64();
    let mut single = Vec::new();
    for q in eval.queries.iter().take(100) {
        let t = Instant::now();
        model.embed(&[q.query.as_str()]).unwrap();
        single.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let embedding = json!({
        "model_load_ms": round(model_load_ms),
        "batch_sentences": refs.len(),
        "batch_sentences_per_s": round(refs.len() as f64 / batch_s),
        "single_query": summary(single),
    });
    eprintln!("embedding: {embedding}");

    // --- the database ---------------------------------------------------------------------
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("memory.db");
    let database = std::env::var("MEMORY_DATABASE_URL").ok();
    let open = || {
        let loader_model = model.clone();
        let loader: EmbedderLoader = Box::new(move || Ok(loader_model.clone()));
        match &database {
            None => MemoryDb::open(&path, Some(loader), rank()).unwrap(),
            Some(url) => open_postgres(url, loader),
        }
    };
    let mut db = open();
    let user = "bench";
    let mut key_of: HashMap<i64, String> = HashMap::new();
    for m in &eval.memories {
        match db.store(user, Kind::Memory, m.item("eval")).unwrap() {
            StoreOutcome::Stored(i) => {
                key_of.insert(i.id, m.key.clone());
            }
            StoreOutcome::Duplicate(d) => {
                panic!("eval memory {} duplicate of {}", m.key, d.existing.id)
            }
        }
    }

    let mut results = Vec::new();
    let mut loaded = 0usize;
    for &size in &sizes {
        let rows: Vec<Prepared> = lines[loaded..size]
            .iter()
            .map(|l| {
                let r: ExportRecord = serde_json::from_str(l).unwrap();
                Prepared::from_record(r, Some(user)).unwrap()
            })
            .collect();
        let n = rows.len();
        let t = Instant::now();
        let mut last = Instant::now();
        let report = db
            .import_many(rows, &mut |done, total| {
                if last.elapsed().as_secs() >= 10 {
                    last = Instant::now();
                    eprintln!("  import to {size}: embedded {done}/{total}");
                }
            })
            .unwrap();
        let import_s = t.elapsed().as_secs_f64();
        loaded = size;
        eprintln!(
            "imported {} rows to {size} in {import_s:.1} s ({} skipped)",
            report.stored, report.duplicates
        );

        // As a restarted server would: a fresh instance (no cached query vectors), whose
        // first search builds the user's vector index from the file.
        drop(db);
        db = open();
        let probe = Query {
            text: "warm-up question about nothing in particular".into(),
            limit: 5,
            memory_type: None,
            category: None,
            tags: Vec::new(),
        };
        let t = Instant::now();
        db.search(user, Kind::Memory, &probe).unwrap();
        let index_load_ms = t.elapsed().as_secs_f64() * 1000.0;

        let mut search_ms = Vec::new();
        let mut recall = 0.0;
        for q in &eval.queries {
            let query = Query {
                text: q.query.clone(),
                limit: 5,
                memory_type: None,
                category: None,
                tags: Vec::new(),
            };
            let t = Instant::now();
            let out = db.search(user, Kind::Memory, &query).unwrap();
            search_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            let got: Vec<&String> = out
                .hits
                .iter()
                .filter_map(|h| key_of.get(&h.item.id))
                .collect();
            recall += q.recall(&got);
        }
        recall /= eval.queries.len() as f64;

        let mut store_ms = Vec::new();
        for i in 0..100 {
            let item = NewItem {
                content: format!(
                    "Benchmark fact {size}-{i}: the user's locker number at gym {i} is {}",
                    1000 + i
                ),
                category: Some("personal".into()),
                memory_type: Some("fact".into()),
                tags: vec!["bench".into()],
                pinned: false,
                source: "bench-store".into(),
            };
            let t = Instant::now();
            let out = db.store(user, Kind::Memory, item).unwrap();
            store_ms.push(t.elapsed().as_secs_f64() * 1000.0);
            assert!(matches!(out, StoreOutcome::Stored(_)));
        }
        let entry = json!({
            "memories": size + eval.memories.len(),
            "vectors": if vectors_cached { "cached" } else { "embedded" },
            "import_s": round(import_s),
            "import_rows_per_s": round(n as f64 / import_s),
            "index_load_ms": round(index_load_ms),
            "search": summary(search_ms),
            "store": summary(store_ms),
            "recall_at_5": round(recall),
            "peak_rss_mib": peak_rss_mib(),
        });
        eprintln!("size {size}: {entry}");
        results.push(entry);
    }
    if let (Some(cache), false) = (&vectors_cache, vectors_cached) {
        // The synthetic rows with their vectors, in corpus order, for the next run.
        let mut text = String::new();
        for r in db.export(Some(user), Some(Kind::Memory), true).unwrap() {
            if r.source
                .as_deref()
                .is_some_and(|s| s == "eval" || s == "bench-store")
            {
                continue;
            }
            text.push_str(&serde_json::to_string(&r).unwrap());
            text.push('\n');
        }
        std::fs::write(cache, text).unwrap();
    }
    let out = json!({
        "threads": threads,
        "embedding": embedding,
        "sizes": results,
        "store": if database.is_some() { "postgres" } else { "sqlite" },
        "db_bytes": std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
    });
    let text = serde_json::to_string_pretty(&out).unwrap();
    println!("{text}");
    if let Ok(path) = std::env::var("MEMORY_OUT") {
        std::fs::write(path, text + "\n").unwrap();
    }
}
