//! Text helpers shared by the file tools: number formatting, line endings, BOM.

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

pub const BOM: &str = "\u{feff}";

/// The conventions of an existing text file that a rewrite keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextStyle {
    pub bom: bool,
    /// Every line break is `\r\n`.
    pub crlf: bool,
    pub final_newline: bool,
}

impl TextStyle {
    /// Reads the conventions of `text` (which may start with a BOM).
    pub fn detect(text: &str) -> TextStyle {
        let bom = text.starts_with(BOM);
        let body = text.strip_prefix(BOM).unwrap_or(text);
        let lf = memchr::memchr_iter(b'\n', body.as_bytes()).count();
        let crlf_count = body.matches("\r\n").count();
        TextStyle {
            bom,
            crlf: lf > 0 && crlf_count == lf,
            final_newline: body.ends_with('\n'),
        }
    }

    /// Strips the BOM and, for CRLF files, turns `\r\n` into `\n` (the form edits match on).
    /// [`apply`](Self::apply) is its exact inverse.
    pub fn normalize(self, text: &str) -> String {
        let body = text.strip_prefix(BOM).unwrap_or(text);
        if self.crlf {
            body.replace("\r\n", "\n")
        } else {
            body.to_owned()
        }
    }

    /// The inverse of [`normalize`](Self::normalize), also restoring the final-newline state.
    pub fn apply(self, normalized: &str) -> String {
        let mut body = normalized.to_owned();
        if self.final_newline && !body.is_empty() && !body.ends_with('\n') {
            body.push('\n');
        } else if !self.final_newline && body.ends_with('\n') {
            // Only the one line break that would be the final newline: blank lines before
            // it are content.
            body.pop();
            if !self.crlf && body.ends_with('\r') {
                body.pop();
            }
        }
        // `normalized` came through `normalize`: every `\n` stands for one `\r\n`. A lone
        // `\r` before it is content and stays.
        let body = if self.crlf {
            body.replace('\n', "\r\n")
        } else {
            body
        };
        if self.bom {
            format!("{BOM}{body}")
        } else {
            body
        }
    }

    /// A sentence naming the conventions kept, or `None` when there was nothing special.
    pub fn describe_kept(self) -> Option<String> {
        let mut kept = Vec::new();
        if self.crlf {
            kept.push("CRLF line endings");
        }
        if self.bom {
            kept.push("byte-order mark");
        }
        if !self.final_newline {
            kept.push("missing final newline");
        }
        if kept.is_empty() {
            None
        } else {
            Some(format!("Kept the file's {}.", kept.join(", ")))
        }
    }
}

/// Cuts `s` to at most `max` characters, marking the cut.
pub fn cut_line(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    // A string of at most `max` bytes has at most `max` characters: no need to count.
    if s.len() <= max {
        return std::borrow::Cow::Borrowed(s);
    }
    match s.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(s),
        Some((at, _)) => {
            let rest = s[at..].chars().count();
            std::borrow::Cow::Owned(format!(
                "{}… [{} more characters]",
                &s[..at],
                thousands(rest as u64)
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(3_000_000), "3,000,000");
    }

    #[test]
    fn crlf_round_trip_keeps_conventions() {
        let original = "\u{feff}a\r\nb\r\n";
        let style = TextStyle::detect(original);
        assert!(style.bom && style.crlf && style.final_newline);
        let norm = style.normalize(original);
        assert_eq!(norm, "a\nb\n");
        assert_eq!(style.apply("a\nc"), "\u{feff}a\r\nc\r\n");
    }

    #[test]
    fn a_lone_carriage_return_before_crlf_survives_a_round_trip() {
        let original = "keep\r\r\nline2\r\nline3\r\n";
        let style = TextStyle::detect(original);
        assert!(style.crlf);
        assert_eq!(style.apply(&style.normalize(original)), original);
    }

    #[test]
    fn mixed_endings_are_not_crlf() {
        let style = TextStyle::detect("a\r\nb\nc");
        assert!(!style.crlf);
        assert!(!style.final_newline);
        assert_eq!(style.apply("x\ny\n"), "x\ny");
    }
}
