//! Tool failures the model can act on.
//!
//! Every variant here becomes a tool result with `isError: true` and a message that says how
//! to fix the call. Protocol-level failures (unknown tool, malformed request) are the
//! transport's business, not this type's.

use ringfence_fs::{FsError, FsErrorKind};

/// The kind of a tool failure: what the model should do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// An argument is missing, of the wrong type, out of range or contradictory.
    InvalidArgument,
    /// The file or directory does not exist.
    NotFound,
    /// The path leads outside every allowed root.
    OutsideWorkspace,
    /// The path is inside but blocked by the denylist.
    Denied,
    /// The root is read-only.
    ReadOnly,
    /// The configured root does not exist.
    RootMissing,
    /// Overwrite or edit of a file that was not read in this session.
    NotReadFirst,
    /// The file changed since it was last read.
    Stale,
    /// `old_string` occurs more than once and `replace_all` is false.
    AmbiguousMatch,
    /// `old_string` does not occur.
    NoMatch,
    /// The file is larger than the limit for this call.
    TooLarge,
    /// The file is binary or not UTF-8.
    Binary,
    /// A directory where a file was needed, or the reverse.
    WrongType,
    /// The call was cancelled by the client.
    Cancelled,
    /// The tool is disabled in this configuration.
    Disabled,
    /// The destination already exists and overwriting was not asked for.
    AlreadyExists,
    /// A directory is not empty and `recursive` was not given.
    NotEmpty,
    /// The file changed since ringfence wrote it, so an undo would lose someone's work.
    Conflict,
    /// The new text cannot be written in the file's encoding without loss.
    Encoding,
    /// The operation is not possible on this entry (deleting a root, moving into itself).
    Refused,
    /// The call ran longer than the server allows and was stopped.
    Timeout,
    /// A service the tool needs (its database, an embedding endpoint) is not available.
    Unavailable,
    /// The operating system refused or failed.
    Io,
}

impl ToolErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorKind::InvalidArgument => "invalid_argument",
            ToolErrorKind::NotFound => "not_found",
            ToolErrorKind::OutsideWorkspace => "outside_workspace",
            ToolErrorKind::Denied => "denied",
            ToolErrorKind::ReadOnly => "read_only",
            ToolErrorKind::RootMissing => "root_missing",
            ToolErrorKind::NotReadFirst => "not_read_first",
            ToolErrorKind::Stale => "stale",
            ToolErrorKind::AmbiguousMatch => "ambiguous_match",
            ToolErrorKind::NoMatch => "no_match",
            ToolErrorKind::TooLarge => "too_large",
            ToolErrorKind::Binary => "binary",
            ToolErrorKind::WrongType => "wrong_type",
            ToolErrorKind::Cancelled => "cancelled",
            ToolErrorKind::Disabled => "disabled",
            ToolErrorKind::AlreadyExists => "already_exists",
            ToolErrorKind::NotEmpty => "not_empty",
            ToolErrorKind::Conflict => "conflict",
            ToolErrorKind::Encoding => "encoding",
            ToolErrorKind::Refused => "refused",
            ToolErrorKind::Timeout => "timeout",
            ToolErrorKind::Unavailable => "unavailable",
            ToolErrorKind::Io => "io",
        }
    }
}

/// A failure reported back to the model as a tool result.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    pub kind: ToolErrorKind,
    pub message: String,
}

impl ToolError {
    pub fn new(kind: ToolErrorKind, message: impl Into<String>) -> ToolError {
        ToolError {
            kind,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> ToolError {
        ToolError::new(ToolErrorKind::InvalidArgument, message)
    }

    pub fn cancelled() -> ToolError {
        ToolError::new(ToolErrorKind::Cancelled, "the call was cancelled")
    }
}

impl From<FsError> for ToolError {
    fn from(err: FsError) -> ToolError {
        let kind = match err.kind() {
            FsErrorKind::InvalidPath => ToolErrorKind::InvalidArgument,
            FsErrorKind::OutsideRoot => ToolErrorKind::OutsideWorkspace,
            FsErrorKind::Denied => ToolErrorKind::Denied,
            FsErrorKind::NotFound => ToolErrorKind::NotFound,
            FsErrorKind::NotADirectory | FsErrorKind::IsADirectory | FsErrorKind::NotAFile => {
                ToolErrorKind::WrongType
            }
            FsErrorKind::ReadOnly => ToolErrorKind::ReadOnly,
            FsErrorKind::RootMissing => ToolErrorKind::RootMissing,
            FsErrorKind::SymlinkLoop => ToolErrorKind::InvalidArgument,
            FsErrorKind::AlreadyExists => ToolErrorKind::AlreadyExists,
            FsErrorKind::NotEmpty => ToolErrorKind::NotEmpty,
            FsErrorKind::Refused => ToolErrorKind::Refused,
            FsErrorKind::Interrupted => ToolErrorKind::Cancelled,
            FsErrorKind::PermissionDenied | FsErrorKind::Io => ToolErrorKind::Io,
        };
        ToolError::new(kind, err.message().to_owned())
    }
}

pub type ToolResult<T> = Result<T, ToolError>;

/// A failure of a service a family depends on (its database, an embedding endpoint, an
/// outbound client), with the cause kept as its source. Its text is the cause's.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct BackendError(Box<dyn std::error::Error + Send + Sync + 'static>);

impl BackendError {
    /// Wraps an error (or, for a failure with no underlying error, a message).
    pub fn new(cause: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        BackendError(cause.into())
    }
}

/// A remote service's failure, as the tool reports it.
impl From<ringfence_net::WebError> for ToolError {
    fn from(e: ringfence_net::WebError) -> ToolError {
        use ringfence_net::WebErrorKind;
        let kind = match e.kind {
            WebErrorKind::Invalid => ToolErrorKind::InvalidArgument,
            WebErrorKind::Refused => ToolErrorKind::Refused,
            WebErrorKind::Unsupported => ToolErrorKind::WrongType,
            WebErrorKind::Timeout => ToolErrorKind::Timeout,
            WebErrorKind::Upstream => ToolErrorKind::Unavailable,
            WebErrorKind::NotConfigured => ToolErrorKind::Disabled,
        };
        ToolError::new(kind, e.message)
    }
}
