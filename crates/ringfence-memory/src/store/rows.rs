//! Where truths and memories are kept: [`MemoryRows`], the reads and writes the memory
//! database makes, and its SQLite implementation (`memory.db`). PostgreSQL's is
//! `crate::pg::memory`. The searching, ranking, embedding and in-memory indexes above it
//! are the same for both.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicI64, Ordering};

use rusqlite::{OptionalExtension, ToSql, params, params_from_iter};

use crate::{Item, Kind, Query};

use super::MemoryFailure;
use super::lexical::fts_owner;
use super::schema::{
    ITEM_COLUMNS, MEMORY_SCHEMA, Row, blob_vector, insert_in, item_from_row, vector_blob,
};
use super::vectors::RowMeta;
use ringfence_store::{Durability, Store, StoreError};

/// Rows read per query word (a word in more rows than this says little anyway).
pub(crate) const TERM_ROWS: usize = 20_000;

/// A row as a vector index holds it.
pub(crate) struct IndexRow {
    pub(crate) id: i64,
    /// Its vector from the model asked about; `None` when it has none from that model.
    pub(crate) vector: Option<Vec<f32>>,
    /// What it is embedded from (for a row without a vector).
    pub(crate) text: String,
    pub(crate) meta: RowMeta,
}

/// What changed in one user's rows of one kind since a version.
pub(crate) struct Changes {
    /// The version they are at now.
    pub(crate) version: i64,
    /// Rows added or changed.
    pub(crate) rows: Vec<IndexRow>,
    /// Rows deleted.
    pub(crate) deleted: Vec<i64>,
}

/// One row of an export: its user, row and item, and its stored vector with its model.
pub(crate) struct Exported {
    pub(crate) user: String,
    pub(crate) item: Item,
    pub(crate) embedding: Option<(Vec<u8>, String)>,
}

