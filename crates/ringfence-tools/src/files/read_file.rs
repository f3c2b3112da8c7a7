//! `read_file`: a file's lines in `cat -n` form, streamed, capped, spilled when cut.

use std::io::Read;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::error::{ToolError, ToolResult};
use crate::files::text::{cut_line, thousands};
use crate::files::{SAMPLE_BYTES, binary_error, is_text_sample};
use crate::session::ReadRecord;
use crate::spill::{SpillWriter, saved_notice};
use crate::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Workspace-relative path to the file (e.g. `notes/todo.md`). `~/notes/todo.md` and
    /// absolute paths inside the workspace work too.
    pub path: String,
    /// 1-based line number to start reading from (0 is read as 1). Bypasses the max-bytes
    /// threshold when provided.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Maximum number of lines to return (default: 2000). Bypasses the max-bytes threshold
    /// when provided.
    #[serde(default)]
    pub limit: Option<u64>,
}

pub struct ReadFile;

const DESCRIPTION: &str = "Read the contents of a file within the workspace. Returns the file content with 1-based line numbers in cat -n style (`     1\\tline content`). Registers the path as \"read\" in the session, which is required before write_file can overwrite an existing file or edit_file can modify a file.\n\nFiles larger than 1 MB need `offset`/`limit`. Output is capped at 500 lines or 30,000 characters; when cut, a notice says which lines were shown and where the full output was saved. Page through large files with offset and limit. Only UTF-8 text files can be read.";

impl BlockingTool for ReadFile {
    type Args = ReadFileArgs;
    const NAME: &'static str = "read_file";
    const FAMILY: &'static str = "files";
    const DESCRIPTION: &'static str = DESCRIPTION;
    const ANNOTATIONS: Annotations = Annotations {
        title: "Read file",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(ctx: &ToolContext, args: ReadFileArgs) -> ToolResult<ToolOutput> {
        read_file(ctx, args)
    }
}

/// Collects the lines of the requested window, rendering what fits under the caps and
/// streaming everything (from the first cut on) to a spill file.
struct Window<'a> {
    ctx: &'a ToolContext,
    /// First line number past the displayed window (offset + limit).
    display_end: u64,
    max_lines: usize,
    max_chars: usize,
    rendered: String,
    rendered_chars: usize,
    shown_raw: Vec<String>,
    first_shown: u64,
    last_shown: u64,
    lines_in_window: u64,
    cut: bool,
    spill: Option<SpillWriter>,
}

impl Window<'_> {
    fn push(&mut self, line_no: u64, raw: &[u8]) -> ToolResult<()> {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = String::from_utf8_lossy(raw);
        if line_no >= self.display_end {
            // Past the requested window: only the spill (the full file) wants it.
            if let Some(spill) = self.spill.as_mut() {
                spill.write(line.as_bytes())?;
                spill.write(b"\n")?;
            }
            return Ok(());
        }
        self.lines_in_window += 1;
        if !self.cut {
            let prefix = format!("{line_no:>6}\t");
            let line_chars = line.chars().count();
            let fits_lines = self.shown_raw.len() < self.max_lines;
            let fits_chars = self.rendered_chars + prefix.len() + line_chars < self.max_chars;
            if fits_lines && fits_chars {
                self.rendered.push_str(&prefix);
                self.rendered.push_str(&line);
                self.rendered.push('\n');
                self.rendered_chars += prefix.len() + line_chars + 1;
                if self.shown_raw.is_empty() {
                    self.first_shown = line_no;
                }
                self.last_shown = line_no;
                self.shown_raw.push(line.into_owned());
                return Ok(());
            }
            // First cut. A single line longer than the whole budget is shown cut short.
            if self.shown_raw.is_empty() {
                let budget = self.max_chars.saturating_sub(prefix.len() + 1).max(1);
                self.rendered.push_str(&prefix);
                self.rendered.push_str(&cut_line(&line, budget));
                self.rendered.push('\n');
                self.first_shown = line_no;
                self.last_shown = line_no;
            }
            self.cut = true;
            let mut spill = self.ctx.spill.create()?;
            for shown in &self.shown_raw {
                spill.write(shown.as_bytes())?;
                spill.write(b"\n")?;
            }
            self.spill = Some(spill);
        }
        if let Some(spill) = self.spill.as_mut() {
            spill.write(line.as_bytes())?;
            spill.write(b"\n")?;
        }
        Ok(())
    }
}

