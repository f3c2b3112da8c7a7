//! `delete_memory` (seed 003): remove a memory permanently.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Kind, MemoryBackend, whole_number};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteMemoryArgs {
    /// ID of memory to delete.
    #[serde(rename = "memoryId", deserialize_with = "whole_number")]
    #[schemars(with = "i64")]
    pub id: i64,
}

pub struct DeleteMemory {
    pub(crate) memory: Arc<dyn MemoryBackend>,
}

impl BlockingTool for DeleteMemory {
    type Args = DeleteMemoryArgs;
    const NAME: &'static str = "delete_memory";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str =
        "Remove a memory permanently. Returns: Confirmation of deletion.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Delete memory",
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: DeleteMemoryArgs) -> ToolResult<ToolOutput> {
        super::delete(self.memory.as_ref(), ctx, Kind::Memory, args.id)
    }
}
