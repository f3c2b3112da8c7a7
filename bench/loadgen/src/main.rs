//! A bounded load generator for MCP servers speaking streamable HTTP (JSON-RPC over HTTP
//! POST, answers as `application/json` or `text/event-stream`).
//!
//! N sessions run concurrently, each a closed loop: `initialize`, `notifications/initialized`,
//! one `read_file` of the session's own edit file, then tool calls one after the other (the
//! next one when the previous answered) until the deadline, drawn from a weighted mix of
//! read / grep / edit. Every call's wall time (POST → parsed JSON-RPC response) is recorded;
//! calls that complete inside the measured window (after the warm-up) make the statistics.
//! At most `--sessions` requests are in flight at any time.
//!
//! Output: a short table on stderr and a JSON document (`--out`).

// A benchmark client, not part of the sandboxed server: it reads its own option files and
// writes its result with std::fs (the workspace's clippy.toml steers the server crates away
// from ambient file access).
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

const PROTOCOL_VERSION: &str = "2025-06-18";
/// Error texts kept per session (the rest are only counted).
const MAX_ERRORS_KEPT: usize = 20;
/// Characters of an error text kept (texts are grouped by this prefix).
const ERROR_TEXT_CHARS: usize = 240;
/// Pause of a session after a failed call.
const ERROR_PAUSE: Duration = Duration::from_millis(50);

type HttpClient = Client<HttpConnector, Full<Bytes>>;

// ------------------------------------------------------------------------------------------
// Options

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavor {
    /// ringfence: read_file {path}, grep {pattern, path, output_mode}, edit_file {path,
    /// old_string, new_string}.
    Ringfence,
    /// The official filesystem server: read_text_file {path}, edit_file {path, edits}; it
    /// has no content search, so the mix may not contain grep.
    Official,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Read = 0,
    Grep = 1,
    Edit = 2,
}
const OPS: [Op; 3] = [Op::Read, Op::Grep, Op::Edit];

impl Op {
    fn key(self) -> &'static str {
        match self {
            Op::Read => "read",
            Op::Grep => "grep",
            Op::Edit => "edit",
        }
    }
}

#[derive(Debug)]
struct Opts {
    /// The endpoints; session n uses `urls[n % urls.len()]` (several instances of a
    /// deployment, the load spread across them).
    urls: Vec<String>,
    sessions: usize,
    duration: Duration,
    warmup: Duration,
    tokens: Vec<String>,
    headers: Vec<(String, String)>,
    mix: [u32; 3],
    flavor: Flavor,
    path_prefix: String,
    read_files: Vec<String>,
    grep_path: String,
    grep_patterns: Vec<String>,
    edit_file: String,
    timeout: Duration,
    threads: usize,
    out: Option<String>,
    seed: u64,
    label: String,
}

