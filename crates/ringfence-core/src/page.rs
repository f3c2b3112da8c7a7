//! The settings page's contract: each family that keeps something for a person (memories,
//! follow-ups, a calendar login) serves its own section of `/settings`, where the signed-in
//! person sees and changes it. A section knows nothing of HTTP: the transport signs people
//! in, checks every state-changing request (its CSRF token, `Origin`, `Sec-Fetch-Site`),
//! lays the page out and hands the section a [`PageRequest`] for its user alone. The
//! section answers with a [`Reply`] built with `maud`, which escapes every value it is
//! given: nothing a person (or their assistant) stored is ever read as markup.
//!
//! Sections run on a blocking thread: they may use their stores directly.

use std::collections::BTreeMap;

pub use maud::{Markup, PreEscaped, html};

/// Rows a section's list shows at once.
pub const PAGE_ROWS: usize = 50;

/// GET (look) or POST (change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

/// One request to a section, for one signed-in user.
#[derive(Debug)]
pub struct PageRequest<'a> {
    /// Whose page this is: every lookup is made for this user alone (an id of another
    /// user's is not found).
    pub user: &'a str,
    pub method: Method,
    /// The path below the section (`/settings/memories/memory/3/edit` → `["memory", "3",
    /// "edit"]`).
    pub rest: &'a [String],
    /// The query string's fields.
    pub query: &'a BTreeMap<String, String>,
    /// A POST's form fields (already checked for the CSRF token, which is not among them).
    pub form: &'a BTreeMap<String, String>,
    /// The session's CSRF token, which every form must send back (see [`PageRequest::csrf`]).
    pub csrf_token: &'a str,
    /// The section's own address (`/settings/memories`), for links and redirects.
    pub base: &'a str,
    /// The page's origin as the browser sees it (`https://assistant.example.org`), for an
    /// address another site sends the person back to.
    pub origin: &'a str,
}

impl PageRequest<'_> {
    /// A query field, `""` when absent.
    pub fn param(&self, name: &str) -> &str {
        self.query.get(name).map_or("", String::as_str)
    }

    /// A form field, `""` when absent.
    pub fn field(&self, name: &str) -> &str {
        self.form.get(name).map_or("", String::as_str)
    }

    /// The hidden field each form must carry: without it the transport refuses the POST.
    pub fn csrf(&self) -> Markup {
        html! { input type="hidden" name=(CSRF_FIELD) value=(self.csrf_token); }
    }

    /// `rest`'s segments as strings, for matching.
    pub fn path(&self) -> Vec<&str> {
        self.rest.iter().map(String::as_str).collect()
    }

    /// The number a query field holds (a page), `default` when absent or not a number.
    pub fn number(&self, name: &str, default: usize) -> usize {
        self.param(name).parse().unwrap_or(default)
    }
}

/// The form field carrying the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

/// What a section answers.
#[derive(Debug)]
pub enum Reply {
    /// A page: its title and its body (the transport adds the header, navigation and
    /// styles).
    Page { title: String, body: Markup },
    /// After a change: go to `to` (a path on this server), saying `notice` there.
    Redirect { to: String, notice: Option<String> },
    /// Away to another site's page (an `https://` or `http://` address): Google's consent
    /// page.
    Leave(String),
    /// A file to save (an export).
    Download {
        file_name: String,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// No such page or item (for this user): 404.
    NotFound,
    /// A request the section cannot take (a field missing or wrong): 400, saying why and
    /// what to do.
    Invalid(String),
    /// Something the section relies on failed (its database): 500, saying what.
    Failed(String),
}

impl Reply {
    pub fn page(title: impl Into<String>, body: Markup) -> Reply {
        Reply::Page {
            title: title.into(),
            body,
        }
    }

    pub fn redirect(to: impl Into<String>, notice: impl Into<String>) -> Reply {
        Reply::Redirect {
            to: to.into(),
            notice: Some(notice.into()),
        }
    }
}

/// A family's section of the settings page.
pub trait Section: Send + Sync {
    /// Its address below `/settings` (`memories`): lowercase letters and `-`.
    fn name(&self) -> &'static str;
    /// Its name in the navigation ("Memories").
    fn title(&self) -> &'static str;
    /// Answers one request. Runs on a blocking thread.
    fn handle(&self, req: &PageRequest<'_>) -> Reply;
}

/// Links to the pages before and after `page` (counted from 0) of a list of `total` rows,
/// keeping the other query fields `keep`.
pub fn pager(base: &str, keep: &[(&str, &str)], page: usize, total: usize) -> Markup {
    pager_of(base, keep, "page", "Pages", page, total)
}

/// [`pager`] for one of several lists on a page: its page number travels in the query field
/// `param`, and its navigation is named `label`.
pub fn pager_of(
    base: &str,
    keep: &[(&str, &str)],
    param: &str,
    label: &str,
    page: usize,
    total: usize,
) -> Markup {
    let pages = total.div_ceil(PAGE_ROWS).max(1);
    let link = |n: usize| {
        let mut q = url_query(keep);
        if n > 0 {
            if !q.is_empty() {
                q.push('&');
            }
            q.push_str(&format!("{param}={n}"));
        }
        if q.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{q}")
        }
    };
    html! {
        nav.pager aria-label=(label) {
            @if page > 0 { a href=(link(page - 1)) rel="prev" { "Previous page" } }
            span { "Page " (page.min(pages - 1) + 1) " of " (pages) }
            @if page + 1 < pages { a href=(link(page + 1)) rel="next" { "Next page" } }
        }
    }
}

/// `fields` as a query string (empty values left out), each part encoded.
pub fn url_query(fields: &[(&str, &str)]) -> String {
    fields
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Percent-encodes `s` for a query string or a path segment.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A time (milliseconds since the epoch) as people read it, in UTC.
pub fn when(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_escapes_what_it_is_given() {
        let text = "<img src=x onerror=alert(1)> & <script>x</script>";
        let m = html! { p { (text) } };
        assert_eq!(
            m.into_string(),
            "<p>&lt;img src=x onerror=alert(1)&gt; &amp; &lt;script&gt;x&lt;/script&gt;</p>"
        );
        let attr = html! { a href=("\" onmouseover=\"x") { "y" } };
        assert!(!attr.into_string().contains("\" onmouseover"));
    }

    #[test]
    fn the_pager_links_the_neighbours_keeping_the_filters() {
        let m = pager(
            "/settings/memories",
            &[("q", "a b&c"), ("kind", "")],
            1,
            120,
        )
        .into_string();
        assert!(m.contains("href=\"/settings/memories?q=a%20b%26c\""), "{m}");
        assert!(
            m.contains("href=\"/settings/memories?q=a%20b%26c&amp;page=2\""),
            "{m}"
        );
        assert!(m.contains("Page 2 of 3"), "{m}");
        let first = pager("/s", &[], 0, 10).into_string();
        assert!(
            !first.contains("Previous") && !first.contains("Next"),
            "{first}"
        );
    }
}
