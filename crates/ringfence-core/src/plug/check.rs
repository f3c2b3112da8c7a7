//! What a family finds about its own setup: the start banner and `ringfence doctor` show
//! these. Local checks only (files, modes, settings); nothing here reaches a network.

use std::fmt;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Works as configured.
    Ok,
    /// Works, with less than it could (a fallback, an optional piece missing).
    Note,
    /// Something configured does not work.
    Problem,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Ok => "ok",
            Outcome::Note => "note",
            Outcome::Problem => "problem",
        })
    }
}

/// One finding: what was checked, how it came out, what was found, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Check {
    pub subject: String,
    pub outcome: Outcome,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    pub fn ok(subject: impl Into<String>, detail: impl Into<String>) -> Check {
        Check {
            subject: subject.into(),
            outcome: Outcome::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    pub fn note(
        subject: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            subject: subject.into(),
            outcome: Outcome::Note,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    pub fn problem(
        subject: impl Into<String>,
        detail: impl Into<String>,
        fix: impl Into<String>,
    ) -> Check {
        Check {
            subject: subject.into(),
            outcome: Outcome::Problem,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// A tool call that shows whether a family works as configured, made by `ringfence doctor`
/// through the runner like any call (a search provider answering, a calendar server taking
/// the login, the shell's sandbox on this kernel). It must change nothing.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeCall {
    /// What is checked (`web search through brave`).
    pub subject: String,
    pub tool: &'static str,
    pub args: serde_json::Value,
    /// The line of the tool's text that says what was found (`Sandbox: `), if one does.
    pub line: Option<&'static str>,
}

/// What a family's [`probe`](super::FamilyPlug::probe) may use.
#[derive(Debug)]
pub struct ProbeEnv<'a> {
    pub data_dir: &'a std::path::Path,
}