const USAGE: &str = "loadgen --url URL [options]

  --url URL              MCP endpoint (default http://127.0.0.1:8765/mcp); repeatable:
                         sessions are spread round-robin over the endpoints
  --sessions N           concurrent sessions = max in-flight requests (200)
  --duration-secs S      measured window (60)
  --warmup-secs S        before the window, excluded from the statistics (5)
  --tokens-file FILE     bearer tokens, one per line; sessions take them round-robin
  --header 'Name: v'     extra request header (repeatable)
  --mix read=60,grep=25,edit=15
  --flavor ringfence|official   tool names and argument shapes (ringfence)
  --path-prefix P        prepended to every path sent (default: none, root-relative paths)
  --read-list FILE       paths of the shared files to read, one per line
  --grep-path DIR        directory grep searches (grep)
  --grep-pattern PAT     a grep pattern (repeatable; sessions rotate through them)
  --edit-file TEMPLATE   each session's own file to edit; {n} = session index, 3 digits
                         (sessions/s{n}/notes.txt); it must hold the line 'marker: off'
  --timeout-secs S       per request (60)
  --threads N            client runtime worker threads (2)
  --seed N               RNG seed (1)
  --label TEXT           stored in the JSON
  --out FILE             write the result as JSON";

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        urls: Vec::new(),
        sessions: 200,
        duration: Duration::from_secs(60),
        warmup: Duration::from_secs(5),
        tokens: Vec::new(),
        headers: Vec::new(),
        mix: [60, 25, 15],
        flavor: Flavor::Ringfence,
        path_prefix: String::new(),
        read_files: Vec::new(),
        grep_path: "grep".into(),
        grep_patterns: Vec::new(),
        edit_file: "sessions/s{n}/notes.txt".into(),
        timeout: Duration::from_secs(60),
        threads: 2,
        out: None,
        seed: 1,
        label: String::new(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "-h" || a == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        let num = |s: String| -> Result<u64, String> {
            s.parse::<u64>().map_err(|e| format!("{a}: {s:?}: {e}"))
        };
        match a.as_str() {
            "--url" => o.urls.push(val()?),
            "--sessions" => o.sessions = num(val()?)? as usize,
            "--duration-secs" => o.duration = Duration::from_secs(num(val()?)?),
            "--warmup-secs" => o.warmup = Duration::from_secs(num(val()?)?),
            "--tokens-file" => {
                let f = val()?;
                let text = std::fs::read_to_string(&f).map_err(|e| format!("{f}: {e}"))?;
                o.tokens = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(String::from)
                    .collect();
                if o.tokens.is_empty() {
                    return Err(format!("{f}: no tokens"));
                }
            }
            "--header" => {
                let h = val()?;
                let (k, v) = h
                    .split_once(':')
                    .ok_or_else(|| format!("--header {h:?}: expected 'Name: value'"))?;
                o.headers.push((k.trim().to_string(), v.trim().to_string()));
            }
            "--mix" => {
                let m = val()?;
                o.mix = [0; 3];
                for part in m.split(',').filter(|p| !p.is_empty()) {
                    let (k, v) = part
                        .split_once('=')
                        .ok_or_else(|| format!("--mix {m:?}: expected read=N,grep=N,edit=N"))?;
                    let w: u32 = v.parse().map_err(|e| format!("--mix {part:?}: {e}"))?;
                    let op = OPS
                        .iter()
                        .find(|op| op.key() == k.trim())
                        .ok_or_else(|| format!("--mix: unknown call kind {k:?}"))?;
                    o.mix[*op as usize] = w;
                }
                if o.mix.iter().sum::<u32>() == 0 {
                    return Err("--mix: all weights are zero".into());
                }
            }
            "--flavor" => {
                o.flavor = match val()?.as_str() {
                    "ringfence" => Flavor::Ringfence,
                    "official" => Flavor::Official,
                    f => return Err(format!("--flavor {f:?}: ringfence or official")),
                }
            }
            "--path-prefix" => o.path_prefix = val()?,
            "--read-list" => {
                let f = val()?;
                let text = std::fs::read_to_string(&f).map_err(|e| format!("{f}: {e}"))?;
                o.read_files = text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(String::from)
                    .collect();
            }
            "--grep-path" => o.grep_path = val()?,
            "--grep-pattern" => o.grep_patterns.push(val()?),
            "--edit-file" => o.edit_file = val()?,
            "--timeout-secs" => o.timeout = Duration::from_secs(num(val()?)?),
            "--threads" => o.threads = num(val()?)?.max(1) as usize,
            "--seed" => o.seed = num(val()?)?,
            "--label" => o.label = val()?,
            "--out" => o.out = Some(val()?),
            _ => return Err(format!("unknown option {a:?}\n\n{USAGE}")),
        }
    }
    if o.sessions == 0 {
        return Err("--sessions must be at least 1".into());
    }
    if o.mix[Op::Read as usize] > 0 && o.read_files.is_empty() {
        return Err("the mix reads shared files: give --read-list".into());
    }
    if o.mix[Op::Grep as usize] > 0 {
        if o.flavor == Flavor::Official {
            return Err("--flavor official has no content search: use a mix without grep".into());
        }
        if o.grep_patterns.is_empty() {
            return Err("the mix greps: give at least one --grep-pattern".into());
        }
    }
    Ok(o)
}

// ------------------------------------------------------------------------------------------
// A tiny deterministic RNG (splitmix64): enough to draw the mix, no dependency.

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

// ------------------------------------------------------------------------------------------
// MCP over streamable HTTP, by hand.

struct Conn {
    client: HttpClient,
    url: hyper::Uri,
    token: Option<String>,
    headers: Arc<Vec<(String, String)>>,
    session_id: Option<String>,
    next_id: u64,
    timeout: Duration,
}

