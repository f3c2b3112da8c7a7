//! Roots: the directories a person allowed, each held as a directory capability.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::denylist::Denylist;
use crate::error::{FsError, FsErrorKind, FsResult, RootSpecError};

/// What the tools may do beneath a root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// Read, list and search only.
    ReadOnly,
    /// Everything, including create, overwrite and edit.
    ReadWrite,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        }
    }
}

/// How a root came to be, which decides whether it may be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootOrigin {
    /// Configured by the user: never created; every call errors until it exists.
    Configured,
    /// The default workspace under the data directory: created on first use (mode 0700).
    Default,
    /// Internal storage of ringfence itself (spilled tool output): created on first use
    /// (mode 0700).
    Internal,
    /// One user's directory made from a configured template (`/srv/ringfence/{user}`):
    /// created on first use, readable by the server's account only (mode 0700).
    PerUser,
}

/// The placeholder a root template names the user with, as a whole path component.
pub const USER_PLACEHOLDER: &str = "{user}";

/// A user name as one path component: ASCII letters, digits and `-_.@+` are kept, anything
/// else (and a leading `.`) becomes `%XX` per byte, so distinct names give distinct
/// directories, none of them `.`, `..`, hidden or containing `/`. Names over 128 bytes are
/// cut and suffixed with a hash of the whole name.
pub fn user_dir_name(user: &str) -> String {
    let mut out = String::with_capacity(user.len());
    for (i, b) in user.bytes().enumerate() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'@' | b'+')
            || (b == b'.' && i > 0);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("%00");
    }
    if out.len() > 128 {
        let hash = blake3::hash(user.as_bytes()).to_hex();
        out.truncate(100);
        out.push('~');
        out.push_str(&hash[..16]);
    }
    out
}

/// A root's configuration, before anything is opened.
#[derive(Debug, Clone)]
pub struct RootSpec {
    /// Absolute path of the directory.
    pub path: PathBuf,
    pub access: Access,
    pub origin: RootOrigin,
    /// Short name used in messages instead of the absolute path.
    pub label: String,
}

impl RootSpec {
    /// Parses `PATH` or `PATH:ro` / `PATH:rw` (the `serve ROOT[:ro]` syntax).
    pub fn parse_cli(spec: &str) -> Result<RootSpec, RootSpecError> {
        if spec.is_empty() {
            return Err(RootSpecError::Empty);
        }
        let (path, access) = if let Some(p) = spec.strip_suffix(":ro") {
            (p, Access::ReadOnly)
        } else if let Some(p) = spec.strip_suffix(":rw") {
            (p, Access::ReadWrite)
        } else {
            (spec, Access::ReadWrite)
        };
        if path.is_empty() {
            return Err(RootSpecError::NoPath {
                spec: spec.to_owned(),
            });
        }
        if path.contains('\0') {
            return Err(RootSpecError::Nul);
        }
        Ok(RootSpec::configured(PathBuf::from(path), access))
    }

    /// Whether the path names the user (`{user}` as one of its components): then every
    /// user gets their own root, made with [`RootSpec::for_user`].
    pub fn is_template(&self) -> bool {
        self.path
            .components()
            .any(|c| c.as_os_str() == USER_PLACEHOLDER)
    }

    /// A template's root for `user`: every `{user}` component replaced by
    /// [`user_dir_name`]`(user)`, created on first use. A spec that is not a template is
    /// returned unchanged (shared by every user).
    pub fn for_user(&self, user: &str) -> RootSpec {
        if !self.is_template() {
            return self.clone();
        }
        let name = user_dir_name(user);
        let path: PathBuf = self
            .path
            .components()
            .map(|c| {
                if c.as_os_str() == USER_PLACEHOLDER {
                    std::ffi::OsString::from(&name)
                } else {
                    c.as_os_str().to_owned()
                }
            })
            .collect();
        let label = self.label.replace(USER_PLACEHOLDER, &name);
        RootSpec {
            label: if label.is_empty() {
                label_for(&path)
            } else {
                label
            },
            path,
            access: self.access,
            origin: RootOrigin::PerUser,
        }
    }

    pub fn configured(path: PathBuf, access: Access) -> RootSpec {
        let label = label_for(&path);
        RootSpec {
            path,
            access,
            origin: RootOrigin::Configured,
            label,
        }
    }
}

fn label_for(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".to_owned())
}

/// A root: a directory capability plus its access level and denylist.
///
/// The directory is opened lazily, on each call until it succeeds, so a configured root that
/// is created after start-up starts working without a restart, and one that does not exist
/// yields [`FsErrorKind::RootMissing`] on every call.
pub struct Root {
    spec: RootSpec,
    /// The path made absolute, lexically normalised.
    absolute: PathBuf,
    denylist: Arc<Denylist>,
    opened: Mutex<Option<Opened>>,
}

#[derive(Clone)]
struct Opened {
    dir: Arc<Dir>,
    canonical: PathBuf,
}

impl std::fmt::Debug for Root {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Root")
            .field("label", &self.spec.label)
            .field("access", &self.spec.access)
            .finish_non_exhaustive()
    }
}

