//! `multi_edit`: several replacements in one file, applied together or not at all.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::edit;
use crate::edit_file::no_match;
use crate::journal::Journaling;
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OneEdit {
    /// Exact text to find (after the edits before this one were applied).
    pub old_string: String,
    /// Replacement text.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one (default false).
    #[serde(default)]
    pub replace_all: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiEditArgs {
    /// Workspace-relative path to the file to edit.
    pub path: String,
    /// The edits, applied in order, each to the result of the ones before it.
    pub edits: Vec<OneEdit>,
}

pub struct MultiEdit {
    pub(crate) journal: Journaling,
}

/// Edits one call may make.
const MAX_EDITS: usize = 100;
/// Lines of unified diff returned at most.
const MAX_DIFF_LINES: usize = 120;

impl BlockingTool for MultiEdit {
    type Args = MultiEditArgs;
    const NAME: &'static str = "multi_edit";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Makes several exact-string replacements in one file, all or nothing: the edits apply in order (each to the result of the ones before), and if any one fails — not found, or found more than once without replace_all — the file is left untouched and the error names the edit. The file must have been read with read_file in this session and be unchanged since. Returns a unified diff of the whole change. The write is atomic.";
    const SENSITIVE: &'static [&'static str] = &["old_string", "new_string"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Edit file (several changes)",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: MultiEditArgs) -> ToolResult<ToolOutput> {
        if args.edits.is_empty() {
            return Err(ToolError::invalid(
                "multi_edit: `edits` is empty; give at least one {old_string, new_string}",
            ));
        }
        if args.edits.len() > MAX_EDITS {
            return Err(ToolError::invalid(format!(
                "multi_edit: {} edits in one call; at most {MAX_EDITS}",
                args.edits.len()
            )));
        }
        for (i, e) in args.edits.iter().enumerate() {
            if e.old_string.is_empty() {
                return Err(ToolError::invalid(format!(
                    "multi_edit: edit {} has an empty old_string; give the exact text to replace",
                    i + 1
                )));
            }
            if e.old_string == e.new_string {
                return Err(ToolError::invalid(format!(
                    "multi_edit: edit {} has identical old_string and new_string",
                    i + 1
                )));
            }
        }
        let ed = edit::open(ctx, &args.path)?;
        let mut text = ed.text.clone();
        let mut total = 0usize;
        let mut notes = Vec::new();
        for (i, e) in args.edits.iter().enumerate() {
            let old = ed.normalize_arg(&e.old_string);
            let new = ed.normalize_arg(&e.new_string);
            let found = edit::find(&text, &old);
            let fail = |err: ToolError| {
                ToolError::new(
                    err.kind,
                    format!(
                        "multi_edit: edit {} of {} failed, so nothing was changed: {}",
                        i + 1,
                        args.edits.len(),
                        err.message
                    ),
                )
            };
            if found.ranges.is_empty() {
                return Err(fail(no_match("old_string", &args.path, &text, &old)));
            }
            if found.ranges.len() > 1 && !e.replace_all {
                return Err(fail(ToolError::new(
                    ToolErrorKind::AmbiguousMatch,
                    format!(
                        "old_string occurs {} times; add surrounding lines to make it unique, or set replace_all",
                        found.ranges.len()
                    ),
                )));
            }
            let matched: u128 = found.ranges.iter().map(|(s, e)| (e - s) as u128).sum();
            edit::check_size(
                ctx,
                &args.path,
                text.len() as u128 - matched + found.ranges.len() as u128 * new.len() as u128,
            )?;
            if let Some(note) = &found.tolerated {
                notes.push(format!("edit {}: {note}", i + 1));
            }
            total += found.ranges.len();
            text = edit::replace_ranges(&text, &found.ranges, &new);
        }
        if text == ed.text {
            return Err(ToolError::invalid(
                "multi_edit: the edits cancel out; the file would not change",
            ));
        }
        let saved = edit::save(ctx, &self.journal, &ed, &text, Self::NAME)?;
        let diff = unified_diff(ed.target.display(), &ed.text, &text);
        let mut msg = format!(
            "Edited {}: {} edits, {} replacements.",
            ed.target.display(),
            args.edits.len(),
            total
        );
        for n in &notes {
            msg.push_str(&format!(" Note: {n}."));
        }
        msg.push_str("\n\n");
        msg.push_str(&diff);
        if let Some(note) = &saved.journal_note {
            msg.push('\n');
            msg.push_str(note);
        }
        Ok(ToolOutput::text(msg).with_structured(json!({
            "path": ed.target.display(),
            "edits": args.edits.len(),
            "replacements": total,
            "diff": diff,
        })))
    }
}

/// A unified diff of two versions, cut after [`MAX_DIFF_LINES`] lines.
pub(crate) fn unified_diff(path: &str, old: &str, new: &str) -> String {
    // Bounded: two unrelated 16 MiB versions must not stall the call.
    let diff = similar::TextDiff::configure()
        .timeout(std::time::Duration::from_secs(1))
        .diff_lines(old, new);
    let full = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string();
    let lines: Vec<&str> = full.lines().collect();
    if lines.len() <= MAX_DIFF_LINES {
        return full;
    }
    let mut out = lines[..MAX_DIFF_LINES].join("\n");
    out.push_str(&format!(
        "\n… {} more diff lines not shown\n",
        lines.len() - MAX_DIFF_LINES
    ));
    out
}
