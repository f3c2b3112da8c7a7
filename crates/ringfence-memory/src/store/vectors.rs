//! Search by meaning: one in-memory index per (user, kind) of the rows' vectors quantised
//! to signed bytes, scored with integer dot products (SIMD, split over cores for large
//! indexes); at most [`MAX_INDEXES`] kept, the least recently used dropped. The index only
//! nominates candidates: their exact cosine is recomputed from the f32 vectors stored in
//! the database ([`MemoryDb::exact_similarities`]). Where several processes share the
//! database (PostgreSQL), each index remembers the version of the rows it reflects and
//! takes in what the others changed before it is used.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use crate::{Kind, MEMORY_TYPES, Query};
use ringfence_embed::{Embedder, dot};

use rayon::prelude::*;

use super::when::Window;
use super::{EMBED_BATCH, MemoryDb};
use ringfence_store::StoreError;

/// Vector indexes kept in memory at once (one per user and kind).
const MAX_INDEXES: usize = 256;

/// Indexes at least this large are scanned in parts (two to four), on as many threads as
/// rayon's pool and this thread allow.
const PARALLEL_SCAN_ROWS: usize = 20_000;

pub(super) type SharedIndex = Arc<RwLock<VecIndex>>;

/// One user's vectors of one kind, for one model.
///
/// Vectors are kept as signed bytes with a scale per row (a quarter of the memory of f32,
/// and a quarter of the bytes each search streams); [`top`](Self::top) ranks by these
/// approximate similarities, and the search recomputes the exact cosine of the candidates
/// from the stored f32 vectors.
#[derive(Default)]
pub(super) struct VecIndex {
    dims: usize,
    rows: Vec<i64>,
    codes: Vec<i8>,
    scales: Vec<f32>,
    meta: Vec<RowMeta>,
    position: HashMap<i64, usize>,
    /// The store's version of these rows the index reflects (see `MemoryRows::version`).
    version: i64,
}

/// What a search may filter an indexed row by.
#[derive(Clone)]
pub(crate) struct RowMeta {
    memory_type: Option<u8>,
    /// Memory categories are an open set (seed 003's "etc."), kept as written.
    category: Option<Box<str>>,
    tags: Box<[Box<str>]>,
    /// When it was stored (milliseconds since the epoch).
    created_ms: i64,
}

impl RowMeta {
    pub(crate) fn new(
        memory_type: Option<&str>,
        category: Option<&str>,
        tags: &[String],
        created_ms: i64,
    ) -> RowMeta {
        RowMeta {
            created_ms,
            memory_type: memory_type
                .and_then(|t| MEMORY_TYPES.iter().position(|v| *v == t))
                .map(|p| p as u8),
            category: category.map(Into::into),
            tags: tags.iter().map(|t| t.as_str().into()).collect(),
        }
    }

    fn matches(&self, filter: &Filter) -> bool {
        (filter.memory_type.is_none() || self.memory_type == filter.memory_type)
            && (filter.category.is_none() || self.category == filter.category)
            && (filter.tags.is_empty() || self.tags.iter().any(|t| filter.tags.contains(&&**t)))
            && (filter.windows.is_empty()
                || filter
                    .windows
                    .iter()
                    .any(|&(start, end)| (start..end).contains(&self.created_ms)))
    }
}

/// A query's type, category and tag filters, in the index's terms.
pub(super) struct Filter<'a> {
    memory_type: Option<u8>,
    category: Option<Box<str>>,
    tags: Vec<&'a str>,
    /// Stored within one of these (none: any time).
    windows: Vec<Window>,
}

impl<'a> Filter<'a> {
    pub(super) fn of(q: &'a Query) -> Filter<'a> {
        let meta = RowMeta::new(q.memory_type.as_deref(), q.category.as_deref(), &[], 0);
        Filter {
            memory_type: meta.memory_type,
            category: meta.category,
            tags: q.tags.iter().map(String::as_str).collect(),
            windows: Vec::new(),
        }
    }

    /// The same filter, narrowed to rows stored within `windows`.
    pub(super) fn within(&self, windows: &[Window]) -> Filter<'a> {
        Filter {
            memory_type: self.memory_type,
            category: self.category.clone(),
            tags: self.tags.clone(),
            windows: windows.to_vec(),
        }
    }
}

