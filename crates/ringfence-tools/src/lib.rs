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

// The framework, its modules and its items, as `ringfence_tools::…` paths still name them.
pub use ringfence_core::*;

pub mod delegate;
pub mod files;
pub mod images;
pub mod journal;
pub mod shell;
pub mod web;

pub use journal::{
    FileKey, Journal, JournalEntry, JournalError, JournalRecord, Journaling, MemoryJournal,
    QueuedJournal,
};