/// What a POST gave back.
struct Answer {
    /// The JSON-RPC response whose id matched (None for a notification's 202).
    message: Option<Value>,
    /// When it was parsed (the end of the timed interval).
    parsed_at: Instant,
    session_id: Option<String>,
}

impl Conn {
    fn request(&self, method: &str, body: Vec<u8>) -> Result<hyper::Request<Full<Bytes>>, String> {
        let mut b = hyper::Request::builder()
            .method(method)
            .uri(self.url.clone())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(t) = &self.token {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        if let Some(s) = &self.session_id {
            b = b
                .header("mcp-session-id", s.as_str())
                .header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        for (k, v) in self.headers.iter() {
            b = b.header(k.as_str(), v.as_str());
        }
        b.body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("building the request: {e}"))
    }

    /// POSTs one JSON-RPC message; for a request (`want_id`), reads the answer until the
    /// response with that id (JSON body, or one `data:` event of an SSE stream).
    async fn post(&self, msg: &Value, want_id: Option<u64>) -> Result<Answer, String> {
        let body = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        let req = self.request("POST", body)?;
        let fut = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| format!("HTTP: {}", error_chain(&e)))?;
            let status = resp.status();
            let session_id = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
                .map(String::from);
            let ctype = resp
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_ascii_lowercase();
            let mut body = resp.into_body();
            if want_id.is_none() {
                let bytes = collect(&mut body).await?;
                if status.as_u16() != 202 && !status.is_success() {
                    return Err(format!(
                        "HTTP {status} for a notification: {}",
                        snippet(&String::from_utf8_lossy(&bytes))
                    ));
                }
                return Ok(Answer {
                    message: None,
                    parsed_at: Instant::now(),
                    session_id,
                });
            }
            if !status.is_success() {
                let bytes = collect(&mut body).await.unwrap_or_default();
                return Err(format!(
                    "HTTP {status}: {}",
                    snippet(&String::from_utf8_lossy(&bytes))
                ));
            }
            let id = want_id.unwrap();
            if ctype.starts_with("text/event-stream") {
                let mut sse = Sse::default();
                let mut found = None;
                while let Some(frame) = body.frame().await {
                    let frame = frame.map_err(|e| format!("reading the SSE stream: {e}"))?;
                    let Ok(data) = frame.into_data() else {
                        continue;
                    };
                    for event in sse.feed(&data) {
                        if let Some(m) = match_id(&event, id) {
                            found = Some(m);
                            break;
                        }
                    }
                    if found.is_some() {
                        break;
                    }
                }
                if found.is_none() {
                    for event in sse.finish() {
                        if let Some(m) = match_id(&event, id) {
                            found = Some(m);
                            break;
                        }
                    }
                }
                let parsed_at = Instant::now();
                let Some(message) = found else {
                    return Err(format!("SSE stream ended without the response to id {id}"));
                };
                // Drain what is left (untimed) so the connection can be reused.
                let _ = collect(&mut body).await;
                Ok(Answer {
                    message: Some(message),
                    parsed_at,
                    session_id,
                })
            } else if ctype.starts_with("application/json") {
                let bytes = collect(&mut body).await?;
                let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                    format!(
                        "response is not JSON ({e}): {}",
                        snippet(&String::from_utf8_lossy(&bytes))
                    )
                })?;
                let parsed_at = Instant::now();
                // A batch answer is an array; pick the message with our id.
                let message = match v {
                    Value::Array(items) => items.into_iter().find(|m| id_is(m, id)),
                    m if id_is(&m, id) => Some(m),
                    _ => None,
                };
                let message = message.ok_or_else(|| format!("JSON answer without id {id}"))?;
                Ok(Answer {
                    message: Some(message),
                    parsed_at,
                    session_id,
                })
            } else {
                let bytes = collect(&mut body).await.unwrap_or_default();
                Err(format!(
                    "unexpected content-type {ctype:?} (HTTP {status}): {}",
                    snippet(&String::from_utf8_lossy(&bytes))
                ))
            }
        };
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(format!("timeout after {} s", self.timeout.as_secs())),
        }
    }

    /// A JSON-RPC request; Ok(result) or Err(text) for transport and JSON-RPC errors.
    async fn call(&mut self, method: &str, params: Value) -> (Result<Value, String>, Instant) {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        match self.post(&msg, Some(id)).await {
            Err(e) => (Err(e), Instant::now()),
            Ok(a) => {
                if self.session_id.is_none() {
                    self.session_id = a.session_id;
                }
                let m = a.message.unwrap_or(Value::Null);
                if let Some(err) = m.get("error") {
                    let text = err.get("message").and_then(Value::as_str).unwrap_or("");
                    let code = err.get("code").and_then(Value::as_i64).unwrap_or(0);
                    (Err(format!("JSON-RPC error {code}: {text}")), a.parsed_at)
                } else {
                    (
                        Ok(m.get("result").cloned().unwrap_or(Value::Null)),
                        a.parsed_at,
                    )
                }
            }
        }
    }

    async fn notify(&self, method: &str) -> Result<(), String> {
        let msg = json!({"jsonrpc": "2.0", "method": method});
        self.post(&msg, None).await.map(|_| ())
    }

    async fn close(&self) {
        if self.session_id.is_none() {
            return;
        }
        if let Ok(req) = self.request("DELETE", Vec::new())
            && let Ok(Ok(resp)) =
                tokio::time::timeout(Duration::from_secs(5), self.client.request(req)).await
        {
            let _ = collect(&mut resp.into_body()).await;
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

async fn collect(body: &mut hyper::body::Incoming) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| format!("reading the body: {e}"))?;
        if let Ok(d) = frame.into_data() {
            out.extend_from_slice(&d);
        }
    }
    Ok(out)
}

