//! Rows out and in (`ringfence memory list/export/import`): the JSON-line record, its
//! checks, and bulk import with batched embedding.

use base64::Engine as _;
use serde::{Deserialize, Serialize};

use crate::{CATEGORIES, Item, Kind, MEMORY_TYPES, NewItem, StoreOutcome};

use super::MemoryFailure;
use super::normalize::embedding_text;
use super::schema::{Row, blob_vector};
use super::{EMBED_BATCH, MemoryDb, now_ms};
use ringfence_store::StoreError;

/// Rows per transaction in an import.
const IMPORT_BATCH: usize = 1000;

impl MemoryDb {
    /// Users with any rows, sorted.
    pub fn users(&self) -> Result<Vec<String>, StoreError> {
        self.rows.users()
    }

    /// Every row of `user` (all users when `None`) of `kind` (both when `None`), with its
    /// user, by user, kind and number.
    pub fn items(
        &self,
        user: Option<&str>,
        kind: Option<Kind>,
    ) -> Result<Vec<(String, crate::Item)>, StoreError> {
        self.flush();
        Ok(self
            .rows
            .export(user, kind, false)?
            .into_iter()
            .map(|r| (r.user, r.item))
            .collect())
    }

    /// Every row of `user` (all users when `None`), by user, kind and number.
    pub fn export(
        &self,
        user: Option<&str>,
        kind: Option<Kind>,
        with_embeddings: bool,
    ) -> Result<Vec<ExportRecord>, StoreError> {
        self.flush();
        Ok(self
            .rows
            .export(user, kind, with_embeddings)?
            .into_iter()
            .map(|r| {
                let embedding = r.embedding.map(|(blob, model)| ExportEmbedding {
                    model,
                    vector: base64::engine::general_purpose::STANDARD.encode(blob),
                });
                ExportRecord::from_item(&r.user, &r.item, embedding)
            })
            .collect())
    }

    /// Stores one exported record (for `user` when given, else the record's user).
    /// Duplicates are skipped, as a store would skip them.
    pub fn import(
        &self,
        record: ExportRecord,
        user: Option<&str>,
    ) -> Result<StoreOutcome, StoreError> {
        let p = Prepared::from_record(record, user)?;
        self.store_with(
            &p.user,
            p.kind,
            p.item,
            Some((p.created_ms, p.updated_ms, p.access_count)),
            p.vector,
        )
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
    ) -> Result<ImportReport, StoreError> {
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
            let batch: Vec<Row> = chunk
                .iter()
                .map(|p| Row {
                    user: &p.user,
                    kind: p.kind,
                    item: &p.item,
                    vector: p
                        .vector
                        .as_ref()
                        .filter(|(_, m)| Some(m) == model.as_ref())
                        .map(|(v, m)| (v.as_slice(), m.as_str())),
                    created_ms: p.created_ms,
                    updated_ms: p.updated_ms,
                    access_count: p.access_count,
                })
                .collect();
            let stored = self.rows.import(&batch)?;
            report.stored += stored;
            report.duplicates += batch.len() - stored;
            for p in chunk {
                if !touched.iter().any(|(u, k)| u == &p.user && *k == p.kind) {
                    touched.push((p.user.clone(), p.kind));
                }
            }
        }
        // The affected indexes are rebuilt on their next use.
        self.drop_indexes(touched);
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
    pub fn from_record(record: ExportRecord, user: Option<&str>) -> Result<Prepared, StoreError> {
        let invalid = StoreError::InvalidRecord;
        let kind = Kind::parse(&record.kind).ok_or_else(|| {
            invalid(format!(
                "kind {:?} is neither \"truth\" nor \"memory\"",
                record.kind
            ))
        })?;
        let user = user.or(record.user.as_deref()).ok_or_else(|| {
            invalid("the record names no user; pass --user to import it for one".into())
        })?;
        if user.is_empty() {
            return Err(invalid("the user is empty".into()));
        }
        let content = record.content.trim().to_owned();
        if content.is_empty() {
            return Err(invalid("content is empty".into()));
        }
        let check = |what: &str,
                     v: &Option<String>,
                     valid: &[&str]|
         -> Result<Option<String>, StoreError> {
            match v {
                None => Ok(None),
                Some(s) if valid.contains(&s.as_str()) => Ok(Some(s.clone())),
                Some(s) => Err(invalid(format!(
                    "{what} {s:?} is not one of: {}",
                    valid.join(", ")
                ))),
            }
        };
        let item = NewItem {
            content,
            category: match kind {
                Kind::Truth => check("category", &record.category, &CATEGORIES)?,
                Kind::Memory => crate::open_category(record.category.as_deref())
                    .map_err(|e| invalid(e.to_string()))?,
            },
            memory_type: match kind {
                Kind::Memory => check("memoryType", &record.memory_type, &MEMORY_TYPES)?,
                Kind::Truth => None,
            },
            tags: record.tags.unwrap_or_default(),
            pinned: kind == Kind::Truth && record.is_pinned.unwrap_or(false),
            source: record.source.unwrap_or_else(|| "import".into()),
        };
        let parse_time = |s: &Option<String>| -> Result<Option<i64>, StoreError> {
            match s {
                None => Ok(None),
                Some(t) => ringfence_core::time::parse_iso(t)
                    .map(|st| Some(ringfence_core::time::millis(st)))
                    .map_err(|e| invalid(e.to_string())),
            }
        };
        let created_ms = parse_time(&record.created)?.unwrap_or_else(now_ms);
        let updated_ms = parse_time(&record.updated)?.unwrap_or(created_ms);
        let vector = match record.embedding {
            Some(e) => {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(e.vector.as_bytes())
                    .map_err(MemoryFailure::RecordVector)?;
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
        use ringfence_core::time::format_iso_ms;
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
