//! The project's retrieval set (tests/data/memory_eval.json), shared by the quality test
//! (tests/memory_quality.rs) and the memory benchmark.
#![allow(dead_code)] // each includer uses part of it

use std::path::PathBuf;

use ringfence_memory::NewItem;

#[derive(serde::Deserialize)]
pub struct Eval {
    pub memories: Vec<EvalMemory>,
    pub queries: Vec<EvalQuery>,
}

#[derive(serde::Deserialize)]
pub struct EvalMemory {
    pub key: String,
    pub content: String,
    #[serde(rename = "memoryType")]
    pub memory_type: String,
    pub category: String,
    pub tags: Vec<String>,
}

#[derive(serde::Deserialize)]
pub struct EvalQuery {
    pub query: String,
    pub expected: Vec<String>,
}

#[allow(clippy::disallowed_methods)] // the repository's own data file
pub fn load() -> Eval {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/memory_eval.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

impl EvalMemory {
    pub fn item(&self, source: &str) -> NewItem {
        NewItem {
            content: self.content.clone(),
            category: Some(self.category.clone()),
            memory_type: Some(self.memory_type.clone()),
            tags: self.tags.clone(),
            pinned: false,
            source: source.into(),
        }
    }
}

impl EvalQuery {
    /// The share of the expected keys among `got` (the first five results).
    pub fn recall(&self, got: &[&String]) -> f64 {
        self.expected.iter().filter(|e| got.contains(e)).count() as f64 / self.expected.len() as f64
    }
}
