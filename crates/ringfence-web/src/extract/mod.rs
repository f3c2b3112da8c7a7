//! Main-content extraction: an HTML page's article as Markdown and as text.
//!
//! Four steps:
//!
//! 1. The page's nesting is bounded ([`depth`]: the HTML parser's scope checks are quadratic in
//!    it), then it is parsed once (html5ever, into `dom_query`'s arena tree).
//! 2. Page furniture the page names as such (share bars, related stories, newsletter boxes,
//!    bylines, comments: [`prune::marked`]) is removed, and the page's largest paragraph
//!    cluster is noted as a second opinion ([`prune::paragraph_cluster`]).
//! 3. The article is chosen by `dom_smoothie`, a port of Mozilla's Readability.js (the scoring
//!    behind Firefox's Reader View): paragraphs score their ancestors by text length and
//!    commas, link-heavy and `nav`/`footer`/`comment`/`cookie`-classed blocks lose, and the best
//!    candidate with its related siblings is kept and cleaned. It was picked over
//!    `rs-trafilatura`, `readability` 0.3 and the Python peers by measurement (BENCHMARKS.md,
//!    "Web page extraction quality").
//! 4. The article, less its link lists ([`prune::link_lists`]), is written as Markdown and as
//!    text by this crate's own writer ([`render`]), which resolves links against the page's
//!    URL; short lines said three times or more and control labels go
//!    ([`prune::repeated_lines`]). When little is left and the paragraph cluster holds more
//!    than twice as much, the cluster is written instead: Readability settled on furniture.
//!
//! A page whose tree is deeper than [`MAX_SCORED_DEPTH`] skips step 3 (Readability's
//! algorithms recurse), and a page where no article is found falls back to the readable text of
//! the whole body with its boilerplate elements (`nav`, `header`, `footer`, `aside`, forms,
//! scripts, hidden elements) dropped, so a page never comes back empty when it has text.
//! The headline is the page's one `h1` when it has exactly one, else the `<title>` without the
//! site's name.

mod depth;
mod prune;
mod render;

use dom_query::{Document, NodeRef};

pub use render::{Format, render_html};

/// Trees deeper than this are not given to the Readability scorer; they fall back to the body.
pub const MAX_SCORED_DEPTH: usize = 400;

/// An article with less text than this (not counting white space) is not trusted; the page
/// falls back to its body.
pub const MIN_ARTICLE_CHARS: usize = 140;

/// Readability's article loses to the page's largest paragraph cluster when, pruned, it has
/// less than [`TRUSTED_ARTICLE_CHARS`] of text and the cluster holds more than this many times
/// as much.
const CLUSTER_RATIO: usize = 2;
const TRUSTED_ARTICLE_CHARS: usize = 1000;

/// What extraction found in a page.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extracted {
    pub title: Option<String>,
    /// The main content as Markdown (title, headings, lists, tables, code blocks, links).
    pub markdown: String,
    /// The same content as plain text.
    pub text: String,
}

/// Extracts the main content of `html`, served from `base` (links are made absolute).
pub fn extract(html: &str, base: Option<&url::Url>) -> Extracted {
    let html = depth::limit_nesting(html);
    let html = html.as_ref();
    let doc = Document::from(html);
    keep_code_languages(&doc);
    let headings = h1_texts(&doc);
    let (title, content, cluster) = if max_depth(&doc.root()) <= MAX_SCORED_DEPTH {
        // The scorer rewrites the tree it is given: a failed attempt needs a fresh parse.
        match readable(doc, base) {
            (Some((title, article)), cluster) => (title, Document::from(article.as_str()), cluster),
            (None, cluster) => {
                let (title, body) = whole_body(Document::from(html));
                (title, body, cluster)
            }
        }
    } else {
        let (title, body) = whole_body(doc);
        (title, body, None)
    };
    let (mut markdown, mut text) = write(&content, base);
    // Readability sometimes settles on a block of furniture (a menu, a footer) when the page's
    // paragraphs sit in a container it scored down: when what is left of its article is short
    // and the page's largest paragraph cluster holds more than twice that, the cluster is the
    // article.
    let left = visible_chars(&text);
    if let Some((len, html)) = cluster
        && len >= MIN_ARTICLE_CHARS
        && left < TRUSTED_ARTICLE_CHARS
        && left * CLUSTER_RATIO < len
    {
        let cluster = Document::from(html.as_str());
        prune::unseen(&cluster);
        (markdown, text) = write(&cluster, base);
    }
    let title = title.map(|t| shorter_title(t, &headings));
    if let Some(t) = &title {
        markdown = with_title(&markdown, &format!("# {}", render::escape_line(t)), t);
        text = with_title(&text, t, t);
    }
    Extracted {
        title,
        markdown,
        text,
    }
}

