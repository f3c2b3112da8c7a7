//! `store_truth` (seed 003): store a core truth about the user.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{CATEGORIES, Kind, MemoryBackend, NewItem, SOURCE_CONVERSATION, content, one_of};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreTruthArgs {
    /// Complete, self-contained statement about the user.
    #[serde(rename = "truthContent")]
    pub truth_content: String,
    /// personal, professional, hobbies, health, relationships, preferences, goals
    #[schemars(extend("enum" = ["personal", "professional", "hobbies", "health", "relationships", "preferences", "goals"]))]
    pub category: Option<String>,
    /// Pin to always include regardless of conversation topic (default: false).
    #[serde(rename = "isPinned", default)]
    pub is_pinned: Option<bool>,
}

pub struct StoreTruth {
    pub(crate) memory: Arc<dyn MemoryBackend>,
}

impl BlockingTool for StoreTruth {
    type Args = StoreTruthArgs;
    const NAME: &'static str = "store_truth";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Store a core truth about the user - fundamental facts that define who they are (name, career, location, core relationships). Use store_memory for contextual or time-bound information. A truth that means the same as one already stored is not stored twice: the result names the existing truth's ID. Returns: Confirmation with truth ID and pin status.";
    const SENSITIVE: &'static [&'static str] = &["truthContent"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Store truth",
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: StoreTruthArgs) -> ToolResult<ToolOutput> {
        let item = NewItem {
            content: content("truthContent", &args.truth_content)?,
            category: one_of("category", args.category.as_deref(), &CATEGORIES)?,
            memory_type: None,
            tags: Vec::new(),
            pinned: args.is_pinned.unwrap_or(false),
            source: SOURCE_CONVERSATION.into(),
        };
        super::store(self.memory.as_ref(), ctx, Kind::Truth, item)
    }
}
