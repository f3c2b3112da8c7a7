//! What every tool that changes an existing text file shares: resolve, check the read-first
//! gate, decode, change, encode in the file's own conventions, write atomically, refresh the
//! read record. Also the matching of `old_string`-style arguments, exact first and tolerant
//! of the mistakes models make when that yields exactly one candidate.

use ringfence_fs::{EntryKind, Target, TargetState, WriteOptions};

use crate::encoding::{self, TextEncoding};
use crate::journal::{Before, Journaling, MAX_JOURNALED_BYTES};
use crate::text::{TextStyle, thousands};
use crate::{binary_error, check_read_first, read_whole, record_for};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::ToolContext;

/// An existing text file opened for a change.
pub(crate) struct Editable {
    pub target: Target,
    pub style: TextStyle,
    /// The content with the BOM stripped and, for CRLF files, `\r\n` as `\n`: what edits
    /// work on. [`save`] turns it back.
    pub text: String,
    /// The file's bytes as read, if small enough to journal for undo.
    original: Option<Vec<u8>>,
    /// The file's encoding when it is not UTF-8 (writes encode back into it).
    pub encoding: Option<TextEncoding>,
}

impl Editable {
    /// A sentence naming the conventions (and encoding) the write kept, if any.
    pub fn describe_kept(&self) -> Option<String> {
        let style = self.style.describe_kept();
        match (style, self.encoding) {
            (s, None) => s,
            (None, Some(e)) => Some(format!("Kept the file's {} encoding.", e.name())),
            (Some(s), Some(e)) => Some(format!("{s} Kept the file's {} encoding.", e.name())),
        }
    }

    /// Brings `s` (an argument the model wrote) into the form of [`Editable::text`].
    pub fn normalize_arg(&self, s: &str) -> String {
        if self.style.crlf {
            s.replace("\r\n", "\n")
        } else {
            s.to_owned()
        }
    }
}

/// Opens `path` for a change: it must be an existing, writable text file that this session
/// has read (unless the gate is off) and that has not changed since.
pub(crate) fn open(ctx: &ToolContext, path: &str) -> ToolResult<Editable> {
    let target = ctx.session.workspace.resolve(path)?;
    target.require_writable()?;
    match target.state() {
        TargetState::Exists(EntryKind::File) => {}
        TargetState::Missing => {
            return Err(ToolError::new(
                ToolErrorKind::NotFound,
                format!("{path}: no such file; use write_file to create it"),
            ));
        }
        TargetState::Exists(EntryKind::Dir) => {
            return Err(ToolError::new(
                ToolErrorKind::WrongType,
                format!("{path}: is a directory, not a file"),
            ));
        }
        TargetState::Exists(_) => {
            return Err(ToolError::new(
                ToolErrorKind::WrongType,
                format!("{path}: not a regular file"),
            ));
        }
    }
    let (bytes, current) = read_whole(&target, ctx.limits.max_edit_bytes)?;
    check_read_first(ctx, &target, &current)?;
    let kept = (bytes.len() <= MAX_JOURNALED_BYTES).then(|| bytes.clone());
    let (original, encoding) = match String::from_utf8(bytes) {
        Ok(text) if !text.contains('\0') => (text, None),
        Ok(text) => {
            let bytes = text.into_bytes();
            decoded(&target, &bytes)?
        }
        Err(e) => decoded(&target, e.as_bytes())?,
    };
    let style = TextStyle::detect(&original);
    let text = style.normalize(&original);
    Ok(Editable {
        target,
        style,
        text,
        original: kept,
        encoding,
    })
}

/// A non-UTF-8 text file, decoded, if editing it cannot lose anything.
fn decoded(target: &Target, bytes: &[u8]) -> ToolResult<(String, Option<TextEncoding>)> {
    let Some(d) = encoding::decode(bytes) else {
        return Err(binary_error(target));
    };
    if !d.round_trips {
        return Err(ToolError::new(
            ToolErrorKind::Encoding,
            format!(
                "{}: the file reads as {}, but encoding the text again would not give back the same bytes, so editing it could damage it. It can be read, not edited",
                target.input(),
                d.encoding.name()
            ),
        ));
    }
    Ok((d.text, Some(d.encoding)))
}

/// `text` as the bytes of a file in `encoding` (UTF-8 when `None`); refuses text the
/// encoding cannot represent.
pub(crate) fn encode_for(
    target: &Target,
    encoding: Option<TextEncoding>,
    text: String,
) -> ToolResult<Vec<u8>> {
    match encoding {
        None => Ok(text.into_bytes()),
        Some(enc) => enc.encode(&text).map_err(|why| {
            ToolError::new(
                ToolErrorKind::Encoding,
                format!(
                    "{}: the file is {}, and {why}. Nothing was written; use only characters it can hold, or convert the file to UTF-8 with write_file after deleting it",
                    target.input(),
                    enc.name()
                ),
            )
        }),
    }
}

