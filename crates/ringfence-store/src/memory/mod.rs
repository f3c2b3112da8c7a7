//! Truths and memories: SQLite rows (WAL, `synchronous=FULL`: durable before a tool
//! answers), an FTS5 index for words, and per-user in-memory vector indexes for meaning.
//!
//! Search fuses both. Candidates are the rows most similar in meaning (cosine of
//! all-MiniLM-L6-v2 vectors of the content and its tags) and the rows sharing words with
//! the question (FTS5, Porter stemming). Each gets
//! `relevance = similarity + lexical_weight · words`, where `words` is the share of the
//! question's word weight (inverse document frequency over the user's rows) the row
//! covers. Rows below `min_relevance`, or less than half of it similar in meaning, are
//! dropped; the rest are ranked by
//! `relevance · (1 + recency_weight · recency + usage_weight · usage)` — `recency` halves
//! every `recency_half_life_days` since the last update, `usage` grows with the log of how
//! often searches returned the row. Without a model, `relevance = words` and the floor is
//! `min_lexical`. See [`RankConfig`] for the defaults.
//!
//! Every row carries its user; every statement filters by it, and vector indexes are kept
//! per user and kind, so no query can reach another user's rows.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use rusqlite::{OptionalExtension, ToSql, params, params_from_iter};
use serde::{Deserialize, Serialize};

use ringfence_embed::{Embedder, dot};
use ringfence_tools::memory::{
    CATEGORIES, Duplicate, Hit, Item, Kind, MEMORY_TYPES, MemoryBackend, MemoryError, NewItem,
    Query, SearchMode, SearchOutcome, StoreOutcome, UpdateOutcome,
};

use crate::{Durability, Schema, Store, StoreError};

/// The memory database (`memory.db`).
pub const MEMORY_SCHEMA: Schema = Schema {
    name: "memory",
    migrations: &[
        // 1: truths and memories, their numbering, and the full-text index.
        "CREATE TABLE items (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user TEXT NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('truth', 'memory')),
            number INTEGER NOT NULL,
            content TEXT NOT NULL,
            norm_hash BLOB NOT NULL,
            category TEXT,
            memory_type TEXT,
            tags TEXT NOT NULL DEFAULT '[]',
            pinned INTEGER NOT NULL DEFAULT 0,
            source TEXT NOT NULL,
            created_ms INTEGER NOT NULL,
            updated_ms INTEGER NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            last_access_ms INTEGER,
            embedding BLOB,
            embedding_model TEXT
        );
        CREATE UNIQUE INDEX items_number ON items (user, kind, number);
        CREATE UNIQUE INDEX items_exact ON items (user, kind, norm_hash);
        CREATE INDEX items_pinned ON items (user, kind, pinned);
        CREATE TABLE counters (
            user TEXT NOT NULL,
            kind TEXT NOT NULL,
            last INTEGER NOT NULL,
            PRIMARY KEY (user, kind)
        ) WITHOUT ROWID;
        -- owner: one token per (user, kind), 'u' || hex(user) || 1 (truths) or 2 (memories),
        -- so a word search is scoped to one user inside the full-text index itself. It ends
        -- in a digit, which no Porter rule strips, and hex keeps distinct users distinct.
        CREATE VIRTUAL TABLE items_fts USING fts5(
            content, tags, owner, content='', contentless_delete=1,
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER items_ai AFTER INSERT ON items BEGIN
            INSERT INTO items_fts (rowid, content, tags, owner) VALUES (new.id, new.content,
                new.tags, 'u' || hex(new.user) || iif(new.kind = 'truth', '1', '2'));
        END;
        CREATE TRIGGER items_ad AFTER DELETE ON items BEGIN
            DELETE FROM items_fts WHERE rowid = old.id;
        END;
        CREATE TRIGGER items_au AFTER UPDATE OF content, tags ON items BEGIN
            DELETE FROM items_fts WHERE rowid = old.id;
            INSERT INTO items_fts (rowid, content, tags, owner) VALUES (new.id, new.content,
                new.tags, 'u' || hex(new.user) || iif(new.kind = 'truth', '1', '2'));
        END;",
    ],
};

/// Ranking and duplicate detection settings (`[memory.search]` in the config).
#[derive(Debug, Clone, PartialEq)]
pub struct RankConfig {
    /// Weight of matching words (weighted coverage, 0..1) added to the similarity of
    /// meanings. Default 0.15.
    pub lexical_weight: f32,
    /// Boost for recently stored or updated rows, at most this fraction. Default 0.05.
    pub recency_weight: f32,
    /// Boost for rows often returned by searches, at most this fraction. Default 0.05.
    pub usage_weight: f32,
    /// Age at which the recency boost halves. Default 90 days.
    pub recency_half_life_days: f32,
    /// Rows whose relevance is below this, or whose similarity is below half of it, are not
    /// returned. Default 0.22 (all-MiniLM-L6-v2 puts unrelated sentences at 0.0–0.2 and
    /// most paraphrases above 0.3).
    pub min_relevance: f32,
    /// With words only (no model), rows whose word score is below this are not returned.
    /// Default 0.2 (roughly: at least one word that is not in most rows).
    pub min_lexical: f32,
    /// A new row whose meaning is at least this similar to an existing one, stating the
    /// same numbers, is a duplicate. Default 0.9 (all-MiniLM-L6-v2 scores restatements such
    /// as "User is allergic to shellfish" / "The user has a shellfish allergy" 0.91–0.94,
    /// and different facts of the same form — sister/brother, likes/dislikes — 0.83–0.87).
    pub duplicate_threshold: f32,
}

impl Default for RankConfig {
    fn default() -> Self {
        RankConfig {
            lexical_weight: 0.15,
            recency_weight: 0.05,
            usage_weight: 0.05,
            recency_half_life_days: 90.0,
            min_relevance: 0.22,
            min_lexical: 0.2,
            duplicate_threshold: 0.9,
        }
    }
}

/// Query words used (the first ones).
const MAX_TERMS: usize = 16;
/// Rows read per query word (a word in more rows than this says little anyway).
const TERM_ROWS: usize = 20_000;
/// Candidates taken from each side (vectors, words) before fusion.
const CANDIDATES: usize = 100;
/// Query vectors kept for repeated searches.
const QUERY_CACHE: usize = 512;
/// Rows embedded per batch when filling in missing vectors.
const EMBED_BATCH: usize = 64;
/// Vector indexes kept in memory at once (one per user and kind).
const MAX_INDEXES: usize = 256;
/// Rows per transaction in an import.
const IMPORT_BATCH: usize = 1000;

/// How the embedder is obtained: on first need (loading a model takes a moment; the server
/// starts without waiting for it). After a failure (the model not installed yet) it is
/// tried again at most every [`RETRY_LOAD`], so installing the model needs no restart.
pub type EmbedderLoader = Box<dyn Fn() -> Result<Arc<dyn Embedder>, String> + Send + Sync>;

/// How long a failed model load is remembered before the next try.
pub const RETRY_LOAD: Duration = Duration::from_secs(30);

