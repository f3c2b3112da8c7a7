//! `move_file` (seed 002): move or rename a file or directory.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::{MoveMethod, TransferOptions};

use crate::journal::Journaling;
use crate::{guard_overwrite, journal_overwrite, transfer_targets};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveFileArgs {
    /// Source path (absolute, or relative to workspace root).
    pub source: String,
    /// Destination path (absolute, or relative to workspace root). End it with `/` to move
    /// the source into that directory under its own name.
    pub destination: String,
    /// Replace an existing destination file. Default `false`: an existing destination is an
    /// error.
    #[serde(default)]
    pub overwrite: bool,
}

pub struct MoveFile {
    pub(crate) journal: Journaling,
}

impl BlockingTool for MoveFile {
    type Args = MoveFileArgs;
    const NAME: &'static str = "move_file";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Moves or renames a file or directory.\n\nMissing parent directories of the destination are created. An existing destination is never replaced unless overwrite is true. A destination ending in `/` means \"into this directory\". Works between configured directories (both must be writable); a symbolic link is moved as a link.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Move",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: MoveFileArgs) -> ToolResult<ToolOutput> {
        let ws = &ctx.session.workspace;
        let (source, dest) = transfer_targets(ctx, &args.source, &args.destination, "move")?;
        if ws.holds_current(&source) {
            return Err(ToolError::new(
                ToolErrorKind::Refused,
                format!(
                    "{}: holds the current workspace; call switch_workspace to move elsewhere first",
                    source.absolute().display()
                ),
            ));
        }
        let replaced = if args.overwrite {
            guard_overwrite(ctx, &dest)?
        } else {
            None
        };
        let method = source.rename_to(
            &dest,
            TransferOptions {
                overwrite: args.overwrite,
            },
        )?;
        let (from, to) = (source.absolute(), dest.absolute());
        let mut text = format!("Moved: {} -> {}", from.display(), to.display());
        if method == MoveMethod::CopiedAndRemoved {
            text.push_str(" (copied across file systems, then the source removed)");
        }
        if let Some(old) = &replaced {
            text.push_str(
                " (replaced the existing file; undo_edit on the destination brings it back)",
            );
            if let Some(note) = journal_overwrite(&self.journal, &dest, Self::NAME, old) {
                text.push('\n');
                text.push_str(&note);
            }
            // Undoing the destination drops the moved content there; journal the source as
            // deleted with that content, so undo_edit on the source brings it back too.
            if let Ok((moved, _)) =
                crate::read_whole(&dest, crate::journal::MAX_JOURNALED_BYTES as u64)
            {
                self.journal.note(
                    &source,
                    Self::NAME,
                    crate::journal::Before::Content(&moved),
                    None,
                    None,
                );
            }
        }
        // What the session knew about the file now belongs to its new path.
        let reads = crate::reads::reads(&ctx.session);
        if let Some(record) = reads.get(&source) {
            reads.forget(&source);
            reads.record(&dest, record);
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "source": from.display().to_string(),
            "destination": to.display().to_string(),
        })))
    }
}
