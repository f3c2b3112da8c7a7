//! The kernel sandbox of ringfence's subprocesses (issue 15; the first part: the policy a
//! process applies to itself). A process restricts *itself* — ringfence's workspace forbids
//! `unsafe`, so no `pre_exec` hook runs in a forked child; instead the child is ringfence
//! started in a sandbox mode, which calls [`restrict_self`] and then executes the command,
//! which inherits every restriction:
//!
//! - **Landlock** (the newest ABI the kernel offers, up to 7): the file system is reachable
//!   only beneath the policy's paths — read and execute beneath `read`, everything beneath
//!   `write` — and, from ABI 6, signals and abstract Unix sockets are scoped to the sandbox.
//!   Anything else (the home directory, ringfence's data directory, other users' workspaces)
//!   is refused by the kernel, whatever the command spells or runs.
//! - **no_new_privs**: set-user-ID programs (`sudo`, `su`) gain nothing.
//! - **Resource limits**: processes, open files, file size, CPU time, address space.
//!
//! What was applied is reported ([`Applied`]), so a result can say which level held; a policy
//! that requires Landlock fails when the kernel cannot enforce it.

mod cgroup;
mod kill;
mod mounts;
mod run;
mod seccomp;
mod spawn;
mod supervise;

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use serde::{Deserialize, Serialize};

pub use mounts::{Entered, MountError, NamespaceKind, read_only_outside};
pub use run::{Ended, Exit, Helper, Outcome, Stream, run};
pub use seccomp::Network;
pub use spawn::{PATH, clean_env};
pub use supervise::{HELPER_ARG, Spec, helper_main};

/// The newest Landlock ABI this crate asks for.
const NEWEST: ABI = ABI::V7;

/// What a sandboxed process may reach.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Read and execute beneath these (system directories, read-only roots).
    pub read: Vec<PathBuf>,
    /// Everything beneath these (writable roots, the call's temporary directory, `/dev/null`).
    pub write: Vec<PathBuf>,
    pub limits: Limits,
    /// Whether sockets may be opened (see the system-call filter).
    pub network: Network,
    /// Processes the user runs already, outside the command: the kernel's per-user limit
    /// counts them too, so they are added to `limits.processes` — unless the command runs
    /// in a user namespace of its own, where only its own processes count.
    #[serde(default)]
    pub others_processes: u64,
    /// How much of the sandbox the kernel must enforce before the command runs.
    pub require: Requirement,
}

/// The Landlock ABI from which signals and abstract Unix sockets are scoped: below it a
/// command can signal the server and every process of the same Unix user.
pub const SCOPED_ABI: u8 = 6;

/// How much of the sandbox must hold for a command to run (`[shell] sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Requirement {
    /// Landlock ABI [`SCOPED_ABI`] or newer (Linux 6.12): file access confined and
    /// signals scoped. The default.
    Full,
    /// Whatever Landlock the kernel has, as long as it enforces some: on an older kernel
    /// signals are not scoped (and before ABI 3 `truncate` is not controlled). An
    /// operator's explicit choice (`sandbox = "partial"`).
    Partial,
    /// Nothing is required (`sandbox = "off"`).
    Off,
}

impl Requirement {
    /// Whether a sandbox of this ABI and enforcement is enough; the error says what is
    /// missing and how an operator can choose otherwise.
    pub fn check(self, abi: u8, enforcement: Enforcement) -> Result<(), SandboxError> {
        match self {
            Requirement::Off => Ok(()),
            _ if enforcement == Enforcement::None || abi == 0 => {
                Err(SandboxError::NoLandlock(format!(
                    "the kernel does not enforce Landlock (ABI {abi}); commands are not run without the sandbox unless an operator sets [shell] sandbox = \"off\""
                )))
            }
            Requirement::Full if abi < SCOPED_ABI => Err(SandboxError::NoLandlock(format!(
                "the kernel's Landlock is ABI {abi}, older than {SCOPED_ABI} (Linux 6.12): a command could signal the server and other processes of its user{}. Commands are not run in this partial sandbox unless an operator sets [shell] sandbox = \"partial\" (or runs a newer kernel)",
                if abi < 3 {
                    ", and truncate files it may only read"
                } else {
                    ""
                }
            ))),
            _ => Ok(()),
        }
    }
}