/// What [`save`] did.
pub(crate) struct Saved {
    /// Set when the change could not be journaled for undo.
    pub journal_note: Option<String>,
}

/// Writes `new_text` (in the normalised form) back in the file's conventions, atomically,
/// records the result as known to the session, and journals the change for `undo_edit`.
pub(crate) fn save(
    ctx: &ToolContext,
    journal: &Journaling,
    ed: &Editable,
    new_text: &str,
    tool: &str,
) -> ToolResult<Saved> {
    check_size(ctx, ed.target.input(), new_text.len() as u128)?;
    ctx.check_cancelled()?;
    let out = encode_for(&ed.target, ed.encoding, ed.style.apply(new_text))?;
    ed.target.write_atomic(&out, &WriteOptions::default())?;
    // Our own write refreshes the record: the model knows this content.
    if let Ok(meta) = ed.target.metadata() {
        crate::reads::reads(&ctx.session).record(&ed.target, record_for(&out, &meta));
    }
    let before = match &ed.original {
        Some(b) => Before::Content(b),
        None => Before::NotKept,
    };
    let journal_note = journal.note(&ed.target, tool, before, Some(&out), None);
    Ok(Saved { journal_note })
}

/// Refuses a result above the edit limit, before it is built where possible.
pub(crate) fn check_size(ctx: &ToolContext, path: &str, new_len: u128) -> ToolResult<()> {
    if new_len > u128::from(ctx.limits.max_edit_bytes) {
        return Err(ToolError::new(
            ToolErrorKind::TooLarge,
            format!(
                "{path}: the edited file would be {} bytes, above the {}-byte limit; make a smaller change",
                thousands(new_len.min(u128::from(u64::MAX)) as u64),
                thousands(ctx.limits.max_edit_bytes)
            ),
        ));
    }
    Ok(())
}

/// Where a search string was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// Byte ranges in the text, in order, not overlapping.
    pub ranges: Vec<(usize, usize)>,
    /// `None` for an exact match; otherwise what had to be ignored to find the one candidate.
    pub tolerated: Option<String>,
}

/// Files above this size are only matched exactly (the tolerant index costs memory).
const MAX_TOLERANT_BYTES: usize = 16 * 1024 * 1024;

/// Finds `needle` in `text`: every exact occurrence; if there is none, the single candidate
/// that matches after ignoring trailing whitespace (including a `\r` before a line break)
/// and typographic quotes. Several tolerant candidates are no match: guessing could edit the
/// wrong place.
pub(crate) fn find(text: &str, needle: &str) -> Found {
    let ranges: Vec<(usize, usize)> = text
        .match_indices(needle)
        .map(|(i, m)| (i, i + m.len()))
        .collect();
    if !ranges.is_empty() || text.len() > MAX_TOLERANT_BYTES {
        return Found {
            ranges,
            tolerated: None,
        };
    }
    let hay = Loose::new(text);
    let pin = Loose::new(needle);
    if pin.text.trim().is_empty() {
        return Found {
            ranges: Vec::new(),
            tolerated: None,
        };
    }
    // Whitespace dropped from the end of the needle was trailing only if the match ends a
    // line: `x = 1 ` must not match the start of `x = 10;`.
    let must_end_line = pin.dropped_tail;
    let hay_bytes = hay.text.as_bytes();
    let mut hits = hay
        .text
        .match_indices(&pin.text)
        .map(|(i, m)| (i, i + m.len()))
        .filter(|&(_, e)| !must_end_line || e == hay_bytes.len() || hay_bytes[e] == b'\n');
    let (Some(hit), None) = (hits.next(), hits.next()) else {
        return Found {
            ranges: Vec::new(),
            tolerated: None,
        };
    };
    let (start, end) = hay.original_range(hit);
    let mut what = Vec::new();
    let orig = &text[start..end];
    if has_smart_quotes(orig) != has_smart_quotes(needle) {
        what.push("typographic quotes");
    }
    if what.is_empty() || trailing_ws_differs(orig, needle) {
        what.push("trailing whitespace and line endings");
    }
    Found {
        ranges: vec![(start, end)],
        tolerated: Some(format!(
            "old text matched only after ignoring {} (exactly one candidate in the file)",
            what.join(" and ")
        )),
    }
}

fn has_smart_quotes(s: &str) -> bool {
    s.chars().any(|c| loose_quote(c).is_some())
}

