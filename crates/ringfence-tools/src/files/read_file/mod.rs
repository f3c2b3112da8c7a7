//! `read_file`: a file's lines in `cat -n` form, streamed, capped, spilled when cut.

use std::io::Read;

use schemars::JsonSchema;
use serde::Deserialize;

use ringfence_fs::{EntryKind, File, Metadata, Target, TargetState};
use serde_json::json;

use crate::error::{ToolError, ToolErrorKind, ToolResult};
use crate::files::encoding::{self, TextEncoding};
use crate::files::media::{self, MediaKind};
use crate::files::read_media_file::read_media;
use crate::files::text::{cut_line, thousands};
use crate::files::{SAMPLE_BYTES, binary_error, is_text_sample, read_whole};
use crate::session::ReadRecord;
use crate::spill::{SpillWriter, saved_notice};
use crate::tool::{Annotations, BlockingTool, Content, ToolContext, ToolOutput};

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

/// Files one `paths` call may read.
const MAX_BATCH: usize = 100;
/// The largest `max_chars` a call may ask for.
const MAX_CHARS_CEILING: u64 = 1_000_000;

pub struct ReadFile;

const DESCRIPTION: &str = "Read the contents of a file within the workspace. Returns the file content with 1-based line numbers in cat -n style (`     1\\tline content`). Registers the path as \"read\" in the session, which is required before write_file can overwrite an existing file or edit_file can modify a file.\n\nFiles larger than 1 MB need `offset`/`limit`. Output is capped at 500 lines or 30,000 characters; when cut, a notice says which lines were shown and where the full output was saved. Page through large files with offset and limit. Only UTF-8 text files can be read.\n\nBatch form: pass `paths` (an array: [\"file.txt\"] for one file, [\"a.txt\", \"b.txt\"] for several) with optional `start_line`/`end_line` (1-indexed, inclusive) and `max_chars` (per file, default 10,000). Each file then gets its own result, headed `--- /abs/path (lines A-B of N) ---` with the plain content; a file that fails gets its own error without failing the others. Do not mix the two forms in one call.";

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

/// Where a scan sends the lines of its window.
trait LineSink {
    fn line(&mut self, line_no: u64, raw: &[u8]) -> ToolResult<()>;
    /// Forgets every line received: the scan starts over (the file turned out to need
    /// decoding).
    fn reset(&mut self);
}

impl LineSink for Window<'_> {
    fn line(&mut self, line_no: u64, raw: &[u8]) -> ToolResult<()> {
        self.push(line_no, raw)
    }
    fn reset(&mut self) {
        self.rendered.clear();
        self.rendered_chars = 0;
        self.shown_raw.clear();
        self.first_shown = 0;
        self.last_shown = 0;
        self.lines_in_window = 0;
        self.cut = false;
        if let Some(spill) = self.spill.take() {
            spill.discard();
        }
    }
}

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
            read_single(ctx, &path, args.offset, args.limit)
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
            read_batch(ctx, &paths, args.start_line, args.end_line, args.max_chars)
        }
    }
}

/// What a pass over a file found.
struct Scan {
    total_lines: u64,
    /// The whole content was valid UTF-8 (checked for files small enough to be edited;
    /// larger ones are only sampled).
    utf8_ok: bool,
}

/// Validates UTF-8 across chunk boundaries.
#[derive(Default)]
struct Utf8Check {
    pending: Vec<u8>,
    bad: bool,
}

impl Utf8Check {
    fn feed(&mut self, mut data: &[u8]) {
        if self.bad {
            return;
        }
        if !self.pending.is_empty() {
            // Complete the character cut by the previous chunk, one byte at a time.
            while !data.is_empty() && self.pending.len() < 4 {
                self.pending.push(data[0]);
                data = &data[1..];
                match std::str::from_utf8(&self.pending) {
                    Ok(_) => break,
                    Err(e) if e.error_len().is_none() => continue,
                    Err(_) => {
                        self.bad = true;
                        return;
                    }
                }
            }
            if std::str::from_utf8(&self.pending).is_ok() {
                self.pending.clear();
            } else if self.pending.len() >= 4 {
                self.bad = true;
                return;
            } else {
                return; // still incomplete: data ran out
            }
        }
        match std::str::from_utf8(data) {
            Ok(_) => {}
            Err(e) if e.error_len().is_none() => {
                self.pending.extend_from_slice(&data[e.valid_up_to()..]);
            }
            Err(_) => self.bad = true,
        }
    }

