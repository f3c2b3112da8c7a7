//! The operating system's errors the containment tells apart, by their `raw_os_error`
//! numbers: errno on Unix, the nearest Windows system error codes on Windows (which the
//! Linux test suite does not exercise: see the README's platform table).

use std::io;

/// An error the containment reacts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OsError {
    /// Too many symbolic links, or a link met where none may be followed (`ELOOP`).
    Loop,
    NotDir,
    IsDir,
    NotEmpty,
    Exists,
    /// Across file systems (`EXDEV`).
    CrossDevice,
    Invalid,
    NotFound,
    NameTooLong,
}

impl OsError {
    #[cfg(unix)]
    fn codes(self) -> [i32; 1] {
        use rustix::io::Errno;
        [match self {
            OsError::Loop => Errno::LOOP,
            OsError::NotDir => Errno::NOTDIR,
            OsError::IsDir => Errno::ISDIR,
            OsError::NotEmpty => Errno::NOTEMPTY,
            OsError::Exists => Errno::EXIST,
            OsError::CrossDevice => Errno::XDEV,
            OsError::Invalid => Errno::INVAL,
            OsError::NotFound => Errno::NOENT,
            OsError::NameTooLong => Errno::NAMETOOLONG,
        }
        .raw_os_error()]
    }

    /// Windows system error codes (winerror.h) that mean this, as cap-std and std report
    /// them.
    #[cfg(not(unix))]
    fn codes(self) -> &'static [i32] {
        match self {
            // ERROR_TOO_MANY_LINKS (cap-std's refusal to follow), ERROR_CANT_RESOLVE_FILENAME
            OsError::Loop => &[1142, 1921],
            OsError::NotDir => &[267],     // ERROR_DIRECTORY
            OsError::IsDir => &[336],      // ERROR_DIRECTORY_NOT_SUPPORTED
            OsError::NotEmpty => &[145],   // ERROR_DIR_NOT_EMPTY
            OsError::Exists => &[183, 80], // ERROR_ALREADY_EXISTS, ERROR_FILE_EXISTS
            OsError::CrossDevice => &[17], // ERROR_NOT_SAME_DEVICE
            // ERROR_INVALID_PARAMETER; ERROR_NOT_A_REPARSE_POINT (reading a link that is none)
            OsError::Invalid => &[87, 4390],
            OsError::NotFound => &[2, 3], // ERROR_FILE_NOT_FOUND, ERROR_PATH_NOT_FOUND
            OsError::NameTooLong => &[206], // ERROR_FILENAME_EXCED_RANGE
        }
    }

    /// Whether `err` is this error.
    pub(crate) fn is(self, err: &io::Error) -> bool {
        err.raw_os_error()
            .is_some_and(|code| self.codes().contains(&code))
    }
}
