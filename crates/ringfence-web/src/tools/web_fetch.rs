//! `web_fetch` (seed 003): retrieve the content of a URL, in pages.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{FetchRequest, Fetched, FetchedBody, Fetcher, Format, PageCache};
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, AsyncTool, BoxFuture, Content, ToolContext, ToolOutput};

/// Characters returned by default.
pub const DEFAULT_MAX_LENGTH: usize = 20_000;
/// The most characters one call may ask for.
pub const MAX_MAX_LENGTH: usize = 1_000_000;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WebFetchArgs {
    /// The http or https URL to read.
    pub url: String,
    /// The most characters of content to return (default 20000, at most 1000000).
    #[schemars(range(min = 1, max = 1_000_000))]
    pub max_length: Option<usize>,
    /// Where to start, in characters of the content (default 0): to read on, pass the
    /// start_index the previous result named.
    pub start_index: Option<usize>,
    /// markdown (default: the page's main content as Markdown), text (the same without
    /// Markdown) or html (the document as served).
    #[schemars(extend("enum" = ["markdown", "text", "html"]))]
    pub format: Option<String>,
}

pub struct WebFetch {
    pub(crate) fetcher: Arc<dyn Fetcher>,
    pub(crate) cache: Arc<PageCache>,
}

impl AsyncTool for WebFetch {
    type Args = WebFetchArgs;
    const NAME: &'static str = "web_fetch";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Retrieve the content of a web page or document at an http(s) URL. HTML pages come back as their main content (the article, without navigation, ads or footers) in Markdown with the title, headings, lists, tables, code and links; format \"text\" gives plain text and \"html\" the document as served. PDFs come back as text with page markers, JSON pretty-printed, images as images. Long content is returned in pages of max_length characters (default 20000): the result ends with the start_index for the next call. Private, loopback and cloud-metadata addresses are refused. JavaScript-rendered content is not run. Returns: the title and the content, with the final URL when a redirect led elsewhere and the type when it is not an HTML page (the structured result always has URL, title and type).";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Fetch web page",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: true,
    };

    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: WebFetchArgs,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        Box::pin(async move {
            let format = match args.format.as_deref().map(str::trim) {
                None | Some("") | Some("markdown") => Format::Markdown,
                Some("text") => Format::Text,
                Some("html") => Format::Html,
                Some(other) => {
                    return Err(ToolError::invalid(format!(
                        "format `{other}` is not one of markdown, text, html"
                    )));
                }
            };
            let max_length = args.max_length.unwrap_or(DEFAULT_MAX_LENGTH);
            if max_length == 0 || max_length > MAX_MAX_LENGTH {
                return Err(ToolError::invalid(format!(
                    "max_length must be between 1 and {MAX_MAX_LENGTH}, got {max_length}"
                )));
            }
            let start = args.start_index.unwrap_or(0);
            let url = args.url.trim().to_owned();
            if url.is_empty() {
                return Err(ToolError::invalid(
                    "url is empty: give an http or https URL",
                ));
            }
            let user = ctx.session.user().to_owned();
            let doc = match self.cache.get(&user, &url, format) {
                Some(doc) => doc,
                None => {
                    let request = FetchRequest {
                        url: url.clone(),
                        format,
                        user: user.clone(),
                    };
                    let doc = tokio::select! {
                        doc = self.fetcher.fetch(request) => Arc::new(doc?),
                        _ = ctx.cancel.cancelled() => return Err(ToolError::cancelled()),
                    };
                    self.cache.put(&user, &url, format, doc.clone());
                    doc
                }
            };
            render(&doc, &url, start, max_length)
        })
    }
}

