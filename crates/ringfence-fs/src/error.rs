//! Errors of the containment layer.
//!
//! Every [`FsError`] carries the path *as the caller typed it* (never a root's absolute
//! path), a kind a tool can map to a model-facing error, and a sentence that says what went
//! wrong.
//!
//! Configuration is refused with errors of its own ([`DenylistError`], [`RootSpecError`],
//! [`ClientRootsError`]): their messages name what the operator wrote.

use std::io;

/// What went wrong, in terms a caller can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FsErrorKind {
    /// The path string itself is unusable: empty, contains NUL, too long, malformed.
    InvalidPath,
    /// The path resolves (lexically or through a symlink) outside every configured root.
    OutsideRoot,
    /// The path is inside a root but matches the denylist.
    Denied,
    /// Nothing exists at the path (or a parent directory is missing on a read).
    NotFound,
    /// A directory was needed and something else was found.
    NotADirectory,
    /// A file was needed and a directory was found.
    IsADirectory,
    /// Not a regular file (device, socket, FIFO): refused.
    NotAFile,
    /// The root that holds the path is read-only.
    ReadOnly,
    /// The configured root does not exist (it is never created on the user's behalf).
    RootMissing,
    /// Too many levels of symbolic links.
    SymlinkLoop,
    /// The target already exists where a fresh entry was required.
    AlreadyExists,
    /// A directory that must be empty is not.
    NotEmpty,
    /// The operation makes no sense for this entry (deleting a root, moving a directory
    /// into itself).
    Refused,
    /// Stopped on request (the caller cancelled).
    Interrupted,
    /// The operating system refused the operation (permissions).
    PermissionDenied,
    /// Another I/O failure.
    Io,
}

/// An error of the containment layer: kind, the path as given, and a reason.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct FsError {
    kind: FsErrorKind,
    input: String,
    message: String,
    #[source]
    source: Option<io::Error>,
}

impl FsError {
    pub fn new(kind: FsErrorKind, input: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            kind,
            input: input.into(),
            message: message.into(),
            source: None,
        }
    }

    /// Maps an `io::Error` raised while operating on `input` (as the caller typed it).
    pub fn from_io(input: &str, err: io::Error) -> Self {
        let kind = match err.kind() {
            io::ErrorKind::NotFound => FsErrorKind::NotFound,
            io::ErrorKind::AlreadyExists => FsErrorKind::AlreadyExists,
            io::ErrorKind::NotADirectory => FsErrorKind::NotADirectory,
            io::ErrorKind::IsADirectory => FsErrorKind::IsADirectory,
            io::ErrorKind::PermissionDenied => FsErrorKind::PermissionDenied,
            io::ErrorKind::InvalidFilename => FsErrorKind::InvalidPath,
            io::ErrorKind::ReadOnlyFilesystem => FsErrorKind::ReadOnly,
            io::ErrorKind::DirectoryNotEmpty => FsErrorKind::NotEmpty,
            _ if crate::os_error::OsError::Loop.is(&err) => FsErrorKind::SymlinkLoop,
            _ if crate::os_error::OsError::NameTooLong.is(&err) => FsErrorKind::InvalidPath,
            _ => FsErrorKind::Io,
        };
        let message = match kind {
            FsErrorKind::NotFound => format!("{input}: no such file or directory"),
            FsErrorKind::AlreadyExists => format!("{input}: already exists"),
            FsErrorKind::NotADirectory => {
                format!("{input}: a component of the path is not a directory")
            }
            FsErrorKind::IsADirectory => format!("{input}: is a directory"),
            FsErrorKind::PermissionDenied => {
                format!("{input}: permission denied by the operating system")
            }
            FsErrorKind::InvalidPath => format!("{input}: file name too long or invalid"),
            FsErrorKind::SymlinkLoop => format!("{input}: too many levels of symbolic links"),
            FsErrorKind::ReadOnly => format!("{input}: the file system is read-only"),
            FsErrorKind::NotEmpty => format!("{input}: the directory is not empty"),
            _ => format!("{input}: {}", strip_os_suffix(&err)),
        };
        Self {
            kind,
            input: input.to_owned(),
            message,
            source: Some(err),
        }
    }

    pub fn kind(&self) -> FsErrorKind {
        self.kind
    }

    /// The path as the caller gave it.
    pub fn input(&self) -> &str {
        &self.input
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

/// `io::Error`'s display appends "(os error N)"; keep only the human part.
fn strip_os_suffix(err: &io::Error) -> String {
    let text = err.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

pub type FsResult<T> = Result<T, FsError>;

/// Why a denylist could not be built ([`crate::Denylist::new`]): configuration fails closed.
#[derive(Debug, thiserror::Error)]
pub enum DenylistError {
    /// A `!pattern`: re-including what another pattern blocks is not allowed.
    #[error(
        "denylist pattern `{pattern}`: negation is not allowed in a denylist; list only what \
         must be blocked"
    )]
    Negation { pattern: String },
    /// The pattern is not valid gitignore syntax.
    #[error("denylist pattern `{pattern}` is invalid: {source}")]
    InvalidPattern {
        pattern: String,
        #[source]
        source: ignore::Error,
    },
    /// The patterns, each valid, could not be compiled together.
    #[error("denylist could not be compiled: {source}")]
    Compile {
        #[source]
        source: ignore::Error,
    },
}

