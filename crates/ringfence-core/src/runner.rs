//! The one way a tool call runs, whoever asks — the MCP server, `ringfence call`, and the
//! sub-agent of `delegate_task` (`ToolRunner::call_within`): look the tool up, build its context, wait for the
//! caller's gate (the MCP client's roots), run it under the time limit, then record it in
//! the metrics and the audit trail with its sensitive arguments redacted.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::error::{ToolError, ToolErrorKind, ToolResult};
use crate::limits::Limits;
use crate::session::Session;
use crate::spill::SpillStore;
use crate::tool::{BoxFuture, Progress, Tool, ToolContext, ToolOutput};
use crate::toolbox::Toolbox;

/// One tool call, as the audit trail records it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AuditEvent {
    /// RFC 3339 UTC, milliseconds.
    pub time: String,
    pub user: String,
    pub session: String,
    pub tool: String,
    /// The arguments with every sensitive value (and every long string) replaced by its
    /// length and hash.
    pub args: Value,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'static str>,
    pub duration_ms: f64,
}

/// Where audit events go. Implementations must not block the call (queue and return).
pub trait AuditSink: Send + Sync + std::fmt::Debug {
    fn record(&self, event: AuditEvent);
}

/// Records the calls a tool makes to other tools (the sub-agent's steps of `delegate_task`)
/// in the audit trail of the call that made them, as `<outer tool>/<inner tool>`, with the
/// inner tool's sensitive arguments redacted like any call's.
#[derive(Clone)]
pub struct StepAudit {
    sink: Arc<dyn AuditSink>,
    user: String,
    session: String,
    parent: &'static str,
}

impl std::fmt::Debug for StepAudit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepAudit")
            .field("user", &self.user)
            .field("parent", &self.parent)
            .finish_non_exhaustive()
    }
}

impl StepAudit {
    pub fn new(sink: Arc<dyn AuditSink>, user: &str, session: &str, parent: &'static str) -> Self {
        StepAudit {
            sink,
            user: user.to_owned(),
            session: session.to_owned(),
            parent,
        }
    }

    /// One inner call of `tool` with `args`, its outcome (the error kind when it failed)
    /// and how long it took.
    pub fn record(
        &self,
        tool: &dyn Tool,
        args: &Value,
        error: Option<ToolErrorKind>,
        elapsed: Duration,
    ) {
        let known: Vec<String> = tool
            .input_schema()
            .get("properties")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        self.sink.record(AuditEvent {
            time: crate::time::format_iso(std::time::SystemTime::now()),
            user: self.user.clone(),
            session: self.session.clone(),
            tool: format!("{}/{}", self.parent, tool.name()),
            args: redact_args(args, tool.sensitive_args(), &known),
            outcome: if error.is_none() { "ok" } else { "error" },
            error: error.map(|k| k.as_str()),
            duration_ms: (elapsed.as_secs_f64() * 1_000_000.0).round() / 1000.0,
        });
    }
}

/// Where call counts and latencies go (the HTTP server's `/metrics`).
pub trait CallMetrics: Send + Sync + std::fmt::Debug {
    fn record_call(&self, tool: &str, ok: bool, seconds: f64);
}

/// Strings longer than this are redacted whatever their argument's name.
const LONG_STRING: usize = 512;

/// `args` with the value of every key in `sensitive` (at any depth: `edits[].old_string`
/// too), of every top-level key that is not one of the tool's parameters (`known`: content
/// sent under a misspelt name is still content), and every string over 512 bytes replaced
/// by `{"len": bytes, "blake3": first 16 hex digits}`, so the audit trail can tell calls apart
/// without holding what they carried.
pub fn redact_args(args: &Value, sensitive: &[&str], known: &[String]) -> Value {
    fn walk(v: &Value, sensitive: &[&str], hide: bool) -> Value {
        match v {
            Value::String(s) if hide || s.len() > LONG_STRING => json!({
                "len": s.len(),
                "blake3": &blake3::hash(s.as_bytes()).to_hex()[..16],
            }),
            // A sensitive value of another type (a number, a flag) says little, but its
            // presence is all the trail needs.
            Value::Number(_) | Value::Bool(_) if hide => json!({ "redacted": true }),
            Value::Object(m) => Value::Object(
                m.iter()
                    .map(|(k, v)| {
                        let hide = hide || sensitive.contains(&k.as_str());
                        (k.clone(), walk(v, sensitive, hide))
                    })
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(|v| walk(v, sensitive, hide)).collect()),
            other => other.clone(),
        }
    }
    match args {
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| {
                    let hide = sensitive.contains(&k.as_str()) || !known.iter().any(|n| n == k);
                    (k.clone(), walk(v, sensitive, hide))
                })
                .collect(),
        ),
        other => walk(other, sensitive, true),
    }
}