/// Resource limits (soft and hard alike); `None` leaves a limit as inherited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Processes of the user (not enforced for root, which the kernel exempts).
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    /// The largest file a process may write, in bytes.
    pub file_size: Option<u64>,
    pub cpu_secs: Option<u64>,
    /// Address space per process, in bytes.
    pub address_space: Option<u64>,
}

impl Default for Limits {
    /// Defaults that stop a fork bomb and a disk filler and leave ordinary work alone.
    fn default() -> Limits {
        Limits {
            processes: Some(256),
            open_files: Some(1024),
            file_size: Some(1 << 30),
            cpu_secs: Some(300),
            address_space: Some(4 << 30),
        }
    }
}

/// The system paths programs need to run, read-only (a path missing on this machine is
/// skipped when the policy is applied). Of `/etc`, only the entries in [`ETC_PUBLIC`] are
/// given (see [`etc_read_paths`]); `/proc` is readable, but another process's private files
/// there (its environment, memory, open files, working directory) need the ptrace access
/// Landlock refuses outside the sandbox.
pub fn system_read_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = [
        "/usr",
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/opt",
        "/proc",
        "/sys/devices/system/cpu",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    paths.extend(etc_read_paths(Path::new("/etc")));
    paths
}

/// The entries of `etc` a command may read: those [`ETC_PUBLIC`] names (a name ending in
/// `*` stands for every entry it begins; a name with a `/` for that one path inside a
/// directory), and the certificates of `ssl` and `pki` without their private keys. A listed
/// *file* is given only if every user may read it (mode `o+r`): a configuration file made
/// private (an `npmrc` holding a token) says itself that it is not for commands. Anything
/// else — password hashes, host keys, a service's credentials, whatever an installed
/// program keeps there — stays out of reach, even for a server run as root, which file
/// permissions would not stop.
#[allow(
    clippy::disallowed_methods,
    reason = "system paths named for the sandbox's rules"
)]
pub fn etc_read_paths(etc: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let entries = list_dir(etc);
    let mut paths = Vec::new();
    for public in ETC_PUBLIC {
        match public.strip_suffix('*') {
            Some(prefix) => paths.extend(
                entries
                    .iter()
                    .filter(|e| {
                        e.file_name()
                            .and_then(|n| n.to_str())
                            .is_some_and(|n| n.starts_with(prefix))
                    })
                    .cloned(),
            ),
            None => paths.push(etc.join(public)),
        }
    }
    paths.extend(
        list_dir(&etc.join("ssl"))
            .into_iter()
            .filter(|p| !p.ends_with("private")),
    );
    paths.extend(
        ["ca-trust", "tls/certs", "tls/cert.pem", "java/cacerts"]
            .iter()
            .map(|sub| etc.join("pki").join(sub)),
    );
    paths.retain(|p| match std::fs::metadata(p) {
        Ok(m) if m.is_file() => m.permissions().mode() & 0o004 != 0,
        Ok(_) => true,
        // Missing here: the rule is skipped when the policy is applied.
        Err(_) => false,
    });
    paths
}