/// The article as Markdown and as text, less its link lists and repeated short lines.
fn write(content: &Document, base: Option<&url::Url>) -> (String, String) {
    let body = content
        .select("body")
        .nodes()
        .first()
        .cloned()
        .unwrap_or_else(|| content.root());
    prune::link_lists(&body);
    let markdown = prune::repeated_lines(&render::render(&body, base, Format::Markdown));
    let text = prune::repeated_lines(&render::render(&body, base, Format::Text));
    (markdown, text)
}

/// Characters other than white space.
fn visible_chars(text: &str) -> usize {
    text.chars().filter(|c| !c.is_whitespace()).count()
}

/// A paragraph cluster's size and HTML (see [`prune::paragraph_cluster`]).
type Cluster = Option<(usize, String)>;

/// Readability's article (its title and cleaned HTML, or `None` when it finds none), and the
/// page's largest paragraph cluster as a second opinion.
fn readable(doc: Document, base: Option<&url::Url>) -> (Option<(Option<String>, String)>, Cluster) {
    prune::marked(&doc);
    let cluster = prune::paragraph_cluster(&doc);
    let Some(a) = dom_smoothie::Readability::with_document(doc, base.map(url::Url::as_str), None)
        .ok()
        .and_then(|mut r| r.parse().ok())
    else {
        return (None, cluster);
    };
    // Readability's own threshold for a page worth reading: below it the "article" is usually
    // the page's furniture, and the whole-body fallback (which drops that furniture) reads better.
    if a.text_content.trim().chars().count() < MIN_ARTICLE_CHARS {
        return (None, cluster);
    }
    let title = Some(collapse(&a.title)).filter(|t| !t.is_empty());
    (Some((title, a.content.to_string())), cluster)
}

/// Readability drops `class` attributes, and with them a code block's `language-*`: the
/// language is copied to `data-lang` first, which it keeps.
fn keep_code_languages(doc: &Document) {
    for node in doc.select("pre[class], code[class]").nodes() {
        if let Some(lang) = render::language_of_class(&node.attr("class").unwrap_or_default()) {
            node.set_attr("data-lang", &lang);
        }
    }
}

/// The texts of the page's `h1` elements (the first few).
fn h1_texts(doc: &Document) -> Vec<String> {
    let s = doc.select("h1");
    s.nodes()
        .iter()
        .take(8)
        .map(|n| collapse(&n.text()))
        .filter(|t| !t.is_empty())
        .collect()
}

/// The article's headline: the page's one `h1` when it has exactly one that reads like a
/// headline (the `<title>` often adds the site's name or says something else), else the page
/// title without the site's name (`Story | Site` becomes `Story` when a `h1` says just `Story`).
fn shorter_title(title: String, headings: &[String]) -> String {
    if let [only] = headings {
        let words = only.split_whitespace().count();
        if (2..=MAX_HEADLINE_WORDS).contains(&words) {
            return only.clone();
        }
    }
    headings
        .iter()
        .find(|h| {
            h.len() < title.len() && (title.starts_with(h.as_str()) || title.ends_with(h.as_str()))
        })
        .cloned()
        .unwrap_or(title)
}

/// A `h1` longer than this is not taken for the headline.
const MAX_HEADLINE_WORDS: usize = 40;

/// The fallback: the whole body without its boilerplate elements.
fn whole_body(doc: Document) -> (Option<String>, Document) {
    let title = page_title(&doc);
    strip_boilerplate(&doc);
    prune::marked(&doc);
    (title, doc)
}

/// The page's `<title>`, else its first `<h1>`.
fn page_title(doc: &Document) -> Option<String> {
    ["title", "h1"].iter().find_map(|sel| {
        let s = doc.select(sel);
        let node = s.nodes().first()?;
        Some(collapse(&node.text())).filter(|t| !t.is_empty())
    })
}

/// Removes what is never the main content, for the whole-body fallback: page furniture, and
/// what a reader never sees (scripts, styles, hidden elements).
fn strip_boilerplate(doc: &Document) {
    doc.select(
        "nav, header, footer, aside, form, iframe, [role=navigation], [role=banner], \
         [role=contentinfo]",
    )
    .remove();
    prune::unseen(doc);
}

/// `body` headed by `heading`, unless it already starts with the title.
fn with_title(body: &str, heading: &str, title: &str) -> String {
    let first = body.lines().next().unwrap_or("");
    let first = first.trim_start_matches('#').trim();
    if first.eq_ignore_ascii_case(title.trim()) {
        return body.to_string();
    }
    if body.is_empty() {
        heading.to_string()
    } else {
        format!("{heading}\n\n{body}")
    }
}

/// Whitespace runs collapsed to one space, ends trimmed.
fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The deepest element nesting under `root`, walked without recursion.
fn max_depth(root: &NodeRef) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(*root, 0usize)];
    while let Some((node, d)) = stack.pop() {
        deepest = deepest.max(d);
        let mut child = node.first_child();
        while let Some(c) = child {
            if c.is_element() {
                stack.push((c, d + 1));
            }
            child = c.next_sibling();
        }
    }
    deepest
}

#[cfg(test)]
mod tests;
