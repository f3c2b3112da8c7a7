//! `update_memory` (seed 003): modify an existing memory.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Kind, MemoryBackend, whole_number};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemoryArgs {
    /// ID of memory to update.
    #[serde(rename = "memoryId", deserialize_with = "whole_number")]
    #[schemars(with = "i64")]
    pub id: i64,
    /// New content (replaces old).
    #[serde(rename = "updatedContent")]
    pub updated_content: String,
}

pub struct UpdateMemory {
    pub(crate) memory: Arc<dyn MemoryBackend>,
}

impl BlockingTool for UpdateMemory {
    type Args = UpdateMemoryArgs;
    const NAME: &'static str = "update_memory";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Modify an existing memory. Useful when information changes or was recorded incorrectly. Search for the memory first to get its ID. Updating regenerates the memory's embedding, so semantic search will find it with the new content. Returns: Confirmation of the update.";
    const SENSITIVE: &'static [&'static str] = &["updatedContent"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Update memory",
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: UpdateMemoryArgs) -> ToolResult<ToolOutput> {
        super::update(
            self.memory.as_ref(),
            ctx,
            Kind::Memory,
            args.id,
            &args.updated_content,
        )
    }
}
