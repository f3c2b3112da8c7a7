//! The system-call filter: what no command needs and a sandbox escape would. Applied after
//! Landlock, as the last step before the command runs; inherited by everything it starts
//! and impossible to remove (`no_new_privs` is already set).
//!
//! Refused with `EPERM` (the program sees "Operation not permitted"):
//! - tracing and reading other processes' memory (`ptrace`, `process_vm_readv/writev`);
//! - mounts, namespaces and root changes (`mount`, the new mount API, `unshare`, `setns`,
//!   `clone` with a `CLONE_NEW*` flag, `pivot_root`, `chroot`);
//! - the kernel's big attack surfaces a shell command has no use for: `bpf`,
//!   `perf_event_open`, `userfaultfd`, `io_uring` (which could also open sockets past this
//!   filter), the key rings, module loading, `kexec`, `open_by_handle_at`, `reboot`,
//!   `swapon`, `acct`, `quotactl`, `syslog`, port I/O;
//! - injecting keystrokes into a terminal (`ioctl` `TIOCSTI`, `TIOCLINUX`);
//! - setting the set-user-ID or set-group-ID bit on any file (`chmod` and its variants);
//! - with the network off, `socket()` of every family. A connected `socketpair()` (the
//!   plumbing between a command's own processes) still works; nothing can connect out,
//!   listen, or reach a Unix socket on the machine (a container runtime's, a desktop bus).
//!
//! `clone3` answers `ENOSYS` (its flags sit behind a pointer a filter cannot read), which
//! makes the C library fall back to `clone`, whose flags are checked. On x86-64 every call
//! in the x32 numbering is refused (`EPERM`) by a filter of its own; other 32-bit entry
//! points are refused outright by the architecture check (the process is killed).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::{Network, SandboxError};

/// What is refused besides the fixed rules, by what the command's namespaces and cgroups
/// leave open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Refuse {
    /// System V IPC and POSIX message queues (no IPC namespace of the command's own: they
    /// would be the machine's, and outlive the command).
    pub sysv_ipc: bool,
    /// `memfd_create` (no memory cgroup: its pages are bound by nothing else).
    pub memfd: bool,
}

/// The System V IPC and POSIX message-queue calls.
fn ipc_calls() -> Vec<i64> {
    vec![
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_shmdt,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semctl,
        libc::SYS_semtimedop,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
    ]
}

// The libc crate has no SYS_kexec_file_load for aarch64 with musl; the number is the one of
// the generic syscall table, which glibc's aarch64 constant also has.
#[cfg(all(target_arch = "aarch64", target_env = "musl"))]
const SYS_KEXEC_FILE_LOAD: libc::c_long = 294;
#[cfg(not(all(target_arch = "aarch64", target_env = "musl")))]
const SYS_KEXEC_FILE_LOAD: libc::c_long = libc::SYS_kexec_file_load;

/// The x32 system-call numbering bit (x86-64 only).
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;

const TIOCSTI: u64 = 0x5412;
const SETUID: u64 = 0o4000;
const SETGID: u64 = 0o2000;
/// `fchmodat2` (Linux 6.6), the same number on x86-64 and AArch64.
const FCHMODAT2: i64 = 452;
const TIOCLINUX: u64 = 0x541C;

/// `CLONE_NEW*` flags: any one of them in `clone`'s flags is refused.
const NAMESPACE_FLAGS: [u64; 8] = [
    0x0000_0080, // CLONE_NEWTIME
    0x0002_0000, // CLONE_NEWNS
    0x0200_0000, // CLONE_NEWCGROUP
    0x0400_0000, // CLONE_NEWUTS
    0x0800_0000, // CLONE_NEWIPC
    0x1000_0000, // CLONE_NEWUSER
    0x2000_0000, // CLONE_NEWPID
    0x4000_0000, // CLONE_NEWNET
];

/// The system calls refused whatever their arguments.
fn always_refused() -> Vec<i64> {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))] // extended on x86-64 only
    let mut calls = vec![
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount_setattr,
        libc::SYS_move_mount,
        libc::SYS_open_tree,
        libc::SYS_fsopen,
        libc::SYS_fsconfig,
        libc::SYS_fsmount,
        libc::SYS_fspick,
        libc::SYS_kexec_load,
        SYS_KEXEC_FILE_LOAD,
        libc::SYS_bpf,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
        libc::SYS_quotactl,
        libc::SYS_syslog,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([libc::SYS_iopl, libc::SYS_ioperm, libc::SYS_lookup_dcookie]);
    calls
}

fn target_arch() -> Option<TargetArch> {
    if cfg!(target_arch = "x86_64") {
        Some(TargetArch::x86_64)
    } else if cfg!(target_arch = "aarch64") {
        Some(TargetArch::aarch64)
    } else {
        None
    }
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).expect("argument index below 6")
}

/// A condition on a 32-bit argument (an `int` or `unsigned int` the kernel truncates: a
/// 64-bit comparison would let `value | 1 << 32` past).
fn cond32(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompCondition {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).expect("argument index below 6")
}

fn rule(conditions: Vec<SeccompCondition>) -> SeccompRule {
    SeccompRule::new(conditions).expect("a rule with conditions")
}

/// Compiles one filter: `calls` (each with its argument rules, empty = always) answer
/// `action`, everything else is allowed.
fn compile(
    calls: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
    arch: TargetArch,
) -> Result<BpfProgram, SandboxError> {
    let filter = SeccompFilter::new(calls, SeccompAction::Allow, action, arch)
        .map_err(|e| SandboxError::Seccomp(e.to_string()))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| SandboxError::Seccomp(e.to_string()))
}

