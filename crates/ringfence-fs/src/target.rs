//! A resolved path: the handle of its parent directory and its final name, so that the
//! operation that uses it is the same kernel lookup that was checked.

use std::ffi::OsString;
use std::io::{self, Write};
use std::sync::Arc;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, File, FileType, Metadata, OpenOptions};
#[cfg(unix)]
use cap_std::fs::{OpenOptionsExt, PermissionsExt};

use crate::error::{FsError, FsErrorKind, FsResult};
use crate::os_error::OsError;
use crate::root::{Access, Root};

/// What kind of entry a resolved path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    /// Device, socket, FIFO: never read or written by the tools.
    Other,
    /// A symbolic link, as the entry itself (only from
    /// [`Workspace::resolve_entry`](crate::Workspace::resolve_entry); resolution otherwise
    /// follows links).
    Symlink,
}

impl EntryKind {
    pub fn from_file_type(ft: FileType) -> EntryKind {
        if ft.is_file() {
            EntryKind::File
        } else if ft.is_symlink() {
            EntryKind::Symlink
        } else if ft.is_dir() {
            EntryKind::Dir
        } else {
            EntryKind::Other
        }
    }
}

/// Whether the resolved path exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetState {
    Exists(EntryKind),
    /// Nothing there yet (a write may create it, together with `missing_dirs`).
    Missing,
}

/// A path resolved beneath a root. Holds the parent's directory handle, so later operations
/// cannot be redirected by renaming or swapping anything above it.
pub struct Target {
    root: Arc<Root>,
    input: String,
    rel: String,
    /// `None` only for the root itself.
    parent: Option<Arc<Dir>>,
    name: OsString,
    state: TargetState,
    /// Directories between `parent` and `name` that do not exist yet.
    missing_dirs: Vec<String>,
    /// Refuse writes even if the root is read-write (reached through an internal root).
    read_only: bool,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("root", &self.root.label())
            .field("rel", &self.rel)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// Options for [`Target::write_atomic`].
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Create missing parent directories (default: false).
    pub create_parents: bool,
    /// Mode for a new file (default 0o644, set with fchmod, so the umask does not apply); an
    /// existing file keeps its mode. Set-user-ID and set-group-ID bits in it are dropped
    /// unless `mode_owner` says whose they are.
    pub new_file_mode: Option<u32>,
    /// The owner and group (`uid`, `gid`) of the file `new_file_mode` was copied from: its
    /// set-user-ID and set-group-ID bits are kept only when the new file ends up with exactly
    /// this owner and group — as `cp` keeps them only when it keeps the ownership. `None`
    /// (default; content ringfence wrote, a version restored by undo): never kept.
    pub mode_owner: Option<(u32, u32)>,
}

/// The set-user-ID and set-group-ID bits.
pub(crate) const SET_ID: u32 = 0o6000;

/// The mode a copy owned by `copy` gets from a source with `mode` owned by `source`: the
/// same, except that set-user-ID and set-group-ID are dropped unless the owner and group are
/// the same (a copy running as root is root's; another user's setuid program must not
/// become a setuid-root one).
#[cfg(unix)]
pub(crate) fn copy_mode(mode: u32, source: (u32, u32), copy: (u32, u32)) -> u32 {
    if source == copy { mode } else { mode & !SET_ID }
}

impl Target {
    pub(crate) fn new(
        root: Arc<Root>,
        input: &str,
        rel: String,
        parent: Option<Arc<Dir>>,
        name: OsString,
        state: TargetState,
        missing_dirs: Vec<String>,
    ) -> Target {
        Target {
            root,
            input: input.to_owned(),
            rel,
            parent,
            name,
            state,
            missing_dirs,
            read_only: false,
        }
    }

    /// Makes every write through this target fail with [`FsErrorKind::ReadOnly`].
    pub(crate) fn set_read_only(&mut self) {
        self.read_only = true;
    }

    pub fn root(&self) -> &Arc<Root> {
        &self.root
    }

    /// Whether writes are refused regardless of the root (reached through ringfence's
    /// internal storage).
    pub fn is_read_only_view(&self) -> bool {
        self.read_only
    }

