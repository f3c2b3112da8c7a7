//! `search_truths` (seed 003): search existing truths semantically.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Kind, MemoryBackend, Query, limit, optional_whole_number};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchTruthsArgs {
    /// Question or topic to search for.
    #[serde(rename = "searchQuery")]
    pub search_query: String,
    /// Max results 1-10 (default: 5).
    #[serde(default, deserialize_with = "optional_whole_number")]
    #[schemars(range(min = 1, max = 10))]
    pub limit: Option<i64>,
}

pub struct SearchTruths {
    pub(crate) memory: Arc<dyn MemoryBackend>,
}

impl BlockingTool for SearchTruths {
    type Args = SearchTruthsArgs;
    const NAME: &'static str = "search_truths";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Search existing truths semantically (by meaning, not only by words). Returns: List of matching truths with content, source, and pin status, best first; unrelated truths are not returned.";
    const SENSITIVE: &'static [&'static str] = &["searchQuery"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Search truths",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: SearchTruthsArgs) -> ToolResult<ToolOutput> {
        let query = Query {
            text: args.search_query,
            limit: limit(args.limit, 5, 10)?,
            memory_type: None,
            category: None,
            tags: Vec::new(),
        };
        super::search(self.memory.as_ref(), ctx, Kind::Truth, query)
    }
}
