//! Bytes of a text document to a string: the charset the server declared, else a byte-order
//! mark, else (for HTML) a `<meta>` declaration near the top, else UTF-8 when the bytes are
//! valid UTF-8, else a guess from the bytes. A declaration the bytes contradict (a page
//! served as UTF-8 that is not) is overruled by the guess, with a notice.

use encoding_rs::{Encoding, UTF_8};

/// The decoded text, and a notice when the charset was guessed or overruled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub text: String,
    pub encoding: &'static str,
    pub notice: Option<String>,
}

/// Decodes `bytes` served with the Content-Type parameter `declared` (if any).
pub fn decode(bytes: &[u8], declared: Option<&str>, html: bool) -> Decoded {
    if let Some((enc, bom_len)) = Encoding::for_bom(bytes) {
        return plain(enc, &bytes[bom_len..], None);
    }
    let declared_enc = declared.and_then(|l| Encoding::for_label(l.trim().as_bytes()));
    let meta_enc = if declared_enc.is_none() && html {
        meta_charset(bytes)
    } else {
        None
    };
    // A page declaring UTF-16 in <meta> is not UTF-16 (it could not have been read).
    let meta_enc = meta_enc.map(|e| {
        if e == encoding_rs::UTF_16LE || e == encoding_rs::UTF_16BE {
            UTF_8
        } else {
            e
        }
    });
    match declared_enc.or(meta_enc) {
        Some(enc) => {
            let (text, had_errors) = enc.decode_without_bom_handling(bytes);
            if had_errors && enc == UTF_8 {
                let guess = guess(bytes);
                if guess != UTF_8 {
                    return plain(
                        guess,
                        bytes,
                        Some(format!(
                            "the server declared utf-8 but the bytes are not; decoded as {}",
                            guess.name().to_ascii_lowercase()
                        )),
                    );
                }
            }
            Decoded {
                text: text.into_owned(),
                encoding: enc.name(),
                notice: None,
            }
        }
        None if std::str::from_utf8(bytes).is_ok() => plain(UTF_8, bytes, None),
        None => {
            let enc = guess(bytes);
            plain(
                enc,
                bytes,
                Some(format!(
                    "no charset was declared; decoded as {} (guessed from the bytes)",
                    enc.name().to_ascii_lowercase()
                )),
            )
        }
    }
}

fn plain(enc: &'static Encoding, bytes: &[u8], notice: Option<String>) -> Decoded {
    let (text, _) = enc.decode_without_bom_handling(bytes);
    Decoded {
        text: text.into_owned(),
        encoding: enc.name(),
        notice,
    }
}

fn guess(bytes: &[u8]) -> &'static Encoding {
    let mut detector = chardetng::EncodingDetector::new();
    detector.feed(&bytes[..bytes.len().min(64 << 10)], bytes.len() <= 64 << 10);
    detector.guess(None, true)
}

/// A charset declared by `<meta charset=…>` or `<meta http-equiv=Content-Type content="…;
/// charset=…">` in the first 1024 bytes (the HTML standard's prescan, simplified).
fn meta_charset(bytes: &[u8]) -> Option<&'static Encoding> {
    let head = &bytes[..bytes.len().min(1024)];
    let lower: Vec<u8> = head.iter().map(u8::to_ascii_lowercase).collect();
    let mut from = 0;
    while let Some(pos) = find(&lower[from..], b"<meta") {
        let start = from + pos;
        let end = find(&lower[start..], b">").map_or(lower.len(), |e| start + e);
        let tag = &lower[start..end];
        if let Some(c) = find(tag, b"charset=") {
            let value = &tag[c + 8..];
            let value: Vec<u8> = value
                .iter()
                .copied()
                .skip_while(|b| *b == b'"' || *b == b'\'' || b.is_ascii_whitespace())
                .take_while(|b| !matches!(b, b'"' | b'\'' | b';' | b'/' | b' ' | b'>'))
                .collect();
            if let Some(enc) = Encoding::for_label(&value) {
                return Some(enc);
            }
        }
        from = end;
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_charset_wins() {
        let d = decode(b"caf\xe9", Some("iso-8859-1"), false);
        assert_eq!(d.text, "café");
        assert_eq!(d.notice, None);
    }

    #[test]
    fn a_meta_declaration_is_read_for_html() {
        let page = b"<html><head><meta charset=\"windows-1251\"></head><body>\xcf\xf0\xe8\xe2\xe5\xf2</body>";
        assert!(decode(page, None, true).text.contains("Привет"));
        let page = b"<meta http-equiv=Content-Type content='text/html; charset=shift_jis'>\x93\xfa\x96\x7b";
        assert!(decode(page, None, true).text.contains("日本"));
    }

    #[test]
    fn a_wrong_declaration_is_overruled_with_a_notice() {
        let latin = "Ceci est un texte français assez long, écrit en Latin-1 pour le détecteur: élève, été, à côté.";
        let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode(latin);
        let d = decode(&bytes, Some("utf-8"), false);
        assert_eq!(d.text, latin);
        assert!(d.notice.unwrap().contains("declared utf-8"));
    }

    #[test]
    fn undeclared_utf8_and_boms_are_recognised() {
        assert_eq!(decode("naïve".as_bytes(), None, true).text, "naïve");
        assert_eq!(decode(b"\xef\xbb\xbfhi", Some("latin1"), false).text, "hi");
        assert_eq!(decode(b"\xff\xfeh\0i\0", None, false).text, "hi");
    }
}
