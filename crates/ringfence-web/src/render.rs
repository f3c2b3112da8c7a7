//! A fetched body rendered for the model, by its type: an HTML page's main content (or the
//! page as served), a PDF's text with page markers, JSON pretty-printed, text as is, an
//! image as image content; anything else is refused, naming its type.

use crate::tools::{Fetched, FetchedBody, Format, WebError, WebErrorKind};
use url::Url;

use crate::{charset, extract};

/// What was fetched, to be rendered.
#[derive(Debug)]
pub struct Input<'a> {
    pub url: Url,
    /// The Content-Type header as served.
    pub content_type: Option<&'a str>,
    pub body: Vec<u8>,
    /// The body was cut at the download cap.
    pub truncated: bool,
    pub format: Format,
    pub max_image_bytes: usize,
    pub notices: Vec<String>,
}

/// The kinds of document web_fetch renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    Json,
    Text,
    Pdf,
    Image,
    Binary,
}

/// Renders off the async runtime (extraction of a large page takes a while).
pub async fn render(input: Input<'_>) -> Result<Fetched, WebError> {
    let content_type = input.content_type.map(str::to_owned);
    let owned = OwnedInput {
        url: input.url,
        content_type,
        body: input.body,
        truncated: input.truncated,
        format: input.format,
        max_image_bytes: input.max_image_bytes,
        notices: input.notices,
    };
    tokio::task::spawn_blocking(move || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| render_now(owned))).unwrap_or_else(
            |_| {
                Err(WebError::new(
                    WebErrorKind::Upstream,
                    "the document could not be rendered (the renderer failed on it); try format \"html\" for the document as served",
                ))
            },
        )
    })
    .await
    .unwrap_or_else(|e| {
        Err(WebError::new(
            WebErrorKind::Upstream,
            format!("the document could not be rendered: {e}"),
        ))
    })
}

#[derive(Debug)]
struct OwnedInput {
    url: Url,
    content_type: Option<String>,
    body: Vec<u8>,
    truncated: bool,
    format: Format,
    max_image_bytes: usize,
    notices: Vec<String>,
}

fn render_now(input: OwnedInput) -> Result<Fetched, WebError> {
    let (essence, charset_param) = split_content_type(input.content_type.as_deref());
    let (kind, mime) = classify(&essence, &input.body);
    let mut notices = input.notices;
    let url = input.url;
    let done = |title: Option<String>, body: FetchedBody, notices: Vec<String>| Fetched {
        url: url.to_string(),
        content_type: mime.clone(),
        title,
        body,
        notices,
    };
    match kind {
        Kind::Image => {
            if input.truncated {
                return Err(WebError::new(
                    WebErrorKind::Unsupported,
                    format!(
                        "{url} is an image ({mime}) larger than the download cap; it cannot be returned in part"
                    ),
                ));
            }
            if input.body.len() > input.max_image_bytes {
                return Err(WebError::new(
                    WebErrorKind::Unsupported,
                    format!(
                        "{url} is an image ({mime}) of {} bytes; images are returned up to {} bytes",
                        input.body.len(),
                        input.max_image_bytes
                    ),
                ));
            }
            Ok(done(
                None,
                FetchedBody::Image {
                    mime: mime.clone(),
                    data: input.body,
                },
                notices,
            ))
        }
        Kind::Pdf => {
            if input.truncated {
                return Err(WebError::new(
                    WebErrorKind::Unsupported,
                    format!(
                        "{url} is a PDF larger than the download cap; a PDF cannot be read in part"
                    ),
                ));
            }
            let text = pdf_text(&input.body)?;
            if text.trim().is_empty() {
                notices.push("the PDF has no extractable text (it may be scanned images)".into());
            }
            Ok(done(None, FetchedBody::Text(text), notices))
        }
        Kind::Binary => Err(WebError::new(
            WebErrorKind::Unsupported,
            format!(
                "{url} is {mime}, a binary type web_fetch cannot render; it reads HTML, text, JSON, PDF and images (png, jpeg, gif, webp)"
            ),
        )),
        Kind::Html | Kind::Json | Kind::Text => {
            let decoded =
                charset::decode(&input.body, charset_param.as_deref(), kind == Kind::Html);
            notices.extend(decoded.notice);
            let text = decoded.text;
            match kind {
                Kind::Json => {
                    let pretty = serde_json::from_str::<serde_json::Value>(&text)
                        .ok()
                        .and_then(|v| serde_json::to_string_pretty(&v).ok());
                    if pretty.is_none() && !input.truncated {
                        notices.push("the JSON is not valid; shown as served".into());
                    }
                    Ok(done(
                        None,
                        FetchedBody::Text(pretty.unwrap_or(text)),
                        notices,
                    ))
                }
                Kind::Html if input.format != Format::Html => {
                    let page = extract::extract(&text, Some(&url));
                    let body = match input.format {
                        Format::Text => page.text,
                        _ => page.markdown,
                    };
                    if body.trim().is_empty() {
                        notices.push("the page has no readable content in its HTML (it may be built by JavaScript, which web_fetch does not run); format \"html\" shows the document as served".into());
                    }
                    let title = page.title.or_else(|| html_title(&text));
                    let body = without_title_line(body, title.as_deref());
                    Ok(done(title, FetchedBody::Text(body), notices))
                }
                Kind::Html => {
                    let title = html_title(&text);
                    Ok(done(title, FetchedBody::Text(text), notices))
                }
                _ => Ok(done(None, FetchedBody::Text(text), notices)),
            }
        }
    }
}