/// Why a `PATH[:ro|:rw]` root argument was refused ([`crate::RootSpec::parse_cli`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RootSpecError {
    #[error("empty root path")]
    Empty,
    /// Only an access suffix (`:ro`, `:rw`) was given.
    #[error("root `{spec}` has no path before the access suffix")]
    NoPath { spec: String },
    #[error("root path contains a NUL byte")]
    Nul,
}

/// Why a client-roots policy was refused ([`crate::ClientRoots::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientRootsError {
    /// Not one of `narrow`, `ignore`, `extend`, `extend-write`.
    #[error(
        "`{value}` is not a client-roots policy; use narrow (default), ignore, extend or extend-write"
    )]
    Unknown { value: String },
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::{ClientRootsError, DenylistError, RootSpecError};
    use crate::{Access, ClientRoots, Denylist, RootSpec};

    /// The configuration errors keep the sentences other crates print (and tests match), and
    /// an invalid pattern keeps the parser's error as its source.
    #[test]
    fn configuration_errors_keep_their_messages() {
        let negated = Denylist::new(["*.log", "!keep.log"]).unwrap_err();
        assert_eq!(
            negated.to_string(),
            "denylist pattern `!keep.log`: negation is not allowed in a denylist; list only \
             what must be blocked"
        );
        let invalid = Denylist::new(["[z-a]"]).unwrap_err();
        assert_eq!(
            invalid.to_string(),
            "denylist pattern `[z-a]` is invalid: error parsing glob '[z-a]': invalid range; \
             'z' > 'a'"
        );
        assert!(
            matches!(&invalid, DenylistError::InvalidPattern { pattern, .. } if pattern == "[z-a]")
        );
        assert_eq!(
            invalid.source().map(|e| e.to_string()).as_deref(),
            Some("error parsing glob '[z-a]': invalid range; 'z' > 'a'")
        );
        assert!(matches!(&negated, DenylistError::Negation { pattern } if pattern == "!keep.log"));
        assert!(negated.source().is_none());

        assert_eq!(
            RootSpec::parse_cli("").unwrap_err().to_string(),
            "empty root path"
        );
        assert_eq!(
            RootSpec::parse_cli(":ro").unwrap_err().to_string(),
            "root `:ro` has no path before the access suffix"
        );
        assert_eq!(
            RootSpec::parse_cli("a\0b:rw").unwrap_err().to_string(),
            "root path contains a NUL byte"
        );
        assert_eq!(
            RootSpec::parse_cli(":rw").unwrap_err(),
            RootSpecError::NoPath { spec: ":rw".into() }
        );
        assert_eq!(
            RootSpec::parse_cli("/w:ro").unwrap().access,
            Access::ReadOnly
        );

        assert_eq!(
            ClientRoots::parse("wide").unwrap_err().to_string(),
            "`wide` is not a client-roots policy; use narrow (default), ignore, extend or extend-write"
        );
        assert_eq!(
            ClientRoots::parse("wide").unwrap_err(),
            ClientRootsError::Unknown {
                value: "wide".into()
            }
        );
        assert_eq!(ClientRoots::parse("extend").unwrap(), ClientRoots::Extend);
        assert_eq!(
            ClientRoots::parse("extend-write").unwrap(),
            ClientRoots::ExtendWrite
        );
    }
}
