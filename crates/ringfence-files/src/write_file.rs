//! `write_file`: create or replace a file, atomically, behind the read-first gate.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::{EntryKind, TargetState, WriteOptions};

use crate::journal::{Before, Journaling};
use crate::text::{TextStyle, thousands};
use crate::{check_read_first, read_whole, record_for};
use crate::{edit, encoding};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Workspace-relative path to the target file.
    pub path: String,
    /// Full file content to write (replaces any existing content).
    pub content: String,
}

pub struct WriteFile {
    pub(crate) journal: Journaling,
}

const DESCRIPTION: &str = "Write content to a file within the workspace. Creates the file and any intermediate directories if they do not exist. When writing to an existing file, the file must have been read in the current session via read_file first (read-first gate), and must not have changed since.\n\nThe write is atomic: readers see the old file or the new one, never a mix. An existing file keeps its permissions, line endings (CRLF stays CRLF), byte-order mark and final-newline state.";

impl BlockingTool for WriteFile {
    type Args = WriteFileArgs;
    const NAME: &'static str = "write_file";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const SENSITIVE: &'static [&'static str] = &["content"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Write file",
        read_only: false,
        destructive: true,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: WriteFileArgs) -> ToolResult<ToolOutput> {
        write_file(ctx, &self.journal, args)
    }
}

fn write_file(
    ctx: &ToolContext,
    journal: &Journaling,
    args: WriteFileArgs,
) -> ToolResult<ToolOutput> {
    let target = ctx.session.workspace.resolve(&args.path)?;
    target.require_writable()?;
    let mut old_bytes: Option<Vec<u8>> = None;
    let (data, kept, created) = match target.state() {
        TargetState::Missing => (args.content.into_bytes(), None, true),
        TargetState::Exists(EntryKind::File) => {
            let (old, current) = read_whole(&target, ctx.limits.max_edit_bytes)?;
            check_read_first(ctx, &target, &current)?;
            // The whole file decides, not a sample: UTF-8 text keeps its conventions, text in
            // another encoding keeps that encoding (or the write is refused).
            let utf8 = std::str::from_utf8(&old).ok().filter(|t| !t.contains('\0'));
            let decoded = if utf8.is_some() {
                None
            } else {
                encoding::decode(&old)
            };
            let style = if let Some(d) = &decoded {
                TextStyle::detect(&d.text)
            } else if let Some(text) = utf8 {
                TextStyle::detect(text)
            } else {
                // Replacing a binary file with text: nothing to keep but the mode.
                TextStyle {
                    bom: false,
                    crlf: false,
                    final_newline: args.content.ends_with('\n'),
                }
            };
            let body = args
                .content
                .strip_prefix(super::text::BOM)
                .unwrap_or(&args.content);
            // Into the file's convention: for a CRLF file every line break becomes `\r\n`,
            // whichever form the content used.
            let body = if style.crlf {
                body.replace("\r\n", "\n")
            } else {
                body.to_owned()
            };
            let enc = decoded.as_ref().map(|d| d.encoding);
            let out = edit::encode_for(&target, enc, style.apply(&body))?;
            let mut kept = style.describe_kept();
            if let Some(e) = enc {
                let note = format!("Kept the file's {} encoding.", e.name());
                kept = Some(match kept {
                    Some(k) => format!("{k} {note}"),
                    None => note,
                });
            }
            old_bytes = Some(old);
            (out, kept, false)
        }
        TargetState::Exists(EntryKind::Dir) => {
            return Err(ToolError::new(
                ToolErrorKind::WrongType,
                format!(
                    "{}: is a directory; give the path of a file inside it",
                    args.path
                ),
            ));
        }
        TargetState::Exists(EntryKind::Other | EntryKind::Symlink) => {
            return Err(ToolError::new(
                ToolErrorKind::WrongType,
                format!(
                    "{}: not a regular file (device, socket or FIFO); refused",
                    args.path
                ),
            ));
        }
    };
    ctx.check_cancelled()?;
    target.write_atomic(
        &data,
        &WriteOptions {
            create_parents: true,
            ..WriteOptions::default()
        },
    )?;
    // Our own write refreshes the record: the model knows this content.
    if let Ok(written) = ctx.session.workspace.resolve(&args.path)
        && let Ok(meta) = written.metadata()
    {
        crate::reads::reads(&ctx.session).record(&written, record_for(&data, &meta));
    }
    // Seed 002 confirms with "Written: <absolute path>"; seed 000 with the workspace-relative
    // path and the byte count. One line carries both.
    let mut text = format!(
        "Written: {} ({}, {} bytes{}).",
        target.absolute().display(),
        target.display(),
        thousands(data.len() as u64),
        if created { ", new file" } else { "" }
    );
    if let Some(kept) = &kept {
        text.push(' ');
        text.push_str(kept);
    }
    let before = match &old_bytes {
        Some(b) => Before::of(b),
        None => Before::Absent,
    };
    if let Some(note) = journal.note(&target, "write_file", before, Some(&data), None) {
        text.push(' ');
        text.push_str(&note);
    }
    Ok(ToolOutput::text(text).with_structured(json!({
        "path": target.display(),
        "bytes_written": data.len(),
        "created": created,
    })))
}
