//! Roots: the directories a person allowed, each held as a directory capability.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::denylist::Denylist;
use crate::error::{FsError, FsErrorKind, FsResult};

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
    /// The default workspace under the data directory: created on first use.
    Default,
    /// Internal storage of ringfence itself (spilled tool output): created on first use.
    Internal,
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
    pub fn parse_cli(spec: &str) -> Result<RootSpec, String> {
        if spec.is_empty() {
            return Err("empty root path".into());
        }
        let (path, access) = if let Some(p) = spec.strip_suffix(":ro") {
            (p, Access::ReadOnly)
        } else if let Some(p) = spec.strip_suffix(":rw") {
            (p, Access::ReadWrite)
        } else {
            (spec, Access::ReadWrite)
        };
        if path.is_empty() {
            return Err(format!(
                "root `{spec}` has no path before the access suffix"
            ));
        }
        if path.contains('\0') {
            return Err("root path contains a NUL byte".into());
        }
        Ok(RootSpec::configured(PathBuf::from(path), access))
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
        if self.spec.origin != RootOrigin::Configured
            && let Err(err) = std::fs::create_dir_all(&self.absolute)
        {
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