/// The entries of `/etc` that hold nothing private and that programs read to run: users and
/// groups by name (no hashes), name resolution, the dynamic linker, time zone and locale,
/// shells' start-up files, system identification, file types, certificates, the
/// alternatives links, package sources, and the system-wide settings of common tools and
/// languages. Left out on purpose: `environment` and `fstab` (proxy and share passwords),
/// `machine-id` (an identifier systemd asks to keep confidential), `apt` beyond its sources
/// and keys (`auth.conf.d` holds subscription tokens), `default` beyond locale, keyboard
/// and useradd (services' environment files hold their passwords), and tools' files that
/// commonly hold credentials (`wgetrc`, `maven`).
pub const ETC_PUBLIC: &[&str] = &[
    "passwd",
    "group",
    "hosts",
    "hostname",
    "host.conf",
    "resolv.conf",
    "nsswitch.conf",
    "gai.conf",
    "protocols",
    "services",
    "networks",
    "rpc",
    "ethertypes",
    "netconfig",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    "locale.gen",
    "default/locale",
    "default/keyboard",
    "default/useradd",
    "profile",
    "profile.d",
    "bash.bashrc",
    "bashrc",
    "bash_completion",
    "bash_completion.d",
    "zshenv",
    "zshrc",
    "zprofile",
    "zsh",
    "inputrc",
    "shells",
    "login.defs",
    "os-release",
    "lsb-release",
    "debian_version",
    "alpine-release",
    "redhat-release",
    "fedora-release",
    "system-release",
    "issue",
    "mtab",
    "mime.types",
    "mailcap",
    "magic",
    "magic.mime",
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "gitconfig",
    "gitattributes",
    "vim",
    "vimrc",
    "nanorc",
    "emacs",
    "less",
    "lesskey",
    "terminfo",
    "fonts",
    "papersize",
    "manpath.config",
    "man_db.conf",
    "groff",
    "sgml",
    "xml",
    "xdg",
    "apt/sources.list",
    "apt/sources.list.d",
    "apt/trusted.gpg",
    "apt/trusted.gpg.d",
    "apt/keyrings",
    "apt/preferences",
    "apt/preferences.d",
    "dpkg",
    "debconf.conf",
    "mke2fs.conf",
    "python*",
    "perl",
    "java*",
    "ImageMagick*",
    "pip.conf",
    "npmrc",
    "gemrc",
    "gdb",
    "iproute2",
];

/// The entries of a system directory (none when it cannot be read). Not workspace access:
/// it names system paths for the sandbox's rules.
#[allow(clippy::disallowed_methods)]
fn list_dir(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|it| it.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default()
}

/// The device files every program may write to (missing ones are skipped likewise).
pub fn device_write_paths() -> Vec<PathBuf> {
    [
        "/dev/null",
        "/dev/zero",
        "/dev/full",
        "/dev/random",
        "/dev/urandom",
        "/dev/tty",
    ]
    .iter()
    .map(PathBuf::from)
    .collect()
}

/// What [`restrict_self`] applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The Landlock ABI in force (0: none).
    pub landlock_abi: u8,
    pub enforcement: Enforcement,
    /// Signals and abstract Unix sockets are scoped to the sandbox (ABI 6 and later).
    pub scoped: bool,
    pub no_new_privs: bool,
    /// The system-call filter is installed (see [`Network`] for what it refuses).
    pub seccomp: bool,
    /// Everything outside the writable directories is mounted read-only (a mount
    /// namespace): modes, owners and times of files outside cannot be changed either.
    #[serde(default)]
    pub read_only_outside: bool,
    /// What bounds the number of processes (set by the helper; `None` when not asked).
    #[serde(default)]
    pub process_limit: Option<ProcessLimit>,
}

/// What bounds a command's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessLimit {
    /// A `pids` cgroup of its own: forks beyond the limit fail.
    Cgroup,
    /// The kernel's per-user limit (processes already running as the user, plus the limit).
    UserLimit,
    /// Only the helper's count every 20 ms (root without a cgroup): a fork bomb is killed
    /// when seen, but may first fill the machine's process table.
    Watch,
}

/// How much of the Landlock policy the kernel enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    Full,
    /// An older kernel: some access rights could not be restricted.
    Partial,
    None,
}

