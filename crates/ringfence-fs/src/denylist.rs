//! The denylist: gitignore-syntax patterns matched against root-relative paths after
//! resolution, applied to reads, writes, listings and search results alike.

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// Compiled denylist patterns.
#[derive(Debug, Clone)]
pub struct Denylist {
    matcher: Option<Gitignore>,
    patterns: Vec<String>,
}

impl Default for Denylist {
    fn default() -> Self {
        Denylist::empty()
    }
}

impl Denylist {
    pub fn empty() -> Denylist {
        Denylist {
            matcher: None,
            patterns: Vec::new(),
        }
    }

    /// Compiles the patterns; an invalid pattern is an error naming it (config fails closed).
    pub fn new<I, S>(patterns: I) -> Result<Denylist, String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut builder = GitignoreBuilder::new("");
        let mut kept = Vec::new();
        for pattern in patterns {
            let pattern = pattern.as_ref().trim();
            if pattern.is_empty() {
                continue;
            }
            if pattern.starts_with('!') {
                return Err(format!(
                    "denylist pattern `{pattern}`: negation is not allowed in a denylist; \
                     list only what must be blocked"
                ));
            }
            builder
                .add_line(None, pattern)
                .map_err(|e| format!("denylist pattern `{pattern}` is invalid: {e}"))?;
            kept.push(pattern.to_owned());
        }
        if kept.is_empty() {
            return Ok(Denylist::empty());
        }
        let matcher = builder
            .build()
            .map_err(|e| format!("denylist could not be compiled: {e}"))?;
        Ok(Denylist {
            matcher: Some(matcher),
            patterns: kept,
        })
    }

    pub fn patterns(&self) -> &[String] {
        &self.patterns
    }

    pub fn is_empty(&self) -> bool {
        self.matcher.is_none()
    }

    /// Whether `rel` (root-relative, `/`-separated, empty for the root) or any of its parent
    /// directories is denied.
    pub fn is_denied(&self, rel: &str, is_dir: bool) -> bool {
        let Some(m) = &self.matcher else {
            return false;
        };
        if rel.is_empty() {
            return false;
        }
        matches!(m.matched_path_or_any_parents(rel, is_dir), Match::Ignore(_))
    }

    /// Whether `rel` itself is denied (for walks, where the parents were already checked).
    pub fn is_denied_entry(&self, rel: &str, is_dir: bool) -> bool {
        match &self.matcher {
            Some(m) => matches!(m.matched(rel, is_dir), Match::Ignore(_)),
            None => false,
        }
    }
}
