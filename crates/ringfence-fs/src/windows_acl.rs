//! Windows: ringfence's private entries get a discretionary access list of their own — full
//! control for the account the server runs as and for SYSTEM, nothing for anyone else,
//! protected from what the folder above would pass down ([`crate::access_list::owner_only`]).
//!
//! A directory or file ringfence makes has the list from its creation (security attributes
//! given to `CreateDirectoryW` / `CreateFileW`). An entry that was there is given it one
//! entry at a time through a handle (`SetKernelObjectSecurity`), which never pushes
//! inheritable entries onto what a directory already holds; the higher-level
//! `SetSecurityInfo` would, and would rewrite the lists of a user's own files in a workspace
//! (or leave them with an empty list). An entry another account owns is refused, not changed;
//! a volume without access lists (FAT, exFAT) is logged once; a list set is read back.
//!
//! Every call here is a plain Win32 call on a handle this module owns or borrows for the
//! call; the buffers Windows fills are sized by asking first, and what Windows allocates is
//! freed with `LocalFree`. Linted on every test run (`scripts/cross.sh check`) and run under
//! Wine (`scripts/cross.sh wine`); never run on Windows itself (SECURITY.md says what Wine
//! cannot show).

#![allow(unsafe_code)]

use std::io;
use std::os::windows::fs::{MetadataExt, OpenOptionsExt};
use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::path::Path;
use std::ptr::null_mut;
use std::sync::OnceLock;

use windows_sys::Win32::Foundation::{
    ERROR_ALREADY_EXISTS, ERROR_INVALID_FUNCTION, ERROR_NOT_SUPPORTED, GENERIC_WRITE, GetLastError,
    HANDLE, INVALID_HANDLE_VALUE, LocalFree,
};
use windows_sys::Win32::Security::Authorization::{
    ConvertSecurityDescriptorToStringSecurityDescriptorW, ConvertSidToStringSidW,
    ConvertStringSecurityDescriptorToSecurityDescriptorW, SDDL_REVISION_1,
};
use windows_sys::Win32::Security::{
    DACL_SECURITY_INFORMATION, GetKernelObjectSecurity, GetTokenInformation,
    OWNER_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, SECURITY_ATTRIBUTES, SetKernelObjectSecurity,
    TOKEN_QUERY, TOKEN_USER, TokenUser,
};
use windows_sys::Win32::Storage::FileSystem::{
    CREATE_NEW, CreateDirectoryW, CreateFileW, FILE_ATTRIBUTE_NORMAL, FILE_ATTRIBUTE_REPARSE_POINT,
    FILE_FLAG_BACKUP_SEMANTICS, FILE_FLAG_OPEN_REPARSE_POINT, FILE_GENERIC_WRITE,
    FILE_SHARE_DELETE, FILE_SHARE_READ, FILE_SHARE_WRITE, FILE_WRITE_DATA,
    GetVolumeInformationByHandleW, OPEN_ALWAYS, READ_CONTROL, ReOpenFile, WRITE_DAC,
};
use windows_sys::Win32::System::Threading::{GetCurrentProcess, OpenProcessToken};

use crate::Opening;
use crate::access_list::{self, Reading};
use crate::private::Tally;

/// The account the process runs as: its SID in text (`S-1-5-21-…`), read once from the
/// process token, and how Windows spells it in SDDL (the same SID, or an alias such as `LA`
/// for the machine's built-in administrator).
fn account_names() -> io::Result<&'static [String; 2]> {
    static ACCOUNT: OnceLock<[String; 2]> = OnceLock::new();
    if let Some(names) = ACCOUNT.get() {
        return Ok(names);
    }
    let sid = read_account()?;
    let owner = Descriptor::from_sddl(&format!("O:{sid}"))?;
    let spelled = descriptor_text(owner.0, OWNER_SECURITY_INFORMATION)?;
    let spelled = spelled.strip_prefix("O:").unwrap_or(&spelled).to_string();
    Ok(ACCOUNT.get_or_init(|| [sid, spelled]))
}

/// The account's SID in text.
fn account() -> io::Result<&'static str> {
    Ok(&account_names()?[0])
}

