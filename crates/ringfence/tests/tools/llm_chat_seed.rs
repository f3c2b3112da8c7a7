//! The thirteen tools of seed 002 (llm-chat): every documented example, verbatim (with the
//! seed's `/my/project` standing for the test's root), then the failure paths and the
//! behaviour the seed describes in prose (the read-before-write pool, search limits,
//! workspaces).

use crate::common::Fx;
use ringfence_core::{Content, Limits, ToolErrorKind};
use ringfence_fs::Access;
use serde_json::json;

fn numbered(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

// ---------------------------------------------------------------------------------------
// The documented examples.

#[tokio::test]
async fn read_file_single_file_example() {
    let fx = Fx::new();
    fx.write("src/index.ts", numbered(42));
    let out = fx.ok("read_file", json!({"paths": ["src/index.ts"]})).await;
    let header = format!("--- {} (lines 1-42 of 42) ---\n", fx.abs("src/index.ts"));
    assert_eq!(out, format!("{header}{}", numbered(42)));
}

#[tokio::test]
async fn read_file_batch_example_gives_one_result_per_file() {
    let fx = Fx::new();
    fx.write("src/main.ts", numbered(10));
    fx.write("src/utils.ts", numbered(8));
    let out = fx
        .call_full(
            "read_file",
            json!({"paths": ["src/main.ts", "src/utils.ts"]}),
        )
        .await
        .unwrap();
    assert_eq!(out.content.len(), 2);
    let Content::Text(first) = &out.content[0] else {
        panic!("text")
    };
    let Content::Text(second) = &out.content[1] else {
        panic!("text")
    };
    assert!(first.starts_with(&format!(
        "--- {} (lines 1-10 of 10) ---\n",
        fx.abs("src/main.ts")
    )));
    assert!(second.starts_with(&format!(
        "--- {} (lines 1-8 of 8) ---\n",
        fx.abs("src/utils.ts")
    )));
}

#[tokio::test]
async fn read_file_batch_partial_failure_example() {
    let fx = Fx::new();
    fx.write("exists.txt", numbered(5));
    let out = fx
        .call_full("read_file", json!({"paths": ["exists.txt", "missing.txt"]}))
        .await
        .unwrap();
    let results = &out.structured.as_ref().unwrap()["results"];
    assert_eq!(results[0]["status"], "success");
    assert_eq!(
        results[0]["result"],
        format!(
            "--- {} (lines 1-5 of 5) ---\n{}",
            fx.abs("exists.txt"),
            numbered(5)
        )
    );
    assert_eq!(results[1]["status"], "error");
    assert_eq!(
        results[1]["result"],
        format!(
            "File not found: ENOENT: no such file or directory, stat '{}'",
            fx.abs("missing.txt")
        )
    );
    // The text blocks say the same, one per file.
    assert_eq!(out.content.len(), 2);
}

#[tokio::test]
async fn write_file_example() {
    let fx = Fx::new();
    let out = fx
        .ok(
            "write_file",
            json!({"path": "notes.txt", "content": "Hello, world!"}),
        )
        .await;
    assert!(
        out.starts_with(&format!("Written: {}", fx.abs("notes.txt"))),
        "{out}"
    );
    assert_eq!(fx.read_str("notes.txt"), "Hello, world!");
}

#[tokio::test]
async fn replace_file_lines_example() {
    let fx = Fx::new();
    fx.write("src/main.ts", numbered(20));
    fx.ok("read_file", json!({"paths": ["src/main.ts"]})).await;
    let out = fx
        .ok(
            "replace_file_lines",
            json!({"path": "src/main.ts", "content": "const x = 42;", "start_line": 10, "end_line": 12}),
        )
        .await;
    assert_eq!(
        out,
        format!("Replaced lines 10-12 in {}", fx.abs("src/main.ts"))
    );
    let text = fx.read_str("src/main.ts");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 18);
    assert_eq!(lines[8], "line 9");
    assert_eq!(lines[9], "const x = 42;");
    assert_eq!(lines[10], "line 13");
}

#[tokio::test]
async fn insert_file_content_example() {
    let fx = Fx::new();
    fx.write("src/main.ts", "main();\n");
    fx.ok("read_file", json!({"paths": ["src/main.ts"]})).await;
    let out = fx
        .ok(
            "insert_file_content",
            json!({"path": "src/main.ts", "content": "import { foo } from \"./bar\";", "line": 1}),
        )
        .await;
    assert_eq!(
        out,
        format!("Inserted content at line 1 in {}", fx.abs("src/main.ts"))
    );
    assert_eq!(
        fx.read_str("src/main.ts"),
        "import { foo } from \"./bar\";\nmain();\n"
    );
}

