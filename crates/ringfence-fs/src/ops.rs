//! Operations on entries beyond reading and writing one file: creating directories, removing,
//! moving and copying. Everything goes through directory handles; a symbolic link met on the
//! way is an entry to remove, move or copy as a link — never a path to follow.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use cap_fs_ext::{DirExt, FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, Metadata, OpenOptions};
#[cfg(unix)]
use cap_std::fs::{MetadataExt, OpenOptionsExt};

use crate::error::{FsErrorKind, FsResult};
use crate::os_error::OsError;
use crate::target::{
    EntryKind, Target, TargetState, WriteOptions, fsync_dir, mode_of, nonblocking, owner_of,
    rename_replace, symlink_at, temp_name,
};
#[cfg(unix)]
use crate::target::{SET_ID, copy_mode, open_dot, perm_bits, to_mode};

/// What a removal or copy touched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TreeCount {
    /// Regular files (and symlinks, and special files when removing).
    pub files: u64,
    pub dirs: u64,
    /// Bytes of regular files copied (zero for removals).
    pub bytes: u64,
    /// Special files (devices, sockets, FIFOs) left out of a copy.
    pub skipped: u64,
}

/// How a move or copy treats an existing destination.
#[derive(Debug, Clone, Copy, Default)]
pub struct TransferOptions {
    /// Replace an existing destination file (default: refuse).
    pub overwrite: bool,
}

/// What a move did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveMethod {
    /// One atomic rename.
    Renamed,
    /// Across file systems: copied, then the source removed.
    CopiedAndRemoved,
}

impl Target {
    /// The text of a symbolic link (the entry itself must be a link, from
    /// [`Workspace::resolve_entry`](crate::Workspace::resolve_entry)).
    pub fn read_link(&self) -> FsResult<PathBuf> {
        let (parent, name) = self.parent_and_name().ok_or_else(|| {
            self.err(
                FsErrorKind::Refused,
                format!("{}: is a root, not a symbolic link", self.input()),
            )
        })?;
        parent.read_link_contents(name).map_err(|e| self.io(e))
    }

    /// Creates the directory and any missing parents. Returns whether anything was created
    /// (an existing directory is fine; an existing file is an error).
    pub fn create_dir_all(&self) -> FsResult<bool> {
        self.require_writable()?;
        match self.state() {
            TargetState::Exists(EntryKind::Dir) => return Ok(false),
            TargetState::Exists(_) => {
                return Err(self.err(
                    FsErrorKind::AlreadyExists,
                    format!(
                        "{}: already exists and is not a directory; choose another name",
                        self.input()
                    ),
                ));
            }
            TargetState::Missing => {}
        }
        let (parent, name) = self
            .parent_and_name()
            .ok_or_else(|| self.err(FsErrorKind::NotFound, "the root does not exist"))?;
        let dir = if self.missing_dirs().is_empty() {
            parent.clone()
        } else {
            self.create_missing_dirs(parent)?
        };
        match dir.create_dir(name) {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => {
                return match dir.symlink_metadata(name) {
                    Ok(m) if m.is_dir() => Ok(false),
                    _ => Err(self.err(
                        FsErrorKind::AlreadyExists,
                        format!("{}: already exists and is not a directory", self.input()),
                    )),
                };
            }
            Err(err) => return Err(self.io(err)),
        }
        fsync_dir(&dir).map_err(|e| self.io(e))?;
        Ok(true)
    }

    /// The first entry inside this directory that the denylist blocks, if any. Moving,
    /// copying or deleting a directory acts on everything in it, so a blocked entry inside
    /// must stop the operation before it starts.
    pub fn first_denied_inside(&self) -> FsResult<Option<String>> {
        self.first_denied(None)
    }