fn read_account() -> io::Result<String> {
    let mut raw: HANDLE = null_mut();
    // SAFETY: the pseudo-handle of the current process needs no closing; `raw` is written
    // on success only.
    if unsafe { OpenProcessToken(GetCurrentProcess(), TOKEN_QUERY, &mut raw) } == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a handle OpenProcessToken just returned, owned from here on.
    let token = unsafe { OwnedHandle::from_raw_handle(raw) };
    // SAFETY: `buf` is null with length 0, or holds `len` bytes.
    let buf = filled(|buf, len, needed| unsafe {
        GetTokenInformation(token.as_raw_handle(), TokenUser, buf, len, needed)
    })?;
    // SAFETY: on success the buffer starts with a TOKEN_USER whose SID points into the
    // buffer, which lives until the end of this function.
    let user = unsafe { &*buf.as_ptr().cast::<TOKEN_USER>() };
    let mut text: *mut u16 = null_mut();
    // SAFETY: a valid SID; on success `text` is a NUL-terminated string to LocalFree.
    if unsafe { ConvertSidToStringSidW(user.User.Sid, &mut text) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(take_wide(text))
}

/// What a Win32 call that fills a buffer writes: asked first with no buffer for the size, then
/// with a buffer of that size (`u64` words, so the structure at its start is aligned).
fn filled(
    mut fill: impl FnMut(*mut std::ffi::c_void, u32, &mut u32) -> windows_sys::core::BOOL,
) -> io::Result<Vec<u64>> {
    let mut needed = 0u32;
    fill(null_mut(), 0, &mut needed);
    if needed == 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = vec![0u64; (needed as usize).div_ceil(8)];
    if fill(buf.as_mut_ptr().cast(), needed, &mut needed) == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(buf)
}

/// The NUL-terminated UTF-16 string Windows allocated at `text`, as a `String`; freed.
fn take_wide(text: *mut u16) -> String {
    // SAFETY: `text` is a NUL-terminated string allocated by Windows with LocalAlloc, read
    // up to its NUL and freed once.
    unsafe {
        let mut len = 0;
        while *text.add(len) != 0 {
            len += 1;
        }
        let s = String::from_utf16_lossy(std::slice::from_raw_parts(text, len));
        LocalFree(text.cast());
        s
    }
}

/// A security descriptor Windows allocated from SDDL text; freed on drop.
struct Descriptor(PSECURITY_DESCRIPTOR);

impl Descriptor {
    fn from_sddl(sddl: &str) -> io::Result<Self> {
        let wide: Vec<u16> = sddl.encode_utf16().chain(std::iter::once(0)).collect();
        let mut sd: PSECURITY_DESCRIPTOR = null_mut();
        // SAFETY: `wide` is NUL-terminated; on success `sd` is a descriptor to LocalFree.
        let ok = unsafe {
            ConvertStringSecurityDescriptorToSecurityDescriptorW(
                wide.as_ptr(),
                SDDL_REVISION_1,
                &mut sd,
                null_mut(),
            )
        };
        if ok == 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self(sd))
    }
}

impl Drop for Descriptor {
    fn drop(&mut self) {
        // SAFETY: allocated by ConvertStringSecurityDescriptorToSecurityDescriptorW, freed once.
        unsafe { LocalFree(self.0) };
    }
}

/// The owner and discretionary list of the entry behind `handle` (opened with
/// `READ_CONTROL`), as SDDL (`O:<owner>D:<list>`).
fn security_text(handle: HANDLE) -> io::Result<String> {
    const WHAT: u32 = OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION;
    // SAFETY: `buf` is null with length 0, or holds `len` bytes.
    let mut buf = filled(|buf, len, needed| unsafe {
        GetKernelObjectSecurity(handle, WHAT, buf, len, needed)
    })?;
    descriptor_text(buf.as_mut_ptr().cast(), WHAT)
}

/// The parts `what` of the security descriptor at `sd`, as SDDL.
fn descriptor_text(sd: PSECURITY_DESCRIPTOR, what: u32) -> io::Result<String> {
    let mut text: *mut u16 = null_mut();
    // SAFETY: `sd` is a valid descriptor for the call; on success `text` is a NUL-terminated
    // string to LocalFree.
    if unsafe {
        ConvertSecurityDescriptorToStringSecurityDescriptorW(
            sd,
            SDDL_REVISION_1,
            what,
            &mut text,
            null_mut(),
        )
    } == 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(take_wide(text))
}