/// The caller asked for a tool this runner does not offer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown tool `{name}`; available tools: {}", available.join(", "))]
pub struct UnknownTool {
    pub name: String,
    pub available: Vec<&'static str>,
}

/// Where a call runs: its session (roots, current workspace, read tracker, user) and where
/// its long outputs are saved.
#[derive(Debug, Clone)]
pub struct CallScope {
    pub session: Arc<Session>,
    pub spill: Arc<SpillStore>,
}

/// What connects one call to its caller: cancellation, progress, the gate it waits on
/// and where its sub-steps are audited.
struct Wiring<'a> {
    cancel: CancellationToken,
    progress: Progress,
    ready: Option<BoxFuture<'a, ToolResult<()>>>,
    steps: Option<StepAudit>,
    sampler: Option<Arc<dyn crate::session::ClientSampler>>,
}

/// One call as a caller hands it to the runner.
pub struct CallRequest<'a> {
    pub tool: &'a str,
    pub args: Value,
    /// Who asked (for the audit trail, also when `scope` is refused).
    pub user: &'a str,
    /// Names the caller's session in the audit trail.
    pub session_id: &'a str,
    /// The session to run in, or why the caller may not run anything.
    pub scope: ToolResult<CallScope>,
    /// When the caller received the call, before it made `scope` (a user's first call builds
    /// their roots): the audit trail's duration and the latency metrics count from here.
    pub received: Instant,
    /// Cancelled by the caller (the client's `notifications/cancelled`); the runner's time
    /// limit cancels a child of it.
    pub cancel: CancellationToken,
    pub progress: Progress,
    /// Resolves when the call may start (the MCP server waits for the client's roots);
    /// counted within the time limit and cancellable.
    pub ready: Option<BoxFuture<'a, ToolResult<()>>>,
    /// The calling client's model, if it offers sampling (see [`ToolContext::sampler`]).
    pub sampler: Option<Arc<dyn crate::session::ClientSampler>>,
}

/// What the end of a call is recorded with.
struct CallMeta<'a> {
    tool: &'a str,
    user: &'a str,
    session_id: &'a str,
    received: Instant,
}

impl<'a> CallMeta<'a> {
    fn of(req: &CallRequest<'a>) -> CallMeta<'a> {
        CallMeta {
            tool: req.tool,
            user: req.user,
            session_id: req.session_id,
            received: req.received,
        }
    }
}

/// Runs calls against one tool set. Cheap to share (`Arc`).
#[derive(Debug)]
pub struct ToolRunner {
    toolbox: Toolbox,
    /// Each tool's parameter names (from its schema), for the audit trail's redaction.
    parameters: std::collections::HashMap<&'static str, Vec<String>>,
    limits: Arc<Limits>,
    call_timeout: Option<Duration>,
    audit: Option<Arc<dyn AuditSink>>,
    metrics: Option<Arc<dyn CallMetrics>>,
    /// Tools ringfence has that this configuration does not offer, and how the operator
    /// turns each on: a call to one is told so rather than "unknown tool".
    not_offered: std::collections::HashMap<String, String>,
    /// This runner, for the calls its tools make on their caller's behalf (set by
    /// [`ToolRunner::shared`]).
    me: std::sync::Weak<ToolRunner>,
}

impl ToolRunner {
    pub fn new(toolbox: Toolbox, limits: Arc<Limits>) -> ToolRunner {
        let parameters = toolbox
            .iter()
            .map(|t| {
                let names = t
                    .input_schema()
                    .get("properties")
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                (t.name(), names)
            })
            .collect();
        ToolRunner {
            toolbox,
            parameters,
            limits,
            call_timeout: None,
            audit: None,
            metrics: None,
            not_offered: Default::default(),
            me: std::sync::Weak::new(),
        }
    }

    /// The runner, shared: its tools can then make calls through it
    /// ([`ToolRunner::call_within`], reached through [`ToolContext::runner`]).
    pub fn shared(self) -> Arc<ToolRunner> {
        Arc::new_cyclic(|me| ToolRunner {
            me: me.clone(),
            ..self
        })
    }

    /// Tools this configuration does not offer (tool name -> how the operator turns it
    /// on): a call to one answers a `disabled` error saying so.
    pub fn with_not_offered(
        mut self,
        not_offered: std::collections::HashMap<String, String>,
    ) -> ToolRunner {
        self.not_offered = not_offered;
        self
    }

    /// Stops calls that run longer than `limit` (they answer with a `timeout` error).
    pub fn with_call_timeout(mut self, limit: Option<Duration>) -> ToolRunner {
        self.call_timeout = limit;
        self
    }

    /// Records every call in an audit trail.
    pub fn with_audit(mut self, audit: Option<Arc<dyn AuditSink>>) -> ToolRunner {
        self.audit = audit;
        self
    }

