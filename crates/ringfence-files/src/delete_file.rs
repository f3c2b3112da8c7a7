//! `delete_file` (seed 002): delete a file, a symbolic link, or a directory.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::{EntryKind, TargetState};

use crate::existing_entry;
use crate::journal::{Before, Journaling, MAX_JOURNALED_BYTES};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteFileArgs {
    /// Path (absolute, or relative to workspace root).
    pub path: String,
    /// Set to `true` to delete directories and their contents recursively.
    #[serde(default)]
    pub recursive: bool,
}

pub struct DeleteFile {
    pub(crate) journal: Journaling,
}

impl BlockingTool for DeleteFile {
    type Args = DeleteFileArgs;
    const NAME: &'static str = "delete_file";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Deletes a file or directory. Use recursive=true to delete non-empty directories and all their contents.\n\nA symbolic link is deleted itself, never what it points to (also inside a recursive delete). Configured root directories and the directory holding the current workspace cannot be deleted.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Delete",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: DeleteFileArgs) -> ToolResult<ToolOutput> {
        let ws = &ctx.session.workspace;
        let target = existing_entry(ctx, &args.path)?;
        let abs = target.absolute();
        if !target.rel().is_empty() && ws.holds_current(&target) {
            return Err(ToolError::new(
                ToolErrorKind::Refused,
                format!(
                    "{}: holds the current workspace; call switch_workspace to move elsewhere first",
                    abs.display()
                ),
            ));
        }
        let kind = match target.state() {
            TargetState::Exists(EntryKind::Dir) => "directory",
            TargetState::Exists(EntryKind::Symlink) => "symbolic link",
            TargetState::Exists(EntryKind::Other) => "special file",
            _ => "file",
        };
        // A single regular file is journaled (content and mode), so undo_edit can bring it
        // back.
        let before = if target.state() == TargetState::Exists(EntryKind::File)
            && self.journal.is_on()
        {
            match target.open_read() {
                Ok((_, meta)) if meta.len() as usize > MAX_JOURNALED_BYTES => Some((None, None)),
                Ok((_, meta)) => crate::read_whole(&target, MAX_JOURNALED_BYTES as u64)
                    .ok()
                    .map(|(b, _)| (Some(b), Some(ringfence_fs::mode_of(&meta)))),
                Err(_) => None,
            }
        } else {
            None
        };
        let count = target.remove(args.recursive)?;
        let mut text = format!("Deleted {kind}: {}", abs.display());
        if let Some((bytes, mode)) = &before {
            let b = match bytes {
                Some(bytes) => Before::Content(bytes),
                None => Before::NotKept,
            };
            if let Some(note) = self.journal.note(&target, Self::NAME, b, None, *mode) {
                text.push('\n');
                text.push_str(&note);
            }
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "path": abs.display().to_string(),
            "type": kind,
            "files_removed": count.files,
            "directories_removed": count.dirs,
        })))
    }
}