fn id_is(m: &Value, id: u64) -> bool {
    m.get("id").and_then(Value::as_u64) == Some(id)
        && (m.get("result").is_some() || m.get("error").is_some())
}

fn match_id(event_data: &str, id: u64) -> Option<Value> {
    let v: Value = serde_json::from_str(event_data).ok()?;
    match v {
        Value::Array(items) => items.into_iter().find(|m| id_is(m, id)),
        m if id_is(&m, id) => Some(m),
        _ => None,
    }
}

/// An incremental `text/event-stream` parser: `data:` lines joined by `\n` per event; other
/// fields (id, event, retry) and comments ignored.
#[derive(Default)]
struct Sse {
    pending: Vec<u8>,
    data: String,
    has_data: bool,
}

impl Sse {
    fn feed(&mut self, chunk: &[u8]) -> Vec<String> {
        self.pending.extend_from_slice(chunk);
        let mut events = Vec::new();
        let mut start = 0;
        while let Some(pos) = self.pending[start..].iter().position(|&b| b == b'\n') {
            let end = start + pos;
            let mut line = &self.pending[start..end];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            let line = String::from_utf8_lossy(line).into_owned();
            start = end + 1;
            self.line(&line, &mut events);
        }
        self.pending.drain(..start);
        events
    }

    fn line(&mut self, line: &str, events: &mut Vec<String>) {
        if line.is_empty() {
            if self.has_data {
                events.push(std::mem::take(&mut self.data));
                self.has_data = false;
            }
        } else if let Some(rest) = line.strip_prefix("data:") {
            let rest = rest.strip_prefix(' ').unwrap_or(rest);
            if self.has_data {
                self.data.push('\n');
            }
            self.data.push_str(rest);
            self.has_data = true;
        }
    }

    fn finish(&mut self) -> Vec<String> {
        let mut events = Vec::new();
        if !self.pending.is_empty() {
            let rest = String::from_utf8_lossy(&self.pending).into_owned();
            self.pending.clear();
            self.line(rest.trim_end_matches('\r'), &mut events);
        }
        self.line("", &mut events);
        events
    }
}

fn snippet(s: &str) -> String {
    let s = s.trim();
    let mut out: String = s.chars().take(ERROR_TEXT_CHARS).collect();
    if s.chars().count() > ERROR_TEXT_CHARS {
        out.push('…');
    }
    out.replace('\n', "\\n")
}

/// The text of a tool result (its text content items joined).
fn result_text(result: &Value) -> String {
    let mut s = String::new();
    if let Some(items) = result.get("content").and_then(Value::as_array) {
        for it in items {
            if let Some(t) = it.get("text").and_then(Value::as_str) {
                if !s.is_empty() {
                    s.push('\n');
                }
                s.push_str(t);
            }
        }
    }
    s
}

// ------------------------------------------------------------------------------------------
// Sessions

/// One call: kind, start and end in µs since t0, success.
#[derive(Clone, Copy)]
struct Rec {
    op: Op,
    start_us: u64,
    end_us: u64,
    ok: bool,
}