    /// Counts every call and its latency.
    pub fn with_metrics(mut self, metrics: Option<Arc<dyn CallMetrics>>) -> ToolRunner {
        self.metrics = metrics;
        self
    }

    pub fn toolbox(&self) -> &Toolbox {
        &self.toolbox
    }

    /// Why tool `name` (one ringfence has) is not offered here, and how to turn it on.
    pub fn not_offered(&self, name: &str) -> Option<&str> {
        self.not_offered.get(name).map(String::as_str)
    }

    pub fn limits(&self) -> &Arc<Limits> {
        &self.limits
    }

    /// Runs one call. `Err` only when no such tool is offered (a protocol error for MCP);
    /// everything the model can act on — bad arguments, a refused session, a timeout — is
    /// the inner `Err(ToolError)`, audited like a success.
    pub async fn call(&self, req: CallRequest<'_>) -> Result<ToolResult<ToolOutput>, UnknownTool> {
        let Some(tool) = self.toolbox.get(req.tool).cloned() else {
            let Some(why) = self.not_offered.get(req.tool) else {
                return Err(UnknownTool {
                    name: req.tool.to_owned(),
                    available: self.toolbox.iter().map(|t| t.name()).collect(),
                });
            };
            // A tool ringfence has but this server does not offer: an error the model can
            // read, counted and audited like any (its arguments all redacted: their names
            // are not known here).
            let audited_args = self
                .audit
                .as_ref()
                .map(|_| redact_args(&req.args, &[], &[]));
            let refused = Err(ToolError::new(
                ToolErrorKind::Disabled,
                format!("{} is turned off on this server: {why}", req.tool),
            ));
            return Ok(self.finish(&CallMeta::of(&req), audited_args, refused));
        };
        let audited_args = self.audit.as_ref().map(|_| {
            let known = self
                .parameters
                .get(tool.name())
                .map_or(&[][..], Vec::as_slice);
            redact_args(&req.args, tool.sensitive_args(), known)
        });
        let steps = self
            .audit
            .clone()
            .map(|sink| StepAudit::new(sink, req.user, req.session_id, tool.name()));
        let meta = CallMeta::of(&req);
        let result = match req.scope {
            Ok(scope) => {
                let wiring = Wiring {
                    cancel: req.cancel,
                    progress: req.progress,
                    ready: req.ready,
                    steps,
                    sampler: req.sampler,
                };
                self.run(tool.as_ref(), scope, req.args, wiring).await
            }
            Err(refused) => Err(refused),
        };
        Ok(self.finish(&meta, audited_args, result))
    }

    /// What every call ends with: its metrics, its audit event and its log line.
    fn finish(
        &self,
        req: &CallMeta<'_>,
        audited_args: Option<Value>,
        result: ToolResult<ToolOutput>,
    ) -> ToolResult<ToolOutput> {
        let elapsed = req.received.elapsed().as_secs_f64();
        if let Some(metrics) = &self.metrics {
            metrics.record_call(req.tool, result.is_ok(), elapsed);
        }
        if let (Some(audit), Some(args)) = (&self.audit, audited_args) {
            audit.record(AuditEvent {
                time: crate::time::format_iso(std::time::SystemTime::now()),
                user: req.user.to_owned(),
                session: req.session_id.to_owned(),
                tool: req.tool.to_owned(),
                args,
                outcome: if result.is_ok() { "ok" } else { "error" },
                error: result.as_ref().err().map(|e| e.kind.as_str()),
                duration_ms: (elapsed * 1_000_000.0).round() / 1000.0,
            });
        }
        match &result {
            Ok(_) => tracing::debug!(
                tool = req.tool,
                elapsed_ms = elapsed * 1000.0,
                "tool call ok"
            ),
            Err(e) => tracing::info!(
                tool = req.tool,
                elapsed_ms = elapsed * 1000.0,
                kind = e.kind.as_str(),
                "tool call failed"
            ),
        }
        result
    }