/// The memory database and its indexes.
pub struct MemoryDb {
    store: Store,
    rank: RankConfig,
    loader: Option<EmbedderLoader>,
    embedder: OnceLock<Arc<dyn Embedder>>,
    /// The last failed load: why, and when.
    failed: Mutex<Option<(String, std::time::Instant)>>,
    /// Vector indexes by (user, kind), with when each was last used; at most
    /// [`MAX_INDEXES`], the least recently used dropped first (rebuilt on their next use).
    indexes: Mutex<HashMap<(String, Kind), (SharedIndex, std::time::Instant)>>,
    /// Serialises duplicate check + insert so two sessions cannot store the same fact twice.
    write: Mutex<()>,
    /// `PRAGMA data_version` when the indexes were last known good: another process (an
    /// import) changing the file makes the indexes reload.
    data_version: AtomicI64,
    queries: Mutex<HashMap<String, Arc<Vec<f32>>>>,
    /// Access counts not yet written (row id → (count, last access ms)).
    access: Arc<Mutex<HashMap<i64, (i64, i64)>>>,
}

impl std::fmt::Debug for MemoryDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDb")
            .field("path", &self.store.path())
            .finish()
    }
}

type SharedIndex = Arc<RwLock<VecIndex>>;

/// One user's vectors of one kind, for one model.
#[derive(Default)]
///
/// Vectors are kept as signed bytes with a scale per row (a quarter of the memory of f32,
/// and a quarter of the bytes each search streams); [`top`](Self::top) ranks by these
/// approximate similarities, and the search recomputes the exact cosine of the candidates
/// from the stored f32 vectors.
struct VecIndex {
    dims: usize,
    rows: Vec<i64>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    meta: Vec<RowMeta>,
    position: HashMap<i64, usize>,
}

struct RowMeta {
    memory_type: Option<u8>,
    category: Option<u8>,
    tags: Box<[Box<str>]>,
}

impl RowMeta {
    fn new(memory_type: Option<&str>, category: Option<&str>, tags: &[String]) -> RowMeta {
        RowMeta {
            memory_type: memory_type
                .and_then(|t| MEMORY_TYPES.iter().position(|v| *v == t))
                .map(|p| p as u8),
            category: category
                .and_then(|c| CATEGORIES.iter().position(|v| *v == c))
                .map(|p| p as u8),
            tags: tags.iter().map(|t| t.as_str().into()).collect(),
        }
    }

    fn matches(&self, filter: &Filter) -> bool {
        (filter.memory_type.is_none() || self.memory_type == filter.memory_type)
            && (filter.category.is_none() || self.category == filter.category)
            && (filter.tags.is_empty() || self.tags.iter().any(|t| filter.tags.contains(&&**t)))
    }
}

struct Filter<'a> {
    memory_type: Option<u8>,
    category: Option<u8>,
    tags: Vec<&'a str>,
}

impl<'a> Filter<'a> {
    fn of(q: &'a Query) -> Filter<'a> {
        let meta = RowMeta::new(q.memory_type.as_deref(), q.category.as_deref(), &[]);
        Filter {
            memory_type: meta.memory_type,
            category: meta.category,
            tags: q.tags.iter().map(String::as_str).collect(),
        }
    }
}

impl VecIndex {
    fn insert(&mut self, row: i64, vector: &[f32], meta: RowMeta) {
        if self.dims == 0 && self.rows.is_empty() {
            // An endpoint's vector length is known from its first answer only.
            self.dims = vector.len();
        }
        if vector.len() != self.dims {
            return;
        }
        let mut codes = Vec::with_capacity(self.dims);
        let scale = ringfence_embed::quantize_i8(vector, &mut codes);
        if let Some(&at) = self.position.get(&row) {
            self.codes[at * self.dims..(at + 1) * self.dims].copy_from_slice(&codes);
            self.scales[at] = scale;
            self.meta[at] = meta;
            return;
        }
        self.position.insert(row, self.rows.len());
        self.rows.push(row);
        self.codes.extend_from_slice(&codes);
        self.scales.push(scale);
        self.meta.push(meta);
    }

    fn remove(&mut self, row: i64) {
        let Some(at) = self.position.remove(&row) else {
            return;
        };
        let last = self.rows.len() - 1;
        if at != last {
            let moved = self.rows[last];
            self.rows.swap(at, last);
            self.meta.swap(at, last);
            self.scales.swap(at, last);
            let d = self.dims;
            let (head, tail) = self.codes.split_at_mut(last * d);
            head[at * d..(at + 1) * d].copy_from_slice(&tail[..d]);
            self.position.insert(moved, at);
        }
        self.rows.pop();
        self.meta.pop();
        self.scales.pop();
        self.codes.truncate(last * self.dims);
    }

    /// The `k` rows passing `filter` with the highest approximate similarity, best first.
    fn top(&self, query: &[f32], k: usize, filter: Option<&Filter>) -> Vec<(i64, f32)> {
        if query.len() != self.dims || self.rows.is_empty() || k == 0 {
            return Vec::new();
        }
        let mut q = Vec::with_capacity(self.dims);
        let q_scale = ringfence_embed::quantize_i8(query, &mut q);
        let raw = self.raw_scores(&q);
        let mut scored: Vec<(f32, usize)> = Vec::with_capacity(self.rows.len());
        for (i, r) in raw.into_iter().enumerate() {
            if filter.is_some_and(|f| !self.meta[i].matches(f)) {
                continue;
            }
            scored.push((r as f32 * q_scale * self.scales[i], i));
        }
        if scored.len() > k {
            scored.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
            scored.truncate(k);
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0));
        scored.into_iter().map(|(s, i)| (self.rows[i], s)).collect()
    }

