//! `insert_file_content` (seed 002): insert text before a line, or append it.

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
pub struct InsertFileContentArgs {
    /// File path (absolute, or relative to workspace root).
    pub path: String,
    /// Text content to insert.
    pub content: String,
    /// Insert before this line number (1-indexed). Omit to append at end of file.
    #[serde(default)]
    pub line: Option<u64>,
}

pub struct InsertFileContent {
    pub(crate) journal: Journaling,
}

const DESCRIPTION: &str = "Inserts new text content at a specific line in an existing text file without overwriting existing content. Use line (1-indexed) to insert before a given line. Omit line to append at end of file. File must already exist.\n\nThe file must have been read with read_file in this session and be unchanged since. The inserted text becomes whole lines; the file's line endings and byte-order mark are kept; the write is atomic.";

impl BlockingTool for InsertFileContent {
    type Args = InsertFileContentArgs;
    const NAME: &'static str = "insert_file_content";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const SENSITIVE: &'static [&'static str] = &["content"];
    const ANNOTATIONS: Annotations = Annotations {
        title: "Insert into file",
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: InsertFileContentArgs) -> ToolResult<ToolOutput> {
        insert_file_content(ctx, &self.journal, args)
    }
}

fn insert_file_content(
    ctx: &ToolContext,
    journal: &Journaling,
    args: InsertFileContentArgs,
) -> ToolResult<ToolOutput> {
    if args.line == Some(0) {
        return Err(ToolError::invalid(
            "insert_file_content: line must be at least 1 (lines are numbered from 1); omit it to append",
        ));
    }
    if args.content.is_empty() {
        return Err(ToolError::invalid(
            "insert_file_content: content is empty; nothing would be inserted",
        ));
    }
    let ed = edit::open(ctx, &args.path)?;
    let lines = lines_of(&ed.text);
    let total = lines.len() as u64;
    let at = args.line.unwrap_or(total + 1);
    if at > total + 1 {
        return Err(ToolError::invalid(format!(
            "{}: the file has {} lines; line must be between 1 and {} ({} appends), or omitted to append",
            args.path,
            thousands(total),
            total + 1,
            total + 1
        )));
    }
    let content = ed.normalize_arg(&args.content);
    let before: usize = lines[..(at - 1) as usize].iter().map(|l| l.len()).sum();
    let mut new_text = String::with_capacity(ed.text.len() + content.len() + 2);
    new_text.push_str(&ed.text[..before]);
    if at > total {
        // Appending: the last line needs its break before new lines follow it.
        if !new_text.is_empty() && !new_text.ends_with('\n') {
            new_text.push('\n');
        }
        new_text.push_str(&content);
        if ed.style.final_newline && !content.ends_with('\n') {
            new_text.push('\n');
        }
    } else {
        new_text.push_str(&content);
        if !content.ends_with('\n') {
            new_text.push('\n');
        }
        new_text.push_str(&ed.text[before..]);
    }
    let saved = edit::save(ctx, journal, &ed, &new_text, "insert_file_content")?;
    let abs = ed.target.absolute();
    let mut msg = if args.line.is_some() {
        format!("Inserted content at line {at} in {}", abs.display())
    } else {
        format!(
            "Inserted content at line {at} (end of file) in {}",
            abs.display()
        )
    };
    if let Some(kept) = ed.describe_kept() {
        msg.push('\n');
        msg.push_str(&kept);
    }
    if let Some(note) = &saved.journal_note {
        msg.push('\n');
        msg.push_str(note);
    }
    Ok(ToolOutput::text(msg).with_structured(json!({
        "path": abs.display().to_string(),
        "line": at,
        "lines_inserted": lines_of(&content).len(),
    })))
}