    /// A call a tool makes on its caller's behalf (`delegate_task`'s sub-agent), in the
    /// caller's session, among the tools `allowed` lets through: the same time limit and
    /// metrics as any call, cancelled with the caller, and in the audit trail as a step of
    /// the caller's call (`delegate_task/write_file`). A tool not offered, or not allowed,
    /// is an `invalid_argument` error naming the ones that are.
    pub async fn call_within(
        &self,
        parent: &ToolContext,
        name: &str,
        args: Value,
        allowed: &(dyn Fn(&dyn Tool) -> bool + Sync),
        progress: Progress,
    ) -> ToolResult<ToolOutput> {
        let Some(tool) = self
            .toolbox
            .get(name)
            .filter(|t| allowed(t.as_ref()))
            .cloned()
        else {
            let available: Vec<&str> = self
                .toolbox
                .iter()
                .filter(|t| allowed(t.as_ref()))
                .map(|t| t.name())
                .collect();
            return Err(ToolError::invalid(
                UnknownTool {
                    name: name.to_owned(),
                    available,
                }
                .to_string(),
            ));
        };
        let started = std::time::Instant::now();
        let scope = CallScope {
            session: parent.session.clone(),
            spill: parent.spill.clone(),
        };
        let wiring = Wiring {
            cancel: parent.cancel.clone(),
            progress,
            ready: None,
            steps: None,
            sampler: parent.sampler.clone(),
        };
        let result = self.run(tool.as_ref(), scope, args.clone(), wiring).await;
        let elapsed = started.elapsed();
        if let Some(metrics) = &self.metrics {
            metrics.record_call(name, result.is_ok(), elapsed.as_secs_f64());
        }
        if let Some(steps) = &parent.steps {
            steps.record(
                tool.as_ref(),
                &args,
                result.as_ref().err().map(|e| e.kind),
                elapsed,
            );
        }
        result
    }

    /// Runs `tool` in `scope` once `wiring.ready` resolves, within the time limit.
    async fn run(
        &self,
        tool: &dyn Tool,
        scope: CallScope,
        args: Value,
        wiring: Wiring<'_>,
    ) -> ToolResult<ToolOutput> {
        let Wiring {
            cancel: caller_cancel,
            progress,
            ready,
            steps,
            sampler,
        } = wiring;
        // The tool sees a child token: cancelled by the caller, or by the time limit.
        let cancel = caller_cancel.child_token();
        let timed_out = Arc::new(AtomicBool::new(false));
        let timer = self.call_timeout.map(|limit| {
            let cancel = cancel.clone();
            let timed_out = timed_out.clone();
            tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                timed_out.store(true, Ordering::SeqCst);
                cancel.cancel();
            })
        });
        let waited = match ready {
            None => Ok(()),
            Some(ready) => tokio::select! {
                r = ready => r,
                _ = cancel.cancelled() => Err(ToolError::cancelled()),
            },
        };
        let ctx = ToolContext {
            session: scope.session,
            limits: self.limits.clone(),
            spill: scope.spill,
            cancel,
            progress,
            steps,
            sampler,
            runner: self.me.upgrade(),
        };
        let result = match waited {
            Ok(()) => tool.call(ctx, args).await,
            Err(e) => Err(e),
        };
        if let Some(timer) = timer {
            timer.abort();
        }
        match result {
            Err(e) if e.kind == ToolErrorKind::Cancelled && timed_out.load(Ordering::SeqCst) => {
                let secs = self.call_timeout.unwrap_or_default().as_secs_f64();
                Err(ToolError::new(
                    ToolErrorKind::Timeout,
                    format!(
                        "the call ran longer than this server allows ({secs} s) and was stopped; narrow it (a smaller path, a more specific pattern, a lower limit) and try again"
                    ),
                ))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redact_args;

    #[test]
    fn sensitive_arguments_are_hidden_at_any_depth() {
        let args = serde_json::json!({
            "path": "notes.txt",
            "content": "secret text",
            "edits": [{"old_string": "a", "new_string": "b"}],
            "tags": ["wife", "allergy"],
            "pattern": "x".repeat(600),
        });
        let known: Vec<String> = ["path", "content", "edits", "tags", "pattern"]
            .map(String::from)
            .to_vec();
        let r = redact_args(
            &args,
            &["content", "old_string", "new_string", "tags"],
            &known,
        );
        assert_eq!(r["path"], "notes.txt");
        assert_eq!(r["content"]["len"], 11);
        assert_eq!(r["content"]["blake3"].as_str().unwrap().len(), 16);
        assert_eq!(r["edits"][0]["old_string"]["len"], 1);
        assert_eq!(r["tags"][0]["len"], 4);
        assert_eq!(r["pattern"]["len"], 600);
        let text = r.to_string();
        for secret in ["secret", "wife", "allergy"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        // Parameters a tool did not declare sensitive stay as they are...
        assert_eq!(redact_args(&args, &[], &known)["content"], "secret text");
        // ...but content under a name the tool does not have (a misspelt parameter: the call
        // fails, its arguments are still audited) is hidden, whatever its type.
        let wrong = serde_json::json!({"path": "a", "memory_content": "User has a secret", "n": 3});
        let r = redact_args(&wrong, &[], &["path".to_owned()]);
        assert_eq!(r["path"], "a");
        assert_eq!(r["memory_content"]["len"], 17);
        assert_eq!(r["n"]["redacted"], true);
        assert!(!r.to_string().contains("secret"));
    }
}
