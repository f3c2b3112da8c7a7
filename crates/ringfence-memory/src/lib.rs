//! The memory family (seed 003): truths — stable core facts about the user — and memories —
//! contextual facts with types, tags and categories. Each is stored per user, searched by
//! meaning, updated and deleted.
//!
//! The tools validate and format; the storage and ranking live behind [`MemoryBackend`],
//! implemented by [`store`] (the search engine over `memory.db` or PostgreSQL's tables, with
//! an embedder for meaning). [`MemoryPlug`] builds the family from its `[memory]` settings.

pub mod cli;
mod delete_memory;
mod delete_truth;
mod page;
mod pinned;
mod plug;
mod search_memory;
mod search_truths;
pub mod settings;
pub mod store;
mod store_memory;
mod store_truth;
mod update_memory;
mod update_truth;

use std::sync::Arc;

use serde_json::{Value, json};

use ringfence_core::args::{limit, optional_whole_number, whole_number};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::time::format_iso_ms as iso8601;
use ringfence_core::tool::{Blocking, Tool, ToolContext, ToolOutput};

pub use delete_memory::DeleteMemory;
pub use delete_truth::DeleteTruth;
pub use pinned::{PINNED_PROMPT, PINNED_URI, PinnedTruths};
pub use plug::{MemoryPlug, open};
pub use search_memory::SearchMemory;
pub use search_truths::SearchTruths;
pub use store_memory::StoreMemory;
pub use store_truth::StoreTruth;
pub use update_memory::UpdateMemory;
pub use update_truth::UpdateTruth;

/// The tool family name (`tools.disable = ["memory"]` turns all eight off).
pub const FAMILY: &str = "memory";

/// The categories seed 003 documents: the whole set for truths; for memories, where the seed
/// ends the list with "etc.", suggestions (any short category is accepted, see
/// [`open_category`]).
pub const CATEGORIES: [&str; 7] = [
    "personal",
    "professional",
    "hobbies",
    "health",
    "relationships",
    "preferences",
    "goals",
];

/// The memory types seed 003 documents.
pub const MEMORY_TYPES: [&str; 8] = [
    "fact",
    "preference",
    "goal",
    "event",
    "skill",
    "relationship",
    "habit",
    "context",
];

/// The longest truth or memory accepted, in characters.
pub const MAX_CONTENT_CHARS: usize = 4000;
/// Tags per memory, and characters per tag.
pub const MAX_TAGS: usize = 20;
pub const MAX_TAG_CHARS: usize = 64;
/// What a row created through a tool call records as its source.
pub const SOURCE_CONVERSATION: &str = "conversation";

/// Truths or memories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Truth,
    Memory,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Truth => "truth",
            Kind::Memory => "memory",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        match s {
            "truth" | "truths" => Some(Kind::Truth),
            "memory" | "memories" => Some(Kind::Memory),
            _ => None,
        }
    }

    fn plural(self) -> &'static str {
        match self {
            Kind::Truth => "truths",
            Kind::Memory => "memories",
        }
    }

    fn id_param(self) -> &'static str {
        match self {
            Kind::Truth => "truthId",
            Kind::Memory => "memoryId",
        }
    }

    fn search_tool(self) -> &'static str {
        match self {
            Kind::Truth => "search_truths",
            Kind::Memory => "search_memory",
        }
    }

    fn update_tool(self) -> &'static str {
        match self {
            Kind::Truth => "update_truth",
            Kind::Memory => "update_memory",
        }
    }
}

/// A stored truth or memory.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    /// The number the user's tools see (`truthId`/`memoryId`): counted per user and kind.
    pub id: i64,
    pub kind: Kind,
    pub content: String,
    pub category: Option<String>,
    /// Memories only.
    pub memory_type: Option<String>,
    pub tags: Vec<String>,
    /// Truths only.
    pub pinned: bool,
    /// How it came to be stored: `conversation` (a tool call), `import`, …
    pub source: String,
    /// Milliseconds since the Unix epoch.
    pub created_ms: i64,
    pub updated_ms: i64,
    /// How many searches returned it.
    pub access_count: i64,
}