/// The memory database's storage. Every method that takes a user reads or writes that
/// user's rows only.
pub(crate) trait MemoryRows: Send + Sync + 'static {
    /// Names the store in logs (a path, or "PostgreSQL").
    fn describe(&self) -> String;

    /// True when another process changed the store since the last call: every in-memory
    /// index is then rebuilt. A store that versions each user's rows says `false` and
    /// answers [`version`](Self::version) instead.
    fn changed_elsewhere(&self) -> Result<bool, StoreError>;

    /// The version of `user`'s rows of `kind` (raised by every write to them, in commit
    /// order), where several processes write the store; `None` where
    /// [`changed_elsewhere`](Self::changed_elsewhere) tells of changes.
    fn version(&self, user: &str, kind: Kind) -> Result<Option<i64>, StoreError>;

    /// What changed in `user`'s rows of `kind` after version `since`.
    fn changes(
        &self,
        user: &str,
        kind: Kind,
        model: &str,
        since: i64,
    ) -> Result<Changes, StoreError>;

    /// Every row of `user`'s `kind` with a vector from `model`.
    fn vectors(&self, user: &str, kind: Kind, model: &str) -> Result<Vec<IndexRow>, StoreError>;

    /// Rows of `user`'s `kind` without a vector from `model`: (row, text to embed).
    fn missing_vectors(
        &self,
        user: &str,
        kind: Kind,
        model: &str,
    ) -> Result<Vec<(i64, String)>, StoreError>;

    /// Saves vectors of `model` for rows of `user`'s `kind` that still have none from it
    /// (a row changed meanwhile keeps its new vector), in one transaction.
    fn set_vectors(
        &self,
        user: &str,
        kind: Kind,
        model: &str,
        vectors: &[(i64, &[f32])],
    ) -> Result<(), StoreError>;

    /// The stored vectors (of `model`) of `user`'s rows among `ids`.
    fn vectors_by_id(
        &self,
        user: &str,
        model: &str,
        ids: &[i64],
    ) -> Result<Vec<(i64, Vec<f32>)>, StoreError>;

    /// Inserts `row`, numbered next for its user and kind: its row id and item, or `None`
    /// when its text is stored already (the unique hash refused it).
    fn insert(&self, row: &Row) -> Result<Option<(i64, Item)>, StoreError>;

    /// The row of `user`'s `kind` numbered `number`.
    fn find(&self, user: &str, kind: Kind, number: i64) -> Result<Option<(i64, Item)>, StoreError>;

    /// The row of `user`'s `kind` whose normalised text hashes to `hash`.
    fn find_by_hash(
        &self,
        user: &str,
        kind: Kind,
        hash: &[u8],
    ) -> Result<Option<(i64, Item)>, StoreError>;

    /// `user`'s rows among `ids` (row ids, not numbers).
    fn rows_by_id(&self, user: &str, ids: &[i64]) -> Result<HashMap<i64, Item>, StoreError>;

    /// New content (its hash, vector and time) for `user`'s row `row` of `kind`: `false`
    /// when the row is gone, [`MemoryFailure::UpdateConflict`] when another row has the text.
    #[allow(clippy::too_many_arguments)]
    fn update(
        &self,
        user: &str,
        kind: Kind,
        row: i64,
        content: &str,
        hash: &[u8],
        vector: Option<(&[f32], &str)>,
        now_ms: i64,
    ) -> Result<bool, StoreError>;

    /// Deletes the row of `user`'s `kind` numbered `number`, returning it.
    fn delete(
        &self,
        user: &str,
        kind: Kind,
        number: i64,
    ) -> Result<Option<(i64, Item)>, StoreError>;

    /// `user`'s pinned truths, by number.
    fn pinned(&self, user: &str) -> Result<Vec<Item>, StoreError>;

    /// Pins or unpins `user`'s truth numbered `number`, returning it (`None`: no such truth).
    fn set_pinned(&self, user: &str, number: i64, pinned: bool)
    -> Result<Option<Item>, StoreError>;

    /// How many rows of `kind` `user` has.
    fn count(&self, user: &str, kind: Kind) -> Result<i64, StoreError>;

    /// For each of `terms`: `user`'s rows of `kind` (passing `query`'s filters) containing
    /// the word (stemmed), at most [`TERM_ROWS`].
    fn term_rows(
        &self,
        user: &str,
        kind: Kind,
        terms: &[String],
        query: &Query,
    ) -> Result<Vec<Vec<i64>>, StoreError>;

    /// Adds access counts: row → (searches that returned it, the last one's time).
    fn add_access(&self, counts: &HashMap<i64, (i64, i64)>) -> Result<(), StoreError>;

    /// Users with any rows, sorted.
    fn users(&self) -> Result<Vec<String>, StoreError>;

    /// Every row of `user` (all users when `None`) of `kind` (both when `None`), by user,
    /// kind (truths first) and number.
    fn export(
        &self,
        user: Option<&str>,
        kind: Option<Kind>,
        with_embeddings: bool,
    ) -> Result<Vec<Exported>, StoreError>;

    /// Inserts `rows` in one transaction, skipping those whose text their user has stored
    /// already; returns how many were inserted.
    fn import(&self, rows: &[Row]) -> Result<usize, StoreError>;
}

/// Truths and memories in `memory.db`.
pub(crate) struct SqliteRows {
    store: Store,
    /// `PRAGMA data_version` when last looked at: another connection committing changes it.
    data_version: AtomicI64,
}

impl SqliteRows {
    pub(crate) fn open(path: &Path) -> Result<SqliteRows, StoreError> {
        let rows = SqliteRows {
            store: ringfence_store::open_file(path, Durability::Full, &MEMORY_SCHEMA)?,
            data_version: AtomicI64::new(0),
        };
        rows.changed_elsewhere()?;
        Ok(rows)
    }

    fn one(&self, filter: &str, args: &[&dyn ToSql]) -> Result<Option<(i64, Item)>, StoreError> {
        Ok(self
            .store
            .conn()
            .query_row(
                &format!("SELECT {ITEM_COLUMNS} FROM items WHERE {filter}"),
                args,
                item_from_row,
            )
            .optional()?)
    }
}

