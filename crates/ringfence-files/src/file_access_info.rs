//! `file_access_info` (seed 002): the configured directories, their access and the current
//! workspace.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::Access;

use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileAccessInfoArgs {}

pub struct FileAccessInfo;

/// Width the path column is padded to; with the separating space the access level starts
/// in column 58, as in seed 002's example.
const PATH_COLUMN: usize = 56;

impl BlockingTool for FileAccessInfo {
    type Args = FileAccessInfoArgs;
    const NAME: &'static str = "file_access_info";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Returns a list of all configured directories with their access levels (read/write) and indicates which one is the current workspace path. Useful for discovering which parts of the filesystem are available.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "File access info",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, _args: FileAccessInfoArgs) -> ToolResult<ToolOutput> {
        let ws = &ctx.session.workspace;
        let current = ws.current();
        let mut text = String::from("Configured file system access:");
        let mut dirs = Vec::new();
        for root in ws.roots().iter() {
            let access = match root.access() {
                Access::ReadWrite => "write",
                Access::ReadOnly => "read",
            };
            let path = root.absolute_path().display().to_string();
            let is_current = std::sync::Arc::ptr_eq(root, &current.root) && current.rel.is_empty();
            let mut line = format!("\n  {path:<PATH_COLUMN$} {access}");
            if is_current {
                line.push_str("  (current workspace)");
            }
            if root.dir().is_err() {
                line.push_str("  (missing: does not exist yet)");
            }
            text.push_str(&line);
            dirs.push(json!({ "path": path, "access": access, "current": is_current }));
        }
        if !current.rel.is_empty() {
            text.push_str(&format!(
                "\nCurrent workspace: {} (inside {})",
                current.absolute().display(),
                current.root.absolute_path().display()
            ));
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "directories": dirs,
            "current_workspace": current.absolute().display().to_string(),
        })))
    }
}
