//! The writer: an HTML tree as Markdown (CommonMark with GFM tables) or as plain text.
//!
//! Block elements become blocks separated by blank lines; inline content is whitespace-collapsed
//! and, in Markdown, marked up (`**`, `*`, `` ` ``, `~~`, links, images). Lists nest by indenting
//! their continuation lines, `pre` becomes a fenced code block (its language from a
//! `language-*`/`lang-*` class), data tables become pipe tables and layout tables (one column,
//! nested tables or several blocks in a cell) are read cell by cell. Links and images are
//! resolved against the page's URL; in-page anchors and `javascript:` links keep their text
//! only. Text mode writes the same blocks without any Markdown syntax: list items start with
//! `•` or their number, table cells are separated by tabs.
//!
//! The writer recurses, but never deeper than [`MAX_RENDER_DEPTH`]: below that a subtree is read
//! as plain text by an explicit-stack walk, so no page can exhaust the stack.

use dom_query::{Document, NodeRef};

/// An image's alternative text longer than this many words is left out of the Markdown.
const MAX_ALT_WORDS: usize = 8;

/// Element nesting below which subtrees are flattened to their text.
pub const MAX_RENDER_DEPTH: usize = 200;

/// Which output the writer produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Markdown,
    Text,
}

/// Renders an HTML document or fragment's body (a convenience over the tree writer).
pub fn render_html(html: &str, base: Option<&url::Url>, format: Format) -> String {
    let doc = Document::from(html);
    let body = doc.select("body");
    match body.nodes().first() {
        Some(b) => render(b, base, format),
        None => render(&doc.root(), base, format),
    }
}

/// Renders the children of `root`.
pub(crate) fn render(root: &NodeRef, base: Option<&url::Url>, format: Format) -> String {
    let w = Writer {
        base,
        md: format == Format::Markdown,
    };
    let mut out = Vec::new();
    w.blocks(root, 0, &mut out);
    out.join("\n\n")
}

/// Escapes what would make a line of text start a Markdown block (heading, list, quote).
pub(crate) fn escape_line(line: &str) -> String {
    let t = line.trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    let numbered = digits > 0 && matches!(t.as_bytes().get(digits), Some(b'.' | b')'));
    let marker = matches!(t.as_bytes().first(), Some(b'#' | b'>' | b'=' | b'|'))
        || ((t.starts_with("- ") || t.starts_with("+ ") || t.starts_with("* "))
            || t == "-"
            || t == "+");
    if numbered {
        format!("{}\\{}", &t[..digits], &t[digits..])
    } else if marker {
        format!("\\{t}")
    } else {
        t.to_string()
    }
}

fn escape_inline(word: &str, out: &mut String) {
    for c in word.chars() {
        if matches!(c, '\\' | '*' | '_' | '`' | '[' | ']' | '<' | '~') {
            out.push('\\');
        }
        out.push(c);
    }
}

const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "head", "title", "iframe", "svg", "canvas", "video",
    "audio", "object", "embed", "button", "input", "select", "textarea", "option", "map", "link",
    "meta", "dialog",
];

fn is_block(name: &str) -> bool {
    matches!(
        name,
        "address"
            | "article"
            | "aside"
            | "blockquote"
            | "body"
            | "center"
            | "dd"
            | "details"
            | "dir"
            | "div"
            | "dl"
            | "dt"
            | "fieldset"
            | "figcaption"
            | "figure"
            | "footer"
            | "form"
            | "h1"
            | "h2"
            | "h3"
            | "h4"
            | "h5"
            | "h6"
            | "header"
            | "hgroup"
            | "hr"
            | "html"
            | "li"
            | "main"
            | "menu"
            | "nav"
            | "ol"
            | "p"
            | "pre"
            | "section"
            | "summary"
            | "table"
            | "tbody"
            | "td"
            | "tfoot"
            | "th"
            | "thead"
            | "tr"
            | "ul"
            | "caption"
            | "legend"
    )
}

fn name_of(node: &NodeRef) -> String {
    node.node_name()
        .map(|n| n.to_ascii_lowercase())
        .unwrap_or_default()
}

