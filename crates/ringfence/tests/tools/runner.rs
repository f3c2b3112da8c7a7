//! The runner every caller goes through (MCP, `ringfence call`, delegation): lookup,
//! the session a call runs in, waiting for readiness, the time limit, cancellation, the audit
//! trail and the metrics.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringfence_core::{
    AuditEvent, AuditSink, BoxFuture, CallMetrics, CallRequest, CallScope, Progress, Tool,
    ToolContext, ToolError, ToolErrorKind, ToolOutput, ToolResult, ToolRunner,
};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::common::Fx;

#[derive(Debug, Default)]
struct Trail(Mutex<Vec<AuditEvent>>);

impl AuditSink for Trail {
    fn record(&self, event: AuditEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Trail {
    fn events(&self) -> Vec<AuditEvent> {
        self.0.lock().unwrap().clone()
    }
}

#[derive(Debug, Default)]
struct Counts(Mutex<Vec<(String, bool, f64)>>);

impl CallMetrics for Counts {
    fn record_call(&self, tool: &str, ok: bool, seconds: f64) {
        self.0.lock().unwrap().push((tool.to_owned(), ok, seconds));
    }
}

/// A tool that waits until its call is cancelled (or `ms` pass), counting its runs and
/// noting whether the call's readiness had resolved when it started.
#[derive(Default)]
struct Wait {
    runs: AtomicUsize,
    ready: Arc<AtomicBool>,
    saw_ready: AtomicBool,
    /// The client model each run was handed (by its `Debug` name).
    samplers: Mutex<Vec<Option<String>>>,
}

impl Tool for Wait {
    fn name(&self) -> &'static str {
        "wait"
    }
    fn family(&self) -> &'static str {
        "test"
    }
    fn description(&self) -> &'static str {
        "Waits."
    }
    fn input_schema(&self) -> Map<String, Value> {
        json!({"type": "object", "properties": {"ms": {"type": "integer"}}})
            .as_object()
            .unwrap()
            .clone()
    }
    fn annotations(&self) -> ringfence_core::Annotations {
        ringfence_core::Annotations {
            title: "Wait",
            read_only: true,
            destructive: false,
            idempotent: true,
            open_world: false,
        }
    }
    fn call(&self, ctx: ToolContext, args: Value) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.saw_ready
            .store(self.ready.load(Ordering::SeqCst), Ordering::SeqCst);
        self.samplers
            .lock()
            .unwrap()
            .push(ctx.sampler.as_ref().map(|s| format!("{s:?}")));
        let ms = args["ms"].as_u64().unwrap_or(60_000);
        Box::pin(async move {
            tokio::select! {
                _ = ctx.cancel.cancelled() => Err(ToolError::cancelled()),
                _ = tokio::time::sleep(Duration::from_millis(ms)) => Ok(ToolOutput::text("waited")),
            }
        })
    }
}

struct Setup {
    fx: Fx,
    wait: Arc<Wait>,
    trail: Arc<Trail>,
    counts: Arc<Counts>,
    runner: ToolRunner,
}

fn setup(limit: Option<Duration>) -> Setup {
    let fx = Fx::new();
    let wait = Arc::new(Wait::default());
    let mut toolbox = fx.toolbox.clone();
    toolbox.register(wait.clone());
    let trail = Arc::new(Trail::default());
    let counts = Arc::new(Counts::default());
    let runner = ToolRunner::new(toolbox, fx.ctx.limits.clone())
        .with_call_timeout(limit)
        .with_audit(Some(trail.clone() as Arc<dyn AuditSink>))
        .with_metrics(Some(counts.clone() as Arc<dyn CallMetrics>));
    Setup {
        fx,
        wait,
        trail,
        counts,
        runner,
    }
}

impl Setup {
    fn scope(&self) -> ToolResult<CallScope> {
        Ok(CallScope {
            session: self.fx.ctx.session.clone(),
            spill: self.fx.ctx.spill.clone(),
        })
    }

    fn request<'a>(&self, tool: &'a str, args: Value) -> CallRequest<'a> {
        CallRequest {
            tool,
            args,
            user: "alice",
            session_id: "s-1",
            scope: self.scope(),
            received: Instant::now(),
            cancel: CancellationToken::new(),
            progress: Progress::none(),
            ready: None,
            sampler: None,
        }
    }

    async fn run(&self, req: CallRequest<'_>) -> ToolResult<ToolOutput> {
        self.runner.call(req).await.expect("the tool is offered")
    }
}

