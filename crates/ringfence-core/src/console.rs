//! What a family's own command-line commands (`ringfence memory …`, `ringfence followups …`)
//! are given by the binary: where their output, notes and files go. The family writes the
//! command; the binary only routes to it.

use std::path::Path;

/// Why a command stopped: said after `ringfence: `, exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CommandError(pub String);

impl From<String> for CommandError {
    fn from(s: String) -> CommandError {
        CommandError(s)
    }
}

impl From<&str> for CommandError {
    fn from(s: &str) -> CommandError {
        CommandError(s.to_owned())
    }
}

/// How a command that did its work ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    Done,
    /// Some of it was refused (said in the notes): exit status 1.
    Partly,
}

/// The terminal a command talks to.
pub trait Console {
    /// The command's result, on stdout.
    fn out(&mut self, text: &str);
    /// Progress and notes for the person, on stderr.
    fn note(&mut self, line: &str);
    /// Whether stdout is a terminal (a table for a person) or not (JSON lines for a program).
    fn is_terminal(&self) -> bool;
    /// The text of `file`, or of stdin for `-`.
    fn read_input(&mut self, file: &Path) -> Result<String, CommandError>;
    /// Writes `text` whole to `output` (readable by the owner only), or to stdout.
    fn write_output(&mut self, text: &str, output: Option<&Path>) -> Result<(), CommandError>;
}

/// `rows` as JSON lines (one object a line), for an export.
pub fn json_lines<T: serde::Serialize>(rows: &[T]) -> Result<String, CommandError> {
    let mut text = String::new();
    for r in rows {
        text.push_str(&serde_json::to_string(r).map_err(|e| CommandError(e.to_string()))?);
        text.push('\n');
    }
    Ok(text)
}
