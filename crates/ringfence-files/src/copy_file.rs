//! `copy_file`: copy a file, a symbolic link or a whole directory, never over anything
//! unless asked.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::TransferOptions;

use crate::journal::Journaling;
use crate::text::thousands;
use crate::{guard_overwrite, journal_overwrite, transfer_targets};
use ringfence_core::error::ToolResult;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CopyFileArgs {
    /// File or directory to copy (absolute, or relative to workspace root).
    pub source: String,
    /// Where the copy goes (absolute, or relative to workspace root). End it with `/` to copy
    /// into that directory under the source's name.
    pub destination: String,
    /// Replace an existing destination file. Default `false`. A directory is never copied
    /// onto an existing entry.
    #[serde(default)]
    pub overwrite: bool,
}

pub struct CopyFile {
    pub(crate) journal: Journaling,
}

impl BlockingTool for CopyFile {
    type Args = CopyFileArgs;
    const NAME: &'static str = "copy_file";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Copies a file or a directory (with everything in it) to a new path. An existing destination is never replaced unless overwrite is true (files only: a directory copy never merges into an existing one). Missing parent directories are created. A destination ending in `/` means \"into this directory\". The copy keeps permissions; symbolic links are copied as links. A directory copy appears whole or not at all.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Copy",
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: CopyFileArgs) -> ToolResult<ToolOutput> {
        let (source, dest) = transfer_targets(ctx, &args.source, &args.destination, "copy")?;
        let replaced = if args.overwrite {
            guard_overwrite(ctx, &dest)?
        } else {
            None
        };
        let cancel = ctx.cancel.clone();
        let count = source.copy_to(
            &dest,
            TransferOptions {
                overwrite: args.overwrite,
            },
            &move || cancel.is_cancelled(),
        )?;
        let (from, to) = (source.absolute(), dest.absolute());
        let mut text = format!("Copied: {} -> {}", from.display(), to.display());
        if source.is_dir() {
            text.push_str(&format!(
                " ({} files, {} directories, {} bytes)",
                thousands(count.files),
                thousands(count.dirs),
                thousands(count.bytes)
            ));
            if count.skipped > 0 {
                text.push_str(&format!(
                    ". Left out {} special files (devices, sockets, FIFOs) or unreadable entries",
                    thousands(count.skipped)
                ));
            }
        }
        if let Some(old) = &replaced {
            text.push_str(
                " (replaced the existing file; undo_edit on the destination brings it back)",
            );
            if let Some(note) = journal_overwrite(&self.journal, &dest, Self::NAME, old) {
                text.push('\n');
                text.push_str(&note);
            }
        }
        Ok(ToolOutput::text(text).with_structured(json!({
            "source": from.display().to_string(),
            "destination": to.display().to_string(),
            "files": count.files,
            "directories": count.dirs,
            "bytes": count.bytes,
            "skipped": count.skipped,
        })))
    }
}
