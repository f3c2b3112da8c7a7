//! delegate_task through the tool, with a scripted in-process model: a task that writes a
//! file and runs a command (for real, in the sandbox through this binary as the helper), a
//! failed criterion, the turn limit, a model error, the timeout, cancellation killing the
//! sub-agent's command, one task per user, argument errors, context files, and the tools the
//! sub-agent is offered.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ringfence_core::{
    AuditEvent, AuditSink, StepAudit, ToolErrorKind, ToolOutput, ToolRunner, Toolbox,
};
use ringfence_delegate::{self as delegate, DelegateLimits, DelegateServices, FixedModel};
use ringfence_files::journal::{Journaling, MemoryJournal};
use ringfence_files::{self as files, FileServices};
use ringfence_llm::{
    Block, BoxFuture, ChatModel, ChatRequest, ChatResponse, LlmError, StopReason, Usage,
};
use ringfence_shell as shell;
use serde_json::{Value, json};

use crate::common::Fx;

/// An audit sink that keeps what it is given.
#[derive(Debug, Default)]
struct Recorded(Mutex<Vec<AuditEvent>>);

impl AuditSink for Recorded {
    fn record(&self, event: AuditEvent) {
        self.0.lock().unwrap().push(event);
    }
}

/// One scripted answer.
enum Step {
    Answer(ChatResponse),
    Fail(String),
}

/// A model answering from a script (then `fallback`, if any), after `delay`, recording every
/// request.
#[derive(Default)]
struct Scripted {
    steps: Mutex<VecDeque<Step>>,
    fallback: Option<ChatResponse>,
    delay: Duration,
    requests: Mutex<Vec<ChatRequest>>,
}

impl Scripted {
    fn new(steps: Vec<Step>) -> Scripted {
        Scripted {
            steps: Mutex::new(steps.into()),
            ..Scripted::default()
        }
    }

    fn requests(&self) -> Vec<ChatRequest> {
        self.requests.lock().unwrap().clone()
    }
}

impl ChatModel for Scripted {
    fn chat(&self, req: ChatRequest) -> BoxFuture<'static, Result<ChatResponse, LlmError>> {
        self.requests.lock().unwrap().push(req);
        let step = self.steps.lock().unwrap().pop_front();
        let step = match (step, &self.fallback) {
            (Some(s), _) => s,
            (None, Some(f)) => Step::Answer(f.clone()),
            (None, None) => Step::Fail("the script ran out".into()),
        };
        let delay = self.delay;
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            match step {
                Step::Answer(r) => Ok(r),
                Step::Fail(m) => Err(LlmError::Setup(m)),
            }
        })
    }

    fn describe(&self) -> String {
        "scripted test model".into()
    }
}

fn call(id: &str, name: &str, input: Value) -> Step {
    Step::Answer(ChatResponse {
        content: vec![
            Block::text(format!("calling {name}")),
            Block::ToolUse {
                id: id.into(),
                name: name.into(),
                input,
            },
        ],
        stop: StopReason::ToolUse,
        usage: Usage {
            input_tokens: 100,
            output_tokens: 10,
        },
    })
}

fn finish(status: &str, summary: &str, criteria: Value) -> Step {
    call(
        "fin",
        "finish_task",
        json!({"status": status, "summary": summary, "criteria": criteria}),
    )
}

/// A fixture whose toolbox holds delegate_task over `model` beside the file tools and the
/// shell (this binary as the sandbox helper), called through one shared runner as the server
/// does: the sub-agent's tools are the runner's.
fn fx_with(model: Arc<Scripted>, limits: DelegateLimits) -> Fx {
    let mut fx = Fx::new();
    fx.toolbox = Toolbox::of(&[
        files::family(FileServices {
            journal: Journaling::to(Arc::new(MemoryJournal::default())),
        }),
        shell::family(crate::shell::config()),
        delegate::family(DelegateServices {
            model: Arc::new(FixedModel(model)),
            limits,
        }),
    ]);
    fx.ctx.runner = Some(ToolRunner::new(fx.toolbox.clone(), fx.ctx.limits.clone()).shared());
    fx
}