/// The x32 refusal (x86-64): every call in the x32 numbering answers `EPERM`. x32 programs
/// are all but extinct, and refusing the whole numbering keeps the rule filters half as
/// long (each rule once, not once per numbering), which the kernel compiles on every
/// command's start. Calls of other architectures are killed by the other filters' check.
#[cfg(target_arch = "x86_64")]
fn no_x32() -> BpfProgram {
    use seccompiler::sock_filter;
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
    const RET_ERRNO: u32 = 0x0005_0000;
    const RET_ALLOW: u32 = 0x7fff_0000;
    let op = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    vec![
        op(LD_W_ABS, 0, 0, 4),              // the architecture
        op(JEQ_K, 0, 3, AUDIT_ARCH_X86_64), // not x86-64: not this filter's to answer
        op(LD_W_ABS, 0, 0, 0),              // the call's number
        op(JGE_K, 0, 1, X32 as u32),        // the x32 numbering
        op(RET_K, 0, 0, RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, RET_ALLOW),
    ]
}

/// The filters for `network`, in the order they are installed (the kernel runs every
/// installed filter and the strictest answer wins).
fn programs(
    network: Network,
    extra: Refuse,
    arch: TargetArch,
) -> Result<Vec<BpfProgram>, SandboxError> {
    let mut calls = always_refused();
    if extra.sysv_ipc {
        calls.extend(ipc_calls());
    }
    if extra.memfd {
        calls.push(libc::SYS_memfd_create);
    }
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
        calls.into_iter().map(|nr| (nr, Vec::new())).collect();
    refused.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|&f| rule(vec![cond(0, SeccompCmpOp::MaskedEq(f), f)]))
            .collect(),
    );
    refused.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond32(1, SeccompCmpOp::Eq, TIOCSTI)]),
            rule(vec![cond32(1, SeccompCmpOp::Eq, TIOCLINUX)]),
        ],
    );
    // No set-user-ID or set-group-ID bit, on any file: a mode change outside the roots
    // cannot be refused by Landlock, so at least it cannot make a privileged program.
    let special = |arg: u8| {
        [SETUID, SETGID]
            .iter()
            .map(|&bit| rule(vec![cond(arg, SeccompCmpOp::MaskedEq(bit), bit)]))
            .collect::<Vec<_>>()
    };
    #[cfg(target_arch = "x86_64")]
    refused.insert(libc::SYS_chmod, special(1));
    refused.insert(libc::SYS_fchmod, special(1));
    refused.insert(libc::SYS_fchmodat, special(2));
    refused.insert(FCHMODAT2, special(2));
    match network {
        Network::None => {
            refused.insert(libc::SYS_socket, Vec::new());
        }
        // The network, and nothing else: a Unix socket by path (the session bus, a user's
        // systemd) is not checked by Landlock and would start programs outside the sandbox.
        Network::Full => {
            refused.insert(
                libc::SYS_socket,
                vec![rule(vec![
                    cond32(0, SeccompCmpOp::Ne, libc::AF_INET as u64),
                    cond32(0, SeccompCmpOp::Ne, libc::AF_INET6 as u64),
                ])],
            );
        }
    }
    let eperm = compile(refused, SeccompAction::Errno(libc::EPERM as u32), arch)?;
    let clone3: BTreeMap<i64, Vec<SeccompRule>> =
        [(libc::SYS_clone3, Vec::new())].into_iter().collect();
    let enosys = compile(clone3, SeccompAction::Errno(libc::ENOSYS as u32), arch)?;
    #[cfg(target_arch = "x86_64")]
    return Ok(vec![no_x32(), eperm, enosys]);
    #[cfg(not(target_arch = "x86_64"))]
    Ok(vec![eperm, enosys])
}

/// Installs the filter on the calling thread (and so on everything it starts). Fails where
/// this architecture has no filter (neither x86-64 nor AArch64): a sandbox without it would
/// leave the network and namespaces open.
pub(crate) fn apply(network: Network, extra: Refuse) -> Result<bool, SandboxError> {
    let Some(arch) = target_arch() else {
        return Err(SandboxError::Seccomp(
            "this architecture has no system-call filter in ringfence (x86-64 and AArch64 only), so commands cannot be confined; set [shell] sandbox = \"off\" to run them unconfined".to_owned(),
        ));
    };
    for program in programs(network, extra, arch)? {
        seccompiler::apply_filter(&program).map_err(|e| SandboxError::Seccomp(e.to_string()))?;
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_filters_compile_for_this_machine() {
        let arch = target_arch().expect("tests run on x86-64 or AArch64");
        for network in [Network::None, Network::Full] {
            let programs = programs(network, Refuse::default(), arch).unwrap();
            assert_eq!(
                programs.len(),
                if cfg!(target_arch = "x86_64") { 3 } else { 2 }
            );
            assert!(programs.iter().all(|p| !p.is_empty()));
        }
        // The two differ (every socket refused, or all but internet ones); what each lets
        // through is tested by running them (tests/sandbox).
        let rules = usize::from(cfg!(target_arch = "x86_64"));
        let none = &programs(Network::None, Refuse::default(), arch).unwrap()[rules];
        let full = &programs(Network::Full, Refuse::default(), arch).unwrap()[rules];
        assert_ne!(none, full);
        let ipc = Refuse {
            sysv_ipc: true,
            memfd: true,
        };
        assert_ne!(&programs(Network::None, ipc, arch).unwrap()[rules], none);
    }
}