fn children<'a>(node: &NodeRef<'a>) -> impl Iterator<Item = NodeRef<'a>> + use<'a> {
    std::iter::successors(node.first_child(), NodeRef::next_sibling)
}

/// Inline content being collected: whitespace collapsed, markup added by the writer.
#[derive(Default)]
struct Inline {
    s: String,
    space: bool,
}

impl Inline {
    fn text(&mut self, t: &str, md: bool) {
        if t.starts_with(char::is_whitespace) {
            self.space = true;
        }
        for w in t.split_whitespace() {
            self.sep();
            if md {
                escape_inline(w, &mut self.s);
            } else {
                self.s.push_str(w);
            }
            self.space = true;
        }
        if !t.ends_with(char::is_whitespace) && !t.trim().is_empty() {
            self.space = false;
        }
    }

    fn sep(&mut self) {
        if self.space && !self.s.is_empty() && !self.s.ends_with('\n') {
            self.s.push(' ');
        }
        self.space = false;
    }

    /// Appends `inner` wrapped in `open`/`close`, keeping its outer spaces outside the markup.
    fn wrap(&mut self, inner: Inline, open: &str, close: &str) {
        let lead = inner.s.starts_with(' ');
        let body = inner.s.trim();
        if lead || inner.s.is_empty() {
            self.space |= lead;
        }
        if body.is_empty() {
            self.space |= inner.space;
            return;
        }
        self.sep();
        self.s.push_str(open);
        self.s.push_str(body);
        self.s.push_str(close);
        self.space = inner.space || inner.s.ends_with(' ');
    }

    fn line_break(&mut self) {
        self.s.truncate(self.s.trim_end_matches(' ').len());
        self.s.push('\n');
        self.space = false;
    }
}

struct Writer<'a> {
    base: Option<&'a url::Url>,
    md: bool,
}