#[tokio::test]
async fn replace_file_content_examples_first_and_all() {
    let fx = Fx::new();
    fx.write("src/main.ts", "foo(); foo();\nfoo\n");
    fx.ok("read_file", json!({"paths": ["src/main.ts"]})).await;
    let out = fx
        .ok(
            "replace_file_content",
            json!({"path": "src/main.ts", "old_content": "foo", "new_content": "bar"}),
        )
        .await;
    assert_eq!(
        out,
        format!("Replaced content in {}", fx.abs("src/main.ts"))
    );
    // The first occurrence only.
    assert_eq!(fx.read_str("src/main.ts"), "bar(); foo();\nfoo\n");
    let out = fx
        .ok(
            "replace_file_content",
            json!({"path": "src/main.ts", "old_content": "foo", "new_content": "bar", "replace_all": true}),
        )
        .await;
    assert!(out.starts_with(&format!("Replaced content in {}", fx.abs("src/main.ts"))));
    assert_eq!(fx.read_str("src/main.ts"), "bar(); bar();\nbar\n");
}

/// The tree the search examples describe.
fn search_tree(fx: &Fx) {
    fx.write("readme.txt", "read me\n");
    std::fs::create_dir_all(fx.path("docs")).unwrap();
    fx.write(
        "src/main.ts",
        "a\nb\nc\nd\ne\nf\ng\nh\ni\n   // TODO: implement this\n",
    );
    fx.write(
        "src/utils.ts",
        format!("{}   // TODO: add error handling\n", "x\n".repeat(41)),
    );
}

#[tokio::test]
async fn search_entries_name_and_content_example() {
    let fx = Fx::new();
    search_tree(&fx);
    let out = fx
        .ok(
            "search_entries",
            json!({"name_pattern": "\\.ts$", "content_pattern": "TODO"}),
        )
        .await;
    assert_eq!(
        out,
        "src/main.ts:10:    // TODO: implement this\nsrc/utils.ts:42:    // TODO: add error handling"
    );
}

#[tokio::test]
async fn search_entries_name_only_example() {
    let fx = Fx::new();
    search_tree(&fx);
    let out = fx
        .ok("search_entries", json!({"name_pattern": "\\.ts$"}))
        .await;
    assert_eq!(out, "src/main.ts\nsrc/utils.ts");
}

#[tokio::test]
async fn search_entries_content_only_example_is_case_insensitive() {
    let fx = Fx::new();
    fx.write("src/main.ts", "x\n// fixme: this is broken\n");
    fx.write("src/ok.ts", "fine\n");
    let out = fx
        .ok("search_entries", json!({"content_pattern": "FIXME"}))
        .await;
    assert_eq!(out, "src/main.ts:2: // fixme: this is broken");
}

#[tokio::test]
async fn search_entries_time_filter_example() {
    let fx = Fx::new();
    search_tree(&fx);
    let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_600_000_000);
    for rel in ["readme.txt", "docs", "src", "src/utils.ts"] {
        let f = std::fs::File::options()
            .read(true)
            .open(fx.path(rel))
            .unwrap();
        f.set_modified(old).unwrap();
    }
    let out = fx
        .ok(
            "search_entries",
            json!({"modified_after": "2025-01-01T00:00:00.000Z"}),
        )
        .await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].starts_with("src/main.ts  (created: "), "{out}");
    let re_ts = |s: &str| {
        s.len() == 24 && s.as_bytes()[10] == b'T' && s.ends_with('Z') && s.as_bytes()[19] == b'.'
    };
    let inner = lines[0]
        .trim_start_matches("src/main.ts  (created: ")
        .trim_end_matches(')');
    let (created, modified) = inner.split_once(", modified: ").unwrap();
    assert!(re_ts(created) && re_ts(modified), "{out}");
    // And before: the three old entries.
    let out = fx
        .ok(
            "search_entries",
            json!({"modified_before": "2021-01-01", "type": "file"}),
        )
        .await;
    assert_eq!(out.lines().count(), 2, "{out}");
}

#[tokio::test]
async fn search_entries_list_everything_example() {
    let fx = Fx::new();
    fx.write("readme.txt", "x\n");
    std::fs::create_dir_all(fx.path("docs")).unwrap();
    fx.write("src/main.ts", "x\n");
    let out = fx.ok("search_entries", json!({})).await;
    assert_eq!(out, "readme.txt\ndocs/\nsrc/\nsrc/main.ts");
}

#[tokio::test]
async fn list_directory_example() {
    let fx = Fx::new();
    fx.write("file1.txt", "");
    fx.write("file2.txt", "");
    std::fs::create_dir_all(fx.path("subdir")).unwrap();
    let out = fx.ok("list_directory", json!({"path": "."})).await;
    assert_eq!(out, "file1.txt\nfile2.txt\nsubdir/");
}

#[tokio::test]
async fn create_folder_example() {
    let fx = Fx::new();
    let out = fx
        .ok("create_folder", json!({"path": "src/components"}))
        .await;
    assert_eq!(
        out,
        format!("Created directory: {}/", fx.abs("src/components"))
    );
    assert!(fx.path("src/components").is_dir());
}

#[tokio::test]
async fn delete_file_examples() {
    let fx = Fx::new();
    fx.write("old-file.txt", "x");
    fx.write("old-dir/a/b.txt", "x");
    let out = fx.ok("delete_file", json!({"path": "old-file.txt"})).await;
    assert_eq!(out, format!("Deleted file: {}", fx.abs("old-file.txt")));
    let out = fx
        .ok("delete_file", json!({"path": "old-dir", "recursive": true}))
        .await;
    assert_eq!(out, format!("Deleted directory: {}", fx.abs("old-dir")));
    assert!(!fx.path("old-file.txt").exists() && !fx.path("old-dir").exists());
}