fn fx(model: Arc<Scripted>) -> Fx {
    fx_with(model, DelegateLimits::default())
}

async fn run(fx: &Fx, args: Value) -> (String, Value) {
    let out: ToolOutput = fx
        .call_full("delegate_task", args.clone())
        .await
        .unwrap_or_else(|e| panic!("{args}: {:?} {}", e.kind, e.message));
    (out.all_text(), out.structured.unwrap())
}

fn tool_results(req: &ChatRequest) -> Vec<(String, bool)> {
    req.messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|b| match b {
            Block::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_writes_a_file_runs_a_command_and_reports_what_changed() {
    let model = Arc::new(Scripted::new(vec![
        call(
            "w1",
            "write_file",
            json!({"path": "notes/hello.txt", "content": "hi there\n"}),
        ),
        call(
            "s1",
            "run_shell_command",
            json!({"command": "cat notes/hello.txt > made.txt && echo ran-$((6*7))"}),
        ),
        finish(
            "completed",
            "wrote hello.txt and made.txt",
            json!([{"criterion": "made.txt holds the greeting", "met": true, "evidence": "cat made.txt: hi there"}]),
        ),
    ]));
    let mut fx = fx(model.clone());
    let audit = Arc::new(Recorded::default());
    fx.ctx.steps = Some(StepAudit::new(
        audit.clone(),
        "alice",
        "s-1",
        "delegate_task",
    ));
    fx.write("old.txt", "kept\n");
    let (text, s) = run(
        &fx,
        json!({"description": "write a greeting and copy it", "successCriteria": ["made.txt holds the greeting"]}),
    )
    .await;
    assert_eq!(s["status"], "completed", "{text}");
    // Every step is in the audit trail, its file content redacted.
    let events = audit.0.lock().unwrap();
    let tools: Vec<&str> = events.iter().map(|e| e.tool.as_str()).collect();
    assert_eq!(
        tools,
        [
            "delegate_task/write_file",
            "delegate_task/run_shell_command"
        ]
    );
    assert!(
        events
            .iter()
            .all(|e| e.outcome == "ok" && e.user == "alice")
    );
    assert_eq!(events[0].args["path"], "notes/hello.txt");
    assert_eq!(events[0].args["content"]["len"], 9);
    assert!(!events[0].args.to_string().contains("hi there"));
    drop(events);
    assert_eq!(s["summary"], "wrote hello.txt and made.txt");
    assert_eq!(s["turns"], 3);
    assert_eq!(s["tokens"], 330);
    assert_eq!(s["model"], "scripted test model");
    assert_eq!(s["filesCreated"], json!(["made.txt", "notes/hello.txt"]));
    assert_eq!(s["filesModified"], json!([]));
    assert_eq!(s["filesDeleted"], json!([]));
    assert_eq!(
        s["criteria"],
        json!([{"criterion": "made.txt holds the greeting", "met": true, "evidence": "cat made.txt: hi there"}])
    );
    // The command really ran, in the sandbox, in the working directory.
    assert_eq!(fx.read_str("made.txt"), "hi there\n");
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3);
    let results = tool_results(&reqs[2]);
    assert!(!results[0].1, "{results:?}");
    assert!(results[1].0.contains("ran-42"), "{results:?}");
    assert!(results[1].0.contains("Sandbox: Landlock"), "{results:?}");
    // The transcript holds every call and result.
    let path = s["transcriptFile"].as_str().unwrap();
    let transcript = std::fs::read_to_string(path).unwrap();
    let lines: Vec<Value> = transcript
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(transcript.contains("\"write_file\""), "{transcript}");
    assert!(transcript.contains("run_shell_command"), "{transcript}");
    assert!(transcript.contains("ran-42"), "{transcript}");
    assert!(transcript.contains("finish_task"), "{transcript}");
    assert_eq!(lines[0]["type"], "task");
    assert_eq!(lines.last().unwrap()["type"], "end");
    assert!(text.contains("Status: completed"), "{text}");
    assert!(text.contains("made.txt"), "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_criterion_is_reported_with_the_verdicts_given() {
    let model = Arc::new(Scripted::new(vec![
        call(
            "r",
            "run_shell_command",
            json!({"command": "rm gone.txt; echo x >> edit.txt"}),
        ),
        finish(
            "failed",
            "the tests do not pass",
            json!([
                {"criterion": "tests pass", "met": false, "evidence": "2 failures"},
                {"criterion": "no warnings", "met": true, "evidence": "clean build"}
            ]),
        ),
    ]));
    let fx = fx(model);
    fx.write("gone.txt", "bye\n");
    fx.write("edit.txt", "a\n");
    let (_, s) = run(
        &fx,
        json!({"description": "fix the tests", "successCriteria": ["tests pass", "No  warnings", "docs updated"]}),
    )
    .await;
    assert_eq!(s["status"], "failed");
    assert_eq!(s["summary"], "the tests do not pass");
    assert_eq!(
        s["criteria"],
        json!([
            {"criterion": "tests pass", "met": false, "evidence": "2 failures"},
            {"criterion": "No  warnings", "met": true, "evidence": "clean build"},
            {"criterion": "docs updated", "met": false, "evidence": "not reported"}
        ])
    );
    assert_eq!(s["filesDeleted"], json!(["gone.txt"]));
    assert_eq!(s["filesModified"], json!(["edit.txt"]));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_never_finishes_meets_the_turn_limit_and_a_model_error_fails_the_task() {
    let mut m = Scripted::default();
    let Step::Answer(r) = call("l", "list_directory", json!({"path": "."})) else {
        unreachable!()
    };
    m.fallback = Some(r);
    let model = Arc::new(m);
    let fx1 = fx_with(
        model.clone(),
        DelegateLimits {
            max_turns: 3,
            ..DelegateLimits::default()
        },
    );
    let (_, s) = run(&fx1, json!({"description": "loop forever"})).await;
    assert_eq!(s["status"], "failed");
    assert!(
        s["summary"]
            .as_str()
            .unwrap()
            .contains("turn limit (3 turns)"),
        "{s}"
    );
    assert_eq!(s["turns"], 3);
    assert_eq!(model.requests().len(), 3);

    let model = Arc::new(Scripted::new(vec![Step::Fail(
        "http://x answered HTTP 500".into(),
    )]));
    let fx2 = fx(model);
    let (_, s) = run(&fx2, json!({"description": "anything"})).await;
    assert_eq!(s["status"], "failed");
    assert!(
        s["summary"]
            .as_str()
            .unwrap()
            .contains("the model failed: http://x answered HTTP 500"),
        "{s}"
    );
    let transcript = std::fs::read_to_string(s["transcriptFile"].as_str().unwrap()).unwrap();
    assert!(transcript.contains("model_error"), "{transcript}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_token_budget_stops_the_task() {
    let mut m = Scripted::default();
    let Step::Answer(r) = call("l", "list_directory", json!({"path": "."})) else {
        unreachable!()
    };
    m.fallback = Some(r);
    let fx = fx_with(
        Arc::new(m),
        DelegateLimits {
            token_budget: 250,
            ..DelegateLimits::default()
        },
    );
    let (_, s) = run(&fx, json!({"description": "spend"})).await;
    assert_eq!(s["status"], "failed");
    assert!(
        s["summary"].as_str().unwrap().contains("token budget (250"),
        "{s}"
    );
    assert_eq!(s["turns"], 3); // 110 + 110 + 110 >= 250
}

#[tokio::test(flavor = "multi_thread")]
async fn a_model_that_reports_no_usage_still_meets_the_budget() {
    let mut m = Scripted::default();
    let Step::Answer(mut r) = call("l", "list_directory", json!({"path": "."})) else {
        unreachable!()
    };
    r.usage = Usage::default();
    m.fallback = Some(r);
    let fx = fx_with(
        Arc::new(m),
        DelegateLimits {
            token_budget: 2000,
            ..DelegateLimits::default()
        },
    );
    let (_, s) = run(&fx, json!({"description": "spend without saying so"})).await;
    assert_eq!(s["status"], "failed", "{s}");
    assert!(
        s["summary"]
            .as_str()
            .unwrap()
            .contains("token budget (2000"),
        "{s}"
    );
    let turns = s["turns"].as_u64().unwrap();
    assert!((1..30).contains(&turns), "{s}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_model_times_out() {
    let mut m = Scripted::new(vec![finish("completed", "late", json!([]))]);
    m.delay = Duration::from_secs(20);
    let fx = fx(Arc::new(m));
    let started = Instant::now();
    let (_, s) = run(&fx, json!({"description": "be slow", "timeout": 0.7})).await;
    let took = started.elapsed();
    // Not before its time; that it ended then and not when the model answered (20 s) is
    // the status (no upper bound in seconds: a loaded machine may be slow).
    assert_eq!(s["status"], "timed_out", "{s}");
    assert!(took >= Duration::from_millis(700), "{took:?}");
    assert!(
        s["summary"].as_str().unwrap().contains("ran out of time"),
        "{s}"
    );
}

fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // A zombie is dead.
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Pids of running (not zombie) processes whose command line holds `marker`, seen from
/// here (a command's own pids are its PID namespace's, so it is found by its arguments).
fn running_with(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(marker))
                && alive(*pid)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_stops_the_task_and_kills_its_command() {
    // A duration no other process on the machine sleeps for: the command's mark.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    let mark = format!("60.{nanos:09}");
    let model = Arc::new(Scripted::new(vec![
        call(
            "s",
            "run_shell_command",
            json!({"command": format!("exec sleep {mark}"), "timeout": 120}),
        ),
        finish("completed", "never", json!([])),
    ]));
    let fx = Arc::new(fx(model));
    let cancel = fx.ctx.cancel.clone();
    let watched = mark.clone();
    let watcher = tokio::spawn(async move {
        for _ in 0..200 {
            if let Some(&pid) = running_with(&watched).first() {
                tokio::time::sleep(Duration::from_millis(200)).await;
                cancel.cancel();
                return Some(pid);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    });
    let e = fx
        .err("delegate_task", json!({"description": "sleep a while"}))
        .await;
    assert_eq!(e.kind, ToolErrorKind::Cancelled, "{}", e.message);
    let pid = watcher.await.unwrap().expect("the command started");
    let mut left = running_with(&mark);
    for _ in 0..40 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        left = running_with(&mark);
    }
    assert!(
        left.is_empty(),
        "sleep {mark} (pid {pid}) outlived the cancelled task"
    );
    // The transcript was saved anyway.
    let spills: Vec<String> = std::fs::read_dir(fx.data.join("tool-output"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect();
    assert!(
        spills
            .iter()
            .any(|t| t.contains(&format!("sleep {mark}")) && t.contains("\"cancelled\":true")),
        "{spills:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn one_task_per_user_at_a_time() {
    let mut m = Scripted::new(vec![
        finish("completed", "first done", json!([])),
        finish("completed", "other user done", json!([])),
        finish("completed", "again", json!([])),
    ]);
    m.delay = Duration::from_millis(1500);
    let fx = Arc::new(fx(Arc::new(m)));
    let long = "refactor the parser so that every error names its line and column, and add tests for each error path in the lexer";
    let first = {
        let fx = fx.clone();
        tokio::spawn(async move {
            fx.call_full("delegate_task", json!({"description": long}))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let e = fx
        .err("delegate_task", json!({"description": "second"}))
        .await;
    assert_eq!(e.kind, ToolErrorKind::Refused);
    assert!(
        e.message.contains(&format!("\"{}…\"", &long[..80])),
        "{}",
        e.message
    );
    assert!(e.message.contains(" UTC, 0 s ago"), "{}", e.message);
    // Another user is not held up.
    let mut other = Fx::new();
    let mut ctx = other.ctx.clone();
    let own = std::mem::replace(&mut other.ctx.session, fx.ctx.session.clone());
    ctx.session = fx.ctx.session.clone();
    let ws = Arc::try_unwrap(own);
    let session = match ws {
        Ok(s) => s,
        Err(_) => panic!("session shared"),
    };
    ctx.session = Arc::new(session.with_user("bob"));
    ctx.runner = fx.ctx.runner.clone();
    let tool = fx.toolbox.get("delegate_task").unwrap().clone();
    let out = tool
        .call(ctx, json!({"description": "bob's task"}))
        .await
        .unwrap();
    assert_eq!(out.structured.unwrap()["status"], "completed");
    let out = first.await.unwrap().unwrap();
    assert_eq!(out.structured.unwrap()["summary"], "first done");
    // The slot is free again.
    let (_, s) = run(&fx, json!({"description": "third"})).await;
    assert_eq!(s["summary"], "again");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_name_the_problem() {
    let fx = fx(Arc::new(Scripted::default()));
    let outside = fx.tmp.path().join("outside/secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    for (args, kind, needle) in [
        (
            json!({"description": "x", "timeout": 0}),
            ToolErrorKind::InvalidArgument,
            "at most 600",
        ),
        (
            json!({"description": "x", "timeout": 601}),
            ToolErrorKind::InvalidArgument,
            "at most 600",
        ),
        (
            json!({"description": "  "}),
            ToolErrorKind::InvalidArgument,
            "description is empty",
        ),
        (
            json!({}),
            ToolErrorKind::InvalidArgument,
            "missing field `description`",
        ),
        (
            json!({"description": "x", "context": []}),
            ToolErrorKind::InvalidArgument,
            "unknown field",
        ),
        (
            json!({"description": "x", "contextFiles": [outside.display().to_string()]}),
            ToolErrorKind::OutsideWorkspace,
            "",
        ),
        (
            json!({"description": "x", "contextFiles": ["../outside/secret.txt"]}),
            ToolErrorKind::OutsideWorkspace,
            "",
        ),
        (
            json!({"description": "x", "workingDirectory": "nope"}),
            ToolErrorKind::NotFound,
            "does not exist",
        ),
    ] {
        let e = fx.err("delegate_task", args.clone()).await;
        assert_eq!(e.kind, kind, "{args}: {}", e.message);
        assert!(e.message.contains(needle), "{args}: {}", e.message);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn context_files_are_given_to_the_model_and_cut_when_large() {
    let model = Arc::new(Scripted::new(vec![finish("completed", "read", json!([]))]));
    let fx = fx(model.clone());
    fx.write("spec.md", "# The spec\nEvery line ends with a semicolon.\n");
    fx.write("big.txt", "y".repeat(150 * 1024));
    run(
        &fx,
        json!({"description": "follow the spec", "contextFiles": ["spec.md", "big.txt"], "successCriteria": ["semicolons"]}),
    )
    .await;
    let reqs = model.requests();
    let Block::Text(first) = &reqs[0].messages[0].content[0] else {
        panic!("first message is not text")
    };
    assert!(
        first.contains("Every line ends with a semicolon."),
        "{first}"
    );
    assert!(
        first.contains(&fx.path("spec.md").display().to_string()),
        "{first}"
    );
    assert!(
        first.contains("[cut: 102400 of 153600 bytes given (at most 100 KB per context file)"),
        "{}",
        &first[first.len() - 300..]
    );
    assert!(reqs[0].system.contains("follow the spec"));
    assert!(reqs[0].system.contains("- semicolons"));
    assert!(reqs[0].system.contains(&fx.root.display().to_string()));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sub_agent_is_offered_its_tools_and_finish_task_never_delegate_task() {
    let model = Arc::new(Scripted::new(vec![
        call("d", "delegate_task", json!({"description": "recurse"})),
        finish("completed", "done", json!([])),
    ]));
    // delegate_task is among the runner's tools, and left out of the sub-agent's.
    let fx = fx(model.clone());
    run(&fx, json!({"description": "try to recurse"})).await;
    let reqs = model.requests();
    let names: Vec<&str> = reqs[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(
        names.contains(&"write_file") && names.contains(&"read_file"),
        "{names:?}"
    );
    assert!(names.contains(&"run_shell_command"), "{names:?}");
    assert_eq!(names.last(), Some(&"finish_task"));
    assert!(!names.contains(&"delegate_task"), "{names:?}");
    // Calling it anyway is an error result, not a nested task.
    let results = tool_results(&reqs[1]);
    assert!(results[0].1, "{results:?}");
    assert!(
        results[0].0.contains("unknown tool `delegate_task`"),
        "{results:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_names_each_step() {
    let model = Arc::new(Scripted::new(vec![
        call("l", "list_directory", json!({"path": "."})),
        finish("completed", "done", json!([])),
    ]));
    let mut fx = fx(model);
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    fx.ctx.progress = ringfence_core::Progress::new(move |u| {
        sink.lock().unwrap().push(u.message.unwrap_or_default());
    });
    run(&fx, json!({"description": "list"})).await;
    let seen = seen.lock().unwrap().join("\n");
    assert!(
        seen.contains("step 1/30: list_directory {\"path\":\".\"}"),
        "{seen}"
    );
    assert!(seen.contains("step 2/30: asking the model"), "{seen}");
}

#[derive(Debug, Default)]
struct Counted(Mutex<Vec<(String, bool)>>);

impl ringfence_core::CallMetrics for Counted {
    fn record_call(&self, tool: &str, ok: bool, _seconds: f64) {
        self.0.lock().unwrap().push((tool.to_owned(), ok));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_sub_agents_calls_go_through_the_servers_runner() {
    // A step the runner does not offer is refused in the runner's words, and every step is
    // counted in the runner's metrics like any call.
    let model = Arc::new(Scripted::new(vec![
        call(
            "w",
            "write_file",
            json!({"path": "a.txt", "content": "a\n"}),
        ),
        call("x", "teleport", json!({})),
        finish("completed", "wrote a.txt", json!([])),
    ]));
    let mut fx = fx(model.clone());
    let metrics = Arc::new(Counted::default());
    fx.ctx.runner = Some(
        ToolRunner::new(fx.toolbox.clone(), fx.ctx.limits.clone())
            .with_metrics(Some(metrics.clone()))
            .shared(),
    );
    let (text, s) = run(&fx, json!({"description": "write a.txt"})).await;
    assert_eq!(s["status"], "completed", "{text}");
    assert_eq!(fx.read_str("a.txt"), "a\n");
    assert_eq!(
        *metrics.0.lock().unwrap(),
        [("write_file".to_owned(), true)],
        "the unknown tool never reached a tool"
    );
    let results = tool_results(&model.requests()[2]);
    assert!(
        results[1].1
            && results[1]
                .0
                .contains("unknown tool `teleport`; available tools: "),
        "{results:?}"
    );
    assert!(!results[1].0.contains("delegate_task"), "{results:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_shared_runner_the_task_is_refused_before_it_starts() {
    let model = Arc::new(Scripted::new(vec![finish("completed", "never", json!([]))]));
    let mut fx = fx(model.clone());
    fx.ctx.runner = None;
    let e = fx
        .call_full("delegate_task", json!({"description": "anything"}))
        .await
        .unwrap_err();
    assert_eq!(e.kind, ToolErrorKind::Unavailable);
    assert!(model.requests().is_empty(), "no model turn was spent");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_steps_own_progress_is_the_tasks_between_its_step_and_the_next() {
    let model = Arc::new(Scripted::new(vec![
        call(
            "s",
            "run_shell_command",
            json!({"command": "echo one; sleep 0.4; echo two; sleep 0.4; echo three"}),
        ),
        finish("completed", "said three things", json!([])),
    ]));
    let mut fx = fx(model);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    fx.ctx.progress = ringfence_core::Progress::new(move |u| {
        sink.lock()
            .unwrap()
            .push((u.progress, u.message.unwrap_or_default()));
    });
    let (text, s) = run(&fx, json!({"description": "say three things"})).await;
    assert_eq!(s["status"], "completed", "{text}");
    let seen = seen.lock().unwrap();
    let values: Vec<f64> = seen.iter().map(|(p, _)| *p).collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "progress only increases: {values:?}"
    );
    // The command's own progress came through, headed with its step.
    assert!(
        seen.iter()
            .any(|(p, m)| *p > 0.5 && *p < 1.0 && m.starts_with("step 1/") && m.contains("two")),
        "{seen:?}"
    );
}
