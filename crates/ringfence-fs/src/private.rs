//! ringfence's own records under its data directory — the audit trail, saved outputs, the
//! edit journal, memories — are private to the account the server runs as: directories
//! 0700, files 0600. They are made so when created (an explicit mode at creation, not the
//! process umask, which would also narrow the files the tools write in the user's roots),
//! and [`make_private`] tightens what an earlier version left wider.
//!
//! These are ambient-path operations on the operator's data directory, never on a root.

use std::io;
use std::path::Path;

#[cfg(unix)]
use rustix::fd::{AsFd, OwnedFd};
#[cfg(unix)]
use rustix::fs::{Mode, OFlags};
#[cfg(unix)]
use rustix::io::Errno;

/// The mode of a directory under the data directory.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of a file under the data directory.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates the directory `path` and any missing parents with mode 0700 (given to `mkdir`, so
/// the umask can only narrow it). Directories that exist already are left as they are
/// ([`make_private`] tightens them). On Windows each directory made gets the owner-only
/// access list (the account and SYSTEM, protected; inherited by what is made in it).
#[allow(clippy::disallowed_methods)] // the operator's data directory, not a root
pub fn create_private_dir_all(path: &Path) -> io::Result<()> {
    #[cfg(windows)]
    {
        // The missing directories, outermost first, each made with its list.
        let mut missing = Vec::new();
        for dir in path.ancestors().filter(|p| !p.as_os_str().is_empty()) {
            match std::fs::symlink_metadata(dir) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(dir),
                Err(e) => return Err(e),
            }
        }
        for dir in missing.into_iter().rev() {
            match crate::windows_acl::create_private_dir(dir) {
                Ok(()) => {}
                // Made meanwhile by someone else: left as it is, as an existing one would be.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => {}
                Err(e) => return Err(e),
            }
        }
        if !path.is_dir() {
            // Something that is not a directory has the name: the error `create_dir` gives.
            std::fs::create_dir(path)?;
        }
        Ok(())
    }
    #[cfg(not(windows))]
    {
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, PRIVATE_DIR_MODE);
        builder.create(path)
    }
}

/// How [`open_with_mode`] opens a file for writing, creating it if it is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// Every write lands at the end; what is there stays.
    Append,
    /// What is there is cut away first.
    Truncate,
    /// The file must not exist yet (`AlreadyExists` otherwise).
    New,
}

/// Opens `path` for writing as `how` says, creating it with `mode` (given to `open`, so the
/// umask can only narrow it; an existing file keeps its mode). On Windows a mode that gives
/// group and others nothing (0600) means the owner-only access list: a file made has it from
/// its creation, one that was there is given it (logged when it cannot be); any other mode
/// leaves the list the file inherits.
#[allow(clippy::disallowed_methods)] // the caller's own file (data directory, a configuration), not a root
pub fn open_with_mode(path: &Path, mode: u32, how: Opening) -> io::Result<std::fs::File> {
    #[cfg(windows)]
    if mode & 0o077 == 0 {
        return crate::windows_acl::open_private_file(path, how);
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true);
    match how {
        Opening::Append => options.append(true),
        Opening::Truncate => options.write(true).truncate(true),
        Opening::New => options.write(true).create_new(true),
    };
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(any(unix, windows)))]
    let _ = mode;
    options.open(path)
}

/// Writes `bytes` to `path` as a 0600 file, whole or not at all (see [`replace_file`]).
pub fn write_private_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_file(path, bytes, PRIVATE_FILE_MODE)
}