/// `body` less its first line when that line is the title, which web_fetch's header gives
/// already (`Title:`): the model reads it once.
fn without_title_line(body: String, title: Option<&str>) -> String {
    let Some(title) = title.map(str::trim).filter(|t| !t.is_empty()) else {
        return body;
    };
    let (first, rest) = body.split_once('\n').unwrap_or((&body, ""));
    if first.trim_start_matches('#').trim() == title {
        rest.trim_start_matches('\n').to_string()
    } else {
        body
    }
}

/// The media type's essence (lower case, no parameters) and its charset parameter.
fn split_content_type(value: Option<&str>) -> (String, Option<String>) {
    let Some(value) = value else {
        return (String::new(), None);
    };
    let mut parts = value.split(';');
    let essence = parts.next().unwrap_or("").trim().to_ascii_lowercase();
    let charset = parts.find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim()
            .eq_ignore_ascii_case("charset")
            .then(|| v.trim().trim_matches(['"', '\'']).to_owned())
    });
    (essence, charset)
}

/// What a body is: by its declared type, or — when none or a generic one is declared — by
/// its first bytes.
fn classify(essence: &str, body: &[u8]) -> (Kind, String) {
    let declared = match essence {
        ""
        | "application/octet-stream"
        | "binary/octet-stream"
        | "application/unknown"
        | "unknown/unknown" => None,
        e => Some(e),
    };
    let Some(e) = declared else {
        let (kind, mime) = sniff(body);
        return (kind, mime.to_owned());
    };
    let kind = match e {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "application/json" | "text/json" => Kind::Json,
        e if e.ends_with("+json") => Kind::Json,
        "application/pdf" | "application/x-pdf" => Kind::Pdf,
        "image/png" | "image/jpeg" | "image/jpg" | "image/gif" | "image/webp" => Kind::Image,
        e if e.starts_with("text/") => Kind::Text,
        e if e.ends_with("+xml") || e.ends_with("/xml") => Kind::Text,
        "application/javascript"
        | "application/ecmascript"
        | "application/x-javascript"
        | "application/yaml"
        | "application/x-yaml"
        | "application/toml"
        | "application/x-sh"
        | "application/sql"
        | "application/graphql" => Kind::Text,
        _ => Kind::Binary,
    };
    let mime = if e == "image/jpg" { "image/jpeg" } else { e };
    (kind, mime.to_owned())
}

fn sniff(body: &[u8]) -> (Kind, &'static str) {
    let start = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(body.len());
    let head = &body[start..body.len().min(start + 512)];
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    if body.starts_with(b"%PDF-") {
        (Kind::Pdf, "application/pdf")
    } else if body.starts_with(b"\x89PNG\r\n\x1a\n") {
        (Kind::Image, "image/png")
    } else if body.starts_with(&[0xff, 0xd8, 0xff]) {
        (Kind::Image, "image/jpeg")
    } else if body.starts_with(b"GIF87a") || body.starts_with(b"GIF89a") {
        (Kind::Image, "image/gif")
    } else if body.len() >= 12 && &body[..4] == b"RIFF" && &body[8..12] == b"WEBP" {
        (Kind::Image, "image/webp")
    } else if ["<!doctype html", "<html", "<head", "<body", "<!--"]
        .iter()
        .any(|p| lower.starts_with(p.as_bytes()))
    {
        (Kind::Html, "text/html")
    } else if body[..body.len().min(8192)].contains(&0) {
        (Kind::Binary, "application/octet-stream")
    } else if matches!(head.first(), Some(b'{' | b'['))
        && serde_json::from_slice::<serde_json::Value>(body).is_ok()
    {
        (Kind::Json, "application/json")
    } else if std::str::from_utf8(&body[..body.len().min(8192)]).is_ok()
        || body.len() > 8192 && std::str::from_utf8(&body[..8188]).is_ok()
    {
        (Kind::Text, "text/plain")
    } else {
        (Kind::Binary, "application/octet-stream")
    }
}

