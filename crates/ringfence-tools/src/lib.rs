//! The ringfence tool framework and tool families.
//!
//! A [`Tool`] has a name, a description written for the model, a JSON Schema for its
//! arguments, annotations, and an async `call` that receives a [`ToolContext`] (the session's
//! workspace and read tracker, limits, spill store, cancellation token and progress
//! reporter). Failures the model can fix are [`ToolError`]s, returned as tool results. Tools
//! know nothing of MCP: the transport crate adapts a [`Toolbox`] to the protocol.

pub mod error;
pub mod files;
pub mod journal;
pub mod limits;
pub mod memory;
pub mod resources;
pub mod session;
pub mod spill;
pub mod tool;
pub mod toolbox;

pub use error::{ToolError, ToolErrorKind, ToolResult};
pub use journal::{FileKey, Journal, JournalEntry, JournalRecord, MemoryJournal};
pub use limits::Limits;
pub use memory::MemoryBackend;
pub use resources::{PromptInfo, ResourceInfo, Resources};
pub use session::{LOCAL_USER, ReadRecord, ReadTracker, Session};
pub use spill::SpillStore;
pub use tool::{
    Annotations, Blocking, BlockingTool, BoxFuture, Content, Progress, ProgressUpdate, Tool,
    ToolContext, ToolOutput,
};
pub use toolbox::{DefinitionFormat, Preset, Toolbox, definition};
