//! One output stream of a command, kept within bounds whatever the command prints: the
//! beginning and the end in memory (what the result shows), everything in a spill file once
//! it outgrows what is shown (itself capped), and the lines that completed since the last
//! progress notification.

use std::collections::VecDeque;
use std::path::PathBuf;

use ringfence_core::spill::{SpillStore, SpillWriter};

/// The most a spill file of one stream holds; beyond it the output is counted, not saved.
pub const MAX_SPILL_BYTES: u64 = 256 << 20;
/// The longest line a progress notification carries.
const MAX_PROGRESS_LINE: usize = 500;

/// A stream being captured.
pub struct Capture {
    /// Characters shown in the result (half from the beginning, half from the end when cut).
    shown_chars: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    spill: Option<SpillWriter>,
    spill_error: Option<String>,
    spilled: u64,
    line: Vec<u8>,
    lines: Vec<String>,
}

/// A finished stream, as the result gives it.
pub struct Captured {
    pub text: String,
    /// The whole stream did not fit in `text`.
    pub truncated: bool,
    /// Where the whole stream (up to [`MAX_SPILL_BYTES`], and up to the user's quota of
    /// saved output) was saved.
    pub file: Option<PathBuf>,
    pub bytes: u64,
    /// Why the spill file is missing or incomplete, when it is.
    pub spill_note: Option<String>,
}

impl Capture {
    pub fn new(shown_chars: usize) -> Capture {
        Capture {
            shown_chars,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            spill: None,
            spill_error: None,
            spilled: 0,
            line: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// Bytes kept from each end: a character is at most four bytes.
    fn keep(&self) -> usize {
        self.shown_chars * 2
    }

    pub fn push(&mut self, bytes: &[u8], spill: &SpillStore) {
        self.total += bytes.len() as u64;
        let room = self.keep().saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        self.tail.extend(bytes.iter().copied());
        let excess = self.tail.len().saturating_sub(self.keep());
        self.tail.drain(..excess);
        // More bytes than characters shown: the result may have to cut, so keep it all.
        if self.total > self.shown_chars as u64 && self.spill_error.is_none() {
            if self.spill.is_none() {
                match spill.create() {
                    Ok(mut w) => {
                        // What came before (all of it is still in `head` at this point,
                        // since head holds twice what is shown).
                        let before = &self.head[..self
                            .head
                            .len()
                            .min((self.total - bytes.len() as u64) as usize)];
                        match w.write(before) {
                            Ok(()) => {
                                self.spilled = before.len() as u64;
                                self.spill = Some(w);
                            }
                            Err(e) => self.spill_error = Some(e.message.clone()),
                        }
                    }
                    Err(e) => self.spill_error = Some(e.message.clone()),
                }
            }
            if let Some(w) = &mut self.spill {
                let room = MAX_SPILL_BYTES.saturating_sub(self.spilled);
                let part = &bytes[..bytes.len().min(room as usize)];
                if !part.is_empty() {
                    if let Err(e) = w.write(part) {
                        self.spill_error = Some(e.message.clone());
                    }
                    self.spilled += part.len() as u64;
                }
            }
        }
        for &b in bytes {
            if b == b'\n' {
                let line = String::from_utf8_lossy(&self.line).into_owned();
                self.lines.push(line);
                self.line.clear();
                if self.lines.len() > 20 {
                    self.lines.remove(0);
                }
            } else if self.line.len() < MAX_PROGRESS_LINE {
                self.line.push(b);
            }
        }
    }

    /// The lines completed since the last call.
    pub fn take_lines(&mut self) -> Vec<String> {
        std::mem::take(&mut self.lines)
    }

    pub fn finish(self) -> Captured {
        let whole_in_head = self.total as usize <= self.head.len();
        let full = whole_in_head.then(|| String::from_utf8_lossy(&self.head).into_owned());
        let fits = full
            .as_ref()
            .is_some_and(|t| t.chars().count() <= self.shown_chars);
        if fits {
            if let Some(w) = self.spill {
                w.discard();
            }
            return Captured {
                text: full.unwrap_or_default(),
                truncated: false,
                file: None,
                bytes: self.total,
                spill_note: None,
            };
        }
        let half = self.shown_chars / 2;
        let head: String = String::from_utf8_lossy(&self.head)
            .chars()
            .take(half)
            .collect();
        let tail_bytes: Vec<u8> = self.tail.into_iter().collect();
        let tail_text = String::from_utf8_lossy(&tail_bytes);
        let tail_chars = tail_text.chars().count();
        let tail: String = tail_text
            .chars()
            .skip(tail_chars.saturating_sub(half))
            .collect();
        let mut spill_note = self.spill_error.clone();
        let file = match self.spill {
            Some(w) if self.spill_error.is_none() => match w.finish() {
                Ok(saved) => {
                    // The user's quota of saved output cut it: say so, and why.
                    if let Some(cut) = &saved.cut {
                        spill_note = Some(cut.note());
                    } else if self.total > MAX_SPILL_BYTES {
                        spill_note = Some(format!(
                            "only the first {} MiB were saved",
                            MAX_SPILL_BYTES >> 20
                        ));
                    }
                    Some(saved.path)
                }
                Err(e) => {
                    spill_note = Some(e.message.clone());
                    None
                }
            },
            Some(w) => {
                w.discard();
                None
            }
            None => None,
        };
        let text = format!(
            "{head}\n[… {} bytes in all; the middle is not shown …]\n{tail}",
            self.total
        );
        Captured {
            text,
            truncated: true,
            file,
            bytes: self.total,
            spill_note,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 29: a command's output is cut at the user's quota of saved output as it
    /// streams, the user's older outputs deleted first, and the result says why.
    #[test]
    fn a_stream_past_the_users_quota_is_cut_at_it_with_a_note() {
        let dir = tempfile::tempdir().unwrap();
        let root = ringfence_fs::Root::new(
            ringfence_fs::RootSpec {
                path: dir.path().join("ann"),
                access: ringfence_fs::Access::ReadOnly,
                origin: ringfence_fs::RootOrigin::Internal,
                label: "tool-output".into(),
            },
            std::sync::Arc::new(ringfence_fs::Denylist::empty()),
        )
        .unwrap();
        let spill = ringfence_core::SpillStore::new(std::sync::Arc::new(root)).with_quota(10_000);
        let older = spill.save(&"o".repeat(4000)).unwrap();
        let mut capture = Capture::new(100);
        for _ in 0..50 {
            capture.push(&[b'x'; 1000], &spill);
        }
        let c = capture.finish();
        assert!(c.truncated);
        assert_eq!(c.bytes, 50_000);
        let file = c.file.expect("saved");
        let note = c.spill_note.expect("a note");
        assert!(
            note.contains("only the first 10000 bytes were saved")
                && note.contains("[limits] spill_quota_mb"),
            "{note}"
        );
        let dir = spill.root().dir().unwrap();
        let name = file.file_name().unwrap();
        assert_eq!(dir.metadata(name).unwrap().len(), 10_000);
        assert!(
            dir.metadata(older.path.file_name().unwrap()).is_err(),
            "the older output made room"
        );
    }
}
