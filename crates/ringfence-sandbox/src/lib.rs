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

//!
//! All of it is Linux's. On other platforms the crate builds with the same types, and
//! [`run`], [`restrict_self`] and [`helper_main`] refuse with [`SandboxError::Unsupported`]
//! ([`unsupported`] says why): no sandbox this release has tested runs there.

#[cfg(target_os = "linux")]
mod cgroup;
mod command;
#[cfg(not(target_os = "linux"))]
mod elsewhere;
#[cfg(target_os = "linux")]
mod kill;
#[cfg(target_os = "linux")]
mod mounts;
#[cfg(target_os = "linux")]
pub mod ns;
#[cfg(target_os = "linux")]
mod run;
#[cfg(target_os = "linux")]
mod seccomp;
mod spawn;
#[cfg(target_os = "linux")]
mod stage2;
#[cfg(target_os = "linux")]
mod supervise;

use std::path::{Path, PathBuf};

#[cfg(target_os = "linux")]
use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
#[cfg(target_os = "linux")]
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use serde::{Deserialize, Serialize};

pub use command::{
    Ended, Exit, HELPER_ARG, Helper, Made, Network, Outcome, SMALL_HELPER, Spec, Stream,
    UserNamespace,
};
#[cfg(not(target_os = "linux"))]
pub use elsewhere::{helper_main, restrict_self, run};
#[cfg(target_os = "linux")]
pub use mounts::{Entered, MountError, NamespaceKind, read_only_outside};
#[cfg(target_os = "linux")]
pub use run::run;
pub use spawn::{PATH, clean_env};
#[cfg(target_os = "linux")]
pub use supervise::helper_main;

/// The newest Landlock ABI this crate asks for.
#[cfg(target_os = "linux")]
const NEWEST: ABI = ABI::V7;

/// Why the shell cannot run on `os` (a value of [`std::env::consts::OS`]), or `None` where
/// this release's sandbox runs (Linux). Says what is missing and what `sandbox = "off"`
/// would mean, so an operator who turned the shell on knows why it stays off.
pub fn unsupported(os: &str) -> Option<String> {
    if os == "linux" {
        return None;
    }
    let name = match os {
        "macos" => "macOS",
        "windows" => "Windows",
        other => other,
    };
    let next = match os {
        "macos" => " (a Seatbelt profile is the likely path)",
        "windows" => " (a restricted token in a job object is the likely path)",
        _ => "",
    };
    Some(format!(
        "commands cannot run on {name}: ringfence's command sandbox (Landlock, a system-call filter and namespaces) is Linux's, and this release has tested no sandbox on {name}{next}. [shell] sandbox = \"off\" would run commands with all of ringfence's own access — every file your account can read or change, the network, your other processes — so it is not offered here either; run ringfence on Linux (or in a Linux virtual machine or container) for run_shell_command and delegate_task"
    ))
}

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
    /// The command runs in namespaces of its own ([`ns`]): PID with its own `/proc`, IPC,
    /// mount, UTS, cgroup, and network without the network. Off only for `sandbox = "off"`
    /// and, with `"partial"`, where the machine cannot make them.
    #[serde(default = "yes")]
    pub namespaces: bool,
    /// Whether a user namespace is made around them (where needed, or always: for tests).
    #[serde(default)]
    pub user_namespace: UserNamespace,
    /// The command's `$TMPDIR`, mounted as a `tmpfs` of its own in its mount namespace.
    #[serde(default)]
    pub tmp: Option<TmpDir>,
    /// Test only: use no Landlock ABI newer than this, as an older kernel would (the escape
    /// table runs at each ABI level this way). `None` in ringfence.
    #[serde(default)]
    pub landlock_abi_cap: Option<u8>,
}

fn yes() -> bool {
    true
}

/// The command's temporary directory and the most it may hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TmpDir {
    pub path: PathBuf,
    /// In bytes (counted in the command's memory too, where a memory cgroup holds).
    pub size: u64,
}

/// The Landlock ABI from which signals and abstract Unix sockets are scoped by Landlock
/// itself; with the command's namespaces they are scoped on any ABI.
pub const SCOPED_ABI: u8 = 6;

