//! The delegate family (seed 003): `delegate_task` hands a task to a sub-agent — a
//! tool-calling loop over a language model (`ringfence-llm`, or the MCP client's own model
//! through sampling) whose only tools are the file tools and `run_shell_command` of the same
//! configuration, called in the same session (the same user, roots and sandbox). Never
//! `delegate_task` itself. Bounded by turns, tokens and time; cancelling the call cancels the
//! sub-agent's tool calls (and so kills its commands).
//!
//! The binary withholds the family unless an operator enabled it together with the shell
//! and configured `[llm]`.

mod delegate_task;
mod plug;
mod sampling;
mod scan;
pub mod settings;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ringfence_llm::ChatModel;

use ringfence_core::error::{ToolError, ToolErrorKind};
use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::tool::{Async, Tool, ToolContext};

pub use delegate_task::{DelegateTask, DelegateTaskArgs, FINISH_TOOL};
pub use plug::{DelegatePlug, SHELL_TOOL};
pub use sampling::{SamplingModel, SamplingSource};

/// The tool family name (`tools.disable = ["delegate"]`).
pub const FAMILY: &str = "delegate";

pub const INFO: FamilyInfo = FamilyInfo {
    name: FAMILY,
    summary: "delegate a task to a sub-agent that has only the file tools and the sandboxed shell (off unless [delegate] enabled = true, the shell is on and [llm] is configured)",
    tools: &["delegate_task"],
    presets: &[ringfence_core::PresetPart {
        name: ringfence_core::family::ASSISTANT,
        summary: ringfence_core::family::ASSISTANT_SUMMARY,
        tools: ringfence_core::family::EVERY_TOOL,
    }],
};

/// Where the sub-agent's model comes from, asked at each call (the model may be the
/// calling client's own, through sampling).
pub trait ModelSource: Send + Sync {
    fn model(&self, ctx: &ToolContext) -> Result<Arc<dyn ChatModel>, ToolError>;
}

/// One model for every call (an HTTP API configured by the operator).
pub struct FixedModel(pub Arc<dyn ChatModel>);

impl ModelSource for FixedModel {
    fn model(&self, _: &ToolContext) -> Result<Arc<dyn ChatModel>, ToolError> {
        Ok(self.0.clone())
    }
}

/// A model made on first use (building a family opens nothing); a failure is reported on
/// every call until it succeeds.
pub struct LazyModel {
    make: Box<dyn Fn() -> Result<Arc<dyn ChatModel>, ringfence_llm::LlmError> + Send + Sync>,
    cell: Mutex<Option<Arc<dyn ChatModel>>>,
}

impl LazyModel {
    pub fn new(
        make: impl Fn() -> Result<Arc<dyn ChatModel>, ringfence_llm::LlmError> + Send + Sync + 'static,
    ) -> LazyModel {
        LazyModel {
            make: Box::new(make),
            cell: Mutex::new(None),
        }
    }
}

impl ModelSource for LazyModel {
    fn model(&self, _: &ToolContext) -> Result<Arc<dyn ChatModel>, ToolError> {
        let mut cell = self.cell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = cell.as_ref() {
            return Ok(m.clone());
        }
        let model = (self.make)().map_err(|e| {
            ToolError::new(
                ToolErrorKind::Unavailable,
                format!(
                    "delegate_task: the language model configured in [llm] cannot be used: {e}"
                ),
            )
        })?;
        *cell = Some(model.clone());
        Ok(model)
    }
}

/// Bounds of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelegateLimits {
    /// Model turns (requests) per task.
    pub max_turns: u32,
    /// Tokens the model may write per response.
    pub max_tokens: u32,
    /// Tokens (read and written) per task.
    pub token_budget: u64,
}

impl Default for DelegateLimits {
    fn default() -> Self {
        DelegateLimits {
            max_turns: 30,
            max_tokens: 4096,
            token_budget: 200_000,
        }
    }
}

/// What the family needs. The sub-agent's tools are not among it: they are the server's own
/// (those of the runner a call comes through), never instances of their own.
pub struct DelegateServices {
    pub model: Arc<dyn ModelSource>,
    pub limits: DelegateLimits,
}

/// The families whose tools the sub-agent is offered (those of them the server offers).
/// (Named, not imported: a family crate depends on no other family.)
pub const SUB_AGENT_FAMILIES: [&str; 2] = ["files", "shell"];

/// Whether the sub-agent may call `tool`: a file tool or the shell, never a delegation.
pub fn for_sub_agent(tool: &dyn Tool) -> bool {
    SUB_AGENT_FAMILIES.contains(&tool.family()) && tool.name() != "delegate_task"
}

/// The task running per user.
#[derive(Debug, Default)]
pub struct Active {
    by_user: Mutex<HashMap<String, RunningTask>>,
}

#[derive(Debug, Clone)]
pub struct RunningTask {
    pub description: String,
    pub started: jiff::Timestamp,
    pub since: std::time::Instant,
}

/// A running task; dropping it frees the user's slot.
pub struct ActiveSlot {
    active: Arc<Active>,
    user: String,
}

impl Active {
    /// Takes the user's slot, or returns the task holding it.
    pub fn take(
        self: &Arc<Active>,
        user: &str,
        description: &str,
    ) -> Result<ActiveSlot, RunningTask> {
        let mut map = self.by_user.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(running) = map.get(user) {
            return Err(running.clone());
        }
        map.insert(
            user.to_owned(),
            RunningTask {
                description: description.to_owned(),
                started: jiff::Timestamp::now(),
                since: std::time::Instant::now(),
            },
        );
        Ok(ActiveSlot {
            active: self.clone(),
            user: user.to_owned(),
        })
    }
}

impl Drop for ActiveSlot {
    fn drop(&mut self) {
        self.active
            .by_user
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.user);
    }
}

/// The delegate family.
pub fn family(services: DelegateServices) -> Family {
    Family::new(
        &INFO,
        vec![Async::arc(DelegateTask {
            model: services.model,
            limits: services.limits,
            active: Arc::new(Active::default()),
        })],
    )
}