fn index_row(r: &rusqlite::Row, model: &str) -> rusqlite::Result<IndexRow> {
    let tags: String = r.get(5)?;
    let tags: Vec<String> = serde_json::from_str(&tags).unwrap_or_default();
    let vector = match (
        r.get::<_, Option<Vec<u8>>>(1)?,
        r.get::<_, Option<String>>(2)?,
    ) {
        (Some(blob), Some(m)) if m == model => Some(blob_vector(&blob)),
        _ => None,
    };
    let content: String = r.get(6)?;
    Ok(IndexRow {
        id: r.get(0)?,
        vector,
        text: super::normalize::embedding_text(&content, &tags),
        meta: RowMeta::new(
            r.get::<_, Option<String>>(3)?.as_deref(),
            r.get::<_, Option<String>>(4)?.as_deref(),
            &tags,
            r.get(7)?,
        ),
    })
}

/// The columns [`index_row`] reads.
pub(crate) const INDEX_COLUMNS: &str =
    "id, embedding, embedding_model, memory_type, category, tags, content, created_ms";

impl MemoryRows for SqliteRows {
    fn describe(&self) -> String {
        self.store.path().display().to_string()
    }

    fn changed_elsewhere(&self) -> Result<bool, StoreError> {
        let v: i64 = self
            .store
            .conn()
            .query_row("PRAGMA data_version", [], |r| r.get(0))?;
        Ok(self.data_version.swap(v, Ordering::SeqCst) != v)
    }

    fn version(&self, _user: &str, _kind: Kind) -> Result<Option<i64>, StoreError> {
        Ok(None)
    }

    fn changes(
        &self,
        _user: &str,
        _kind: Kind,
        _model: &str,
        since: i64,
    ) -> Result<Changes, StoreError> {
        // Never asked: `version` is `None` here.
        Ok(Changes {
            version: since,
            rows: Vec::new(),
            deleted: Vec::new(),
        })
    }

