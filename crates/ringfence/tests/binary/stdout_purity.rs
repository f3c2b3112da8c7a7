//! Nothing but JSON-RPC on stdout, even while the server logs warnings and errors.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

#[test]
fn every_stdout_line_is_a_json_rpc_message() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("a.txt"), "a\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringfence"))
        .arg("--data-dir")
        .arg(tmp.path().join("data"))
        .args(["--log", "debug", "serve"])
        .arg(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let messages = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "../../etc/shadow"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "grep", "arguments": {"pattern": "a"}}}),
    ];
    for m in &messages {
        writeln!(stdin, "{m}").unwrap();
    }
    stdin.flush().unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ids = Vec::new();
    for line in stdout.lines() {
        let line = line.unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON on stdout ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
        if let Some(id) = v.get("id").and_then(Value::as_i64) {
            ids.push(id);
            if id == 3 {
                assert_eq!(v["result"]["isError"], true, "{line}");
            }
            if id == 4 {
                assert_eq!(v["result"]["content"][0]["text"], "     1\ta\n", "{line}");
            }
        }
        if ids.len() == 5 {
            break;
        }
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    ids.sort();
    assert_eq!(ids, vec![1, 2, 3, 4, 5]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("path rejected"),
        "the rejection went to stderr: {stderr}"
    );
    assert!(out.status.success());
}