    /// Like [`first_denied_inside`](Self::first_denied_inside), also checking where each
    /// entry would land below `dest`: renaming `stage/` to `deploy/` must not plant
    /// `deploy/run.sh` when `deploy/*.sh` is denied.
    fn first_denied(&self, dest: Option<&Target>) -> FsResult<Option<String>> {
        let denylist = self.root().denylist();
        let dest_list = dest.map(|d| d.root().denylist()).filter(|l| !l.is_empty());
        if (denylist.is_empty() && dest_list.is_none()) || !self.is_dir() {
            return Ok(None);
        }
        let base = self.rel().to_owned();
        let mut stack: Vec<(Arc<Dir>, String)> = vec![(self.open_dir()?, base.clone())];
        while let Some((dir, rel)) = stack.pop() {
            for entry in dir.entries().map_err(|e| self.io(e))? {
                let entry = entry.map_err(|e| self.io(e))?;
                let ft = entry.file_type().map_err(|e| self.io(e))?;
                let name = entry.file_name();
                let child = if rel.is_empty() {
                    name.to_string_lossy().into_owned()
                } else {
                    format!("{rel}/{}", name.to_string_lossy())
                };
                if denylist.is_denied_entry(&child, ft.is_dir()) {
                    return Ok(Some(child));
                }
                if let (Some(list), Some(dest)) = (dest_list, dest) {
                    let suffix = if base.is_empty() {
                        child.as_str()
                    } else {
                        &child[base.len() + 1..]
                    };
                    let landed = if dest.rel().is_empty() {
                        suffix.to_owned()
                    } else {
                        format!("{}/{suffix}", dest.rel())
                    };
                    if list.is_denied_entry(&landed, ft.is_dir()) {
                        return Ok(Some(landed));
                    }
                }
                if ft.is_dir()
                    && let Ok(sub) = dir.open_dir_nofollow(&name)
                {
                    stack.push((Arc::new(sub), child));
                }
            }
        }
        Ok(None)
    }

    fn refuse_denied_inside(&self, verb: &str, dest: Option<&Target>) -> FsResult<()> {
        if let Some(denied) = self.first_denied(dest)? {
            return Err(self.err(
                FsErrorKind::Denied,
                format!(
                    "{}: cannot {verb} this directory: it would involve `{denied}`, which the denylist blocks",
                    self.input()
                ),
            ));
        }
        Ok(())
    }

    fn refuse_root(&self, verb: &str) -> FsResult<(&Arc<Dir>, &OsString)> {
        self.parent_and_name().ok_or_else(|| {
            self.err(
                FsErrorKind::Refused,
                format!(
                    "{}: is a configured root directory; roots cannot be {verb}",
                    self.input()
                ),
            )
        })
    }

    /// Removes the entry: a file or symbolic link (the link itself, never what it points
    /// at), an empty directory, or with `recursive` a directory and everything in it.
    pub fn remove(&self, recursive: bool) -> FsResult<TreeCount> {
        self.require_writable()?;
        let (parent, name) = self.refuse_root("deleted")?;
        let mut count = TreeCount::default();
        match self.state() {
            TargetState::Missing => return Err(self.not_found()),
            TargetState::Exists(EntryKind::Dir) => {
                if recursive {
                    self.refuse_denied_inside("delete", None)?;
                    count = remove_tree(parent, name).map_err(|e| self.io(e))?;
                } else {
                    parent.remove_dir(name).map_err(|e| {
                        if e.kind() == io::ErrorKind::DirectoryNotEmpty
                            || OsError::NotEmpty.is(&e)
                            || OsError::Exists.is(&e)
                        {
                            self.err(
                                FsErrorKind::NotEmpty,
                                format!(
                                    "{}: the directory is not empty; pass recursive: true to delete it with everything in it",
                                    self.input()
                                ),
                            )
                        } else {
                            self.io(e)
                        }
                    })?;
                    count.dirs = 1;
                }
            }
            TargetState::Exists(_) => {
                parent.remove_file(name).map_err(|e| self.io(e))?;
                count.files = 1;
            }
        }
        fsync_dir(parent).map_err(|e| self.io(e))?;
        Ok(count)
    }