/// How the entry behind `handle` (opened with `READ_CONTROL`) reads now.
fn reading(handle: HANDLE) -> io::Result<Reading> {
    let text = security_text(handle)?;
    let [sid, spelled] = account_names()?;
    access_list::read(&text, &[sid.as_str(), spelled.as_str()]).ok_or_else(|| {
        io::Error::other(format!(
            "cannot read the access list Windows reported: {text}"
        ))
    })
}

/// Whether the volume of the entry behind `handle` keeps access lists (NTFS and ReFS do; FAT
/// and exFAT do not, and answer every query with a list that lets everyone in).
fn keeps_access_lists(handle: HANDLE) -> io::Result<bool> {
    /// `FILE_PERSISTENT_ACLS` among a volume's flags.
    const PERSISTENT_ACLS: u32 = 0x8;
    let mut flags = 0u32;
    // SAFETY: no name buffers (null, length 0); `flags` is written on success.
    let ok = unsafe {
        GetVolumeInformationByHandleW(
            handle,
            null_mut(),
            0,
            null_mut(),
            null_mut(),
            &mut flags,
            null_mut(),
            0,
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(flags & PERSISTENT_ACLS != 0)
}

/// Gives the entry behind `handle` (opened with `READ_CONTROL | WRITE_DAC`) the owner-only
/// list unless it has it (or one as tight); whether it changed. An entry another account
/// owns is refused, not changed: its owner could widen the list again (as `fchmod` fails on
/// Unix). The list is read back after it is set.
fn tighten(handle: HANDLE, dir: bool, path: &Path) -> io::Result<bool> {
    if !keeps_access_lists(handle)? {
        warn_no_access_lists(path);
        return Ok(false);
    }
    let before = reading(handle)?;
    if !before.owned_by_account {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is owned by {}, not by the account ringfence runs as: remove it, or take ownership of it (takeown /f)",
                path.display(),
                before.owner
            ),
        ));
    }
    if before.is_owner_only() {
        return Ok(false);
    }
    let sd = Descriptor::from_sddl(&access_list::owner_only(account()?, dir))?;
    // SAFETY: `handle` has WRITE_DAC; `sd.0` is a valid descriptor for the call.
    if unsafe { SetKernelObjectSecurity(handle, DACL_SECURITY_INFORMATION, sd.0) } == 0 {
        return Err(io::Error::last_os_error());
    }
    let after = reading(handle)?;
    if !after.account_full || !after.others.is_empty() {
        return Err(io::Error::other(format!(
            "{}: the access list set was not kept (others in it: {})",
            path.display(),
            after.others.join(", ")
        )));
    }
    Ok(true)
}

/// Whether `e` says the file system does not do access lists (some network shares).
fn no_access_lists(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error().map(|c| c as u32),
        Some(ERROR_NOT_SUPPORTED | ERROR_INVALID_FUNCTION)
    )
}

/// Logs, once a process, that the file system keeps no access lists.
fn warn_no_access_lists(path: &Path) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    WARNED.call_once(|| {
        tracing::warn!(
            entry = %path.display(),
            "this file system keeps no access lists: ringfence's data here is not private to this account; move the data directory to an NTFS volume (the default under %LOCALAPPDATA% is one)"
        );
    });
}

/// A file system that refuses the calls as unsupported is logged like one without access
/// lists; other errors are returned.
fn unless_unsupported(result: io::Result<bool>, path: &Path) -> io::Result<bool> {
    match result {
        Err(e) if no_access_lists(&e) => {
            warn_no_access_lists(path);
            Ok(false)
        }
        other => other,
    }
}

/// The path as a NUL-terminated wide string for a Win32 call: a path holding a NUL is
/// refused (as the standard library does), and a long path in the usual drive form
/// (`C:\…`, no `.` or `..`) is given the `\\?\` prefix that lets Windows take it whole.
fn wide(path: &Path) -> io::Result<Vec<u16>> {
    use std::os::windows::ffi::OsStrExt;
    use std::path::{Component, Prefix};
    let mut name: Vec<u16> = path.as_os_str().encode_wide().collect();
    if name.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} holds a NUL character", path.display()),
        ));
    }
    let plain = path
        .components()
        .all(|c| !matches!(c, Component::CurDir | Component::ParentDir));
    let on_a_drive = matches!(
        path.components().next(),
        Some(Component::Prefix(p)) if matches!(p.kind(), Prefix::Disk(_))
    );
    if name.len() >= 248 && plain && on_a_drive && path.has_root() {
        let slash = u16::from(b'/');
        let backslash = u16::from(b'\\');
        for unit in &mut name {
            if *unit == slash {
                *unit = backslash;
            }
        }
        let mut prefixed: Vec<u16> = r"\\?\".encode_utf16().collect();
        prefixed.append(&mut name);
        name = prefixed;
    }
    name.push(0);
    Ok(name)
}