    /// Integer dot products of `q` with every row; large indexes are split across the
    /// CPU's cores (the scan is bound by memory bandwidth, which two cores share better).
    fn raw_scores(&self, q: &[i8]) -> Vec<i32> {
        let d = self.dims;
        let n = self.rows.len();
        let threads = if n >= PARALLEL_SCAN_ROWS {
            std::thread::available_parallelism()
                .map(|t| t.get())
                .unwrap_or(1)
                .min(4)
        } else {
            1
        };
        if threads <= 1 {
            let mut out = Vec::new();
            ringfence_embed::dot_rows_i8(q, &self.codes, &mut out);
            return out;
        }
        let per = n.div_ceil(threads);
        let parts: Vec<Vec<i32>> = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .codes
                .chunks(per * d)
                .map(|chunk| {
                    scope.spawn(move || {
                        let mut out = Vec::new();
                        ringfence_embed::dot_rows_i8(q, chunk, &mut out);
                        out
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        });
        parts.concat()
    }
}

/// How far below a threshold an approximate (byte) similarity may be and still be checked
/// exactly.
const APPROX_MARGIN: f32 = 0.05;

/// Indexes at least this large are scanned by several threads.
const PARALLEL_SCAN_ROWS: usize = 20_000;

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

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The text embedded for a row: its content, and its tags (words the user chose to
/// describe it, which often name the topic in other words than the content).
fn embedding_text(content: &str, tags: &[String]) -> String {
    if tags.is_empty() {
        content.to_owned()
    } else {
        format!("{content} ({})", tags.join(", "))
    }
}

/// Lower case, single spaces, no closing punctuation: "The same text" for duplicates.
fn normalized(text: &str) -> String {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    words
        .join(" ")
        .trim_end_matches(['.', '!', '?', ';', ','])
        .trim()
        .to_owned()
}

/// The numbers a text states, in order ("5k" → "5", "6:30" → "6", "30").
fn numbers_in(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .collect()
}

fn norm_hash(text: &str) -> Vec<u8> {
    blake3::hash(normalized(text).as_bytes())
        .as_bytes()
        .to_vec()
}

fn vector_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn blob_vector(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Words that say nothing about a fact (never searched for on their own).
const STOPWORDS: &[&str] = &[
    "a", "about", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been", "but", "by",
    "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "him",
    "his", "how", "i", "if", "in", "into", "is", "it", "its", "know", "me", "my", "of", "on", "or",
    "our", "she", "so", "than", "that", "the", "their", "them", "they", "this", "to", "user",
    "user's", "users", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why",
    "will", "with", "would", "you", "your",
];

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

const ITEM_COLUMNS: &str = "id, number, kind, content, category, memory_type, tags, pinned, \
    source, created_ms, updated_ms, access_count";

fn item_from_row(r: &rusqlite::Row) -> rusqlite::Result<(i64, Item)> {
    let kind: String = r.get(2)?;
    let tags: String = r.get(6)?;
    Ok((
        r.get(0)?,
        Item {
            id: r.get(1)?,
            kind: Kind::parse(&kind).unwrap_or(Kind::Memory),
            content: r.get(3)?,
            category: r.get(4)?,
            memory_type: r.get(5)?,
            tags: serde_json::from_str(&tags).unwrap_or_default(),
            pinned: r.get::<_, i64>(7)? != 0,
            source: r.get(8)?,
            created_ms: r.get(9)?,
            updated_ms: r.get(10)?,
            access_count: r.get(11)?,
        },
    ))
}

fn err(e: impl std::fmt::Display) -> MemoryError {
    MemoryError(e.to_string())
}

/// One row to insert.
struct Row<'a> {
    user: &'a str,
    kind: Kind,
    item: &'a NewItem,
    vector: Option<(&'a [f32], &'a str)>,
    created_ms: i64,
    updated_ms: i64,
    access_count: i64,
}

/// Inserts `row` in `tx`, numbered next for its user and kind.
fn insert_in(tx: &rusqlite::Transaction, row: &Row) -> rusqlite::Result<(i64, Item)> {
    let (user, kind, item) = (row.user, row.kind, row.item);
    let number: i64 = tx.query_row(
        "INSERT INTO counters (user, kind, last) VALUES (?1, ?2, 1)
         ON CONFLICT (user, kind) DO UPDATE SET last = last + 1 RETURNING last",
        params![user, kind.as_str()],
        |r| r.get(0),
    )?;
    let tags = serde_json::to_string(&item.tags).unwrap_or_else(|_| "[]".into());
    let id = tx.query_row(
        "INSERT INTO items (user, kind, number, content, norm_hash, category, memory_type,
             tags, pinned, source, created_ms, updated_ms, access_count, embedding, embedding_model)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15) RETURNING id",
        params![
            user,
            kind.as_str(),
            number,
            item.content,
            norm_hash(&item.content),
            item.category,
            item.memory_type,
            tags,
            item.pinned as i64,
            item.source,
            row.created_ms,
            row.updated_ms,
            row.access_count,
            row.vector.map(|(v, _)| vector_blob(v)),
            row.vector.map(|(_, m)| m),
        ],
        |r| r.get::<_, i64>(0),
    )?;
    Ok((
        id,
        Item {
            id: number,
            kind,
            content: item.content.clone(),
            category: item.category.clone(),
            memory_type: item.memory_type.clone(),
            tags: item.tags.clone(),
            pinned: item.pinned,
            source: item.source.clone(),
            created_ms: row.created_ms,
            updated_ms: row.updated_ms,
            access_count: row.access_count,
        },
    ))
}

impl MemoryDb {
    /// Opens (creating) the memory database at `path`. `loader` yields the embedder on
    /// first need; `None` means words only.
    pub fn open(
        path: &Path,
        loader: Option<EmbedderLoader>,
        rank: RankConfig,
    ) -> Result<Arc<MemoryDb>, StoreError> {
        let store = Store::open_schema(path, Durability::Full, &MEMORY_SCHEMA)?;
        let db = Arc::new(MemoryDb {
            store,
            rank,
            embedder: OnceLock::new(),
            loader,
            failed: Mutex::new(None),
            indexes: Mutex::new(HashMap::new()),
            write: Mutex::new(()),
            data_version: AtomicI64::new(0),
            queries: Mutex::new(HashMap::new()),
            access: Arc::new(Mutex::new(HashMap::new())),
        });
        let v = db.current_data_version().map_err(|e| StoreError(e.0))?;
        db.data_version.store(v, Ordering::SeqCst);
        spawn_access_flusher(&db);
        Ok(db)
    }

    pub fn path(&self) -> &Path {
        self.store.path()
    }

    /// The embedder, loading it on first call; `Err` says why search is by words only.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>, String> {
        if let Some(e) = self.embedder.get() {
            return Ok(e.clone());
        }
        let Some(load) = &self.loader else {
            return Err("no embedding model is configured (memory.embeddings.provider = \"none\"); for search by meaning set it to \"local\" and run `ringfence model install`".into());
        };
        // One load at a time: concurrent first searches wait for it instead of each
        // reading the model.
        let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = self.embedder.get() {
            return Ok(e.clone());
        }
        if let Some((why, at)) = &*failed
            && at.elapsed() < RETRY_LOAD
        {
            return Err(why.clone());
        }
        let started = std::time::Instant::now();
        match load() {
            Ok(e) => {
                tracing::info!(
                    model = e.id(),
                    ms = started.elapsed().as_millis() as u64,
                    "embedding model ready"
                );
                let _ = self.embedder.set(e.clone());
                *failed = None;
                Ok(e)
            }
            Err(why) => {
                tracing::warn!(reason = %why, "no embedding model: memory search matches words only");
                *failed = Some((why.clone(), std::time::Instant::now()));
                Err(why)
            }
        }
    }

    /// Loads the embedder now (call from a background thread at start-up).
    pub fn warm_up(&self) {
        let _ = self.embedder();
    }

    fn current_data_version(&self) -> Result<i64, MemoryError> {
        self.store
            .conn()
            .query_row("PRAGMA data_version", [], |r| r.get(0))
            .map_err(err)
    }

    /// Drops the indexes when another connection (another process) changed the database.
    fn check_external_changes(&self) -> Result<(), MemoryError> {
        let v = self.current_data_version()?;
        if self.data_version.swap(v, Ordering::SeqCst) != v {
            self.indexes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
        }
        Ok(())
    }