    /// Moves (renames) the entry to `dest`, creating missing parent directories of `dest`.
    /// An existing destination is replaced only with `overwrite` (and a directory only if it
    /// is empty). A symbolic link moves as a link. Across file systems the entry is copied
    /// and then removed.
    pub fn rename_to(&self, dest: &Target, opts: TransferOptions) -> FsResult<MoveMethod> {
        self.require_writable()?;
        dest.require_writable()?;
        let (src_parent, src_name) = self.refuse_root("moved")?;
        if !self.exists() {
            return Err(self.not_found());
        }
        let (dest_parent, dest_name) = self.transfer_slot(dest, opts)?;
        self.refuse_into_itself(dest)?;
        if self.is_dir() {
            self.refuse_denied_inside("move", Some(dest))?;
        }
        let dest_dir = if dest.missing_dirs().is_empty() {
            dest_parent.clone()
        } else {
            dest.create_missing_dirs(dest_parent)?
        };
        let renamed = if opts.overwrite {
            rename_replace(
                src_parent,
                src_name.as_os_str(),
                &dest_dir,
                dest_name.as_os_str(),
            )
        } else {
            crate::target::rename_noreplace(
                src_parent,
                src_name.as_os_str(),
                &dest_dir,
                dest_name.as_os_str(),
            )
        };
        match renamed {
            Ok(()) => {
                fsync_dir(&dest_dir).map_err(|e| dest.io(e))?;
                if !Arc::ptr_eq(src_parent, &dest_dir) {
                    fsync_dir(src_parent).map_err(|e| self.io(e))?;
                }
                Ok(MoveMethod::Renamed)
            }
            Err(e) if OsError::CrossDevice.is(&e) => {
                let copied = self.copy_to(dest, opts, &|| false)?;
                if copied.skipped > 0 {
                    // Removing the source would delete what the copy left out (special or
                    // unreadable entries): undo the copy instead and say so.
                    let _ = dest.remove(true);
                    return Err(self.err(
                        FsErrorKind::Refused,
                        format!(
                            "{}: cannot move this directory to another file system: {} entries in it (devices, sockets, FIFOs or unreadable ones) cannot be copied, and moving would delete them. Nothing was moved",
                            self.input(),
                            copied.skipped
                        ),
                    ));
                }
                self.remove(true)?;
                Ok(MoveMethod::CopiedAndRemoved)
            }
            Err(e) if OsError::Exists.is(&e) || OsError::NotEmpty.is(&e) => Err(dest.err(
                if dest.exists() {
                    FsErrorKind::NotEmpty
                } else {
                    FsErrorKind::AlreadyExists
                },
                format!(
                    "{}: the destination exists (a non-empty directory, or it appeared just now); choose another name",
                    dest.input()
                ),
            )),
            Err(e) if OsError::IsDir.is(&e) || OsError::NotDir.is(&e) => Err(dest.err(
                FsErrorKind::IsADirectory,
                format!(
                    "{}: a file and a directory cannot replace each other; choose another destination",
                    dest.input()
                ),
            )),
            Err(e) if OsError::Invalid.is(&e) => Err(self.err(
                FsErrorKind::Refused,
                format!("{}: a directory cannot be moved into itself", self.input()),
            )),
            Err(e) => Err(self.io(e)),
        }
    }