    fn ok_at_end(&self) -> bool {
        !self.bad && self.pending.is_empty()
    }
}

/// Streams `file` line by line, calling `on_line` for every line numbered in `[start, end)`
/// (without its `\n`, at most [`MAX_LINE_BYTES`] of it), counting all lines, hashing the
/// content for the read-first gate, and recording the read in the session.
fn scan_lines(
    ctx: &ToolContext,
    target: &Target,
    file: File,
    meta: &Metadata,
    start: u64,
    end: u64,
    sink: &mut dyn LineSink,
) -> ToolResult<Scan> {
    let limits = &ctx.limits;
    let mut utf8 = Utf8Check::default();
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
                    ToolErrorKind::Io,
                    format!("{}: read failed: {e}", target.input()),
                ));
            }
        };
        let chunk = &buf[..n];
        if !sampled {
            let take = chunk.len().min(SAMPLE_BYTES);
            let complete = meta.len() <= take as u64;
            if !is_text_sample(&chunk[..take], complete) {
                return Err(binary_error(target));
            }
            sampled = true;
        }
        if track {
            hasher.update(chunk);
            utf8.feed(chunk);
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
                    sink.line(line_no, &chunk[pos..nl])?;
                } else {
                    extend_capped(&mut partial, &chunk[pos..nl]);
                    let line = std::mem::take(&mut partial);
                    sink.line(line_no, &line)?;
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
            sink.line(line_no, &partial)?;
        }
        line_no
    };
    let utf8_ok = !track || utf8.ok_at_end();
    if !utf8_ok {
        // Not UTF-8 after all: the caller decodes the file instead; no read is recorded
        // for content the model was not shown.
        return Ok(Scan {
            total_lines,
            utf8_ok,
        });
    }
    if track {
        ctx.session.reads().record(
            target,
            ReadRecord {
                hash: *hasher.finalize().as_bytes(),
                size,
                mtime: meta.modified().ok().map(|t| t.into_std()),
            },
        );
    }
    Ok(Scan {
        total_lines,
        utf8_ok,
    })
}

/// Files above this size are not decoded from other encodings (they are reported binary).
const MAX_DECODE_BYTES: u64 = 64 * 1024 * 1024;

/// [`scan_lines`], falling back to decoding the whole file when it is text in another
/// encoding (UTF-16 with BOM, a legacy code page). Returns the encoding used if not UTF-8.
fn scan_any(
    ctx: &ToolContext,
    target: &Target,
    file: File,
    meta: &Metadata,
    start: u64,
    end: u64,
    sink: &mut dyn LineSink,
) -> ToolResult<(Scan, Option<TextEncoding>)> {
    let sampled_binary = match scan_lines(ctx, target, file, meta, start, end, sink) {
        Ok(scan) if scan.utf8_ok => return Ok((scan, None)),
        // Invalid UTF-8 past the sample: decode rather than show replacement characters.
        Ok(_) => None,
        Err(err) if err.kind == ToolErrorKind::Binary => Some(err),
        Err(err) => return Err(err),
    };
    let not_text = || {
        sampled_binary
            .clone()
            .unwrap_or_else(|| binary_error(target))
    };
    if meta.len() > MAX_DECODE_BYTES {
        return Err(not_text());
    }
    sink.reset();
    let (bytes, record) = read_whole(target, MAX_DECODE_BYTES)?;
    let Some(decoded) = encoding::decode(&bytes) else {
        return Err(not_text());
    };
    let mut total = 0u64;
    for (i, line) in decoded.text.split_inclusive('\n').enumerate() {
        let n = i as u64 + 1;
        total = n;
        if n >= start && n < end {
            sink.line(n, line.strip_suffix('\n').unwrap_or(line).as_bytes())?;
        }
    }
    ctx.session.reads().record(target, record);
    Ok((
        Scan {
            total_lines: total,
            utf8_ok: true,
        },
        Some(decoded.encoding),
    ))
}

/// The note a read of a non-UTF-8 file carries.
fn decoded_note(enc: Option<TextEncoding>) -> String {
    match enc {
        None => String::new(),
        Some(e) => format!(
            "\n(Decoded from {}. Edits keep that encoding; text it cannot represent is refused.)",
            e.name()
        ),
    }
}