    fn embed_one(&self, embedder: &Arc<dyn Embedder>, text: &str) -> Result<Vec<f32>, MemoryError> {
        embedder
            .embed(&[text])
            .map_err(err)?
            .pop()
            .ok_or_else(|| MemoryError("the embedder returned no vector".into()))
    }

    fn query_vector(
        &self,
        embedder: &Arc<dyn Embedder>,
        text: &str,
    ) -> Result<Arc<Vec<f32>>, MemoryError> {
        if let Some(v) = self
            .queries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(text)
        {
            return Ok(v.clone());
        }
        let v = Arc::new(self.embed_one(embedder, text)?);
        let mut cache = self.queries.lock().unwrap_or_else(|e| e.into_inner());
        if cache.len() >= QUERY_CACHE {
            cache.clear();
        }
        cache.insert(text.to_owned(), v.clone());
        Ok(v)
    }

    /// The vector index of `user`'s rows of `kind`, built on first use. Rows without a
    /// vector from the current model (stored without a model, or under another one) are
    /// embedded and saved first.
    fn index(
        &self,
        user: &str,
        kind: Kind,
        embedder: &Arc<dyn Embedder>,
    ) -> Result<Arc<RwLock<VecIndex>>, MemoryError> {
        let key = (user.to_owned(), kind);
        if let Some((ix, used)) = self
            .indexes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&key)
        {
            *used = std::time::Instant::now();
            return Ok(ix.clone());
        }
        self.embed_missing(user, kind, embedder)?;
        let model = embedder.id();
        let mut ix = VecIndex {
            dims: embedder.dims(),
            ..VecIndex::default()
        };
        {
            let conn = self.store.conn();
            let mut stmt = conn
                .prepare(
                    "SELECT id, embedding, memory_type, category, tags FROM items
                     WHERE user = ?1 AND kind = ?2 AND embedding_model = ?3",
                )
                .map_err(err)?;
            let mut rows = stmt
                .query(params![user, kind.as_str(), model])
                .map_err(err)?;
            while let Some(r) = rows.next().map_err(err)? {
                let blob: Vec<u8> = r.get(1).map_err(err)?;
                let v = blob_vector(&blob);
                if ix.dims == 0 {
                    ix.dims = v.len();
                }
                let tags: String = r.get(4).map_err(err)?;
                let tags: Vec<String> = serde_json::from_str(&tags).unwrap_or_default();
                let meta = RowMeta::new(
                    r.get::<_, Option<String>>(2).map_err(err)?.as_deref(),
                    r.get::<_, Option<String>>(3).map_err(err)?.as_deref(),
                    &tags,
                );
                ix.insert(r.get(0).map_err(err)?, &v, meta);
            }
        }
        let mut indexes = self.indexes.lock().unwrap_or_else(|e| e.into_inner());
        if indexes.len() >= MAX_INDEXES
            && !indexes.contains_key(&key)
            && let Some(oldest) = indexes
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(k, _)| k.clone())
        {
            indexes.remove(&oldest);
        }
        // Two first searches may build at once: the first index in wins, so a row another
        // call added to it meanwhile is never lost by a replacement.
        let (ix, _) = indexes
            .entry(key)
            .or_insert_with(|| (Arc::new(RwLock::new(ix)), std::time::Instant::now()));
        Ok(ix.clone())
    }

    fn embed_missing(
        &self,
        user: &str,
        kind: Kind,
        embedder: &Arc<dyn Embedder>,
    ) -> Result<(), MemoryError> {
        let model = embedder.id();
        let missing: Vec<(i64, String)> = {
            let conn = self.store.conn();
            let mut stmt = conn
                .prepare(
                    "SELECT id, content, tags FROM items WHERE user = ?1 AND kind = ?2
                     AND (embedding IS NULL OR embedding_model IS NOT ?3)",
                )
                .map_err(err)?;
            stmt.query_map(params![user, kind.as_str(), model], |r| {
                let tags: String = r.get(2)?;
                let tags: Vec<String> = serde_json::from_str(&tags).unwrap_or_default();
                Ok((r.get(0)?, embedding_text(&r.get::<_, String>(1)?, &tags)))
            })
            .map_err(err)?
            .collect::<Result<_, _>>()
            .map_err(err)?
        };
        if missing.is_empty() {
            return Ok(());
        }
        tracing::info!(
            user,
            kind = kind.as_str(),
            rows = missing.len(),
            model,
            "embedding rows stored without a vector for this model"
        );
        for chunk in missing.chunks(EMBED_BATCH) {
            let texts: Vec<&str> = chunk.iter().map(|(_, c)| c.as_str()).collect();
            let vectors = embedder.embed(&texts).map_err(err)?;
            let mut conn = self.store.conn();
            let tx = conn.transaction().map_err(err)?;
            for ((id, _), v) in chunk.iter().zip(&vectors) {
                tx.execute(
                    "UPDATE items SET embedding = ?1, embedding_model = ?2 WHERE id = ?3",
                    params![vector_blob(v), model, id],
                )
                .map_err(err)?;
            }
            tx.commit().map_err(err)?;
        }
        // Our own commits do not change data_version for this connection.
        Ok(())
    }

    /// The row of `user`'s `kind` numbered `number`.
    fn find(
        &self,
        user: &str,
        kind: Kind,
        number: i64,
    ) -> Result<Option<(i64, Item)>, MemoryError> {
        self.store
            .conn()
            .query_row(
                &format!(
                    "SELECT {ITEM_COLUMNS} FROM items WHERE user = ?1 AND kind = ?2 AND number = ?3"
                ),
                params![user, kind.as_str(), number],
                item_from_row,
            )
            .optional()
            .map_err(err)
    }

    fn find_exact(
        &self,
        user: &str,
        kind: Kind,
        hash: &[u8],
    ) -> Result<Option<(i64, Item)>, MemoryError> {
        self.store
            .conn()
            .query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM items WHERE user = ?1 AND kind = ?2 AND norm_hash = ?3"),
                params![user, kind.as_str(), hash],
                item_from_row,
            )
            .optional()
            .map_err(err)
    }

    /// `user`'s rows among `ids` (row ids, not numbers).
    fn rows_by_id(&self, user: &str, ids: &[i64]) -> Result<HashMap<i64, Item>, MemoryError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let marks = vec!["?"; ids.len()].join(",");
        let conn = self.store.conn();
        let mut stmt = conn
            .prepare(&format!(
                // `+user`: look the rows up by id; an index on user would walk all of them.
                "SELECT {ITEM_COLUMNS} FROM items WHERE id IN ({marks}) AND +user = ?"
            ))
            .map_err(err)?;
        let args: Vec<&dyn ToSql> = ids
            .iter()
            .map(|i| i as &dyn ToSql)
            .chain(std::iter::once(&user as &dyn ToSql))
            .collect();
        let rows = stmt
            .query_map(params_from_iter(args), item_from_row)
            .map_err(err)?
            .collect::<Result<HashMap<_, _>, _>>()
            .map_err(err)?;
        Ok(rows)
    }

    /// A row of `user` (in `index`, other than `except`) that means the same as `content`
    /// (whose vector is `vector`): at least `duplicate_threshold` similar and stating the
    /// same numbers ("runs 5k" and "runs 10k" are close in meaning but different facts).
    #[allow(clippy::too_many_arguments)]
    fn near_duplicate(
        &self,
        user: &str,
        index: &RwLock<VecIndex>,
        model: &str,
        content: &str,
        vector: &[f32],
        except: Option<i64>,
    ) -> Result<Option<Duplicate>, MemoryError> {
        // The index's similarities are approximate (bytes): take a margin, then decide on
        // the exact ones.
        let close: Vec<i64> = {
            let ix = index.read().unwrap_or_else(|e| e.into_inner());
            ix.top(vector, 8, None)
                .into_iter()
                .filter(|(row, sim)| {
                    Some(*row) != except && *sim >= self.rank.duplicate_threshold - APPROX_MARGIN
                })
                .map(|(row, _)| row)
                .collect()
        };
        if close.is_empty() {
            return Ok(None);
        }
        let mut close: Vec<(i64, f32)> = self
            .exact_similarities(user, model, &close, vector)?
            .into_iter()
            .filter(|(_, sim)| *sim >= self.rank.duplicate_threshold)
            .collect();
        close.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut rows = self.rows_by_id(user, &close.iter().map(|c| c.0).collect::<Vec<_>>())?;
        let numbers = numbers_in(content);
        for (row, similarity) in close {
            if let Some(existing) = rows.remove(&row)
                && numbers_in(&existing.content) == numbers
            {
                return Ok(Some(Duplicate {
                    existing,
                    similarity,
                    exact: false,
                }));
            }
        }
        Ok(None)
    }

    /// Exact cosine similarities of `query` with the stored vectors (of `model`) of `user`'s
    /// rows among `ids`; rows without such a vector are left out.
    fn exact_similarities(
        &self,
        user: &str,
        model: &str,
        ids: &[i64],
        query: &[f32],
    ) -> Result<HashMap<i64, f32>, MemoryError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let marks = vec!["?"; ids.len()].join(",");
        let conn = self.store.conn();
        let mut stmt = conn
            .prepare(&format!(
                // `+`: by id, not by an index on user (see rows_by_id).
                "SELECT id, embedding FROM items
                 WHERE id IN ({marks}) AND +user = ? AND +embedding_model = ?"
            ))
            .map_err(err)?;
        let args: Vec<&dyn ToSql> = ids
            .iter()
            .map(|i| i as &dyn ToSql)
            .chain([&user as &dyn ToSql, &model as &dyn ToSql])
            .collect();
        let sims = stmt
            .query_map(params_from_iter(args), |r| {
                let blob: Vec<u8> = r.get(1)?;
                Ok((r.get::<_, i64>(0)?, dot(query, &blob_vector(&blob))))
            })
            .map_err(err)?
            .collect::<Result<HashMap<_, _>, _>>()
            .map_err(err)?;
        Ok(sims)
    }

    /// Inserts one row (numbered next for its user and kind) in its own transaction;
    /// returns its row id and item, or the SQLite error of the insert (a constraint).
    #[allow(clippy::too_many_arguments)]
    fn insert_row(
        &self,
        user: &str,
        kind: Kind,
        item: &NewItem,
        vector: Option<(&[f32], &str)>,
        created_ms: i64,
        updated_ms: i64,
        access_count: i64,
    ) -> Result<Result<(i64, Item), rusqlite::Error>, MemoryError> {
        let mut conn = self.store.conn();
        let tx = conn.transaction().map_err(err)?;
        let row = Row {
            user,
            kind,
            item,
            vector,
            created_ms,
            updated_ms,
            access_count,
        };
        match insert_in(&tx, &row) {
            Ok(done) => {
                tx.commit().map_err(err)?;
                Ok(Ok(done))
            }
            Err(e) => Ok(Err(e)),
        }
    }

    /// Stores `item` for `user`, as `store` does, with the given times (import keeps them)
    /// and optionally a ready vector from `model` (import skips re-embedding).
    fn store_with(
        &self,
        user: &str,
        kind: Kind,
        item: NewItem,
        times: Option<(i64, i64, i64)>,
        given_vector: Option<(Vec<f32>, String)>,
    ) -> Result<StoreOutcome, MemoryError> {
        self.check_external_changes()?;
        let hash = norm_hash(&item.content);
        if let Some((_, existing)) = self.find_exact(user, kind, &hash)? {
            return Ok(StoreOutcome::Duplicate(Duplicate {
                existing,
                similarity: 1.0,
                exact: true,
            }));
        }
        let embedder = self.embedder().ok();
        let vector = match (&embedder, given_vector) {
            (Some(e), Some((v, model))) if model == e.id() && v.len() == e.dims() => Some(v),
            (Some(e), _) => match self.embed_one(e, &embedding_text(&item.content, &item.tags)) {
                Ok(v) => Some(v),
                Err(why) => {
                    tracing::warn!(error = %why, "embedding failed; stored for word search, embedded later");
                    None
                }
            },
            (None, _) => None,
        };
        let index = match (&embedder, &vector) {
            (Some(e), Some(_)) => Some(self.index(user, kind, e)?),
            _ => None,
        };
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        // Another session may have stored the same text while this one was embedding.
        if let Some((_, existing)) = self.find_exact(user, kind, &hash)? {
            return Ok(StoreOutcome::Duplicate(Duplicate {
                existing,
                similarity: 1.0,
                exact: true,
            }));
        }
        if let (Some(index), Some(v)) = (&index, &vector)
            && let Some(e) = &embedder
            && let Some(dup) = self.near_duplicate(user, index, e.id(), &item.content, v, None)?
        {
            return Ok(StoreOutcome::Duplicate(dup));
        }
        let now = now_ms();
        let (created, updated, accessed) = times.unwrap_or((now, now, 0));
        let model = embedder.as_ref().map(|e| e.id().to_owned());
        let with_vector = vector.as_deref().zip(model.as_deref());
        match self.insert_row(user, kind, &item, with_vector, created, updated, accessed)? {
            Ok((row, stored)) => {
                if let (Some(index), Some(v)) = (&index, &vector) {
                    index.write().unwrap_or_else(|e| e.into_inner()).insert(
                        row,
                        v,
                        RowMeta::new(
                            item.memory_type.as_deref(),
                            item.category.as_deref(),
                            &item.tags,
                        ),
                    );
                }
                Ok(StoreOutcome::Stored(stored))
            }
            // Another process stored the same text between our check and insert.
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                match self.find_exact(user, kind, &hash)? {
                    Some((_, existing)) => Ok(StoreOutcome::Duplicate(Duplicate {
                        existing,
                        similarity: 1.0,
                        exact: true,
                    })),
                    None => Err(MemoryError("a concurrent store conflicted; retry".into())),
                }
            }
            Err(e) => Err(err(e)),
        }
    }

    /// Rows matching the query's words, scored by weighted coverage: the share of the
    /// query's inverse document frequency (over this user's rows of `kind`) that the row's
    /// words cover, in 0..1. Words no row has are left out of the share. Stemmed (Porter),
    /// so "allergies" finds "allergy".
    ///
    /// `rows` is how many rows of `kind` the user has, when known (the vector index knows).
    fn lexical_candidates(
        &self,
        user: &str,
        kind: Kind,
        query: &Query,
        rows: Option<usize>,
    ) -> Result<Vec<(i64, f32)>, MemoryError> {
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
            None => conn
                .query_row(
                    "SELECT count(*) FROM items WHERE user = ?1 AND kind = ?2",
                    params![user, kind.as_str()],
                    |r| r.get(0),
                )
                .map_err(err)?,
        };
        let mut stmt = conn.prepare_cached(&sql).map_err(err)?;
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
                })
                .map_err(err)?
                .collect::<Result<Vec<_>, _>>()
                .map_err(err)?;
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

    fn record_access(&self, rows: &[i64]) {
        let now = now_ms();
        let mut pending = self.access.lock().unwrap_or_else(|e| e.into_inner());
        for r in rows {
            let e = pending.entry(*r).or_insert((0, now));
            e.0 += 1;
            e.1 = now;
        }
    }

    /// Writes pending access counts.
    pub fn flush(&self) {
        flush_access(&self.store, &self.access);
    }

    // --- ownership: list, export, import ---------------------------------------------------

    /// Users with any rows, sorted.
    pub fn users(&self) -> Result<Vec<String>, MemoryError> {
        let conn = self.store.conn();
        let mut stmt = conn
            .prepare("SELECT DISTINCT user FROM items ORDER BY user")
            .map_err(err)?;
        let users = stmt
            .query_map([], |r| r.get(0))
            .map_err(err)?
            .collect::<Result<Vec<String>, _>>()
            .map_err(err)?;
        Ok(users)
    }

    /// Every row of `user` (all users when `None`), by user, kind and number.
    pub fn export(
        &self,
        user: Option<&str>,
        kind: Option<Kind>,
        with_embeddings: bool,
    ) -> Result<Vec<ExportRecord>, MemoryError> {
        self.flush();
        let conn = self.store.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {ITEM_COLUMNS}, user, embedding, embedding_model FROM items
                 WHERE (?1 IS NULL OR user = ?1) AND (?2 IS NULL OR kind = ?2)
                 ORDER BY user, kind DESC, number"
            ))
            .map_err(err)?;
        let records = stmt
            .query_map(params![user, kind.map(Kind::as_str)], |r| {
                let (_, item) = item_from_row(r)?;
                let user: String = r.get(12)?;
                let embedding = if with_embeddings {
                    match (
                        r.get::<_, Option<Vec<u8>>>(13)?,
                        r.get::<_, Option<String>>(14)?,
                    ) {
                        (Some(blob), Some(model)) => Some(ExportEmbedding {
                            model,
                            vector: base64::engine::general_purpose::STANDARD.encode(blob),
                        }),
                        _ => None,
                    }
                } else {
                    None
                };
                Ok(ExportRecord::from_item(&user, &item, embedding))
            })
            .map_err(err)?
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        Ok(records)
    }

    /// Stores one exported record (for `user` when given, else the record's user).
    /// Duplicates are skipped, as a store would skip them.
    pub fn import(&self, record: ExportRecord, user: Option<&str>) -> Result<StoreOutcome, String> {
        let p = Prepared::from_record(record, user)?;
        self.store_with(
            &p.user,
            p.kind,
            p.item,
            Some((p.created_ms, p.updated_ms, p.access_count)),
            p.vector,
        )
        .map_err(|e| e.0)
    }

    /// Stores many records at once (a backup, a move): vectors the records carry for the
    /// current model are kept, the others computed in batches; rows go in 1,000 per
    /// transaction. A row whose text is already stored for its user is skipped (counted in
    /// `duplicates`); unlike a tool call, near duplicates by meaning are not checked.
    /// `progress` gets (rows done, rows in all).
    pub fn import_many(
        &self,
        rows: Vec<Prepared>,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<ImportReport, MemoryError> {
        self.check_external_changes()?;
        let embedder = self.embedder().ok();
        let model = embedder.as_ref().map(|e| e.id().to_owned());
        let mut rows = rows;
        if let Some(e) = &embedder {
            let missing: Vec<usize> = rows
                .iter()
                .enumerate()
                .filter(|(_, r)| {
                    !r.vector
                        .as_ref()
                        .is_some_and(|(v, m)| Some(m) == model.as_ref() && v.len() == e.dims())
                })
                .map(|(i, _)| i)
                .collect();
            let total = missing.len();
            for (done, chunk) in missing.chunks(EMBED_BATCH).enumerate() {
                let texts: Vec<String> = chunk
                    .iter()
                    .map(|&i| embedding_text(&rows[i].item.content, &rows[i].item.tags))
                    .collect();
                let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                match e.embed(&refs) {
                    Ok(vectors) => {
                        for (&i, v) in chunk.iter().zip(vectors) {
                            rows[i].vector = Some((v, e.id().to_owned()));
                        }
                    }
                    Err(why) => {
                        tracing::warn!(error = %why, "embedding failed during import; those rows get vectors later");
                        for &i in chunk {
                            rows[i].vector = None;
                        }
                    }
                }
                progress(((done + 1) * EMBED_BATCH).min(total), total);
            }
        }
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let mut report = ImportReport::default();
        let mut touched: Vec<(String, Kind)> = Vec::new();
        for chunk in rows.chunks(IMPORT_BATCH) {
            let mut conn = self.store.conn();
            let tx = conn.transaction().map_err(err)?;
            for p in chunk {
                let exists: bool = tx
                    .query_row(
                        "SELECT EXISTS (SELECT 1 FROM items WHERE user = ?1 AND kind = ?2 AND norm_hash = ?3)",
                        params![p.user, p.kind.as_str(), norm_hash(&p.item.content)],
                        |r| r.get(0),
                    )
                    .map_err(err)?;
                if exists {
                    report.duplicates += 1;
                    continue;
                }
                let vector = p
                    .vector
                    .as_ref()
                    .filter(|(_, m)| Some(m) == model.as_ref())
                    .map(|(v, m)| (v.as_slice(), m.as_str()));
                let row = Row {
                    user: &p.user,
                    kind: p.kind,
                    item: &p.item,
                    vector,
                    created_ms: p.created_ms,
                    updated_ms: p.updated_ms,
                    access_count: p.access_count,
                };
                insert_in(&tx, &row).map_err(err)?;
                report.stored += 1;
                if !touched.iter().any(|(u, k)| u == &p.user && *k == p.kind) {
                    touched.push((p.user.clone(), p.kind));
                }
            }
            tx.commit().map_err(err)?;
        }
        // The affected indexes are rebuilt on their next use.
        let mut indexes = self.indexes.lock().unwrap_or_else(|e| e.into_inner());
        for key in touched {
            indexes.remove(&key);
        }
        Ok(report)
    }
}

