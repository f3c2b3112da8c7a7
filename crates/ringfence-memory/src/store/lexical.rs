//! Search by words: the question's meaningful words, each looked up in the full-text index
//! among one user's rows of one kind (SQLite: FTS5 scoped by an owner token; PostgreSQL: a
//! `tsvector` column), and weighted by its inverse document frequency there.

use std::collections::HashMap;

use crate::{Kind, Query};

use super::{CANDIDATES, MemoryDb};
use ringfence_store::StoreError;

/// Query words used (the first ones).
const MAX_TERMS: usize = 16;

/// Words that say nothing about a fact (never searched for on their own).
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "know", "me", "my", "of", "on", "or",
    "our", "she", "so", "than", "that", "the", "their", "them", "they", "this", "to", "user",
    "user's", "users", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why",
    "will", "with", "would", "you", "your",
];

/// The full-text token that stands for (user, kind): see the `items_fts` schema.
pub(crate) fn fts_owner(user: &str, kind: Kind) -> String {
    use std::fmt::Write as _;
    let mut token = String::with_capacity(2 + 2 * user.len());
    token.push('u');
    for b in user.as_bytes() {
        let _ = write!(token, "{b:02x}");
    }
    token.push(if kind == Kind::Truth { '1' } else { '2' });
    token
}

/// The meaningful words of `text`, lower-cased, each once, in order.
fn query_terms(text: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for w in text
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').to_lowercase())
    {
        if w.is_empty() || STOPWORDS.contains(&w.as_str()) || words.contains(&w) {
            continue;
        }
        if w.chars().count() < 2 && !w.chars().all(|c| c.is_numeric()) {
            continue;
        }
        words.push(w);
        if words.len() == MAX_TERMS {
            break;
        }
    }
    words
}

/// The rows sharing words with a question: every one's score, and the best.
#[derive(Default)]
pub(super) struct WordScores {
    /// Each matching row's score.
    pub(super) all: HashMap<i64, f32>,
    /// The [`CANDIDATES`] best, best first (ties by row).
    pub(super) best: Vec<(i64, f32)>,
}

impl MemoryDb {
    /// Rows matching the query's words, scored by weighted coverage: the share of the
    /// query's inverse document frequency (over this user's rows of `kind`) that the row's
    /// words cover, in 0..1. Words no row has are left out of the share. Stemmed (Porter),
    /// so "allergies" finds "allergy".
    ///
    /// `rows` is how many rows of `kind` the user has, when known (the vector index knows).
    pub(super) fn lexical_candidates(
        &self,
        user: &str,
        kind: Kind,
        query: &Query,
        rows: Option<usize>,
    ) -> Result<WordScores, StoreError> {
        let terms = query_terms(&query.text);
        if terms.is_empty() {
            return Ok(WordScores::default());
        }
        let total: i64 = match rows {
            Some(n) => n as i64,
            None => self.rows.count(user, kind)?,
        };
        let mut covered: HashMap<i64, f32> = HashMap::new();
        let mut mass = 0f32;
        for ids in self.rows.term_rows(user, kind, &terms, query)? {
            if ids.is_empty() {
                continue;
            }
            let n = ids.len() as f32;
            let idf = (1.0 + (total as f32 - n + 0.5) / (n + 0.5)).ln();
            mass += idf;
            for id in ids {
                *covered.entry(id).or_insert(0.0) += idf;
            }
        }
        if mass <= 0.0 {
            return Ok(WordScores::default());
        }
        for w in covered.values_mut() {
            *w /= mass;
        }
        let order = |a: &(i64, f32), b: &(i64, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let mut best: Vec<(i64, f32)> = covered.iter().map(|(id, w)| (*id, *w)).collect();
        if best.len() > CANDIDATES {
            best.select_nth_unstable_by(CANDIDATES - 1, order);
            best.truncate(CANDIDATES);
        }
        best.sort_by(order);
        Ok(WordScores { all: covered, best })
    }
}
