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
//!
//! This module holds [`MemoryDb`]'s public face and the order of each operation (checks,
//! embedding, the write lock, the insert and the index update); the parts live beside it:
//! `schema` (tables and row SQL), `vectors` (the in-memory indexes and exact rescoring),
//! `lexical` (word lookup), `rank` (the ranking formula), `duplicates`, `normalize` (text
//! as compared), `access` (access counts) and `transfer` (export and import).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use crate::{
    Hit, Item, Kind, MemoryBackend, MemoryError, NewItem, Query, SearchMode, SearchOutcome,
    StoreOutcome, UpdateOutcome,
};
use ringfence_embed::{EmbedError, Embedder};

use ringfence_store::StoreError;

mod access;
mod duplicates;
mod failure;
mod lexical;
pub(crate) mod normalize;
pub mod pg;
mod rank;
mod reembed;
pub(crate) mod rows;
pub(crate) mod schema;
mod transfer;
pub(crate) mod vectors;
mod when;

pub use failure::MemoryFailure;
pub use rank::RankConfig;
pub use schema::MEMORY_SCHEMA;
pub use transfer::{ExportEmbedding, ExportRecord, ImportReport, Prepared};

use access::AccessCounts;
use normalize::{embedding_text, norm_hash};
use rows::{MemoryRows, SqliteRows};
use schema::Row;
use vectors::{Filter, RowMeta, SharedIndex};

/// Candidates taken from each side (vectors, words) before fusion.
const CANDIDATES: usize = 100;
/// Query vectors kept for repeated searches.
const QUERY_CACHE: usize = 512;
/// Rows embedded per batch when filling in missing vectors.
const EMBED_BATCH: usize = 64;

/// How the embedder is obtained: on first need (loading a model takes a moment; the server
/// starts without waiting for it). After a failure (the model not installed yet) it is
/// tried again at most every [`RETRY_LOAD`], so installing the model needs no restart.
pub type EmbedderLoader = Box<dyn Fn() -> Result<Arc<dyn Embedder>, EmbedError> + Send + Sync>;

/// How long a failed model load is remembered before the next try.
pub const RETRY_LOAD: Duration = Duration::from_secs(30);

/// The memory database and its indexes.
pub struct MemoryDb {
    rows: Box<dyn MemoryRows>,
    rank: RankConfig,
    loader: Option<EmbedderLoader>,
    embedder: OnceLock<Arc<dyn Embedder>>,
    /// The last failed load: why, and when.
    failed: Mutex<Option<(Arc<EmbedError>, std::time::Instant)>>,
    /// Vector indexes by (user, kind), with when each was last used; at most
    /// `vectors::MAX_INDEXES`, the least recently used dropped first (rebuilt on their next
    /// use).
    indexes: Mutex<HashMap<(String, Kind), (SharedIndex, std::time::Instant)>>,
    /// Serialises duplicate check + insert so two sessions cannot store the same fact twice.
    write: Mutex<()>,
    queries: Mutex<HashMap<String, Arc<Vec<f32>>>>,
    /// Access counts not yet written.
    access: AccessCounts,
    /// Rows being embedded again for a new model, in the background.
    reembed: reembed::Jobs,
    /// This database, for the background jobs it starts.
    this: Weak<MemoryDb>,
}

impl std::fmt::Debug for MemoryDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryDb")
            .field("rows", &self.rows.describe())
            .finish()
    }
}

pub(super) use ringfence_core::time::now_ms;

impl MemoryDb {
    /// Opens (creating) the memory database at `path`. `loader` yields the embedder on
    /// first need; `None` means words only.
    pub fn open(
        path: &Path,
        loader: Option<EmbedderLoader>,
        rank: RankConfig,
    ) -> Result<Arc<MemoryDb>, StoreError> {
        Ok(MemoryDb::with_rows(
            Box::new(SqliteRows::open(path)?),
            loader,
            rank,
        ))
    }

    /// The memory database over `rows` (SQLite's or PostgreSQL's).
    pub(crate) fn with_rows(
        rows: Box<dyn MemoryRows>,
        loader: Option<EmbedderLoader>,
        rank: RankConfig,
    ) -> Arc<MemoryDb> {
        Arc::new_cyclic(|this| MemoryDb {
            this: this.clone(),
            reembed: reembed::Jobs::default(),
            rows,
            rank,
            embedder: OnceLock::new(),
            loader,
            failed: Mutex::new(None),
            indexes: Mutex::new(HashMap::new()),
            write: Mutex::new(()),
            queries: Mutex::new(HashMap::new()),
            access: AccessCounts::default(),
        })
    }

    /// Where the rows are: a file's path, or "PostgreSQL".
    pub fn describe(&self) -> String {
        self.rows.describe()
    }