/// The result for one page of `doc`: a header, the content from `start` (in characters), and a
/// notice naming the next `start_index` when more remains.
///
/// The header says only what the model does not know already, since every word of it is read
/// with the page: the title; the URL when it is not the one asked for (a redirect); the type
/// when it is not an HTML page; the notices. The structured result has all of them.
fn render(doc: &Fetched, asked: &str, start: usize, max_length: usize) -> ToolResult<ToolOutput> {
    let mut head = String::new();
    if let Some(title) = &doc.title {
        head.push_str(&format!("Title: {title}\n"));
    }
    let same = url::Url::parse(asked).is_ok_and(|u| u.as_str() == doc.url);
    if !same {
        head.push_str(&format!("URL: {}\n", doc.url));
    }
    if doc.content_type != "text/html" {
        head.push_str(&format!("Content-Type: {}\n", doc.content_type));
    }
    for notice in &doc.notices {
        head.push_str(&format!("Note: {notice}\n"));
    }
    let text = match &doc.body {
        FetchedBody::Image { mime, data } => {
            head.push_str(&format!("Image: {mime}, {} bytes\n", data.len()));
            return Ok(ToolOutput::blocks(vec![
                Content::Text(head),
                Content::Image {
                    mime: mime.clone(),
                    data: data.clone(),
                },
            ])
            .with_structured(json!({
                "url": doc.url,
                "title": doc.title,
                "content_type": doc.content_type,
                "bytes": data.len(),
            })));
        }
        FetchedBody::Text(text) => text,
    };
    let total = text.chars().count();
    if start > 0 && start >= total {
        return Err(ToolError::invalid(format!(
            "start_index {start} is past the end: the content has {total} characters; use a start_index below {total}"
        )));
    }
    let (page, next) = page(text, start, max_length);
    let shown = page.chars().count();
    let mut out = head;
    if !out.is_empty() {
        out.push('\n');
    }
    out.push_str(page);
    if let Some(next) = next {
        out.push_str(&format!(
            "\n\n[Content truncated: characters {start}-{} of {total} shown. Call web_fetch again with the same url and start_index={next} to read on.]",
            start + shown
        ));
    }
    if text.is_empty() {
        out.push_str("(the document has no text content)");
    }
    Ok(ToolOutput::text(out).with_structured(json!({
        "url": doc.url,
        "title": doc.title,
        "content_type": doc.content_type,
        "total_length": total,
        "start_index": start,
        "returned_length": shown,
        "next_start_index": next,
        "notices": doc.notices,
    })))
}

/// At most `max` characters of `text` from character `start`, ending at a line break (or
/// else a space) in the last fifth of the window when there is one, so a page does not stop
/// mid-word; and the start of the next page, if any.
fn page(text: &str, start: usize, max: usize) -> (&str, Option<usize>) {
    let from = text
        .char_indices()
        .nth(start)
        .map_or(text.len(), |(i, _)| i);
    let rest = &text[from..];
    let Some((hard_end, _)) = rest.char_indices().nth(max) else {
        return (rest, None);
    };
    let window = &rest[..hard_end];
    let floor = window
        .char_indices()
        .nth(max - max / 5)
        .map_or(window.len(), |(i, _)| i);
    let end = window[floor..]
        .rfind('\n')
        .or_else(|| window[floor..].rfind(' '))
        .map_or(hard_end, |i| floor + i + 1);
    let page = &rest[..end];
    (page, Some(start + page.chars().count()))
}

#[cfg(test)]
mod tests {
    use super::{Fetched, FetchedBody, page, render};
    use ringfence_core::Content;

    fn fetched(url: &str, content_type: &str) -> Fetched {
        Fetched {
            url: url.into(),
            content_type: content_type.into(),
            title: Some("Plan approved".into()),
            body: FetchedBody::Text("The committee met.".into()),
            notices: vec![],
        }
    }

    fn text(doc: &Fetched, asked: &str) -> String {
        let out = render(doc, asked, 0, 1000).unwrap();
        match &out.content[0] {
            Content::Text(t) => t.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_header_says_what_the_model_does_not_know() {
        let page = fetched("https://example.com/a", "text/html");
        assert_eq!(
            text(&page, "https://example.com/a"),
            "Title: Plan approved\n\nThe committee met."
        );
        // A redirect: the final URL is news. Another type: so is the type.
        assert_eq!(
            text(&page, "http://example.com/old"),
            "Title: Plan approved\nURL: https://example.com/a\n\nThe committee met."
        );
        let pdf = fetched("https://example.com/a.pdf", "application/pdf");
        assert!(
            text(&pdf, "https://example.com/a.pdf").contains("\nContent-Type: application/pdf\n\n")
        );
        // The structured result has all three either way.
        let s = render(&page, "https://example.com/a", 0, 1000)
            .unwrap()
            .structured
            .unwrap();
        assert_eq!(s["url"], "https://example.com/a");
        assert_eq!(s["content_type"], "text/html");
    }

    #[test]
    fn pages_cover_the_text_exactly_once() {
        let text = "ab cd\nef gh ij\nkl mn op qr st uv wx yz é ü ß 漢字 ".repeat(7);
        for max in [1, 3, 7, 20, 64] {
            let mut start = 0;
            let mut joined = String::new();
            loop {
                let (p, next) = page(&text, start, max);
                assert!(p.chars().count() <= max, "{max}");
                assert!(!p.is_empty());
                joined.push_str(p);
                match next {
                    Some(n) => start = n,
                    None => break,
                }
            }
            assert_eq!(joined, text, "max {max}");
        }
    }

    #[test]
    fn a_page_prefers_to_end_at_a_line_break() {
        let (p, next) = page("aaaaaaaa\nbbbbbbbbbbbb", 0, 10);
        assert_eq!(p, "aaaaaaaa\n");
        assert_eq!(next, Some(9));
        // A break earlier than the last fifth of the window is not used.
        let (p, _) = page("a\nbbbbbbbbbbbb", 0, 10);
        assert_eq!(p, "a\nbbbbbbbb");
    }
}