/// What to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewItem {
    pub content: String,
    pub category: Option<String>,
    pub memory_type: Option<String>,
    pub tags: Vec<String>,
    pub pinned: bool,
    pub source: String,
}

/// Why a store or update did not create a new row: an existing one means the same.
#[derive(Debug, Clone, PartialEq)]
pub struct Duplicate {
    pub existing: Item,
    /// Cosine similarity of the meanings (1.0 for the same words).
    pub similarity: f32,
    /// The same text apart from case, spacing and final punctuation.
    pub exact: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub enum StoreOutcome {
    Stored(Item),
    Duplicate(Duplicate),
}

#[derive(Debug, Clone, PartialEq)]
pub enum UpdateOutcome {
    Updated {
        before: Item,
        after: Item,
    },
    NotFound,
    /// The new content means the same as another row; nothing changed.
    Duplicate(Duplicate),
}

/// A search.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub text: String,
    pub limit: usize,
    pub memory_type: Option<String>,
    pub category: Option<String>,
    /// A result must carry at least one of these (compared without case).
    pub tags: Vec<String>,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub item: Item,
    /// The final ranking score (relevance adjusted for recency and use).
    pub score: f32,
    /// Cosine similarity of meanings, when vectors were compared.
    pub similarity: Option<f32>,
    /// Whether the words matched (full-text search).
    pub keyword_match: bool,
}

/// How a search ran.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchMode {
    /// Meaning (vectors) and words (full text) fused.
    Hybrid,
    /// Words only; the reason says why and how to get search by meaning.
    Lexical { reason: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    pub hits: Vec<Hit>,
    pub mode: SearchMode,
}

/// A failure of the storage behind the tools (the cause kept as its source).
pub use ringfence_core::error::BackendError as MemoryError;

/// A storage failure as the model sees it.
fn storage_failed(e: MemoryError) -> ToolError {
    ToolError::new(ToolErrorKind::Io, format!("memory storage failed: {e}"))
}

/// Where truths and memories live. Every call names the user; an implementation must never
/// let one user's call see or change another user's rows.
pub trait MemoryBackend: Send + Sync + std::fmt::Debug {
    /// Stores `item` unless an existing row of the same kind means the same. Durable when
    /// it returns.
    fn store(&self, user: &str, kind: Kind, item: NewItem) -> Result<StoreOutcome, MemoryError>;
    fn search(&self, user: &str, kind: Kind, query: &Query) -> Result<SearchOutcome, MemoryError>;
    /// Replaces the content (and its embedding) of row `id`.
    fn update(
        &self,
        user: &str,
        kind: Kind,
        id: i64,
        content: &str,
    ) -> Result<UpdateOutcome, MemoryError>;
    /// Removes row `id`; `None` if there is none.
    fn delete(&self, user: &str, kind: Kind, id: i64) -> Result<Option<Item>, MemoryError>;
    /// The user's pinned truths, oldest first.
    fn pinned(&self, user: &str) -> Result<Vec<Item>, MemoryError>;
}

/// The memory family in the catalogue: the eight tools, in seed 003's order.
pub const INFO: FamilyInfo = FamilyInfo {
    name: FAMILY,
    summary: "truths and memories about the user, stored per user and found by meaning",
    tools: &[
        "store_truth",
        "search_truths",
        "update_truth",
        "delete_truth",
        "store_memory",
        "search_memory",
        "update_memory",
        "delete_memory",
    ],
    presets: &[ringfence_core::PresetPart {
        name: ringfence_core::family::ASSISTANT,
        summary: ringfence_core::family::ASSISTANT_SUMMARY,
        tools: ringfence_core::family::EVERY_TOOL,
    }],
};

/// What the memory family is built from.
#[derive(Debug, Clone)]
pub struct MemoryServices {
    /// Where truths and memories live.
    pub backend: Arc<dyn MemoryBackend>,
    /// Append the user's pinned truths to the instructions at `initialize`.
    pub pinned_in_instructions: bool,
}

