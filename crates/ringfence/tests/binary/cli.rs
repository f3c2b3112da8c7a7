//! The `ringfence` command line: `call`, `tools`, configuration precedence and failing
//! closed, root creation rules.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn ringfence(home: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringfence"));
    // A private HOME/XDG so no user configuration leaks in.
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .args(["--log", "warn"]);
    cmd
}

/// Runs `cmd` and asserts the configuration failed closed: exit code 2, the reason on
/// stderr, nothing on stdout.
fn fails_closed(cmd: &mut Command, needle: &str) {
    let o = cmd.output().unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(2), "{needle}: {err}");
    assert!(err.contains(needle), "expected `{needle}` in: {err}");
    assert!(out.is_empty(), "stdout: {out}");
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn call_runs_one_tool_and_prints_the_result() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("hello.txt"), "hi\n").unwrap();
    let o = ringfence(tmp.path())
        .args(["call", "read_file", r#"{"path":"hello.txt"}"#, "--root"])
        .arg(&ws)
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    assert_eq!(out, "     1\thi\n");
    // A tool error is printed and the exit code is 1.
    let o = ringfence(tmp.path())
        .args(["call", "read_file", r#"{"path":"../x"}"#, "--root"])
        .arg(&ws)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).0.starts_with("Error: ../x:"));
    // Bad JSON and unknown tools fail with exit code 2 and a reason.
    fails_closed(
        ringfence(tmp.path()).args(["call", "read_file", "{nope"]),
        "not valid JSON",
    );
    fails_closed(
        ringfence(tmp.path()).args(["call", "rm", "{}"]),
        "unknown tool `rm`",
    );
}

fn tool_names(args: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = ringfence(tmp.path());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn presets_select_each_seed_s_tools() {
    let iris = ["read_file", "write_file", "edit_file", "grep", "glob"];
    let llm_chat = [
        "search_entries",
        "list_directory",
        "read_file",
        "write_file",
        "replace_file_lines",
        "insert_file_content",
        "replace_file_content",
        "entry_info",
        "delete_file",
        "create_folder",
        "move_file",
        "file_access_info",
        "switch_workspace",
    ];
    assert_eq!(tool_names(&["tools", "--preset", "iris"], &[]), iris);
    assert_eq!(
        tool_names(&["tools", "--preset", "llm-chat"], &[]),
        llm_chat
    );
    let full = tool_names(&["tools"], &[]);
    assert_eq!(tool_names(&["tools", "--preset", "full"], &[]), full);
    for name in iris.iter().chain(llm_chat.iter()) {
        assert!(
            full.iter().any(|f| f == name),
            "{name} missing from the full set"
        );
    }
    // Per-tool additions and removals on top of a preset; the environment works too.
    assert_eq!(
        tool_names(
            &[
                "tools",
                "--preset",
                "iris",
                "--add-tools",
                "list_directory",
                "--disable-tools",
                "glob"
            ],
            &[]
        ),
        [
            "read_file",
            "write_file",
            "edit_file",
            "grep",
            "list_directory"
        ]
    );
    assert_eq!(
        tool_names(&["tools"], &[("RINGFENCE_PRESET", "iris")]),
        iris
    );
    // The command line outranks the environment.
    assert_eq!(
        tool_names(
            &["tools", "--preset", "llm-chat"],
            &[("RINGFENCE_PRESET", "iris")]
        ),
        llm_chat
    );
    let tmp = tempfile::tempdir().unwrap();
    fails_closed(
        ringfence(tmp.path()).args(["--preset", "everything", "tools"]),
        "unknown preset `everything`",
    );
    fails_closed(
        ringfence(tmp.path()).args(["--preset", "iris", "--tools", "grep", "tools"]),
        "sets both a preset and a tool list",
    );
    fails_closed(
        ringfence(tmp.path()).args(["--add-tools", "teleport", "tools"]),
        "unknown tool or family `teleport`",
    );
}

#[test]
fn tools_prints_definitions_in_three_formats() {
    let tmp = tempfile::tempdir().unwrap();
    for (format, name_ptr, schema_ptr) in [
        ("mcp", "/name", "/inputSchema/type"),
        ("openai", "/function/name", "/function/parameters/type"),
        ("anthropic", "/name", "/input_schema/type"),
    ] {
        let o = ringfence(tmp.path())
            .args(["tools", "--preset", "iris", "--format", format])
            .output()
            .unwrap();
        assert!(o.status.success());
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let names: Vec<&str> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.pointer(name_ptr).unwrap().as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["read_file", "write_file", "edit_file", "grep", "glob"],
            "{format}"
        );
        for t in v.as_array().unwrap() {
            assert_eq!(t.pointer(schema_ptr).unwrap(), "object", "{format}");
        }
    }
    let o = ringfence(tmp.path())
        .args(["--tools", "read_file,grep", "tools"])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 2);
    fails_closed(
        ringfence(tmp.path()).args([
            "--disable-tools",
            "files,memory,followups,calendar,web,images",
            "tools",
        ]),
        "every tool is disabled",
    );
    fails_closed(
        ringfence(tmp.path()).args(["--tools", "telepathy", "tools"]),
        "unknown tool or family `telepathy`",
    );
}

