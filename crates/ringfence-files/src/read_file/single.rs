//! The `path` form (seed 000): one file in `cat -n` form, the window chosen by offset/limit,
//! seed 000's caps and notice, and a spill file as soon as a cap cuts. Images and audio come
//! back as media content.

use std::io::Read;

use ringfence_fs::File;

use super::scanner::{LineSink, decoded_note, scan_any};
use crate::media::{self, MediaKind};
use crate::read_media_file::read_media;
use crate::text::{cut_line, thousands};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::spill::SpillWriter;
use ringfence_core::tool::{ToolContext, ToolOutput};

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

/// Seed 000's form: one file, `cat -n` lines, seed 000's caps, notice and spill.
pub(super) fn read_single(
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
            saved.notice()
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