impl Root {
    /// Makes a root from its spec. The path must be absolute; nothing is opened yet.
    pub fn new(spec: RootSpec, denylist: Arc<Denylist>) -> FsResult<Root> {
        if !spec.path.is_absolute() {
            return Err(FsError::new(
                FsErrorKind::InvalidPath,
                spec.label.clone(),
                "a root must be an absolute path",
            ));
        }
        let absolute = normalize_lexically(&spec.path);
        Ok(Root {
            spec,
            absolute,
            denylist,
            opened: Mutex::new(None),
        })
    }

    /// A root at the existing directory `target` inside another root: same access level,
    /// the parent's denylist rebased onto it, the directory opened through the parent's
    /// handle (never by its path). Used to narrow a session to a client's MCP roots.
    pub fn subroot(target: &crate::Target) -> FsResult<Root> {
        let parent = target.root();
        let dir = target.open_dir()?;
        let opened_parent = parent.opened()?;
        let rel = target.rel();
        let join = |base: &Path| {
            if rel.is_empty() {
                base.to_path_buf()
            } else {
                base.join(rel)
            }
        };
        let absolute = join(&parent.absolute);
        Ok(Root {
            spec: RootSpec {
                path: absolute.clone(),
                access: parent.access(),
                origin: RootOrigin::Configured,
                label: format!("{}/{}", parent.label(), rel),
            },
            absolute,
            denylist: Arc::new(parent.denylist().rebased(rel)),
            opened: Mutex::new(Some(Opened {
                dir,
                canonical: join(&opened_parent.canonical),
            })),
        })
    }

    pub fn label(&self) -> &str {
        &self.spec.label
    }

    pub fn access(&self) -> Access {
        self.spec.access
    }

    pub fn origin(&self) -> RootOrigin {
        self.spec.origin
    }

    pub fn denylist(&self) -> &Denylist {
        &self.denylist
    }

    pub(crate) fn denylist_arc(&self) -> Arc<Denylist> {
        self.denylist.clone()
    }

    /// The root's absolute path as configured. Only for places that must show it to the user
    /// who configured it (spill notices, `ringfence tools`); never logged.
    pub fn absolute_path(&self) -> &Path {
        &self.absolute
    }

    /// The root's real location (symlinks above it resolved), to compare roots that nest.
    pub(crate) fn canonical(&self) -> FsResult<PathBuf> {
        Ok(self.opened()?.canonical)
    }

    /// The directory capability, opening (and for default/internal roots creating) it on
    /// first use.
    pub fn dir(&self) -> FsResult<Arc<Dir>> {
        Ok(self.opened()?.dir)
    }

    fn opened(&self) -> FsResult<Opened> {
        let mut slot = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(opened) = slot.as_ref() {
            return Ok(opened.clone());
        }
        let opened = self.open_now()?;
        *slot = Some(opened.clone());
        Ok(opened)
    }

    #[allow(clippy::disallowed_methods)] // the one place a root is opened by ambient path
    fn open_now(&self) -> FsResult<Opened> {
        let missing = || {
            FsError::new(
                FsErrorKind::RootMissing,
                self.spec.label.clone(),
                format!(
                    "the configured root `{}` does not exist; it is never created automatically. \
                     Ask the user to create the directory or change the configuration",
                    self.spec.label
                ),
            )
        };
        // What ringfence creates is private to the account it runs as (0700, parents too):
        // the default workspace and the saved outputs live in the data directory, a `{user}`
        // directory is one user's.
        let created = match self.spec.origin {
            RootOrigin::Configured => Ok(()),
            RootOrigin::Default | RootOrigin::Internal | RootOrigin::PerUser => {
                crate::private::create_private_dir_all(&self.absolute)
            }
        };
        if let Err(err) = created {
            return Err(FsError::from_io(&self.spec.label, err));
        }
        let dir = match Dir::open_ambient_dir(&self.absolute, ambient_authority()) {
            Ok(dir) => dir,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Err(missing()),
            Err(err) if err.kind() == std::io::ErrorKind::NotADirectory => {
                return Err(FsError::new(
                    FsErrorKind::RootMissing,
                    self.spec.label.clone(),
                    format!(
                        "the configured root `{}` is not a directory",
                        self.spec.label
                    ),
                ));
            }
            Err(err) => return Err(FsError::from_io(&self.spec.label, err)),
        };
        let canonical =
            std::fs::canonicalize(&self.absolute).unwrap_or_else(|_| self.absolute.clone());
        Ok(Opened {
            dir: Arc::new(dir),
            canonical,
        })
    }

