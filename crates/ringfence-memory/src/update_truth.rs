//! `update_truth` (seed 003): modify an existing truth.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Kind, MemoryBackend, whole_number};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateTruthArgs {
    /// ID of truth to update.
    #[serde(rename = "truthId", deserialize_with = "whole_number")]
    #[schemars(with = "i64")]
    pub id: i64,
    /// New content (replaces old).
    #[serde(rename = "updatedContent")]
    pub updated_content: String,
}

pub struct UpdateTruth {
    pub(crate) memory: Arc<dyn MemoryBackend>,
}

impl BlockingTool for UpdateTruth {
    type Args = UpdateTruthArgs;
    const NAME: &'static str = "update_truth";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Modify an existing truth when core facts change. The new content replaces the old, and the truth's embedding is regenerated so search finds it by the new content. Returns: Confirmation of the update.";
    const SENSITIVE: &'static [&'static str] = &["updatedContent"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Update truth",
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: UpdateTruthArgs) -> ToolResult<ToolOutput> {
        super::update(
            self.memory.as_ref(),
            ctx,
            Kind::Truth,
            args.id,
            &args.updated_content,
        )
    }
}
