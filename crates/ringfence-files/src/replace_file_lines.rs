//! `replace_file_lines` (seed 002): replace a range of lines of an existing text file.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::edit::{self, lines_of};
use crate::journal::Journaling;
use crate::text::thousands;
use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceFileLinesArgs {
    /// File path (absolute, or relative to workspace root).
    pub path: String,
    /// Text content to replace the lines with (empty string deletes the range).
    pub content: String,
    /// First line number to replace (1-indexed, inclusive).
    pub start_line: u64,
    /// Last line number to replace (1-indexed, inclusive). Defaults to `start_line`.
    #[serde(default)]
    pub end_line: Option<u64>,
}

pub struct ReplaceFileLines {
    pub(crate) journal: Journaling,
}

const DESCRIPTION: &str = "Replaces a range of lines in an existing text file with new content (partial edit, unlike write_file which overwrites the whole file). Uses start_line/end_line (1-indexed, inclusive) to specify the range. Empty content deletes the range. File must already exist.\n\nThe file must have been read with read_file in this session and be unchanged since. Line numbers are those read_file shows. The file's line endings, byte-order mark and final-newline state are kept; the write is atomic.";

impl BlockingTool for ReplaceFileLines {
    type Args = ReplaceFileLinesArgs;
    const NAME: &'static str = "replace_file_lines";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const SENSITIVE: &'static [&'static str] = &["content"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Replace lines",
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: ReplaceFileLinesArgs) -> ToolResult<ToolOutput> {
        replace_file_lines(ctx, &self.journal, args)
    }
}

fn replace_file_lines(
    ctx: &ToolContext,
    journal: &Journaling,
    args: ReplaceFileLinesArgs,
) -> ToolResult<ToolOutput> {
    let start = args.start_line;
    let end = args.end_line.unwrap_or(start);
    if start == 0 {
        return Err(ToolError::invalid(
            "replace_file_lines: start_line must be at least 1 (lines are numbered from 1)",
        ));
    }
    if end < start {
        return Err(ToolError::invalid(format!(
            "replace_file_lines: end_line ({end}) is before start_line ({start}); give end_line >= start_line, or omit it to replace one line"
        )));
    }
    let ed = edit::open(ctx, &args.path)?;
    let lines = lines_of(&ed.text);
    let total = lines.len() as u64;
    if total == 0 {
        return Err(ToolError::invalid(format!(
            "{}: the file is empty, so it has no lines to replace; use insert_file_content or write_file",
            args.path
        )));
    }
    if end > total {
        return Err(ToolError::invalid(format!(
            "{}: the file has {} lines, so lines {start}-{end} do not all exist; use an end_line of at most {total} (insert_file_content appends)",
            args.path,
            thousands(total)
        )));
    }
    let mut content = ed.normalize_arg(&args.content);
    // The new lines take the place of whole lines: end them with a line break unless they
    // replace the file's last line and that line had none.
    let replaces_last = end == total;
    let last_had_newline = lines[(end - 1) as usize].ends_with('\n');
    if !content.is_empty() && !content.ends_with('\n') && (!replaces_last || last_had_newline) {
        content.push('\n');
    }
    let (s, e) = ((start - 1) as usize, end as usize);
    let before: usize = lines[..s].iter().map(|l| l.len()).sum();
    let removed: usize = lines[s..e].iter().map(|l| l.len()).sum();
    let mut new_text = String::with_capacity(ed.text.len() - removed + content.len());
    new_text.push_str(&ed.text[..before]);
    new_text.push_str(&content);
    new_text.push_str(&ed.text[before + removed..]);
    let saved = edit::save(ctx, journal, &ed, &new_text, "replace_file_lines")?;
    let abs = ed.target.absolute();
    let mut msg = if content.is_empty() {
        format!(
            "Replaced lines {start}-{end} in {} (deleted)",
            abs.display()
        )
    } else {
        format!("Replaced lines {start}-{end} in {}", abs.display())
    };
    if let Some(kept) = ed.describe_kept() {
        msg.push('\n');
        msg.push_str(&kept);
    }
    let new_lines = lines_of(&content).len();
    if let Some(note) = &saved.journal_note {
        msg.push('\n');
        msg.push_str(note);
    }
    Ok(ToolOutput::text(msg).with_structured(json!({
        "path": abs.display().to_string(),
        "start_line": start,
        "end_line": end,
        "lines_removed": end - start + 1,
        "lines_inserted": new_lines,
    })))
}
