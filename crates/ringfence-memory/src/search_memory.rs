//! `search_memory` (seed 003): search stored memories semantically.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    Kind, MEMORY_TYPES, MemoryBackend, Query, limit, one_of, open_category, optional_whole_number,
    tags,
};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchMemoryArgs {
    /// Question or topic to search for.
    #[serde(rename = "searchQuery")]
    pub search_query: String,
    /// Filter by type.
    #[serde(rename = "memoryType")]
    #[schemars(extend("enum" = ["fact", "preference", "goal", "event", "skill", "relationship", "habit", "context"]))]
    pub memory_type: Option<String>,
    /// Filter by tags (a memory matches when it has any of them).
    pub tags: Option<Vec<String>>,
    /// Filter by category: any short category, as stored (personal, professional, hobbies, health, etc.; compared lower-case).
    #[schemars(length(max = 40))]
    pub category: Option<String>,
    /// Max results 1-20 (default: 5).
    #[serde(default, deserialize_with = "optional_whole_number")]
    #[schemars(range(min = 1, max = 20))]
    pub limit: Option<i64>,
}

pub struct SearchMemory {
    pub(crate) memory: Arc<dyn MemoryBackend>,
}

impl BlockingTool for SearchMemory {
    type Args = SearchMemoryArgs;
    const NAME: &'static str = "search_memory";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Search stored memories semantically (by meaning, not only by words), optionally filtered by type, tags or category. Returns: List of matching memories with content and metadata, best first; unrelated memories are not returned.";
    const SENSITIVE: &'static [&'static str] = &["searchQuery", "tags"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Search memory",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: SearchMemoryArgs) -> ToolResult<ToolOutput> {
        let query = Query {
            text: args.search_query,
            limit: limit(args.limit, 5, 20)?,
            memory_type: one_of("memoryType", args.memory_type.as_deref(), &MEMORY_TYPES)?,
            category: open_category(args.category.as_deref())?,
            tags: tags(args.tags)?,
        };
        super::search(self.memory.as_ref(), ctx, Kind::Memory, query)
    }
}