#[derive(Default)]
struct SessionOut {
    records: Vec<Rec>,
    init_us: Option<u64>,
    init_error: Option<String>,
    errors: Vec<(String, String)>, // (kind, text)
    errors_dropped: u64,
    edits_ok: u64,
}

impl SessionOut {
    fn error(&mut self, kind: &str, text: String) {
        if self.errors.len() < MAX_ERRORS_KEPT {
            self.errors.push((kind.to_string(), snippet(&text)));
        } else {
            self.errors_dropped += 1;
        }
    }
}

struct Shared {
    opts: Opts,
    client: HttpClient,
    urls: Vec<hyper::Uri>,
    headers: Arc<Vec<(String, String)>>,
    t0: Instant,
    deadline: Instant,
}

impl Shared {
    fn us(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.t0).as_micros() as u64
    }
    fn path(&self, p: &str) -> String {
        format!("{}{}", self.opts.path_prefix, p)
    }
    fn read_call(&self, path: &str) -> (&'static str, Value) {
        let p = self.path(path);
        match self.opts.flavor {
            Flavor::Ringfence => ("read_file", json!({"path": p})),
            Flavor::Official => ("read_text_file", json!({"path": p})),
        }
    }
    fn edit_call(&self, path: &str, old: &str, new: &str) -> (&'static str, Value) {
        let p = self.path(path);
        match self.opts.flavor {
            Flavor::Ringfence => (
                "edit_file",
                json!({"path": p, "old_string": old, "new_string": new}),
            ),
            Flavor::Official => (
                "edit_file",
                json!({"path": p, "edits": [{"oldText": old, "newText": new}]}),
            ),
        }
    }
    fn grep_call(&self, pattern: &str) -> (&'static str, Value) {
        (
            "grep",
            json!({"pattern": pattern, "path": self.path(&self.opts.grep_path), "output_mode": "content"}),
        )
    }
}

const MARK_OFF: &str = "marker: off";
const MARK_ON: &str = "marker: on";