    fn vectors(&self, user: &str, kind: Kind, model: &str) -> Result<Vec<IndexRow>, StoreError> {
        let conn = self.store.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {INDEX_COLUMNS} FROM items
                 WHERE user = ?1 AND kind = ?2 AND embedding_model = ?3"
        ))?;
        let rows = stmt
            .query_map(params![user, kind.as_str(), model], |r| index_row(r, model))?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    fn missing_vectors(
        &self,
        user: &str,
        kind: Kind,
        model: &str,
    ) -> Result<Vec<(i64, String)>, StoreError> {
        let conn = self.store.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {INDEX_COLUMNS} FROM items WHERE user = ?1 AND kind = ?2
                 AND (embedding IS NULL OR embedding_model IS NOT ?3)"
        ))?;
        let rows = stmt
            .query_map(params![user, kind.as_str(), model], |r| {
                index_row(r, model).map(|r| (r.id, r.text))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    fn set_vectors(
        &self,
        user: &str,
        kind: Kind,
        model: &str,
        vectors: &[(i64, &[f32])],
    ) -> Result<(), StoreError> {
        let mut conn = self.store.conn();
        let tx = conn.transaction()?;
        for (id, v) in vectors {
            tx.execute(
                "UPDATE items SET embedding = ?1, embedding_model = ?2
                     WHERE id = ?3 AND user = ?4 AND kind = ?5
                       AND (embedding IS NULL OR embedding_model IS NOT ?2)",
                params![vector_blob(v), model, id, user, kind.as_str()],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn vectors_by_id(
        &self,
        user: &str,
        model: &str,
        ids: &[i64],
    ) -> Result<Vec<(i64, Vec<f32>)>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let marks = vec!["?"; ids.len()].join(",");
        let conn = self.store.conn();
        let mut stmt = conn.prepare(&format!(
            // `+`: by id, not by an index on user (see rows_by_id).
            "SELECT id, embedding FROM items
                 WHERE id IN ({marks}) AND +user = ? AND +embedding_model = ?"
        ))?;
        let args: Vec<&dyn ToSql> = ids
            .iter()
            .map(|i| i as &dyn ToSql)
            .chain([&user as &dyn ToSql, &model as &dyn ToSql])
            .collect();
        let rows = stmt
            .query_map(params_from_iter(args), |r| {
                let blob: Vec<u8> = r.get(1)?;
                Ok((r.get::<_, i64>(0)?, blob_vector(&blob)))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    fn insert(&self, row: &Row) -> Result<Option<(i64, Item)>, StoreError> {
        let mut conn = self.store.conn();
        let tx = conn.transaction()?;
        match insert_in(&tx, row) {
            Ok(done) => {
                tx.commit()?;
                Ok(Some(done))
            }
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                Ok(None)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn find(&self, user: &str, kind: Kind, number: i64) -> Result<Option<(i64, Item)>, StoreError> {
        self.one(
            "user = ?1 AND kind = ?2 AND number = ?3",
            params![user, kind.as_str(), number],
        )
    }

    fn find_by_hash(
        &self,
        user: &str,
        kind: Kind,
        hash: &[u8],
    ) -> Result<Option<(i64, Item)>, StoreError> {
        self.one(
            "user = ?1 AND kind = ?2 AND norm_hash = ?3",
            params![user, kind.as_str(), hash],
        )
    }

    fn rows_by_id(&self, user: &str, ids: &[i64]) -> Result<HashMap<i64, Item>, StoreError> {
        if ids.is_empty() {
            return Ok(HashMap::new());
        }
        let marks = vec!["?"; ids.len()].join(",");
        let conn = self.store.conn();
        let mut stmt = conn.prepare(&format!(
            // `+user`: look the rows up by id; an index on user would walk all of them.
            "SELECT {ITEM_COLUMNS} FROM items WHERE id IN ({marks}) AND +user = ?"
        ))?;
        let args: Vec<&dyn ToSql> = ids
            .iter()
            .map(|i| i as &dyn ToSql)
            .chain(std::iter::once(&user as &dyn ToSql))
            .collect();
        let rows = stmt
            .query_map(params_from_iter(args), item_from_row)?
            .collect::<Result<HashMap<_, _>, _>>()?;
        Ok(rows)
    }

    fn update(
        &self,
        user: &str,
        kind: Kind,
        row: i64,
        content: &str,
        hash: &[u8],
        vector: Option<(&[f32], &str)>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let changed = self
            .store
            .conn()
            .execute(
                "UPDATE items SET content = ?1, norm_hash = ?2, embedding = ?3, embedding_model = ?4,
                     updated_ms = ?5 WHERE id = ?6 AND user = ?7 AND kind = ?8",
                params![
                    content,
                    hash,
                    vector.map(|(v, _)| vector_blob(v)),
                    vector.map(|(_, m)| m),
                    now_ms,
                    row,
                    user,
                    kind.as_str()
                ],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::from(MemoryFailure::UpdateConflict)
                }
                e => e.into(),
            })?;
        Ok(changed > 0)
    }

    fn delete(
        &self,
        user: &str,
        kind: Kind,
        number: i64,
    ) -> Result<Option<(i64, Item)>, StoreError> {
        Ok(self
            .store
            .conn()
            .query_row(
                &format!(
                    "DELETE FROM items WHERE user = ?1 AND kind = ?2 AND number = ?3 RETURNING {ITEM_COLUMNS}"
                ),
                params![user, kind.as_str(), number],
                item_from_row,
            )
            .optional()?)
    }

    fn set_pinned(
        &self,
        user: &str,
        number: i64,
        pinned: bool,
    ) -> Result<Option<Item>, StoreError> {
        Ok(self
            .store
            .conn()
            .query_row(
                &format!(
                    "UPDATE items SET pinned = ?3 WHERE user = ?1 AND kind = 'truth' AND number = ?2 RETURNING {ITEM_COLUMNS}"
                ),
                params![user, number, pinned as i64],
                item_from_row,
            )
            .optional()?
            .map(|(_, item)| item))
    }

    fn pinned(&self, user: &str) -> Result<Vec<Item>, StoreError> {
        let conn = self.store.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {ITEM_COLUMNS} FROM items WHERE user = ?1 AND kind = 'truth' AND pinned = 1 ORDER BY number"
        ))?;
        let items = stmt
            .query_map(params![user], item_from_row)?
            .map(|r| r.map(|(_, i)| i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(items)
    }

    fn count(&self, user: &str, kind: Kind) -> Result<i64, StoreError> {
        Ok(self.store.conn().query_row(
            "SELECT count(*) FROM items WHERE user = ?1 AND kind = ?2",
            params![user, kind.as_str()],
            |r| r.get(0),
        )?)
    }

    fn term_rows(
        &self,
        user: &str,
        kind: Kind,
        terms: &[String],
        query: &Query,
    ) -> Result<Vec<Vec<i64>>, StoreError> {
        // The owner token scopes the word to this user's rows of this kind inside the
        // full-text index. Filters need the rows themselves: then the match is joined to
        // them, CROSS JOIN keeping the match as the outer loop (the planner would otherwise
        // walk all of the user's rows and probe the full-text index for each).
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
        let mut stmt = conn.prepare_cached(&sql)?;
        let owner = fts_owner(user, kind);
        let mut found = Vec::with_capacity(terms.len());
        for term in terms {
            args[0] = Box::new(format!(
                "owner : \"{owner}\" AND {{content tags}} : \"{}\"",
                term.replace('"', "")
            ));
            let ids = stmt
                .query_map(params_from_iter(args.iter().map(|a| a.as_ref())), |r| {
                    r.get::<_, i64>(0)
                })?
                .collect::<Result<Vec<_>, _>>()?;
            found.push(ids);
        }
        Ok(found)
    }

    fn add_access(&self, counts: &HashMap<i64, (i64, i64)>) -> Result<(), StoreError> {
        let mut conn = self.store.conn();
        let tx = conn.transaction()?;
        for (row, (count, last)) in counts {
            tx.execute(
                "UPDATE items SET access_count = access_count + ?1, last_access_ms = ?2 WHERE id = ?3",
                params![count, last, row],
            )?;
        }
        tx.commit()?;
        Ok(())
    }

    fn users(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.store.conn();
        let mut stmt = conn.prepare("SELECT DISTINCT user FROM items ORDER BY user")?;
        let users = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(users)
    }

    fn export(
        &self,
        user: Option<&str>,
        kind: Option<Kind>,
        with_embeddings: bool,
    ) -> Result<Vec<Exported>, StoreError> {
        let conn = self.store.conn();
        let mut stmt = conn.prepare(&format!(
            "SELECT {ITEM_COLUMNS}, user, embedding, embedding_model FROM items
                 WHERE (?1 IS NULL OR user = ?1) AND (?2 IS NULL OR kind = ?2)
                 ORDER BY user, kind DESC, number"
        ))?;
        let rows = stmt
            .query_map(params![user, kind.map(Kind::as_str)], |r| {
                let (_, item) = item_from_row(r)?;
                let embedding = if with_embeddings {
                    r.get::<_, Option<Vec<u8>>>(13)?
                        .zip(r.get::<_, Option<String>>(14)?)
                } else {
                    None
                };
                Ok(Exported {
                    user: r.get(12)?,
                    item,
                    embedding,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    fn import(&self, rows: &[Row]) -> Result<usize, StoreError> {
        let mut conn = self.store.conn();
        let tx = conn.transaction()?;
        let mut stored = 0;
        for row in rows {
            let exists: bool = tx.query_row(
                "SELECT EXISTS (SELECT 1 FROM items WHERE user = ?1 AND kind = ?2 AND norm_hash = ?3)",
                params![row.user, row.kind.as_str(), super::normalize::norm_hash(&row.item.content)],
                |r| r.get(0),
            )?;
            if !exists {
                insert_in(&tx, row)?;
                stored += 1;
            }
        }
        tx.commit()?;
        Ok(stored)
    }
}
