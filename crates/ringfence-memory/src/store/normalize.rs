//! Text as the memory database compares it: the normalised form and its hash (what "the
//! same text" means), the numbers a text states (what tells "runs 5k" from "runs 10k"),
//! and the text a row is embedded from.

/// The text embedded for a row: its content, and its tags (words the user chose to
/// describe it, which often name the topic in other words than the content).
pub(crate) fn embedding_text(content: &str, tags: &[String]) -> String {
    if tags.is_empty() {
        content.to_owned()
    } else {
        format!("{content} ({})", tags.join(", "))
    }
}

/// Lower case, single spaces, no closing punctuation: "The same text" for duplicates.
fn normalized(text: &str) -> String {
    let lower = text.to_lowercase();
    let words: Vec<&str> = lower.split_whitespace().collect();
    words
        .join(" ")
        .trim_end_matches(['.', '!', '?', ';', ','])
        .trim()
        .to_owned()
}

/// The BLAKE3 of the normalised text: the `norm_hash` column, unique per user and kind.
pub(crate) fn norm_hash(text: &str) -> Vec<u8> {
    blake3::hash(normalized(text).as_bytes())
        .as_bytes()
        .to_vec()
}

/// The numbers a text states, in order ("5k" → "5", "6:30" → "6", "30").
pub(super) fn numbers_in(text: &str) -> Vec<&str> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .collect()
}
