//! Boilerplate that Readability keeps: what pages mark as not article, link lists, widget
//! labels; and a second opinion on where the article is.
//!
//! Readability drops blocks whose class or id says they are unlikely content, but spares any
//! that also say `content`, `article`, `main` or `body` (`related-content`, `article-share`),
//! and it keeps link lists inside the article's container. These passes take those out:
//!
//! - [`marked`], on the page before scoring: elements whose class or id names page furniture
//!   (share and social bars, newsletter and subscribe boxes, promotions, bylines and author
//!   boxes, comments, breadcrumbs; related and recommended stories and tag lists when they are
//!   short or link-heavy) go, unless they hold a quarter or more of the page's text (then the
//!   name describes a wrapper, not a widget).
//! - [`link_lists`], on the chosen article: blocks of three links or more that are at least 80%
//!   link text, with short link texts (names and headlines, not sentences), holding less than
//!   a third of the article's text (related stories, tags, share links).
//! - [`repeated_lines`], on the written output: a short line that occurs three times or more
//!   is a widget's label ("HIDE CAPTION"), unless such lines are most of the text; so is a
//!   line that is a known control label ("toggle caption", "video ad feedback").
//!
//! [`paragraph_cluster`] finds the element holding the most paragraph text, which the
//! extractor uses when Readability's choice turns out to be furniture.
//!
//! No pass recurses: trees are walked with explicit stacks or iterators.

use std::collections::HashMap;

use dom_query::{Document, NodeId, NodeRef};

/// Class or id fragments that name page furniture.
const FURNITURE: &[&str] = &[
    "share",
    "sharing",
    "social",
    "newsletter",
    "subscribe",
    "signup",
    "sign-up",
    "promo",
    "advert",
    "sponsor",
    "byline",
    "author-bio",
    "author-info",
    "author-box",
    "authorbox",
    "about-author",
    "breadcrumb",
    "comment",
    "outbrain",
    "taboola",
    "dateline",
];

/// Fragments that name lists of other pages: such an element goes only when it reads like
/// one (mostly links, or short), since a "read more" wrapper may hold the rest of the article.
const LISTS: &[&str] = &[
    "related",
    "recommend",
    "read-more",
    "readmore",
    "more-stories",
    "most-popular",
    "mostpopular",
    "trending",
    "tag-list",
    "taglist",
    "post-tags",
    "article-tags",
];

/// A list-named element with less text than this, or at least [`LIST_LINK_DENSITY`] of it in
/// links, is a list of other pages.
const SHORT_LIST: usize = 500;
const LIST_LINK_DENSITY: f64 = 0.25;

/// Fragments that contain a furniture word but name content.
const NOT_FURNITURE: &[&str] = &["commentary", "subscriber", "shareholder"];

/// Elements never removed by name: the page's own skeleton.
const SKELETON: &[&str] = &["html", "body", "main", "article"];

/// The share of the page's text at or above which a furniture-named element is kept.
const MAX_FURNITURE_SHARE: f64 = 0.25;

/// Blocks at least this much link text are link lists ...
const LINK_DENSITY: f64 = 0.8;
/// ... when they hold this many links or more ...
const MIN_LINKS: usize = 3;
/// ... of at most this many characters each on average (names and headlines, not sentences) ...
const MAX_LINK_CHARS: usize = 60;
/// ... and less than this share of the article's text.
const MAX_LINK_LIST_SHARE: f64 = 0.3;

/// Whole lines that are the label of a page control (a caption toggle, a gallery button, a
/// share link), not prose; compared in lower case without trailing symbols.
const WIDGET_LINES: &[&str] = &[
    "advertisement",
    "back to slide",
    "close",
    "continue reading",
    "hide caption",
    "image",
    "listen to this article",
    "loading",
    "photo",
    "play",
    "play video",
    "print",
    "read more",
    "see all",
    "see gallery",
    "share",
    "share this",
    "share this article",
    "show caption",
    "skip advertisement",
    "toggle caption",
    "tweet",
    "video",
    "video ad feedback",
];

/// Lines of at most this many words that occur [`MIN_REPEATS`] times are dropped.
const MAX_REPEATED_WORDS: usize = 12;
const MIN_REPEATS: usize = 3;

/// Elements whose text a reader never sees.
const UNSEEN: &[&str] = &["script", "style", "noscript", "template", "svg", "head"];

