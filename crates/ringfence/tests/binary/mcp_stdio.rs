//! End-to-end: spawn the built `ringfence serve DIR` and speak MCP to it over stdio with the
//! rmcp client, as a desktop client would.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig,
    ClientRequest, Implementation, ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceError, ServiceExt};
use serde_json::{Value, json};

#[derive(Clone, Default)]
struct Client {
    progress: Arc<Mutex<Vec<f64>>>,
    /// Roots this client announces (`None`: no roots capability).
    roots: Option<Vec<String>>,
    /// Answer roots/list with an error instead.
    roots_fail: bool,
}

impl ClientHandler for Client {
    #[allow(deprecated)] // MCP roots (SEP-2577 deprecates them; clients still send them)
    fn get_info(&self) -> ClientConfig {
        let caps = if self.roots.is_some() {
            ClientCapabilities::builder().enable_roots().build()
        } else {
            ClientCapabilities::default()
        };
        ClientConfig::new(caps, Implementation::new("ringfence-e2e", "0"))
    }

    #[allow(deprecated)] // MCP roots (SEP-2577 deprecates them; clients still send them)
    async fn list_roots(
        &self,
        _ctx: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        if self.roots_fail {
            return Err(rmcp::ErrorData::internal_error("roots unavailable", None));
        }
        let roots = self
            .roots
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(rmcp::model::Root::new)
            .collect();
        Ok(rmcp::model::ListRootsResult::new(roots))
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        self.progress.lock().unwrap().push(params.progress);
    }
}

struct Server {
    _tmp: Option<tempfile::TempDir>,
    root: PathBuf,
    stderr_log: PathBuf,
    client: RunningService<RoleClient, Client>,
    handler: Client,
}

async fn start(setup: impl FnOnce(&Path)) -> Server {
    let tmp = tempfile::tempdir().unwrap();
    let mut s = start_in(tmp.path(), setup).await;
    s._tmp = Some(tmp);
    s
}

/// A server whose root (`<base>/ws`) and data directory (`<base>/data`) live in `base`, so a
/// second server started on the same `base` is the first one restarted.
async fn start_in(base: &Path, setup: impl FnOnce(&Path)) -> Server {
    start_with(base, setup, Client::default(), &[]).await
}

/// A server on `base` with a particular client and extra global flags.
async fn start_with(
    base: &Path,
    setup: impl FnOnce(&Path),
    handler: Client,
    flags: &[&str],
) -> Server {
    let root = base.join("ws");
    std::fs::create_dir_all(&root).unwrap();
    setup(&root);
    let stderr_log = base.join("stderr.log");
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ringfence"));
    cmd.args(flags)
        .arg("--data-dir")
        .arg(base.join("data"))
        .arg("--log")
        .arg("info")
        .arg("serve")
        .arg(&root)
        .env_remove("RINGFENCE_ROOTS")
        .env_remove("RINGFENCE_CONFIG");
    let log = std::fs::File::create(&stderr_log).unwrap();
    let (transport, _) = TokioChildProcess::builder(cmd)
        .stderr(Stdio::from(log))
        .spawn()
        .unwrap();
    let client = handler.clone().serve(transport).await.expect("initialize");
    Server {
        _tmp: None,
        root,
        stderr_log,
        client,
        handler,
    }
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().cloned().unwrap()
}

impl Server {
    async fn call(&self, tool: &str, a: Value) -> CallToolResult {
        self.client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args(a)))
            .await
            .expect("tools/call")
    }

    async fn text(&self, tool: &str, a: Value) -> String {
        let r = self.call(tool, a.clone()).await;
        let text = first_text(&r);
        assert_ne!(r.is_error, Some(true), "{tool} {a} failed: {text}");
        text
    }

    async fn error(&self, tool: &str, a: Value) -> (String, Value) {
        let r = self.call(tool, a.clone()).await;
        assert_eq!(r.is_error, Some(true), "{tool} {a} should fail");
        (
            first_text(&r),
            r.structured_content.clone().unwrap_or(Value::Null),
        )
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr_log).unwrap_or_default()
    }
}

