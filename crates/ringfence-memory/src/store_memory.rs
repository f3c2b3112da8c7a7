//! `store_memory` (seed 003): store a new memory about the user.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    Kind, MEMORY_TYPES, MemoryBackend, NewItem, SOURCE_CONVERSATION, content, one_of,
    open_category, tags,
};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreMemoryArgs {
    /// Complete, self-contained fact with context.
    #[serde(rename = "memoryContent")]
    pub memory_content: String,
    /// fact, preference, goal, event, skill, relationship, habit, context
    #[serde(rename = "memoryType")]
    #[schemars(extend("enum" = ["fact", "preference", "goal", "event", "skill", "relationship", "habit", "context"]))]
    pub memory_type: Option<String>,
    /// Organization tags.
    pub tags: Option<Vec<String>>,
    /// personal, professional, hobbies, health, etc.: any short category (up to 40 characters; stored lower-case), such as personal, professional, hobbies, health, relationships, preferences, goals.
    #[schemars(length(max = 40))]
    pub category: Option<String>,
}

pub struct StoreMemory {
    pub(crate) memory: Arc<dyn MemoryBackend>,
}

impl BlockingTool for StoreMemory {
    type Args = StoreMemoryArgs;
    const NAME: &'static str = "store_memory";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Store a new memory about the user: contextual information, events and situational details. memoryContent should be self-contained - it should make sense without the conversation (\"Allergic to shellfish\" is better than \"Has the allergy we discussed\"). A memory that means the same as one already stored is not stored twice: the result names the existing memory's ID. Returns: Confirmation message with memory ID.";
    const SENSITIVE: &'static [&'static str] = &["memoryContent", "tags"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Store memory",
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: StoreMemoryArgs) -> ToolResult<ToolOutput> {
        let item = NewItem {
            content: content("memoryContent", &args.memory_content)?,
            category: open_category(args.category.as_deref())?,
            memory_type: one_of("memoryType", args.memory_type.as_deref(), &MEMORY_TYPES)?,
            tags: tags(args.tags)?,
            pinned: false,
            source: SOURCE_CONVERSATION.into(),
        };
        super::store(self.memory.as_ref(), ctx, Kind::Memory, item)
    }
}