    /// Where a move or copy to `dest` lands (its parent handle and name), after the checks
    /// both share: not a root, not the source itself, not an existing entry unless
    /// overwriting.
    fn transfer_slot<'d>(
        &self,
        dest: &'d Target,
        opts: TransferOptions,
    ) -> FsResult<(&'d Arc<Dir>, &'d OsString)> {
        let slot = dest.parent_and_name().ok_or_else(|| {
            dest.err(
                FsErrorKind::AlreadyExists,
                format!(
                    "{}: is a configured root directory; give a path inside it",
                    dest.input()
                ),
            )
        })?;
        if Arc::ptr_eq(self.root(), dest.root()) && self.rel() == dest.rel() {
            return Err(self.err(
                FsErrorKind::Refused,
                format!(
                    "{}: source and destination are the same entry",
                    self.input()
                ),
            ));
        }
        if dest.exists() && !opts.overwrite {
            return Err(dest.err(
                FsErrorKind::AlreadyExists,
                format!(
                    "{}: the destination already exists; pass overwrite: true to replace it, or choose another name",
                    dest.input()
                ),
            ));
        }
        Ok(slot)
    }

    fn refuse_into_itself(&self, dest: &Target) -> FsResult<()> {
        if self.is_dir()
            && Arc::ptr_eq(self.root(), dest.root())
            && (self.rel().is_empty()
                || dest
                    .rel()
                    .strip_prefix(self.rel())
                    .is_some_and(|r| r.starts_with('/')))
        {
            return Err(self.err(
                FsErrorKind::Refused,
                format!(
                    "{}: the destination {} is inside the source directory; choose a destination outside it",
                    self.input(),
                    dest.input()
                ),
            ));
        }
        Ok(())
    }

    /// Copies the entry to `dest`: a file's content and mode, a symbolic link as a link (its
    /// text unchanged), a directory with everything in it (special files are left out and
    /// counted). A directory copy is built under a temporary name and renamed into place, so
    /// the destination appears whole or not at all. `stop` is polled between entries.
    pub fn copy_to(
        &self,
        dest: &Target,
        opts: TransferOptions,
        stop: &dyn Fn() -> bool,
    ) -> FsResult<TreeCount> {
        dest.require_writable()?;
        let (dest_parent, dest_name) = self.transfer_slot(dest, opts)?;
        let mut count = TreeCount::default();
        match self.state() {
            TargetState::Missing => return Err(self.not_found()),
            TargetState::Exists(EntryKind::File) => {
                let (file, meta) = self.open_read()?;
                let mut reader = file.into_std();
                let wopts = WriteOptions {
                    create_parents: true,
                    new_file_mode: Some(mode_of(&meta)),
                    mode_owner: Some(owner_of(&meta)),
                };
                let mut copied = 0u64;
                dest.write_atomic_with(&wopts, &mut |out| {
                    copied = io::copy(&mut reader, out)?;
                    Ok(())
                })?;
                count.files = 1;
                count.bytes = copied;
            }
            TargetState::Exists(EntryKind::Symlink) => {
                let text = self.read_link()?;
                let dir = self.dest_dir(dest, dest_parent)?;
                let tmp = temp_name(dest_name);
                symlink_at(&text, &dir, OsStr::new(&tmp)).map_err(|e| dest.io(e))?;
                place(&dir, &tmp, dest_name, opts.overwrite).map_err(|e| {
                    let _ = dir.remove_file(&tmp);
                    dest.io(e)
                })?;
                count.files = 1;
            }
            TargetState::Exists(EntryKind::Dir) => {
                if dest.exists() {
                    return Err(dest.err(
                        FsErrorKind::AlreadyExists,
                        format!(
                            "{}: the destination exists; a directory is never copied onto an existing entry (nothing is merged). Choose a new name or delete it first",
                            dest.input()
                        ),
                    ));
                }
                self.refuse_into_itself(dest)?;
                self.refuse_denied_inside("copy", Some(dest))?;
                let src = self.open_dir()?;
                let dir = self.dest_dir(dest, dest_parent)?;
                let tmp = temp_name(dest_name);
                let result = (|| -> io::Result<TreeCount> {
                    dir.create_dir(&tmp)?;
                    let top = Arc::new(dir.open_dir_nofollow(&tmp)?);
                    let src_meta = src.dir_metadata()?;
                    let count = copy_tree(src, top.clone(), stop)?;
                    set_copied_dir_mode(&top, &src_meta, 0)?;
                    // One flush for the whole tree before it becomes visible.
                    sync_fs(&top)?;
                    place(&dir, &tmp, dest_name, false)?;
                    Ok(count)
                })();
                match result {
                    Ok(c) => count = c,
                    Err(err) => {
                        let _ = remove_tree(&dir, OsStr::new(&tmp));
                        if err.kind() == io::ErrorKind::Interrupted {
                            return Err(self.err(
                                FsErrorKind::Interrupted,
                                format!(
                                    "{}: the copy was cancelled; nothing was created",
                                    self.input()
                                ),
                            ));
                        }
                        return Err(dest.io(err));
                    }
                }
            }
            TargetState::Exists(EntryKind::Other) => {
                return Err(self.err(
                    FsErrorKind::NotAFile,
                    format!(
                        "{}: not a regular file, directory or link (device, socket or FIFO); refused",
                        self.input()
                    ),
                ));
            }
        }
        Ok(count)
    }

    /// The directory the destination's name goes into, creating missing parents.
    fn dest_dir(&self, dest: &Target, dest_parent: &Arc<Dir>) -> FsResult<Arc<Dir>> {
        if dest.missing_dirs().is_empty() {
            Ok(dest_parent.clone())
        } else {
            dest.create_missing_dirs(dest_parent)
        }
    }
}

