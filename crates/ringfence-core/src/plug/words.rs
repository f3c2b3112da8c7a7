//! Configuration errors in words a person uses: serde and TOML say `invalid type: string "7",
//! expected usize`; a person wants "must be a whole number, not the text "7" (write it
//! without quotes)".

/// The parse error `e` of a configuration file, its location and excerpt kept, its message
/// put in words.
pub fn toml_error(e: &toml::de::Error) -> String {
    let message = e.message();
    let words = in_words(message);
    let shown = e.to_string();
    match shown.rfind(message) {
        Some(at) => format!("{}{words}{}", &shown[..at], &shown[at + message.len()..])
            .trim_end()
            .to_owned(),
        None => words,
    }
}

/// One serde message in words; a message of another shape is kept as it is.
pub fn in_words(message: &str) -> String {
    if let Some(rest) = message
        .strip_prefix("invalid type: ")
        .or_else(|| message.strip_prefix("invalid value: "))
        && let Some((found, expected)) = rest.rsplit_once(", expected ")
    {
        let expected = expected_words(expected);
        let mut out = format!("must be {expected}, not {}", found_words(found));
        // Only where the quoted text is itself what the key takes: `"7"` for a number.
        let inner = found
            .strip_prefix("string ")
            .map(|s| s.trim_matches('"').trim());
        let unquoted_fits = inner.is_some_and(|t| {
            (expected.contains("number") && t.parse::<f64>().is_ok())
                || (expected == "true or false" && matches!(t, "true" | "false"))
        });
        if unquoted_fits {
            out.push_str(" (write it without quotes)");
        }
        return out;
    }
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (field, takes) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let takes = takes
            .strip_prefix("one of ")
            .unwrap_or(takes)
            .replace('`', "")
            .replace(" or ", ", ");
        return if takes.is_empty() || rest.ends_with("there are no fields") {
            format!("unknown key {field}; this table takes no keys")
        } else {
            format!("unknown key {field}; this table takes: {takes}")
        };
    }
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (value, takes) = rest.split_once(", expected ").unwrap_or((rest, ""));
        let takes = takes
            .strip_prefix("one of ")
            .unwrap_or(takes)
            .replace('`', "")
            .replace(" or ", ", ");
        return format!("{value} is not a choice here; use one of: {takes}");
    }
    if let Some(field) = message.strip_prefix("missing field ") {
        return format!("the key {field} is required here");
    }
    message.to_owned()
}

/// What a Rust type expects, as a person would say it.
fn expected_words(expected: &str) -> String {
    match expected.trim() {
        "usize" | "u64" | "u32" | "u16" | "u8" => "a whole number (0 or more)".into(),
        "isize" | "i64" | "i32" | "i16" | "i8" => "a whole number".into(),
        "f64" | "f32" => "a number".into(),
        "a boolean" => "true or false".into(),
        "a string" | "a character" => "text in quotes".into(),
        "a sequence" => "a list in [ ]".into(),
        "a map" => "a table".into(),
        other if other.starts_with("struct ") => "a table".into(),
        other if other.starts_with("a sequence") => "a list in [ ]".into(),
        other => other.into(),
    }
}

/// What serde found, as a person would say it.
fn found_words(found: &str) -> String {
    let found = found.trim();
    let quoted = |s: &str| s.trim_matches('`').to_owned();
    if let Some(s) = found.strip_prefix("string ") {
        format!("the text {s}")
    } else if let Some(n) = found
        .strip_prefix("integer ")
        .or_else(|| found.strip_prefix("floating point "))
    {
        format!("the number {}", quoted(n))
    } else if let Some(b) = found.strip_prefix("boolean ") {
        quoted(b)
    } else {
        match found {
            "sequence" => "a list".into(),
            "map" => "a table".into(),
            other => other.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // read by serde only
    struct Sample {
        lines: Option<usize>,
        offset: Option<i64>,
        weight: Option<f64>,
        on: Option<bool>,
        name: Option<String>,
        list: Option<Vec<String>>,
        mode: Option<Mode>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Mode {
        Fast,
        Slow,
    }

    fn words(toml_text: &str) -> String {
        toml_error(&toml::from_str::<Sample>(toml_text).unwrap_err())
    }

    #[test]
    fn type_errors_are_said_in_words_with_their_place() {
        let e = words("lines = \"7\"\n");
        assert!(
            e.contains(
                "must be a whole number (0 or more), not the text \"7\" (write it without quotes)"
            ),
            "{e}"
        );
        assert!(e.contains("line 1"), "{e}");
        assert!(!e.contains("usize"), "{e}");
        let e = words("weight = \"7\"\n");
        assert!(e.contains("must be a number, not the text \"7\""), "{e}");
        assert!(!e.contains("f64"), "{e}");
        let e = words("lines = -1\n");
        assert!(
            e.contains("must be a whole number (0 or more), not the number -1"),
            "{e}"
        );
        let e = words("lines = 1.5\n");
        assert!(e.contains("not the number 1.5"), "{e}");
        let e = words("on = \"yes\"\n");
        assert!(
            e.contains("must be true or false, not the text \"yes\""),
            "{e}"
        );
        assert!(
            !e.contains("without quotes"),
            "`yes` unquoted is no boolean: {e}"
        );
        let e = words("on = \"true\"\n");
        assert!(e.contains("(write it without quotes)"), "{e}");
        let e = words("lines = \"seven\"\n");
        assert!(!e.contains("without quotes"), "{e}");
        let e = words("name = 3\n");
        assert!(
            e.contains("must be text in quotes, not the number 3"),
            "{e}"
        );
        let e = words("list = \"a\"\n");
        assert!(
            e.contains("must be a list in [ ], not the text \"a\""),
            "{e}"
        );
        assert!(!e.contains("without quotes"), "{e}");
        let e = words("offset = true\n");
        assert!(e.contains("must be a whole number, not true"), "{e}");
    }

    #[test]
    fn unknown_keys_and_choices_name_what_is_taken() {
        let e = words("lnes = 3\n");
        assert!(
            e.contains("unknown key `lnes`; this table takes: lines, offset"),
            "{e}"
        );
        let e = words("mode = \"quick\"\n");
        assert!(
            e.contains("`quick` is not a choice here; use one of: fast, slow"),
            "{e}"
        );
    }

    #[test]
    fn other_messages_are_kept() {
        assert_eq!(in_words("something else"), "something else");
        let e = words("lines = \n");
        assert!(e.contains("line 1"), "{e}");
    }
}
