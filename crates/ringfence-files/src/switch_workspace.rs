//! `switch_workspace` (seed 002): change the directory relative paths are resolved against.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SwitchWorkspaceArgs {
    /// Target directory path.
    pub path: String,
}

pub struct SwitchWorkspace;

impl BlockingTool for SwitchWorkspace {
    type Args = SwitchWorkspaceArgs;
    const NAME: &'static str = "switch_workspace";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Changes the current workspace path to a new directory within configured accessible directories. Must be called before any other filesystem tool when changing workspace. Do NOT call this tool in parallel with any other filesystem tool.\n\nThe path may be a configured directory or any directory inside one (call file_access_info to see them); relative paths are resolved against the current workspace.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Switch workspace",
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: SwitchWorkspaceArgs) -> ToolResult<ToolOutput> {
        let ws = &ctx.session.workspace;
        let target = ws.resolve(&args.path)?;
        let current = ws.switch_to(&target)?;
        let abs = current.absolute();
        Ok(
            ToolOutput::text(format!("Switched workspace to: {}", abs.display())).with_structured(
                json!({
                    "path": abs.display().to_string(),
                    "access": current.root.access().as_str(),
                }),
            ),
        )
    }
}