/// Builds the memory family: the eight tools over `services.backend`, and the pinned truths
/// as a resource, a prompt and (when configured) instructions.
pub fn family(services: MemoryServices) -> Family {
    let m = services.backend;
    let tools: Vec<Arc<dyn Tool>> = vec![
        Blocking::arc(StoreTruth { memory: m.clone() }),
        Blocking::arc(SearchTruths { memory: m.clone() }),
        Blocking::arc(UpdateTruth { memory: m.clone() }),
        Blocking::arc(DeleteTruth { memory: m.clone() }),
        Blocking::arc(StoreMemory { memory: m.clone() }),
        Blocking::arc(SearchMemory { memory: m.clone() }),
        Blocking::arc(UpdateMemory { memory: m.clone() }),
        Blocking::arc(DeleteMemory { memory: m.clone() }),
    ];
    Family::new(&INFO, tools).with_resources(Arc::new(PinnedTruths::new(
        m,
        services.pinned_in_instructions,
    )))
}

// --- shared by the tools -----------------------------------------------------------------

/// Trimmed content, refused when empty or too long.
fn content(param: &str, text: &str) -> ToolResult<String> {
    let t = text.trim();
    if t.is_empty() {
        return Err(ToolError::invalid(format!(
            "{param} is empty: give a complete, self-contained statement"
        )));
    }
    let n = t.chars().count();
    if n > MAX_CONTENT_CHARS {
        return Err(ToolError::invalid(format!(
            "{param} has {n} characters; the limit is {MAX_CONTENT_CHARS}. Store one fact per call"
        )));
    }
    Ok(t.to_owned())
}

/// A value from a documented list (any case), or an error listing the valid ones.
fn one_of(param: &str, value: Option<&str>, valid: &[&str]) -> ToolResult<Option<String>> {
    let Some(v) = value else { return Ok(None) };
    let lower = v.trim().to_lowercase();
    if valid.contains(&lower.as_str()) {
        Ok(Some(lower))
    } else {
        Err(ToolError::invalid(format!(
            "{param} {v:?} is not valid; use one of: {}",
            valid.join(", ")
        )))
    }
}

/// The longest memory category accepted, in characters.
pub const MAX_CATEGORY_CHARS: usize = 40;

/// A memory's category: an open set (seed 003 lists "personal, professional, hobbies,
/// health, etc."), normalised — trimmed, lower-cased, inner whitespace one space — and
/// capped at [`MAX_CATEGORY_CHARS`]; an empty one is none.
pub fn open_category(value: Option<&str>) -> ToolResult<Option<String>> {
    let Some(v) = value else { return Ok(None) };
    let normal = v
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    if normal.is_empty() {
        return Ok(None);
    }
    if normal.chars().any(char::is_control) {
        return Err(ToolError::invalid(format!(
            "category {v:?} contains control characters; use a short word such as {}",
            CATEGORIES.join(", ")
        )));
    }
    if normal.chars().count() > MAX_CATEGORY_CHARS {
        return Err(ToolError::invalid(format!(
            "category {v:?} is longer than {MAX_CATEGORY_CHARS} characters; use a short word such as {}",
            CATEGORIES.join(", ")
        )));
    }
    Ok(Some(normal))
}

/// Tags trimmed, lower-cased and de-duplicated; empty or oversized ones refused.
fn tags(values: Option<Vec<String>>) -> ToolResult<Vec<String>> {
    let values = values.unwrap_or_default();
    if values.len() > MAX_TAGS {
        return Err(ToolError::invalid(format!(
            "tags has {} entries; at most {MAX_TAGS} are allowed",
            values.len()
        )));
    }
    let mut out: Vec<String> = Vec::new();
    for t in values {
        let tag = t.trim().to_lowercase();
        if tag.is_empty() {
            return Err(ToolError::invalid("tags contains an empty tag"));
        }
        if tag.chars().count() > MAX_TAG_CHARS {
            return Err(ToolError::invalid(format!(
                "tag {t:?} is longer than {MAX_TAG_CHARS} characters"
            )));
        }
        if !out.contains(&tag) {
            out.push(tag);
        }
    }
    Ok(out)
}

