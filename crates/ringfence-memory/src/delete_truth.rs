//! `delete_truth` (seed 003): remove a truth permanently.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Kind, MemoryBackend, whole_number};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteTruthArgs {
    /// ID of truth to delete.
    #[serde(rename = "truthId", deserialize_with = "whole_number")]
    #[schemars(with = "i64")]
    pub id: i64,
}

pub struct DeleteTruth {
    pub(crate) memory: Arc<dyn MemoryBackend>,
}

impl BlockingTool for DeleteTruth {
    type Args = DeleteTruthArgs;
    const NAME: &'static str = "delete_truth";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Remove a truth permanently. Similar memories are not promoted to replace it - the explicit deletion is respected. Returns: Confirmation of deletion.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Delete truth",
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: DeleteTruthArgs) -> ToolResult<ToolOutput> {
        super::delete(self.memory.as_ref(), ctx, Kind::Truth, args.id)
    }
}
