//! `undo_edit`: restore the version of a file before ringfence's last change to it — only
//! if the file still holds exactly what ringfence wrote.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use ringfence_fs::{TargetState, WriteOptions};

use crate::journal::{FileKey, JournalError, Journaling, earlier_version};
use crate::multi_edit::unified_diff;
use crate::text::thousands;
use crate::{read_whole, record_for};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::time::format_iso;
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UndoEditArgs {
    /// The file whose last change by ringfence to revert (absolute, or relative to
    /// workspace root).
    pub path: String,
}

pub struct UndoEdit {
    pub(crate) journal: Journaling,
}

impl BlockingTool for UndoEdit {
    type Args = UndoEditArgs;
    const NAME: &'static str = "undo_edit";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Reverts the last change ringfence made to a file (write_file, edit_file, multi_edit, replace_file_lines, insert_file_content, replace_file_content, delete_file of a file): the previous version comes back, a file ringfence created is removed, a file it deleted is restored. Call again to step further back (the last 20 changes per file are kept, across restarts). Refused — with nothing changed — if the file no longer holds what ringfence wrote (someone changed it since), so no one's later work is lost.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Undo last edit",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: UndoEditArgs) -> ToolResult<ToolOutput> {
        undo_edit(ctx, &self.journal, args)
    }
}

fn undo_edit(
    ctx: &ToolContext,
    journaling: &Journaling,
    args: UndoEditArgs,
) -> ToolResult<ToolOutput> {
    let Some(journal) = journaling.journal() else {
        return Err(ToolError::new(
            ToolErrorKind::Disabled,
            "undo_edit: the edit journal is not available in this configuration (the database could not be opened; see the server log)",
        ));
    };
    let target = ctx.session.workspace.resolve(&args.path)?;
    target.require_writable()?;
    let key = FileKey::of(&target);
    let journal_err = |e: JournalError| {
        ToolError::new(
            ToolErrorKind::Io,
            format!("undo_edit: the edit journal failed: {e}"),
        )
    };
    let Some(record) = journal.latest(&key).map_err(journal_err)? else {
        return Err(ToolError::new(
            ToolErrorKind::NotFound,
            format!(
                "{}: no change by ringfence is recorded for this file, so there is nothing to undo",
                target.absolute().display()
            ),
        ));
    };
    let when = format_iso(
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(record.at_ms.max(0) as u64),
    );
    let what = format!("{} at {when}", record.entry.tool);
    // What is there now must be exactly what ringfence left.
    let current = match target.state() {
        TargetState::Missing => None,
        TargetState::Exists(ringfence_fs::EntryKind::File) => {
            Some(read_whole(&target, ctx.limits.max_edit_bytes)?.0)
        }
        TargetState::Exists(_) => {
            return Err(conflict(&target, &what, "it is no longer a regular file"));
        }
    };
    match (&record.entry.after_hash, &current) {
        (Some(h), Some(bytes)) if blake3::hash(bytes).as_bytes() == h => {}
        (None, None) => {}
        (Some(_), Some(_)) => {
            return Err(conflict(&target, &what, "its content changed since"));
        }
        (Some(_), None) => return Err(conflict(&target, &what, "it was deleted since")),
        (None, Some(_)) => {
            return Err(conflict(
                &target,
                &what,
                "a new file was created at its path since",
            ));
        }
    }
    ctx.check_cancelled()?;
    let abs = target.absolute();
    let earlier = earlier_version(&record.entry, current.as_deref());
    if record.entry.before.is_some() && earlier.is_none() {
        return Err(conflict(
            &target,
            &what,
            "the recorded change does not fit the file as it is",
        ));
    }
    let text = match &earlier {
        Some(before) => {
            // A recreated file gets its old mode back (a 0600 key stays 0600) except
            // set-user-ID and set-group-ID: ringfence recreates it, perhaps as root, so it is
            // not the program its owner marked (no `mode_owner`: write_atomic drops them). An
            // existing file keeps its own mode, likewise without them.
            target.write_atomic(
                before,
                &WriteOptions {
                    create_parents: true,
                    new_file_mode: record.entry.mode,
                    mode_owner: None,
                },
            )?;
            if let Ok(meta) = target.metadata() {
                crate::reads::reads(&ctx.session).record(&target, record_for(before, &meta));
            }
            let mut text = format!(
                "Undid {what}: {} is back to its previous version ({} bytes).",
                abs.display(),
                thousands(before.len() as u64)
            );
            if let Some(now) = &current {
                let (old, new) = (
                    String::from_utf8_lossy(now),
                    String::from_utf8_lossy(before),
                );
                text.push_str("\n\n");
                text.push_str(&unified_diff(target.display(), &old, &new));
            } else {
                text.push_str(" (The file had been deleted; it is restored.)");
            }
            text
        }
        None => {
            target.remove(false)?;
            crate::reads::reads(&ctx.session).forget(&target);
            format!(
                "Undid {what}: {} did not exist before, so it was removed.",
                abs.display()
            )
        }
    };
    journal.remove(record.id).map_err(journal_err)?;
    let left = journal.depth(&key).unwrap_or(0);
    let mut text = text;
    if left > 0 {
        text.push_str(&format!(
            "\n({left} earlier change{} can still be undone.)",
            if left == 1 { "" } else { "s" }
        ));
    }
    Ok(ToolOutput::text(text).with_structured(json!({
        "path": abs.display().to_string(),
        "undone": record.entry.tool,
        "at": when,
        "remaining": left,
    })))
}

fn conflict(target: &ringfence_fs::Target, what: &str, why: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::Conflict,
        format!(
            "{}: cannot undo {what}: {why}, so restoring the earlier version would discard those changes. Nothing was changed. Read the file and make the change by hand instead.",
            target.absolute().display()
        ),
    )
}
