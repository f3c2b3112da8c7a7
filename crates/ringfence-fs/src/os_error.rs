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

    /// Windows system error codes (winerror.h); 0 stands for none.
    #[cfg(not(unix))]
    fn codes(self) -> [i32; 1] {
        [match self {
            OsError::Loop => 1921,       // ERROR_CANT_RESOLVE_FILENAME
            OsError::NotDir => 267,      // ERROR_DIRECTORY
            OsError::IsDir => 0, // (none: a directory in a file's place is refused as access denied)
            OsError::NotEmpty => 145, // ERROR_DIR_NOT_EMPTY
            OsError::Exists => 183, // ERROR_ALREADY_EXISTS (ERROR_FILE_EXISTS: below)
            OsError::CrossDevice => 17, // ERROR_NOT_SAME_DEVICE
            OsError::Invalid => 87, // ERROR_INVALID_PARAMETER
            OsError::NotFound => 2, // ERROR_FILE_NOT_FOUND (ERROR_PATH_NOT_FOUND: below)
            OsError::NameTooLong => 206, // ERROR_FILENAME_EXCED_RANGE
        }]
    }

    /// Whether `err` is this error.
    pub(crate) fn is(self, err: &io::Error) -> bool {
        let Some(code) = err.raw_os_error() else {
            return false;
        };
        #[cfg(not(unix))]
        {
            if (self == OsError::Exists && code == 80) || (self == OsError::NotFound && code == 3) {
                return true;
            }
        }
        code != 0 && self.codes().contains(&code)
    }
}