/// Removes what a reader never sees (see [`is_unseen`]) from `doc`.
pub(super) fn unseen(doc: &Document) {
    let mut doomed = Vec::new();
    let mut stack = vec![doc.root()];
    while let Some(node) = stack.pop() {
        for child in node.element_children() {
            if is_unseen(&child) {
                doomed.push(child);
            } else {
                stack.push(child);
            }
        }
    }
    for node in doomed {
        node.remove_from_parent();
    }
}

/// Whether a reader never sees `node`: a script or style, or hidden by an attribute.
fn is_unseen(node: &NodeRef) -> bool {
    node.node_name()
        .is_some_and(|n| UNSEEN.contains(&n.as_ref()))
        || node.has_attr("hidden")
        || node
            .attr("aria-hidden")
            .is_some_and(|v| v.as_ref() == "true")
        || node.attr("style").is_some_and(|v| {
            let v = v.to_ascii_lowercase().replace(' ', "");
            v.contains("display:none") || v.contains("visibility:hidden")
        })
}

/// Text size of every element under `root`: (characters, characters inside links, links).
fn sizes(root: &NodeRef) -> HashMap<NodeId, (usize, usize, usize)> {
    let mut order = Vec::new();
    let mut stack = vec![*root];
    while let Some(node) = stack.pop() {
        order.push(node);
        let mut child = node.first_child();
        while let Some(c) = child {
            let unseen = c.is_element() && is_unseen(&c);
            if (c.is_element() && !unseen) || c.is_text() {
                stack.push(c);
            }
            child = c.next_sibling();
        }
    }
    let mut size: HashMap<NodeId, (usize, usize, usize)> = HashMap::new();
    // Children come after their parent in `order`: walking it backwards sees them first.
    for node in order.iter().rev() {
        let own = if node.is_text() {
            let t = node.text();
            (t.chars().filter(|c| !c.is_whitespace()).count(), 0, 0)
        } else {
            let mut sum = (0, 0, 0);
            let mut child = node.first_child();
            while let Some(c) = child {
                if let Some(s) = size.get(&c.id) {
                    sum = (sum.0 + s.0, sum.1 + s.1, sum.2 + s.2);
                }
                child = c.next_sibling();
            }
            if node.node_name().as_deref() == Some("a") {
                sum = (sum.0, sum.0, sum.2 + 1);
            }
            sum
        };
        size.insert(node.id, own);
    }
    size
}

/// Whether the class or id of `node` names furniture, given its (text, link text) sizes.
fn is_furniture(node: &NodeRef, (text, linked): (usize, usize)) -> bool {
    let mut names = String::new();
    for attr in ["class", "id"] {
        if let Some(v) = node.attr(attr) {
            names.push(' ');
            names.push_str(&v.to_ascii_lowercase());
        }
    }
    let named = |words: &[&str]| {
        names.split_whitespace().any(|token| {
            words.iter().any(|f| token.contains(f))
                && !NOT_FURNITURE.iter().any(|n| token.contains(n))
        })
    };
    named(FURNITURE)
        || (named(LISTS) && (text < SHORT_LIST || linked as f64 >= text as f64 * LIST_LINK_DENSITY))
}

/// Removes the elements of `doc` whose class or id names page furniture (see the module docs).
pub(super) fn marked(doc: &Document) {
    let body = doc.select("body");
    let Some(root) = body.nodes().first().copied() else {
        return;
    };
    let size = sizes(&root);
    let total = size.get(&root.id).map_or(0, |s| s.0);
    let cap = (total as f64 * MAX_FURNITURE_SHARE) as usize;
    let mut doomed = Vec::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let name = node.node_name();
        let skeleton = name.as_deref().is_some_and(|n| SKELETON.contains(&n));
        let (text, linked, _) = size.get(&node.id).copied().unwrap_or_default();
        if !skeleton && text < cap && is_furniture(&node, (text, linked)) {
            doomed.push(node);
            continue;
        }
        stack.extend(node.element_children());
    }
    for node in doomed {
        node.remove_from_parent();
    }
}