#[tokio::test]
async fn move_file_example() {
    let fx = Fx::new();
    fx.write("old-name.txt", "content");
    let out = fx
        .ok(
            "move_file",
            json!({"source": "old-name.txt", "destination": "new-name.txt"}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "Moved: {} -> {}",
            fx.abs("old-name.txt"),
            fx.abs("new-name.txt")
        )
    );
    assert_eq!(fx.read_str("new-name.txt"), "content");
    assert!(!fx.path("old-name.txt").exists());
}

#[tokio::test]
async fn file_access_info_example() {
    let fx = Fx::with_roots(
        Limits::default(),
        &[],
        &[("project", Access::ReadWrite), ("log", Access::ReadOnly)],
    );
    let out = fx.ok("file_access_info", json!({})).await;
    let (p, l) = (
        fx.roots[0].display().to_string(),
        fx.roots[1].display().to_string(),
    );
    assert_eq!(
        out,
        format!(
            "Configured file system access:\n  {p:<56} write  (current workspace)\n  {l:<56} read"
        )
    );
}

#[tokio::test]
async fn entry_info_example_fields() {
    let fx = Fx::new();
    fx.write("src/index.ts", vec![b'x'; 1240]);
    std::fs::set_permissions(
        fx.path("src/index.ts"),
        std::os::unix::fs::PermissionsExt::from_mode(0o644),
    )
    .unwrap();
    let out = fx.ok("entry_info", json!({"path": "src/index.ts"})).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], format!("Path: {}", fx.abs("src/index.ts")));
    assert_eq!(lines[1], "Type: file");
    assert_eq!(lines[2], "Size: 1240 bytes");
    assert_eq!(lines[3], "Permissions: rw-r--r--");
    let labels: Vec<&str> = lines[4..]
        .iter()
        .map(|l| l.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            "Created",
            "Modified (content)",
            "Accessed",
            "Changed (metadata)"
        ]
    );
    for l in &lines[5..8] {
        let ts = l.split(": ").nth(1).unwrap();
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(ts.ends_with('Z'), "{ts}");
    }
}

#[tokio::test]
async fn switch_workspace_example() {
    let fx = Fx::with_roots(
        Limits::default(),
        &[],
        &[
            ("project", Access::ReadWrite),
            ("another", Access::ReadWrite),
        ],
    );
    let target = fx.roots[1].display().to_string();
    let out = fx
        .ok("switch_workspace", json!({"path": target.clone()}))
        .await;
    assert_eq!(out, format!("Switched workspace to: {target}"));
    // Relative paths now resolve there.
    fx.ok("write_file", json!({"path": "here.txt", "content": "x"}))
        .await;
    assert!(fx.roots[1].join("here.txt").exists());
    let info = fx.ok("file_access_info", json!({})).await;
    assert!(
        info.lines()
            .nth(2)
            .unwrap()
            .ends_with("write  (current workspace)")
    );
}

// ---------------------------------------------------------------------------------------
// read_file: both seeds' forms, and mixing them.

#[tokio::test]
async fn read_file_accepts_both_forms_and_refuses_a_mix() {
    let fx = Fx::new();
    fx.write("a.txt", numbered(5));
    // Seed 000.
    let out = fx
        .ok(
            "read_file",
            json!({"path": "a.txt", "offset": 2, "limit": 2}),
        )
        .await;
    assert!(out.starts_with("     2\tline 2\n     3\tline 3\n"), "{out}");
    // Seed 002.
    let out = fx
        .ok(
            "read_file",
            json!({"paths": ["a.txt"], "start_line": 2, "end_line": 3}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "--- {} (lines 2-3 of 5) ---\nline 2\nline 3\n",
            fx.abs("a.txt")
        )
    );
    for bad in [
        json!({"path": "a.txt", "paths": ["a.txt"]}),
        json!({"path": "a.txt", "start_line": 2}),
        json!({"path": "a.txt", "max_chars": 10}),
        json!({"paths": ["a.txt"], "offset": 2}),
        json!({"paths": ["a.txt"], "limit": 2}),
        json!({}),
        json!({"paths": []}),
        json!({"paths": ["a.txt"], "start_line": 3, "end_line": 2}),
        json!({"paths": ["a.txt"], "start_line": 0}),
        json!({"paths": ["a.txt"], "max_chars": 0}),
    ] {
        let err = fx.err("read_file", bad.clone()).await;
        assert_eq!(
            err.kind,
            ToolErrorKind::InvalidArgument,
            "{bad}: {}",
            err.message
        );
    }
}