async fn run_session(idx: usize, sh: Arc<Shared>) -> SessionOut {
    let mut out = SessionOut::default();
    let o = &sh.opts;
    let token = if o.tokens.is_empty() {
        None
    } else {
        Some(o.tokens[idx % o.tokens.len()].clone())
    };
    let mut conn = Conn {
        client: sh.client.clone(),
        url: sh.urls[idx % sh.urls.len()].clone(),
        token,
        headers: sh.headers.clone(),
        session_id: None,
        next_id: 0,
        timeout: o.timeout,
    };
    let mut rng = Rng(o.seed ^ (idx as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
    // Spread the session starts over the first 100 ms at most.
    tokio::time::sleep(Duration::from_micros(rng.below(100_000))).await;

    // Handshake.
    let t = Instant::now();
    let (r, done) = conn
        .call(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "ringfence-loadgen", "version": env!("CARGO_PKG_VERSION")}
            }),
        )
        .await;
    if let Err(e) = r {
        out.init_error = Some(format!("initialize: {e}"));
        return out;
    }
    if conn.session_id.is_none() {
        out.init_error = Some("initialize: no Mcp-Session-Id header in the answer".into());
        return out;
    }
    if let Err(e) = conn.notify("notifications/initialized").await {
        out.init_error = Some(format!("notifications/initialized: {e}"));
        conn.close().await;
        return out;
    }
    out.init_us = Some(done.duration_since(t).as_micros() as u64);

    let edit_path = o.edit_file.replace("{n}", &format!("{idx:03}"));
    // Marker state of the own file: None = unknown (read it to find out).
    let mut marker_on: Option<bool> = None;
    let mut grep_i = idx % o.grep_patterns.len().max(1);
    let total: u32 = o.mix.iter().sum();
    let mut edits_disabled = false;

    while Instant::now() < sh.deadline {
        // The own file is read first (the read-first gate) and after any failed edit.
        let edits = o.mix[Op::Edit as usize] > 0 && !edits_disabled;
        let op = if edits && marker_on.is_none() {
            Op::Read
        } else {
            let mut x = rng.below(total as u64) as u32;
            let mut pick = Op::Read;
            for op in OPS {
                let w = o.mix[op as usize];
                if x < w {
                    pick = op;
                    break;
                }
                x -= w;
            }
            // Without a usable own file, edits become reads of the shared files.
            if pick == Op::Edit && !edits {
                Op::Read
            } else {
                pick
            }
        };
        let own_read = op == Op::Read && edits && marker_on.is_none();
        let (tool, args) = match op {
            Op::Read if own_read => sh.read_call(&edit_path),
            Op::Read => {
                let f = &o.read_files[rng.below(o.read_files.len() as u64) as usize];
                sh.read_call(f)
            }
            Op::Grep => {
                let p = &o.grep_patterns[grep_i];
                grep_i = (grep_i + 1) % o.grep_patterns.len();
                sh.grep_call(p)
            }
            Op::Edit => {
                let on = marker_on.unwrap_or(false);
                let (old, new) = if on {
                    (MARK_ON, MARK_OFF)
                } else {
                    (MARK_OFF, MARK_ON)
                };
                sh.edit_call(&edit_path, old, new)
            }
        };
        let start = Instant::now();
        let (r, end) = conn
            .call("tools/call", json!({"name": tool, "arguments": args}))
            .await;
        let ok = match r {
            Err(e) => {
                out.error("protocol", format!("{tool}: {e}"));
                false
            }
            Ok(result) => {
                if result.get("isError").and_then(Value::as_bool) == Some(true) {
                    out.error("tool", format!("{tool}: {}", result_text(&result)));
                    false
                } else {
                    if own_read {
                        // The marker line tells the state of the own file.
                        let text = result_text(&result);
                        if text.contains(MARK_ON) {
                            marker_on = Some(true);
                        } else if text.contains(MARK_OFF) {
                            marker_on = Some(false);
                        } else {
                            out.error(
                                "check",
                                format!("{edit_path}: no marker line in what read_file returned"),
                            );
                        }
                    }
                    true
                }
            }
        };
        match op {
            Op::Edit if ok => {
                marker_on = Some(!marker_on.unwrap_or(false));
                out.edits_ok += 1;
            }
            Op::Edit => marker_on = None, // state unknown: read the file again
            _ => {}
        }
        if own_read && marker_on.is_none() {
            // The own file cannot be read (or shows no marker): stop editing in this
            // session rather than loop on reads; the error is counted.
            edits_disabled = true;
        }
        out.records.push(Rec {
            op,
            start_us: sh.us(start),
            end_us: sh.us(end),
            ok,
        });
        if !ok {
            // A refused or failed call answers at once: pause briefly so a failing session
            // does not spin (and starve the server of CPU); the error is already counted.
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
    conn.close().await;
    out
}

// ------------------------------------------------------------------------------------------
// Statistics

fn cpu_seconds() -> (f64, f64) {
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid initial value.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return (0.0, 0.0);
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        (tv(ru.ru_utime), tv(ru.ru_stime))
    }
}

