//! Containment for ringfence.
//!
//! Every file-system operation the tools perform goes through this crate. A [`Root`] holds a
//! directory capability (a cap-std [`cap_std::fs::Dir`]); a [`Workspace`] resolves a path a
//! model typed into a [`Target`] — the handle of the parent directory plus a final name —
//! by walking one component at a time beneath the root's handle, following symlinks only
//! while they stay inside. The operation then runs on that same handle, so the check and
//! the use are one kernel lookup: there is no window in which a path string could be
//! re-interpreted.
//!
//! The only ambient-path operations are in [`Root`]: opening (or, for the default and internal
//! roots, creating) the root directory itself, and judging whether an absolute path names a
//! location inside a root; and in [`make_private`] and [`create_private_dir_all`], which keep
//! the operator's data directory private.

pub mod access_list;
mod denylist;
mod error;
mod ops;
mod os_error;
mod private;
mod root;
mod target;
mod walk;
#[cfg(windows)]
mod windows_acl;
mod workspace;

pub use cap_std::fs::{Dir, File, FileType, Metadata};
#[cfg(unix)]
pub use cap_std::fs::{MetadataExt, PermissionsExt};
pub use denylist::Denylist;
pub use error::{ClientRootsError, DenylistError, FsError, FsErrorKind, FsResult, RootSpecError};
pub use ops::{MoveMethod, TransferOptions, TreeCount};
#[cfg(windows)]
pub use private::access_list_of;
pub use private::{
    Opening, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, Reach, create_private_dir_all,
    create_private_file, make_private, open_with_mode, replace_file, write_private_file,
};
pub use root::{
    Access, Root, RootOrigin, RootSpec, USER_PLACEHOLDER, normalize_lexically, paths_overlap,
    user_dir_name,
};
pub use target::{EntryKind, Target, TargetState, WriteOptions, mode_of, owner_of};
pub use walk::{WalkEntry, WalkOptions, WalkState, walk, walk_sorted};
pub use workspace::{ClientRoots, CurrentDir, MAX_PATH_BYTES, MAX_SYMLINKS, Workspace};
