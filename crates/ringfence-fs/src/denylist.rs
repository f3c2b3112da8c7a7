//! The denylist: gitignore-syntax patterns matched against root-relative paths after
//! resolution, applied to reads, writes, listings and search results alike.

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use crate::error::DenylistError;

/// Compiled denylist patterns.
#[derive(Debug, Clone)]
pub struct Denylist {
    matcher: Option<Gitignore>,
    patterns: Vec<String>,
    /// For a root that is a directory inside the root the patterns were written for: that
    /// directory's path there, prepended before matching (empty otherwise).
    base: String,
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
            base: String::new(),
        }
    }

    /// Compiles the patterns; an invalid pattern is an error naming it (config fails closed).
    pub fn new<I, S>(patterns: I) -> Result<Denylist, DenylistError>
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
                return Err(DenylistError::Negation {
                    pattern: pattern.to_owned(),
                });
            }
            builder
                .add_line(None, pattern)
                .map_err(|source| DenylistError::InvalidPattern {
                    pattern: pattern.to_owned(),
                    source,
                })?;
            kept.push(pattern.to_owned());
        }
        if kept.is_empty() {
            return Ok(Denylist::empty());
        }
        let matcher = builder
            .build()
            .map_err(|source| DenylistError::Compile { source })?;
        Ok(Denylist {
            matcher: Some(matcher),
            patterns: kept,
            base: String::new(),
        })
    }

    /// The same rules for a root at `dir` (relative to this list's root): paths below it are
    /// matched as `dir/path`.
    pub fn rebased(&self, dir: &str) -> Denylist {
        let mut out = self.clone();
        if !dir.is_empty() {
            out.base = if self.base.is_empty() {
                dir.to_owned()
            } else {
                format!("{}/{dir}", self.base)
            };
        }
        out
    }

    fn full<'a>(&self, rel: &'a str) -> std::borrow::Cow<'a, str> {
        if self.base.is_empty() {
            std::borrow::Cow::Borrowed(rel)
        } else if rel.is_empty() {
            std::borrow::Cow::Owned(self.base.clone())
        } else {
            std::borrow::Cow::Owned(format!("{}/{rel}", self.base))
        }
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
        let rel = self.full(rel);
        matches!(
            m.matched_path_or_any_parents(rel.as_ref(), is_dir),
            Match::Ignore(_)
        )
    }

    /// Whether `rel` itself is denied (for walks, where the parents were already checked).
    pub fn is_denied_entry(&self, rel: &str, is_dir: bool) -> bool {
        match &self.matcher {
            Some(m) => matches!(m.matched(self.full(rel).as_ref(), is_dir), Match::Ignore(_)),
            None => false,
        }
    }
}