/// What [`MemoryDb::import_many`] did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ImportReport {
    pub stored: usize,
    /// Rows whose text was already stored for their user.
    pub duplicates: usize,
}

/// A record checked and ready to store.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub user: String,
    pub kind: Kind,
    pub item: NewItem,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub access_count: i64,
    /// A vector and the model that made it.
    pub vector: Option<(Vec<f32>, String)>,
}

impl Prepared {
    /// Checks an exported record (for `user` when given, else the record's user).
    pub fn from_record(record: ExportRecord, user: Option<&str>) -> Result<Prepared, String> {
        let kind = Kind::parse(&record.kind)
            .ok_or_else(|| format!("kind {:?} is neither \"truth\" nor \"memory\"", record.kind))?;
        let user = user
            .or(record.user.as_deref())
            .ok_or("the record names no user; pass --user to import it for one")?;
        if user.is_empty() {
            return Err("the user is empty".into());
        }
        let content = record.content.trim().to_owned();
        if content.is_empty() {
            return Err("content is empty".into());
        }
        let check =
            |what: &str, v: &Option<String>, valid: &[&str]| -> Result<Option<String>, String> {
                match v {
                    None => Ok(None),
                    Some(s) if valid.contains(&s.as_str()) => Ok(Some(s.clone())),
                    Some(s) => Err(format!("{what} {s:?} is not one of: {}", valid.join(", "))),
                }
            };
        let item = NewItem {
            content,
            category: check("category", &record.category, &CATEGORIES)?,
            memory_type: match kind {
                Kind::Memory => check("memoryType", &record.memory_type, &MEMORY_TYPES)?,
                Kind::Truth => None,
            },
            tags: record.tags.unwrap_or_default(),
            pinned: kind == Kind::Truth && record.is_pinned.unwrap_or(false),
            source: record.source.unwrap_or_else(|| "import".into()),
        };
        let parse_time = |s: &Option<String>| -> Result<Option<i64>, String> {
            match s {
                None => Ok(None),
                Some(t) => ringfence_tools::files::time::parse_iso(t).map(|st| {
                    Some(
                        st.duration_since(UNIX_EPOCH)
                            .map(|d| d.as_millis() as i64)
                            .unwrap_or(0),
                    )
                }),
            }
        };
        let created_ms = parse_time(&record.created)?.unwrap_or_else(now_ms);
        let updated_ms = parse_time(&record.updated)?.unwrap_or(created_ms);
        let vector = match record.embedding {
            Some(e) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(e.vector.as_bytes())
                    .map_err(|x| format!("embedding.vector is not base64: {x}"))?;
                Some((blob_vector(&bytes), e.model))
            }
            None => None,
        };
        Ok(Prepared {
            user: user.to_owned(),
            kind,
            item,
            created_ms,
            updated_ms,
            access_count: record.access_count.unwrap_or(0).max(0),
            vector,
        })
    }
}

