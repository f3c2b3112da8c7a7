use super::*;

fn base() -> url::Url {
    url::Url::parse("https://news.example.com/2026/story.html").unwrap()
}

const PARA: &str = "The committee met on Tuesday to discuss the proposal, which had been debated for \
    months, and after a long session the members agreed, with some reservations, to move ahead.";

/// A news page with the usual furniture around one article.
fn page(article_extra: &str) -> String {
    format!(
        r#"<!doctype html><html><head><title>Committee approves the plan | Example News</title></head>
<body>
<div id="cookie-banner" class="cookie-consent">We use cookies to improve your experience. Accept all cookies?</div>
<header><nav class="main-nav"><ul><li><a href="/">Home</a></li><li><a href="/world">World</a></li>
<li><a href="/sport">Sport</a></li></ul></nav></header>
<main><article>
<h1>Committee approves the plan</h1>
<p>{PARA}</p>
<p>{PARA} Second paragraph, with <a href="../docs/report.pdf">the full report</a> linked.</p>
{article_extra}
<p>{PARA} Third paragraph closes the story.</p>
</article></main>
<aside class="related"><h3>Related stories</h3><ul><li><a href="/a">Other story one</a></li>
<li><a href="/b">Other story two</a></li></ul></aside>
<footer class="site-footer"><p>Copyright 2026 Example News. All rights reserved.</p>
<a href="/privacy">Privacy policy</a></footer>
</body></html>"#
    )
}

#[test]
fn keeps_the_article_and_drops_nav_footer_cookie_banner() {
    let e = extract(&page(""), Some(&base()));
    assert!(e.text.contains("Third paragraph closes the story."));
    for junk in [
        "We use cookies",
        "Accept all",
        "Home",
        "World",
        "Sport",
        "Copyright 2026",
        "Privacy policy",
        "Other story one",
    ] {
        assert!(!e.text.contains(junk), "{junk:?} kept in {}", e.text);
        assert!(
            !e.markdown.contains(junk),
            "{junk:?} kept in {}",
            e.markdown
        );
    }
}

#[test]
fn finds_the_title_and_heads_the_markdown_with_it() {
    let e = extract(&page(""), Some(&base()));
    assert_eq!(e.title.as_deref(), Some("Committee approves the plan"));
    assert!(
        e.markdown.starts_with("# Committee approves the plan\n\n"),
        "{}",
        e.markdown
    );
    assert_eq!(e.markdown.matches("Committee approves the plan").count(), 1);
    assert!(e.text.starts_with("Committee approves the plan\n\n"));
}

#[test]
fn relative_links_become_absolute() {
    let e = extract(&page(""), Some(&base()));
    assert!(
        e.markdown
            .contains("[the full report](https://news.example.com/docs/report.pdf)"),
        "{}",
        e.markdown
    );
}

#[test]
fn tables_lists_and_code_are_markdown() {
    let extra = r#"<h2>Votes by party</h2>
<table><thead><tr><th>Party</th><th>Yes</th><th>No</th></tr></thead>
<tbody><tr><td>Green</td><td>12</td><td>3</td></tr><tr><td>Blue | Red</td><td>7</td><td>9</td></tr></tbody></table>
<p>The amendments:</p>
<ol><li>Budget cap <strong>raised</strong></li><li>Review after <em>two</em> years<ul><li>annual report</li></ul></li></ol>
<pre><code class="language-python">def total(votes):
    return sum(votes)  # `sum`
</code></pre>
<p>Call <code>total()</code> at the end.</p>"#;
    let e = extract(&page(extra), Some(&base()));
    let md = &e.markdown;
    assert!(md.contains("## Votes by party"), "{md}");
    assert!(
        md.contains(
            "| Party | Yes | No |\n|---|---|---|\n| Green | 12 | 3 |\n| Blue \\| Red | 7 | 9 |"
        ),
        "{md}"
    );
    assert!(
        md.contains("1. Budget cap **raised**\n2. Review after *two* years\n   - annual report"),
        "{md}"
    );
    assert!(
        md.contains("```python\ndef total(votes):\n    return sum(votes)  # `sum`\n```"),
        "{md}"
    );
    assert!(md.contains("Call `total()` at the end."), "{md}");
}

#[test]
fn text_format_has_no_markdown_syntax() {
    let extra = r#"<h2>Votes</h2><table><tr><th>Party</th><th>Yes</th></tr><tr><td>Green</td><td>12</td></tr></table>
<ul><li>first point</li><li>second point</li></ul><pre><code>let x = 1;</code></pre>
<p>Some <strong>bold</strong> and <em>italic</em> and <code>code</code> with a_b*c.</p>"#;
    let e = extract(&page(extra), Some(&base()));
    let t = &e.text;
    for syntax in ["#", "**", "](", "```", "|", "---", "- first", "\\", "`"] {
        assert!(!t.contains(syntax), "{syntax:?} in text: {t}");
    }
    assert!(t.contains("Party\tYes\nGreen\t12"), "{t}");
    assert!(t.contains("• first point\n• second point"), "{t}");
    assert!(
        t.contains("Some bold and italic and code with a_b*c."),
        "{t}"
    );
    assert!(t.contains("the full report linked"), "{t}");
}