fn describe_item(item: &Item) -> String {
    let mut parts = Vec::new();
    if let Some(t) = &item.memory_type {
        parts.push(format!("type: {t}"));
    }
    if let Some(c) = &item.category {
        parts.push(format!("category: {c}"));
    }
    if !item.tags.is_empty() {
        parts.push(format!("tags: {}", item.tags.join(", ")));
    }
    if item.kind == Kind::Truth {
        parts.push(format!(
            "pinned: {}",
            if item.pinned { "yes" } else { "no" }
        ));
    }
    parts.push(format!("source: {}", item.source));
    parts.push(format!("updated: {}", iso8601(item.updated_ms)));
    parts.join(" · ")
}

fn item_json(item: &Item) -> Value {
    let mut v = json!({
        "id": item.id,
        "content": item.content,
        "category": item.category,
        "source": item.source,
        "created": iso8601(item.created_ms),
        "updated": iso8601(item.updated_ms),
    });
    match item.kind {
        Kind::Truth => v["isPinned"] = json!(item.pinned),
        Kind::Memory => {
            v["memoryType"] = json!(item.memory_type);
            v["tags"] = json!(item.tags);
        }
    }
    v
}

fn quote(s: &str) -> String {
    const MAX: usize = 120;
    if s.chars().count() <= MAX {
        format!("\"{s}\"")
    } else {
        format!("\"{}…\"", s.chars().take(MAX).collect::<String>())
    }
}

fn duplicate_output(kind: Kind, dup: &Duplicate, verb: &str) -> ToolOutput {
    let how = if dup.exact {
        "the same text".to_owned()
    } else {
        format!("the same meaning, similarity {:.2}", dup.similarity)
    };
    let text = format!(
        "Not {verb}: this is already stored as {} #{} ({how}): {}\nTo change that {}, call {} with {}: {}.",
        kind.as_str(),
        dup.existing.id,
        quote(&dup.existing.content),
        kind.as_str(),
        kind.update_tool(),
        kind.id_param(),
        dup.existing.id
    );
    ToolOutput::text(text).with_structured(json!({
        "stored": false,
        "duplicateOf": dup.existing.id,
        "exact": dup.exact,
        "similarity": dup.similarity,
        "existing": item_json(&dup.existing),
    }))
}

fn stored_output(item: &Item) -> ToolOutput {
    let text = match item.kind {
        Kind::Truth => format!(
            "Stored truth #{} ({}{}): {}",
            item.id,
            if item.pinned { "pinned" } else { "not pinned" },
            item.category
                .as_deref()
                .map(|c| format!(", category: {c}"))
                .unwrap_or_default(),
            quote(&item.content)
        ),
        Kind::Memory => format!(
            "Stored memory #{}{}: {}",
            item.id,
            {
                let d = describe_item(item);
                let meta: Vec<&str> = d
                    .split(" · ")
                    .filter(|p| !p.starts_with("source") && !p.starts_with("updated"))
                    .collect();
                if meta.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", meta.join(", "))
                }
            },
            quote(&item.content)
        ),
    };
    let mut structured = item_json(item);
    structured["stored"] = json!(true);
    ToolOutput::text(text).with_structured(structured)
}

fn not_found(kind: Kind, id: i64) -> ToolError {
    ToolError::new(
        ToolErrorKind::NotFound,
        format!(
            "{} #{id} not found: no {} of yours has that id (it may have been deleted). Call {} to find the right id",
            kind.as_str(),
            kind.as_str(),
            kind.search_tool()
        ),
    )
}