/// The sandbox could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel's Landlock is missing or older than required (the text says which and
    /// what an operator can do).
    #[error("{0}")]
    NoLandlock(String),
    #[error("cannot apply the Landlock policy: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The helper could not set up the command (nothing ran).
    #[error("{0}")]
    Setup(String),
    /// The helper failed or broke the protocol.
    #[error("{0}")]
    Helper(String),
    /// The time limit passed while the sandbox was being set up: nothing ran.
    #[error(
        "the time limit ({} s) passed before the sandbox was set up, so the command never started; give it a longer timeout",
        .0.as_secs_f64()
    )]
    NotStarted(std::time::Duration),
    #[error("cannot install the system-call filter: {0}")]
    Seccomp(String),
    #[error("cannot set {what}: {source}")]
    Os {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// Restricts the calling process (and everything it starts) to `policy`. Call it in the
/// process that will execute the command, before it does. Paths of the policy that cannot be
/// opened (missing on this machine) grant nothing and are skipped.
pub fn restrict_self(policy: &Policy) -> Result<Applied, SandboxError> {
    // First, while mounts may still be changed: Landlock and the filter forbid it after.
    let entered = if policy.require == Requirement::Off {
        None
    } else {
        match read_only_outside(&policy.write, NamespaceKind::Auto) {
            Ok(entered) => Some(entered),
            Err(MountError::Unavailable(why)) => {
                tracing::debug!(%why, "files outside the roots stay writable by their owner's chmod and touch");
                None
            }
            Err(MountError::Broken(why)) => return Err(SandboxError::Setup(why)),
        }
    };
    let mut limits = policy.limits;
    limits.processes = process_limit(
        policy.limits.processes,
        policy.others_processes,
        entered == Some(Entered::UserAndMount),
    );
    set_limits(&limits)?;
    rustix::thread::set_no_new_privs(true).map_err(|e| SandboxError::Os {
        what: "no_new_privs",
        source: e.into(),
    })?;
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(NEWEST))?
        .scope(Scope::from_all(NEWEST))?
        .create()?
        .add_rules(path_beneath_rules(
            &policy.read,
            AccessFs::from_read(NEWEST),
        ))?
        .add_rules(path_beneath_rules(
            &policy.write,
            AccessFs::from_all(NEWEST),
        ))?
        .restrict_self()?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as u8,
        _ => 0,
    };
    let enforcement = match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial,
        RulesetStatus::NotEnforced => Enforcement::None,
    };
    policy.require.check(abi, enforcement)?;
    drop_capabilities();
    let seccomp = seccomp::apply(policy.network)?;
    Ok(Applied {
        landlock_abi: abi,
        enforcement,
        scoped: abi >= SCOPED_ABI && enforcement != Enforcement::None,
        no_new_privs: status.no_new_privs || rustix::thread::no_new_privs().unwrap_or(false),
        seccomp,
        read_only_outside: entered.is_some(),
        process_limit: None,
    })
}

/// The per-user process limit to set: the command's own `limit`, plus the user's processes
/// already running (`others`) that the kernel counts against it — except in a user
/// namespace of the command's own, where the kernel (from Linux 5.14) counts only the
/// processes made inside it.
fn process_limit(limit: Option<u64>, others: u64, own_user_namespace: bool) -> Option<u64> {
    limit.map(|n| if own_user_namespace { n } else { n + others })
}

