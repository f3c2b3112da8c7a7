//! Text files that are not UTF-8: UTF-16 with a byte-order mark, and legacy single- and
//! multi-byte encodings (windows-1252, ISO-8859-x, KOI8-R, Shift_JIS, …) detected with
//! `chardetng`. Such a file is decoded for reading and encoded back for a write only when
//! nothing is lost both ways: the decoded text must re-encode to exactly the original bytes,
//! and the new text must be representable. Otherwise the write is refused, never made lossy.

use std::borrow::Cow;

use encoding_rs::Encoding;

/// The encoding of a non-UTF-8 text file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextEncoding {
    Utf16Le,
    Utf16Be,
    Legacy(&'static Encoding),
}

/// Text an encoding cannot hold: the encoding and the first (at most five) characters it
/// cannot represent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the new text has characters {encoding} cannot represent: {}", self.listed())]
pub struct Unrepresentable {
    pub encoding: &'static str,
    pub chars: Vec<char>,
}

impl Unrepresentable {
    fn listed(&self) -> String {
        self.chars
            .iter()
            .map(|c| format!("`{c}` (U+{:04X})", u32::from(*c)))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl TextEncoding {
    pub fn name(self) -> &'static str {
        match self {
            TextEncoding::Utf16Le => "UTF-16LE",
            TextEncoding::Utf16Be => "UTF-16BE",
            TextEncoding::Legacy(e) => e.name(),
        }
    }

    /// Encodes `text` (without a BOM; UTF-16 gets its BOM back here). `Err` names the first
    /// characters the encoding cannot represent.
    pub fn encode(self, text: &str) -> Result<Vec<u8>, Unrepresentable> {
        match self {
            TextEncoding::Utf16Le | TextEncoding::Utf16Be => {
                let mut out = Vec::with_capacity(text.len() * 2 + 2);
                let le = self == TextEncoding::Utf16Le;
                for unit in std::iter::once(0xFEFF).chain(text.encode_utf16()) {
                    out.extend_from_slice(&if le {
                        unit.to_le_bytes()
                    } else {
                        unit.to_be_bytes()
                    });
                }
                Ok(out)
            }
            TextEncoding::Legacy(enc) => {
                let (bytes, _, unmappable) = enc.encode(text);
                if unmappable {
                    let chars = text
                        .chars()
                        .filter(|c| enc.encode(&c.to_string()).2)
                        .take(5)
                        .collect();
                    return Err(Unrepresentable {
                        encoding: enc.name(),
                        chars,
                    });
                }
                Ok(bytes.into_owned())
            }
        }
    }
}

/// A decoded non-UTF-8 file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    pub encoding: TextEncoding,
    /// Encoding the text again gives back exactly the original bytes: the file can be
    /// edited safely.
    pub round_trips: bool,
}

/// Decodes `bytes` if they are text in an encoding other than UTF-8; `None` for binary
/// content (and for UTF-8, which the callers handle directly).
pub fn decode(bytes: &[u8]) -> Option<Decoded> {
    let (encoding, body) = match bytes {
        [0xFF, 0xFE, rest @ ..] => (TextEncoding::Utf16Le, rest),
        [0xFE, 0xFF, rest @ ..] => (TextEncoding::Utf16Be, rest),
        _ => {
            if std::str::from_utf8(bytes).is_ok() || memchr::memchr(0, bytes).is_some() {
                return None;
            }
            let mut det = chardetng::EncodingDetector::new();
            det.feed(bytes, true);
            let (enc, confident) = det.guess_assess(None, false);
            if enc == encoding_rs::UTF_8 || !confident && looks_binary(bytes) {
                return None;
            }
            (TextEncoding::Legacy(enc), bytes)
        }
    };
    let text = match encoding {
        TextEncoding::Utf16Le | TextEncoding::Utf16Be => {
            if body.len() % 2 != 0 {
                return None;
            }
            let units = body.chunks_exact(2).map(|c| {
                if encoding == TextEncoding::Utf16Le {
                    u16::from_le_bytes([c[0], c[1]])
                } else {
                    u16::from_be_bytes([c[0], c[1]])
                }
            });
            let text: String = char::decode_utf16(units).collect::<Result<_, _>>().ok()?;
            if text.contains('\0') {
                return None;
            }
            text
        }
        TextEncoding::Legacy(enc) => {
            let text: Cow<'_, str> =
                enc.decode_without_bom_handling_and_without_replacement(body)?;
            text.into_owned()
        }
    };
    let round_trips = encoding.encode(&text).is_ok_and(|again| again == bytes);
    Some(Decoded {
        text,
        encoding,
        round_trips,
    })
}

/// Control bytes other than tab, line breaks and form feed are rare in any text encoding.
fn looks_binary(bytes: &[u8]) -> bool {
    let controls = bytes
        .iter()
        .filter(|&&b| b < 0x20 && !matches!(b, b'\t' | b'\n' | b'\r' | 0x0C))
        .count();
    controls * 100 > bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_with_bom_round_trips_both_ways() {
        for enc in [TextEncoding::Utf16Le, TextEncoding::Utf16Be] {
            let bytes = enc.encode("héllo\r\nwörld 🎉\r\n").unwrap();
            let d = decode(&bytes).unwrap();
            assert_eq!(d.encoding, enc);
            assert_eq!(d.text, "héllo\r\nwörld 🎉\r\n");
            assert!(d.round_trips);
        }
    }

    #[test]
    fn legacy_single_byte_text_is_detected_and_round_trips() {
        // "Größe: 10 €, café" in windows-1252.
        let bytes = b"Gr\xf6\xdfe: 10 \x80, caf\xe9 \xe0 la cr\xe8me\n".to_vec();
        let d = decode(&bytes).unwrap();
        assert_eq!(d.encoding.name(), "windows-1252");
        assert_eq!(d.text, "Größe: 10 €, café à la crème\n");
        assert!(d.round_trips);
        assert_eq!(d.encoding.encode(&d.text).unwrap(), bytes);
    }

    #[test]
    fn unrepresentable_characters_are_named() {
        let enc = TextEncoding::Legacy(encoding_rs::WINDOWS_1252);
        let err = enc
            .encode("Łódź is fine, 日本 is not")
            .unwrap_err()
            .to_string();
        assert!(err.contains("U+0141"), "{err}");
        assert!(err.contains("U+65E5"), "{err}");
    }

    #[test]
    fn utf8_and_binary_are_not_decoded_here() {
        assert!(decode("plain ütf-8".as_bytes()).is_none());
        assert!(decode(b"\x7fELF\x02\x01\x01\x00\x00\x00").is_none());
        assert!(decode(&[0xFF, 0xFE, 0x41]).is_none()); // odd UTF-16 length
    }
}