/// Writes `bytes` to `path` with `mode`, whole or not at all: a temporary file beside it
/// (`<path>.partial`), synced, then renamed over `path`.
#[allow(clippy::disallowed_methods)] // the caller's own file (data directory, export, a client's configuration), not a root
pub fn replace_file(path: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("partial");
    let written = open_with_mode(&tmp, mode, Opening::Truncate)
        .and_then(|mut f| {
            // The mode asked for, whatever the umask or a leftover file had.
            #[cfg(unix)]
            f.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|_| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Creates `path` with `bytes`, readable by the owner only, never replacing anything there:
/// written whole and synced beside it first, then linked into place (`AlreadyExists` when
/// something has the name), so an interruption never leaves a half file under `path`.
#[allow(clippy::disallowed_methods)] // the caller's own file (a configuration), not a root
pub fn create_private_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    tmp_name.push(format!(".{}.{nanos}.partial", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    // A leftover temporary file is replaced: only the link below may find the name taken.
    let _ = std::fs::remove_file(&tmp);
    let written = open_with_mode(&tmp, PRIVATE_FILE_MODE, Opening::New)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists => io::Error::other(e),
            _ => e,
        });
    let created = written.and_then(|_| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    created
}

/// How far [`make_private`] reaches beneath the path it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The entry itself only (a workspace: the files in it are the user's).
    Itself,
    /// The entry and everything beneath it.
    Tree,
    /// The entry and the directories beneath it down to this many levels; files and deeper
    /// entries untouched (`users/`: each user's directory and their workspace directory, not
    /// the workspace's contents).
    Dirs(usize),
}

/// Removes every permission of group and others — and set-user-ID, set-group-ID and sticky —
/// from `path` and, by `reach`, from what is beneath it. A symbolic link is never followed
/// (nor changed), special files are left alone, and each entry is opened `O_NOFOLLOW` and
/// changed through its descriptor, so a name swapped for a link in between changes nothing
/// else. A missing `path` is fine. Returns how many entries changed; an entry that cannot be
/// changed (another owner) is skipped and the first such error returned after the rest.
///
/// On Windows the entries get the owner-only access list instead (the account and SYSTEM,
/// protected from the folder's; a directory's entries inherited by what is made in it
/// later, never pushed onto what it holds), set on each entry through a handle opened on the
/// entry itself (a link or junction is neither followed nor changed); an entry whose list is
/// already as tight is not counted.
pub fn make_private(path: &Path, reach: Reach) -> io::Result<u64> {
    #[cfg(windows)]
    return crate::windows_acl::make_private(path, reach);
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (path, reach);
        Ok(0)
    }
    #[cfg(unix)]
    make_private_unix(path, reach)
}

/// The access list of the entry at `path` (not followed if a link), read: who besides the
/// account and SYSTEM may get in. `None` for a link or anything but a file or directory.
#[cfg(windows)]
pub fn access_list_of(path: &Path) -> io::Result<Option<crate::access_list::Reading>> {
    crate::windows_acl::access_of(path)
}

#[cfg(unix)]
fn make_private_unix(path: &Path, reach: Reach) -> io::Result<u64> {
    let entry = match open_entry(None, path) {
        Ok(Some(entry)) => entry,
        Ok(None) => return Ok(0),
        Err(e) if e == Errno::NOENT => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    let mut tally = Tally::default();
    visit(&mut tally, entry, reach, 0);
    tally.finish()
}

/// Directories nested deeper than this are not entered (ringfence's own go three deep).
const MAX_DEPTH: usize = 32;

impl Reach {
    /// Whether an entry `depth` levels below the start is changed: a directory always, a
    /// file unless only directories are reached below the start.
    pub(crate) fn changes(self, is_dir: bool, depth: usize) -> bool {
        is_dir || !matches!(self, Reach::Dirs(_)) || depth == 0
    }

    /// Whether a directory `depth` levels below the start is entered.
    pub(crate) fn enters(self, depth: usize) -> bool {
        match self {
            Reach::Itself => false,
            Reach::Tree => depth < MAX_DEPTH,
            Reach::Dirs(levels) => depth < levels.min(MAX_DEPTH),
        }
    }

    /// Whether an entry found in a directory that is entered is visited.
    pub(crate) fn visits(self, is_dir: bool) -> bool {
        is_dir || !matches!(self, Reach::Dirs(_))
    }
}

/// What a tightening walk did: how many entries changed, and the first error (the walk goes
/// on past an entry it cannot change).
#[derive(Default)]
pub(crate) struct Tally {
    pub(crate) changed: u64,
    error: Option<io::Error>,
}

impl Tally {
    pub(crate) fn fail(&mut self, e: impl Into<io::Error>) {
        if self.error.is_none() {
            self.error = Some(e.into());
        }
    }

    pub(crate) fn finish(self) -> io::Result<u64> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.changed),
        }
    }
}

