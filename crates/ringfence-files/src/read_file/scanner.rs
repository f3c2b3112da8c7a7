//! The streaming line scanner both forms share: one pass over the file that hashes it for
//! the read-first gate, counts its lines and hands the lines of the requested window to a
//! sink — or, for text in another encoding, one decode of the whole file that does the same.

use std::io::Read;

use ringfence_fs::{File, Metadata, Target};

use crate::encoding::{self, TextEncoding};
use crate::reads::ReadRecord;
use crate::{SAMPLE_BYTES, binary_error, is_text_sample, read_whole};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::ToolContext;

/// Where a scan sends the lines of its window.
pub(super) trait LineSink {
    fn line(&mut self, line_no: u64, raw: &[u8]) -> ToolResult<()>;
    /// Forgets every line received: the scan starts over (the file turned out to need
    /// decoding).
    fn reset(&mut self);
}

/// What a pass over a file found.
pub(super) struct Scan {
    pub(super) total_lines: u64,
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
        crate::reads::reads(&ctx.session).record(
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
pub(super) fn scan_any(
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
    crate::reads::reads(&ctx.session).record(target, record);
    Ok((
        Scan {
            total_lines: total,
            utf8_ok: true,
        },
        Some(decoded.encoding),
    ))
}

/// The note a read of a non-UTF-8 file carries.
pub(super) fn decoded_note(enc: Option<TextEncoding>) -> String {
    match enc {
        None => String::new(),
        Some(e) => format!(
            "\n(Decoded from {}. Edits keep that encoding; text it cannot represent is refused.)",
            e.name()
        ),
    }
}

/// Longest line kept whole (a line is otherwise bounded only by the file: a multi-gigabyte
/// minified file or a sparse file of NULs would be held in memory). Longer lines are cut,
/// in the output and in the spill file.
const MAX_LINE_BYTES: usize = 1 << 20;

fn extend_capped(partial: &mut Vec<u8>, bytes: &[u8]) {
    let room = MAX_LINE_BYTES.saturating_sub(partial.len());
    partial.extend_from_slice(&bytes[..bytes.len().min(room)]);
}
