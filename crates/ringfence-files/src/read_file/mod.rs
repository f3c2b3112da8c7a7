//! `read_file`: a file's lines, in either of two call forms. With `path` (and offset/limit,
//! seed 000) one file comes back in `cat -n` form, capped and spilled when cut (`single`);
//! with `paths` (and start_line/end_line/max_chars, seed 002) each file gets its own result
//! (`batch`). Both stream the file through one line scanner (`scanner`).

mod batch;
mod scanner;
mod single;

use schemars::JsonSchema;
use serde::Deserialize;

use ringfence_core::error::{ToolError, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// One file: workspace-relative path (e.g. `notes/todo.md`); `~/notes/todo.md` and
    /// absolute paths inside the configured directories work too.
    #[serde(default)]
    pub path: Option<String>,
    /// With `path`: 1-based line to start from (0 reads as 1); lifts the 1 MB threshold.
    #[serde(default)]
    pub offset: Option<u64>,
    /// With `path`: lines to return (default 2000); lifts the 1 MB threshold.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Files to read (absolute, or relative to the workspace root): `["a.txt"]`, or several.
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// With `paths`: characters per file (default 10,000).
    #[serde(default)]
    pub max_chars: Option<u64>,
    /// With `paths`: first line to read (1-indexed, inclusive).
    #[serde(default)]
    pub start_line: Option<u64>,
    /// With `paths`: last line to read (1-indexed, inclusive).
    #[serde(default)]
    pub end_line: Option<u64>,
}

pub struct ReadFile;

const DESCRIPTION: &str = "Read a file within the workspace. Give `path` (one file) or `paths` (an array of one or more): one of the two is required. Returns the content with 1-based line numbers in cat -n style (`     1\\tline content`) and registers the file as read, which write_file and edit_file require before changing an existing file.\n\nFiles over 1 MB need `offset`/`limit`. Output is capped at 500 lines or 30,000 characters; when cut, a notice says which lines were shown and where the full output was saved (page with offset and limit). UTF-8, UTF-16 (with a byte-order mark) and legacy encodings (windows-1252, ISO-8859-x, Shift_JIS, …) are read as text; images and audio come back as media content; other binary files are refused.\n\nWith `paths` (and optionally `start_line`/`end_line`, 1-indexed and inclusive, and `max_chars` per file, default 10,000), each file gets its own result headed `--- /abs/path (lines A-B of N) ---`; a file that fails gets its own error. Do not mix the two forms.";

impl BlockingTool for ReadFile {
    type Args = ReadFileArgs;
    const NAME: &'static str = "read_file";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const ANNOTATIONS: Annotations = Annotations {
        title: "Read file",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: ReadFileArgs) -> ToolResult<ToolOutput> {
        read_file(ctx, args)
    }
}

/// Routes the call by which of `path` / `paths` it has; a parameter of the other form is an
/// argument error naming the right one.
fn read_file(ctx: &ToolContext, args: ReadFileArgs) -> ToolResult<ToolOutput> {
    let batch_only = [
        ("start_line", args.start_line.is_some()),
        ("end_line", args.end_line.is_some()),
        ("max_chars", args.max_chars.is_some()),
    ];
    let single_only = [
        ("offset", args.offset.is_some()),
        ("limit", args.limit.is_some()),
    ];
    let named = |list: &[(&str, bool)]| -> Vec<String> {
        list.iter()
            .filter(|(_, set)| *set)
            .map(|(n, _)| format!("`{n}`"))
            .collect()
    };
    match (args.path.clone(), args.paths.clone()) {
        (Some(_), Some(_)) => Err(ToolError::invalid(
            "read_file: give either `path` (one file, with offset/limit) or `paths` (an array, with start_line/end_line/max_chars), not both",
        )),
        (None, None) => Err(ToolError::invalid(
            "read_file: missing the file to read: pass `path` (e.g. \"notes/todo.md\") or `paths` (e.g. [\"notes/todo.md\"])",
        )),
        (Some(path), None) => {
            let wrong = named(&batch_only);
            if !wrong.is_empty() {
                return Err(ToolError::invalid(format!(
                    "read_file: {} belong{} to the `paths` form; with `path` use offset (first line) and limit (line count), or pass the file in `paths` instead",
                    wrong.join(", "),
                    if wrong.len() == 1 { "s" } else { "" }
                )));
            }
            single::read_single(ctx, &path, args.offset, args.limit)
        }
        (None, Some(paths)) => {
            let wrong = named(&single_only);
            if !wrong.is_empty() {
                return Err(ToolError::invalid(format!(
                    "read_file: {} belong{} to the `path` form; with `paths` use start_line and end_line (1-indexed, inclusive)",
                    wrong.join(", "),
                    if wrong.len() == 1 { "s" } else { "" }
                )));
            }
            batch::read_batch(ctx, &paths, args.start_line, args.end_line, args.max_chars)
        }
    }
}