#[cfg(unix)]
fn visit(tally: &mut Tally, (fd, st): (OwnedFd, rustix::fs::Stat), reach: Reach, depth: usize) {
    let is_dir = rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory;
    if reach.changes(is_dir, depth) {
        let mode = st.st_mode & 0o7777;
        if mode & !0o700 != 0 {
            match rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode & 0o700)) {
                Ok(()) => tally.changed += 1,
                Err(e) => tally.fail(e),
            }
        }
    }
    if !is_dir || !reach.enters(depth) {
        return;
    }
    let names = match list(&fd) {
        Ok(names) => names,
        Err(e) => return tally.fail(e),
    };
    for name in names {
        match open_entry(Some(fd.as_fd()), name.as_c_str()) {
            Ok(Some(child)) => {
                let child_is_dir = rustix::fs::FileType::from_raw_mode(child.1.st_mode)
                    == rustix::fs::FileType::Directory;
                if reach.visits(child_is_dir) {
                    visit(tally, child, reach, depth + 1);
                }
            }
            Ok(None) => {}
            // Removed meanwhile: nothing to tighten.
            Err(e) if e == Errno::NOENT => {}
            Err(e) => tally.fail(e),
        }
    }
}

#[cfg(unix)]
/// The names in a directory (without `.` and `..`).
fn list(fd: &OwnedFd) -> Result<Vec<std::ffi::CString>, Errno> {
    let mut names = Vec::new();
    let mut dir = rustix::fs::Dir::read_from(fd)?;
    while let Some(entry) = dir.read() {
        let entry = entry?;
        let name = entry.file_name();
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            names.push(name.to_owned());
        }
    }
    Ok(names)
}

#[cfg(unix)]
/// Opens an entry for changing its mode: `None` for anything but a regular file or a
/// directory (a symbolic link is never followed, a device or FIFO never opened for reading).
/// The type is judged on an `O_PATH` descriptor first; the entry opened for reading must be
/// that same one (device and inode), or it is left alone.
fn open_entry<P: rustix::path::Arg + Copy>(
    at: Option<rustix::fd::BorrowedFd<'_>>,
    path: P,
) -> Result<Option<(OwnedFd, rustix::fs::Stat)>, Errno> {
    use rustix::fs::FileType;
    let open = |flags: OFlags| match at {
        Some(dir) => rustix::fs::openat(dir, path, flags | OFlags::CLOEXEC, Mode::empty()),
        None => rustix::fs::open(path, flags | OFlags::CLOEXEC, Mode::empty()),
    };
    #[cfg(target_os = "linux")]
    let seen = rustix::fs::fstat(open(OFlags::PATH | OFlags::NOFOLLOW)?)?;
    // No `O_PATH` here: the entry itself, unfollowed (the device and inode check below
    // still catches a swap).
    #[cfg(not(target_os = "linux"))]
    let seen = match at {
        Some(dir) => rustix::fs::statat(dir, path, rustix::fs::AtFlags::SYMLINK_NOFOLLOW)?,
        None => rustix::fs::lstat(path)?,
    };
    let kind = FileType::from_raw_mode(seen.st_mode);
    if kind != FileType::RegularFile && kind != FileType::Directory {
        return Ok(None);
    }
    let fd = match open(OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY) {
        Ok(fd) => fd,
        // Swapped for a link or something else in between.
        Err(Errno::LOOP) | Err(Errno::NXIO) | Err(Errno::NODEV) => return Ok(None),
        Err(e) => return Err(e),
    };
    let st = rustix::fs::fstat(&fd)?;
    if (st.st_dev, st.st_ino) != (seen.st_dev, seen.st_ino) {
        return Ok(None);
    }
    Ok(Some((fd, st)))
}