impl Writer<'_> {
    /// The children of `node` as blocks, appended to `out`.
    fn blocks(&self, node: &NodeRef, depth: usize, out: &mut Vec<String>) {
        if depth > MAX_RENDER_DEPTH {
            let t = self.flat_text(node);
            self.paragraph(Inline { s: t, space: false }, out);
            return;
        }
        let mut inline = Inline::default();
        for child in children(node) {
            if child.is_text() {
                inline.text(&child.text(), self.md);
                continue;
            }
            if !child.is_element() {
                continue;
            }
            let name = name_of(&child);
            if SKIPPED.contains(&name.as_str()) {
                continue;
            }
            if is_block(&name) || self.holds_block(&child) {
                self.paragraph(std::mem::take(&mut inline), out);
                self.block(&child, &name, depth + 1, out);
            } else {
                self.inline(&child, &name, depth + 1, &mut inline);
            }
        }
        self.paragraph(inline, out);
    }

    /// An inline element wrapping block content (`<a><div>…</div></a>`) is read as a block.
    fn holds_block(&self, node: &NodeRef) -> bool {
        children(node).any(|c| c.is_element() && is_block(&name_of(&c)))
    }

    fn paragraph(&self, inline: Inline, out: &mut Vec<String>) {
        let lines: Vec<&str> = inline
            .s
            .split('\n')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if lines.is_empty() {
            return;
        }
        if self.md {
            let lines: Vec<String> = lines.iter().map(|l| escape_line_md(l)).collect();
            out.push(lines.join("  \n"));
        } else {
            out.push(lines.join("\n"));
        }
    }

    fn block(&self, node: &NodeRef, name: &str, depth: usize, out: &mut Vec<String>) {
        match name {
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let mut inline = Inline::default();
                self.inline_children(node, depth, &mut inline);
                let text = inline.s.split_whitespace().collect::<Vec<_>>().join(" ");
                if text.is_empty() {
                    return;
                }
                if self.md {
                    let level = usize::from(name.as_bytes()[1] - b'0');
                    out.push(format!("{} {text}", "#".repeat(level)));
                } else {
                    out.push(text);
                }
            }
            "ul" | "ol" | "menu" | "dir" => self.list(node, name == "ol", depth, out),
            "li" => self.list_item(node, "- ", "• ", depth, out),
            "blockquote" => {
                let mut inner = Vec::new();
                self.blocks(node, depth, &mut inner);
                if inner.is_empty() {
                    return;
                }
                let joined = inner.join("\n\n");
                if self.md {
                    let quoted: Vec<String> = joined
                        .lines()
                        .map(|l| {
                            if l.is_empty() {
                                ">".into()
                            } else {
                                format!("> {l}")
                            }
                        })
                        .collect();
                    out.push(quoted.join("\n"));
                } else {
                    out.push(joined);
                }
            }
            "pre" => self.code_block(node, out),
            "table" => self.table(node, depth, out),
            "hr" => {
                if self.md {
                    out.push("---".into());
                }
            }
            _ => self.blocks(node, depth, out),
        }
    }

    fn list(&self, node: &NodeRef, ordered: bool, depth: usize, out: &mut Vec<String>) {
        let mut n: i64 = node
            .attr("start")
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1);
        let mut items = Vec::new();
        for child in children(node) {
            if !child.is_element() {
                if child.is_text() && !child.text().trim().is_empty() {
                    self.paragraph(
                        {
                            let mut i = Inline::default();
                            i.text(&child.text(), self.md);
                            i
                        },
                        &mut items,
                    );
                }
                continue;
            }
            let name = name_of(&child);
            if name == "li" {
                let marker = if ordered {
                    format!("{n}. ")
                } else {
                    String::new()
                };
                n += 1;
                if ordered {
                    self.list_item(&child, &marker, &marker, depth + 1, &mut items);
                } else {
                    self.list_item(&child, "- ", "• ", depth + 1, &mut items);
                }
            } else if !SKIPPED.contains(&name.as_str()) {
                // Stray content in a list (a nested list without its `li`, a `div`).
                self.block(&child, &name, depth + 1, &mut items);
            }
        }
        if !items.is_empty() {
            out.push(items.join("\n"));
        }
    }

    fn list_item(
        &self,
        node: &NodeRef,
        md_marker: &str,
        text_marker: &str,
        depth: usize,
        out: &mut Vec<String>,
    ) {
        let mut inner = Vec::new();
        self.blocks(node, depth, &mut inner);
        if inner.is_empty() {
            return;
        }
        let marker = if self.md { md_marker } else { text_marker };
        let indent = " ".repeat(marker.chars().count());
        // A nested list follows its item's text directly; other blocks keep a blank line.
        let mut body = String::new();
        for (i, b) in inner.iter().enumerate() {
            if i > 0 {
                let nested = is_list_block(b);
                body.push_str(if nested || !self.md { "\n" } else { "\n\n" });
            }
            body.push_str(b);
        }
        let mut item = String::new();
        for (i, line) in body.lines().enumerate() {
            if i > 0 {
                item.push('\n');
            }
            if i == 0 {
                item.push_str(marker);
                item.push_str(line);
            } else if !line.is_empty() {
                item.push_str(&indent);
                item.push_str(line);
            }
        }
        out.push(item);
    }

    fn code_block(&self, node: &NodeRef, out: &mut Vec<String>) {
        let raw = raw_text(node);
        let code = raw.strip_prefix('\n').unwrap_or(&raw).trim_end();
        if code.trim().is_empty() {
            return;
        }
        if !self.md {
            out.push(code.to_string());
            return;
        }
        let lang = code_language(node).unwrap_or_default();
        let mut run = 0;
        let mut longest = 0;
        for c in code.chars() {
            run = if c == '`' { run + 1 } else { 0 };
            longest = longest.max(run);
        }
        let fence = "`".repeat((longest + 1).max(3));
        out.push(format!("{fence}{lang}\n{code}\n{fence}"));
    }

    fn table(&self, node: &NodeRef, depth: usize, out: &mut Vec<String>) {
        let mut rows: Vec<Vec<Vec<String>>> = Vec::new();
        let mut caption = Vec::new();
        let mut layout = false;
        let mut row_nodes = Vec::new();
        for c in children(node) {
            match name_of(&c).as_str() {
                "thead" | "tbody" | "tfoot" => {
                    row_nodes.extend(children(&c).filter(|r| r.is_element() && name_of(r) == "tr"));
                }
                "tr" => row_nodes.push(c),
                "caption" => self.blocks(&c, depth + 1, &mut caption),
                _ => {}
            }
        }
        for tr in &row_nodes {
            let mut row = Vec::new();
            for cell in children(tr) {
                if matches!(name_of(&cell).as_str(), "td" | "th") {
                    let mut blocks = Vec::new();
                    self.blocks(&cell, depth + 2, &mut blocks);
                    layout |= blocks.len() > 1
                        || cell
                            .descendants_it()
                            .any(|d| d.is_element() && name_of(&d) == "table");
                    row.push(blocks);
                }
            }
            if !row.is_empty() {
                rows.push(row);
            }
        }
        let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
        out.extend(caption);
        if rows.is_empty() {
            return;
        }
        if layout || cols < 2 {
            out.extend(rows.into_iter().flatten().flatten());
            return;
        }
        let cell_text = |blocks: &Vec<String>| -> String {
            let s = blocks.join(" ").replace('\n', " ");
            if self.md { s.replace('|', "\\|") } else { s }
        };
        let mut lines = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let mut cells: Vec<String> = row.iter().map(cell_text).collect();
            cells.resize(cols, String::new());
            if self.md {
                lines.push(format!("| {} |", cells.join(" | ")));
                if i == 0 {
                    lines.push(format!("|{}", "---|".repeat(cols)));
                }
            } else {
                lines.push(cells.join("\t").trim_end().to_string());
            }
        }
        out.push(lines.join("\n"));
    }

    fn inline_children(&self, node: &NodeRef, depth: usize, buf: &mut Inline) {
        if depth > MAX_RENDER_DEPTH {
            let t = self.flat_text(node);
            buf.sep();
            buf.s.push_str(&t);
            return;
        }
        for child in children(node) {
            if child.is_text() {
                buf.text(&child.text(), self.md);
            } else if child.is_element() {
                let name = name_of(&child);
                if !SKIPPED.contains(&name.as_str()) {
                    self.inline(&child, &name, depth + 1, buf);
                }
            }
        }
    }

    fn inline(&self, node: &NodeRef, name: &str, depth: usize, buf: &mut Inline) {
        match name {
            "br" => buf.line_break(),
            "img" => {
                if !self.md {
                    return;
                }
                let Some(src) = node.attr("src").and_then(|s| self.url(&s)) else {
                    return;
                };
                let mut alt = Inline::default();
                let text = node.attr("alt").unwrap_or_default();
                // A long alternative text is a caption written again (the caption, when there
                // is one, is in the article already): the image is kept, the long text is not.
                if text.split_whitespace().count() <= MAX_ALT_WORDS {
                    alt.text(&text, true);
                }
                buf.sep();
                buf.s.push_str(&format!("![{}]({src})", alt.s.trim()));
                buf.space = false;
            }
            "a" => {
                let mut inner = Inline::default();
                self.inline_children(node, depth, &mut inner);
                let href = node.attr("href").and_then(|h| self.url(&h));
                match href {
                    Some(u) if self.md => buf.wrap(inner, "[", &format!("]({u})")),
                    _ => buf.wrap(inner, "", ""),
                }
            }
            "code" | "kbd" | "samp" | "tt" if self.md => {
                let text = raw_text(node)
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                if text.is_empty() {
                    return;
                }
                let ticks = if text.contains('`') { "``" } else { "`" };
                let pad = if text.starts_with('`') || text.ends_with('`') {
                    " "
                } else {
                    ""
                };
                buf.sep();
                buf.s.push_str(&format!("{ticks}{pad}{text}{pad}{ticks}"));
                buf.space = false;
            }
            _ => {
                let mut inner = Inline::default();
                self.inline_children(node, depth, &mut inner);
                let (open, close) = match name {
                    "strong" | "b" if self.md => ("**", "**"),
                    "em" | "i" | "cite" | "dfn" | "var" if self.md => ("*", "*"),
                    "del" | "s" | "strike" if self.md => ("~~", "~~"),
                    _ => ("", ""),
                };
                if open.is_empty() {
                    // Keep line breaks from `br` inside plain spans.
                    buf.space |= inner.s.starts_with(' ');
                    if !inner.s.trim().is_empty() {
                        buf.sep();
                        buf.s.push_str(inner.s.trim_matches(' '));
                        buf.space = inner.space || inner.s.ends_with(' ');
                    } else {
                        buf.space |= inner.space;
                    }
                } else {
                    buf.wrap(inner, open, close);
                }
            }
        }
    }

    /// A link or image target made absolute; `None` for in-page anchors, scripts and data.
    fn url(&self, raw: &str) -> Option<String> {
        let raw = raw.trim();
        let lower = raw.to_ascii_lowercase();
        if raw.is_empty()
            || raw.starts_with('#')
            || lower.starts_with("javascript:")
            || lower.starts_with("data:")
        {
            return None;
        }
        let u = match self.base {
            Some(b) => b.join(raw).ok()?,
            None => url::Url::parse(raw).ok()?,
        };
        let s = u.to_string();
        // Markdown link targets cannot hold spaces or unbalanced parentheses unencoded.
        Some(
            s.replace(' ', "%20")
                .replace('(', "%28")
                .replace(')', "%29"),
        )
    }

    /// The text of a subtree as one collapsed line, read without recursion.
    fn flat_text(&self, node: &NodeRef) -> String {
        let mut inline = Inline::default();
        let mut stack: Vec<NodeRef> = children(node).collect();
        stack.reverse();
        while let Some(n) = stack.pop() {
            if n.is_text() {
                inline.text(&n.text(), self.md);
            } else if n.is_element() && !SKIPPED.contains(&name_of(&n).as_str()) {
                inline.space = true;
                let first = stack.len();
                stack.extend(children(&n));
                stack[first..].reverse();
            }
        }
        inline.s
    }
}

