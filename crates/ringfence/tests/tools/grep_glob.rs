//! grep and glob: output modes, ignore policy, filters, paging, caps with spill, errors,
//! cancellation and progress.

use std::sync::{Arc, Mutex};

use crate::common::{Fx, spill_path};
use ringfence_core::{Limits, Progress, ToolErrorKind};
use ringfence_fs::Access;
use serde_json::json;

fn tree(fx: &Fx) {
    fx.write("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n");
    fx.write(
        "src/lib.rs",
        "pub fn hello() -> &'static str {\n    \"Hello\"\n}\n",
    );
    fx.write("docs/guide.md", "# Guide\nSay hello.\n");
    fx.write("docs/notes.txt", "nothing here\n");
    fx.write(".hidden/conf.toml", "greeting = \"hello\"\n");
    fx.write(".gitignore", "target/\n*.log\n");
    fx.write("target/debug/out.rs", "hello from build output\n");
    fx.write("run.log", "hello log\n");
    fx.write(".git/config", "hello git\n");
    fx.write("sub/.ignore", "skipped.txt\n");
    fx.write("sub/skipped.txt", "hello skipped\n");
    fx.write("sub/kept.txt", "hello kept\n");
    fx.write("bin.dat", b"hello\x00binary");
}

#[tokio::test]
async fn files_with_matches_is_the_default_and_respects_ignore_rules() {
    let fx = Fx::new();
    tree(&fx);
    let out = fx.ok("grep", json!({"pattern": "hello"})).await;
    // .gitignore (outside a git repository too), .ignore, .git and binary files are skipped;
    // hidden files are searched.
    insta::assert_snapshot!(out, @r"
    .hidden/conf.toml
    docs/guide.md
    src/lib.rs
    src/main.rs
    sub/kept.txt
    ");
}

#[tokio::test]
async fn content_and_count_modes() {
    let fx = Fx::new();
    tree(&fx);
    let out = fx.ok("grep", json!({"pattern": "hello", "output_mode": "content", "case_insensitive": true, "path": "src"})).await;
    insta::assert_snapshot!(out, @r#"
    src/lib.rs:1: pub fn hello() -> &'static str {
    src/lib.rs:2:     "Hello"
    src/main.rs:2:     println!("hello");
    "#);
    let out = fx
        .ok(
            "grep",
            json!({"pattern": "(?i)hello", "output_mode": "count"}),
        )
        .await;
    insta::assert_snapshot!(out, @r"
    .hidden/conf.toml:1
    docs/guide.md:1
    src/lib.rs:2
    src/main.rs:1
    sub/kept.txt:1
    ");
}

#[tokio::test]
async fn context_lines_and_separators() {
    let fx = Fx::new();
    let body: String = (1..=20)
        .map(|i| {
            if i == 5 || i == 15 {
                "needle\n".to_owned()
            } else {
                format!("hay {i}\n")
            }
        })
        .collect();
    fx.write("f.txt", body);
    let out = fx
        .ok(
            "grep",
            json!({"pattern": "needle", "output_mode": "content", "context": 1}),
        )
        .await;
    insta::assert_snapshot!(out, @r"
    f.txt-4- hay 4
    f.txt:5: needle
    f.txt-6- hay 6
    --
    f.txt-14- hay 14
    f.txt:15: needle
    f.txt-16- hay 16
    ");
    let out = fx
        .ok(
            "grep",
            json!({"pattern": "needle", "output_mode": "content", "-B": 2}),
        )
        .await;
    assert!(
        out.starts_with("f.txt-3- hay 3\nf.txt-4- hay 4\nf.txt:5: needle\n--\n"),
        "{out}"
    );
}

#[tokio::test]
async fn multiline_glob_and_type_filters() {
    let fx = Fx::new();
    tree(&fx);
    let out = fx.ok("grep", json!({"pattern": "fn main\\(\\) \\{\\n\\s+println", "multiline": true, "output_mode": "content"})).await;
    assert_eq!(
        out,
        "src/main.rs:1: fn main() {\nsrc/main.rs:2:     println!(\"hello\");"
    );
    let out = fx
        .ok("grep", json!({"pattern": "hello", "glob": "*.{md,toml}"}))
        .await;
    assert_eq!(out, ".hidden/conf.toml\ndocs/guide.md");
    let out = fx
        .ok("grep", json!({"pattern": "hello", "glob": "src/**/*.rs"}))
        .await;
    assert_eq!(out, "src/lib.rs\nsrc/main.rs");
    let out = fx
        .ok("grep", json!({"pattern": "hello", "type": "rust"}))
        .await;
    assert_eq!(out, "src/lib.rs\nsrc/main.rs");
    let err = fx
        .err("grep", json!({"pattern": "hello", "type": "klingon"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
}

#[tokio::test]
async fn bad_regex_names_the_position() {
    let fx = Fx::new();
    tree(&fx);
    let err = fx.err("grep", json!({"pattern": "fn (main"})).await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    assert!(err.message.contains("unclosed group"), "{}", err.message);
    assert!(
        err.message.contains('^'),
        "position marker missing: {}",
        err.message
    );
}

#[tokio::test]
async fn no_matches_is_a_friendly_result_not_an_error() {
    let fx = Fx::new();
    tree(&fx);
    let out = fx.ok("grep", json!({"pattern": "zebra"})).await;
    assert!(
        out.starts_with("No matches found for pattern `zebra` in the workspace."),
        "{out}"
    );
}

#[tokio::test]
async fn cap_of_100_matches_with_notice_and_readable_spill() {
    let fx = Fx::new();
    let body: String = (1..=250).map(|i| format!("match {i}\n")).collect();
    fx.write("many.txt", body);
    let out = fx
        .ok(
            "grep",
            json!({"pattern": "match", "output_mode": "content"}),
        )
        .await;
    let shown = out.lines().filter(|l| l.starts_with("many.txt:")).count();
    assert_eq!(shown, 100);
    let notice: Vec<&str> = out.lines().rev().take(2).collect();
    insta::assert_snapshot!(fx.mask(&format!("{}\n{}", notice[1], notice[0])), @"
    Showing 100 of 250 matches. Use a more specific pattern or path to narrow results.
    Full output saved to [DATA]/tool-output/[UUID]. Use read_file with offset/limit to access specific sections.
    ");
    let spill = spill_path(&out);
    // Readable through read_file and searchable through grep, by the printed path.
    let line = fx
        .ok(
            "read_file",
            json!({"path": spill, "offset": 250, "limit": 1}),
        )
        .await;
    assert_eq!(line, "   250\tmany.txt:250: match 250\n");
    let dir = std::path::Path::new(&spill)
        .parent()
        .unwrap()
        .display()
        .to_string();
    let found = fx
        .ok(
            "grep",
            json!({"pattern": "match 249$", "path": dir, "output_mode": "count"}),
        )
        .await;
    assert!(found.ends_with(":1"), "{found}");
}

#[tokio::test]
async fn head_limit_and_offset_page_through_results() {
    let fx = Fx::new();
    for i in 0..12 {
        fx.write(&format!("f{i:02}.txt"), "x\n");
    }
    let out = fx
        .ok(
            "grep",
            json!({"pattern": "x", "head_limit": 5, "offset": 5}),
        )
        .await;
    insta::assert_snapshot!(out, @r"
    f05.txt
    f06.txt
    f07.txt
    f08.txt
    f09.txt

    (Entries 6-10 of 12. Call grep again with offset=10 to see more.)
    ");
    let err = fx.err("grep", json!({"pattern": "x", "offset": 50})).await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
}

#[tokio::test]
async fn grep_never_reports_denied_or_outside_files() {
    let fx = Fx::with(Limits::default(), &["secrets/", "*.key"], Access::ReadWrite);
    fx.write("secrets/a.txt", "token\n");
    fx.write("id.key", "token\n");
    fx.write("ok.txt", "token\n");
    std::fs::create_dir_all(fx.tmp.path().join("outside")).unwrap();
    std::fs::write(fx.tmp.path().join("outside/leak.txt"), "token\n").unwrap();
    std::os::unix::fs::symlink(fx.tmp.path().join("outside"), fx.path("door")).unwrap();
    std::os::unix::fs::symlink(fx.tmp.path().join("outside/leak.txt"), fx.path("leak.txt"))
        .unwrap();
    let out = fx.ok("grep", json!({"pattern": "token"})).await;
    assert_eq!(out, "ok.txt");
    let out = fx.ok("glob", json!({"pattern": "**/*"})).await;
    assert_eq!(out, "ok.txt");
    let err = fx
        .err("grep", json!({"pattern": "token", "path": "door"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::OutsideWorkspace);
    let err = fx
        .err("grep", json!({"pattern": "token", "path": "secrets"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::Denied);
}

#[tokio::test]
async fn cancelled_search_stops_with_cancelled() {
    let fx = Fx::new();
    tree(&fx);
    fx.ctx.cancel.cancel();
    let err = fx.err("grep", json!({"pattern": "hello"})).await;
    assert_eq!(err.kind, ToolErrorKind::Cancelled);
    let err = fx.err("glob", json!({"pattern": "**/*"})).await;
    assert_eq!(err.kind, ToolErrorKind::Cancelled);
}

#[tokio::test]
async fn long_searches_report_progress() {
    let mut fx = Fx::new();
    for d in 0..40 {
        for f in 0..100 {
            fx.write(&format!("d{d}/f{f}.txt"), "some text\n".repeat(200));
        }
    }
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    fx.ctx.progress = Progress::new(move |u| sink.lock().unwrap().push(u.progress));
    // Slow the search down enough (many files, a pattern that matches every line) that at
    // least one 250 ms progress interval passes even on a fast machine: repeat until it does.
    let mut rounds = 0;
    while seen.lock().unwrap().is_empty() && rounds < 20 {
        fx.ok("grep", json!({"pattern": "some", "output_mode": "count"}))
            .await;
        rounds += 1;
    }
    let seen = seen.lock().unwrap();
    assert!(
        !seen.is_empty(),
        "no progress after {rounds} searches of 4,000 files"
    );
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
}

#[tokio::test]
async fn glob_sorted_with_globstar_braces_and_classes() {
    let fx = Fx::new();
    tree(&fx);
    fx.write("docs/a1.md", "");
    fx.write("docs/b2.md", "");
    let out = fx.ok("glob", json!({"pattern": "**/*.md"})).await;
    assert_eq!(out, "docs/a1.md\ndocs/b2.md\ndocs/guide.md");
    let out = fx
        .ok("glob", json!({"pattern": "*.md", "path": "docs"}))
        .await;
    assert_eq!(out, "docs/a1.md\ndocs/b2.md\ndocs/guide.md");
    let out = fx
        .ok("glob", json!({"pattern": "docs/[ab][0-9].{md,txt}"}))
        .await;
    assert_eq!(out, "docs/a1.md\ndocs/b2.md");
    let out = fx.ok("glob", json!({"pattern": "src/*"})).await;
    assert_eq!(out, "src/lib.rs\nsrc/main.rs");
    // `*` stays within one directory.
    let out = fx.ok("glob", json!({"pattern": "*.rs"})).await;
    assert!(out.starts_with("No files match `*.rs`"), "{out}");
}

#[tokio::test]
async fn glob_ignore_policy_and_include_ignored() {
    let fx = Fx::new();
    tree(&fx);
    let out = fx.ok("glob", json!({"pattern": "**/*"})).await;
    insta::assert_snapshot!(out, @r"
    .gitignore
    .hidden/conf.toml
    bin.dat
    docs/guide.md
    docs/notes.txt
    src/lib.rs
    src/main.rs
    sub/.ignore
    sub/kept.txt
    ");
    let out = fx
        .ok(
            "glob",
            json!({"pattern": "**/*.{log,rs,txt}", "include_ignored": true}),
        )
        .await;
    insta::assert_snapshot!(out, @r"
    docs/notes.txt
    run.log
    src/lib.rs
    src/main.rs
    sub/kept.txt
    sub/skipped.txt
    target/debug/out.rs
    ");
}

/// Five files `f0.txt`..`f4.txt`, of which glob shows three.
fn five_files_glob_shows_three() -> Fx {
    let limits = Limits {
        max_glob_results: 3,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    for i in 0..5 {
        fx.write(&format!("f{i}.txt"), "");
    }
    fx
}

#[tokio::test]
async fn glob_cap_with_notice_and_spill() {
    let fx = five_files_glob_shows_three();
    let out = fx.ok("glob", json!({"pattern": "*.txt"})).await;
    insta::assert_snapshot!(fx.mask(&out), @"
    f0.txt
    f1.txt
    f2.txt

    Showing 3 of 5 files. Use a more specific pattern or path to narrow results.
    Full output saved to [DATA]/tool-output/[UUID]. Use read_file with offset/limit to access specific sections.
    ");
    assert_eq!(
        std::fs::read_to_string(spill_path(&out)).unwrap(),
        "f0.txt\nf1.txt\nf2.txt\nf3.txt\nf4.txt\n"
    );
}

/// Issue 29: an output larger than the user's quota of saved output is cut when saved, and
/// the notice says so and why (no silent loss).
#[tokio::test]
async fn a_spill_past_the_quota_is_cut_and_the_notice_says_why() {
    let mut fx = five_files_glob_shows_three();
    let root = fx.ctx.spill.root().clone();
    fx.ctx.spill = std::sync::Arc::new(ringfence_core::SpillStore::new(root).with_quota(14));
    let out = fx.ok("glob", json!({"pattern": "*.txt"})).await;
    let masked = fx.mask(&out);
    insta::assert_snapshot!(masked.lines().last().unwrap(), @"
    The output was cut when saved to [DATA]/tool-output/[UUID]: only the first 14 bytes were saved: each user's saved outputs may take 14 bytes together ([limits] spill_quota_mb), the oldest deleted first to make room, and this one did not fit. Use read_file with offset/limit to access specific sections.
    ");
    let path = out
        .split("saved to ")
        .nth(1)
        .and_then(|rest| rest.split(": only").next())
        .unwrap();
    assert_eq!(std::fs::read_to_string(path).unwrap(), "f0.txt\nf1.txt\n");
}

#[tokio::test]
async fn glob_errors() {
    let fx = Fx::new();
    tree(&fx);
    let err = fx.err("glob", json!({"pattern": "../**/*"})).await;
    assert_eq!(err.kind, ToolErrorKind::OutsideWorkspace);
    let err = fx.err("glob", json!({"pattern": "a[b"})).await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    let err = fx
        .err("glob", json!({"pattern": "*", "path": "src/main.rs"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::WrongType);
    let err = fx
        .err("glob", json!({"pattern": "*", "path": "nope"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
    let err = fx.err("glob", json!({"pattern": ""})).await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
}