/// Calls `make` with security attributes holding the owner-only list, so that an entry it
/// creates has that list from its creation on.
fn with_owner_only<T>(
    dir: bool,
    make: impl FnOnce(*const SECURITY_ATTRIBUTES) -> T,
) -> io::Result<T> {
    let sd = Descriptor::from_sddl(&access_list::owner_only(account()?, dir))?;
    let attributes = SECURITY_ATTRIBUTES {
        nLength: size_of::<SECURITY_ATTRIBUTES>() as u32,
        lpSecurityDescriptor: sd.0,
        bInheritHandle: 0,
    };
    Ok(make(&attributes))
}

/// Makes the directory `path` (its parent exists) with the owner-only list from its
/// creation. `AlreadyExists` when the name is taken.
pub(crate) fn create_private_dir(path: &Path) -> io::Result<()> {
    let name = wide(path)?;
    // SAFETY: `name` is NUL-terminated; the attributes live for the call; the error is read
    // right after it, before the descriptor is freed.
    with_owner_only(true, |attributes| {
        if unsafe { CreateDirectoryW(name.as_ptr(), attributes) } == 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    })??;
    // A volume without access lists takes the directory all the same: say so now.
    if let Ok(Some((dir, _))) = open_entry(path, false)
        && !keeps_access_lists(dir.as_raw_handle()).unwrap_or(true)
    {
        warn_no_access_lists(path);
    }
    Ok(())
}

/// Opens `path` as `how` says. A file it creates has the owner-only list from its creation;
/// one that was there is given it. When that cannot be done, a file opened to append to (the
/// audit trail, a database) is logged and opened all the same, as on Unix, where opening
/// leaves an existing file's mode alone; a file opened to be rewritten is not opened.
pub(crate) fn open_private_file(path: &Path, how: Opening) -> io::Result<std::fs::File> {
    // As the standard library opens: appending writes land at the end; a file to be cut is
    // opened as it is and cut below (CREATE_ALWAYS would refuse a hidden or system file, and
    // cut it before its owner is checked); a new one is never reached through a link.
    let (access, disposition, flags) = match how {
        Opening::Append => (FILE_GENERIC_WRITE & !FILE_WRITE_DATA, OPEN_ALWAYS, 0),
        Opening::Truncate => (GENERIC_WRITE, OPEN_ALWAYS, 0),
        Opening::New => (GENERIC_WRITE, CREATE_NEW, FILE_FLAG_OPEN_REPARSE_POINT),
    };
    let name = wide(path)?;
    // SAFETY: `name` is NUL-terminated; the attributes live for the call; the error is read
    // right after it, on the same thread, before the descriptor is freed.
    let (raw, existed) = with_owner_only(false, |attributes| {
        let raw = unsafe {
            CreateFileW(
                name.as_ptr(),
                access,
                FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                attributes,
                disposition,
                FILE_ATTRIBUTE_NORMAL | flags,
                null_mut(),
            )
        };
        if raw == INVALID_HANDLE_VALUE {
            return Err(io::Error::last_os_error());
        }
        let existed =
            disposition == OPEN_ALWAYS && unsafe { GetLastError() } == ERROR_ALREADY_EXISTS;
        Ok((raw, existed))
    })??;
    // SAFETY: a handle CreateFileW just returned, owned by the File from here on.
    let file = unsafe { std::fs::File::from_raw_handle(raw) };
    if existed {
        match (how, restrict_file(&file, path)) {
            (_, Ok(())) => {}
            // The audit trail and a database: what was there is opened all the same, as on
            // Unix, and tightened at start where it can be.
            (Opening::Append, Err(e)) => {
                tracing::warn!(entry = %path.display(), error = %e, "cannot make this existing file private");
            }
            // A file about to hold what ringfence writes whole: not into one another account
            // owns or can read.
            (_, Err(e)) => return Err(e),
        }
        if how == Opening::Truncate {
            file.set_len(0)?;
        }
    }
    Ok(file)
}

