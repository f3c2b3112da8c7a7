//! The registry of tools, with enable/disable and export to the formats clients use.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::family::Family;
use crate::tool::Tool;

/// Export formats for tool definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionFormat {
    /// MCP `tools/list` entries.
    Mcp,
    /// OpenAI function-calling `tools` entries.
    OpenAi,
    /// Anthropic Messages API `tools` entries.
    Anthropic,
}

/// The tools a server offers, in listing order. Tools not in it are neither listed nor
/// callable.
#[derive(Clone, Default)]
pub struct Toolbox {
    tools: Vec<Arc<dyn Tool>>,
}

impl std::fmt::Debug for Toolbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.tools.iter().map(|t| t.name()))
            .finish()
    }
}

impl Toolbox {
    pub fn new() -> Toolbox {
        Toolbox::default()
    }

    /// Every tool of `families`, in their order.
    pub fn of(families: &[Family]) -> Toolbox {
        Toolbox {
            tools: families
                .iter()
                .flat_map(|f| f.tools().iter().cloned())
                .collect(),
        }
    }

    /// The tools of `families` named in `names`, in the order of `names` (a name no family
    /// built is skipped).
    pub fn select(families: &[Family], names: &[&str]) -> Toolbox {
        let all = Toolbox::of(families);
        Toolbox {
            tools: names.iter().filter_map(|n| all.get(n).cloned()).collect(),
        }
    }

    /// Adds `tool`, replacing one of the same name.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Tools in listing order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<dyn Tool>> {
        self.tools.iter()
    }

    pub fn len(&self) -> usize {
        self.tools.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The definitions in `format`, as a JSON array.
    pub fn definitions(&self, format: DefinitionFormat) -> Value {
        Value::Array(
            self.iter()
                .map(|t| definition(t.as_ref(), format))
                .collect(),
        )
    }
}

/// One tool's definition in `format`.
pub fn definition(tool: &dyn Tool, format: DefinitionFormat) -> Value {
    let schema = Value::Object(tool.input_schema());
    match format {
        DefinitionFormat::Mcp => {
            let a = tool.annotations();
            json!({
                "name": tool.name(),
                "title": a.title,
                "description": tool.description(),
                "inputSchema": schema,
                "annotations": {
                    "title": a.title,
                    "readOnlyHint": a.read_only,
                    "destructiveHint": a.destructive,
                    "idempotentHint": a.idempotent,
                    "openWorldHint": a.open_world,
                }
            })
        }
        DefinitionFormat::OpenAi => json!({
            "type": "function",
            "function": {
                "name": tool.name(),
                "description": tool.description(),
                "parameters": schema,
            }
        }),
        DefinitionFormat::Anthropic => json!({
            "name": tool.name(),
            "description": tool.description(),
            "input_schema": schema,
        }),
    }
}