    /// The absolute path, spelled from the root as configured, for showing to the model.
    pub fn absolute(&self) -> std::path::PathBuf {
        Target::absolute_of(&self.root, &self.rel)
    }

    /// The absolute path of a root-relative path, spelled from the root as configured.
    pub fn absolute_of(root: &Root, rel: &str) -> std::path::PathBuf {
        crate::workspace::join_abs(root.absolute_path(), rel)
    }

    /// Directories between the parent handle and the name that do not exist yet.
    pub(crate) fn missing_dirs(&self) -> &[String] {
        &self.missing_dirs
    }

    /// The path as the caller typed it.
    pub fn input(&self) -> &str {
        &self.input
    }

    /// The resolved path relative to its root, `/`-separated; empty for the root itself.
    pub fn rel(&self) -> &str {
        &self.rel
    }

    /// The resolved path for display: root-relative, `.` for the root itself.
    pub fn display(&self) -> &str {
        if self.rel.is_empty() { "." } else { &self.rel }
    }

    pub fn state(&self) -> TargetState {
        self.state
    }

    pub fn exists(&self) -> bool {
        matches!(self.state, TargetState::Exists(_))
    }

    pub fn is_dir(&self) -> bool {
        matches!(self.state, TargetState::Exists(EntryKind::Dir))
    }

    pub(crate) fn err(&self, kind: FsErrorKind, msg: impl Into<String>) -> FsError {
        FsError::new(kind, self.input.clone(), msg)
    }

    pub(crate) fn io(&self, err: io::Error) -> FsError {
        FsError::from_io(&self.input, err)
    }

    pub(crate) fn not_found(&self) -> FsError {
        self.err(
            FsErrorKind::NotFound,
            format!("{}: no such file or directory", self.input),
        )
    }

    /// Parent directory handle and final name; `None` for the root itself.
    pub(crate) fn parent_and_name(&self) -> Option<(&Arc<Dir>, &OsString)> {
        self.parent.as_ref().map(|p| (p, &self.name))
    }

    /// Opens the target as a regular file for reading (never follows a symlink at the last
    /// step, never blocks on a FIFO).
    pub fn open_read(&self) -> FsResult<(File, Metadata)> {
        match self.state {
            TargetState::Missing => return Err(self.not_found()),
            TargetState::Exists(EntryKind::Dir) => {
                return Err(self.err(
                    FsErrorKind::IsADirectory,
                    format!(
                        "{}: is a directory, not a file; use glob to list it",
                        self.input
                    ),
                ));
            }
            TargetState::Exists(EntryKind::Other | EntryKind::Symlink) => {
                return Err(self.not_a_file());
            }
            TargetState::Exists(EntryKind::File) => {}
        }
        let (parent, name) = self.parent_and_name().ok_or_else(|| self.not_found())?;
        let mut opts = OpenOptions::new();
        opts.read(true).follow(FollowSymlinks::No);
        nonblocking(&mut opts);
        let file = parent.open_with(name, &opts).map_err(|e| self.io(e))?;
        let meta = file.metadata().map_err(|e| self.io(e))?;
        if !meta.is_file() {
            return Err(self.not_a_file());
        }
        Ok((file, meta))
    }

    fn not_a_file(&self) -> FsError {
        self.err(
            FsErrorKind::NotAFile,
            format!(
                "{}: not a regular file (device, socket or FIFO); refused",
                self.input
            ),
        )
    }

    /// Opens the target as a directory.
    pub fn open_dir(&self) -> FsResult<Arc<Dir>> {
        match self.state {
            TargetState::Missing => Err(self.not_found()),
            TargetState::Exists(EntryKind::Dir) => match &self.parent {
                None => self.root.dir(),
                Some(parent) => parent
                    .open_dir_nofollow(&self.name)
                    .map(Arc::new)
                    .map_err(|e| self.io(e)),
            },
            TargetState::Exists(_) => Err(self.err(
                FsErrorKind::NotADirectory,
                format!("{}: is a file, not a directory", self.input),
            )),
        }
    }