    /// The embedder, loading it on first call; `Err` says why search is by words only.
    pub fn embedder(&self) -> Result<Arc<dyn Embedder>, StoreError> {
        if let Some(e) = self.embedder.get() {
            return Ok(e.clone());
        }
        let Some(load) = &self.loader else {
            return Err(StoreError::from(MemoryFailure::NoEmbedder));
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
            return Err(MemoryFailure::ModelLoad(why.clone()).into());
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
                let why = Arc::new(why);
                *failed = Some((why.clone(), std::time::Instant::now()));
                Err(MemoryFailure::ModelLoad(why).into())
            }
        }
    }

    /// Loads the embedder now (call from a background thread at start-up).
    pub fn warm_up(&self) {
        let _ = self.embedder();
    }

    /// Writes pending access counts (its owner calls this periodically and at exit; dropping
    /// the database writes them too).
    pub fn flush(&self) {
        self.access.flush(self.rows.as_ref());
    }

    /// Drops the indexes when another connection (another process) changed a store that
    /// does not version its rows (see [`MemoryRows::changed_elsewhere`]).
    fn check_external_changes(&self) -> Result<(), StoreError> {
        if self.rows.changed_elsewhere()? {
            self.drop_all_indexes();
        }
        Ok(())
    }

    fn embed_one(&self, embedder: &Arc<dyn Embedder>, text: &str) -> Result<Vec<f32>, StoreError> {
        embedder
            .embed(&[text])
            .map_err(MemoryFailure::Embed)?
            .pop()
            .ok_or(StoreError::from(MemoryFailure::NoVector))
    }

    /// The question's vector, from the cache of recent questions or embedded now.
    fn query_vector(
        &self,
        embedder: &Arc<dyn Embedder>,
        text: &str,
    ) -> Result<Arc<Vec<f32>>, StoreError> {
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

    /// Stores `item` for `user`, as `store` does, with the given times (import keeps them)
    /// and optionally a ready vector from `model` (import skips re-embedding).
    fn store_with(
        &self,
        user: &str,
        kind: Kind,
        item: NewItem,
        times: Option<(i64, i64, i64)>,
        given_vector: Option<(Vec<f32>, String)>,
    ) -> Result<StoreOutcome, StoreError> {
        self.check_external_changes()?;
        let hash = norm_hash(&item.content);
        if let Some(dup) = self.exact_duplicate(user, kind, &hash, None)? {
            return Ok(StoreOutcome::Duplicate(dup));
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
            (Some(e), Some(_)) => self.index_for_write(user, kind, e)?,
            _ => None,
        };
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        // Another session may have stored the same text while this one was embedding.
        if let Some(dup) = self.exact_duplicate(user, kind, &hash, None)? {
            return Ok(StoreOutcome::Duplicate(dup));
        }
        if let (Some(index), Some(v)) = (&index, &vector)
            && let Some(e) = &embedder
            && let Some(dup) = self.near_duplicate(user, index, e.id(), &item.content, v, None)?
        {
            return Ok(StoreOutcome::Duplicate(dup));
        }
        let now = now_ms();
        let (created_ms, updated_ms, access_count) = times.unwrap_or((now, now, 0));
        let model = embedder.as_ref().map(|e| e.id().to_owned());
        let row = Row {
            user,
            kind,
            item: &item,
            vector: vector.as_deref().zip(model.as_deref()),
            created_ms,
            updated_ms,
            access_count,
        };
        match self.rows.insert(&row)? {
            Some((row, stored)) => {
                if let (Some(index), Some(v)) = (&index, &vector) {
                    index.write().unwrap_or_else(|e| e.into_inner()).insert(
                        row,
                        v,
                        RowMeta::new(
                            item.memory_type.as_deref(),
                            item.category.as_deref(),
                            &item.tags,
                            created_ms,
                        ),
                    );
                }
                Ok(StoreOutcome::Stored(stored))
            }
            // Another process stored the same text between our check and insert.
            None => match self.exact_duplicate(user, kind, &hash, None)? {
                Some(dup) => Ok(StoreOutcome::Duplicate(dup)),
                None => Err(StoreError::from(MemoryFailure::StoreConflict)),
            },
        }
    }

    /// The index a store or update adds its row to; none while the rows are being embedded
    /// again (the row's vector is saved with it, and the index is built from what is saved
    /// once that is done).
    fn index_for_write(
        &self,
        user: &str,
        kind: Kind,
        embedder: &Arc<dyn Embedder>,
    ) -> Result<Option<SharedIndex>, StoreError> {
        match self.index(user, kind, embedder) {
            Ok(ix) => Ok(Some(ix)),
            Err(why) if reembed::is_reembedding(&why) => Ok(None),
            Err(why) => Err(why),
        }
    }

    /// [`MemoryBackend::search`]: candidates by meaning and by words, fused and ranked.
    fn search_rows(
        &self,
        user: &str,
        kind: Kind,
        query: &Query,
    ) -> Result<SearchOutcome, StoreError> {
        self.check_external_changes()?;
        let filter = Filter::of(query);
        let now = now_ms();
        // Rows stored within a time the question names are candidates too, however far
        // down the whole index they rank.
        let dated = when::dated(&query.text, now);
        let windows = &dated.windows;
        let word_query = Query {
            text: dated.words.clone(),
            ..query.clone()
        };
        let mut mode = SearchMode::Hybrid;
        let mut similarities: HashMap<i64, f32> = HashMap::new();
        let mut query_vector: Option<Arc<Vec<f32>>> = None;
        // The index first: cheap once built, and it knows how many rows the user has.
        // Building it embeds rows stored without a vector: an endpoint that is down then
        // leaves the search to words, as a failed question embedding does.
        let indexed: Result<(Arc<dyn Embedder>, SharedIndex), StoreError> = match self.embedder() {
            Ok(e) => match self.index(user, kind, &e) {
                Ok(ix) => Ok((e, ix)),
                Err(why) if reembed::is_reembedding(&why) => Err(why),
                Err(why) => Err(MemoryFailure::ModelFailed(Box::new(why)).into()),
            },
            Err(why) => Err(why),
        };
        let rows = indexed
            .as_ref()
            .ok()
            .map(|(_, ix)| ix.read().unwrap_or_else(|e| e.into_inner()).len());
        // Words are looked up in the database while the question is embedded.
        let lexical = std::thread::scope(|scope| {
            let words = std::thread::Builder::new()
                .name("memory-words".into())
                .spawn_scoped(scope, || {
                    self.lexical_candidates(user, kind, &word_query, rows)
                });
            match &indexed {
                Ok((embedder, index)) => match self.query_vector(embedder, query.text.trim()) {
                    Ok(v) => {
                        let ix = index.read().unwrap_or_else(|e| e.into_inner());
                        // One scan: the best overall, and the best stored within the
                        // times named.
                        let in_time = (!windows.is_empty()).then(|| filter.within(windows));
                        let filters = [Some(&filter), in_time.as_ref()];
                        let n = if in_time.is_some() { 2 } else { 1 };
                        for found in ix.top_each(&v, CANDIDATES, &filters[..n]) {
                            similarities.extend(found);
                        }
                        query_vector = Some(v);
                    }
                    Err(e) => {
                        mode = SearchMode::Lexical {
                            reason: MemoryFailure::ModelFailed(Box::new(e)).to_string(),
                        }
                    }
                },
                Err(why) => {
                    mode = SearchMode::Lexical {
                        reason: why.to_string(),
                    }
                }
            }
            match words {
                Ok(words) => words
                    .join()
                    .unwrap_or_else(|_| Err(StoreError::from(MemoryFailure::WordSearchPanicked))),
                // No thread to be had: look the words up here, after the embedding.
                Err(_) => self.lexical_candidates(user, kind, &word_query, rows),
            }
        })?;
        // The best by words are candidates; every candidate keeps its word score, also one
        // nominated by meaning or by time.
        let mut ids: Vec<i64> = similarities
            .keys()
            .copied()
            .chain(lexical.best.iter().map(|(id, _)| *id))
            .collect();
        let lexical = lexical.all;
        ids.sort_unstable();
        ids.dedup();
        // The index ranked by approximate similarities; score every candidate (also those
        // found by words only) by the exact one.
        if let (Some(v), Ok((embedder, _))) = (&query_vector, &indexed) {
            similarities = self.exact_similarities(user, embedder.id(), &ids, v)?;
        }
        let rows = self.rows.rows_by_id(user, &ids)?;
        let hybrid = matches!(mode, SearchMode::Hybrid);
        let mut hits: Vec<(i64, Hit)> = Vec::new();
        for (row, item) in rows {
            let words = lexical.get(&row).copied().unwrap_or(0.0);
            let similarity = similarities.get(&row).copied();
            let in_time = windows
                .iter()
                .any(|&(start, end)| (start..end).contains(&item.created_ms));
            let Some(relevance) = self.rank.relevance(hybrid, similarity, words, in_time) else {
                continue;
            };
            let score = self
                .rank
                .score(relevance, item.updated_ms, item.access_count, now);
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
        self.access
            .record(&hits.iter().map(|(r, _)| *r).collect::<Vec<_>>());
        Ok(SearchOutcome {
            hits: hits.into_iter().map(|(_, h)| h).collect(),
            mode,
        })
    }

    /// [`MemoryBackend::update`]: new content (and vector) for row number `id`, unless it
    /// duplicates another row.
    fn update_row(
        &self,
        user: &str,
        kind: Kind,
        id: i64,
        content: &str,
    ) -> Result<UpdateOutcome, StoreError> {
        self.check_external_changes()?;
        let Some((row, before)) = self.rows.find(user, kind, id)? else {
            return Ok(UpdateOutcome::NotFound);
        };
        let hash = norm_hash(content);
        if let Some(dup) = self.exact_duplicate(user, kind, &hash, Some(row))? {
            return Ok(UpdateOutcome::Duplicate(dup));
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
            Some(e) => self.index_for_write(user, kind, e)?,
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
        let changed = self.rows.update(
            user,
            kind,
            row,
            content,
            &hash,
            vector.as_deref().zip(model.as_deref()),
            now,
        )?;
        if !changed {
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
                        before.created_ms,
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

    /// [`MemoryBackend::delete`]: removes row number `id`, from the database and the index.
    fn delete_row(&self, user: &str, kind: Kind, id: i64) -> Result<Option<Item>, StoreError> {
        self.check_external_changes()?;
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let removed = self.rows.delete(user, kind, id)?;
        let Some((row, item)) = removed else {
            return Ok(None);
        };
        self.unindex(user, kind, row);
        self.access.forget(row);
        Ok(Some(item))
    }

    /// [`MemoryBackend::pinned`]: `user`'s pinned truths, by number.
    fn pinned_rows(&self, user: &str) -> Result<Vec<Item>, StoreError> {
        self.rows.pinned(user)
    }

    /// `user`'s row of `kind` numbered `id`.
    pub fn get(&self, user: &str, kind: Kind, id: i64) -> Result<Option<Item>, StoreError> {
        Ok(self.rows.find(user, kind, id)?.map(|(_, item)| item))
    }

    /// Pins (or unpins) `user`'s truth `id`: pinned truths are always in view (the resource,
    /// the prompt, the instructions when configured). `None`: no such truth.
    pub fn set_pinned(
        &self,
        user: &str,
        id: i64,
        pinned: bool,
    ) -> Result<Option<Item>, StoreError> {
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        self.rows.set_pinned(user, id, pinned)
    }

    /// Deletes every row of `user` of `kind` (both when `None`), one at a time (each durable
    /// as it goes: an interrupted clear is finished by running it again). Returns how many.
    pub fn clear(&self, user: &str, kind: Option<Kind>) -> Result<usize, StoreError> {
        let rows = self.rows.export(Some(user), kind, false)?;
        let mut removed = 0;
        for row in rows {
            if self.delete_row(user, row.item.kind, row.item.id)?.is_some() {
                removed += 1;
            }
        }
        Ok(removed)
    }
}

impl Drop for MemoryDb {
    fn drop(&mut self) {
        self.access.flush(self.rows.as_ref());
    }
}

/// The error type of the family's [`MemoryBackend`] methods.
type BackendTraitError = MemoryError;

/// A store error as [`MemoryBackend`] reports it (kept as the source).
fn to_memory_error(e: StoreError) -> BackendTraitError {
    MemoryError::new(e)
}

impl MemoryBackend for MemoryDb {
    fn store(
        &self,
        user: &str,
        kind: Kind,
        item: NewItem,
    ) -> Result<StoreOutcome, BackendTraitError> {
        self.store_with(user, kind, item, None, None)
            .map_err(to_memory_error)
    }

    fn search(
        &self,
        user: &str,
        kind: Kind,
        query: &Query,
    ) -> Result<SearchOutcome, BackendTraitError> {
        self.search_rows(user, kind, query).map_err(to_memory_error)
    }

    fn update(
        &self,
        user: &str,
        kind: Kind,
        id: i64,
        content: &str,
    ) -> Result<UpdateOutcome, BackendTraitError> {
        self.update_row(user, kind, id, content)
            .map_err(to_memory_error)
    }

    fn delete(&self, user: &str, kind: Kind, id: i64) -> Result<Option<Item>, BackendTraitError> {
        self.delete_row(user, kind, id).map_err(to_memory_error)
    }

    fn pinned(&self, user: &str) -> Result<Vec<Item>, BackendTraitError> {
        self.pinned_rows(user).map_err(to_memory_error)
    }
}

/// Truths' and memories' state, for `ringfence store migrate`: both schemas, the tables, and
/// the SQLite file at `file`.
pub fn state(file: std::path::PathBuf) -> ringfence_store::pg::copy::Family {
    use ringfence_store::pg::copy::{Family, Table};
    Family {
        sqlite: &MEMORY_SCHEMA,
        postgres: &pg::MEMORY_PG_SCHEMA,
        tables: &[
            Table {
                name: "items",
                renamed: Some("memory_items"),
                key: &["id"],
                identity: Some("id"),
            },
            Table {
                name: "counters",
                renamed: Some("memory_counters"),
                key: &["user", "kind"],
                identity: None,
            },
        ],
        file,
        durability: ringfence_store::Durability::Full,
    }
}

#[cfg(test)]
mod tests;
