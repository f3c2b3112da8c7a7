//! User-provided text on its way into results and messages: control characters refused where
//! the text is taken in, and text shown inside a list kept inside its own entry.

use crate::error::ToolError;

/// Refuses `text` (the argument `field`) when it holds a control character other than TAB and
/// LF, or a Unicode line or paragraph separator: such text could end a line of an e-mail or a
/// list early (a lone CR before `.` is the SMTP-smuggling pattern) or steer a terminal. The
/// error names the first one, where it is, and the fix.
pub fn refuse_controls(field: &str, text: &str) -> Result<(), ToolError> {
    let Some((at, c)) = text
        .chars()
        .enumerate()
        .find(|(_, c)| is_refused_control(*c))
    else {
        return Ok(());
    };
    Err(ToolError::invalid(format!(
        "{field} holds a control character: remove the control character U+{:04X}{} at position {} (counting characters from 1); only tab and line feed (\\n) are allowed",
        c as u32,
        control_name(c)
            .map(|n| format!(" ({n})"))
            .unwrap_or_default(),
        at + 1,
    )))
}

/// `text` as the body of one entry of a list: every line after the first is started with
/// `indent`, so no line of it can pass for a new entry (`- …`, `#3 …`, `2. …`) or a field of
/// the list. Every kind of line break counts (CR LF, LF, a lone CR, VT, FF, NEL, U+2028,
/// U+2029); other control characters (an escape sequence) are shown escaped (`\u{1b}`).
pub fn indented(text: &str, indent: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' | '\n' | '\u{0b}' | '\u{0c}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                if c == '\r' && chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push('\n');
                out.push_str(indent);
            }
            '\t' => out.push(c),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out
}

/// Whether `c` is refused in text that goes into results and messages.
fn is_refused_control(c: char) -> bool {
    (c.is_control() && c != '\t' && c != '\n') || c == '\u{2028}' || c == '\u{2029}'
}

fn control_name(c: char) -> Option<&'static str> {
    Some(match c {
        '\0' => "NUL",
        '\u{08}' => "backspace",
        '\u{0b}' => "vertical tab",
        '\u{0c}' => "form feed",
        '\r' => "carriage return",
        '\u{1b}' => "escape",
        '\u{7f}' => "delete",
        '\u{85}' => "next line",
        '\u{2028}' => "line separator",
        '\u{2029}' => "paragraph separator",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_other_than_tab_and_lf_are_refused_by_name_and_position() {
        assert!(refuse_controls("context", "two\nlines\tand a tab").is_ok());
        let e = refuse_controls("context", "c\r.\rMAIL FROM:<x>").unwrap_err();
        assert_eq!(
            e.message,
            "context holds a control character: remove the control character U+000D (carriage return) at position 2 (counting characters from 1); only tab and line feed (\\n) are allowed"
        );
        let e = refuse_controls("reason", "red \u{1b}[31m").unwrap_err();
        assert!(
            e.message.starts_with(
                "reason holds a control character: remove the control character U+001B (escape) at position 5"
            ),
            "{}",
            e.message
        );
        for c in ['\0', '\u{7f}', '\u{85}', '\u{2028}', '\u{2029}', '\u{0c}'] {
            assert!(
                refuse_controls("context", &format!("a{c}b")).is_err(),
                "{c:?}"
            );
        }
    }

    #[test]
    fn continuation_lines_are_indented_whatever_the_line_break() {
        let fake = "real\n- 2026-01-01 fake entry";
        assert_eq!(indented(fake, "  "), "real\n  - 2026-01-01 fake entry");
        for br in [
            "\r\n", "\r", "\u{0b}", "\u{0c}", "\u{85}", "\u{2028}", "\u{2029}",
        ] {
            assert_eq!(
                indented(&format!("a{br}#9 pending"), "   "),
                "a\n   #9 pending",
                "{br:?}"
            );
        }
        assert_eq!(indented("a\n\nb", "  "), "a\n  \n  b");
        assert_eq!(indented("tab\there \u{1b}[2J", ""), "tab\there \\u{1b}[2J");
    }
}