impl VecIndex {
    /// How many rows are indexed.
    pub(super) fn len(&self) -> usize {
        self.rows.len()
    }

    /// Adds `row` (or replaces its vector and metadata). A vector of another length than
    /// the index's is left out.
    pub(super) fn insert(&mut self, row: i64, vector: &[f32], meta: RowMeta) {
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

    pub(super) fn remove(&mut self, row: i64) {
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
    pub(super) fn top(&self, query: &[f32], k: usize, filter: Option<&Filter>) -> Vec<(i64, f32)> {
        self.top_each(query, k, &[filter]).pop().unwrap_or_default()
    }

    /// [`top`](Self::top) for each of `filters`, from one scan of the vectors.
    pub(super) fn top_each(
        &self,
        query: &[f32],
        k: usize,
        filters: &[Option<&Filter>],
    ) -> Vec<Vec<(i64, f32)>> {
        if query.len() != self.dims || self.rows.is_empty() || k == 0 {
            return vec![Vec::new(); filters.len()];
        }
        let mut q = Vec::with_capacity(self.dims);
        let q_scale = ringfence_embed::quantize_i8(query, &mut q);
        let n = self.rows.len();
        // One part of the rows, scored and narrowed to its own best `k` per filter.
        let part = |start: usize, end: usize| -> Vec<Vec<(f32, usize)>> {
            let mut raw = Vec::with_capacity(end - start);
            ringfence_embed::dot_rows_i8(
                &q,
                &self.codes[start * self.dims..end * self.dims],
                &mut raw,
            );
            filters
                .iter()
                .map(|filter| {
                    let mut scored: Vec<(f32, usize)> = Vec::with_capacity(raw.len());
                    for (j, r) in raw.iter().enumerate() {
                        let i = start + j;
                        if filter.is_some_and(|f| !self.meta[i].matches(f)) {
                            continue;
                        }
                        scored.push((*r as f32 * q_scale * self.scales[i], i));
                    }
                    best_first(&mut scored, k);
                    scored
                })
                .collect()
        };
        let threads = if n >= PARALLEL_SCAN_ROWS {
            rayon::current_num_threads().clamp(2, 4)
        } else {
            1
        };
        // Large indexes in parts on rayon's pool (the one candle runs, usually just woken
        // by the question's embedding; no thread is started per search): the scan is bound
        // by memory bandwidth, which two cores share better than one.
        let per = n.div_ceil(threads);
        let parts: Vec<Vec<Vec<(f32, usize)>>> = (0..threads)
            .into_par_iter()
            .map(|t| part((t * per).min(n), ((t + 1) * per).min(n)))
            .collect();
        (0..filters.len())
            .map(|f| {
                let mut scored: Vec<(f32, usize)> =
                    parts.iter().flat_map(|p| p[f].iter().copied()).collect();
                best_first(&mut scored, k);
                scored.into_iter().map(|(s, i)| (self.rows[i], s)).collect()
            })
            .collect()
    }
}

/// Narrows `scored` to its `k` highest scores, highest first (ties by position).
fn best_first(scored: &mut Vec<(f32, usize)>, k: usize) {
    let order = |a: &(f32, usize), b: &(f32, usize)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    if scored.len() > k {
        scored.select_nth_unstable_by(k - 1, order);
        scored.truncate(k);
    }
    scored.sort_by(order);
}

impl MemoryDb {
    /// The vector index of `user`'s rows of `kind`, built on first use. Rows without a
    /// vector from the current model (stored without a model, or under another one) are
    /// embedded and saved first: a few on the spot; more in the background, and until that
    /// is done the answer is [`MemoryFailure::Reembedding`](super::MemoryFailure) (see
    /// `reembed`). Where several processes write the store, an index in memory is first
    /// brought up to date with what they changed.
    pub(super) fn index(
        &self,
        user: &str,
        kind: Kind,
        embedder: &Arc<dyn Embedder>,
    ) -> Result<SharedIndex, StoreError> {
        let key = (user.to_owned(), kind);
        let cached = self
            .indexes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(&key)
            .map(|(ix, used)| {
                *used = std::time::Instant::now();
                ix.clone()
            });
        if let Some(ix) = cached {
            self.refresh(user, kind, embedder, &ix)?;
            return Ok(ix);
        }
        // The version before the rows (and before filling in missing vectors): a change
        // committed meanwhile — a row stored without a vector too — is taken in by the
        // next refresh, never missed.
        let version = self.rows.version(user, kind)?.unwrap_or(0);
        self.embed_missing(user, kind, embedder)?;
        let model = embedder.id();
        let mut ix = VecIndex {
            dims: embedder.dims(),
            version,
            ..VecIndex::default()
        };
        for row in self.rows.vectors(user, kind, model)? {
            if let Some(v) = &row.vector {
                if ix.dims == 0 {
                    ix.dims = v.len();
                }
                ix.insert(row.id, v, row.meta);
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

    /// Applies to `index` what other processes changed in `user`'s rows of `kind` since it
    /// was last brought up to date (nothing where the store is not shared). Changed rows
    /// without a vector from this model are embedded here.
    fn refresh(
        &self,
        user: &str,
        kind: Kind,
        embedder: &Arc<dyn Embedder>,
        index: &SharedIndex,
    ) -> Result<(), StoreError> {
        let Some(now) = self.rows.version(user, kind)? else {
            return Ok(());
        };
        let since = index.read().unwrap_or_else(|e| e.into_inner()).version;
        if now == since {
            return Ok(());
        }
        let changes = self.rows.changes(user, kind, embedder.id(), since)?;
        let mut unembedded = Vec::new();
        {
            let mut ix = index.write().unwrap_or_else(|e| e.into_inner());
            // Another refresh applied a later picture meanwhile (it holds all of this one).
            if ix.version >= changes.version {
                return Ok(());
            }
            for id in changes.deleted {
                ix.remove(id);
            }
            for row in changes.rows {
                match &row.vector {
                    Some(v) => ix.insert(row.id, v, row.meta),
                    None => {
                        ix.remove(row.id);
                        unembedded.push(row);
                    }
                }
            }
            ix.version = changes.version;
        }
        let texts: Vec<(i64, &str)> = unembedded.iter().map(|r| (r.id, r.text.as_str())).collect();
        self.embed_and_save(user, kind, embedder, &texts, |i, v| {
            let row = &unembedded[i];
            index
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .insert(row.id, v, row.meta.clone());
        })
    }

    /// Embeds and saves `user`'s rows of `kind` that have no vector from `embedder`'s model:
    /// here when they are few, else in the background (the error says how far it is).
    fn embed_missing(
        &self,
        user: &str,
        kind: Kind,
        embedder: &Arc<dyn Embedder>,
    ) -> Result<(), StoreError> {
        if let Some(progress) = self.reembedding(user, kind) {
            return Err(progress);
        }
        let model = embedder.id();
        let missing = self.rows.missing_vectors(user, kind, model)?;
        if missing.is_empty() {
            return Ok(());
        }
        if missing.len() > super::reembed::ON_THE_SPOT {
            return Err(self.reembed_in_background(user, kind, embedder, missing));
        }
        tracing::info!(
            user,
            kind = kind.as_str(),
            rows = missing.len(),
            model,
            "embedding rows stored without a vector for this model"
        );
        let texts: Vec<(i64, &str)> = missing.iter().map(|(id, t)| (*id, t.as_str())).collect();
        self.embed_and_save(user, kind, embedder, &texts, |_, _| {})
    }

    /// Embeds `rows` (row, text) in batches and saves their vectors (rows changed meanwhile
    /// keep theirs); `saved` gets each row's position in `rows` and its vector.
    pub(super) fn embed_and_save(
        &self,
        user: &str,
        kind: Kind,
        embedder: &Arc<dyn Embedder>,
        rows: &[(i64, &str)],
        mut saved: impl FnMut(usize, &[f32]),
    ) -> Result<(), StoreError> {
        for (c, chunk) in rows.chunks(EMBED_BATCH).enumerate() {
            let texts: Vec<&str> = chunk.iter().map(|(_, t)| *t).collect();
            let vectors = embedder
                .embed(&texts)
                .map_err(super::MemoryFailure::Embed)?;
            let pairs: Vec<(i64, &[f32])> = chunk
                .iter()
                .zip(&vectors)
                .map(|((id, _), v)| (*id, v.as_slice()))
                .collect();
            self.rows.set_vectors(user, kind, embedder.id(), &pairs)?;
            for (i, v) in vectors.iter().enumerate() {
                saved(c * EMBED_BATCH + i, v);
            }
        }
        Ok(())
    }

    /// Takes `row` out of `user`'s index of `kind`, if that index is in memory.
    pub(super) fn unindex(&self, user: &str, kind: Kind, row: i64) {
        if let Some((ix, _)) = self
            .indexes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(user.to_owned(), kind))
        {
            ix.write().unwrap_or_else(|e| e.into_inner()).remove(row);
        }
    }

    /// Drops the indexes of `keys` (rebuilt on their next use).
    pub(super) fn drop_indexes(&self, keys: impl IntoIterator<Item = (String, Kind)>) {
        let mut indexes = self.indexes.lock().unwrap_or_else(|e| e.into_inner());
        for key in keys {
            indexes.remove(&key);
        }
    }

    /// Drops every index (another process changed the database).
    pub(super) fn drop_all_indexes(&self) {
        self.indexes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// Exact cosine similarities of `query` with the stored vectors (of `model`) of `user`'s
    /// rows among `ids`; rows without such a vector are left out.
    pub(super) fn exact_similarities(
        &self,
        user: &str,
        model: &str,
        ids: &[i64],
        query: &[f32],
    ) -> Result<HashMap<i64, f32>, StoreError> {
        Ok(self
            .rows
            .vectors_by_id(user, model, ids)?
            .into_iter()
            .map(|(id, v)| (id, dot(query, &v)))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The best rows of an index large enough to be scanned in parts (each keeping its own
    /// best) are those of one ranking of every row: without a filter, with a time filter,
    /// and with one that leaves a part fewer than `k` rows or none; equal scores in
    /// different parts come in the order of the rows' positions.
    #[test]
    fn a_scan_in_parts_ranks_as_one_ranking_of_every_row() {
        let (n, d, k) = (PARALLEL_SCAN_ROWS + 5_003, 16, 40);
        let mut ix = VecIndex::default();
        let mut seed = 0x2545_f491_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 2001) as f32 / 1000.0 - 1.0
        };
        let query: Vec<f32> = (0..d).map(|_| next()).collect();
        // The query's direction, longer than any other vector here by far, at
        // positions in every part, whatever their number (2–4): the best score, the same
        // for all of them.
        let twins = [5usize, 6_300, 12_600, 19_000, 24_990];
        for row in 0..n {
            let v: Vec<f32> = if twins.contains(&row) {
                query.iter().map(|x| x * 20.0).collect()
            } else {
                (0..d).map(|_| next()).collect()
            };
            ix.insert(
                1_000 + row as i64,
                &v,
                RowMeta::new(None, None, &[], row as i64),
            );
        }
        let q = Query {
            text: String::new(),
            limit: 5,
            memory_type: None,
            category: None,
            tags: Vec::new(),
        };
        let any = Filter::of(&q);
        let wide = any.within(&[(7_000, 19_000)]);
        // 20 rows about the boundary of the first part when there are four parts (6,251),
        // all in the first when there are two or three.
        let narrow = any.within(&[(6_240, 6_260)]);
        let found = ix.top_each(&query, k, &[Some(&any), Some(&wide), Some(&narrow)]);

        let mut codes = Vec::new();
        let q_scale = ringfence_embed::quantize_i8(&query, &mut codes);
        let mut raw = Vec::new();
        ringfence_embed::dot_rows_i8(&codes, &ix.codes, &mut raw);
        let expect = |keep: &dyn Fn(usize) -> bool| -> Vec<(i64, f32)> {
            let mut all: Vec<(f32, usize)> = (0..n)
                .filter(|&i| keep(i))
                .map(|i| (raw[i] as f32 * q_scale * ix.scales[i], i))
                .collect();
            all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
            all.truncate(k);
            all.into_iter().map(|(s, i)| (ix.rows[i], s)).collect()
        };
        assert_eq!(found[0], expect(&|_| true));
        let first: Vec<i64> = found[0][..twins.len()].iter().map(|(r, _)| *r).collect();
        let in_order: Vec<i64> = twins.iter().map(|&t| 1_000 + t as i64).collect();
        assert_eq!(first, in_order, "equal scores by position");
        assert_eq!(found[1], expect(&|i| (7_000..19_000).contains(&i)));
        assert!(
            found[1]
                .iter()
                .all(|(row, _)| (8_000..20_000).contains(row))
        );
        assert_eq!(found[2], expect(&|i| (6_240..6_260).contains(&i)));
        assert_eq!(found[2].len(), 20);
    }
}