/// Whether a rendered block is a list (starts with a list marker the writer produced).
fn is_list_block(block: &str) -> bool {
    let digits = block.bytes().take_while(u8::is_ascii_digit).count();
    block.starts_with("- ")
        || block.starts_with("• ")
        || (digits > 0 && block[digits..].starts_with(". "))
}

fn escape_line_md(line: &str) -> String {
    // A line that is itself markup the writer produced (an image or link) stays as it is.
    if line.starts_with("![") || line.starts_with('[') {
        return line.to_string();
    }
    escape_line(line)
}

/// The text of a subtree with its whitespace kept (`br` as a newline), read without recursion.
fn raw_text(node: &NodeRef) -> String {
    let mut s = String::new();
    let mut stack: Vec<NodeRef> = children(node).collect();
    stack.reverse();
    while let Some(n) = stack.pop() {
        if n.is_text() {
            s.push_str(&n.text());
        } else if n.is_element() {
            let name = name_of(&n);
            if name == "br" {
                s.push('\n');
            } else if !matches!(name.as_str(), "script" | "style") {
                let first = stack.len();
                stack.extend(children(&n));
                stack[first..].reverse();
            }
        }
    }
    s
}

/// `rust` from `class="language-rust"` (or `lang-rust`, or `data-lang="rust"`, where
/// extraction keeps it) on a `pre` or its `code`.
fn code_language(pre: &NodeRef) -> Option<String> {
    let mut nodes = vec![*pre];
    nodes.extend(children(pre).filter(|c| c.is_element() && name_of(c) == "code"));
    nodes.iter().find_map(|n| {
        if let Some(lang) = n.attr("data-lang").filter(|l| valid_language(l)) {
            return Some(lang.to_string());
        }
        language_of_class(&n.attr("class")?)
    })
}

/// The language a `class` attribute names with `language-*` or `lang-*`.
pub(super) fn language_of_class(class: &str) -> Option<String> {
    class.split_whitespace().find_map(|c| {
        let lang = c
            .strip_prefix("language-")
            .or_else(|| c.strip_prefix("lang-"))?;
        valid_language(lang).then(|| lang.to_string())
    })
}

fn valid_language(lang: &str) -> bool {
    !lang.is_empty()
        && lang.len() <= 32
        && lang
            .chars()
            .all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '-' | '+' | '#' | '.' | '_'))
}
