//! The memory database's SQLite tables: the migrations, the column list an [`Item`] is read
//! from, numbered inserts, and the byte format of a stored vector (PostgreSQL's too).

use rusqlite::params;

use crate::{Item, Kind, NewItem};

use super::normalize::norm_hash;
use ringfence_store::Schema;

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

/// The columns [`item_from_row`] reads, in its order.
pub(crate) const ITEM_COLUMNS: &str = "id, number, kind, content, category, memory_type, tags, pinned, \
    source, created_ms, updated_ms, access_count";

/// A row selected as [`ITEM_COLUMNS`]: its row id and the item.
pub(crate) fn item_from_row(r: &rusqlite::Row) -> rusqlite::Result<(i64, Item)> {
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

/// A vector as stored in the `embedding` column: little-endian f32s.
pub(crate) fn vector_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The vector of an `embedding` column.
pub(crate) fn blob_vector(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// One row to insert.
pub(crate) struct Row<'a> {
    pub(crate) user: &'a str,
    pub(crate) kind: Kind,
    pub(crate) item: &'a NewItem,
    pub(crate) vector: Option<(&'a [f32], &'a str)>,
    pub(crate) created_ms: i64,
    pub(crate) updated_ms: i64,
    pub(crate) access_count: i64,
}

impl Row<'_> {
    /// The item this row becomes, numbered `number`.
    pub(crate) fn item(&self, number: i64) -> Item {
        let item = self.item;
        Item {
            id: number,
            kind: self.kind,
            content: item.content.clone(),
            category: item.category.clone(),
            memory_type: item.memory_type.clone(),
            tags: item.tags.clone(),
            pinned: item.pinned,
            source: item.source.clone(),
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            access_count: self.access_count,
        }
    }
}

/// Inserts `row` in `tx`, numbered next for its user and kind.
pub(crate) fn insert_in(tx: &rusqlite::Transaction, row: &Row) -> rusqlite::Result<(i64, Item)> {
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
    Ok((id, row.item(number)))
}