/// Gives the file `file` the owner-only list, through a second handle to the same file
/// (`ReOpenFile`), so no name is looked up again.
fn restrict_file(file: &std::fs::File, path: &Path) -> io::Result<()> {
    // SAFETY: `file`'s handle is valid for the call; the new handle is checked and owned.
    let raw = unsafe {
        ReOpenFile(
            file.as_raw_handle(),
            READ_CONTROL | WRITE_DAC,
            FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
            0,
        )
    };
    if raw == INVALID_HANDLE_VALUE {
        return unless_unsupported(Err(io::Error::last_os_error()), path).map(drop);
    }
    // SAFETY: a handle ReOpenFile just returned, owned from here on.
    let handle = unsafe { OwnedHandle::from_raw_handle(raw) };
    unless_unsupported(tighten(handle.as_raw_handle(), false, path), path).map(drop)
}

/// Opens the entry at `path` itself (a link or junction is not followed) to read its list,
/// and to set it when `to_change`: `None` for a reparse point or anything but a file or a
/// directory.
#[allow(clippy::disallowed_methods)] // the operator's data directory, not a root
fn open_entry(path: &Path, to_change: bool) -> io::Result<Option<(std::fs::File, bool)>> {
    let access = if to_change {
        READ_CONTROL | WRITE_DAC
    } else {
        READ_CONTROL
    };
    let file = std::fs::OpenOptions::new()
        .access_mode(access)
        .share_mode(FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
        .custom_flags(FILE_FLAG_BACKUP_SEMANTICS | FILE_FLAG_OPEN_REPARSE_POINT)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.file_attributes() & FILE_ATTRIBUTE_REPARSE_POINT != 0 {
        return Ok(None);
    }
    if meta.is_dir() {
        Ok(Some((file, true)))
    } else if meta.is_file() {
        Ok(Some((file, false)))
    } else {
        Ok(None)
    }
}

/// The owner and access list of the entry at `path`, read (for `ringfence doctor`).
pub(crate) fn access_of(path: &Path) -> io::Result<Option<Reading>> {
    match open_entry(path, false)? {
        Some((entry, _)) => {
            if !keeps_access_lists(entry.as_raw_handle())? {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "its volume keeps no access lists (FAT, exFAT): any account that can reach it may read it",
                ));
            }
            reading(entry.as_raw_handle()).map(Some)
        }
        None => Ok(None),
    }
}

/// [`crate::make_private`] on Windows: the owner-only list on `path` and, by `reach`, on what
/// is beneath it; links and junctions are neither followed nor changed. Returns how many
/// entries changed; an entry that cannot be changed (another account's) is skipped and the
/// first error returned after the rest.
pub(crate) fn make_private(path: &Path, reach: crate::Reach) -> io::Result<u64> {
    let mut tally = Tally::default();
    visit(&mut tally, path, reach, 0);
    tally.finish()
}

#[allow(clippy::disallowed_methods)] // the operator's data directory, not a root
fn visit(tally: &mut Tally, path: &Path, reach: crate::Reach, depth: usize) {
    let (entry, is_dir) = match open_entry(path, true) {
        Ok(Some(found)) => found,
        Ok(None) => return,
        // Removed meanwhile, or never there: nothing to tighten.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return,
        Err(e) => return tally.fail(e),
    };
    if reach.changes(is_dir, depth) {
        match unless_unsupported(tighten(entry.as_raw_handle(), is_dir, path), path) {
            Ok(true) => tally.changed += 1,
            Ok(false) => {}
            Err(e) => tally.fail(e),
        }
    }
    if !is_dir || !reach.enters(depth) {
        return;
    }
    let children = match std::fs::read_dir(path) {
        Ok(children) => children,
        Err(e) => return tally.fail(e),
    };
    for child in children {
        let child = match child {
            Ok(child) => child,
            Err(e) => {
                tally.fail(e);
                continue;
            }
        };
        // The type as listed (links not followed); `open_entry` judges it again.
        let Ok(kind) = child.file_type() else {
            continue;
        };
        if !kind.is_symlink() && reach.visits(kind.is_dir()) {
            visit(tally, &child.path(), reach, depth + 1);
        }
    }
}
