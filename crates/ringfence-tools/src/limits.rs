//! Output caps. Defaults follow seed 000.

use serde::{Deserialize, Serialize};

/// Caps on what a call returns to the model. Whatever a cap cuts is saved to a spill file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Lines read_file sends to the model (default 500).
    pub max_read_lines: usize,
    /// Characters read_file sends to the model (default 30,000).
    pub max_read_chars: usize,
    /// Largest file read_file reads without offset/limit (default 1 MiB).
    pub max_read_bytes: u64,
    /// Lines read_file covers when no limit is given (default 2,000).
    pub default_read_limit: usize,
    /// Matches grep sends to the model (default 100).
    pub max_grep_matches: usize,
    /// Paths glob sends to the model (default 100).
    pub max_glob_results: usize,
    /// Characters of one matching line grep shows before cutting it (default 500).
    pub max_grep_line_chars: usize,
    /// Largest file edit_file and write_file rewrite (default 256 MiB).
    pub max_edit_bytes: u64,
    /// Days a spill file (saved full output) is kept; older ones are deleted at start-up
    /// (default 7).
    pub spill_retention_days: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_read_lines: 500,
            max_read_chars: 30_000,
            max_read_bytes: 1_048_576,
            default_read_limit: 2000,
            max_grep_matches: 100,
            max_glob_results: 100,
            max_grep_line_chars: 500,
            max_edit_bytes: 256 * 1024 * 1024,
            spill_retention_days: 7,
        }
    }
}

impl Limits {
    /// Rejects zero caps (a cap of zero would hide everything).
    pub fn validate(&self) -> Result<(), String> {
        let checks = [
            ("max_read_lines", self.max_read_lines as u64),
            ("max_read_chars", self.max_read_chars as u64),
            ("max_read_bytes", self.max_read_bytes),
            ("default_read_limit", self.default_read_limit as u64),
            ("max_grep_matches", self.max_grep_matches as u64),
            ("max_glob_results", self.max_glob_results as u64),
            ("max_grep_line_chars", self.max_grep_line_chars as u64),
            ("max_edit_bytes", self.max_edit_bytes),
            ("spill_retention_days", self.spill_retention_days),
        ];
        for (key, value) in checks {
            if value == 0 {
                return Err(format!("limits.{key} must be greater than 0"));
            }
        }
        Ok(())
    }
}
