//! Search by words: the question's meaningful words, each looked up in the full-text index
//! among one user's rows of one kind (the owner token), and weighted by its inverse
//! document frequency there.

use std::collections::HashMap;

use rusqlite::{ToSql, params, params_from_iter};

use ringfence_tools::memory::{Kind, Query};

use super::{CANDIDATES, MemoryDb};
use crate::StoreError;

/// Query words used (the first ones).
const MAX_TERMS: usize = 16;
/// Rows read per query word (a word in more rows than this says little anyway).
const TERM_ROWS: usize = 20_000;

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
fn fts_owner(user: &str, kind: Kind) -> String {
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
    ) -> Result<Vec<(i64, f32)>, StoreError> {
        let terms = query_terms(&query.text);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        // The owner token scopes each word to this user's rows of this kind inside the
        // full-text index. Filters need the rows themselves: then the match is joined to
        // them, CROSS JOIN keeping the match as the outer loop (the planner would otherwise
        // walk all of the user's rows and probe the full-text index for each).
        let owner = fts_owner(user, kind);
        let filtered =
            query.memory_type.is_some() || query.category.is_some() || !query.tags.is_empty();
        let mut sql = String::from(if filtered {
            "SELECT i.id FROM items_fts CROSS JOIN items i ON i.id = items_fts.rowid
             WHERE items_fts MATCH ?1 AND i.user = ?2 AND i.kind = ?3"
        } else {
            "SELECT rowid FROM items_fts WHERE items_fts MATCH ?1"
        });
        let mut args: Vec<Box<dyn ToSql>> = vec![Box::new(String::new())];
        if filtered {
            args.push(Box::new(user.to_owned()));
            args.push(Box::new(kind.as_str()));
        }
        if let Some(t) = &query.memory_type {
            args.push(Box::new(t.clone()));
            sql.push_str(&format!(" AND i.memory_type = ?{}", args.len()));
        }
        if let Some(c) = &query.category {
            args.push(Box::new(c.clone()));
            sql.push_str(&format!(" AND i.category = ?{}", args.len()));
        }
        if !query.tags.is_empty() {
            let mut marks = Vec::new();
            for t in &query.tags {
                args.push(Box::new(t.clone()));
                marks.push(format!("?{}", args.len()));
            }
            sql.push_str(&format!(
                " AND EXISTS (SELECT 1 FROM json_each(i.tags) WHERE json_each.value IN ({}))",
                marks.join(",")
            ));
        }
        sql.push_str(&format!(" LIMIT {TERM_ROWS}"));
        let conn = self.store.conn();
        let total: i64 = match rows {
            Some(n) => n as i64,
            None => conn.query_row(
                "SELECT count(*) FROM items WHERE user = ?1 AND kind = ?2",
                params![user, kind.as_str()],
                |r| r.get(0),
            )?,
        };
        let mut stmt = conn.prepare_cached(&sql)?;
        let mut covered: HashMap<i64, f32> = HashMap::new();
        let mut mass = 0f32;
        for term in &terms {
            args[0] = Box::new(format!(
                "owner : \"{owner}\" AND {{content tags}} : \"{}\"",
                term.replace('"', "")
            ));
            let ids = stmt
                .query_map(params_from_iter(args.iter().map(|a| a.as_ref())), |r| {
                    r.get::<_, i64>(0)
                })?
                .collect::<Result<Vec<_>, _>>()?;
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
            return Ok(Vec::new());
        }
        let mut scored: Vec<(i64, f32)> =
            covered.into_iter().map(|(id, w)| (id, w / mass)).collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored.truncate(CANDIDATES);
        Ok(scored)
    }
}