/// One row as `ringfence memory export` writes it (a JSON line) and `import` reads it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ExportRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `truth` or `memory`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    pub content: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_pinned: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub access_count: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<ExportEmbedding>,
}

/// A stored vector: the model that made it and its little-endian f32s in base64.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExportEmbedding {
    pub model: String,
    pub vector: String,
}

impl ExportRecord {
    fn from_item(user: &str, item: &Item, embedding: Option<ExportEmbedding>) -> ExportRecord {
        use ringfence_tools::files::time::format_iso_ms;
        ExportRecord {
            user: Some(user.to_owned()),
            kind: item.kind.as_str().to_owned(),
            id: Some(item.id),
            content: item.content.clone(),
            category: item.category.clone(),
            memory_type: item.memory_type.clone(),
            tags: (item.kind == Kind::Memory).then(|| item.tags.clone()),
            is_pinned: (item.kind == Kind::Truth).then_some(item.pinned),
            source: Some(item.source.clone()),
            created: Some(format_iso_ms(item.created_ms)),
            updated: Some(format_iso_ms(item.updated_ms)),
            access_count: Some(item.access_count),
            embedding,
        }
    }
}

fn flush_access(store: &Store, access: &Mutex<HashMap<i64, (i64, i64)>>) {
    let pending: HashMap<i64, (i64, i64)> =
        std::mem::take(&mut *access.lock().unwrap_or_else(|e| e.into_inner()));
    if pending.is_empty() {
        return;
    }
    let mut conn = store.conn();
    let result = (|| -> rusqlite::Result<()> {
        let tx = conn.transaction()?;
        for (row, (count, last)) in &pending {
            tx.execute(
                "UPDATE items SET access_count = access_count + ?1, last_access_ms = ?2 WHERE id = ?3",
                params![count, last, row],
            )?;
        }
        tx.commit()
    })();
    if let Err(e) = result {
        tracing::warn!(error = %e, "could not record memory access counts");
    }
}