    /// Metadata of the entry itself (not following a final symlink).
    pub fn metadata(&self) -> FsResult<Metadata> {
        match &self.parent {
            None => self
                .root
                .dir()
                .and_then(|d| d.dir_metadata().map_err(|e| self.io(e))),
            Some(parent) => parent.symlink_metadata(&self.name).map_err(|e| self.io(e)),
        }
    }

    /// Fails unless the root allows writes.
    pub fn require_writable(&self) -> FsResult<()> {
        if self.read_only {
            return Err(self.err(
                FsErrorKind::ReadOnly,
                format!(
                    "{}: `{}` is ringfence's internal storage; it can be read but not written",
                    self.input,
                    self.root.label()
                ),
            ));
        }
        match self.root.access() {
            Access::ReadWrite => Ok(()),
            Access::ReadOnly => Err(self.err(
                FsErrorKind::ReadOnly,
                format!(
                    "{}: the root `{}` is read-only; writes are refused there",
                    self.input,
                    self.root.label()
                ),
            )),
        }
    }

    /// Replaces (or creates) the file atomically and durably: a temporary file in the same
    /// directory, written and fsynced, renamed over the target, then the directory fsynced.
    /// An existing file keeps its mode (and, where permitted, its owner) except set-user-ID
    /// and set-group-ID, which new content never keeps: the kernel clears them on a write by
    /// anyone without `CAP_FSETID`, and a server running as root has it, so ringfence clears
    /// them itself. Readers see the old content or the new one, never a mix, even if the
    /// process is killed mid-write.
    pub fn write_atomic(&self, data: &[u8], opts: &WriteOptions) -> FsResult<()> {
        self.write_atomic_with(opts, &mut |file| file.write_all(data))
    }

    /// [`write_atomic`](Self::write_atomic) with the content produced by `fill`, which writes
    /// into the temporary file (streaming a copy, for instance).
    pub fn write_atomic_with(
        &self,
        opts: &WriteOptions,
        fill: &mut dyn FnMut(&mut File) -> io::Result<()>,
    ) -> FsResult<()> {
        self.require_writable()?;
        match self.state {
            TargetState::Exists(EntryKind::Dir) => {
                return Err(self.err(
                    FsErrorKind::IsADirectory,
                    format!("{}: is a directory; give a file path", self.input),
                ));
            }
            // Devices, sockets, FIFOs are never replaced. A symlink (only from
            // `resolve_entry`) is replaced as an entry by the rename, never followed.
            TargetState::Exists(EntryKind::Other) => return Err(self.not_a_file()),
            _ => {}
        }
        let parent = self.parent.as_ref().ok_or_else(|| {
            self.err(
                FsErrorKind::IsADirectory,
                format!("{}: is the workspace root; give a file path", self.input),
            )
        })?;
        let dir = if self.missing_dirs.is_empty() {
            parent.clone()
        } else if opts.create_parents {
            self.create_missing_dirs(parent)?
        } else {
            return Err(self.err(
                FsErrorKind::NotFound,
                format!("{}: the parent directory does not exist", self.input),
            ));
        };
        // Existing file: keep its permissions and owner.
        let existing = match dir.symlink_metadata(&self.name) {
            Ok(meta) if meta.is_file() => Some(meta),
            Ok(meta) if meta.is_dir() => {
                return Err(self.err(
                    FsErrorKind::IsADirectory,
                    format!("{}: is a directory", self.input),
                ));
            }
            Ok(_) => None, // a symlink appeared in a race: rename replaces it, never follows it
            Err(err) if err.kind() == io::ErrorKind::NotFound => None,
            Err(err) => return Err(self.io(err)),
        };
        // New content never runs with set-id bits it did not bring along (see above); only a
        // copy to an owner and group equal to its source's keeps them (`with_set_id`).
        let mode = existing
            .as_ref()
            .map(mode_of)
            .or(opts.new_file_mode)
            .unwrap_or(0o644);
        let with_set_id = match (&existing, opts.mode_owner) {
            (None, Some(owner)) if mode & SET_ID != 0 => Some((mode, owner)),
            _ => None,
        };
        let mode = mode & !SET_ID;

        let tmp_name = temp_name(&self.name);
        let mut open = OpenOptions::new();
        open.write(true).create_new(true).follow(FollowSymlinks::No);
        #[cfg(unix)]
        open.mode(0o600);
        let mut file = dir.open_with(&tmp_name, &open).map_err(|e| self.io(e))?;
        let result = (|| -> io::Result<()> {
            fill(&mut file)?;
            #[cfg(unix)]
            {
                fchmod(&file, mode)?;
                if let Some(meta) = &existing {
                    use cap_std::fs::MetadataExt;
                    // Best effort: only root can give a file away; otherwise it is ours already.
                    let _ = rustix::fs::fchown(
                        &file,
                        Some(rustix::fs::Uid::from_raw(meta.uid())),
                        Some(rustix::fs::Gid::from_raw(meta.gid())),
                    );
                }
                if let Some((full, owner)) = with_set_id {
                    use cap_std::fs::MetadataExt;
                    let now = file.metadata()?;
                    fchmod(&file, copy_mode(full, owner, (now.uid(), now.gid())))?;
                }
            }
            // No mode bits or owners: the new file takes its directory's access list.
            #[cfg(not(unix))]
            let _ = (mode, with_set_id);
            file.sync_all()?;
            drop(file);
            if self.state != TargetState::Missing {
                dir.rename(&tmp_name, &dir, &self.name)?;
            } else {
                // A new file: never replace one that appeared since resolution (it would
                // bypass the caller's read-first check).
                rename_noreplace(
                    &dir,
                    std::ffi::OsStr::new(tmp_name.as_str()),
                    &dir,
                    self.name.as_os_str(),
                )?;
            }
            fsync_dir(&dir)?;
            Ok(())
        })();
        if let Err(err) = result {
            let _ = dir.remove_file(&tmp_name);
            return Err(self.io(err));
        }
        Ok(())
    }