/// Renames `tmp` to `name` inside `dir` (never replacing unless `overwrite`), then flushes
/// the directory.
fn place(dir: &Dir, tmp: &str, name: &OsStr, overwrite: bool) -> io::Result<()> {
    if overwrite {
        rename_replace(dir, OsStr::new(tmp), dir, name)?;
    } else {
        crate::target::rename_noreplace(dir, OsStr::new(tmp), dir, name)?;
    }
    fsync_dir(dir)
}

/// Gives a directory made by a copy the mode of its source `src` (plus `extra` bits), under
/// the copy rule for set-id bits ([`copy_mode`]). A set-group-ID bit the new directory
/// inherited from its parent (the kernel's group-sharing rule) is kept, as `cp` keeps it.
fn set_copied_dir_mode(dir: &Dir, src: &Metadata, extra: u32) -> io::Result<()> {
    #[cfg(unix)]
    {
        let fd = open_dot(dir)?;
        let now = rustix::fs::fstat(&fd)?;
        let inherited = perm_bits(now.st_mode & rustix::fs::Mode::SGID.bits());
        let mode = copy_mode(
            mode_of(src) | extra,
            owner_of(src),
            (now.st_uid, now.st_gid),
        ) | inherited;
        rustix::fs::fchmod(&fd, to_mode(mode))?;
    }
    // No mode bits: the directory takes its parent's access list.
    #[cfg(not(unix))]
    let _ = (dir, src, extra);
    Ok(())
}