#[tokio::test]
async fn an_unknown_tool_is_refused_naming_the_offered_ones_and_runs_nothing() {
    let s = setup(None);
    let err = s
        .runner
        .call(s.request("write_fiel", json!({})))
        .await
        .unwrap_err();
    assert_eq!(err.name, "write_fiel");
    assert!(err.available.contains(&"write_file") && err.available.contains(&"wait"));
    assert!(err.to_string().contains("unknown tool `write_fiel`"));
    // A protocol error, not a call: neither audited nor counted.
    assert!(s.trail.events().is_empty());
    assert!(s.counts.0.lock().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_is_audited_and_counted_without_its_content() {
    let s = setup(None);
    s.run(s.request(
        "write_file",
        json!({"path": "diary.txt", "content": "my secret diary"}),
    ))
    .await
    .unwrap();
    assert_eq!(s.fx.read_str("diary.txt"), "my secret diary");
    // Bad arguments fail the call; the call is still audited, its content still hidden.
    let err = s
        .run(s.request(
            "write_file",
            json!({"path": "d.txt", "contents": "another secret"}),
        ))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);

    let events = s.trail.events();
    assert_eq!(events.len(), 2);
    let (ok, bad) = (&events[0], &events[1]);
    assert_eq!(
        (ok.user.as_str(), ok.session.as_str(), ok.tool.as_str()),
        ("alice", "s-1", "write_file")
    );
    assert_eq!((ok.outcome, ok.error), ("ok", None));
    assert_eq!(ok.args["path"], "diary.txt");
    assert_eq!(ok.args["content"]["len"], 15);
    assert_eq!(
        (bad.outcome, bad.error),
        ("error", Some("invalid_argument"))
    );
    for e in &events {
        let line = serde_json::to_string(e).unwrap();
        assert!(!line.contains("secret"), "{line}");
    }
    let counts = s.counts.0.lock().unwrap().clone();
    let seen: Vec<(&str, bool)> = counts.iter().map(|(t, ok, _)| (t.as_str(), *ok)).collect();
    assert_eq!(seen, [("write_file", true), ("write_file", false)]);
}

#[tokio::test]
async fn a_refused_scope_runs_nothing_and_is_audited() {
    let s = setup(None);
    let mut req = s.request("wait", json!({"ms": 1}));
    req.scope = Err(ToolError::new(
        ToolErrorKind::Unavailable,
        "your roots could not be made",
    ));
    let err = s.run(req).await.unwrap_err();
    assert_eq!(err.message, "your roots could not be made");
    assert_eq!(s.wait.runs.load(Ordering::SeqCst), 0);
    let events = s.trail.events();
    assert_eq!(events.len(), 1);
    assert_eq!(
        (events[0].outcome, events[0].error),
        ("error", Some("unavailable"))
    );
}

// Paused time: the clock moves only when every task waits, so the order of the waits, not
// the machine's load, decides what ends first.
#[tokio::test(start_paused = true)]
async fn the_time_limit_stops_a_call_with_a_timeout_error() {
    let s = setup(Some(Duration::from_millis(50)));
    let err = s.run(s.request("wait", json!({}))).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert!(
        err.message.contains("longer than this server allows"),
        "{}",
        err.message
    );
    assert_eq!(s.trail.events()[0].error, Some("timeout"));
    // A call within the limit is not touched by it.
    let out = s.run(s.request("wait", json!({"ms": 1}))).await.unwrap();
    assert_eq!(out.all_text(), "waited");
}

// Paused time: the clock moves only when every task waits, so the order of the waits, not
// the machine's load, decides what ends first.
#[tokio::test(start_paused = true)]
async fn the_callers_cancellation_is_a_cancellation_not_a_timeout() {
    let s = setup(Some(Duration::from_secs(60)));
    let req = s.request("wait", json!({}));
    let cancel = req.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        cancel.cancel();
    });
    let err = s.run(req).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Cancelled);
}