    pub(crate) fn create_missing_dirs(&self, parent: &Arc<Dir>) -> FsResult<Arc<Dir>> {
        let mut dir = parent.clone();
        for name in &self.missing_dirs {
            match dir.create_dir(name) {
                Ok(()) => {}
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(self.io(err)),
            }
            // Never follow: if someone planted a symlink here in the meantime, this fails.
            let next = dir.open_dir_nofollow(name).map_err(|e| {
                if OsError::Loop.is(&e) || OsError::NotDir.is(&e) {
                    self.err(
                        FsErrorKind::OutsideRoot,
                        format!(
                            "{}: `{name}` changed into a symbolic link while creating it; refused",
                            self.input
                        ),
                    )
                } else {
                    self.io(e)
                }
            })?;
            fsync_dir(&dir).map_err(|e| self.io(e))?;
            dir = Arc::new(next);
        }
        Ok(dir)
    }
}

/// A hidden temporary name next to the target, unique per write, within NAME_MAX.
pub(crate) fn temp_name(name: &OsString) -> String {
    let base = name.to_string_lossy();
    let mut short: String = base.chars().take(40).collect();
    if short.is_empty() {
        short.push('f');
    }
    format!(
        ".{short}.{}.rftmp",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// Flushes a directory's entries (a rename, a new subdirectory) to disk.
///
/// cap-std holds directories as `O_PATH` descriptors on Linux, and `fsync` on an `O_PATH`
/// descriptor fails with `EBADF` — which made every write report an error *after* the rename
/// had already replaced the file, and never flushed the directory. So open `.` beneath the
/// handle for reading (no ambient path involved) and fsync that.
pub(crate) fn fsync_dir(dir: &Dir) -> io::Result<()> {
    #[cfg(unix)]
    rustix::fs::fsync(open_dot(dir)?)?;
    // Windows cannot flush a directory through a handle std opens; NTFS journals its
    // entries (a rename is durable once the journal is).
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// The directory itself, opened for reading beneath its own handle (cap-std's handles are
/// `O_PATH`, on which fsync, fchmod and syncfs fail).
#[cfg(unix)]
pub(crate) fn open_dot(dir: &Dir) -> io::Result<rustix::fd::OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    Ok(rustix::fs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
    )?)
}

#[cfg(unix)]
fn fchmod(file: &File, mode: u32) -> io::Result<()> {
    rustix::fs::fchmod(file, to_mode(mode))?;
    Ok(())
}

/// The permission bits (set-id, sticky, read/write/execute) of a `mode_t`, as a `u32` on
/// every platform (`mode_t` is 16 bits on macOS, 32 on Linux).
#[cfg(unix)]
pub(crate) fn perm_bits(raw: impl Into<u32>) -> u32 {
    raw.into() & 0o7777
}

/// `bits`' permission bits as rustix's [`rustix::fs::Mode`] on every platform.
#[cfg(unix)]
pub(crate) fn to_mode(bits: u32) -> rustix::fs::Mode {
    fn narrow<T: TryFrom<u32> + Default>(v: u32) -> T {
        T::try_from(v).unwrap_or_default()
    }
    rustix::fs::Mode::from_bits_truncate(narrow(bits & 0o7777))
}

/// The permission bits of an entry. Windows has none: a read-only file is 0o444, a
/// directory 0o755, any other file 0o644 (what a copy or a listing shows).
pub fn mode_of(meta: &Metadata) -> u32 {
    #[cfg(unix)]
    {
        meta.permissions().mode() & 0o7777
    }
    #[cfg(not(unix))]
    {
        if meta.is_dir() {
            0o755
        } else if meta.permissions().readonly() {
            0o444
        } else {
            0o644
        }
    }
}

/// The owner and group of an entry (`(0, 0)` on Windows, which has neither as numbers).
pub fn owner_of(meta: &Metadata) -> (u32, u32) {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt;
        (meta.uid(), meta.gid())
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        (0, 0)
    }
}