/// The element that holds the most paragraph text (a paragraph's text counts fully for its
/// parent and half for its grandparent; paragraphs that are mostly links or sit in list items
/// do not count), as its
/// reading-text size and HTML: a second opinion beside Readability's choice.
pub(super) fn paragraph_cluster(doc: &Document) -> Option<(usize, String)> {
    let body = doc.select("body");
    let root = body.nodes().first().copied()?;
    let size = sizes(&root);
    let mut score: HashMap<NodeId, (usize, NodeRef)> = HashMap::new();
    for p in doc.select("body p").nodes() {
        let Some(&(text, linked, _)) = size.get(&p.id) else {
            continue; // inside an element nobody sees
        };
        // Paragraphs inside list items are teasers or slides, not an article's body.
        if text == 0 || linked * 2 > text || p.ancestors_it(None).any(|a| a.is("li")) {
            continue;
        }
        let parent = p.parent();
        let grandparent = parent.as_ref().and_then(NodeRef::parent);
        for (node, points) in [(parent, text), (grandparent, text / 2)] {
            if let Some(node) = node.filter(NodeRef::is_element) {
                score.entry(node.id).or_insert((0, node)).0 += points;
            }
        }
    }
    let (_, node) = score.into_values().max_by_key(|(points, _)| *points)?;
    let (text, linked, _) = size.get(&node.id).copied().unwrap_or_default();
    Some((text - linked, node.html().to_string()))
}

/// Removes the link lists of an article (see the module docs).
pub(super) fn link_lists(root: &NodeRef) {
    let size = sizes(root);
    let total = size.get(&root.id).map_or(0, |s| s.0);
    let cap = (total as f64 * MAX_LINK_LIST_SHARE) as usize;
    let mut doomed = Vec::new();
    let mut stack = root.element_children();
    while let Some(node) = stack.pop() {
        let (text, linked, links) = size.get(&node.id).copied().unwrap_or_default();
        let list_like = matches!(
            node.node_name().as_deref(),
            Some("ul" | "ol" | "dl" | "div" | "section" | "table" | "p" | "nav")
        );
        if list_like
            && text > 0
            && text < cap
            && links >= MIN_LINKS
            && linked as f64 >= text as f64 * LINK_DENSITY
            && linked / links <= MAX_LINK_CHARS
        {
            doomed.push(node);
            continue;
        }
        stack.extend(node.element_children());
    }
    for node in doomed {
        node.remove_from_parent();
    }
}

/// `out` without the short lines that occur [`MIN_REPEATS`] times or more and the lines that are
/// a control's label ([`WIDGET_LINES`]), outside code blocks and tables; lines are compared in
/// lower case, without Markdown's markers, list bullets and trailing symbols.
pub(super) fn repeated_lines(out: &str) -> String {
    fn widget(key: &str) -> bool {
        let bare = key.trim_end_matches(|c: char| !c.is_alphanumeric());
        WIDGET_LINES.contains(&bare)
    }
    fn key(line: &str) -> Option<String> {
        let t = line
            .trim()
            .trim_start_matches(['#', '>', '*', '-', '•', ' ']);
        let t = t.trim_matches(['*', '_', ' ']);
        let words = t.split_whitespace().count();
        (words > 0 && words <= MAX_REPEATED_WORDS && t.chars().any(char::is_alphabetic))
            .then(|| t.to_lowercase())
    }
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut fenced = false;
    let mut keys = Vec::new();
    for line in out.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            keys.push(None);
            continue;
        }
        let k = if fenced || line.trim_start().starts_with('|') {
            None
        } else {
            key(line)
        };
        if let Some(k) = &k {
            *counts.entry(k.clone()).or_default() += 1;
        }
        keys.push(k);
    }
    // Repetition marks a widget only when it is a small part of the text: a page that is one
    // line said over and over is that line.
    let lines = keys.iter().filter(|k| k.is_some()).count();
    let repeated: usize = counts.values().filter(|&&n| n >= MIN_REPEATS).sum();
    let repeats_are_widgets = repeated * 2 <= lines;
    let drop = |k: &String| (repeats_are_widgets && counts[k] >= MIN_REPEATS) || widget(k);
    if !counts.keys().any(drop) {
        return out.to_string();
    }
    // Dropping lines can leave runs of blank lines: blocks stay one blank line apart (code
    // blocks are left as they are).
    let mut joined = String::with_capacity(out.len());
    let mut blank = 0;
    let mut fenced = false;
    for (line, k) in out.lines().zip(keys) {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if k.as_ref().is_some_and(drop) {
            continue;
        }
        if !fenced && line.trim().is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        joined.push_str(line);
        joined.push('\n');
    }
    joined.trim_matches('\n').to_string()
}
