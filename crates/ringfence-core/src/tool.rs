//! The `Tool` trait and what a call receives.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::error::{ToolError, ToolErrorKind, ToolResult};
use crate::limits::Limits;
use crate::session::Session;
use crate::spill::SpillStore;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Hints for clients about a tool's effects (the MCP tool annotations).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Annotations {
    pub title: &'static str,
    /// Never changes anything.
    pub read_only: bool,
    /// May overwrite or remove existing data.
    pub destructive: bool,
    /// Calling twice with the same arguments has no further effect.
    pub idempotent: bool,
    /// Reaches beyond the configured roots (network, processes).
    pub open_world: bool,
}

/// One piece of a result: text, or media for clients that can show it.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    Text(String),
    /// An image: MIME type and the raw (not base64) bytes.
    Image {
        mime: String,
        data: Vec<u8>,
    },
    /// Audio: MIME type and the raw bytes.
    Audio {
        mime: String,
        data: Vec<u8>,
    },
}

/// What a successful call returns: content blocks (text for every client, media where the
/// tool produced it) and structured data where useful.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    pub structured: Option<Value>,
}

impl ToolOutput {
    /// A result of one text block.
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            content: vec![Content::Text(text.into())],
            structured: None,
        }
    }

    /// A result of several blocks.
    pub fn blocks(content: Vec<Content>) -> ToolOutput {
        ToolOutput {
            content,
            structured: None,
        }
    }

    pub fn with_structured(mut self, value: Value) -> ToolOutput {
        self.structured = Some(value);
        self
    }

    /// The text blocks joined by blank lines; media blocks appear as a one-line placeholder.
    pub fn all_text(&self) -> String {
        let parts: Vec<String> = self
            .content
            .iter()
            .map(|c| match c {
                Content::Text(t) => t.clone(),
                Content::Image { mime, data } => format!("[image: {mime}, {} bytes]", data.len()),
                Content::Audio { mime, data } => format!("[audio: {mime}, {} bytes]", data.len()),
            })
            .collect();
        parts.join("\n\n")
    }
}

/// A progress update for a long call (forwarded as MCP `notifications/progress`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressUpdate {
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

/// Where a tool sends progress; a no-op when the client did not ask for it.
#[derive(Clone, Default)]
pub struct Progress {
    sink: Option<Arc<dyn Fn(ProgressUpdate) + Send + Sync>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("enabled", &self.sink.is_some())
            .finish()
    }
}

impl Progress {
    pub fn none() -> Progress {
        Progress { sink: None }
    }

    pub fn new(sink: impl Fn(ProgressUpdate) + Send + Sync + 'static) -> Progress {
        Progress {
            sink: Some(Arc::new(sink)),
        }
    }

    pub fn is_enabled(&self) -> bool {
        self.sink.is_some()
    }

    pub fn report(&self, progress: f64, total: Option<f64>, message: impl Into<String>) {
        if let Some(sink) = &self.sink {
            sink(ProgressUpdate {
                progress,
                total,
                message: Some(message.into()),
            });
        }
    }
}

/// What belongs to one call: who it is for (the session and its user), the limits, where
/// long output is saved, cancellation and progress. Services a family needs (a journal, a
/// database, an HTTP client) are not here: the family's tools hold them, given when the
/// family was built. Cheap to clone.
#[derive(Debug, Clone)]
pub struct ToolContext {
    pub session: Arc<Session>,
    pub limits: Arc<Limits>,
    pub spill: Arc<SpillStore>,
    pub cancel: CancellationToken,
    pub progress: Progress,
    /// Where a tool that calls other tools records those calls (the audit trail of this
    /// call); `None` when calls are not audited.
    pub steps: Option<crate::runner::StepAudit>,
    /// The model of the client that made this call (`sampling/createMessage`), when that
    /// client offers one. Per call, never per session: a session may be shared by several
    /// clients of one user (stateless HTTP), and a tool must ask the client that asked it.
    pub sampler: Option<Arc<dyn crate::session::ClientSampler>>,
    /// The runner this call came through, for the calls a tool makes on its caller's behalf
    /// ([`crate::ToolRunner::call_within`]); `None` outside a shared runner.
    pub runner: Option<Arc<crate::ToolRunner>>,
}

impl ToolContext {
    /// Fails with `Cancelled` once the client cancelled the call.
    pub fn check_cancelled(&self) -> ToolResult<()> {
        if self.cancel.is_cancelled() {
            Err(ToolError::cancelled())
        } else {
            Ok(())
        }
    }

