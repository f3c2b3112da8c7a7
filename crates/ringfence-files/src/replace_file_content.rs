//! `replace_file_content` (seed 002): find-and-replace of a literal substring.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::edit;
use crate::edit_file::no_match;
use crate::journal::Journaling;
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceFileContentArgs {
    /// File path (absolute, or relative to workspace root).
    pub path: String,
    /// Exact substring to find (literal match, not a regex).
    pub old_content: String,
    /// Replacement text (empty string deletes the match).
    pub new_content: String,
    /// Replace all occurrences vs first only. Default `false`.
    #[serde(default)]
    pub replace_all: bool,
}

pub struct ReplaceFileContent {
    pub(crate) journal: Journaling,
}

const DESCRIPTION: &str = "Replaces an exact substring in an existing text file with new content (partial edit, unlike write_file which overwrites the whole file). Uses replace_all to replace all occurrences vs only the first. Works like find-and-replace. File must already exist.\n\nThe file must have been read with read_file in this session and be unchanged since. If old_content does not occur exactly, a single candidate that differs only in trailing whitespace, line endings or typographic quotes is used (the result says so); otherwise the closest lines are shown. The write is atomic.";

impl BlockingTool for ReplaceFileContent {
    type Args = ReplaceFileContentArgs;
    const NAME: &'static str = "replace_file_content";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const SENSITIVE: &'static [&'static str] = &["old_content", "new_content"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Replace in file",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: ReplaceFileContentArgs) -> ToolResult<ToolOutput> {
        replace_file_content(ctx, &self.journal, args)
    }
}

fn replace_file_content(
    ctx: &ToolContext,
    journal: &Journaling,
    args: ReplaceFileContentArgs,
) -> ToolResult<ToolOutput> {
    if args.old_content.is_empty() {
        return Err(ToolError::invalid(
            "replace_file_content: old_content is empty; give the exact text to replace",
        ));
    }
    if args.old_content == args.new_content {
        return Err(ToolError::invalid(
            "replace_file_content: old_content and new_content are identical; nothing would change",
        ));
    }
    let ed = edit::open(ctx, &args.path)?;
    let old = ed.normalize_arg(&args.old_content);
    let new = ed.normalize_arg(&args.new_content);
    let mut found = edit::find(&ed.text, &old);
    if found.ranges.is_empty() {
        return Err(no_match("old_content", &args.path, &ed.text, &old));
    }
    // Seed 002: the first occurrence unless replace_all.
    if !args.replace_all {
        found.ranges.truncate(1);
    }
    let matched: u128 = found.ranges.iter().map(|(s, e)| (e - s) as u128).sum();
    let count = found.ranges.len();
    edit::check_size(
        ctx,
        &args.path,
        ed.text.len() as u128 - matched + count as u128 * new.len() as u128,
    )?;
    let new_text = edit::replace_ranges(&ed.text, &found.ranges, &new);
    let saved = edit::save(ctx, journal, &ed, &new_text, "replace_file_content")?;
    let abs = ed.target.absolute();
    let mut msg = format!("Replaced content in {}", abs.display());
    if args.replace_all {
        msg.push_str(&format!(
            "\n{count} occurrence{} replaced.",
            if count == 1 { "" } else { "s" }
        ));
    }
    if let Some(note) = &found.tolerated {
        msg.push_str(&format!("\nNote: {note}."));
    }
    if let Some(note) = &saved.journal_note {
        msg.push('\n');
        msg.push_str(note);
    }
    Ok(ToolOutput::text(msg).with_structured(json!({
        "path": abs.display().to_string(),
        "replacements": count,
        "tolerant_match": found.tolerated,
    })))
}
