//! ringfence's own file tools beyond the seeds: copy_file, multi_edit, directory_tree,
//! undo_edit (with the in-memory journal; the SQLite journal across restarts is tested in the
//! binary's CLI tests), and the tolerant matching of edit_file.

use std::os::unix::fs::PermissionsExt;

use crate::common::Fx;
use ringfence_core::{Limits, ToolErrorKind};
use ringfence_fs::Access;
use serde_json::json;

// ---------------------------------------------------------------------------------------
// copy_file

#[tokio::test]
async fn copy_file_copies_content_and_mode_and_never_overwrites_unasked() {
    let fx = Fx::new();
    fx.write("run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(fx.path("run.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let out = fx
        .ok(
            "copy_file",
            json!({"source": "run.sh", "destination": "bin/run2.sh"}),
        )
        .await;
    assert_eq!(
        out,
        format!("Copied: {} -> {}", fx.abs("run.sh"), fx.abs("bin/run2.sh"))
    );
    assert_eq!(fx.read_str("bin/run2.sh"), "#!/bin/sh\necho hi\n");
    let mode = std::fs::metadata(fx.path("bin/run2.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o750);
    fx.write("other.txt", "keep me");
    let err = fx
        .err(
            "copy_file",
            json!({"source": "run.sh", "destination": "other.txt"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::AlreadyExists);
    assert_eq!(fx.read_str("other.txt"), "keep me");
    // Replacing it needs what write_file needs: a read of it first.
    fx.ok("read_file", json!({"path": "other.txt"})).await;
    fx.ok(
        "copy_file",
        json!({"source": "run.sh", "destination": "other.txt", "overwrite": true}),
    )
    .await;
    assert_eq!(fx.read_str("other.txt"), "#!/bin/sh\necho hi\n");
    // Into a directory with a trailing slash.
    fx.ok(
        "copy_file",
        json!({"source": "run.sh", "destination": "bin/"}),
    )
    .await;
    assert!(fx.path("bin/run.sh").exists());
}

#[tokio::test]
async fn copy_file_copies_trees_whole_with_links_as_links() {
    let fx = Fx::new();
    fx.write("src/a.txt", "A");
    fx.write("src/deep/b.txt", "B");
    std::os::unix::fs::symlink("a.txt", fx.path("src/link")).unwrap();
    let out = fx
        .ok("copy_file", json!({"source": "src", "destination": "dst"}))
        .await;
    assert!(out.contains("(3 files, 1 directories, 2 bytes)"), "{out}"); // the link counts as a file
    assert_eq!(fx.read_str("dst/a.txt"), "A");
    assert_eq!(fx.read_str("dst/deep/b.txt"), "B");
    assert_eq!(
        std::fs::read_link(fx.path("dst/link")).unwrap().to_str(),
        Some("a.txt")
    );
    // No temporary directory is left behind, and the source is untouched.
    let names: Vec<String> = std::fs::read_dir(&fx.root)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(names.iter().all(|n| !n.ends_with(".rftmp")), "{names:?}");
    assert_eq!(fx.read_str("src/a.txt"), "A");
    // A directory never lands on an existing entry, nor inside itself.
    let err = fx
        .err(
            "copy_file",
            json!({"source": "src", "destination": "dst", "overwrite": true}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::AlreadyExists);
    let err = fx
        .err(
            "copy_file",
            json!({"source": "src", "destination": "src/inner"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::Refused);
    let err = fx
        .err(
            "copy_file",
            json!({"source": "missing", "destination": "x"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
}

#[tokio::test]
async fn copy_file_between_roots_respects_access() {
    let fx = Fx::with_roots(
        Limits::default(),
        &[],
        &[("rw", Access::ReadWrite), ("ro", Access::ReadOnly)],
    );
    std::fs::write(fx.roots[1].join("ref.txt"), "reference").unwrap();
    // Reading from a read-only root is fine…
    fx.ok(
        "copy_file",
        json!({"source": fx.roots[1].join("ref.txt").display().to_string(), "destination": "mine.txt"}),
    )
    .await;
    assert_eq!(fx.read_str("mine.txt"), "reference");
    // …writing into it is not.
    let err = fx
        .err(
            "copy_file",
            json!({"source": "mine.txt", "destination": fx.roots[1].join("new.txt").display().to_string()}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::ReadOnly);
    assert!(!fx.roots[1].join("new.txt").exists());
}

// ---------------------------------------------------------------------------------------
// multi_edit

#[tokio::test]
async fn multi_edit_applies_all_edits_in_order() {
    let fx = Fx::new();
    fx.write("m.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    fx.ok("read_file", json!({"path": "m.rs"})).await;
    let out = fx
        .ok(
            "multi_edit",
            json!({"path": "m.rs", "edits": [
                {"old_string": "fn a()", "new_string": "fn alpha()"},
                {"old_string": "fn alpha() {}", "new_string": "fn alpha() { b() }"},
                {"old_string": "{}", "new_string": "{ }", "replace_all": true},
            ]}),
        )
        .await;
    assert!(
        out.starts_with("Edited m.rs: 3 edits, 4 replacements."),
        "{out}"
    );
    assert!(
        out.contains("-fn a() {}\n-fn b() {}\n-fn c() {}\n+fn alpha() { b() }\n"),
        "{out}"
    );
    assert_eq!(
        fx.read_str("m.rs"),
        "fn alpha() { b() }\nfn b() { }\nfn c() { }\n"
    );
}

#[tokio::test]
async fn multi_edit_is_all_or_nothing() {
    let fx = Fx::new();
    fx.write("m.txt", "one two two\n");
    fx.ok("read_file", json!({"path": "m.txt"})).await;
    for (edits, kind, which) in [
        (
            json!([{"old_string": "one", "new_string": "1"}, {"old_string": "three", "new_string": "3"}]),
            ToolErrorKind::NoMatch,
            "edit 2 of 2",
        ),
        (
            json!([{"old_string": "one", "new_string": "1"}, {"old_string": "two", "new_string": "2"}]),
            ToolErrorKind::AmbiguousMatch,
            "edit 2 of 2",
        ),
        (
            json!([{"old_string": "", "new_string": "x"}]),
            ToolErrorKind::InvalidArgument,
            "edit 1",
        ),
        (json!([]), ToolErrorKind::InvalidArgument, "empty"),
        (
            json!([{"old_string": "one", "new_string": "1"}, {"old_string": "1", "new_string": "one"}]),
            ToolErrorKind::InvalidArgument,
            "cancel out",
        ),
    ] {
        let err = fx
            .err("multi_edit", json!({"path": "m.txt", "edits": edits}))
            .await;
        assert_eq!(err.kind, kind, "{}", err.message);
        assert!(err.message.contains(which), "{}", err.message);
        assert_eq!(fx.read_str("m.txt"), "one two two\n");
    }
}

#[tokio::test]
async fn multi_edit_needs_a_read() {
    let fx = Fx::new();
    fx.write("m.txt", "x\n");
    let err = fx
        .err(
            "multi_edit",
            json!({"path": "m.txt", "edits": [{"old_string": "x", "new_string": "y"}]}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::NotReadFirst);
}

// ---------------------------------------------------------------------------------------
// Tolerant matching in edit_file.

#[tokio::test]
async fn edit_file_tolerates_trailing_whitespace_and_crlf_when_unique() {
    let fx = Fx::new();
    // A file with mixed endings (so it is not treated as a CRLF file) and trailing spaces.
    fx.write("t.py", "def f():  \r\n    return 1\nx = 2\n");
    fx.ok("read_file", json!({"path": "t.py"})).await;
    let out = fx
        .ok(
            "edit_file",
            json!({"path": "t.py", "old_string": "def f():\n    return 1", "new_string": "def f():\n    return 42"}),
        )
        .await;
    assert!(out.contains("trailing whitespace"), "{out}");
    assert_eq!(fx.read_str("t.py"), "def f():\n    return 42\nx = 2\n");
}

#[tokio::test]
async fn edit_file_does_not_guess_between_two_loose_candidates() {
    let fx = Fx::new();
    fx.write("t.txt", "a = 1 \na = 1\t\n");
    fx.ok("read_file", json!({"path": "t.txt"})).await;
    let err = fx
        .err(
            "edit_file",
            json!({"path": "t.txt", "old_string": "a = 1  \n", "new_string": "b\n"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::NoMatch);
    assert_eq!(fx.read_str("t.txt"), "a = 1 \na = 1\t\n");
}

// ---------------------------------------------------------------------------------------
// directory_tree

#[tokio::test]
async fn directory_tree_indents_limits_depth_and_skips_ignored() {
    let fx = Fx::new();
    fx.write("a/b/c/d.txt", "");
    fx.write("a/top.txt", "");
    fx.write("z.txt", "");
    fx.write(".gitignore", "target/\n");
    fx.write("target/big.bin", "");
    let out = fx.ok("directory_tree", json!({"max_depth": 2})).await;
    assert_eq!(
        out,
        format!(
            "{}/\n.gitignore\na/\n  b/\n  top.txt\nz.txt\n(1 directories at depth 2 not expanded; raise max_depth or call directory_tree on one of them.)",
            fx.abs("")
        )
    );
    let out = fx
        .ok("directory_tree", json!({"path": "a", "max_depth": 5}))
        .await;
    assert_eq!(
        out,
        format!("{}/\nb/\n  c/\n    d.txt\ntop.txt", fx.abs("a"))
    );
    let out = fx
        .ok(
            "directory_tree",
            json!({"include_ignored": true, "max_depth": 1}),
        )
        .await;
    assert!(out.contains("\ntarget/"), "{out}");
    let out = fx
        .ok("directory_tree", json!({"max_entries": 2, "max_depth": 9}))
        .await;
    assert!(out.contains("… showing 2 of 7 entries."), "{out}");
    for bad in [json!({"max_depth": 0}), json!({"max_entries": 0})] {
        assert_eq!(
            fx.err("directory_tree", bad).await.kind,
            ToolErrorKind::InvalidArgument
        );
    }
    assert_eq!(
        fx.err("directory_tree", json!({"path": "z.txt"}))
            .await
            .kind,
        ToolErrorKind::WrongType
    );
}

// ---------------------------------------------------------------------------------------
// undo_edit

#[tokio::test]
async fn undo_walks_back_through_every_kind_of_change() {
    let fx = Fx::new();
    fx.ok("write_file", json!({"path": "u.txt", "content": "v1\n"}))
        .await;
    fx.ok("write_file", json!({"path": "u.txt", "content": "v2\n"}))
        .await;
    fx.ok(
        "edit_file",
        json!({"path": "u.txt", "old_string": "v2", "new_string": "v3"}),
    )
    .await;
    fx.ok(
        "insert_file_content",
        json!({"path": "u.txt", "content": "v4"}),
    )
    .await;
    fx.ok(
        "replace_file_lines",
        json!({"path": "u.txt", "content": "v5", "start_line": 1, "end_line": 2}),
    )
    .await;
    fx.ok(
        "replace_file_content",
        json!({"path": "u.txt", "old_content": "v5", "new_content": "v6"}),
    )
    .await;
    fx.ok(
        "multi_edit",
        json!({"path": "u.txt", "edits": [{"old_string": "v6", "new_string": "v7"}]}),
    )
    .await;
    let expected = ["v6\n", "v5\n", "v3\nv4\n", "v3\n", "v2\n", "v1\n"];
    for want in expected {
        let out = fx.ok("undo_edit", json!({"path": "u.txt"})).await;
        assert!(out.starts_with("Undid "), "{out}");
        assert_eq!(fx.read_str("u.txt"), want);
    }
    // The first change created the file: undoing it removes the file.
    let out = fx.ok("undo_edit", json!({"path": "u.txt"})).await;
    assert!(
        out.contains("did not exist before, so it was removed"),
        "{out}"
    );
    assert!(!fx.path("u.txt").exists());
    let err = fx.err("undo_edit", json!({"path": "u.txt"})).await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
}

#[tokio::test]
async fn undo_restores_a_deleted_file() {
    let fx = Fx::new();
    fx.write("keep.txt", "precious\n");
    fx.ok("delete_file", json!({"path": "keep.txt"})).await;
    assert!(!fx.path("keep.txt").exists());
    let out = fx.ok("undo_edit", json!({"path": "keep.txt"})).await;
    assert!(out.contains("restored"), "{out}");
    assert_eq!(fx.read_str("keep.txt"), "precious\n");
}

#[tokio::test]
async fn undo_refuses_when_someone_changed_the_file_since() {
    let fx = Fx::new();
    fx.ok("write_file", json!({"path": "c.txt", "content": "mine\n"}))
        .await;
    fx.ok(
        "write_file",
        json!({"path": "c.txt", "content": "mine 2\n"}),
    )
    .await;
    fx.write("c.txt", "the user's work\n");
    let err = fx.err("undo_edit", json!({"path": "c.txt"})).await;
    assert_eq!(err.kind, ToolErrorKind::Conflict);
    assert!(
        err.message.contains("Nothing was changed"),
        "{}",
        err.message
    );
    assert_eq!(fx.read_str("c.txt"), "the user's work\n");
    // Deleted since: also a conflict, and nothing is recreated.
    std::fs::remove_file(fx.path("c.txt")).unwrap();
    let err = fx.err("undo_edit", json!({"path": "c.txt"})).await;
    assert_eq!(err.kind, ToolErrorKind::Conflict);
    assert!(!fx.path("c.txt").exists());
}

#[tokio::test]
async fn undo_in_a_read_only_root_is_refused() {
    let fx = Fx::with_roots(
        Limits::default(),
        &[],
        &[("rw", Access::ReadWrite), ("ro", Access::ReadOnly)],
    );
    let p = fx.roots[1].join("x.txt").display().to_string();
    let err = fx.err("undo_edit", json!({"path": p})).await;
    assert_eq!(err.kind, ToolErrorKind::ReadOnly);
}

#[tokio::test]
async fn overwriting_by_move_or_copy_needs_a_read_and_can_be_undone() {
    let fx = Fx::new();
    fx.write("new.txt", "new\n");
    fx.write("old.txt", "precious\n");
    for tool in ["copy_file", "move_file"] {
        let err = fx
            .err(
                tool,
                json!({"source": "new.txt", "destination": "old.txt", "overwrite": true}),
            )
            .await;
        assert_eq!(err.kind, ToolErrorKind::NotReadFirst, "{tool}");
        assert_eq!(fx.read_str("old.txt"), "precious\n");
    }
    fx.ok("read_file", json!({"path": "old.txt"})).await;
    fx.ok(
        "move_file",
        json!({"source": "new.txt", "destination": "old.txt", "overwrite": true}),
    )
    .await;
    assert_eq!(fx.read_str("old.txt"), "new\n");
    // Both sides come back: the replaced file, and the moved one at its old path.
    fx.ok("undo_edit", json!({"path": "old.txt"})).await;
    assert_eq!(fx.read_str("old.txt"), "precious\n");
    fx.ok("undo_edit", json!({"path": "new.txt"})).await;
    assert_eq!(fx.read_str("new.txt"), "new\n");
}

#[tokio::test]
async fn undo_of_a_delete_restores_the_mode() {
    let fx = Fx::new();
    fx.write("key.pem", "secret\n");
    std::fs::set_permissions(fx.path("key.pem"), std::fs::Permissions::from_mode(0o600)).unwrap();
    fx.ok("delete_file", json!({"path": "key.pem"})).await;
    fx.ok("undo_edit", json!({"path": "key.pem"})).await;
    let mode = std::fs::metadata(fx.path("key.pem"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[tokio::test]
async fn late_non_utf8_bytes_are_decoded_not_replaced() {
    let fx = Fx::new();
    // 10,000 ASCII bytes (past the 8,192-byte sample), then windows-1252.
    let mut bytes = "a\n".repeat(5000).into_bytes();
    bytes.extend_from_slice(b"caf\xe9\n");
    fx.write("late.txt", &bytes);
    let out = fx
        .ok(
            "read_file",
            json!({"path": "late.txt", "offset": 5001, "limit": 1}),
        )
        .await;
    assert!(out.contains("café"), "{out}");
    assert!(out.contains("Decoded from windows-1252"), "{out}");
    // A whole-file write keeps the encoding instead of turning it into UTF-8.
    fx.ok(
        "write_file",
        json!({"path": "late.txt", "content": "déjà vu\n"}),
    )
    .await;
    assert_eq!(fx.read("late.txt"), b"d\xe9j\xe0 vu\n".to_vec());
}

#[tokio::test]
async fn blank_lines_before_a_missing_final_newline_survive_a_line_edit() {
    let fx = Fx::new();
    fx.write("b.txt", "x\n\n\ny");
    fx.ok("read_file", json!({"path": "b.txt"})).await;
    fx.ok(
        "replace_file_lines",
        json!({"path": "b.txt", "content": "", "start_line": 4}),
    )
    .await;
    assert_eq!(fx.read_str("b.txt"), "x\n\n");
}