#[tokio::test]
async fn read_file_batch_max_chars_cuts_on_a_line_and_says_how_to_go_on() {
    let fx = Fx::new();
    fx.write("big.txt", numbered(100));
    let out = fx
        .ok("read_file", json!({"paths": ["big.txt"], "max_chars": 30}))
        .await;
    // "line N\n" is 7 characters for N < 10: four lines fit in 30.
    assert_eq!(
        out,
        format!(
            "--- {} (lines 1-4 of 100) ---\nline 1\nline 2\nline 3\nline 4\n[Cut at max_chars=30: showing lines 1-4 of 100. Read on with start_line=5.]\n",
            fx.abs("big.txt")
        )
    );
    // The default is the configured 10,000 characters.
    fx.write("huge.txt", "y".repeat(50_000));
    let out = fx.ok("read_file", json!({"paths": ["huge.txt"]})).await;
    assert!(out.contains("[Cut at max_chars=10,000"), "{}", &out[..200]);
    assert!(out.len() < 10_300);
}

#[tokio::test]
async fn read_file_batch_errors_per_file() {
    let fx = Fx::new();
    fx.write("ok.txt", "fine\n");
    fx.write("bin.dat", b"\x00\x01\x02");
    std::fs::create_dir_all(fx.path("dir")).unwrap();
    let out = fx
        .call_full(
            "read_file",
            json!({"paths": ["ok.txt", "bin.dat", "dir", "../escape.txt"]}),
        )
        .await
        .unwrap();
    let r = &out.structured.unwrap()["results"];
    assert_eq!(r[0]["status"], "success");
    for i in 1..4 {
        assert_eq!(r[i]["status"], "error", "{}", r[i]);
    }
    assert!(r[1]["result"].as_str().unwrap().starts_with("Binary file"));
    assert_eq!(r[1]["error"], "binary");
    assert_eq!(r[2]["error"], "wrong_type");
    assert_eq!(r[3]["error"], "outside_workspace");
    // A single failing file is an error result of its own kind.
    let err = fx.err("read_file", json!({"paths": ["nope.txt"]})).await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
}