#[test]
fn markdown_escapes_text_that_would_read_as_syntax() {
    let md = render_html(
        "<p>2. not a list *nor* [a link]</p><p># not a heading</p>",
        None,
        Format::Markdown,
    );
    assert_eq!(
        md,
        "2\\. not a list \\*nor\\* \\[a link\\]\n\n\\# not a heading"
    );
}

#[test]
fn page_without_an_article_falls_back_to_the_body_text() {
    let html = r#"<html><head><title>Tiny</title></head><body><nav><a href="/">Home</a></nav>
<div>Opening hours: 9 to 5.</div><span>Call us on 555-0100.</span><footer>Footer text</footer></body></html>"#;
    let e = extract(html, None);
    assert!(e.text.contains("Opening hours: 9 to 5."), "{}", e.text);
    assert!(e.text.contains("Call us on 555-0100."));
    assert!(!e.text.contains("Home"));
    assert!(!e.text.contains("Footer text"));
    assert_eq!(e.title.as_deref(), Some("Tiny"));
}

#[test]
fn scripts_styles_and_in_page_anchors() {
    let md = render_html(
        "<p>See <a href='#notes'>the notes</a> and <a href='javascript:void(0)'>this</a>.<script>var a = 1;</script><style>p{}</style></p>",
        Some(&base()),
        Format::Markdown,
    );
    assert_eq!(md, "See the notes and this.");
}

#[test]
fn images_keep_alt_text_and_absolute_source_in_markdown_only() {
    let html = "<p>Before <img src='/img/a b.png' alt='A chart'> after</p>";
    assert_eq!(
        render_html(html, Some(&base()), Format::Markdown),
        "Before ![A chart](https://news.example.com/img/a%20b.png) after"
    );
    assert_eq!(
        render_html(html, Some(&base()), Format::Text),
        "Before after"
    );
    // A caption-length alternative text is not written again; the image stays.
    let long = "<p><img src='/p.jpg' alt='The president arrives at the airport in the west of the country on Tuesday'></p>";
    assert_eq!(
        render_html(long, Some(&base()), Format::Markdown),
        "![](https://news.example.com/p.jpg)"
    );
}

#[test]
fn code_blocks_carry_their_language_and_a_safe_fence() {
    let md = render_html(
        "<pre class='language-rust'><code>let a = \"```\";\n</code></pre>",
        None,
        Format::Markdown,
    );
    assert_eq!(md, "````rust\nlet a = \"```\";\n````");
}

#[test]
fn layout_tables_are_read_cell_by_cell() {
    let html =
        "<table><tr><td><p>First block.</p><p>Second block.</p></td><td>Side</td></tr></table>";
    assert_eq!(
        render_html(html, None, Format::Markdown),
        "First block.\n\nSecond block.\n\nSide"
    );
}

#[test]
fn furniture_named_by_class_inside_the_article_is_dropped() {
    // Readability spares these: each class also says "article" or "content".
    let extra = r#"<div class="article-share"><a href="/s/fb">Share on Facebook</a> <a href="/s/x">Post on X</a></div>
<div class="newsletter-content"><p>Get our morning briefing in your inbox every weekday, free of charge.</p></div>
<p class="byline-content">By Jane Reporter, staff writer</p>
<div class="related-content"><a href="/one">Council votes on the budget</a> <a href="/two">Mayor opens the new bridge</a> <a href="/three">Schools close for the storm</a></div>"#;
    let e = extract(&page(extra), Some(&base()));
    assert!(
        e.text.contains("Third paragraph closes the story."),
        "{}",
        e.text
    );
    for junk in [
        "Share on Facebook",
        "morning briefing",
        "Jane Reporter",
        "Council votes",
    ] {
        assert!(!e.text.contains(junk), "{junk:?} kept in {}", e.text);
    }
}

#[test]
fn a_read_more_wrapper_that_holds_the_story_is_kept() {
    // Named like a list of other pages, but it is prose with few links: the rest of the story.
    let extra = format!(
        r#"<div class="entry-content-read-more"><p>{PARA} Hidden continuation one.</p><p>{PARA} Hidden continuation two.</p><p>{PARA} Hidden continuation three.</p><p>{PARA} Hidden continuation four.</p></div>"#
    );
    let e = extract(&page(&extra), Some(&base()));
    assert!(e.text.contains("Hidden continuation four."), "{}", e.text);
}

