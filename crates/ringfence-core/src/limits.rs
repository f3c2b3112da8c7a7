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
    /// Mebibytes each user's saved outputs (spill files of every tool) may take on disk
    /// together (default 1,024, at most 1,048,576 = 1 TiB): a new one makes room by deleting
    /// that user's oldest first, and one larger than the whole quota is cut at it (its notice
    /// says so).
    pub spill_quota_mb: u64,
    /// Results search_entries returns when the call gives no `max_results` (seed 002's
    /// `maxSearchResults`, default 50).
    pub max_search_results: usize,
    /// Above this many results search_entries shows a count summary instead of paths (seed
    /// 002's `maxDisplayEntries`, default 200); the full list is saved to a spill file.
    pub max_display_entries: usize,
    /// The most results one search_entries call may ask for (seed 002's `maxTotalEntries`,
    /// default 5,000); a larger `max_results` is an error.
    pub max_total_entries: usize,
    /// search_entries stops after this many milliseconds and returns what it found (seed
    /// 002's `timeoutMs`, default 10,000).
    pub search_timeout_ms: u64,
    /// Characters per file read_file returns in the `paths` form when no `max_chars` is
    /// given (seed 002's `maxCharsPerFile`, default 10,000).
    pub max_chars_per_file: usize,
    /// Largest file the `paths` form of read_file reads without a line range, and the cap on
    /// search_entries' `max_size` (seed 002's `maxFileSize`, default 10 MiB).
    pub max_file_size: u64,
    /// Overwriting or editing an existing file requires a read_file of it first, unchanged
    /// since (default true; seed 002's `requireReadBeforeWrite`).
    pub require_read_before_write: bool,
    /// Entries list_directory and directory_tree show before cutting (default 1,000); the
    /// full listing is saved to a spill file.
    pub max_list_entries: usize,
    /// Largest image or audio file returned as media content (default 5 MiB). Larger images
    /// are downscaled to fit when ringfence is built with image support; anything else
    /// larger is refused.
    pub max_media_bytes: u64,
    /// Images wider or taller than this are downscaled to fit (default 1,568 pixels, what
    /// vision models use at most; 0 keeps the original size when it fits max_media_bytes).
    pub max_image_dimension: u32,
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
            spill_quota_mb: 1024,
            max_search_results: 50,
            max_display_entries: 200,
            max_total_entries: 5000,
            search_timeout_ms: 10_000,
            max_chars_per_file: 10_000,
            max_file_size: 10 * 1024 * 1024,
            require_read_before_write: true,
            max_list_entries: 1000,
            max_media_bytes: 5 * 1024 * 1024,
            max_image_dimension: 1568,
        }
    }
}

/// The largest `spill_quota_mb` accepted: 1 TiB.
pub const MAX_SPILL_QUOTA_MB: u64 = 1 << 20;

impl Limits {
    /// Each user's quota of saved output, in bytes.
    pub fn spill_quota_bytes(&self) -> u64 {
        self.spill_quota_mb.saturating_mul(1 << 20)
    }

    /// Rejects zero caps (a cap of zero would hide everything) and a quota of saved output
    /// beyond [`MAX_SPILL_QUOTA_MB`].
    pub fn validate(&self) -> Result<(), LimitsError> {
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
            ("spill_quota_mb", self.spill_quota_mb),
            ("max_search_results", self.max_search_results as u64),
            ("max_display_entries", self.max_display_entries as u64),
            ("max_total_entries", self.max_total_entries as u64),
            ("search_timeout_ms", self.search_timeout_ms),
            ("max_chars_per_file", self.max_chars_per_file as u64),
            ("max_file_size", self.max_file_size),
            ("max_list_entries", self.max_list_entries as u64),
            ("max_media_bytes", self.max_media_bytes),
        ];
        for (key, value) in checks {
            if value == 0 {
                return Err(LimitsError::Zero(key));
            }
        }
        if self.spill_quota_mb > MAX_SPILL_QUOTA_MB {
            return Err(LimitsError::SpillQuota(self.spill_quota_mb));
        }
        if self.max_search_results > self.max_total_entries {
            return Err(LimitsError::SearchAboveTotal {
                search: self.max_search_results,
                total: self.max_total_entries,
            });
        }
        Ok(())
    }
}

/// A `[limits]` setting that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    #[error("limits.{0} must be greater than 0")]
    Zero(&'static str),
    #[error(
        "limits.spill_quota_mb = {0} is more than {MAX_SPILL_QUOTA_MB} (1 TiB); give each user's quota of saved output in mebibytes, e.g. 1024"
    )]
    SpillQuota(u64),
    #[error(
        "limits.max_search_results ({search}) must not exceed limits.max_total_entries ({total})"
    )]
    SearchAboveTotal { search: usize, total: usize },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spill_quota_defaults_to_a_gib_and_is_checked() {
        let mut limits = Limits::default();
        assert_eq!(limits.spill_quota_bytes(), 1 << 30);
        limits.spill_quota_mb = 0;
        assert_eq!(limits.validate(), Err(LimitsError::Zero("spill_quota_mb")));
        limits.spill_quota_mb = MAX_SPILL_QUOTA_MB + 1;
        let e = limits.validate().unwrap_err().to_string();
        assert!(
            e.starts_with("limits.spill_quota_mb = 1048577 is more than 1048576 (1 TiB)"),
            "{e}"
        );
        limits.spill_quota_mb = MAX_SPILL_QUOTA_MB;
        assert_eq!(limits.validate(), Ok(()));
    }
}
