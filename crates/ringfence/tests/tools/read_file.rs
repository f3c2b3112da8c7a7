//! read_file against seed 000: cat -n format, defaults, caps, notices, spill, limits.

use crate::common::{Fx, spill_path};
use ringfence_core::{Limits, ToolErrorKind};
use serde_json::json;

fn lines(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

#[tokio::test]
async fn cat_n_format_with_one_based_numbers() {
    let fx = Fx::new();
    fx.write("notes/todo.md", "alpha\nbeta\n\tgamma\n");
    let out = fx.ok("read_file", json!({"path": "notes/todo.md"})).await;
    insta::assert_snapshot!(out, @r"
         1	alpha
         2	beta
         3		gamma
    ");
}

#[tokio::test]
async fn offset_and_limit_select_lines_and_say_how_to_go_on() {
    let fx = Fx::new();
    fx.write("a.txt", lines(10));
    let out = fx
        .ok(
            "read_file",
            json!({"path": "a.txt", "offset": 4, "limit": 3}),
        )
        .await;
    insta::assert_snapshot!(out, @r"
         4	line 4
         5	line 5
         6	line 6

    (Lines 4-6 of 10. Call read_file with offset=7 to read on.)
    ");
}

#[tokio::test]
async fn default_caps_500_lines_with_seed_notice_and_readable_spill() {
    let fx = Fx::new();
    fx.write("big.txt", lines(3000));
    let out = fx.ok("read_file", json!({"path": "big.txt"})).await;
    let shown: Vec<&str> = out.lines().filter(|l| l.contains('\t')).collect();
    assert_eq!(shown.len(), 500);
    assert_eq!(shown[499], "   500\tline 500");
    let tail = out.lines().rev().take(2).collect::<Vec<_>>();
    insta::assert_snapshot!(fx.mask(&format!("{}\n{}", tail[1], tail[0])), @"
    Showing lines 1-500 of 3,000. Use the offset and limit parameters to read specific sections.
    Full output saved to [DATA]/tool-output/[UUID]. Use read_file with offset/limit to access specific sections.
    ");
    // The full file is in the spill file (seed: "the full file content is always written"),
    // readable by the printed absolute path through read_file itself.
    let spill = spill_path(&out);
    let again = fx
        .ok(
            "read_file",
            json!({"path": spill, "offset": 2999, "limit": 5}),
        )
        .await;
    assert_eq!(again, "  2999\tline 2999\n  3000\tline 3000\n");
}

#[tokio::test]
async fn character_cap_cuts_before_line_cap() {
    let fx = Fx::new();
    let long: String = (1..=100)
        .map(|i| format!("{i:04}{}\n", "x".repeat(496)))
        .collect();
    fx.write("wide.txt", long);
    let out = fx.ok("read_file", json!({"path": "wide.txt"})).await;
    let shown = out.lines().filter(|l| l.contains('\t')).count();
    assert!(shown < 100 && shown > 50, "shown {shown}");
    let body: usize = out.split("\nShowing").next().unwrap().chars().count();
    assert!(body <= 30_000, "body {body}");
    assert!(out.contains(&format!("Showing lines 1-{shown} of 100.")));
}

#[tokio::test]
async fn a_single_line_longer_than_the_budget_is_cut_and_spilled() {
    let fx = Fx::new();
    fx.write("one.txt", "y".repeat(50_000));
    let out = fx.ok("read_file", json!({"path": "one.txt"})).await;
    assert!(out.contains("more characters]"));
    assert!(out.contains("Showing lines 1-1 of 1."));
    let spill = spill_path(&out);
    assert_eq!(std::fs::read(spill).unwrap().len(), 50_001);
}

#[tokio::test]
async fn one_megabyte_limit_without_offset_or_limit() {
    let fx = Fx::new();
    fx.write("huge.log", lines(200_000)); // ~2.2 MB
    let err = fx.err("read_file", json!({"path": "huge.log"})).await;
    assert_eq!(err.kind, ToolErrorKind::TooLarge);
    assert!(err.message.contains("offset and limit"), "{}", err.message);
    // Either parameter bypasses the threshold.
    let out = fx
        .ok("read_file", json!({"path": "huge.log", "offset": 199_999}))
        .await;
    assert_eq!(out, "199999\tline 199999\n200000\tline 200000\n");
    let out = fx
        .ok("read_file", json!({"path": "huge.log", "limit": 1}))
        .await;
    assert!(out.starts_with("     1\tline 1\n"));
    assert!(out.contains("(Lines 1-1 of 200,000."));
}

#[tokio::test]
async fn binary_files_are_refused() {
    // (Text in other encodings is decoded: see tests/encodings.rs.)
    let fx = Fx::new();
    fx.write("prog", b"\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x03\x00");
    let err = fx.err("read_file", json!({"path": "prog"})).await;
    assert_eq!(err.kind, ToolErrorKind::Binary);
    assert!(err.message.contains("8,192"));
    // A NUL after the sampled 8,192 bytes is not looked for (seed: sampling).
    let mut late = "a\n".repeat(5000).into_bytes();
    late.push(0);
    fx.write("late.txt", late);
    assert!(
        fx.call("read_file", json!({"path": "late.txt", "limit": 1}))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn multibyte_character_cut_by_the_sample_is_still_text() {
    let fx = Fx::new();
    let mut s = "a".repeat(8191);
    s.push('é'); // two bytes straddling the 8,192-byte sample
    s.push('\n');
    fx.write("edge.txt", s);
    assert!(
        fx.call("read_file", json!({"path": "edge.txt"}))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn empty_file_offset_past_end_and_bad_arguments() {
    let fx = Fx::new();
    fx.write("empty.txt", "");
    let out = fx.ok("read_file", json!({"path": "empty.txt"})).await;
    assert_eq!(out, "empty.txt: the file is empty (0 lines).");
    fx.write("three.txt", lines(3));
    let err = fx
        .err("read_file", json!({"path": "three.txt", "offset": 9}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    assert!(err.message.contains("has 3 lines"), "{}", err.message);
    let err = fx
        .err("read_file", json!({"path": "three.txt", "limit": 0}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    let err = fx
        .err("read_file", json!({"path": "three.txt", "offset": "x"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    let err = fx.err("read_file", json!({"file_path": "three.txt"})).await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    assert!(err.message.contains("file_path"), "{}", err.message);
    let err = fx.err("read_file", json!({"path": "missing.txt"})).await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
    let err = fx.err("read_file", json!({"path": "~"})).await;
    assert_eq!(err.kind, ToolErrorKind::WrongType);
}

#[tokio::test]
async fn crlf_lines_are_shown_without_carriage_returns_and_no_final_newline_is_fine() {
    let fx = Fx::new();
    fx.write("win.txt", "one\r\ntwo\r\nthree");
    let out = fx.ok("read_file", json!({"path": "win.txt"})).await;
    assert_eq!(out, "     1\tone\n     2\ttwo\n     3\tthree\n");
}

#[tokio::test]
async fn tilde_and_absolute_inside_paths_work() {
    let fx = Fx::new();
    fx.write("n.md", "x\n");
    assert_eq!(
        fx.ok("read_file", json!({"path": "~/n.md"})).await,
        "     1\tx\n"
    );
    let abs = fx.path("n.md").display().to_string();
    assert_eq!(
        fx.ok("read_file", json!({"path": abs})).await,
        "     1\tx\n"
    );
    let err = fx.err("read_file", json!({"path": "/etc/passwd"})).await;
    assert_eq!(err.kind, ToolErrorKind::OutsideWorkspace);
    let err = fx
        .err("read_file", json!({"path": "../../etc/passwd"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::OutsideWorkspace);
}

#[tokio::test]
async fn custom_limits_apply() {
    let limits = Limits {
        max_read_lines: 3,
        default_read_limit: 5,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], ringfence_fs::Access::ReadWrite);
    fx.write("a.txt", lines(10));
    let out = fx.ok("read_file", json!({"path": "a.txt"})).await;
    assert!(out.contains("Showing lines 1-3 of 10."), "{out}");
    // Without offset/limit the spill holds the whole file.
    let spill = spill_path(&out);
    assert_eq!(std::fs::read_to_string(spill).unwrap(), lines(10));
    // With them, the requested window, and the notice says which lines those are.
    let out = fx
        .ok(
            "read_file",
            json!({"path": "a.txt", "offset": 2, "limit": 4}),
        )
        .await;
    assert!(out.contains("Showing lines 2-4 of 10."), "{out}");
    assert!(
        out.contains("(The saved file holds lines 2-5 of the original.)"),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(spill_path(&out)).unwrap(),
        "line 2\nline 3\nline 4\nline 5\n"
    );
}

#[tokio::test]
async fn denylisted_files_cannot_be_read() {
    let fx = Fx::with(
        Limits::default(),
        &["*.env", "secrets/"],
        ringfence_fs::Access::ReadWrite,
    );
    fx.write(".env", "KEY=1\n");
    fx.write("secrets/k.txt", "s\n");
    fx.write("ok.txt", "fine\n");
    std::os::unix::fs::symlink("secrets/k.txt", fx.path("alias.txt")).unwrap();
    for p in [".env", "secrets/k.txt", "alias.txt", "./secrets/../.env"] {
        let err = fx.err("read_file", json!({"path": p})).await;
        assert_eq!(err.kind, ToolErrorKind::Denied, "{p}");
    }
    fx.ok("read_file", json!({"path": "ok.txt"})).await;
}

#[tokio::test]
async fn old_spill_files_are_pruned_and_new_ones_kept() {
    let fx = Fx::new();
    fx.write("big.txt", lines(600));
    let out = fx.ok("read_file", json!({"path": "big.txt"})).await;
    let fresh = spill_path(&out);
    let old = fx.data.join("tool-output/old-output");
    std::fs::write(&old, "x").unwrap();
    let f = std::fs::File::options().write(true).open(&old).unwrap();
    f.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 86_400))
        .unwrap();
    drop(f);
    let removed = fx
        .ctx
        .spill
        .prune(std::time::Duration::from_secs(7 * 86_400));
    assert_eq!(removed, 1);
    assert!(!old.exists());
    assert!(std::path::Path::new(&fresh).exists());
}

#[tokio::test]
async fn files_too_large_to_rewrite_are_read_but_not_tracked() {
    let limits = Limits {
        max_edit_bytes: 10,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], ringfence_fs::Access::ReadWrite);
    fx.write("big.txt", lines(5));
    fx.ok("read_file", json!({"path": "big.txt"})).await;
    assert!(ringfence_files::reads(&fx.ctx.session).is_empty());
    let err = fx
        .err("write_file", json!({"path": "big.txt", "content": "x"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::TooLarge);
}

#[tokio::test]
async fn a_gigantic_line_is_cut_not_held_in_memory() {
    let fx = Fx::new();
    // 3 MiB on one line, read with offset/limit (which bypasses the 1 MB threshold).
    let mut body = "x".repeat(3 << 20);
    body.push_str("\nnext\n");
    fx.write("one-line.min.js", &body);
    let out = fx
        .ok(
            "read_file",
            json!({"path": "one-line.min.js", "offset": 1, "limit": 2}),
        )
        .await;
    assert!(
        out.contains("more characters]"),
        "{}",
        &out[out.len().saturating_sub(300)..]
    );
    // The spill holds the line cut at 1 MiB, then the next line.
    let spill = std::fs::read_to_string(spill_path(&out)).unwrap();
    assert_eq!(spill.len(), (1 << 20) + "\nnext\n".len());
}
