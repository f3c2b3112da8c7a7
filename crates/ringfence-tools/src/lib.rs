//! The ringfence tool families, over the framework of `ringfence-core` (re-exported here
//! while the families move into crates of their own).
//!
//! A [`Tool`] is a value holding the services it needs (given by its family's constructor),
//! with a name, a description written for the model, a JSON Schema for its arguments,
//! annotations, the names of its sensitive arguments, and an async `call` that receives a
//! [`ToolContext`] — only what belongs to one call: the session and its user, limits, the
//! spill store, cancellation and progress. A [`Family`] is what one constructor returns:
//! its tools plus any resources, prompts and instructions; the static [`Catalogue`] of
//! family infos resolves presets and names before anything is built. Every caller runs
//! tools through one [`ToolRunner`]. Failures the model can fix are [`ToolError`]s,
//! returned as tool results. Nothing here knows MCP.

pub use ringfence_core::{
    args, error, family, limits, live, resources, runner, session, spill, text, time, tool, toolbox,
};

pub mod calendar;

pub mod delegate;
pub mod files;
pub mod followups;
pub mod images;
pub mod journal;

pub mod memory;
pub mod shell;
pub mod web;

pub use error::{BackendError, ToolError, ToolErrorKind, ToolResult};
pub use family::{Catalogue, Family, FamilyInfo, Preset, Selection, SelectionError};
pub use journal::{
    FileKey, Journal, JournalEntry, JournalError, JournalRecord, Journaling, MemoryJournal,
};
pub use limits::{Limits, LimitsError};
pub use memory::MemoryBackend;
pub use resources::{PromptContent, PromptInfo, ResourceInfo, ResourceProvider, ResourceSet};
pub use runner::{
    AuditEvent, AuditSink, CallMetrics, CallRequest, CallScope, StepAudit, ToolRunner, UnknownTool,
    redact_args,
};
pub use session::{
    ClientSampler, LOCAL_USER, ReadRecord, ReadTracker, SamplingContent, SamplingMessage,
    SamplingReply, SamplingRequest, SamplingRole, SamplingTool, Session, SharedReads,
};
pub use spill::SpillStore;
pub use tool::{
    Annotations, Async, AsyncTool, Blocking, BlockingTool, BoxFuture, Content, Progress,
    ProgressUpdate, Tool, ToolContext, ToolOutput,
};
pub use toolbox::{DefinitionFormat, Toolbox, definition};
