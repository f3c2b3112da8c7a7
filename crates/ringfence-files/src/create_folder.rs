//! `create_folder` (seed 002): create a directory and any missing parents.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateFolderArgs {
    /// Directory path (absolute, or relative to workspace root).
    pub path: String,
}

pub struct CreateFolder;

impl BlockingTool for CreateFolder {
    type Args = CreateFolderArgs;
    const NAME: &'static str = "create_folder";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Creates a directory and any necessary parent directories. An existing directory is left as it is (the result says so).";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Create folder",
        read_only: false,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: CreateFolderArgs) -> ToolResult<ToolOutput> {
        let target = ctx.session.workspace.resolve(&args.path)?;
        let created = target.create_dir_all()?;
        let abs = target.absolute();
        let shown = format!("{}/", abs.display().to_string().trim_end_matches('/'));
        let text = if created {
            format!("Created directory: {shown}")
        } else {
            format!("Directory already exists: {shown}")
        };
        Ok(ToolOutput::text(text).with_structured(json!({
            "path": abs.display().to_string(),
            "created": created,
        })))
    }
}