fn trailing_ws_differs(a: &str, b: &str) -> bool {
    let trail = |s: &str| -> Vec<String> {
        s.split('\n')
            .map(|l| l[l.trim_end_matches([' ', '\t', '\r']).len()..].to_owned())
            .collect()
    };
    trail(a) != trail(b)
}

fn loose_quote(c: char) -> Option<char> {
    match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => Some('\''),
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => Some('"'),
        _ => None,
    }
}

/// A text with trailing whitespace removed from every line and typographic quotes made
/// plain, remembering where each byte came from.
struct Loose {
    text: String,
    /// For each byte of `text`: the original offset and length of what it stands for.
    origin: Vec<(usize, usize)>,
    /// Whitespace at the very end (after the last line break) was dropped.
    dropped_tail: bool,
}

impl Loose {
    fn new(s: &str) -> Loose {
        let mut text = String::with_capacity(s.len());
        let mut origin = Vec::with_capacity(s.len());
        let mut pending_ws: Vec<(usize, char)> = Vec::new();
        for (i, c) in s.char_indices() {
            match c {
                ' ' | '\t' | '\r' => pending_ws.push((i, c)),
                '\n' => {
                    pending_ws.clear(); // trailing: dropped
                    text.push('\n');
                    origin.push((i, 1));
                }
                _ => {
                    for (wi, wc) in pending_ws.drain(..) {
                        text.push(wc);
                        origin.push((wi, 1));
                    }
                    if let Some(q) = loose_quote(c) {
                        text.push(q);
                        origin.push((i, c.len_utf8()));
                    } else {
                        let start = text.len();
                        text.push(c);
                        for k in 0..(text.len() - start) {
                            origin.push((i + k, 1));
                        }
                    }
                }
            }
        }
        // Whitespace at the very end is trailing too.
        Loose {
            text,
            origin,
            dropped_tail: !pending_ws.is_empty(),
        }
    }

    /// The original byte range a range of `text` stands for.
    fn original_range(&self, (start, end): (usize, usize)) -> (usize, usize) {
        let (s, _) = self.origin[start];
        let (last, len) = self.origin[end - 1];
        (s, last + len)
    }
}

/// Applies replacements of `ranges` (in order, non-overlapping) by `new`.
pub(crate) fn replace_ranges(text: &str, ranges: &[(usize, usize)], new: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for &(s, e) in ranges {
        out.push_str(&text[at..s]);
        out.push_str(new);
        at = e;
    }
    out.push_str(&text[at..]);
    out
}

/// The lines of a normalised text, each with its `\n` (the last may lack one).
pub(crate) fn lines_of(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_matches_win() {
        let f = find("a b a", "a");
        assert_eq!(f.ranges, vec![(0, 1), (4, 5)]);
        assert_eq!(f.tolerated, None);
    }

    #[test]
    fn trailing_whitespace_and_crlf_are_tolerated_once() {
        let text = "fn main() {   \r\n    x();\t\n}\n";
        let f = find(text, "fn main() {\n    x();\n}");
        assert_eq!(f.ranges.len(), 1);
        let (s, e) = f.ranges[0];
        assert_eq!(&text[s..e], "fn main() {   \r\n    x();\t\n}");
        assert!(f.tolerated.unwrap().contains("trailing whitespace"));
    }

    #[test]
    fn smart_quotes_are_tolerated() {
        let text = "say(\"hello\");\n";
        let f = find(text, "say(\u{201C}hello\u{201D});");
        assert_eq!(f.ranges, vec![(0, 13)]);
        assert!(f.tolerated.unwrap().contains("typographic quotes"));
        // And the other way round: the file has the typographic ones.
        let text = "it\u{2019}s here\n";
        let f = find(text, "it's here");
        assert_eq!(f.ranges.len(), 1);
        let (s, e) = f.ranges[0];
        assert_eq!(&text[s..e], "it\u{2019}s here");
    }

    #[test]
    fn two_tolerant_candidates_are_no_match() {
        let f = find("x = 1  \nx = 1\t\n", "x = 1 \n");
        // Exact "x = 1 \n" does not occur; loosely both lines match.
        assert!(f.ranges.is_empty());
    }

    #[test]
    fn dropped_trailing_space_must_end_a_line() {
        // `x = 1 ` is not the start of `x = 10;`.
        assert!(find("x = 10;\n", "x = 1 ").ranges.is_empty());
        // but it is the line `x = 1`.
        let f = find("y\nx = 1\n", "x = 1 ");
        assert_eq!(f.ranges, vec![(2, 7)]);
    }

    #[test]
    fn inner_whitespace_still_matters() {
        let f = find("a  b\n", "a b");
        assert!(f.ranges.is_empty());
    }
}
