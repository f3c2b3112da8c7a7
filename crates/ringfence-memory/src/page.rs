//! The family's section of the settings page, `/settings/memories`: a person's truths and
//! memories, searched, filtered and paged; each edited (its meaning computed again, as
//! `update_memory` does), pinned or unpinned (truths), deleted after a confirmation; all of
//! them deleted after a typed confirmation; exported as JSON.

use std::sync::Arc;

use ringfence_core::page::{
    Markup, Method, PAGE_ROWS, PageRequest, Reply, Section, encode, html, pager, when,
};

use crate::plug::LazyMemory;
use crate::store::MemoryDb;
use crate::{Item, Kind, MemoryBackend, UpdateOutcome};

/// What a person types to delete everything.
const CONFIRM_ALL: &str = "DELETE";

pub(crate) struct MemoryPage {
    pub(crate) memory: Arc<LazyMemory>,
}

impl Section for MemoryPage {
    fn name(&self) -> &'static str {
        "memories"
    }

    fn title(&self) -> &'static str {
        "Memories"
    }

    fn handle(&self, req: &PageRequest<'_>) -> Reply {
        let db = match self.memory.get() {
            Ok(db) => db,
            Err(e) => return Reply::Failed(format!("the memory database: {e}")),
        };
        let path = req.path();
        match (req.method, path.as_slice()) {
            (Method::Get, []) => list(db, req),
            (Method::Get, ["export.json"]) => export(db, req),
            (Method::Get, ["clear"]) => clear_form(req, None),
            (Method::Post, ["clear"]) => clear(db, req),
            (method, [kind, id, action]) => {
                let (Some(kind), Ok(id)) = (Kind::parse(kind), id.parse::<i64>()) else {
                    return Reply::NotFound;
                };
                let item = match db.get(req.user, kind, id) {
                    Ok(Some(item)) => item,
                    Ok(None) => return Reply::NotFound,
                    Err(e) => return Reply::Failed(format!("the memory database: {e}")),
                };
                match (method, *action) {
                    (Method::Get, "edit") => edit_form(req, &item, None),
                    (Method::Post, "edit") => edit(db, req, &item),
                    (Method::Get, "delete") => delete_form(req, &item),
                    (Method::Post, "delete") => delete(db, req, &item),
                    (Method::Post, "pin") if kind == Kind::Truth => pin(db, req, &item, true),
                    (Method::Post, "unpin") if kind == Kind::Truth => pin(db, req, &item, false),
                    _ => Reply::NotFound,
                }
            }
            _ => Reply::NotFound,
        }
    }
}

fn failed(e: impl std::fmt::Display) -> Reply {
    Reply::Failed(format!("the memory database: {e}"))
}

/// Whether `item` matches the words of `q` (each, anywhere in its text, category or tags;
/// letter case ignored).
fn matches(item: &Item, q: &str) -> bool {
    let hay = format!(
        "{} {} {} {}",
        item.content,
        item.category.as_deref().unwrap_or_default(),
        item.memory_type.as_deref().unwrap_or_default(),
        item.tags.join(" ")
    )
    .to_lowercase();
    q.to_lowercase().split_whitespace().all(|w| hay.contains(w))
}

fn kind_label(kind: Kind) -> &'static str {
    match kind {
        Kind::Truth => "Truth",
        Kind::Memory => "Memory",
    }
}