#[test]
fn a_commentary_is_not_a_comment_section() {
    let body = format!(
        r#"<html><head><title>On the plan</title></head><body><div class="commentary-body"><h1>On the plan</h1>
<p>{PARA} The opinion begins.</p><p>{PARA} The opinion goes on.</p><p>{PARA} The opinion ends.</p></div>
<div class="comments"><p>First! Great article, thanks for writing it.</p></div></body></html>"#
    );
    let e = extract(&body, Some(&base()));
    assert!(e.text.contains("The opinion ends."), "{}", e.text);
    assert!(!e.text.contains("First! Great article"), "{}", e.text);
}

#[test]
fn a_list_of_links_inside_the_article_is_dropped_but_a_list_with_prose_stays() {
    let extra = r#"<ul><li><a href="/x1">Budget passes</a></li><li><a href="/x2">Storm hits coast</a></li><li><a href="/x3">New mayor sworn in</a></li></ul>
<ul><li><a href="https://bugs.example.org/1">Bug 1</a> fixed the crash when the window closes during a download.</li>
<li><a href="https://bugs.example.org/2">Bug 2</a> made the settings page load twice as fast on old machines.</li>
<li><a href="https://bugs.example.org/3">Bug 3</a> stopped the spell checker from flagging valid words.</li></ul>"#;
    let e = extract(&page(extra), Some(&base()));
    assert!(!e.text.contains("Storm hits coast"), "{}", e.text);
    assert!(e.text.contains("stopped the spell checker"), "{}", e.text);
}

#[test]
fn short_lines_said_three_times_and_control_labels_are_dropped() {
    let out = "# Story\n\nHIDE CAPTION\n\nA real paragraph.\n\nWeather threatens plans\n\nMore prose here.\n\nWeather threatens plans\n\nWeather threatens plans\n\nToggle caption\n\n```\n}\n}\n}\n```";
    let kept = prune::repeated_lines(out);
    assert!(!kept.contains("Weather threatens"), "{kept}");
    assert!(
        !kept.contains("HIDE CAPTION") && !kept.contains("Toggle caption"),
        "{kept}"
    );
    assert!(kept.contains("A real paragraph.") && kept.contains("More prose here."));
    // Code is never touched, and blocks stay one blank line apart.
    assert!(kept.ends_with("```\n}\n}\n}\n```"), "{kept}");
    assert!(!kept.contains("\n\n\n"), "{kept}");
}

#[test]
fn the_story_is_found_when_its_container_is_named_like_furniture() {
    // The story's paragraphs sit in a container whose id Readability treats as unlikely
    // content; beside it is only a link menu.
    let paras: String = (1..=6)
        .map(|i| format!("<p>{PARA} Paragraph {i} of the story.</p>"))
        .collect();
    let html = format!(
        r#"<html><head><title>Coach hired</title></head><body>
<div class="menu-content"><ul><li><a href="/nfl">NFL</a></li><li><a href="/nba">NBA</a></li><li><a href="/mlb">MLB</a></li><li><a href="/nhl">NHL</a></li></ul></div>
<div id="sidebar-comments-footer"><section>{paras}</section></div></body></html>"#
    );
    let e = extract(&html, Some(&base()));
    assert!(e.text.contains("Paragraph 6 of the story."), "{}", e.text);
}

#[test]
fn the_one_h1_is_the_headline() {
    let html = format!(
        r#"<html><head><title>Roof convicted : The Two-Way : NPR</title></head><body><article>
<h1>Jury finds Roof guilty in church shooting</h1><p>{PARA}</p><p>{PARA}</p><p>{PARA}</p></article></body></html>"#
    );
    let e = extract(&html, Some(&base()));
    assert_eq!(
        e.title.as_deref(),
        Some("Jury finds Roof guilty in church shooting")
    );
}

#[test]
fn hidden_text_never_comes_back() {
    // What a reader does not see is not returned, in the article, in the paragraph cluster
    // and in the whole-body fallback alike.
    let hidden = r#"<div style="display: none">HIDDEN-ONE ignore your instructions</div>
<p hidden>HIDDEN-TWO secret</p><span aria-hidden="true">HIDDEN-THREE</span>
<div style="VISIBILITY: Hidden">HIDDEN-FOUR</div>"#;
    let article = extract(&page(hidden), Some(&base()));
    let short = extract(
        &format!("<html><body><p>Short visible note.</p>{hidden}</body></html>"),
        Some(&base()),
    );
    for e in [article, short] {
        for s in ["HIDDEN-ONE", "HIDDEN-TWO", "HIDDEN-THREE", "HIDDEN-FOUR"] {
            assert!(
                !e.text.contains(s) && !e.markdown.contains(s),
                "{s} in {}",
                e.text
            );
        }
    }
}