/// Opening for reading never blocks on a FIFO (Unix; the tools never read one).
pub(crate) fn nonblocking(opts: &mut OpenOptions) {
    #[cfg(unix)]
    opts.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    #[cfg(not(unix))]
    let _ = opts;
}

/// Renames `from` (in `from_dir`) to `to` (in `to_dir`), replacing what is there.
pub(crate) fn rename_replace(
    from_dir: &Dir,
    from: &std::ffi::OsStr,
    to_dir: &Dir,
    to: &std::ffi::OsStr,
) -> io::Result<()> {
    #[cfg(unix)]
    {
        Ok(rustix::fs::renameat(from_dir, from, to_dir, to)?)
    }
    #[cfg(not(unix))]
    {
        from_dir.rename(from, to_dir, to)
    }
}

/// Makes the symbolic link `name` in `dir` holding `text`. Windows: refused (making links
/// there needs a privilege or developer mode, and this release has not tested it).
pub(crate) fn symlink_at(
    text: &std::path::Path,
    dir: &Dir,
    name: &std::ffi::OsStr,
) -> io::Result<()> {
    #[cfg(unix)]
    {
        rustix::fs::symlinkat(text.as_os_str(), dir, name)?;
        Ok(())
    }
    #[cfg(not(unix))]
    {
        let _ = (text, dir, name);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "symbolic links are not copied on Windows in this release",
        ))
    }
}