/// Seed 000's form: one file, `cat -n` lines, seed 000's caps, notice and spill.
fn read_single(
    ctx: &ToolContext,
    path: &str,
    offset: Option<u64>,
    limit: Option<u64>,
) -> ToolResult<ToolOutput> {
    let target = ctx.session.workspace.resolve(path)?;
    let (file, meta) = target.open_read()?;
    // An image or audio file comes back as media content.
    let mut file = file.into_std();
    if let Some((kind, head)) = sniff_media(&mut file)? {
        return read_media(ctx, &target, file, head, meta.len(), kind, None);
    }
    let file = File::from_std(file);
    let limits = &ctx.limits;
    if offset.is_none() && limit.is_none() && meta.len() > limits.max_read_bytes {
        return Err(ToolError::new(
            ToolErrorKind::TooLarge,
            format!(
                "{}: the file is {} bytes, above the {}-byte limit for reads without offset/limit. \
                 Call read_file again with offset and limit (e.g. offset=1, limit=2000) to read it in sections, \
                 or use grep to find the part you need",
                path,
                thousands(meta.len()),
                thousands(limits.max_read_bytes)
            ),
        ));
    }
    if limit == Some(0) {
        return Err(ToolError::invalid("read_file: limit must be at least 1"));
    }
    // Without offset/limit the spill holds the whole file (seed 000: "the full file content
    // is always written"); with them, the requested window.
    let explicit = offset.is_some() || limit.is_some();
    // Offsets are 1-based; 0 is read as 1 (a common off-by-one from callers).
    let start = offset.unwrap_or(1).max(1);
    let limit = limit.unwrap_or(limits.default_read_limit as u64);
    let display_end = start.saturating_add(limit); // exclusive
    let end = if explicit { display_end } else { u64::MAX };
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
    let (scan, enc) = scan_any(ctx, &target, file, &meta, start, end, &mut window)?;
    let total_lines = scan.total_lines;
    if total_lines == 0 {
        return Ok(ToolOutput::text(format!(
            "{}: the file is empty (0 lines).",
            target.display()
        )));
    }
    if start > total_lines {
        return Err(ToolError::invalid(format!(
            "{}: offset {} is past the end of the file, which has {} lines; use an offset from 1 to {}",
            path,
            thousands(start),
            thousands(total_lines),
            thousands(total_lines)
        )));
    }
    let window_last = (display_end - 1).min(total_lines);
    let mut text = window.rendered;
    if let Some(spill) = window.spill.take() {
        let saved = spill.finish()?;
        text.push_str(&format!(
            "\nShowing lines {}-{} of {}. Use the offset and limit parameters to read specific sections.\n{}",
            thousands(window.first_shown),
            thousands(window.last_shown),
            thousands(total_lines),
            saved_notice(&saved)
        ));
        if explicit {
            text.push_str(&format!(
                " (The saved file holds lines {}-{} of the original.)",
                thousands(start),
                thousands(window_last)
            ));
        }
    } else if window_last < total_lines {
        text.push_str(&format!(
            "\n(Lines {}-{} of {}. Call read_file with offset={} to read on.)",
            thousands(start),
            thousands(window_last),
            thousands(total_lines),
            window_last + 1
        ));
    }
    text.push_str(&decoded_note(enc));
    Ok(ToolOutput::text(text))
}

/// The media kind of an open file (and the bytes read to tell), rewinding it otherwise.
fn sniff_media(file: &mut std::fs::File) -> ToolResult<Option<(MediaKind, Vec<u8>)>> {
    use std::io::{Seek, SeekFrom};
    let mut head = Vec::with_capacity(media::SNIFF_BYTES);
    (&mut *file)
        .take(media::SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| ToolError::new(ToolErrorKind::Io, format!("read failed: {e}")))?;
    if let Some(kind) = media::sniff(&head) {
        return Ok(Some((kind, head)));
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| ToolError::new(ToolErrorKind::Io, format!("seek failed: {e}")))?;
    Ok(None)
}

/// Seed 002's form: several files, each its own result with a header and plain content.
fn read_batch(
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

/// Longest line kept whole (a line is otherwise bounded only by the file: a multi-gigabyte
/// minified file or a sparse file of NULs would be held in memory). Longer lines are cut,
/// in the output and in the spill file.
const MAX_LINE_BYTES: usize = 1 << 20;

fn extend_capped(partial: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_LINE_BYTES.saturating_sub(partial.len());
    partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
}