// Paused time: the clock moves only when every task waits, so the order of the waits, not
// the machine's load, decides what ends first.
#[tokio::test(start_paused = true)]
async fn a_call_starts_once_ready_and_waiting_counts_within_the_limit() {
    let s = setup(Some(Duration::from_millis(100)));
    let flag = s.wait.ready.clone();
    let mut req = s.request("wait", json!({"ms": 1}));
    req.ready = Some(Box::pin(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        flag.store(true, Ordering::SeqCst);
        Ok(())
    }));
    s.run(req).await.unwrap();
    assert!(s.wait.saw_ready.load(Ordering::SeqCst));

    // Readiness that never comes: the time limit ends the call before the tool runs.
    let mut req = s.request("wait", json!({"ms": 1}));
    req.ready = Some(Box::pin(std::future::pending()));
    let err = s.run(req).await.unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    assert_eq!(s.wait.runs.load(Ordering::SeqCst), 1);

    // Readiness that fails: its error is the call's.
    let mut req = s.request("wait", json!({"ms": 1}));
    req.ready = Some(Box::pin(async {
        Err(ToolError::new(ToolErrorKind::Denied, "no roots in common"))
    }));
    let err = s.run(req).await.unwrap_err();
    assert_eq!(err.message, "no roots in common");
    assert_eq!(s.wait.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_duration_counts_from_when_the_caller_received_the_call() {
    let s = setup(None);
    let mut req = s.request("wait", json!({"ms": 1}));
    // The caller spent 300 ms making the session before handing the call over.
    req.received = Instant::now() - Duration::from_millis(300);
    s.run(req).await.unwrap();
    let event = &s.trail.events()[0];
    assert!(event.duration_ms >= 300.0, "{}", event.duration_ms);
    assert!(s.counts.0.lock().unwrap()[0].2 >= 0.3);
}

/// A client's model, known by its name.
#[derive(Debug)]
#[allow(dead_code, reason = "read through its Debug form")]
struct NamedSampler(&'static str);

impl ringfence_core::ClientSampler for NamedSampler {
    fn supports_tools(&self) -> bool {
        false
    }
    fn create_message(
        &self,
        _: ringfence_core::SamplingRequest,
    ) -> BoxFuture<'static, Result<ringfence_core::SamplingReply, ringfence_core::BackendError>>
    {
        Box::pin(async { Err(ringfence_core::BackendError::new("not asked here")) })
    }
}

#[tokio::test]
async fn each_call_is_handed_its_own_clients_model_even_on_a_shared_session() {
    // Two clients of one user run in the same session (stateless HTTP shares one): a tool
    // that samples must reach the client that made its call, and a client without sampling
    // gets none, whatever the other one offered.
    let s = setup(None);
    let mut a = s.request("wait", json!({"ms": 1}));
    a.sampler = Some(Arc::new(NamedSampler("client-a")));
    let mut b = s.request("wait", json!({"ms": 1}));
    b.sampler = Some(Arc::new(NamedSampler("client-b")));
    let c = s.request("wait", json!({"ms": 1}));
    let (ra, rb) = tokio::join!(s.run(a), s.run(b));
    ra.unwrap();
    rb.unwrap();
    s.run(c).await.unwrap();
    let mut seen = s.wait.samplers.lock().unwrap().clone();
    let last = seen.pop().unwrap();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            Some("NamedSampler(\"client-a\")".to_owned()),
            Some("NamedSampler(\"client-b\")".to_owned())
        ]
    );
    assert_eq!(
        last, None,
        "a call without sampling got another client's model"
    );
}

#[tokio::test]
async fn a_tool_turned_off_answers_how_to_turn_it_on_and_is_audited_and_counted() {
    let mut s = setup(None);
    s.runner = s.runner.with_not_offered(
        [(
            "run_shell_command".to_owned(),
            "set [shell] enabled = true".to_owned(),
        )]
        .into(),
    );
    let err = s
        .run(s.request("run_shell_command", json!({"command": "ls", "secret": "x"})))
        .await
        .unwrap_err();
    assert_eq!(err.kind, ToolErrorKind::Disabled);
    assert_eq!(
        err.message,
        "run_shell_command is turned off on this server: set [shell] enabled = true"
    );
    let events = s.trail.0.lock().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].tool, "run_shell_command");
    assert_eq!(events[0].error, Some("disabled"));
    assert!(
        !events[0].args.to_string().contains("ls"),
        "{}",
        events[0].args
    );
    drop(events);
    let counted: Vec<(String, bool)> = s
        .counts
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|(t, ok, _)| (t.clone(), *ok))
        .collect();
    assert_eq!(counted, [("run_shell_command".to_owned(), false)]);
}