/// Gives up every capability (a server run as root hands its commands none): the bounding
/// set first, so that no program executed later gets them back, then the process's own.
/// Failures are ignored: an unprivileged process has nothing to give up.
fn drop_capabilities() {
    use rustix::thread::{CapabilitySet, CapabilitySets, remove_capability_from_bounding_set};
    for bit in 0..64 {
        if let Some(cap) = CapabilitySet::from_bits(1u64 << bit) {
            let _ = remove_capability_from_bounding_set(cap);
        }
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    let _ = rustix::thread::set_capabilities(None, none);
}

fn set_limits(limits: &Limits) -> Result<(), SandboxError> {
    let set = |what: &'static str, resource: Resource, value: Option<u64>| {
        let Some(v) = value else { return Ok(()) };
        // Never above the inherited hard limit (only a privileged process could raise it).
        let hard = getrlimit(resource).maximum;
        let v = hard.map_or(v, |h| v.min(h));
        setrlimit(
            resource,
            Rlimit {
                current: Some(v),
                maximum: Some(v),
            },
        )
        .map_err(|e| SandboxError::Os {
            what,
            source: e.into(),
        })
    };
    set("the process limit", Resource::Nproc, limits.processes)?;
    set("the open-file limit", Resource::Nofile, limits.open_files)?;
    set("the file-size limit", Resource::Fsize, limits.file_size)?;
    set("the CPU-time limit", Resource::Cpu, limits.cpu_secs)?;
    set(
        "the address-space limit",
        Resource::As,
        limits.address_space,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_requires_scoped_signals() {
        // ABI 6 and 7 (Linux 6.12 and later) run; ABI 1 to 5 (Debian 12, Ubuntu 24.04) do
        // not, and the refusal names the ABI, what is missing and the setting.
        for abi in [6, 7] {
            assert!(Requirement::Full.check(abi, Enforcement::Full).is_ok());
            assert!(Requirement::Full.check(abi, Enforcement::Partial).is_ok());
        }
        for abi in 1..6 {
            let e = Requirement::Full
                .check(abi, Enforcement::Full)
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("ABI {abi}")), "{e}");
            assert!(e.contains("signal the server"), "{e}");
            assert!(e.contains("sandbox = \"partial\""), "{e}");
            assert_eq!(e.contains("truncate"), abi < 3, "{e}");
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods, reason = "a test's own fixture directory")]
    fn only_public_entries_of_etc_are_given() {
        use std::os::unix::fs::PermissionsExt;
        let etc = tempfile::tempdir().unwrap();
        let files = [
            "passwd",
            "shadow",
            "gshadow",
            "hosts",
            "python3.11/sitecustomize.py",
            "java-17-openjdk/security/java.security",
            "myservice/credentials.conf",
            "ssh/ssh_host_ed25519_key",
            "ssl/certs/ca.pem",
            "ssl/private/server.key",
            "ssl/openssl.cnf",
            "pki/tls/certs/ca-bundle.crt",
            "pki/tls/private/server.key",
            "postgresql/16/main/pg_hba.conf",
            "sudoers",
            "apt/sources.list",
            "apt/auth.conf.d/90ubuntu-advantage",
            "default/locale",
            "default/minio",
            "environment",
            "machine-id",
            "npmrc",
            "pip.conf",
        ];
        for f in files {
            let path = etc.path().join(f);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, "x").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        // A listed file made private by its owner.
        std::fs::set_permissions(
            etc.path().join("npmrc"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        let given: Vec<String> = etc_read_paths(etc.path())
            .iter()
            .map(|p| {
                p.strip_prefix(etc.path())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        let reachable = |f: &str| given.iter().any(|g| Path::new(f).starts_with(g));
        for public in [
            "passwd",
            "hosts",
            "python3.11/sitecustomize.py",
            "java-17-openjdk/security/java.security",
            "ssl/certs/ca.pem",
            "ssl/openssl.cnf",
            "pki/tls/certs/ca-bundle.crt",
            "apt/sources.list",
            "default/locale",
            "pip.conf",
        ] {
            assert!(reachable(public), "{public} not given: {given:?}");
        }
        for private in [
            "shadow",
            "gshadow",
            "myservice/credentials.conf",
            "ssh/ssh_host_ed25519_key",
            "ssl/private/server.key",
            "pki/tls/private/server.key",
            "postgresql/16/main/pg_hba.conf",
            "sudoers",
            "apt/auth.conf.d/90ubuntu-advantage",
            "default/minio",
            "environment",
            "machine-id",
            "npmrc",
        ] {
            assert!(!reachable(private), "{private} given: {given:?}");
        }
    }

    #[test]
    fn the_process_limit_counts_the_users_other_processes_outside_a_user_namespace() {
        assert_eq!(process_limit(Some(256), 40, false), Some(296));
        // In the command's own user namespace the kernel counts its processes only.
        assert_eq!(process_limit(Some(256), 40, true), Some(256));
        assert_eq!(process_limit(None, 40, false), None);
    }

    #[test]
    fn partial_takes_any_landlock_and_off_takes_none() {
        for abi in 1..=7 {
            assert!(
                Requirement::Partial
                    .check(abi, Enforcement::Partial)
                    .is_ok()
            );
        }
        for r in [Requirement::Full, Requirement::Partial] {
            let e = r.check(0, Enforcement::None).unwrap_err().to_string();
            assert!(e.contains("sandbox = \"off\""), "{e}");
            assert!(r.check(3, Enforcement::None).is_err());
        }
        assert!(Requirement::Off.check(0, Enforcement::None).is_ok());
    }
}
