//! write_file and edit_file: read-first gate, staleness by content hash, atomicity helpers,
//! kept conventions (mode, CRLF, BOM, final newline), diffs and match errors.

use std::os::unix::fs::PermissionsExt;

use crate::common::Fx;
use ringfence_core::{Limits, ToolErrorKind};
use ringfence_fs::Access;
use serde_json::json;

#[tokio::test]
async fn write_creates_new_files_and_parents_without_a_read() {
    let fx = Fx::new();
    let out = fx
        .ok(
            "write_file",
            json!({"path": "deep/er/new.md", "content": "hello\n"}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "Written: {} (deep/er/new.md, 6 bytes, new file).",
            fx.abs("deep/er/new.md")
        )
    );
    assert_eq!(fx.read_str("deep/er/new.md"), "hello\n");
    // Our own write counts as a read: overwrite straight away is allowed.
    let out = fx
        .ok(
            "write_file",
            json!({"path": "deep/er/new.md", "content": "bye\n"}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "Written: {} (deep/er/new.md, 4 bytes).",
            fx.abs("deep/er/new.md")
        )
    );
}

#[tokio::test]
async fn overwrite_requires_a_read_in_this_session() {
    let fx = Fx::new();
    fx.write("a.txt", "old\n");
    let err = fx
        .err("write_file", json!({"path": "a.txt", "content": "new\n"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::NotReadFirst);
    assert!(err.message.contains("read_file"));
    assert_eq!(fx.read_str("a.txt"), "old\n");
    fx.ok("read_file", json!({"path": "a.txt"})).await;
    fx.ok("write_file", json!({"path": "a.txt", "content": "new\n"}))
        .await;
    assert_eq!(fx.read_str("a.txt"), "new\n");
}

#[tokio::test]
async fn the_gate_knows_a_file_by_its_resolved_path() {
    let fx = Fx::new();
    fx.write("d/a.txt", "x\n");
    std::os::unix::fs::symlink("d/a.txt", fx.path("link.txt")).unwrap();
    fx.ok("read_file", json!({"path": "link.txt"})).await;
    fx.ok(
        "edit_file",
        json!({"path": "./d/../d/a.txt", "old_string": "x", "new_string": "y"}),
    )
    .await;
    assert_eq!(fx.read_str("d/a.txt"), "y\n");
    // The symlink is still a symlink: we wrote through it to its target.
    assert!(
        std::fs::symlink_metadata(fx.path("link.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
}

#[tokio::test]
async fn stale_check_uses_content_not_mtime() {
    let fx = Fx::new();
    fx.write("a.txt", "v1\n");
    fx.ok("read_file", json!({"path": "a.txt"})).await;
    // A touch (new mtime, same bytes) is not a change.
    let f = std::fs::File::options()
        .write(true)
        .open(fx.path("a.txt"))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(60))
        .unwrap();
    drop(f);
    fx.ok(
        "edit_file",
        json!({"path": "a.txt", "old_string": "v1", "new_string": "v2"}),
    )
    .await;
    // A change of content by someone else is, even with the same size and mtime restored.
    let before = std::fs::metadata(fx.path("a.txt"))
        .unwrap()
        .modified()
        .unwrap();
    std::fs::write(fx.path("a.txt"), "v9\n").unwrap();
    let f = std::fs::File::options()
        .write(true)
        .open(fx.path("a.txt"))
        .unwrap();
    f.set_modified(before).unwrap();
    drop(f);
    let err = fx
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "v9", "new_string": "v3"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::Stale);
    let err = fx
        .err("write_file", json!({"path": "a.txt", "content": "z"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::Stale);
    assert_eq!(fx.read_str("a.txt"), "v9\n");
    fx.ok("read_file", json!({"path": "a.txt"})).await;
    fx.ok(
        "edit_file",
        json!({"path": "a.txt", "old_string": "v9", "new_string": "v3"}),
    )
    .await;
}

#[tokio::test]
async fn write_keeps_mode_crlf_bom_and_final_newline() {
    let fx = Fx::new();
    fx.write("run.sh", "#!/bin/sh\r\necho hi\r\n");
    std::fs::set_permissions(fx.path("run.sh"), std::fs::Permissions::from_mode(0o751)).unwrap();
    fx.ok("read_file", json!({"path": "run.sh"})).await;
    let out = fx
        .ok(
            "write_file",
            json!({"path": "run.sh", "content": "#!/bin/sh\necho bye"}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "Written: {} (run.sh, 21 bytes). Kept the file's CRLF line endings.",
            fx.abs("run.sh")
        )
    );
    assert_eq!(fx.read_str("run.sh"), "#!/bin/sh\r\necho bye\r\n");
    let mode = std::fs::metadata(fx.path("run.sh"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o751);

    fx.write("bom.txt", "\u{feff}a\nb");
    fx.ok("read_file", json!({"path": "bom.txt"})).await;
    let out = fx
        .ok(
            "write_file",
            json!({"path": "bom.txt", "content": "c\nd\n"}),
        )
        .await;
    assert!(
        out.contains("byte-order mark, missing final newline"),
        "{out}"
    );
    assert_eq!(fx.read_str("bom.txt"), "\u{feff}c\nd");
}

#[tokio::test]
async fn new_files_get_0644() {
    let fx = Fx::new();
    fx.ok("write_file", json!({"path": "n.txt", "content": "x"}))
        .await;
    let mode = std::fs::metadata(fx.path("n.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o644);
}

#[tokio::test]
async fn write_refuses_directories_read_only_roots_and_outside_paths() {
    let fx = Fx::new();
    std::fs::create_dir(fx.path("dir")).unwrap();
    let err = fx
        .err("write_file", json!({"path": "dir", "content": "x"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::WrongType);
    let err = fx
        .err(
            "write_file",
            json!({"path": "../escape.txt", "content": "x"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::OutsideWorkspace);
    assert!(!fx.tmp.path().join("escape.txt").exists());
    let ro = Fx::with(Limits::default(), &[], Access::ReadOnly);
    let err = ro
        .err("write_file", json!({"path": "x.txt", "content": "x"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::ReadOnly);
    assert!(!ro.path("x.txt").exists());
}

#[tokio::test]
async fn edit_replaces_a_unique_match_and_returns_a_diff() {
    let fx = Fx::new();
    fx.write(
        "src/lib.rs",
        "fn a() {}\n\nfn b() {\n    1\n}\n\nfn c() {}\n",
    );
    fx.ok("read_file", json!({"path": "src/lib.rs"})).await;
    let out = fx
        .ok(
            "edit_file",
            json!({"path": "src/lib.rs", "old_string": "    1\n", "new_string": "    2\n    3\n"}),
        )
        .await;
    insta::assert_snapshot!(out, @r"
    Edited src/lib.rs: 1 replacement.

    --- a/src/lib.rs
    +++ b/src/lib.rs
    @@ -1,7 +1,8 @@
     fn a() {}
     
     fn b() {
    -    1
    +    2
    +    3
     }
     
     fn c() {}
    ");
    assert_eq!(
        fx.read_str("src/lib.rs"),
        "fn a() {}\n\nfn b() {\n    2\n    3\n}\n\nfn c() {}\n"
    );
}

#[tokio::test]
async fn ambiguous_match_needs_replace_all() {
    let fx = Fx::new();
    fx.write("a.txt", "x = 1\ny = 2\nx = 1\n");
    fx.ok("read_file", json!({"path": "a.txt"})).await;
    let err = fx
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 3"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::AmbiguousMatch);
    assert!(
        err.message.contains("2 times (at lines 1, 3)"),
        "{}",
        err.message
    );
    assert_eq!(fx.read_str("a.txt"), "x = 1\ny = 2\nx = 1\n");
    let out = fx
        .ok("edit_file", json!({"path": "a.txt", "old_string": "x = 1", "new_string": "x = 3", "replace_all": true}))
        .await;
    assert!(out.starts_with("Edited a.txt: 2 replacements."), "{out}");
    assert_eq!(fx.read_str("a.txt"), "x = 3\ny = 2\nx = 3\n");
}

#[tokio::test]
async fn no_match_shows_the_closest_lines() {
    let fx = Fx::new();
    fx.write("cfg.py", "def main():\n    retries = 3\n    timeout = 10\n");
    fx.ok("read_file", json!({"path": "cfg.py"})).await;
    let err = fx
        .err(
            "edit_file",
            json!({"path": "cfg.py", "old_string": "  retries=3", "new_string": "  retries=5"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::NoMatch);
    insta::assert_snapshot!(err.message, @r"
    cfg.py: old_string was not found in the file. It must match exactly, including whitespace and indentation. The closest lines are:
         2	    retries = 3
    Copy the text exactly from read_file output (without the line-number prefix).
    ");
}

#[tokio::test]
async fn edit_argument_errors() {
    let fx = Fx::new();
    fx.write("a.txt", "abc\n");
    let err = fx
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "abc", "new_string": "abc"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    let err = fx
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "", "new_string": "x"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    let err = fx
        .err(
            "edit_file",
            json!({"path": "a.txt", "old_string": "abc", "new_string": "x"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::NotReadFirst);
    let err = fx
        .err(
            "edit_file",
            json!({"path": "nope.txt", "old_string": "abc", "new_string": "x"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
    let err = fx
        .err("edit_file", json!({"path": "a.txt", "old_string": "abc"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    assert!(err.message.contains("new_string"), "{}", err.message);
}

#[tokio::test]
async fn crlf_file_stays_crlf_when_strings_use_lf() {
    let fx = Fx::new();
    fx.write("win.txt", "a\r\nb\r\nc\r\n");
    fx.ok("read_file", json!({"path": "win.txt"})).await;
    let out = fx
        .ok(
            "edit_file",
            json!({"path": "win.txt", "old_string": "a\nb", "new_string": "a\nB\nb2"}),
        )
        .await;
    assert!(out.contains("Kept the file's CRLF line endings."), "{out}");
    assert_eq!(fx.read_str("win.txt"), "a\r\nB\r\nb2\r\nc\r\n");
}

#[tokio::test]
async fn edit_keeps_bom_mode_and_missing_final_newline() {
    let fx = Fx::new();
    fx.write("b.txt", "\u{feff}one\ntwo");
    std::fs::set_permissions(fx.path("b.txt"), std::fs::Permissions::from_mode(0o600)).unwrap();
    fx.ok("read_file", json!({"path": "b.txt"})).await;
    fx.ok(
        "edit_file",
        json!({"path": "b.txt", "old_string": "two", "new_string": "three\n"}),
    )
    .await;
    assert_eq!(fx.read_str("b.txt"), "\u{feff}one\nthree");
    let mode = std::fs::metadata(fx.path("b.txt"))
        .unwrap()
        .permissions()
        .mode()
        & 0o7777;
    assert_eq!(mode, 0o600);
}

#[tokio::test]
async fn edits_in_a_row_need_no_rereads() {
    let fx = Fx::new();
    fx.write("a.txt", "1\n2\n3\n");
    fx.ok(
        "read_file",
        json!({"path": "a.txt", "offset": 2, "limit": 1}),
    )
    .await;
    for (o, n) in [("1", "one"), ("2", "two"), ("3", "three")] {
        fx.ok(
            "edit_file",
            json!({"path": "a.txt", "old_string": o, "new_string": n}),
        )
        .await;
    }
    assert_eq!(fx.read_str("a.txt"), "one\ntwo\nthree\n");
}

#[tokio::test]
async fn edit_of_a_large_file_shows_only_the_changed_region() {
    let fx = Fx::new();
    let body: String = (1..=200_000).map(|i| format!("row {i}\n")).collect();
    fx.write("big.txt", &body);
    fx.ok(
        "read_file",
        json!({"path": "big.txt", "offset": 1, "limit": 1}),
    )
    .await;
    let out = fx
        .ok(
            "edit_file",
            json!({"path": "big.txt", "old_string": "row 150000\n", "new_string": "ROW\n"}),
        )
        .await;
    assert!(out.contains("@@ -149997,7 +149997,7 @@"), "{out}");
    assert!(out.lines().count() < 20);
    let after = fx.read_str("big.txt");
    assert_eq!(
        after.len(),
        body.len() - "row 150000\n".len() + "ROW\n".len()
    );
}

#[tokio::test]
async fn edit_refuses_binary_files() {
    let fx = Fx::new();
    fx.write("b.bin", b"ab\x00cd\xff");
    // read_file refuses to read it, so the gate can never open for it.
    let err = fx.err("read_file", json!({"path": "b.bin"})).await;
    assert_eq!(err.kind, ToolErrorKind::Binary);
    let err = fx
        .err(
            "edit_file",
            json!({"path": "b.bin", "old_string": "ab", "new_string": "x"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::NotReadFirst);
}

#[tokio::test]
async fn replace_all_that_would_blow_up_the_file_is_refused_before_allocating() {
    let limits = Limits {
        max_edit_bytes: 1_000_000,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    fx.write("a.txt", "a".repeat(200_000));
    fx.ok("read_file", json!({"path": "a.txt"})).await;
    let err = fx
        .err("edit_file", json!({"path": "a.txt", "old_string": "a", "new_string": "b".repeat(20_000), "replace_all": true}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::TooLarge);
    assert!(
        err.message.contains("4,000,000,000 bytes"),
        "{}",
        err.message
    );
    assert_eq!(fx.read("a.txt").len(), 200_000);
}

#[tokio::test]
async fn crlf_edit_keeps_stray_carriage_returns_on_other_lines() {
    let fx = Fx::new();
    fx.write("f.txt", "keep\r\r\nline2\r\nline3\r\n");
    fx.ok("read_file", json!({"path": "f.txt"})).await;
    fx.ok(
        "edit_file",
        json!({"path": "f.txt", "old_string": "line3", "new_string": "LINE3"}),
    )
    .await;
    assert_eq!(fx.read_str("f.txt"), "keep\r\r\nline2\r\nLINE3\r\n");
}
