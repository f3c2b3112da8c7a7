//! Main-content extraction: an HTML page's article as Markdown and as text.
//!
//! PLACEHOLDER while issue 14 is built: the whole body's text, tags stripped. Replaced by the
//! measured extractor before the issue lands.

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
    let _ = base;
    let mut text = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    Extracted {
        title: None,
        markdown: text.clone(),
        text,
    }
}