fn first_text(r: &CallToolResult) -> String {
    r.content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn initialize_announces_identity_and_instructions() {
    let s = start(|_| {}).await;
    let info = s.client.peer_info().expect("server info");
    let imp = info.server_info.clone().expect("server_info");
    assert_eq!(imp.name, "ringfence");
    assert_eq!(imp.version, env!("CARGO_PKG_VERSION"));
    let instructions = info.instructions.clone().unwrap_or_default();
    for needle in ["~", "read_file", "offset", "outside"] {
        assert!(instructions.contains(needle), "instructions lack {needle}");
    }
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn tools_list_matches_the_golden_schemas() {
    let s = start(|_| {}).await;
    let tools = s.client.list_all_tools().await.unwrap();
    let listed: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "title": t.title,
                "inputSchema": Value::Object((*t.input_schema).clone()),
                "annotations": serde_json::to_value(&t.annotations).unwrap(),
                "description": t.description,
            })
        })
        .collect();
    insta::assert_json_snapshot!("tools_list", listed);
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn seed_000_workflow_verbatim() {
    let s = start(|_| {}).await;
    let out = s
        .text(
            "write_file",
            json!({"path": "notes/todo.md", "content": "- milk\n- eggs\n"}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "Written: {} (notes/todo.md, 14 bytes, new file).",
            s.root.join("notes/todo.md").display()
        )
    );
    let out = s.text("read_file", json!({"path": "notes/todo.md"})).await;
    assert_eq!(out, "     1\t- milk\n     2\t- eggs\n");
    let out = s
        .text(
            "edit_file",
            json!({"path": "notes/todo.md", "old_string": "- eggs", "new_string": "- bread"}),
        )
        .await;
    assert!(
        out.starts_with("Edited notes/todo.md: 1 replacement."),
        "{out}"
    );
    let out = s
        .text(
            "grep",
            json!({"pattern": "bread", "output_mode": "content"}),
        )
        .await;
    assert_eq!(out, "notes/todo.md:2: - bread");
    let out = s.text("glob", json!({"pattern": "**/*.md"})).await;
    assert_eq!(out, "notes/todo.md");
    assert_eq!(
        std::fs::read_to_string(s.root.join("notes/todo.md")).unwrap(),
        "- milk\n- bread\n"
    );
    // write_file and edit_file report structured content too.
    let r = s
        .call("write_file", json!({"path": "n2.md", "content": "x"}))
        .await;
    assert_eq!(r.structured_content.unwrap()["bytes_written"], 1);
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn model_mistakes_are_is_error_results_and_the_server_stays_up() {
    let s = start(|root| {
        std::fs::write(root.join("a.txt"), "hello\n").unwrap();
    })
    .await;
    let cases = [
        (
            "read_file",
            json!({"path": "../../etc/passwd"}),
            "outside_workspace",
        ),
        (
            "read_file",
            json!({"path": "/etc/passwd"}),
            "outside_workspace",
        ),
        ("read_file", json!({"path": "a\u{0}b"}), "invalid_argument"),
        ("read_file", json!({"path": ""}), "invalid_argument"),
        ("read_file", json!({}), "invalid_argument"),
        ("read_file", json!({"path": "nope.txt"}), "not_found"),
        (
            "write_file",
            json!({"path": "a.txt", "content": "x"}),
            "not_read_first",
        ),
        (
            "edit_file",
            json!({"path": "a.txt", "old_string": "hello", "new_string": "hello"}),
            "invalid_argument",
        ),
        ("grep", json!({"pattern": "("}), "invalid_argument"),
        (
            "grep",
            json!({"pattern": "x", "output_mode": "lines"}),
            "invalid_argument",
        ),
        ("glob", json!({"pattern": "../*"}), "outside_workspace"),
    ];
    for (tool, a, kind) in cases {
        let (text, structured) = s.error(tool, a.clone()).await;
        // The text is the message itself (isError marks it), as the seeds quote theirs.
        assert_eq!(structured["message"], text.as_str(), "{tool} {a}: {text}");
        assert_eq!(structured["error"], kind, "{tool} {a}: {text}");
    }
    // Still answering, and nothing was changed.
    assert_eq!(
        s.text("read_file", json!({"path": "a.txt"})).await,
        "     1\thello\n"
    );
    // A path that would forge a log line and recolour the terminal (issue 13, item 7).
    s.error(
        "read_file",
        json!({"path": "../x\nFORGED  INFO ringfence: all good\u{1b}[31m"}),
    )
    .await;
    // Rejections are logged with the input and reason, never with the root's absolute path,
    // and escaped: a line break or an escape in a path cannot forge a line.
    let log = s.stderr();
    assert!(log.contains("path rejected"), "{log}");
    assert!(log.contains("../../etc/passwd"), "{log}");
    // (The start banner names the roots once, on purpose: it is the operator's own log.)
    let root = s.root.display().to_string();
    assert!(
        log.lines()
            .filter(|l| !l.contains("ringfence::cli::banner"))
            .all(|l| !l.contains(&root)),
        "root path leaked into the log:\n{log}"
    );
    assert!(log.contains("rejected"), "{log}");
    assert!(!log.contains('\u{1b}'), "a raw escape in the log:\n{log}");
    assert!(
        !log.lines().any(|l| l.starts_with("FORGED")),
        "a forged log line:\n{log}"
    );
    assert!(log.contains("FORGED"), "{log}");
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn unknown_tool_is_a_protocol_error() {
    let s = start(|_| {}).await;
    match s
        .client
        .call_tool(CallToolRequestParams::new("rm_rf"))
        .await
    {
        Err(ServiceError::McpError(e)) => {
            assert_eq!(e.code.0, -32602);
            assert!(e.message.contains("read_file"), "{}", e.message);
        }
        other => panic!("expected a protocol error, got {other:?}"),
    }
    s.client.cancel().await.unwrap();
}

fn big_tree(root: &Path) {
    for d in 0..40 {
        let dir = root.join(format!("d{d}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            std::fs::write(
                dir.join(format!("f{f}.txt")),
                "some text here\n".repeat(300),
            )
            .unwrap();
        }
    }
}

#[tokio::test]
async fn progress_notifications_for_long_searches() {
    let s = start(big_tree).await;
    let mut rounds = 0;
    while s.handler.progress.lock().unwrap().is_empty() && rounds < 20 {
        let out = s
            .text("grep", json!({"pattern": "text", "output_mode": "count"}))
            .await;
        assert!(out.contains("Showing 100 of 4,000 files."), "{out}");
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = s.handler.progress.lock().unwrap().clone();
    assert!(
        !seen.is_empty(),
        "no progress notification after {rounds} searches"
    );
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn cancellation_reaches_the_search_and_the_server_keeps_serving() {
    let s = start(big_tree).await;
    let handle = s
        .client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(CallToolRequest::new(
                CallToolRequestParams::new("grep")
                    .with_arguments(args(json!({"pattern": "t.x.", "output_mode": "content"}))),
            )),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    handle
        .cancel(Some("user pressed stop".into()))
        .await
        .unwrap();
    // The next call is answered.
    std::fs::write(s.root.join("x.txt"), "x\n").unwrap();
    assert_eq!(
        s.text("read_file", json!({"path": "x.txt"})).await,
        "     1\tx\n"
    );
    // The server saw the cancellation: the search ended as cancelled, not completed.
    let mut log = String::new();
    for _ in 0..50 {
        log = s.stderr();
        if log.contains("kind=\"cancelled\"") || log.contains("kind=cancelled") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        log.contains("kind=\"cancelled\"") || log.contains("kind=cancelled"),
        "the search did not end as cancelled:\n{log}"
    );
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn undo_works_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    {
        let s = start_in(tmp.path(), |_| {}).await;
        s.text("write_file", json!({"path": "u.txt", "content": "v1\n"}))
            .await;
        s.text("write_file", json!({"path": "u.txt", "content": "v2\n"}))
            .await;
        s.client.cancel().await.unwrap();
    }
    let s = start_in(tmp.path(), |_| {}).await;
    let out = s.text("undo_edit", json!({"path": "u.txt"})).await;
    assert!(out.starts_with("Undid write_file at "), "{out}");
    assert_eq!(
        std::fs::read_to_string(s.root.join("u.txt")).unwrap(),
        "v1\n"
    );
    // The undo itself was remembered: one step is left, and taking it removes the file.
    assert!(
        out.contains("1 earlier change can still be undone"),
        "{out}"
    );
    s.client.cancel().await.unwrap();
    let s = start_in(tmp.path(), |_| {}).await;
    s.text("undo_edit", json!({"path": "u.txt"})).await;
    assert!(!s.root.join("u.txt").exists());
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn batch_read_returns_one_content_block_per_file() {
    let s = start(|root| {
        std::fs::write(root.join("exists.txt"), "a\nb\n").unwrap();
    })
    .await;
    let r = s
        .call("read_file", json!({"paths": ["exists.txt", "missing.txt"]}))
        .await;
    // A partial failure is a partial result, not an error.
    assert_ne!(r.is_error, Some(true));
    let texts: Vec<String> = r
        .content
        .iter()
        .map(|c| c.as_text().unwrap().text.clone())
        .collect();
    assert_eq!(texts.len(), 2);
    assert_eq!(
        texts[0],
        format!(
            "--- {} (lines 1-2 of 2) ---\na\nb\n",
            s.root.join("exists.txt").display()
        )
    );
    assert!(
        texts[1].starts_with("File not found: ENOENT"),
        "{}",
        texts[1]
    );
    let results = &r.structured_content.unwrap()["results"];
    assert_eq!(results[0]["status"], "success");
    assert_eq!(results[1]["status"], "error");
    s.client.cancel().await.unwrap();
}

/// A 2×1 PNG, and its base64 as Python's encoder writes it.
const TINY_PNG_HEX: &str = "89504e470d0a1a0a0000000d49484452000000020000000108020000007b40e8dd0000000d49444154789c63f8cf0004ff01070001ffe2239e590000000049454e44ae426082";
const TINY_PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAIAAAABCAIAAAB7QOjdAAAADUlEQVR4nGP4zwAE/wEHAAH/4iOeWQAAAABJRU5ErkJggg==";

#[tokio::test]
async fn images_travel_as_mcp_image_content() {
    let bytes: Vec<u8> = (0..TINY_PNG_HEX.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&TINY_PNG_HEX[i..i + 2], 16).unwrap())
        .collect();
    let s = start(|root| std::fs::write(root.join("dot.png"), &bytes).unwrap()).await;
    let r = s.call("read_media_file", json!({"path": "dot.png"})).await;
    assert_ne!(r.is_error, Some(true));
    let image = r
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("an image block");
    assert_eq!(image.mime_type, "image/png");
    assert_eq!(image.data, TINY_PNG_B64);
    s.client.cancel().await.unwrap();
}

/// Waits until the server has applied the client's roots (it asks for them right after
/// initialization): `file_access_info` no longer lists the configured root alone.
async fn wait_for_roots(s: &Server, expect: &str) -> String {
    for _ in 0..100 {
        let r = s.call("file_access_info", json!({})).await;
        let text = first_text(&r);
        if text.contains(expect) {
            return text;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("client roots never applied (wanted `{expect}`)");
}

#[tokio::test]
async fn client_roots_narrow_the_configured_root() {
    let tmp = tempfile::tempdir().unwrap();
    let sub = tmp.path().join("ws/project");
    let client = Client {
        roots: Some(vec![format!("file://{}", sub.display())]),
        ..Client::default()
    };
    let s = start_with(
        tmp.path(),
        |root| {
            std::fs::create_dir_all(root.join("project")).unwrap();
            std::fs::write(root.join("project/inside.txt"), "in\n").unwrap();
            std::fs::write(root.join("elsewhere.txt"), "out\n").unwrap();
        },
        client,
        &[],
    )
    .await;
    let info = wait_for_roots(&s, &format!("{}  ", sub.display())).await;
    assert!(info.contains("(current workspace)"), "{info}");
    // Relative paths now start in the client's root; the rest of the configured root is gone.
    assert!(
        s.text("read_file", json!({"path": "inside.txt"}))
            .await
            .contains("in")
    );
    let (text, structured) = s
        .error(
            "read_file",
            json!({"path": s.root.join("elsewhere.txt").display().to_string()}),
        )
        .await;
    assert_eq!(structured["error"], "outside_workspace", "{text}");
    let (_, structured) = s
        .error("read_file", json!({"path": "../elsewhere.txt"}))
        .await;
    assert_eq!(structured["error"], "outside_workspace");
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn client_roots_never_widen_unless_the_operator_opts_in() {
    let tmp = tempfile::tempdir().unwrap();
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secret.txt"), "not yours\n").unwrap();
    let uri = format!("file://{}", other.display());
    // Narrow (the default): a client root outside every configured root leaves nothing.
    let s = start_with(
        tmp.path(),
        |_| {},
        Client {
            roots: Some(vec![uri.clone()]),
            ..Client::default()
        },
        &[],
    )
    .await;
    let mut blocked = false;
    for _ in 0..100 {
        let r = s
            .call(
                "read_file",
                json!({"path": other.join("secret.txt").display().to_string()}),
            )
            .await;
        let text = first_text(&r);
        assert_eq!(r.is_error, Some(true), "{text}");
        assert!(!text.contains("not yours"));
        if text.contains("do not overlap") {
            blocked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(blocked, "the session was not blocked");
    s.client.cancel().await.unwrap();
    // Extend (opted in): the client's root is added.
    let tmp2 = tempfile::tempdir().unwrap();
    let s = start_with(
        tmp2.path(),
        |_| {},
        Client {
            roots: Some(vec![uri]),
            ..Client::default()
        },
        &["--client-roots", "extend"],
    )
    .await;
    wait_for_roots(&s, &other.display().to_string()).await;
    let out = s
        .text(
            "read_file",
            json!({"path": other.join("secret.txt").display().to_string()}),
        )
        .await;
    assert!(out.contains("not yours"), "{out}");
    s.client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_client_whose_roots_cannot_be_read_gets_no_file_access() {
    let tmp = tempfile::tempdir().unwrap();
    let s = start_with(
        tmp.path(),
        |root| std::fs::write(root.join("a.txt"), "hello\n").unwrap(),
        Client {
            roots: Some(Vec::new()),
            roots_fail: true,
            ..Client::default()
        },
        &[],
    )
    .await;
    // The very first call already waits for the roots answer, so it is refused too.
    let (text, structured) = s.error("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(structured["error"], "outside_workspace", "{text}");
    assert!(text.contains("roots could not be read"), "{text}");
    assert!(!text.contains("hello"));
    s.client.cancel().await.unwrap();
}