    /// Runs blocking file-system work without stalling the async runtime. On a
    /// multi-threaded runtime the work runs in place (`block_in_place`: no hand-off to
    /// another thread, which is most of a small call's cost); elsewhere on the blocking pool.
    /// A panic in the work becomes an error result instead of taking the request down.
    pub async fn blocking<T, F>(&self, f: F) -> ToolResult<T>
    where
        F: FnOnce(ToolContext) -> ToolResult<T> + Send + 'static,
        T: Send + 'static,
    {
        let ctx = self.clone();
        let run = move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f(ctx)))
                .unwrap_or_else(|_| Err(internal_failure()))
        };
        if on_multi_thread_runtime() {
            tokio::task::block_in_place(run)
        } else {
            tokio::task::spawn_blocking(run)
                .await
                .unwrap_or_else(|_| Err(internal_failure()))
        }
    }
}

/// Whether this thread runs tasks of a multi-threaded tokio runtime, where blocking work can
/// run in place (`block_in_place`: other tasks move to other workers) instead of being
/// handed to another thread.
pub fn on_multi_thread_runtime() -> bool {
    use tokio::runtime::{Handle, RuntimeFlavor};
    Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread)
}

fn internal_failure() -> ToolError {
    ToolError::new(
        ToolErrorKind::Io,
        "the tool failed unexpectedly (an internal error; the server logged it). Retry, or report it if it happens again",
    )
}

/// A tool the model can call: a value holding what it needs (built by its family's
/// constructor). Implementations live one per file under a family module.
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls (seed-defined for seed tools).
    fn name(&self) -> &'static str;
    /// The family it belongs to, for enabling and disabling groups ("files", ...).
    fn family(&self) -> &'static str;
    /// What the tool does, written for the model.
    fn description(&self) -> &'static str;
    /// JSON Schema of the arguments (an object schema).
    fn input_schema(&self) -> Map<String, Value>;
    fn annotations(&self) -> Annotations;
    /// Argument names whose values are personal or file content: the audit trail records
    /// them as length and hash only, wherever they occur in the arguments.
    fn sensitive_args(&self) -> &'static [&'static str] {
        &[]
    }
    /// Runs the call. Model-fixable failures are `Err(ToolError)`.
    fn call(&self, ctx: ToolContext, args: Value) -> BoxFuture<'static, ToolResult<ToolOutput>>;
}

/// A tool whose work is blocking (file-system, database) work on typed arguments. Wrap it
/// in [`Blocking`] to get a [`Tool`]: arguments are parsed into `Args` (unknown fields are
/// errors), the schema comes from `Args`, and `run` executes off the async runtime.
pub trait BlockingTool: Send + Sync + 'static {
    type Args: DeserializeOwned + schemars::JsonSchema + Send + 'static;
    const NAME: &'static str;
    const FAMILY: &'static str;
    const DESCRIPTION: &'static str;
    const ANNOTATIONS: Annotations;
    /// See [`Tool::sensitive_args`].
    const SENSITIVE: &'static [&'static str] = &[];
    fn run(&self, ctx: &ToolContext, args: Self::Args) -> ToolResult<ToolOutput>;
}

/// Adapts a [`BlockingTool`] to [`Tool`].
#[derive(Debug, Default)]
pub struct Blocking<T>(Arc<T>);

impl<T: BlockingTool> Blocking<T> {
    pub fn new(tool: T) -> Blocking<T> {
        Blocking(Arc::new(tool))
    }

    /// `tool` as a shared [`Tool`].
    pub fn arc(tool: T) -> Arc<dyn Tool> {
        Arc::new(Blocking::new(tool))
    }
}

/// The [`Tool`] methods a typed tool (`BlockingTool` or `AsyncTool`, as `T`) answers from its
/// constants and its argument type.
macro_rules! typed_tool_metadata {
    () => {
        fn name(&self) -> &'static str {
            T::NAME
        }
        fn family(&self) -> &'static str {
            T::FAMILY
        }
        fn description(&self) -> &'static str {
            T::DESCRIPTION
        }
        fn input_schema(&self) -> Map<String, Value> {
            schema_of::<T::Args>()
        }
        fn annotations(&self) -> Annotations {
            T::ANNOTATIONS
        }
        fn sensitive_args(&self) -> &'static [&'static str] {
            T::SENSITIVE
        }
    };
}

impl<T: BlockingTool> Tool for Blocking<T> {
    typed_tool_metadata!();
    fn call(&self, ctx: ToolContext, args: Value) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        let tool = self.0.clone();
        Box::pin(async move {
            let args: T::Args = parse_args(T::NAME, args)?;
            ctx.blocking(move |ctx| tool.run(&ctx, args)).await
        })
    }
}

