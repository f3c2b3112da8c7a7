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
    /// One file: workspace-relative path (e.g. `notes/todo.md`). `~/notes/todo.md` and
    /// absolute paths inside the configured directories work too. Use either `path` (with
    /// offset/limit) or `paths` (with start_line/end_line/max_chars), not both.
    #[serde(default)]
    pub path: Option<String>,
    /// With `path`: 1-based line number to start reading from (0 is read as 1). Bypasses the
    /// max-bytes threshold when provided.
    #[serde(default)]
    pub offset: Option<u64>,
    /// With `path`: maximum number of lines to return (default: 2000). Bypasses the
    /// max-bytes threshold when provided.
    #[serde(default)]
    pub limit: Option<u64>,
    /// Array of file paths to read (absolute, or relative to workspace root): `["file.txt"]`
    /// for one file, `["a.txt", "b.txt"]` for a batch. Each file gets its own result.
    #[serde(default)]
    pub paths: Option<Vec<String>>,
    /// With `paths`: maximum characters to return per file (default: config max, 10,000).
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

const DESCRIPTION: &str = "Read the contents of a file within the workspace. Give either `path` (one file) or `paths` (an array of one or more): one of the two is required. Returns the file content with 1-based line numbers in cat -n style (`     1\\tline content`). Registers the path as \"read\" in the session, which is required before write_file can overwrite an existing file or edit_file can modify a file.\n\nFiles larger than 1 MB need `offset`/`limit`. Output is capped at 500 lines or 30,000 characters; when cut, a notice says which lines were shown and where the full output was saved. Page through large files with offset and limit. Text in UTF-8, UTF-16 (with a byte-order mark) and legacy encodings (windows-1252, ISO-8859-x, Shift_JIS, …) is read as text; images and audio come back as media content; other binary files are refused.\n\nBatch form: pass `paths` (an array: [\"file.txt\"] for one file, [\"a.txt\", \"b.txt\"] for several) with optional `start_line`/`end_line` (1-indexed, inclusive) and `max_chars` (per file, default 10,000). Each file then gets its own result, headed `--- /abs/path (lines A-B of N) ---` with the plain content; a file that fails gets its own error without failing the others. Do not mix the two forms in one call.";

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