/// How much of the sandbox must hold for a command to run (`[shell] sandbox`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Requirement {
    /// Landlock (any ABI: Linux 5.13 or later) and the command's own namespaces (user
    /// namespaces allowed, or a privileged server). The default.
    Full,
    /// Whatever the kernel has, as long as Landlock enforces some: without namespaces the
    /// command may see other processes, share System V IPC with the machine (refused by
    /// the system-call filter instead) and, before Landlock ABI 6, signal processes of its
    /// user. An operator's explicit choice (`sandbox = "partial"`); every result says what
    /// is missing.
    Partial,
    /// Nothing is required (`sandbox = "off"`).
    Off,
}

impl Requirement {
    /// Whether Landlock of this ABI and enforcement is enough; the error says what is
    /// missing and how an operator can choose otherwise.
    pub fn check(self, abi: u8, enforcement: Enforcement) -> Result<(), SandboxError> {
        match self {
            Requirement::Off => Ok(()),
            _ if enforcement == Enforcement::None || abi == 0 => {
                Err(SandboxError::NoLandlock(format!(
                    "the kernel does not enforce Landlock (ABI {abi}; Linux 5.13 or later with Landlock enabled is needed): commands are not run without the sandbox unless an operator sets [shell] sandbox = \"off\""
                )))
            }
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
    /// Address space per process, in bytes: applied only where no memory cgroup bounds
    /// the command (it cannot see `memfd` or `tmpfs` pages, and stops programs that reserve
    /// much address space without using it).
    pub address_space: Option<u64>,
    /// Memory of the whole command, in bytes (a memory cgroup: anonymous, shared, `memfd`
    /// and `tmpfs` pages, no swap beyond it).
    #[serde(default)]
    pub memory: Option<u64>,
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
            memory: Some(4 << 30),
        }
    }
}

/// The system paths programs need to run, read-only (a path missing on this machine is
/// skipped when the policy is applied). Of `/etc`, only the entries in [`ETC_PUBLIC`] are
/// given (see [`etc_read_paths`]); of `/opt` and `/usr/local`, only the entries every user
/// may read (see [`public_entries`]: an operator's private directory there — a data
/// directory, a service's credentials — stays out of reach); `/usr` is given entry by
/// entry for that reason. `/proc` is the command's own (its PID namespace).
pub fn system_read_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = [
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/proc",
        "/sys/devices/system/cpu",
    ]
    .iter()
    .map(PathBuf::from)
    .collect();
    paths.extend(
        list_dir(Path::new("/usr"))
            .into_iter()
            .filter(|p| !p.ends_with("local")),
    );
    paths.extend(public_entries(Path::new("/usr/local")));
    paths.extend(public_entries(Path::new("/opt")));
    paths.extend(etc_read_paths(Path::new("/etc")));
    paths
}

/// The entries of `dir` that every user may read: directories with `o+rx`, files with
/// `o+r` (symbolic links by what they point to). A directory of the operator's made private
/// says itself that it is not for commands.
#[allow(
    clippy::disallowed_methods,
    reason = "system paths named for the sandbox's rules"
)]
pub fn public_entries(dir: &Path) -> Vec<PathBuf> {
    list_dir(dir)
        .into_iter()
        .filter(|p| match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => others_may(&m, 0o005),
            Ok(m) => others_may(&m, 0o004),
            Err(_) => false,
        })
        .collect()
}

/// Whether every user has the permission bits `bits` (of `0o007`) on the entry. Without
/// Unix permissions (Windows), no one is known to: nothing is given.
fn others_may(m: &std::fs::Metadata, bits: u32) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & bits == bits
    }
    #[cfg(not(unix))]
    {
        let _ = (m, bits);
        false
    }
}

/// A file's identity: device and inode on Unix; elsewhere its canonical path.
#[allow(
    clippy::disallowed_methods,
    reason = "system and configuration paths, looked at for a comparison"
)]
fn file_id(p: &Path) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::fs::canonicalize(p).ok()?.hash(&mut h);
        Some((0, h.finish()))
    }
}