fn list(db: &MemoryDb, req: &PageRequest<'_>) -> Reply {
    let (q, kind, category) = (req.param("q"), req.param("kind"), req.param("category"));
    let all = match db.items(Some(req.user), Kind::parse(kind)) {
        Ok(rows) => rows,
        Err(e) => return failed(e),
    };
    let mut categories: Vec<&str> = all
        .iter()
        .filter_map(|(_, i)| i.category.as_deref())
        .collect();
    categories.sort_unstable();
    categories.dedup();
    // Newest first: what an assistant kept lately is what a person looks for.
    let mut rows: Vec<&Item> = all
        .iter()
        .map(|(_, i)| i)
        .filter(|i| category.is_empty() || i.category.as_deref() == Some(category))
        .filter(|i| matches(i, q))
        .collect();
    rows.sort_by(|a, b| b.updated_ms.cmp(&a.updated_ms).then(b.id.cmp(&a.id)));
    let total = rows.len();
    let page = req
        .number("page", 0)
        .min(total.saturating_sub(1) / PAGE_ROWS);
    let shown = &rows[(page * PAGE_ROWS).min(total)..((page + 1) * PAGE_ROWS).min(total)];
    let keep = [("q", q), ("kind", kind), ("category", category)];
    let base = req.base;
    let body = html! {
        p { "What your assistant keeps about you: truths (facts it always trusts) and memories (what it noted along the way). Change or remove anything here; the assistant sees the change at once." }
        form.filters method="get" action=(base) role="search" {
            div.field {
                label for="q" { "Search memories" }
                input #q type="search" name="q" value=(q);
            }
            div.field {
                label for="kind" { "Kind" }
                select #kind name="kind" {
                    option value="" selected[kind.is_empty()] { "All" }
                    option value="truth" selected[kind == "truth"] { "Truths" }
                    option value="memory" selected[kind == "memory"] { "Memories" }
                }
            }
            div.field {
                label for="category" { "Category" }
                select #category name="category" {
                    option value="" selected[category.is_empty()] { "Any" }
                    @for c in &categories {
                        option value=(c) selected[category == *c] { (c) }
                    }
                }
            }
            button type="submit" { "Search" }
        }
        p.count { (total) " of " (all.len()) " shown" }
        @if shown.is_empty() {
            p.empty { @if all.is_empty() { "Nothing is kept about you yet." } @else { "Nothing matches." } }
        } @else {
            ul.items {
                @for item in shown {
                    (row(req, item))
                }
            }
        }
        (pager(base, &keep, page, total))
        section.bulk aria-label="All of them" {
            a href=(format!("{base}/export.json")) download { "Export as JSON" }
            " "
            a.danger href=(format!("{base}/clear")) { "Delete all" }
        }
    };
    Reply::page("Memories", body)
}

fn row(req: &PageRequest<'_>, item: &Item) -> Markup {
    let at = format!("{}/{}/{}", req.base, item.kind.as_str(), item.id);
    let what = format!("{} #{}", kind_label(item.kind), item.id);
    html! {
        li.item id=(format!("{}-{}", item.kind.as_str(), item.id)) {
            p.content { (item.content) }
            p.meta {
                span.kind { (what) }
                @if let Some(c) = &item.category { " · " span.category { (c) } }
                @if let Some(t) = &item.memory_type { " · " span.type { (t) } }
                @if !item.tags.is_empty() { " · " span.tags { (item.tags.join(", ")) } }
                @if item.pinned { " · " strong.pinned { "pinned" } }
                " · " span.when { (when(item.updated_ms)) }
            }
            div.actions {
                a href=(format!("{at}/edit")) aria-label=(format!("Edit {what}")) { "Edit" }
                @if item.kind == Kind::Truth {
                    form method="post" action=(format!("{at}/{}", if item.pinned { "unpin" } else { "pin" })) {
                        (req.csrf())
                        button type="submit" aria-label=(format!("{} {what}", if item.pinned { "Unpin" } else { "Pin" })) {
                            @if item.pinned { "Unpin" } @else { "Pin" }
                        }
                    }
                }
                a.danger href=(format!("{at}/delete")) aria-label=(format!("Delete {what}")) { "Delete" }
            }
        }
    }
}

fn edit_form(req: &PageRequest<'_>, item: &Item, problem: Option<&str>) -> Reply {
    let what = format!("{} #{}", kind_label(item.kind), item.id);
    let text = if req.form.contains_key("text") {
        req.field("text")
    } else {
        &item.content
    };
    let body = html! {
        @if let Some(p) = problem { p.problem role="alert" { (p) } }
        form method="post" action=(format!("{}/{}/{}/edit", req.base, item.kind.as_str(), item.id)) {
            (req.csrf())
            label for="text" { "Text" }
            textarea #text name="text" rows="4" required { (text) }
            p.hint { "Saving computes its meaning again, so searches find it by what it now says." }
            button type="submit" { "Save" }
            " "
            a href=(req.base) { "Back" }
        }
    };
    Reply::page(format!("Edit {what}"), body)
}