fn read_file(ctx: &ToolContext, args: ReadFileArgs) -> ToolResult<ToolOutput> {
    let target = ctx.session.workspace.resolve(&args.path)?;
    let (file, meta) = target.open_read()?;
    let limits = &ctx.limits;
    if args.offset.is_none() && args.limit.is_none() && meta.len() > limits.max_read_bytes {
        return Err(ToolError::new(
            crate::error::ToolErrorKind::TooLarge,
            format!(
                "{}: the file is {} bytes, above the {}-byte limit for reads without offset/limit. \
                 Call read_file again with offset and limit (e.g. offset=1, limit=2000) to read it in sections, \
                 or use grep to find the part you need",
                args.path,
                thousands(meta.len()),
                thousands(limits.max_read_bytes)
            ),
        ));
    }
    if args.limit == Some(0) {
        return Err(ToolError::invalid("read_file: limit must be at least 1"));
    }
    // Offsets are 1-based; 0 is read as 1 (a common off-by-one from callers).
    let start = args.offset.unwrap_or(1).max(1);
    let limit = args.limit.unwrap_or(limits.default_read_limit as u64);
    let display_end = start.saturating_add(limit); // exclusive
    // Without offset/limit the spill holds the whole file (seed 000: "the full file content
    // is always written"); with them, the requested window.
    let explicit = args.offset.is_some() || args.limit.is_some();
    let end = if explicit { display_end } else { u64::MAX };

    let mut reader = file.into_std();
    let mut hasher = blake3::Hasher::new();
    // Sized to the file (small reads are the common case), at most 256 KiB.
    let mut buf = vec![
        0u8;
        (meta.len() as usize)
            .saturating_add(1)
            .clamp(SAMPLE_BYTES, 256 * 1024)
    ];
    // Files too large to rewrite never pass the read-first gate, so hashing them is wasted.
    let track = meta.len() <= limits.max_edit_bytes;
    let mut window = Window {
        ctx,
        display_end,
        max_lines: limits.max_read_lines,
        max_chars: limits.max_read_chars,
        rendered: String::new(),
        rendered_chars: 0,
        shown_raw: Vec::new(),
        first_shown: 0,
        last_shown: 0,
        lines_in_window: 0,
        cut: false,
        spill: None,
    };
    let mut line_no: u64 = 1; // number of the line being read
    let mut partial: Vec<u8> = Vec::new();
    let mut size: u64 = 0;
    let mut last_byte: Option<u8> = None;
    let mut sampled = false;
    let mut checked = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(ToolError::new(
                    crate::error::ToolErrorKind::Io,
                    format!("{}: read failed: {e}", args.path),
                ));
            }
        };
        let chunk = &buf[..n];
        if !sampled {
            let take = chunk.len().min(SAMPLE_BYTES);
            let complete = meta.len() <= take as u64;
            if !is_text_sample(&chunk[..take], complete) {
                return Err(binary_error(&target));
            }
            sampled = true;
        }
        if track {
            hasher.update(chunk);
        }
        size += n as u64;
        last_byte = chunk.last().copied();
        checked += 1;
        if checked.is_multiple_of(64) {
            ctx.check_cancelled()?;
        }
        if line_no >= end {
            line_no += memchr::memchr_iter(b'\n', chunk).count() as u64;
            continue;
        }
        let mut pos = 0usize;
        for nl in memchr::memchr_iter(b'\n', chunk) {
            if line_no >= start && line_no < end {
                if partial.is_empty() {
                    window.push(line_no, &chunk[pos..nl])?;
                } else {
                    extend_capped(&mut partial, &chunk[pos..nl]);
                    let line = std::mem::take(&mut partial);
                    window.push(line_no, &line)?;
                }
            }
            pos = nl + 1;
            line_no += 1;
            if line_no >= end {
                break;
            }
        }
        if line_no >= end {
            line_no += memchr::memchr_iter(b'\n', &chunk[pos..]).count() as u64;
        } else if line_no >= start {
            extend_capped(&mut partial, &chunk[pos..]);
        }
    }
    // The last line, if the file does not end with a newline.
    let total_lines = if size == 0 {
        0
    } else if last_byte == Some(b'\n') {
        line_no - 1
    } else {
        if line_no >= start && line_no < end {
            window.push(line_no, &partial)?;
        }
        line_no
    };
    if track {
        ctx.session.reads().record(
            &target,
            ReadRecord {
                hash: *hasher.finalize().as_bytes(),
                size,
                mtime: meta.modified().ok().map(|t| t.into_std()),
            },
        );
    }
    if total_lines == 0 {
        return Ok(ToolOutput::text(format!(
            "{}: the file is empty (0 lines).",
            target.display()
        )));
    }
    if start > total_lines {
        return Err(ToolError::invalid(format!(
            "{}: offset {} is past the end of the file, which has {} lines; use an offset from 1 to {}",
            args.path,
            thousands(start),
            thousands(total_lines),
            thousands(total_lines)
        )));
    }
    let window_last = (display_end - 1).min(total_lines);
    let mut text = window.rendered;
    let mut spill_path = None;
    if let Some(spill) = window.spill.take() {
        let path = spill.finish()?;
        text.push_str(&format!(
            "\nShowing lines {}-{} of {}. Use the offset and limit parameters to read specific sections.\n{}",
            thousands(window.first_shown),
            thousands(window.last_shown),
            thousands(total_lines),
            saved_notice(&path)
        ));
        if explicit {
            text.push_str(&format!(
                " (The saved file holds lines {}-{} of the original.)",
                thousands(start),
                thousands(window_last)
            ));
        }
        spill_path = Some(path.display().to_string());
    } else if window_last < total_lines {
        text.push_str(&format!(
            "\n(Lines {}-{} of {}. Call read_file with offset={} to read on.)",
            thousands(start),
            thousands(window_last),
            thousands(total_lines),
            window_last + 1
        ));
    }
    let _ = spill_path;
    Ok(ToolOutput::text(text))
}

/// Longest line kept whole (a line is otherwise bounded only by the file: a multi-gigabyte
/// minified file or a sparse file of NULs would be held in memory). Longer lines are cut,
/// in the output and in the spill file.
const MAX_LINE_BYTES: usize = 1 << 20;

fn extend_capped(partial: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_LINE_BYTES.saturating_sub(partial.len());
    partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
}