/// For each of `private` (paths that must stay out of a command's reach), the first of
/// `granted` (paths a command may read) that would give it: the private path lies beneath
/// it or is it. Compared by file identity (device and inode, symbolic links followed), so a
/// link in either does not hide the overlap: the private path's existing ancestors are
/// looked at once, then each granted path with one `stat` (this runs on every command).
#[allow(
    clippy::disallowed_methods,
    reason = "system and configuration paths, looked at for a comparison"
)]
pub fn granted_over<'a>(private: &[&Path], granted: &'a [PathBuf]) -> Vec<Option<&'a PathBuf>> {
    use std::collections::HashMap;
    let id = file_id;
    // Each private path's own and its ancestors' identities (a path not made yet is given
    // by whichever ancestor grants it), mapped to the private paths they would give.
    let mut holds: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    for (i, p) in private.iter().enumerate() {
        for ancestor in p.ancestors() {
            if let Some(key) = id(ancestor) {
                holds.entry(key).or_default().push(i);
            }
        }
    }
    let mut found = vec![None; private.len()];
    for g in granted {
        let Some(key) = id(g) else { continue };
        for &i in holds.get(&key).map(Vec::as_slice).unwrap_or(&[]) {
            found[i].get_or_insert(g);
        }
    }
    found
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
        Ok(m) if m.is_file() => others_may(&m, 0o004),
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
    /// The namespaces the command runs in (`None`: none of its own).
    #[serde(default)]
    pub namespaces: Option<Made>,
    /// What bounds the command's memory.
    #[serde(default)]
    pub memory_limit: Option<MemoryLimit>,
    /// `$TMPDIR` is a `tmpfs` of this many bytes.
    #[serde(default)]
    pub tmp_size: Option<u64>,
    /// System V IPC and POSIX message queues are refused by the system-call filter (no IPC
    /// namespace of the command's own).
    #[serde(default)]
    pub ipc_refused: bool,
}

impl Applied {
    /// Whether the command can signal, trace or read no process outside it: its own PID
    /// namespace, or Landlock's scope.
    pub fn signals_isolated(&self) -> bool {
        self.scoped || self.namespaces.is_some_and(|n| n.pid)
    }

    /// Whether other processes are out of the command's sight (its own `/proc`).
    pub fn processes_hidden(&self) -> bool {
        self.namespaces.is_some_and(|n| n.pid)
    }
}

/// What bounds a command's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryLimit {
    /// A memory cgroup of its own: everything it holds, together.
    Cgroup,
    /// Only the address space of each process (no memory cgroup here): `memfd_create` is
    /// refused, `$TMPDIR` is capped, but many processes together may hold more.
    AddressSpace,
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
    #[cfg(target_os = "linux")]
    #[error("cannot apply the Landlock policy: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// This platform has no sandbox this release has tested (see [`unsupported`]).
    #[error("{0}")]
    Unsupported(String),
    /// The helper could not set up the command (nothing ran).
    #[error("{0}")]
    Setup(String),
    /// The helper failed or broke the protocol.
    #[error("{0}")]
    Helper(String),
    /// The command's namespaces could not be made, and the requirement needs them (the
    /// text says why and what an operator can do).
    #[error("{0}")]
    NoNamespaces(String),
    /// With `sandbox = "partial"`: the namespaces failed half-way (nothing ran); the run is
    /// made again without them.
    #[error("{0}")]
    NamespacesFailed(String),
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

/// How the refusal for want of namespaces begins (it travels from the second stage as text).
pub(crate) const NO_NAMESPACES: &str = "the sandbox cannot give the command namespaces";

impl SandboxError {
    /// The refusal when the command's namespaces cannot be made (`why`) and the default
    /// requirement needs them.
    pub fn no_namespaces(why: &str) -> SandboxError {
        SandboxError::NoNamespaces(format!(
            "{NO_NAMESPACES} of its own here ({why}). Without them a command could see the machine's other processes and their command lines, share System V shared memory with them, and on kernels before Linux 6.12 signal processes of its user, so commands are not run. To fix it, let ringfence make user namespaces: on Ubuntu 23.10 and later (kernel.apparmor_restrict_unprivileged_userns = 1) install the AppArmor profile from deploy/apparmor/ringfence; in a container, allow unshare and clone with namespace flags (or run it with CAP_SYS_ADMIN); or run the server as root. An operator may instead set [shell] sandbox = \"partial\" to run commands without them (every result then says what is missing)"
        ))
    }
}