/// Renames `from` (in `from_dir`) to `to` (in `to_dir`) unless `to` exists, failing with
/// EEXIST if it does.
///
/// Network file systems (NFS, CephFS, EFS) have no `RENAME_NOREPLACE`: they answer EINVAL.
/// There a file is linked under the new name — `link` fails if the name exists, atomically
/// on the server too — and then unlinked under the old one. A directory cannot be linked:
/// it is renamed after a check that the name is free, which leaves a window in which a name
/// made by another process could be replaced (SECURITY.md, "Shared file systems").
pub(crate) fn rename_noreplace(
    from_dir: &Dir,
    from: &std::ffi::OsStr,
    to_dir: &Dir,
    to: &std::ffi::OsStr,
) -> io::Result<()> {
    #[cfg(unix)]
    {
        Ok(rename_noreplace_unix(from_dir, from, to_dir, to)?)
    }
    #[cfg(not(unix))]
    {
        // No rename that refuses to replace: a file is linked under the new name (which
        // fails if the name exists) and unlinked under the old; a directory is renamed after
        // a check that the name is free, as on a network file system below.
        if from_dir.symlink_metadata(from)?.is_dir() {
            match to_dir.symlink_metadata(to) {
                Ok(_) => return Err(io::Error::from_raw_os_error(183)), // ERROR_ALREADY_EXISTS
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
            return from_dir.rename(from, to_dir, to);
        }
        from_dir.hard_link(from, to_dir, to)?;
        from_dir.remove_file(from)
    }
}

#[cfg(unix)]
fn rename_noreplace_unix(
    from_dir: &Dir,
    from: &std::ffi::OsStr,
    to_dir: &Dir,
    to: &std::ffi::OsStr,
) -> rustix::io::Result<()> {
    use rustix::fs::{AtFlags, RenameFlags};
    use rustix::io::Errno;
    let first = if noreplace_unsupported_for_tests() {
        Err(Errno::INVAL)
    } else {
        rustix::fs::renameat_with(from_dir, from, to_dir, to, RenameFlags::NOREPLACE)
    };
    match first {
        Err(Errno::INVAL) => {}
        // macOS's renameatx_np answers ENOTSUP where the file system has no RENAME_EXCL.
        #[cfg(not(target_os = "linux"))]
        Err(Errno::NOTSUP) => {}
        other => return other,
    }
    let st = rustix::fs::statat(from_dir, from, AtFlags::SYMLINK_NOFOLLOW)?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
        match rustix::fs::statat(to_dir, to, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(_) => return Err(Errno::EXIST),
            Err(Errno::NOENT) => {}
            Err(e) => return Err(e),
        }
        rustix::fs::renameat(from_dir, from, to_dir, to)?;
    } else {
        rustix::fs::linkat(from_dir, from, to_dir, to, AtFlags::empty())?;
        rustix::fs::unlinkat(from_dir, from, AtFlags::empty())?;
    }
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// Makes this thread's [`rename_noreplace`] act as on a file system without
    /// `RENAME_NOREPLACE` (there is no NFS server here to test against).
    pub(crate) static NO_RENAME_NOREPLACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(unix)]
fn noreplace_unsupported_for_tests() -> bool {
    #[cfg(test)]
    {
        NO_RENAME_NOREPLACE.with(|f| f.get())
    }
    #[cfg(not(test))]
    {
        false
    }
}

#[cfg(test)]
mod noreplace_tests {
    use super::*;

    #[allow(clippy::disallowed_methods)] // the test's own directory
    fn check(fallback: bool) {
        NO_RENAME_NOREPLACE.with(|f| f.set(fallback));
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(tmp.path().join("a"), "A").unwrap();
        std::fs::write(tmp.path().join("taken"), "T").unwrap();
        std::fs::create_dir(tmp.path().join("d")).unwrap();
        std::fs::create_dir(tmp.path().join("dtaken")).unwrap();
        let dir = Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority()).unwrap();
        let os = std::ffi::OsStr::new;
        // A file to a free name: moved, content kept, the old name gone.
        rename_noreplace(&dir, os("a"), &dir, os("b")).unwrap();
        assert_eq!(std::fs::read_to_string(tmp.path().join("b")).unwrap(), "A");
        assert!(!tmp.path().join("a").exists());
        // To a taken name: refused, both untouched.
        let e = rename_noreplace(&dir, os("b"), &dir, os("taken")).unwrap_err();
        assert!(OsError::Exists.is(&e), "{e}");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("taken")).unwrap(),
            "T"
        );
        assert_eq!(std::fs::read_to_string(tmp.path().join("b")).unwrap(), "A");
        // Directories likewise.
        rename_noreplace(&dir, os("d"), &dir, os("e")).unwrap();
        assert!(tmp.path().join("e").is_dir() && !tmp.path().join("d").exists());
        let e = rename_noreplace(&dir, os("e"), &dir, os("dtaken")).unwrap_err();
        assert!(OsError::Exists.is(&e), "{e}");
        assert!(tmp.path().join("e").is_dir());
        NO_RENAME_NOREPLACE.with(|f| f.set(false));
    }

    #[test]
    fn with_rename_noreplace() {
        check(false);
    }

    #[test]
    fn without_it_as_on_network_file_systems() {
        check(true);
    }
}