/// The text of a document's `<title>`.
fn html_title(html: &str) -> Option<String> {
    let mut end = html.len().min(64 << 10);
    while !html.is_char_boundary(end) {
        end -= 1;
    }
    let lower = html[..end].to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = html[start..end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!title.is_empty()).then_some(title)
}

/// The most a PDF's streams may expand to before it is parsed.
#[cfg(feature = "pdf")]
const PDF_EXPANSION_BUDGET: usize = 200_000_000;

/// A PDF's text, each page under a `--- Page N of M ---` marker.
#[cfg(feature = "pdf")]
fn pdf_text(bytes: &[u8]) -> Result<String, WebError> {
    if crate::pdf_budget::expanded_size(bytes, PDF_EXPANSION_BUDGET).is_none() {
        return Err(WebError::new(
            WebErrorKind::Unsupported,
            format!(
                "the PDF's compressed content expands to more than {} MB; it is not read (a PDF this dense is almost always a decompression bomb)",
                PDF_EXPANSION_BUDGET / 1_000_000
            ),
        ));
    }
    let pages = pdf_extract::extract_text_from_mem_by_pages(bytes).map_err(|e| {
        WebError::new(
            WebErrorKind::Unsupported,
            format!("the PDF could not be read ({e}); it may be encrypted or damaged"),
        )
    })?;
    let total = pages.len();
    let mut out = String::new();
    for (i, page) in pages.iter().enumerate() {
        if i > 0 {
            out.push_str("\n\n");
        }
        out.push_str(&format!("--- Page {} of {total} ---\n\n", i + 1));
        out.push_str(page.trim());
    }
    Ok(out)
}

#[cfg(not(feature = "pdf"))]
fn pdf_text(_: &[u8]) -> Result<String, WebError> {
    Err(WebError::new(
        WebErrorKind::Unsupported,
        "this ringfence was built without PDF support (feature `pdf` of ringfence-web); PDFs cannot be read",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_title_is_said_once() {
        let body = "# Plan approved\n\nThe committee met.".to_string();
        assert_eq!(
            without_title_line(body.clone(), Some("Plan approved")),
            "The committee met."
        );
        assert_eq!(
            without_title_line("Plan approved\n\nText.".into(), Some("Plan approved")),
            "Text."
        );
        // Another first line, or no title: the body as it is.
        assert_eq!(without_title_line(body.clone(), Some("Other")), body);
        assert_eq!(without_title_line(body.clone(), None), body);
    }

    #[test]
    fn types_come_from_the_header_or_the_bytes() {
        assert_eq!(classify("text/html", b"x").0, Kind::Html);
        assert_eq!(classify("application/ld+json", b"{}").0, Kind::Json);
        assert_eq!(classify("application/zip", b"PK").0, Kind::Binary);
        assert_eq!(classify("image/svg+xml", b"<svg/>").0, Kind::Text);
        assert_eq!(classify("", b"%PDF-1.7").0, Kind::Pdf);
        assert_eq!(
            classify("application/octet-stream", b"\x89PNG\r\n\x1a\n..").1,
            "image/png"
        );
        assert_eq!(classify("", b"  <!DOCTYPE html><p>").0, Kind::Html);
        assert_eq!(classify("", b"[1, 2]").0, Kind::Json);
        assert_eq!(classify("", b"plain words").0, Kind::Text);
        assert_eq!(classify("", b"\x00\x01\x02binary").0, Kind::Binary);
    }

    #[test]
    fn content_type_parameters_are_read() {
        assert_eq!(
            split_content_type(Some("Text/HTML; Charset=\"ISO-8859-1\"")),
            ("text/html".into(), Some("ISO-8859-1".into()))
        );
        assert_eq!(split_content_type(None), (String::new(), None));
    }

    #[test]
    fn titles_are_found() {
        assert_eq!(
            html_title("<html><TITLE>\n A  page </title>"),
            Some("A page".into())
        );
        assert_eq!(html_title("<p>none</p>"), None);
    }
}