#[test]
fn default_root_is_created_on_first_use_under_the_data_dir() {
    let tmp = tempfile::tempdir().unwrap();
    let o = ringfence(tmp.path())
        .args(["call", "write_file", r#"{"path":"first.md","content":"x"}"#])
        .output()
        .unwrap();
    assert!(o.status.success(), "{:?}", text(&o));
    // $HOME/.local/share/ringfence/workspace, the Linux convention.
    let made = tmp.path().join(".local/share/ringfence/workspace/first.md");
    assert_eq!(std::fs::read_to_string(made).unwrap(), "x");
    // XDG_DATA_HOME wins over HOME, RINGFENCE_DATA_DIR over both, --data-dir over all.
    let xdg = tmp.path().join("xdg");
    let o = ringfence(tmp.path())
        .env("XDG_DATA_HOME", &xdg)
        .args(["call", "write_file", r#"{"path":"a.md","content":"x"}"#])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(xdg.join("ringfence/workspace/a.md").exists());
    let envd = tmp.path().join("envd");
    let flagd = tmp.path().join("flagd");
    let o = ringfence(tmp.path())
        .env("XDG_DATA_HOME", &xdg)
        .env("RINGFENCE_DATA_DIR", &envd)
        .args(["call", "write_file", r#"{"path":"b.md","content":"x"}"#])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(envd.join("workspace/b.md").exists());
    let o = ringfence(tmp.path())
        .env("RINGFENCE_DATA_DIR", &envd)
        .arg("--data-dir")
        .arg(&flagd)
        .args(["call", "write_file", r#"{"path":"c.md","content":"x"}"#])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(flagd.join("workspace/c.md").exists());
}

#[test]
fn a_configured_root_that_does_not_exist_is_never_created() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("not-yet");
    for _ in 0..2 {
        let o = ringfence(tmp.path())
            .args([
                "call",
                "write_file",
                r#"{"path":"a.md","content":"x"}"#,
                "--root",
            ])
            .arg(&missing)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1));
        let (out, _) = text(&o);
        assert!(
            out.contains("does not exist; it is never created automatically"),
            "{out}"
        );
        assert!(
            !out.contains(&tmp.path().display().to_string()),
            "absolute root leaked: {out}"
        );
        assert!(!missing.exists());
    }
    // Once the user creates it, calls work — no restart needed in a long-running server.
    std::fs::create_dir(&missing).unwrap();
    let o = ringfence(tmp.path())
        .args([
            "call",
            "write_file",
            r#"{"path":"a.md","content":"x"}"#,
            "--root",
        ])
        .arg(&missing)
        .output()
        .unwrap();
    assert!(o.status.success());
}

#[test]
fn config_file_env_and_flags_layer_and_bad_config_fails_closed() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("app.env"), "SECRET=1\n").unwrap();
    std::fs::write(ws.join("readme.md"), "hello\n").unwrap();
    let cfg = tmp.path().join("ringfence.toml");
    std::fs::write(
        &cfg,
        format!(
            "roots = [{{ path = \"{}\", access = \"read\" }}]\ndenylist = [\"*.env\"]\n[limits]\nmax_read_lines = 1\n",
            ws.display()
        ),
    )
    .unwrap();
    // Denylist from the file applies.
    let o = ringfence(tmp.path())
        .arg("--config")
        .arg(&cfg)
        .args(["call", "read_file", r#"{"path":"app.env"}"#])
        .output()
        .unwrap();
    assert!(
        text(&o).0.contains("blocked by the denylist"),
        "{:?}",
        text(&o)
    );
    // The root is read-only as configured.
    let o = ringfence(tmp.path())
        .env("RINGFENCE_CONFIG", &cfg)
        .args(["call", "write_file", r#"{"path":"n.md","content":"x"}"#])
        .output()
        .unwrap();
    assert!(text(&o).0.contains("read-only"), "{:?}", text(&o));
    // Flags add to the denylist.
    let o = ringfence(tmp.path())
        .arg("--config")
        .arg(&cfg)
        .args([
            "--deny",
            "*.md",
            "call",
            "read_file",
            r#"{"path":"readme.md"}"#,
        ])
        .output()
        .unwrap();
    assert!(text(&o).0.contains("blocked by the denylist"));

    // Broken configuration: the error names the key, and nothing starts.
    for (body, needle) in [
        ("rootz = []\n", "rootz"),
        ("roots = []\n", "roots: the list is empty"),
        ("roots = [\"relative/dir\"]\n", "must be an absolute path"),
        ("[limits]\nmax_read_lines = 0\n", "limits.max_read_lines"),
        ("[limits]\nmax_read_linez = 5\n", "max_read_linez"),
        ("denylist = [\"!x\"]\n", "negation"),
        (
            "roots = [{ path = \"/tmp\", access = \"admin\" }]\n",
            "access `admin`",
        ),
        ("this is not toml", "config file"),
    ] {
        std::fs::write(&cfg, body).unwrap();
        fails_closed(
            ringfence(tmp.path()).arg("--config").arg(&cfg).arg("tools"),
            needle,
        );
    }
    fails_closed(
        ringfence(tmp.path()).args(["--config", "/nonexistent/r.toml", "tools"]),
        "cannot read config file",
    );
    fails_closed(
        ringfence(tmp.path())
            .env("RINGFENCE_ROOTS", "relative")
            .arg("tools"),
        "RINGFENCE_ROOTS",
    );
    // (`ringfence()` already passes --log, so the bad filter comes through the environment,
    // whose value the flag would otherwise override: use a fresh command without the flag.)
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ringfence"));
    cmd.env_clear()
        .env("HOME", tmp.path())
        .env("RINGFENCE_LOG", "loud[")
        .arg("tools");
    fails_closed(&mut cmd, "log filter `loud[` is not valid");
}

#[test]
fn serve_accepts_read_only_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let spec = format!("{}:ro", ws.display());
    let o = ringfence(tmp.path())
        .args([
            "call",
            "write_file",
            r#"{"path":"n.md","content":"x"}"#,
            "--root",
            &spec,
        ])
        .output()
        .unwrap();
    assert!(text(&o).0.contains("read-only"));
    assert!(!ws.join("n.md").exists());
}

#[test]
fn servers_with_different_roots_do_not_see_each_others_saved_output() {
    let tmp = tempfile::tempdir().unwrap();
    let a = tmp.path().join("a");
    let b = tmp.path().join("b");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(a.join("secret.txt"), "TOPSECRET\n".repeat(150)).unwrap();
    let data = tmp.path().join("data");
    let o = ringfence(tmp.path())
        .arg("--data-dir")
        .arg(&data)
        .args([
            "call",
            "grep",
            r#"{"pattern":"TOPSECRET","output_mode":"content"}"#,
            "--root",
        ])
        .arg(&a)
        .output()
        .unwrap();
    let out = text(&o).0;
    assert!(out.contains("Showing 100 of 150 matches."), "{out}");
    // Another configuration sharing the data directory cannot list or search it.
    for args in [
        format!(
            r#"{{"pattern":"*","path":"{}"}}"#,
            data.join("tool-output").display()
        ),
        format!(
            r#"{{"pattern":"TOPSECRET","path":"{}"}}"#,
            data.join("tool-output").display()
        ),
    ] {
        let tool = if args.contains("TOPSECRET") {
            "grep"
        } else {
            "glob"
        };
        let o = ringfence(tmp.path())
            .arg("--data-dir")
            .arg(&data)
            .args(["call", tool, &args, "--root"])
            .arg(&b)
            .output()
            .unwrap();
        let (out, _) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{tool}: {out}");
        assert!(
            out.contains("accepted only inside the workspace"),
            "{tool}: {out}"
        );
    }
}

#[test]
fn a_data_directory_inside_a_root_is_out_of_reach() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("home");
    let data = root.join(".local/share/ringfence");
    std::fs::create_dir_all(&root).unwrap();
    let call = |tool: &str, args: &str| {
        ringfence(tmp.path())
            .args(["--data-dir"])
            .arg(&data)
            .args(["call", tool, args, "--root"])
            .arg(&root)
            .output()
            .unwrap()
    };
    // A write creates the journal database in the data directory.
    let o = call("write_file", r#"{"path": "notes.txt", "content": "x\n"}"#);
    assert!(o.status.success(), "{}", text(&o).1);
    assert!(data.join("ringfence.db").exists());
    for args in [
        r#"{"path": ".local/share/ringfence/ringfence.db"}"#,
        r#"{"path": ".local/share/ringfence/tool-output"}"#,
    ] {
        let o = call("read_file", args);
        let (out, _) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args}: {out}");
        assert!(out.contains("denylist"), "{args}: {out}");
    }
    let o = call("glob", r#"{"pattern": "**/*", "include_ignored": true}"#);
    let (out, _) = text(&o);
    assert!(out.contains("notes.txt"), "{out}");
    assert!(!out.contains("ringfence.db"), "{out}");
}

#[test]
fn sigterm_flushes_the_journal_so_the_last_edit_can_be_undone() {
    use std::io::{BufRead, BufReader, Write};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    let data = tmp.path().join("data");
    let mut child = ringfence(tmp.path())
        .arg("--data-dir")
        .arg(&data)
        .arg("serve")
        .arg(&root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |msg: serde_json::Value| {
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
    };
    send(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}),
    );
    assert!(lines.next().unwrap().unwrap().contains("\"id\":1"));
    send(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for (id, content) in [(2, "v1\n"), (3, "v2\n")] {
        send(
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "write_file", "arguments": {"path": "u.txt", "content": content}}}),
        );
        let line = lines.next().unwrap().unwrap();
        assert!(line.contains(&format!("\"id\":{id}")), "{line}");
    }
    // SIGTERM while the session is open (stdin still connected).
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let status = child.wait().unwrap(); // bounded by the nextest slow-test timeout
    assert!(status.success(), "{status:?}");
    drop(stdin);
    let o = ringfence(tmp.path())
        .arg("--data-dir")
        .arg(&data)
        .args(["call", "undo_edit", r#"{"path": "u.txt"}"#, "--root"])
        .arg(&root)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o).0);
    assert_eq!(std::fs::read_to_string(root.join("u.txt")).unwrap(), "v1\n");
}