fn store(
    backend: &dyn MemoryBackend,
    ctx: &ToolContext,
    kind: Kind,
    item: NewItem,
) -> ToolResult<ToolOutput> {
    let outcome = backend
        .store(ctx.session.user(), kind, item)
        .map_err(storage_failed)?;
    Ok(match outcome {
        StoreOutcome::Stored(item) => stored_output(&item),
        StoreOutcome::Duplicate(dup) => duplicate_output(kind, &dup, "stored"),
    })
}

fn update(
    backend: &dyn MemoryBackend,
    ctx: &ToolContext,
    kind: Kind,
    id: i64,
    new_content: &str,
) -> ToolResult<ToolOutput> {
    let new_content = content("updatedContent", new_content)?;
    match backend
        .update(ctx.session.user(), kind, id, &new_content)
        .map_err(storage_failed)?
    {
        UpdateOutcome::NotFound => Err(not_found(kind, id)),
        UpdateOutcome::Duplicate(dup) => Ok(duplicate_output(kind, &dup, "updated")),
        UpdateOutcome::Updated { before, after } => {
            let text = format!(
                "Updated {} #{id}.\nWas: {}\nNow: {}",
                kind.as_str(),
                quote(&before.content),
                quote(&after.content)
            );
            let mut structured = item_json(&after);
            structured["changed"] = json!(true);
            structured["previousContent"] = json!(before.content);
            Ok(ToolOutput::text(text).with_structured(structured))
        }
    }
}

fn delete(
    backend: &dyn MemoryBackend,
    ctx: &ToolContext,
    kind: Kind,
    id: i64,
) -> ToolResult<ToolOutput> {
    match backend
        .delete(ctx.session.user(), kind, id)
        .map_err(storage_failed)?
    {
        None => Err(not_found(kind, id)),
        Some(item) => {
            let text = format!(
                "Deleted {} #{id} permanently: {}",
                kind.as_str(),
                quote(&item.content)
            );
            let mut structured = item_json(&item);
            structured["deleted"] = json!(true);
            Ok(ToolOutput::text(text).with_structured(structured))
        }
    }
}

fn search(
    backend: &dyn MemoryBackend,
    ctx: &ToolContext,
    kind: Kind,
    query: Query,
) -> ToolResult<ToolOutput> {
    if query.text.trim().is_empty() {
        return Err(ToolError::invalid(
            "searchQuery is empty: give a question or topic to search for",
        ));
    }
    let outcome = backend
        .search(ctx.session.user(), kind, &query)
        .map_err(storage_failed)?;
    let mode_note = match &outcome.mode {
        SearchMode::Hybrid => None,
        SearchMode::Lexical { reason } => Some(format!(
            "Note: matched by words only, not by meaning — {reason}. Facts worded differently may be missed."
        )),
    };
    let mut text = if outcome.hits.is_empty() {
        format!("No {} match {}.", kind.plural(), quote(query.text.trim()))
    } else {
        let mut s = format!(
            "Found {} {} matching {}:",
            outcome.hits.len(),
            if outcome.hits.len() == 1 {
                kind.as_str()
            } else {
                kind.plural()
            },
            quote(query.text.trim())
        );
        for hit in &outcome.hits {
            s.push_str(&format!(
                "\n\n#{} {}\n   {} · relevance: {:.2}",
                hit.item.id,
                hit.item.content,
                describe_item(&hit.item),
                hit.score
            ));
        }
        s
    };
    if let Some(note) = &mode_note {
        text.push_str("\n\n");
        text.push_str(note);
    }
    let results: Vec<Value> = outcome
        .hits
        .iter()
        .map(|h| {
            let mut v = item_json(&h.item);
            v["relevance"] = json!((h.score * 1000.0).round() / 1000.0);
            v["similarity"] = json!(h.similarity.map(|s| (s * 1000.0).round() / 1000.0));
            v["keywordMatch"] = json!(h.keyword_match);
            v
        })
        .collect();
    Ok(ToolOutput::text(text).with_structured(json!({
        "results": results,
        "mode": match outcome.mode { SearchMode::Hybrid => "hybrid", SearchMode::Lexical { .. } => "lexical" },
        "notice": mode_note,
    })))
}
