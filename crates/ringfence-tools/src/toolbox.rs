//! The registry of tools, with enable/disable and export to the formats clients use.

use std::sync::Arc;

use serde_json::{Value, json};

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

/// A named tool set: clients degrade when offered too many tools, and agents written for one
/// seed expect exactly its names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Preset {
    /// Every tool ringfence has (the default).
    #[default]
    Full,
    /// Seed 000's five tools: read_file, write_file, edit_file, grep, glob.
    Iris,
    /// Seed 002's thirteen file tools.
    LlmChat,
}

impl Preset {
    pub const ALL: [Preset; 3] = [Preset::Full, Preset::Iris, Preset::LlmChat];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Full => "full",
            Preset::Iris => "iris",
            Preset::LlmChat => "llm-chat",
        }
    }

    pub fn parse(s: &str) -> Result<Preset, String> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                format!(
                    "unknown preset `{s}`; presets are: full (every tool), iris (seed 000's five file tools), llm-chat (seed 002's thirteen)"
                )
            })
    }

    /// The tool names of the preset; `None` for the full set.
    pub fn tools(self) -> Option<&'static [&'static str]> {
        match self {
            Preset::Full => None,
            Preset::Iris => Some(&["read_file", "write_file", "edit_file", "grep", "glob"]),
            Preset::LlmChat => Some(&[
                "search_entries",
                "list_directory",
                "read_file",
                "write_file",
                "replace_file_lines",
                "insert_file_content",
                "replace_file_content",
                "entry_info",
                "delete_file",
                "create_folder",
                "move_file",
                "file_access_info",
                "switch_workspace",
            ]),
        }
    }
}

/// The tools a server offers. Disabled tools are neither listed nor callable.
#[derive(Clone, Default)]
pub struct Toolbox {
    /// In registration order (the order clients list them in).
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

    /// Every tool ringfence has, enabled.
    pub fn full() -> Toolbox {
        let mut tb = Toolbox::new();
        for tool in crate::files::all().into_iter().chain(crate::memory::all()) {
            tb.register(tool);
        }
        tb
    }

    /// The tools of `preset`, in the preset's order.
    pub fn preset(preset: Preset) -> Toolbox {
        let full = Toolbox::full();
        match preset.tools() {
            None => full,
            Some(names) => Toolbox {
                tools: names.iter().filter_map(|n| full.get(n).cloned()).collect(),
            },
        }
    }

    /// Adds tools or families from the full set (an unknown name is an error naming it).
    pub fn add(&mut self, names: &[String]) -> Result<(), String> {
        let full = Toolbox::full();
        full.check_names(names)?;
        for tool in full.tools {
            if names.iter().any(|n| n == tool.name() || n == tool.family())
                && self.get(tool.name()).is_none()
            {
                self.tools.push(tool);
            }
        }
        Ok(())
    }

    pub fn register(&mut self, tool: Arc<dyn Tool>) -> &mut Self {
        self.tools.retain(|t| t.name() != tool.name());
        self.tools.push(tool);
        self
    }

    /// Keeps only the named tools or families; an unknown name is an error naming it.
    pub fn retain_enabled(&mut self, names: &[String]) -> Result<(), String> {
        Toolbox::full().check_names(names)?;
        self.tools
            .retain(|tool| names.iter().any(|n| n == tool.name() || n == tool.family()));
        Ok(())
    }

    /// Removes the named tools or families; an unknown name is an error naming it.
    pub fn disable(&mut self, names: &[String]) -> Result<(), String> {
        Toolbox::full().check_names(names)?;
        self.tools
            .retain(|tool| !names.iter().any(|n| n == tool.name() || n == tool.family()));
        Ok(())
    }

    fn check_names(&self, names: &[String]) -> Result<(), String> {
        for n in names {
            let known = self.tools.iter().any(|t| t.name() == n || t.family() == n);
            if !known {
                let all: Vec<&str> = self.tools.iter().map(|t| t.name()).collect();
                let mut families: Vec<&str> = self.tools.iter().map(|t| t.family()).collect();
                families.dedup();
                return Err(format!(
                    "unknown tool or family `{n}`; known tools: {} (families: {})",
                    all.join(", "),
                    families.join(", ")
                ));
            }
        }
        Ok(())
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|t| t.name() == name)
    }

    /// Tools in name order.
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