#[cfg(target_os = "linux")]
/// Restricts the calling process (and everything it starts) to `policy`, without
/// namespaces of its own beyond a mount namespace (the path of `sandbox = "partial"` where
/// none can be made, and of the tests that apply the policy in a process directly). Call it
/// in the process that will execute the command, before it does. Paths of the policy that
/// cannot be opened (missing on this machine) grant nothing and are skipped.
pub fn restrict_self(policy: &Policy) -> Result<Applied, SandboxError> {
    restrict_self_with(policy, false)
}

#[cfg(target_os = "linux")]
/// [`restrict_self`], told whether a memory cgroup bounds the command.
pub(crate) fn restrict_self_with(
    policy: &Policy,
    memory_cgroup: bool,
) -> Result<Applied, SandboxError> {
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
    confine(
        policy,
        Base {
            read_only_outside: entered.is_some(),
            own_user_namespace: entered == Some(Entered::UserAndMount),
            ipc_isolated: false,
            memory_cgroup,
        },
    )
}

#[cfg(target_os = "linux")]
/// What holds before [`confine`]: set up by the caller.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Base {
    /// Everything outside the writable directories is mounted read-only.
    pub read_only_outside: bool,
    /// The process is in a user namespace of its own (the kernel counts its processes
    /// alone against the process limit).
    pub own_user_namespace: bool,
    /// In an IPC namespace of its own: System V IPC need not be refused.
    pub ipc_isolated: bool,
    /// A memory cgroup bounds the command: no address-space limit, `memfd_create` allowed.
    pub memory_cgroup: bool,
}

#[cfg(target_os = "linux")]
/// Resource limits, `no_new_privs`, Landlock, every capability dropped and the system-call
/// filter, in that order, on the calling process.
pub(crate) fn confine(policy: &Policy, base: Base) -> Result<Applied, SandboxError> {
    let mut limits = policy.limits;
    limits.processes = process_limit(
        policy.limits.processes,
        policy.others_processes,
        base.own_user_namespace,
    );
    if base.memory_cgroup {
        limits.address_space = None;
    }
    set_limits(&limits)?;
    rustix::thread::set_no_new_privs(true).map_err(|e| SandboxError::Os {
        what: "no_new_privs",
        source: e.into(),
    })?;
    let asked = match policy.landlock_abi_cap {
        Some(cap) => ABI::from(i32::from(cap.min(NEWEST as u8))),
        None => NEWEST,
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(asked))?;
    if asked as u8 >= SCOPED_ABI {
        ruleset = ruleset.scope(Scope::from_all(asked))?;
    }
    let status = ruleset
        .create()?
        .add_rules(path_beneath_rules(&policy.read, AccessFs::from_read(asked)))?
        .add_rules(path_beneath_rules(&policy.write, AccessFs::from_all(asked)))?
        .restrict_self()?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => (effective_abi as u8).min(asked as u8),
        _ => 0,
    };
    let enforcement = match status.ruleset {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial,
        RulesetStatus::NotEnforced => Enforcement::None,
    };
    policy.require.check(abi, enforcement)?;
    drop_capabilities();
    // (With the sandbox off, nothing more than the fixed rules: an operator's choice.)
    let sandboxed = policy.require != Requirement::Off;
    let refuse = seccomp::Refuse {
        sysv_ipc: sandboxed && !base.ipc_isolated,
        memfd: sandboxed && !base.memory_cgroup,
    };
    let seccomp = seccomp::apply(policy.network, refuse)?;
    Ok(Applied {
        landlock_abi: abi,
        enforcement,
        scoped: abi >= SCOPED_ABI && enforcement != Enforcement::None,
        no_new_privs: status.no_new_privs || rustix::thread::no_new_privs().unwrap_or(false),
        seccomp,
        read_only_outside: base.read_only_outside,
        process_limit: None,
        namespaces: None,
        memory_limit: Some(if base.memory_cgroup {
            MemoryLimit::Cgroup
        } else {
            MemoryLimit::AddressSpace
        }),
        tmp_size: None,
        ipc_refused: seccomp && refuse.sysv_ipc,
    })
}