    /// Maps an absolute path to components relative to this root, if it lies inside it.
    ///
    /// [`Lookup::Spelling`] accepts the root by its configured and its canonical spelling
    /// (string work only). [`Lookup::Alias`] also judges paths that reach the root through
    /// an alias (a symlinked parent, `..` above the root) by resolving the part of the path
    /// *above* the root — one `canonicalize` per prefix, so callers try every root by
    /// spelling first. Returns `None` when the path is not inside this root. The part below
    /// the root is returned unresolved: the caller resolves it beneath the capability.
    #[allow(clippy::disallowed_methods)] // resolves only the part of the path *above* the root
    pub(crate) fn relative_components(
        &self,
        path: &Path,
        lookup: Lookup,
    ) -> FsResult<Option<Vec<String>>> {
        let opened = self.opened()?;
        for base in [&self.absolute, &opened.canonical] {
            if let Ok(rest) = path.strip_prefix(base) {
                return Ok(Some(components_of(rest)));
            }
        }
        // `..` in the part above the root would make the answer depend on whether directories
        // outside the root exist: an existence probe. Aliases are judged without it.
        if lookup == Lookup::Spelling || path.components().any(|c| c == Component::ParentDir) {
            return Ok(None);
        }
        let mut prefix = PathBuf::new();
        let mut comps = path.components();
        while let Some(c) = comps.next() {
            prefix.push(c.as_os_str());
            if matches!(c, Component::RootDir) {
                continue;
            }
            if let Ok(canon) = std::fs::canonicalize(&prefix) {
                if canon == opened.canonical {
                    return Ok(Some(components_of(comps.as_path())));
                }
            } else {
                break;
            }
        }
        Ok(None)
    }
}

/// How hard [`Root::relative_components`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lookup {
    /// The configured or canonical spelling of the root, as a path prefix.
    Spelling,
    /// Also aliases: the part above the root resolved on disk.
    Alias,
}

fn components_of(rest: &Path) -> Vec<String> {
    rest.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            Component::ParentDir => Some("..".to_owned()),
            _ => None,
        })
        .collect()
}

/// Whether `a` and `b` name the same place or one lies inside the other, judged by their
/// spellings (normalised lexically) and by their real locations: the longest existing part
/// of each resolved on disk (symlinks followed), the rest appended. Used to keep client roots
/// away from ringfence's data directory however either is spelled.
pub fn paths_overlap(a: &Path, b: &Path) -> bool {
    let nested = |x: &Path, y: &Path| x.starts_with(y) || y.starts_with(x);
    let (a, b) = (normalize_lexically(a), normalize_lexically(b));
    if nested(&a, &b) {
        return true;
    }
    let (ra, rb) = (real_location(&a), real_location(&b));
    nested(&ra, &rb) || nested(&ra, &b) || nested(&a, &rb)
}

/// `path` with its longest existing prefix resolved on disk and the rest appended.
#[allow(clippy::disallowed_methods)] // compares locations; nothing is opened or used
fn real_location(path: &Path) -> PathBuf {
    let mut prefix = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&prefix) {
            let mut out = real;
            out.extend(rest.iter().rev());
            return out;
        }
        match (prefix.file_name().map(|n| n.to_owned()), prefix.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                prefix = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Removes `.` and resolves `..` lexically (used only for the root's own configured path).
pub fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_dir_names_are_single_safe_distinct_components() {
        assert_eq!(user_dir_name("alice"), "alice");
        assert_eq!(user_dir_name("a.b-c_d@e+f"), "a.b-c_d@e+f");
        assert_eq!(user_dir_name("auth0|123"), "auth0%7C123");
        assert_eq!(user_dir_name(".."), "%2E.");
        assert_eq!(user_dir_name("."), "%2E");
        assert_eq!(user_dir_name("../x"), "%2E.%2Fx");
        assert_eq!(user_dir_name(""), "%00");
        assert_eq!(user_dir_name("é"), "%C3%A9");
        // `%` itself is encoded, so an encoded name cannot collide with a literal one.
        assert_ne!(user_dir_name("a|b"), user_dir_name("a%7Cb"));
        let long = "x".repeat(300);
        let name = user_dir_name(&long);
        assert!(name.len() <= 128, "{}", name.len());
        assert_ne!(name, user_dir_name(&"x".repeat(301)));
        for user in ["a/b", "..", "/", "a\0b", "\\", ".hidden"] {
            let n = user_dir_name(user);
            assert!(
                !n.contains('/') && !n.contains('\0') && !n.starts_with('.'),
                "{n}"
            );
        }
    }

    #[test]
    fn templates_expand_per_user() {
        let spec = RootSpec::configured("/srv/rf/{user}/work".into(), Access::ReadOnly);
        assert!(spec.is_template());
        let a = spec.for_user("alice");
        assert_eq!(a.path, PathBuf::from("/srv/rf/alice/work"));
        assert_eq!(a.origin, RootOrigin::PerUser);
        assert_eq!(a.access, Access::ReadOnly);
        let evil = spec.for_user("../bob");
        assert_eq!(evil.path, PathBuf::from("/srv/rf/%2E.%2Fbob/work"));
        // Only a whole component is a placeholder; a shared root stays as it is.
        let shared = RootSpec::configured("/srv/x{user}".into(), Access::ReadWrite);
        assert!(!shared.is_template());
        assert_eq!(shared.for_user("alice").path, PathBuf::from("/srv/x{user}"));
        assert_eq!(shared.for_user("alice").origin, RootOrigin::Configured);
    }
}