/// A tool whose work is asynchronous (network calls) on typed arguments: the async twin of
/// [`BlockingTool`]. Wrap it in [`Async`] to get a [`Tool`]; arguments are parsed into
/// `Args` the same way, and `run` is awaited on the runtime (blocking work inside it goes
/// through [`ToolContext::blocking`]).
pub trait AsyncTool: Send + Sync + 'static {
    type Args: DeserializeOwned + schemars::JsonSchema + Send + 'static;
    const NAME: &'static str;
    const FAMILY: &'static str;
    const DESCRIPTION: &'static str;
    const ANNOTATIONS: Annotations;
    /// See [`Tool::sensitive_args`].
    const SENSITIVE: &'static [&'static str] = &[];
    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: Self::Args,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>>;
}

/// Adapts an [`AsyncTool`] to [`Tool`].
#[derive(Debug, Default)]
pub struct Async<T>(Arc<T>);

impl<T: AsyncTool> Async<T> {
    /// `tool` as a shared [`Tool`].
    pub fn arc(tool: T) -> Arc<dyn Tool> {
        Arc::new(Async(Arc::new(tool)))
    }
}

impl<T: AsyncTool> Tool for Async<T> {
    typed_tool_metadata!();
    fn call(&self, ctx: ToolContext, args: Value) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        let tool = self.0.clone();
        Box::pin(async move {
            let args: T::Args = parse_args(T::NAME, args)?;
            tool.run(ctx, args).await
        })
    }
}

/// The JSON Schema of an argument type, as an object schema without `$schema`/`title`.
pub fn schema_of<T: schemars::JsonSchema>() -> Map<String, Value> {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut map = match schema.to_value() {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    map.remove("$schema");
    map.remove("title");
    simplify_schema(&mut map);
    map.entry("type")
        .or_insert_with(|| Value::String("object".into()));
    // Clients expect `properties` on every object schema, even a tool without arguments.
    map.entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    map
}

/// Deserializes arguments, turning serde's message into one the model can act on.
pub fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> ToolResult<T> {
    let args = match args {
        Value::Null => Value::Object(Map::new()),
        other => other,
    };
    if !args.is_object() {
        return Err(ToolError::invalid(format!(
            "{tool}: arguments must be a JSON object, got {}",
            type_name(&args)
        )));
    }
    serde_json::from_value(args).map_err(|e| {
        let msg = e.to_string();
        let msg = msg
            .replace(" at line 1 column 0", "")
            .replace(" at line 0 column 0", "");
        ToolError::invalid(format!("{tool}: invalid arguments: {msg}"))
    })
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Makes a generated schema plain enough for every client: an omitted `Option<T>` is `T`
/// (not `T | null`), unit enums are `enum` lists (not `oneOf` of consts), no Rust-specific
/// integer formats, and descriptions unwrapped from doc-comment line breaks.
fn simplify_schema(map: &mut Map<String, Value>) {
    if map.get("default") == Some(&Value::Null) {
        map.remove("default");
    }
    if let Some(Value::Array(types)) = map.get("type") {
        let non_null: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
        if non_null.len() == 1 {
            map.insert("type".into(), non_null[0].clone());
        }
    }
    // An omitted `Option<Enum>` is one of the enum's values, never null.
    if let Some(Value::Array(values)) = map.get_mut("enum") {
        values.retain(|v| !v.is_null());
    }
    if matches!(map.get("format").and_then(Value::as_str), Some(f) if f.starts_with("uint") || f.starts_with("int") || f == "double" || f == "float")
    {
        map.remove("format");
    }
    if let Some(Value::Array(variants)) = map.get("oneOf") {
        let consts: Option<Vec<Value>> = variants.iter().map(|v| v.get("const").cloned()).collect();
        if let Some(consts) = consts {
            map.remove("oneOf");
            map.insert("type".into(), Value::String("string".into()));
            map.insert("enum".into(), Value::Array(consts));
        }
    }
    for (key, value) in map.iter_mut() {
        match value {
            Value::String(s) if key == "description" => {
                *s = s
                    .split("\n\n")
                    .map(|p| p.split('\n').map(str::trim).collect::<Vec<_>>().join(" "))
                    .collect::<Vec<_>>()
                    .join("\n\n");
            }
            Value::Object(inner) => simplify_schema(inner),
            Value::Array(items) => {
                for item in items {
                    if let Value::Object(inner) = item {
                        simplify_schema(inner);
                    }
                }
            }
            _ => {}
        }
    }
}