#[cfg(target_os = "linux")]
/// The per-user process limit to set: the command's own `limit`, plus the user's processes
/// already running (`others`) that the kernel counts against it — except in a user
/// namespace of the command's own, where the kernel (from Linux 5.14) counts only the
/// processes made inside it.
fn process_limit(limit: Option<u64>, others: u64, own_user_namespace: bool) -> Option<u64> {
    limit.map(|n| if own_user_namespace { n } else { n + others })
}

#[cfg(target_os = "linux")]
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

#[cfg(target_os = "linux")]
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
    fn only_linux_has_the_sandbox_and_elsewhere_the_refusal_says_why_and_what_off_means() {
        assert_eq!(unsupported("linux"), None);
        for (os, name, next) in [
            ("macos", "macOS", "Seatbelt"),
            ("windows", "Windows", "job object"),
            (
                "freebsd",
                "freebsd",
                "this release has tested no sandbox on freebsd",
            ),
        ] {
            let e = unsupported(os).unwrap();
            for needed in [
                &format!("cannot run on {name}"),
                &format!("tested no sandbox on {name}"),
                next,
                "sandbox = \"off\" would run commands with all of ringfence's own access",
                "not offered here",
                "run_shell_command",
                "delegate_task",
            ] {
                assert!(e.contains(needed), "{os}: {needed:?} missing from {e}");
            }
            // Each platform's next step is named on its own platform only.
            assert_eq!(e.contains("Seatbelt"), os == "macos", "{e}");
            assert_eq!(e.contains("job object"), os == "windows", "{e}");
        }
    }

    #[test]
    fn any_enforcing_landlock_is_enough_the_namespaces_do_the_rest() {
        // ABI 1 to 7 (Linux 5.13 and later) run: what ABI 6 adds (signal and abstract
        // socket scope) the command's PID and network namespaces hold on any ABI.
        for abi in 1..=7 {
            for r in [Requirement::Full, Requirement::Partial] {
                assert!(r.check(abi, Enforcement::Full).is_ok());
                assert!(r.check(abi, Enforcement::Partial).is_ok());
            }
        }
    }

    #[test]
    fn the_refusal_for_want_of_namespaces_says_why_and_the_ways_out() {
        let e =
            SandboxError::no_namespaces("cannot make a user namespace: Operation not permitted")
                .to_string();
        assert!(e.starts_with(NO_NAMESPACES), "{e}");
        for needed in [
            "Operation not permitted",
            "other processes",
            "System V",
            "deploy/apparmor/ringfence",
            "apparmor_restrict_unprivileged_userns",
            "CAP_SYS_ADMIN",
            "sandbox = \"partial\"",
        ] {
            assert!(e.contains(needed), "{needed} missing: {e}");
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
    #[allow(clippy::disallowed_methods, reason = "a test's own fixture directory")]
    fn a_private_path_is_found_beneath_a_granted_one_through_links_too() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("opt/app");
        std::fs::create_dir_all(real.join("data")).unwrap();
        std::os::unix::fs::symlink(&real, dir.path().join("link")).unwrap();
        let other = dir.path().join("elsewhere");
        std::fs::create_dir(&other).unwrap();
        let granted = vec![other.clone(), dir.path().join("link")];
        let data = real.join("data");
        let not_yet = real.join("not-made-yet/data");
        let outside = dir.path().join("home/data");
        let found = granted_over(&[&data, &not_yet, &outside, &real], &granted);
        // Beneath the granted link (by what it points to), also a path not made yet, and
        // the granted directory itself; not a path elsewhere.
        assert_eq!(found[0], Some(&granted[1]));
        assert_eq!(found[1], Some(&granted[1]));
        assert_eq!(found[2], None);
        assert_eq!(found[3], Some(&granted[1]));
    }

    #[cfg(target_os = "linux")]
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