fn pct(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

fn stats(lat_us: &mut [u64], errors: u64, window_s: f64) -> Value {
    lat_us.sort_unstable();
    let n = lat_us.len();
    let mean = if n == 0 {
        0.0
    } else {
        lat_us.iter().sum::<u64>() as f64 / n as f64 / 1000.0
    };
    json!({
        "count": n,
        "errors": errors,
        "p50_ms": round3(pct(lat_us, 0.50)),
        "p90_ms": round3(pct(lat_us, 0.90)),
        "p99_ms": round3(pct(lat_us, 0.99)),
        "max_ms": round3(lat_us.last().copied().unwrap_or(0) as f64 / 1000.0),
        "mean_ms": round3(mean),
        "throughput_per_s": round3(n as f64 / window_s),
    })
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

// ------------------------------------------------------------------------------------------

fn main() {
    let opts = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("loadgen: {e}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(opts.threads)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = rt.block_on(run(opts));
    std::process::exit(code);
}

async fn run(mut opts: Opts) -> i32 {
    if opts.urls.is_empty() {
        opts.urls.push("http://127.0.0.1:8765/mcp".into());
    }
    let mut urls = Vec::with_capacity(opts.urls.len());
    for u in &opts.urls {
        match u.parse::<hyper::Uri>() {
            Ok(u) => urls.push(u),
            Err(e) => {
                eprintln!("loadgen: --url {u:?}: {e}");
                return 2;
            }
        }
    }
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let client: HttpClient = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(usize::MAX)
        .pool_idle_timeout(Duration::from_secs(90))
        .build(connector);

    let (cpu_u0, cpu_s0) = cpu_seconds();
    let t0 = Instant::now();
    let measure_from = t0 + opts.warmup;
    let deadline = measure_from + opts.duration;
    let sessions = opts.sessions;
    let headers = Arc::new(opts.headers.clone());
    let sh = Arc::new(Shared {
        opts,
        client,
        urls,
        headers,
        t0,
        deadline,
    });
    eprintln!(
        "loadgen: {} sessions against {} for {} s (+{} s warm-up), mix read={} grep={} edit={}",
        sessions,
        sh.opts.urls.join(" "),
        sh.opts.duration.as_secs(),
        sh.opts.warmup.as_secs(),
        sh.opts.mix[0],
        sh.opts.mix[1],
        sh.opts.mix[2]
    );

    let mut handles = Vec::with_capacity(sessions);
    for i in 0..sessions {
        handles.push(tokio::spawn(run_session(i, sh.clone())));
    }
    let mut outs = Vec::with_capacity(sessions);
    for h in handles {
        match h.await {
            Ok(o) => outs.push(o),
            Err(e) => outs.push(SessionOut {
                init_error: Some(format!("session task failed: {e}")),
                ..Default::default()
            }),
        }
    }
    let finished = Instant::now();
    let (cpu_u1, cpu_s1) = cpu_seconds();

    // Aggregate.
    let m0 = sh.us(measure_from);
    let m1 = sh.us(deadline);
    let window_s = (m1 - m0) as f64 / 1e6;
    let mut per_op: BTreeMap<Op, (Vec<u64>, u64)> = BTreeMap::new();
    let mut all: Vec<u64> = Vec::new();
    let mut all_err = 0u64;
    let mut total_calls = 0u64;
    let mut total_errors = 0u64;
    let mut late = 0u64;
    let secs = (window_s.ceil() as usize).max(1);
    let mut timeline = vec![(0u64, 0u64, Vec::<u64>::new()); secs];
    for o in &outs {
        for r in &o.records {
            total_calls += 1;
            if !r.ok {
                total_errors += 1;
            }
            if r.end_us < m0 {
                continue;
            }
            if r.end_us > m1 {
                late += 1;
                continue;
            }
            let lat = r.end_us.saturating_sub(r.start_us);
            let e = per_op.entry(r.op).or_default();
            e.0.push(lat);
            all.push(lat);
            if !r.ok {
                e.1 += 1;
                all_err += 1;
            }
            let s = (((r.end_us - m0) / 1_000_000) as usize).min(secs - 1);
            timeline[s].0 += 1;
            if !r.ok {
                timeline[s].1 += 1;
            }
            timeline[s].2.push(lat);
        }
    }
    let mut init_lat: Vec<u64> = outs.iter().filter_map(|o| o.init_us).collect();
    let init_failed: Vec<&str> = outs
        .iter()
        .filter_map(|o| o.init_error.as_deref())
        .collect();

    // Error texts, grouped.
    let mut groups: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut dropped = 0;
    for o in &outs {
        for (k, t) in &o.errors {
            *groups.entry((k.clone(), t.clone())).or_default() += 1;
        }
        dropped += o.errors_dropped;
    }
    for t in &init_failed {
        *groups.entry(("session".into(), snippet(t))).or_default() += 1;
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|g| std::cmp::Reverse(g.1));

    let tool_name = |op: Op| -> &'static str {
        match (op, sh.opts.flavor) {
            (Op::Read, Flavor::Ringfence) => "read_file",
            (Op::Read, Flavor::Official) => "read_text_file",
            (Op::Grep, _) => "grep",
            (Op::Edit, _) => "edit_file",
        }
    };
    let mut per_tool = serde_json::Map::new();
    let mut rows = Vec::new();
    for (op, (lat, err)) in per_op.iter_mut() {
        let s = stats(lat, *err, window_s);
        rows.push((tool_name(*op).to_string(), s.clone()));
        per_tool.insert(tool_name(*op).to_string(), s);
    }
    let overall = stats(&mut all, all_err, window_s);
    rows.push(("all".into(), overall.clone()));
    let init = stats(&mut init_lat, init_failed.len() as u64, 1.0);

    let wall = finished.duration_since(t0).as_secs_f64();
    let (cu, cs) = (cpu_u1 - cpu_u0, cpu_s1 - cpu_s0);
    let timeline: Vec<Value> = timeline
        .into_iter()
        .enumerate()
        .map(|(i, (n, e, mut l))| {
            l.sort_unstable();
            json!({"t": i, "calls": n, "errors": e, "p50_ms": round3(pct(&l, 0.5)), "p99_ms": round3(pct(&l, 0.99))})
        })
        .collect();
    let edits_ok: u64 = outs.iter().map(|o| o.edits_ok).sum();

    let result = json!({
        "label": sh.opts.label,
        "params": {
            "url": sh.opts.urls.join(" "),
            "flavor": format!("{:?}", sh.opts.flavor).to_lowercase(),
            "sessions": sessions,
            "duration_s": sh.opts.duration.as_secs(),
            "warmup_s": sh.opts.warmup.as_secs(),
            "mix": {"read": sh.opts.mix[0], "grep": sh.opts.mix[1], "edit": sh.opts.mix[2]},
            "tokens": sh.opts.tokens.len(),
            "read_files": sh.opts.read_files.len(),
            "grep_path": sh.opts.grep_path,
            "grep_patterns": sh.opts.grep_patterns,
            "edit_file": sh.opts.edit_file,
            "timeout_s": sh.opts.timeout.as_secs(),
            "client_threads": sh.opts.threads,
            "seed": sh.opts.seed,
            "protocol_version": PROTOCOL_VERSION,
        },
        "window_s": round3(window_s),
        "overall": overall,
        "per_tool": per_tool,
        "initialize": init,
        "sessions": {
            "started": sessions,
            "initialized": outs.iter().filter(|o| o.init_us.is_some()).count(),
            "failed": init_failed.len(),
        },
        "all_phases": {
            "calls": total_calls,
            "errors": total_errors + init_failed.len() as u64,
            "completed_after_deadline": late,
            "successful_edits": edits_ok,
        },
        "error_texts": groups.iter().take(20).map(|((k, t), n)| json!({"kind": k, "count": n, "text": t})).collect::<Vec<_>>(),
        "error_texts_not_kept": dropped,
        "loadgen_cpu": {
            "user_s": round3(cu),
            "sys_s": round3(cs),
            "wall_s": round3(wall),
            "cores_used": round3((cu + cs) / wall.max(1e-9)),
        },
        "timeline": timeline,
    });

    // Human table.
    eprintln!(
        "\n{:<16} {:>9} {:>7} {:>9} {:>9} {:>9} {:>9} {:>10}",
        "tool", "calls", "errors", "p50 ms", "p90 ms", "p99 ms", "max ms", "calls/s"
    );
    for (name, s) in rows
        .iter()
        .chain(std::iter::once(&("initialize".to_string(), init.clone())))
    {
        eprintln!(
            "{:<16} {:>9} {:>7} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>10}",
            name,
            s["count"].as_u64().unwrap_or(0),
            s["errors"].as_u64().unwrap_or(0),
            s["p50_ms"].as_f64().unwrap_or(0.0),
            s["p90_ms"].as_f64().unwrap_or(0.0),
            s["p99_ms"].as_f64().unwrap_or(0.0),
            s["max_ms"].as_f64().unwrap_or(0.0),
            if name == "initialize" {
                "-".to_string()
            } else {
                format!("{:.1}", s["throughput_per_s"].as_f64().unwrap_or(0.0))
            },
        );
    }
    eprintln!(
        "window {:.1} s; sessions initialized {}/{}; all phases: {} calls, {} errors; loadgen CPU user {:.2} s + sys {:.2} s over {:.1} s wall ({:.2} cores)",
        window_s,
        sessions - init_failed.len(),
        sessions,
        total_calls,
        total_errors + init_failed.len() as u64,
        cu,
        cs,
        wall,
        (cu + cs) / wall.max(1e-9)
    );
    for ((k, t), n) in groups.iter().take(8) {
        eprintln!("  error ×{n} [{k}] {t}");
    }
    if let Some(path) = &sh.opts.out {
        let text = serde_json::to_string_pretty(&result).expect("json") + "\n";
        if let Err(e) = std::fs::write(path, text) {
            eprintln!("loadgen: writing {path}: {e}");
            return 1;
        }
    }
    if total_errors > 0 || !init_failed.is_empty() {
        3
    } else {
        0
    }
}