#[tokio::test]
async fn read_file_batch_refuses_big_files_without_a_range() {
    let limits = Limits {
        max_file_size: 1000,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    fx.write("big.txt", numbered(500));
    let err = fx.err("read_file", json!({"paths": ["big.txt"]})).await;
    assert_eq!(err.kind, ToolErrorKind::TooLarge);
    assert!(err.message.contains("start_line"));
    let out = fx
        .ok(
            "read_file",
            json!({"paths": ["big.txt"], "start_line": 400, "end_line": 401}),
        )
        .await;
    assert!(out.contains("(lines 400-401 of 500)"), "{out}");
}

// ---------------------------------------------------------------------------------------
// The read-before-write pool.

#[tokio::test]
async fn edit_tools_require_an_explicit_read_and_detect_changes() {
    let fx = Fx::new();
    fx.write("a.txt", "one\ntwo\n");
    let edits = [
        (
            "replace_file_lines",
            json!({"path": "a.txt", "content": "x", "start_line": 1}),
        ),
        (
            "insert_file_content",
            json!({"path": "a.txt", "content": "x"}),
        ),
        (
            "replace_file_content",
            json!({"path": "a.txt", "old_content": "two", "new_content": "dos"}),
        ),
        ("write_file", json!({"path": "a.txt", "content": "new\n"})),
    ];
    for (tool, args) in &edits {
        let err = fx.err(tool, args.clone()).await;
        assert_eq!(err.kind, ToolErrorKind::NotReadFirst, "{tool}");
    }
    assert_eq!(fx.read_str("a.txt"), "one\ntwo\n");
    // Listing or searching is not reading.
    fx.ok("search_entries", json!({"content_pattern": "one"}))
        .await;
    fx.ok("entry_info", json!({"path": "a.txt"})).await;
    let err = fx.err(edits[0].0, edits[0].1.clone()).await;
    assert_eq!(err.kind, ToolErrorKind::NotReadFirst);
    // After a read every edit works, one after another (each write refreshes the record).
    fx.ok("read_file", json!({"paths": ["a.txt"]})).await;
    for (tool, args) in &edits {
        fx.ok(tool, args.clone()).await;
    }
    assert_eq!(fx.read_str("a.txt"), "new\n");
    // A change from outside makes the record stale.
    fx.write("a.txt", "changed elsewhere\n");
    let err = fx
        .err(
            "insert_file_content",
            json!({"path": "a.txt", "content": "x"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::Stale);
}

#[tokio::test]
async fn the_pool_can_be_turned_off() {
    let limits = Limits {
        require_read_before_write: false,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    fx.write("a.txt", "one\n");
    fx.ok(
        "replace_file_content",
        json!({"path": "a.txt", "old_content": "one", "new_content": "two"}),
    )
    .await;
    fx.ok("write_file", json!({"path": "a.txt", "content": "three\n"}))
        .await;
    assert_eq!(fx.read_str("a.txt"), "three\n");
}

// ---------------------------------------------------------------------------------------
// Line and content edits.

#[tokio::test]
async fn line_edits_keep_crlf_and_handle_ends() {
    let fx = Fx::new();
    fx.write("w.txt", "a\r\nb\r\nc\r\n");
    fx.ok("read_file", json!({"paths": ["w.txt"]})).await;
    fx.ok(
        "replace_file_lines",
        json!({"path": "w.txt", "content": "B1\nB2", "start_line": 2}),
    )
    .await;
    assert_eq!(fx.read_str("w.txt"), "a\r\nB1\r\nB2\r\nc\r\n");
    fx.ok(
        "insert_file_content",
        json!({"path": "w.txt", "content": "end"}),
    )
    .await;
    assert_eq!(fx.read_str("w.txt"), "a\r\nB1\r\nB2\r\nc\r\nend\r\n");
    // Empty content deletes the range.
    let out = fx
        .ok(
            "replace_file_lines",
            json!({"path": "w.txt", "content": "", "start_line": 2, "end_line": 3}),
        )
        .await;
    assert!(out.starts_with("Replaced lines 2-3 in "), "{out}");
    assert_eq!(fx.read_str("w.txt"), "a\r\nc\r\nend\r\n");
    // A file without a final newline: appending keeps it that way.
    fx.write("n.txt", "x\ny");
    fx.ok("read_file", json!({"paths": ["n.txt"]})).await;
    fx.ok(
        "insert_file_content",
        json!({"path": "n.txt", "content": "z"}),
    )
    .await;
    assert_eq!(fx.read_str("n.txt"), "x\ny\nz");
    fx.ok(
        "insert_file_content",
        json!({"path": "n.txt", "content": "w", "line": 4}),
    )
    .await;
    assert_eq!(fx.read_str("n.txt"), "x\ny\nz\nw");
}

#[tokio::test]
async fn line_edit_arguments_are_checked() {
    let fx = Fx::new();
    fx.write("a.txt", "1\n2\n3\n");
    fx.ok("read_file", json!({"paths": ["a.txt"]})).await;
    for (tool, args) in [
        (
            "replace_file_lines",
            json!({"path": "a.txt", "content": "x", "start_line": 0}),
        ),
        (
            "replace_file_lines",
            json!({"path": "a.txt", "content": "x", "start_line": 3, "end_line": 2}),
        ),
        (
            "replace_file_lines",
            json!({"path": "a.txt", "content": "x", "start_line": 2, "end_line": 9}),
        ),
        (
            "insert_file_content",
            json!({"path": "a.txt", "content": "x", "line": 0}),
        ),
        (
            "insert_file_content",
            json!({"path": "a.txt", "content": "x", "line": 6}),
        ),
        (
            "insert_file_content",
            json!({"path": "a.txt", "content": ""}),
        ),
        (
            "replace_file_content",
            json!({"path": "a.txt", "old_content": "", "new_content": "x"}),
        ),
        (
            "replace_file_content",
            json!({"path": "a.txt", "old_content": "1", "new_content": "1"}),
        ),
    ] {
        let err = fx.err(tool, args.clone()).await;
        assert_eq!(err.kind, ToolErrorKind::InvalidArgument, "{tool} {args}");
    }
    let err = fx
        .err(
            "replace_file_lines",
            json!({"path": "a.txt", "content": "x", "start_line": 2, "end_line": 9}),
        )
        .await;
    assert!(err.message.contains("has 3 lines"), "{}", err.message);
    for tool in [
        "replace_file_lines",
        "insert_file_content",
        "replace_file_content",
    ] {
        let err = fx
            .err(
                tool,
                json!({"path": "missing.txt", "content": "x", "start_line": 1, "old_content": "a", "new_content": "b"}),
            )
            .await;
        // Unknown fields are refused first for tools that do not take them; the rest say
        // the file is missing.
        assert!(
            matches!(
                err.kind,
                ToolErrorKind::NotFound | ToolErrorKind::InvalidArgument
            ),
            "{tool}: {err:?}"
        );
    }
    assert_eq!(fx.read_str("a.txt"), "1\n2\n3\n");
}

#[tokio::test]
async fn replace_file_content_tolerates_model_mistakes_once() {
    let fx = Fx::new();
    fx.write("q.py", "print(\u{201C}hi\u{201D})   \nx = 1\n");
    fx.ok("read_file", json!({"paths": ["q.py"]})).await;
    let out = fx
        .ok(
            "replace_file_content",
            json!({"path": "q.py", "old_content": "print(\"hi\")\n", "new_content": "print(\"bye\")\n"}),
        )
        .await;
    assert!(out.contains("typographic quotes"), "{out}");
    assert_eq!(fx.read_str("q.py"), "print(\"bye\")\nx = 1\n");
    // No candidate at all: the closest lines are shown.
    let err = fx
        .err(
            "replace_file_content",
            json!({"path": "q.py", "old_content": "x = 2", "new_content": "y"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::NoMatch);
    assert!(err.message.contains("x = 1"), "{}", err.message);
}

// ---------------------------------------------------------------------------------------
// search_entries limits.

#[tokio::test]
async fn search_entries_caps_results_and_says_so() {
    let fx = Fx::new();
    for i in 0..60 {
        fx.write(&format!("f{i:02}.txt"), "x\n");
    }
    let out = fx.ok("search_entries", json!({"type": "file"})).await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "f00.txt");
    assert_eq!(lines[49], "f49.txt");
    assert!(
        out.contains("Showing 50 of 60 results (max_results=50)"),
        "{out}"
    );
    let saved = crate::common::spill_path(&out);
    let all = std::fs::read_to_string(&saved).unwrap();
    assert_eq!(all.lines().count(), 60);
    let out = fx
        .ok("search_entries", json!({"type": "file", "max_results": 5}))
        .await;
    assert!(out.starts_with("f00.txt\nf01.txt\nf02.txt\nf03.txt\nf04.txt\n\nShowing 5 of 60"));
    let err = fx.err("search_entries", json!({"max_results": 5001})).await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    assert!(err.message.contains("5,000"), "{}", err.message);
}

#[tokio::test]
async fn search_entries_summarises_above_the_display_threshold() {
    let limits = Limits {
        max_display_entries: 10,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    for i in 0..30 {
        fx.write(&format!("d/f{i:02}.txt"), "x\n");
    }
    let out = fx.ok("search_entries", json!({"max_results": 100})).await;
    assert!(out.starts_with("Found 31 results"), "{out}");
    assert!(!out.contains("f00.txt"), "{out}");
    let saved = crate::common::spill_path(&out);
    assert_eq!(std::fs::read_to_string(saved).unwrap().lines().count(), 31);
}

#[tokio::test]
async fn search_entries_times_out_with_partial_results() {
    let limits = Limits {
        search_timeout_ms: 1,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    for d in 0..40 {
        for f in 0..100 {
            fx.write(&format!("d{d}/f{f}.txt"), "needle\n");
        }
    }
    let out = fx
        .ok(
            "search_entries",
            json!({"content_pattern": "needle", "max_results": 5000}),
        )
        .await;
    assert!(
        out.contains("timed out after 1 ms"),
        "{}",
        &out[out.len().saturating_sub(300)..]
    );
}

#[tokio::test]
async fn search_entries_checks_its_arguments() {
    let fx = Fx::new();
    for bad in [
        json!({"name_pattern": "("}),
        json!({"content_pattern": "[a"}),
        json!({"modified_after": "last week"}),
        json!({"created_before": "2025-02-30"}),
        json!({"type": "link"}),
        json!({"max_results": 0}),
        json!({"type": "directory", "content_pattern": "x"}),
    ] {
        let err = fx.err("search_entries", bad.clone()).await;
        assert_eq!(err.kind, ToolErrorKind::InvalidArgument, "{bad}");
    }
    let err = fx.err("search_entries", json!({"path": "nowhere"})).await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
}

#[tokio::test]
async fn search_entries_respects_max_size_and_skips_binary() {
    let fx = Fx::new();
    fx.write("small.txt", "needle\n");
    fx.write("large.txt", format!("needle\n{}", "x".repeat(5000)));
    fx.write("bin.dat", b"needle\x00\x01");
    let out = fx
        .ok(
            "search_entries",
            json!({"content_pattern": "needle", "max_size": 1000}),
        )
        .await;
    assert_eq!(out, "small.txt:1: needle");
}

// ---------------------------------------------------------------------------------------
// list_directory, entry_info, create/delete/move.

#[tokio::test]
async fn list_directory_recursive_is_depth_first_and_bounded() {
    let limits = Limits {
        max_list_entries: 4,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    fx.write("b.txt", "");
    fx.write("a/z.txt", "");
    fx.write("a/y/x.txt", "");
    fx.write("c/w.txt", "");
    fx.write(".gitignore", "ignored/\n");
    fx.write("ignored/i.txt", "");
    let out = fx
        .ok("list_directory", json!({"path": ".", "recursive": true}))
        .await;
    let (shown, notice) = out.split_once("… showing").unwrap();
    assert_eq!(shown, ".gitignore\na/\na/y/\na/y/x.txt\n");
    assert!(notice.starts_with(" 4 of 8 entries."), "{notice}");
    let saved = std::fs::read_to_string(crate::common::spill_path(&out)).unwrap();
    assert_eq!(
        saved,
        ".gitignore\na/\na/y/\na/y/x.txt\na/z.txt\nb.txt\nc/\nc/w.txt\n"
    );
    let all = fx
        .ok(
            "list_directory",
            json!({"path": "a", "recursive": true, "include_ignored": true}),
        )
        .await;
    assert_eq!(all, "y/\ny/x.txt\nz.txt");
    // Not recursive: everything, ignored or not.
    let top = fx.ok("list_directory", json!({"path": "."})).await;
    assert!(top.contains("showing 4 of 5 entries"), "{top}");
    let err = fx.err("list_directory", json!({"path": "b.txt"})).await;
    assert_eq!(err.kind, ToolErrorKind::WrongType);
    let err = fx.err("list_directory", json!({"path": "nope"})).await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
    std::fs::create_dir_all(fx.path("empty")).unwrap();
    assert_eq!(
        fx.ok("list_directory", json!({"path": "empty"})).await,
        "(empty directory)"
    );
}

#[tokio::test]
async fn entry_info_describes_directories_and_links() {
    let fx = Fx::new();
    fx.write("d/f.txt", "x");
    std::os::unix::fs::symlink("d/f.txt", fx.path("in.txt")).unwrap();
    std::os::unix::fs::symlink("gone.txt", fx.path("dangling")).unwrap();
    let out = fx.ok("entry_info", json!({"path": "d"})).await;
    assert!(out.contains("Type: directory"), "{out}");
    let out = fx.ok("entry_info", json!({"path": "in.txt"})).await;
    assert!(out.contains("Type: symlink"), "{out}");
    assert!(
        out.contains(&format!(
            "Symlink target: d/f.txt (resolves to {} (file))",
            fx.abs("d/f.txt")
        )),
        "{out}"
    );
    let out = fx.ok("entry_info", json!({"path": "dangling"})).await;
    assert!(out.contains("dangling"), "{out}");
    let err = fx.err("entry_info", json!({"path": "missing"})).await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
}

#[tokio::test]
async fn create_folder_is_idempotent_and_refuses_files() {
    let fx = Fx::new();
    fx.ok("create_folder", json!({"path": "a/b"})).await;
    let out = fx.ok("create_folder", json!({"path": "a/b"})).await;
    assert!(out.starts_with("Directory already exists: "), "{out}");
    fx.write("f", "x");
    let err = fx.err("create_folder", json!({"path": "f"})).await;
    assert_eq!(err.kind, ToolErrorKind::AlreadyExists);
    let err = fx.err("create_folder", json!({"path": "f/sub"})).await;
    assert_eq!(err.kind, ToolErrorKind::WrongType);
}

#[tokio::test]
async fn delete_file_refuses_what_it_must() {
    let fx = Fx::new();
    fx.write("full/x.txt", "x");
    let err = fx.err("delete_file", json!({"path": "full"})).await;
    assert_eq!(err.kind, ToolErrorKind::NotEmpty);
    assert!(err.message.contains("recursive"), "{}", err.message);
    assert!(fx.path("full/x.txt").exists());
    for root in [".", "~", &fx.abs("")] {
        let err = fx
            .err("delete_file", json!({"path": root, "recursive": true}))
            .await;
        assert_eq!(err.kind, ToolErrorKind::Refused, "{root}");
    }
    let err = fx.err("delete_file", json!({"path": "nope"})).await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
    // The current workspace (a subdirectory after a switch) is not deleted from under us.
    fx.ok("switch_workspace", json!({"path": "full"})).await;
    let err = fx
        .err(
            "delete_file",
            json!({"path": fx.abs("full"), "recursive": true}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::Refused);
    // An empty directory needs no flag.
    std::fs::create_dir_all(fx.path("empty")).unwrap();
    fx.ok("delete_file", json!({"path": "../empty"})).await;
    assert!(!fx.path("empty").exists());
}

#[tokio::test]
async fn move_file_refuses_to_overwrite_unless_asked() {
    let fx = Fx::new();
    fx.write("a.txt", "A");
    fx.write("b.txt", "B");
    let err = fx
        .err(
            "move_file",
            json!({"source": "a.txt", "destination": "b.txt"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::AlreadyExists);
    assert!(err.message.contains("overwrite"), "{}", err.message);
    assert_eq!(fx.read_str("b.txt"), "B");
    fx.ok("read_file", json!({"path": "b.txt"})).await;
    fx.ok(
        "move_file",
        json!({"source": "a.txt", "destination": "b.txt", "overwrite": true}),
    )
    .await;
    assert_eq!(fx.read_str("b.txt"), "A");
    assert!(!fx.path("a.txt").exists());
}

#[tokio::test]
async fn move_file_into_directories_and_between_roots() {
    let fx = Fx::with_roots(
        Limits::default(),
        &[],
        &[("one", Access::ReadWrite), ("two", Access::ReadWrite)],
    );
    fx.write("f.txt", "F");
    std::fs::create_dir_all(fx.path("dir")).unwrap();
    // An existing directory without a trailing slash is an error that says how.
    let err = fx
        .err(
            "move_file",
            json!({"source": "f.txt", "destination": "dir"}),
        )
        .await;
    assert!(err.message.contains("dir/"), "{}", err.message);
    fx.ok(
        "move_file",
        json!({"source": "f.txt", "destination": "dir/"}),
    )
    .await;
    assert_eq!(fx.read_str("dir/f.txt"), "F");
    // Missing parents are created.
    fx.ok(
        "move_file",
        json!({"source": "dir/f.txt", "destination": "new/deep/g.txt"}),
    )
    .await;
    assert_eq!(fx.read_str("new/deep/g.txt"), "F");
    // Into the other root, by absolute path.
    let dest = fx.roots[1].join("moved.txt");
    fx.ok(
        "move_file",
        json!({"source": "new/deep/g.txt", "destination": dest.display().to_string()}),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&dest).unwrap(), "F");
    // A directory into itself.
    let err = fx
        .err(
            "move_file",
            json!({"source": "new", "destination": "new/deep/x"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::Refused);
    let err = fx
        .err("move_file", json!({"source": "nope", "destination": "x"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::NotFound);
}

#[tokio::test]
async fn moving_a_read_file_keeps_it_read_under_its_new_name() {
    let fx = Fx::new();
    fx.write("a.txt", "one\n");
    fx.ok("read_file", json!({"paths": ["a.txt"]})).await;
    fx.ok(
        "move_file",
        json!({"source": "a.txt", "destination": "b.txt"}),
    )
    .await;
    fx.ok(
        "replace_file_content",
        json!({"path": "b.txt", "old_content": "one", "new_content": "two"}),
    )
    .await;
    assert_eq!(fx.read_str("b.txt"), "two\n");
}

// ---------------------------------------------------------------------------------------
// Workspaces.

#[tokio::test]
async fn switch_workspace_to_subdirectories_and_back() {
    let fx = Fx::with_roots(
        Limits::default(),
        &[],
        &[("proj", Access::ReadWrite), ("logs", Access::ReadOnly)],
    );
    fx.write("src/lib.rs", "x\n");
    let out = fx.ok("switch_workspace", json!({"path": "src"})).await;
    assert_eq!(out, format!("Switched workspace to: {}", fx.abs("src")));
    assert_eq!(
        fx.ok("list_directory", json!({"path": "."})).await,
        "lib.rs"
    );
    // `..` may climb to the root the workspace lies in.
    assert!(
        fx.ok("list_directory", json!({"path": ".."}))
            .await
            .contains("src/")
    );
    let info = fx.ok("file_access_info", json!({})).await;
    assert!(
        info.ends_with(&format!(
            "Current workspace: {} (inside {})",
            fx.abs("src"),
            fx.abs("")
        )),
        "{info}"
    );
    // A read-only root can be the workspace; writes there are refused.
    let logs = fx.roots[1].display().to_string();
    fx.ok("switch_workspace", json!({"path": logs})).await;
    let err = fx
        .err("write_file", json!({"path": "x.txt", "content": "x"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::ReadOnly);
    // Files and missing directories cannot be workspaces; nothing outside can.
    let proj_file = fx.root.join("src/lib.rs").display().to_string();
    for (bad, kind) in [
        (proj_file.as_str(), ToolErrorKind::WrongType),
        ("missing", ToolErrorKind::NotFound),
        ("/", ToolErrorKind::OutsideWorkspace),
        ("..", ToolErrorKind::OutsideWorkspace),
    ] {
        let err = fx.err("switch_workspace", json!({"path": bad})).await;
        assert_eq!(err.kind, kind, "{bad}: {}", err.message);
    }
}

#[tokio::test]
async fn a_read_only_root_nested_in_a_writable_one_stays_read_only_by_any_spelling() {
    let fx = Fx::with_roots(
        Limits::default(),
        &[],
        &[
            ("proj", Access::ReadWrite),
            ("proj/vendor", Access::ReadOnly),
        ],
    );
    fx.write("vendor/lib.rs", "pub fn f() {}\n");
    fx.ok("read_file", json!({"path": "vendor/lib.rs"})).await;
    let vendor_abs = fx.roots[1].join("lib.rs").display().to_string();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "vendor/lib.rs", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "vendor/new.rs", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "./sub/../vendor/new.rs", "content": "x"}),
        ),
        ("write_file", json!({"path": vendor_abs, "content": "x"})),
        (
            "edit_file",
            json!({"path": "vendor/lib.rs", "old_string": "f()", "new_string": "g()"}),
        ),
        ("delete_file", json!({"path": "vendor/lib.rs"})),
        ("create_folder", json!({"path": "vendor/new"})),
        (
            "move_file",
            json!({"source": "vendor/lib.rs", "destination": "lib.rs"}),
        ),
        (
            "copy_file",
            json!({"source": "vendor/lib.rs", "destination": "vendor/copy.rs"}),
        ),
    ] {
        let err = fx.err(tool, args.clone()).await;
        assert_eq!(
            err.kind,
            ToolErrorKind::ReadOnly,
            "{tool} {args}: {}",
            err.message
        );
    }
    // The nested root itself cannot be deleted from the outer one.
    let err = fx
        .err("delete_file", json!({"path": "vendor", "recursive": true}))
        .await;
    assert!(
        matches!(err.kind, ToolErrorKind::ReadOnly | ToolErrorKind::Refused),
        "{err:?}"
    );
    assert_eq!(fx.read_str("vendor/lib.rs"), "pub fn f() {}\n");
    let names: Vec<_> = std::fs::read_dir(&fx.roots[1]).unwrap().collect();
    assert_eq!(names.len(), 1);
    // Copying a directory into a nested root that lies inside it is still "into itself".
    fx.write("sub/a.txt", "a");
    let fx2 = Fx::with_roots(
        Limits::default(),
        &[],
        &[("p", Access::ReadWrite), ("p/sub", Access::ReadWrite)],
    );
    fx2.write("sub/a.txt", "a");
    let inside = fx2.roots[1].join("x").display().to_string();
    let err = fx2
        .err("copy_file", json!({"source": "sub", "destination": inside}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::Refused, "{}", err.message);
}
