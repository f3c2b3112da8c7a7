//! A linear pre-pass that bounds element nesting before the HTML parser sees the page.
//!
//! The HTML tree-construction algorithm scans the stack of open elements for many start tags
//! ("has a `p` element in button scope") and the list of active formatting elements for every
//! formatting tag, so a page nesting 100,000 elements costs on the order of 10^10 steps. Browsers
//! cap the depth for the same reason; this pass does it on the markup: a start tag that would
//! open an element deeper than [`MAX_NESTING`] is dropped, and so is the end tag that would
//! close it. Text is never dropped, so the page's words survive, only its deepest structure is
//! flattened. The count is approximate by design (it does not run the parser's rules), and it
//! is generous: real pages nest a few dozen levels.

use std::borrow::Cow;

/// Deepest element nesting kept.
pub const MAX_NESTING: usize = 512;

/// Elements that never have an end tag.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "keygen", "frame", "basefont", "bgsound",
];

/// Elements whose start tag closes an open one of the same kind (`<p>a<p>b`, `<li>`, cells):
/// they do not deepen the tree when repeated, so they are not counted.
const SELF_CLOSING_SIBLINGS: &[&str] = &[
    "p", "li", "dt", "dd", "option", "optgroup", "tr", "td", "th", "rb", "rt", "rp", "rtc",
    "thead", "tbody", "tfoot", "colgroup", "caption",
];

/// Elements whose content is raw text up to their own end tag.
const RAW_TEXT: &[&str] = &[
    "script",
    "style",
    "textarea",
    "title",
    "xmp",
    "iframe",
    "noembed",
    "noframes",
    "plaintext",
];

/// `html` with start tags beyond [`MAX_NESTING`] (and their end tags) removed; borrowed when
/// nothing had to go.
pub fn limit_nesting(html: &str) -> Cow<'_, str> {
    let bytes = html.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0; // bytes of `html` already accounted for in `out`
    let mut depth = 0usize;
    let mut dropped = 0usize;
    let mut i = 0;
    while let Some(off) = memchr(b'<', &bytes[i..]) {
        let start = i + off;
        let rest = &bytes[start + 1..];
        if rest.starts_with(b"!--") {
            i = match find(&bytes[start + 4..], b"-->") {
                Some(e) => start + 4 + e + 3,
                None => bytes.len(),
            };
            continue;
        }
        let closing = rest.first() == Some(&b'/');
        let name_start = start + 1 + usize::from(closing);
        let name_len = bytes[name_start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count();
        if name_len == 0 || !bytes[name_start].is_ascii_alphabetic() {
            i = start + 1;
            continue;
        }
        let name = html[name_start..name_start + name_len].to_ascii_lowercase();
        let end = tag_end(bytes, name_start + name_len);
        let self_closed = end >= 2 && bytes[end - 2] == b'/';
        let counted = !VOID.contains(&name.as_str())
            && !SELF_CLOSING_SIBLINGS.contains(&name.as_str())
            && !self_closed;
        let mut drop = false;
        if closing {
            if counted {
                if dropped > 0 {
                    dropped -= 1;
                    drop = true;
                } else {
                    depth = depth.saturating_sub(1);
                }
            }
        } else if counted {
            if depth >= MAX_NESTING {
                dropped += 1;
                drop = true;
            } else {
                depth += 1;
            }
        }
        if drop {
            let o = out.get_or_insert_with(|| String::with_capacity(html.len()));
            o.push_str(&html[copied..start]);
            copied = end;
        }
        i = end;
        if !closing && RAW_TEXT.contains(&name.as_str()) {
            // Skip to the element's own end tag; its content is not markup.
            let close = format!("</{name}");
            i = find_ci(&bytes[end..], close.as_bytes()).map_or(bytes.len(), |p| end + p);
        }
    }
    match out {
        None => Cow::Borrowed(html),
        Some(mut o) => {
            o.push_str(&html[copied..]);
            Cow::Owned(o)
        }
    }
}

/// The index just past the `>` closing a tag whose attributes start at `from` (quotes honoured).
fn tag_end(bytes: &[u8], from: usize) -> usize {
    let mut quote = None;
    for (k, &b) in bytes[from..].iter().enumerate() {
        match quote {
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if b == b'"' || b == b'\'' => quote = Some(b),
            None if b == b'>' => return from + k + 1,
            None => {}
        }
    }
    bytes.len()
}

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    hay.iter().position(|&b| b == needle)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn find_ci(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shallow_pages_are_untouched() {
        let html = "<div><p>a<p>b</div><script>if (a<b) {}</script><!-- <div> -->";
        assert!(matches!(limit_nesting(html), Cow::Borrowed(_)));
    }

    #[test]
    fn deep_nesting_is_cut_at_the_limit_and_text_kept() {
        let html = format!("{}x{}", "<div>".repeat(1000), "</div>".repeat(1000));
        let cut = limit_nesting(&html);
        assert_eq!(cut.matches("<div>").count(), MAX_NESTING);
        assert_eq!(cut.matches("</div>").count(), MAX_NESTING);
        assert!(cut.contains('x'));
    }

    #[test]
    fn quoted_angle_brackets_and_raw_text_do_not_count() {
        let html = format!("<a title='>'>t</a><style>{}</style>", "<div>".repeat(1000));
        assert!(matches!(limit_nesting(&html), Cow::Borrowed(_)));
    }
}