/// Writes access counts every two seconds while the database is alive.
fn spawn_access_flusher(db: &Arc<MemoryDb>) {
    let weak: Weak<MemoryDb> = Arc::downgrade(db);
    let spawned = std::thread::Builder::new()
        .name("ringfence-memory-access".into())
        .spawn(move || {
            loop {
                std::thread::sleep(Duration::from_secs(2));
                match weak.upgrade() {
                    Some(db) => db.flush(),
                    None => return,
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no access-count writer thread; counts are written at exit only");
    }
}

impl Drop for MemoryDb {
    fn drop(&mut self) {
        flush_access(&self.store, &self.access);
    }
}

impl MemoryBackend for MemoryDb {
    fn store(&self, user: &str, kind: Kind, item: NewItem) -> Result<StoreOutcome, MemoryError> {
        self.store_with(user, kind, item, None, None)
    }

    fn search(&self, user: &str, kind: Kind, query: &Query) -> Result<SearchOutcome, MemoryError> {
        self.check_external_changes()?;
        let rank = &self.rank;
        let filter = Filter::of(query);
        let mut mode = SearchMode::Hybrid;
        let mut similarities: HashMap<i64, f32> = HashMap::new();
        let mut query_vector: Option<Arc<Vec<f32>>> = None;
        // The index first: cheap once built, and it knows how many rows the user has.
        // Building it embeds rows stored without a vector: an endpoint that is down then
        // leaves the search to words, as a failed question embedding does.
        let indexed: Result<(Arc<dyn Embedder>, SharedIndex), String> = match self.embedder() {
            Ok(e) => match self.index(user, kind, &e) {
                Ok(ix) => Ok((e, ix)),
                Err(why) => Err(format!("the embedding model failed ({why})")),
            },
            Err(why) => Err(why),
        };
        let rows = indexed
            .as_ref()
            .ok()
            .map(|(_, ix)| ix.read().unwrap_or_else(|e| e.into_inner()).rows.len());
        // Words are looked up in the database while the question is embedded.
        let lexical = std::thread::scope(|scope| {
            let words = std::thread::Builder::new()
                .name("memory-words".into())
                .spawn_scoped(scope, || self.lexical_candidates(user, kind, query, rows));
            match &indexed {
                Ok((embedder, index)) => match self.query_vector(embedder, query.text.trim()) {
                    Ok(v) => {
                        let ix = index.read().unwrap_or_else(|e| e.into_inner());
                        similarities.extend(ix.top(&v, CANDIDATES, Some(&filter)));
                        query_vector = Some(v);
                    }
                    Err(e) => {
                        mode = SearchMode::Lexical {
                            reason: format!("the embedding model failed ({e})"),
                        }
                    }
                },
                Err(why) => {
                    mode = SearchMode::Lexical {
                        reason: why.clone(),
                    }
                }
            }
            match words {
                Ok(words) => words
                    .join()
                    .unwrap_or_else(|_| Err(MemoryError("the word search panicked".into()))),
                // No thread to be had: look the words up here, after the embedding.
                Err(_) => self.lexical_candidates(user, kind, query, rows),
            }
        })?;
        let lexical: HashMap<i64, f32> = lexical.into_iter().collect();
        let mut ids: Vec<i64> = similarities.keys().chain(lexical.keys()).copied().collect();
        ids.sort_unstable();
        ids.dedup();
        // The index ranked by approximate similarities; score every candidate (also those
        // found by words only) by the exact one.
        if let (Some(v), Ok((embedder, _))) = (&query_vector, &indexed) {
            similarities = self.exact_similarities(user, embedder.id(), &ids, v)?;
        }
        let rows = self.rows_by_id(user, &ids)?;
        let now = now_ms();
        let mut hits: Vec<(i64, Hit)> = Vec::new();
        for (row, item) in rows {
            let words = lexical.get(&row).copied().unwrap_or(0.0);
            let similarity = similarities.get(&row).copied();
            let relevance = match mode {
                SearchMode::Hybrid => {
                    similarity.unwrap_or(0.0).max(0.0) + rank.lexical_weight * words
                }
                SearchMode::Lexical { .. } => words,
            };
            let floor = match mode {
                SearchMode::Hybrid => rank.min_relevance,
                SearchMode::Lexical { .. } => rank.min_lexical,
            };
            // Words alone never carry a row whose meaning is far from the question.
            let far = matches!(mode, SearchMode::Hybrid)
                && similarity.unwrap_or(0.0) < rank.min_relevance / 2.0;
            if relevance < floor || far {
                continue;
            }
            let age_days = ((now - item.updated_ms).max(0) as f32) / 86_400_000.0;
            let recency = 0.5f32.powf(age_days / rank.recency_half_life_days.max(0.001));
            let usage = ((1 + item.access_count.max(0)) as f32).ln() / 21f32.ln();
            let score = relevance
                * (1.0 + rank.recency_weight * recency + rank.usage_weight * usage.min(1.0));
            hits.push((
                row,
                Hit {
                    item,
                    score,
                    similarity,
                    keyword_match: words > 0.0,
                },
            ));
        }
        hits.sort_by(|a, b| {
            b.1.score
                .total_cmp(&a.1.score)
                .then(a.1.item.id.cmp(&b.1.item.id))
        });
        hits.truncate(query.limit);
        self.record_access(&hits.iter().map(|(r, _)| *r).collect::<Vec<_>>());
        Ok(SearchOutcome {
            hits: hits.into_iter().map(|(_, h)| h).collect(),
            mode,
        })
    }

    fn update(
        &self,
        user: &str,
        kind: Kind,
        id: i64,
        content: &str,
    ) -> Result<UpdateOutcome, MemoryError> {
        self.check_external_changes()?;
        let Some((row, before)) = self.find(user, kind, id)? else {
            return Ok(UpdateOutcome::NotFound);
        };
        let hash = norm_hash(content);
        if let Some((other, existing)) = self.find_exact(user, kind, &hash)?
            && other != row
        {
            return Ok(UpdateOutcome::Duplicate(Duplicate {
                existing,
                similarity: 1.0,
                exact: true,
            }));
        }
        let embedder = self.embedder().ok();
        let text = embedding_text(content, &before.tags);
        let vector = embedder.as_ref().and_then(|e| match self.embed_one(e, &text) {
            Ok(v) => Some(v),
            Err(why) => {
                tracing::warn!(error = %why, "embedding failed; updated for word search, embedded later");
                None
            }
        });
        let index = match &embedder {
            Some(e) => Some(self.index(user, kind, e)?),
            None => None,
        };
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(index), Some(v)) = (&index, &vector)
            && let Some(e) = &embedder
            && let Some(dup) = self.near_duplicate(user, index, e.id(), content, v, Some(row))?
        {
            return Ok(UpdateOutcome::Duplicate(dup));
        }
        let now = now_ms();
        let model = embedder.as_ref().map(|e| e.id().to_owned());
        let changed = self
            .store
            .conn()
            .execute(
                "UPDATE items SET content = ?1, norm_hash = ?2, embedding = ?3, embedding_model = ?4,
                     updated_ms = ?5 WHERE id = ?6 AND user = ?7",
                params![
                    content,
                    hash,
                    vector.as_deref().map(vector_blob),
                    model,
                    now,
                    row,
                    user
                ],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    MemoryError("another session stored the same text at this moment; search and retry".into())
                }
                e => err(e),
            })?;
        if changed == 0 {
            return Ok(UpdateOutcome::NotFound);
        }
        if let Some(index) = &index {
            let mut ix = index.write().unwrap_or_else(|e| e.into_inner());
            match &vector {
                Some(v) => ix.insert(
                    row,
                    v,
                    RowMeta::new(
                        before.memory_type.as_deref(),
                        before.category.as_deref(),
                        &before.tags,
                    ),
                ),
                None => ix.remove(row),
            }
        }
        let after = Item {
            content: content.to_owned(),
            updated_ms: now,
            ..before.clone()
        };
        Ok(UpdateOutcome::Updated { before, after })
    }

    fn delete(&self, user: &str, kind: Kind, id: i64) -> Result<Option<Item>, MemoryError> {
        self.check_external_changes()?;
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let removed = self
            .store
            .conn()
            .query_row(
                &format!(
                    "DELETE FROM items WHERE user = ?1 AND kind = ?2 AND number = ?3 RETURNING {ITEM_COLUMNS}"
                ),
                params![user, kind.as_str(), id],
                item_from_row,
            )
            .optional()
            .map_err(err)?;
        let Some((row, item)) = removed else {
            return Ok(None);
        };
        if let Some((ix, _)) = self
            .indexes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(user.to_owned(), kind))
        {
            ix.write().unwrap_or_else(|e| e.into_inner()).remove(row);
        }
        self.access
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&row);
        Ok(Some(item))
    }

    fn pinned(&self, user: &str) -> Result<Vec<Item>, MemoryError> {
        let conn = self.store.conn();
        let mut stmt = conn
            .prepare(&format!(
                "SELECT {ITEM_COLUMNS} FROM items WHERE user = ?1 AND kind = 'truth' AND pinned = 1 ORDER BY number"
            ))
            .map_err(err)?;
        let items = stmt
            .query_map(params![user], item_from_row)
            .map_err(err)?
            .map(|r| r.map(|(_, i)| i))
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        Ok(items)
    }
}

#[cfg(test)]
mod tests;