/// Flushes the file system `dir` is on (Linux's `syncfs`; elsewhere `sync`, which flushes
/// every file system).
fn sync_fs(dir: &Dir) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::fs::syncfs(open_dot(dir)?)?;
    #[cfg(all(unix, not(target_os = "linux")))]
    {
        let _ = dir;
        rustix::fs::sync();
    }
    // Windows: no flush of a whole volume without administrator rights; the files were
    // written through and NTFS journals the entries.
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Removes a file or a symbolic link (on Windows a link to a directory is removed as a
/// directory).
fn remove_entry(dir: &Dir, name: &OsStr) -> io::Result<()> {
    #[cfg(unix)]
    {
        dir.remove_file(name)
    }
    #[cfg(not(unix))]
    {
        dir.remove_file_or_symlink(name)
    }
}

/// Removes the directory `name` in `parent` and everything in it, depth first, without
/// recursion and without following any symbolic link (links are unlinked). A subdirectory
/// swapped for a link while this runs is unlinked as a link.
pub(crate) fn remove_tree(parent: &Dir, name: &OsStr) -> io::Result<TreeCount> {
    struct Frame {
        parent: Arc<Dir>,
        name: OsString,
        dir: Arc<Dir>,
    }
    let mut count = TreeCount::default();
    let first = parent.open_dir_nofollow(name)?;
    // The top frame's parent is borrowed; hold it separately so frames own their handles.
    let mut stack: Vec<Frame> = Vec::new();
    let top_dir = Arc::new(first);
    let mut current = top_dir.clone();
    loop {
        let mut descend = None;
        for entry in current.entries()? {
            let entry = entry?;
            let child = entry.file_name();
            if entry.file_type()?.is_dir() {
                match current.open_dir_nofollow(&child) {
                    Ok(d) => {
                        descend = Some((child, Arc::new(d)));
                        break;
                    }
                    Err(e) if OsError::Loop.is(&e) || OsError::NotDir.is(&e) => {
                        remove_entry(&current, &child)?;
                        count.files += 1;
                    }
                    Err(e) => return Err(e),
                }
            } else {
                remove_entry(&current, &child)?;
                count.files += 1;
            }
        }
        if let Some((child, dir)) = descend {
            stack.push(Frame {
                parent: current.clone(),
                name: child,
                dir: dir.clone(),
            });
            current = dir;
            continue;
        }
        match stack.pop() {
            Some(frame) => {
                frame.parent.remove_dir(&frame.name)?;
                count.dirs += 1;
                drop(frame.dir);
                current = frame.parent;
            }
            None => {
                drop(current);
                parent.remove_dir(name)?;
                count.dirs += 1;
                return Ok(count);
            }
        }
    }
}

/// Copies the contents of `src` into the (empty, new) directory `dst`, without recursion.
fn copy_tree(src: Arc<Dir>, dst: Arc<Dir>, stop: &dyn Fn() -> bool) -> io::Result<TreeCount> {
    let mut count = TreeCount::default();
    let mut stack = vec![(src, dst)];
    while let Some((src, dst)) = stack.pop() {
        for entry in src.entries()? {
            if stop() {
                return Err(io::Error::new(io::ErrorKind::Interrupted, "cancelled"));
            }
            let entry = entry?;
            let name = entry.file_name();
            let ft = entry.file_type()?;
            if ft.is_dir() {
                let Ok(sub) = src.open_dir_nofollow(&name) else {
                    count.skipped += 1;
                    continue;
                };
                let sub_meta = sub.dir_metadata()?;
                dst.create_dir(&name)?;
                let new = dst.open_dir_nofollow(&name)?;
                // Keep the source's mode, but stay able to fill the copy.
                set_copied_dir_mode(&new, &sub_meta, 0o700)?;
                stack.push((Arc::new(sub), Arc::new(new)));
                count.dirs += 1;
            } else if ft.is_symlink() {
                #[cfg(unix)]
                {
                    let text = src.read_link_contents(&name)?;
                    symlink_at(&text, &dst, &name)?;
                    count.files += 1;
                }
                // Not made on Windows (see `symlink_at`): left out and counted, which keeps
                // a move across volumes from removing the source.
                #[cfg(not(unix))]
                {
                    count.skipped += 1;
                }
            } else if ft.is_file() {
                let mut opts = OpenOptions::new();
                opts.read(true).follow(FollowSymlinks::No);
                nonblocking(&mut opts);
                let Ok(input) = src.open_with(&name, &opts) else {
                    count.skipped += 1;
                    continue;
                };
                let meta = input.metadata()?;
                if !meta.is_file() {
                    count.skipped += 1;
                    continue;
                }
                // Created without set-id bits (and under the umask, as `cp` creates); they
                // are added back only if the copy has the source's owner and group.
                let mode = mode_of(&meta);
                let mut out_opts = OpenOptions::new();
                out_opts
                    .write(true)
                    .create_new(true)
                    .follow(FollowSymlinks::No);
                #[cfg(unix)]
                out_opts.mode(mode & !SET_ID);
                #[cfg(not(unix))]
                let _ = mode; // no mode bits: the copy takes its directory's access list
                let out = dst.open_with(&name, &out_opts)?;
                let mut reader = input.into_std();
                let mut writer = out.into_std();
                count.bytes += io::copy(&mut reader, &mut writer)?;
                #[cfg(unix)]
                if mode & SET_ID != 0 {
                    let now = rustix::fs::fstat(&writer)?;
                    let kept = copy_mode(mode, (meta.uid(), meta.gid()), (now.st_uid, now.st_gid));
                    if kept & SET_ID != 0 {
                        let mode = perm_bits(now.st_mode) | (kept & SET_ID);
                        rustix::fs::fchmod(&writer, to_mode(mode))?;
                    }
                }
                count.files += 1;
            } else {
                count.skipped += 1;
            }
        }
    }
    Ok(count)
}