fn edit(db: &MemoryDb, req: &PageRequest<'_>, item: &Item) -> Reply {
    let text = req.field("text").trim();
    if text.is_empty() {
        return edit_form(
            req,
            item,
            Some("The text is empty: write what it should say, or delete it instead."),
        );
    }
    match MemoryBackend::update(db, req.user, item.kind, item.id, text) {
        Ok(UpdateOutcome::Updated { .. }) => Reply::redirect(
            req.base,
            format!("{} #{} saved.", kind_label(item.kind), item.id),
        ),
        Ok(UpdateOutcome::NotFound) => Reply::NotFound,
        Ok(UpdateOutcome::Duplicate(d)) => edit_form(
            req,
            item,
            Some(&format!(
                "{} #{} already says this ({}); nothing changed.",
                kind_label(d.existing.kind),
                d.existing.id,
                d.existing.content
            )),
        ),
        Err(e) => Reply::Invalid(e.to_string()),
    }
}

fn delete_form(req: &PageRequest<'_>, item: &Item) -> Reply {
    let what = format!("{} #{}", kind_label(item.kind), item.id);
    let body = html! {
        p { "Delete this for good? The assistant will no longer know it." }
        blockquote { (item.content) }
        form method="post" action=(format!("{}/{}/{}/delete", req.base, item.kind.as_str(), item.id)) {
            (req.csrf())
            button.danger type="submit" { "Delete" }
            " "
            a href=(req.base) { "Keep it" }
        }
    };
    Reply::page(format!("Delete {what}?"), body)
}

fn delete(db: &MemoryDb, req: &PageRequest<'_>, item: &Item) -> Reply {
    match MemoryBackend::delete(db, req.user, item.kind, item.id) {
        Ok(Some(_)) => Reply::redirect(
            req.base,
            format!("{} #{} deleted.", kind_label(item.kind), item.id),
        ),
        Ok(None) => Reply::NotFound,
        Err(e) => failed(e),
    }
}

fn pin(db: &MemoryDb, req: &PageRequest<'_>, item: &Item, pinned: bool) -> Reply {
    match db.set_pinned(req.user, item.id, pinned) {
        Ok(Some(_)) => Reply::redirect(
            req.base,
            format!(
                "Truth #{} {}.",
                item.id,
                if pinned {
                    "pinned: always in view"
                } else {
                    "unpinned"
                }
            ),
        ),
        Ok(None) => Reply::NotFound,
        Err(e) => failed(e),
    }
}

fn clear_form(req: &PageRequest<'_>, problem: Option<&str>) -> Reply {
    let body = html! {
        @if let Some(p) = problem { p.problem role="alert" { (p) } }
        p { "This deletes every truth and memory kept about you, for good. Export them first to keep a copy." }
        form method="post" action=(format!("{}/clear", req.base)) {
            (req.csrf())
            label for="confirm" { "Type " code { (CONFIRM_ALL) } " to confirm" }
            input #confirm name="confirm" autocomplete="off" aria-label=(format!("Type {CONFIRM_ALL} to confirm")) required;
            button.danger type="submit" { "Delete all" }
            " "
            a href=(req.base) { "Back" }
        }
    };
    Reply::page("Delete all truths and memories?", body)
}

fn clear(db: &MemoryDb, req: &PageRequest<'_>) -> Reply {
    if req.field("confirm").trim() != CONFIRM_ALL {
        return clear_form(
            req,
            Some(&format!(
                "Nothing was deleted: type {CONFIRM_ALL} (in capitals) to confirm."
            )),
        );
    }
    match db.clear(req.user, None) {
        Ok(n) => Reply::redirect(req.base, format!("Deleted {n} truths and memories.")),
        Err(e) => failed(e),
    }
}

fn export(db: &MemoryDb, req: &PageRequest<'_>) -> Reply {
    let rows = match db.export(Some(req.user), None, false) {
        Ok(rows) => rows,
        Err(e) => return failed(e),
    };
    match serde_json::to_vec_pretty(&rows) {
        Ok(body) => Reply::Download {
            file_name: format!("ringfence-memories-{}.json", encode(req.user)),
            content_type: "application/json",
            body,
        },
        Err(e) => Reply::Failed(e.to_string()),
    }
}
