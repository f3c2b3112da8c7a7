//! The `paths` form (seed 002): up to 100 files, each its own result headed
//! `--- /abs/path (lines A-B of N) ---` with plain lines up to a character budget; a file
//! that fails gets its own error without failing the others.

use ringfence_fs::{EntryKind, TargetState};
use serde_json::json;

use super::scanner::{LineSink, decoded_note, scan_any};
use crate::text::{cut_line, thousands};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Content, ToolContext, ToolOutput};

/// Files one `paths` call may read.
const MAX_BATCH: usize = 100;
/// The largest `max_chars` a call may ask for.
const MAX_CHARS_CEILING: u64 = 1_000_000;

/// The `paths` form's collector: plain lines up to a character budget.
struct BatchSink {
    max_chars: usize,
    body: String,
    chars: usize,
    first: u64,
    last: u64,
    cut: bool,
}

impl LineSink for BatchSink {
    fn line(&mut self, n: u64, raw: &[u8]) -> ToolResult<()> {
        if self.cut {
            return Ok(());
        }
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = String::from_utf8_lossy(raw);
        let line_chars = line.chars().count() + 1;
        if self.chars + line_chars > self.max_chars {
            self.cut = true;
            if self.first == 0 {
                // One line longer than the whole budget: show its start.
                self.body
                    .push_str(&cut_line(&line, self.max_chars.saturating_sub(1).max(1)));
                self.body.push('\n');
                self.first = n;
                self.last = n;
            }
            return Ok(());
        }
        self.body.push_str(&line);
        self.body.push('\n');
        self.chars += line_chars;
        if self.first == 0 {
            self.first = n;
        }
        self.last = n;
        Ok(())
    }
    fn reset(&mut self) {
        self.body.clear();
        self.chars = 0;
        self.first = 0;
        self.last = 0;
        self.cut = false;
    }
}

/// Seed 002's form: several files, each its own result with a header and plain content.
pub(super) fn read_batch(
    ctx: &ToolContext,
    paths: &[String],
    start_line: Option<u64>,
    end_line: Option<u64>,
    max_chars: Option<u64>,
) -> ToolResult<ToolOutput> {
    if paths.is_empty() {
        return Err(ToolError::invalid(
            "read_file: `paths` is empty; list at least one file, e.g. [\"notes/todo.md\"]",
        ));
    }
    if paths.len() > MAX_BATCH {
        return Err(ToolError::invalid(format!(
            "read_file: `paths` lists {} files; at most {MAX_BATCH} can be read in one call",
            paths.len()
        )));
    }
    if start_line == Some(0) || end_line == Some(0) {
        return Err(ToolError::invalid(
            "read_file: start_line and end_line are 1-indexed; use 1 for the first line",
        ));
    }
    if let (Some(s), Some(e)) = (start_line, end_line)
        && e < s
    {
        return Err(ToolError::invalid(format!(
            "read_file: end_line ({e}) is before start_line ({s}); give end_line >= start_line"
        )));
    }
    let max_chars = match max_chars {
        Some(0) => {
            return Err(ToolError::invalid(
                "read_file: max_chars must be at least 1",
            ));
        }
        Some(m) if m > MAX_CHARS_CEILING => {
            return Err(ToolError::invalid(format!(
                "read_file: max_chars may be at most {}; read large files in line ranges",
                thousands(MAX_CHARS_CEILING)
            )));
        }
        Some(m) => m as usize,
        None => ctx.limits.max_chars_per_file,
    };
    let mut outcomes = Vec::with_capacity(paths.len());
    for path in paths {
        ctx.check_cancelled()?;
        match read_one(ctx, path, start_line, end_line, max_chars) {
            Err(err) if err.kind == ToolErrorKind::Cancelled => return Err(err),
            outcome => outcomes.push(outcome),
        }
    }
    if let [Err(err)] = outcomes.as_slice() {
        // A single file that failed is simply an error.
        return Err(err.clone());
    }
    let mut blocks = Vec::with_capacity(paths.len());
    let mut results = Vec::with_capacity(paths.len());
    for (path, outcome) in paths.iter().zip(outcomes) {
        let (status, text, kind) = match outcome {
            Ok(text) => ("success", text, None),
            Err(err) => ("error", err.message, Some(err.kind.as_str())),
        };
        let mut entry = json!({ "path": path, "status": status, "result": text });
        if let Some(kind) = kind {
            entry["error"] = json!(kind);
        }
        results.push(entry);
        blocks.push(Content::Text(text));
    }
    Ok(ToolOutput::blocks(blocks).with_structured(json!({ "results": results })))
}

fn read_one(
    ctx: &ToolContext,
    path: &str,
    start_line: Option<u64>,
    end_line: Option<u64>,
    max_chars: usize,
) -> ToolResult<String> {
    let target = ctx.session.workspace.resolve(path)?;
    let abs = target.absolute();
    match target.state() {
        TargetState::Missing => {
            return Err(ToolError::new(
                ToolErrorKind::NotFound,
                format!(
                    "File not found: ENOENT: no such file or directory, stat '{}'",
                    abs.display()
                ),
            ));
        }
        TargetState::Exists(EntryKind::Dir) => {
            return Err(ToolError::new(
                ToolErrorKind::WrongType,
                format!(
                    "Is a directory: {}; use list_directory to see what it holds",
                    abs.display()
                ),
            ));
        }
        _ => {}
    }
    let (file, meta) = target.open_read()?;
    let ranged = start_line.is_some() || end_line.is_some();
    if !ranged && meta.len() > ctx.limits.max_file_size {
        return Err(ToolError::new(
            ToolErrorKind::TooLarge,
            format!(
                "File too large: {} is {} bytes, above the {}-byte limit; read it in parts with start_line and end_line",
                abs.display(),
                thousands(meta.len()),
                thousands(ctx.limits.max_file_size)
            ),
        ));
    }
    let start = start_line.unwrap_or(1);
    let end = end_line.map(|e| e.saturating_add(1)).unwrap_or(u64::MAX);
    let mut sink = BatchSink {
        max_chars,
        body: String::new(),
        chars: 0,
        first: 0,
        last: 0,
        cut: false,
    };
    let (scan, enc) = scan_any(ctx, &target, file, &meta, start, end, &mut sink).map_err(|e| {
        if e.kind == ToolErrorKind::Binary {
            ToolError::new(
                ToolErrorKind::Binary,
                format!(
                    "Binary file, not shown: {} (only text files can be read)",
                    abs.display()
                ),
            )
        } else {
            e
        }
    })?;
    let BatchSink {
        body,
        first,
        last,
        cut,
        ..
    } = sink;
    let total = scan.total_lines;
    if total == 0 {
        return Ok(format!("--- {} (empty file, 0 lines) ---\n", abs.display()));
    }
    if start > total {
        return Err(ToolError::invalid(format!(
            "start_line {} is past the end of {}, which has {} lines",
            thousands(start),
            abs.display(),
            thousands(total)
        )));
    }
    let mut out = format!(
        "--- {} (lines {}-{} of {}) ---\n",
        abs.display(),
        first,
        last,
        total
    );
    out.push_str(&body);
    if cut {
        out.push_str(&format!(
            "[Cut at max_chars={}: showing lines {}-{} of {}. Read on with start_line={}.]\n",
            thousands(max_chars as u64),
            first,
            last,
            total,
            last + 1
        ));
    }
    let note = decoded_note(enc);
    if !note.is_empty() {
        out.push_str(note.trim_start());
        out.push('\n');
    }
    Ok(out)
}
