//! The ringfence tool framework, which knows no tool family.
//!
//! A [`Tool`] is a value holding the services it needs (given by its family's constructor),
//! with a name, a description written for the model, a JSON Schema for its arguments,
//! annotations, the names of its sensitive arguments, and an async `call` that receives a
//! [`ToolContext`] — only what belongs to one call: the session and its user, limits, the
//! spill store, cancellation and progress. A [`Family`] is what one constructor returns:
//! its tools plus any resources, prompts and instructions; the static [`Catalogue`] of
//! family infos resolves presets and names before anything is built. Every caller runs
//! tools through one [`ToolRunner`], and so do tools that call tools on their caller's
//! behalf. Failures the model can fix are [`ToolError`]s, returned as tool results. Nothing
//! here knows MCP.

pub mod args;
pub mod console;
pub mod error;
pub mod family;
pub mod limits;
pub mod live;
pub mod page;
pub mod plug;
pub mod resources;
pub mod runner;
pub mod session;
pub mod spill;
pub mod supervisor;
pub mod text;
pub mod time;
pub mod tool;
pub mod toolbox;

pub use error::{BackendError, ToolError, ToolErrorKind, ToolResult};
pub use family::{Catalogue, Family, FamilyInfo, PresetPart, Selection, SelectionError};
pub use limits::{Limits, LimitsError};
pub use plug::{BuildError, FamilyEnv, FamilyPlug, Lazy, Offer, Plug, Shared};
pub use resources::{PromptContent, PromptInfo, ResourceInfo, ResourceProvider, ResourceSet};
pub use runner::{
    AuditEvent, AuditSink, CallMetrics, CallRequest, CallScope, StepAudit, ToolRunner, UnknownTool,
    redact_args,
};
pub use session::{
    ClientSampler, LOCAL_USER, SamplingContent, SamplingMessage, SamplingReply, SamplingRequest,
    SamplingRole, SamplingTool, Session,
};
pub use spill::SpillStore;
pub use supervisor::{Stop, Supervisor};
pub use tool::{
    Annotations, Async, AsyncTool, Blocking, BlockingTool, BoxFuture, Content, Progress,
    ProgressUpdate, Tool, ToolContext, ToolOutput,
};
pub use toolbox::{DefinitionFormat, Toolbox, definition};
