//! The helper end to end: this test binary stands in for ringfence's (started again with
//! `helper_entry`), the server side is [`ringfence_sandbox::run`]. A command is run the way
//! `run_shell_command` runs it, and the tests look at what it printed, how it ended, and
//! what is left running afterwards.

use std::path::PathBuf;
use std::time::Duration;

use ringfence_sandbox::{
    Ended, Exit, Helper, Limits, Network, Outcome, Policy, ProcessLimit, Spec, Stream, clean_env,
    device_write_paths, system_read_paths,
};

const HELPER_ENV: &str = "RINGFENCE_SANDBOX_TEST_HELPER";

/// Set for a helper that must run where namespaces are forbidden.
const FORBID_ENV: &str = "RINGFENCE_SANDBOX_TEST_FORBID_NAMESPACES";

/// The helper's side: only when started as the helper (an ordinary run passes at once).
/// With [`FORBID_ENV`] it first puts itself where no namespace can be made, the way a
/// container runtime's default filter does (`unshare` and `clone` with a namespace flag
/// refused with `EPERM`), so that what ringfence does there is seen for real.
#[test]
fn helper_entry() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    if std::env::var_os(FORBID_ENV).is_some() {
        forbid_namespaces();
    }
    std::process::exit(ringfence_sandbox::helper_main());
}

/// Refuses `unshare` to this process and everything it starts, as a container runtime's
/// default filter does (a seccomp filter; `no_new_privs` first, as an unprivileged filter
/// needs). The sandbox makes its namespaces with `unshare` only.
fn forbid_namespaces() {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let arch = if cfg!(target_arch = "aarch64") {
        TargetArch::aarch64
    } else {
        TargetArch::x86_64
    };
    let filter = SeccompFilter::new(
        [(libc::SYS_unshare, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .unwrap();
    let program: seccompiler::BpfProgram = filter.try_into().unwrap();
    rustix::thread::set_no_new_privs(true).unwrap();
    seccompiler::apply_filter(&program).unwrap();
}

pub fn helper() -> Helper {
    Helper {
        program: std::env::current_exe().unwrap(),
        args: [
            "--exact",
            "helper::helper_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ]
        .map(String::from)
        .to_vec(),
        env: vec![(HELPER_ENV.to_owned(), "1".to_owned())],
    }
}

/// The helper as ringfence starts it: a program of its own (single-threaded, as a user
/// namespace needs), built from this crate.
pub fn program_helper() -> Helper {
    Helper {
        program: PathBuf::from(env!("CARGO_BIN_EXE_sandbox-test-helper")),
        args: Vec::new(),
        env: Vec::new(),
    }
}

/// A sandbox layout: `ws` (the writable root and working directory), `ro` (a read-only
/// root), `tmp` (the call's private temporary directory) inside; `secret`, `data` (a data
/// directory with its database) and `other` (another user's workspace) beside, outside
/// every root.
pub struct Layout {
    pub dir: tempfile::TempDir,
}

impl Layout {
    pub fn new() -> Layout {
        let dir = tempfile::tempdir().unwrap();
        let files = [
            ("ws/a.txt", "ws content\n"),
            ("ro/b.txt", "ro content\n"),
            ("secret/c.txt", "SECRET-BESIDE\n"),
            ("data/memory.db", "SECRET-DATA\n"),
            ("other/notes.txt", "SECRET-OTHER\n"),
        ];
        for (path, text) in files {
            let path = dir.path().join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        std::fs::create_dir(dir.path().join("tmp")).unwrap();
        Layout { dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn spec(&self, command: &str) -> Spec {
        let ws = self.path("ws");
        let tmp = self.path("tmp");
        let mut read = system_read_paths();
        read.push(self.path("ro"));
        let mut write = vec![ws.clone(), tmp.clone()];
        write.extend(device_write_paths());
        let extra = [
            ("RF_DIR".to_owned(), self.dir.path().display().to_string()),
            ("RF_SERVER".to_owned(), std::process::id().to_string()),
        ];
        Spec {
            shell: PathBuf::from("/bin/sh"),
            command: command.to_owned(),
            cwd: ws.clone(),
            env: clean_env(&ws, &tmp, &extra),
            policy: Policy {
                read,
                write,
                limits: Limits::default(),
                network: Network::None,
                require: ringfence_sandbox::Requirement::Full,
                others_processes: 0,
                namespaces: true,
                user_namespace: ringfence_sandbox::UserNamespace::Auto,
                tmp: Some(ringfence_sandbox::TmpDir {
                    path: tmp.clone(),
                    size: 64 << 20,
                }),
                landlock_abi_cap: None,
            },
            max_processes: Some(64),
        }
    }
}

/// What a run gave: the outcome, stdout and stderr.
pub struct Ran {
    pub outcome: Outcome,
    pub stdout: String,
    pub stderr: String,
}

pub async fn run_spec(spec: &Spec, timeout: Duration) -> Ran {
    run_cancellable(spec, timeout, std::future::pending()).await
}

pub async fn run_cancellable(
    spec: &Spec,
    timeout: Duration,
    cancel: impl std::future::Future<Output = ()>,
) -> Ran {
    run_through(&helper(), spec, timeout, cancel).await
}

/// Runs `spec` through `helper`; panics if the run fails.
pub async fn run_through(
    helper: &Helper,
    spec: &Spec,
    timeout: Duration,
    cancel: impl std::future::Future<Output = ()>,
) -> Ran {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let outcome = ringfence_sandbox::run(helper, spec, timeout, cancel, |s, b| match s {
        Stream::Stdout => out.extend_from_slice(b),
        Stream::Stderr => err.extend_from_slice(b),
    })
    .await
    .unwrap_or_else(|e| panic!("the run failed: {e}"));
    Ran {
        outcome,
        stdout: String::from_utf8_lossy(&out).into_owned(),
        stderr: String::from_utf8_lossy(&err).into_owned(),
    }
}

pub async fn sh(layout: &Layout, command: &str) -> Ran {
    run_spec(&layout.spec(command), Duration::from_secs(30)).await
}

/// Running processes (not zombies) whose command line contains `marker`.
#[allow(clippy::disallowed_methods)]
pub fn running_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let state = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim().to_owned()))
            .unwrap_or_default();
        if cmdline.contains(marker) && !state.starts_with('Z') && !cmdline.contains("--exact") {
            found.push(cmdline);
        }
    }
    found
}

/// Waits up to 2 s for no process to carry `marker` (a kill is asynchronous by a hair).
pub async fn none_left(marker: &str) -> Vec<String> {
    for _ in 0..100 {
        if running_with(marker).is_empty() {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running_with(marker)
}

fn unique(tag: &str) -> String {
    format!("{tag}-{}-{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[tokio::test]
async fn output_exit_code_and_the_level_applied() {
    let l = Layout::new();
    let r = sh(&l, "echo out; echo err >&2; cat a.txt; exit 3").await;
    assert_eq!(r.stdout, "out\nws content\n");
    assert_eq!(r.stderr, "err\n");
    assert_eq!(r.outcome.exit, Exit::Code(3));
    assert_eq!(r.outcome.ended, None);
    assert!(
        r.outcome.applied.landlock_abi >= 1,
        "{:?}",
        r.outcome.applied
    );
    assert!(r.outcome.applied.seccomp && r.outcome.applied.no_new_privs);
    assert_eq!(r.outcome.leftovers, 0);
}

#[tokio::test]
async fn the_environment_is_exactly_the_clean_one_and_stdin_is_empty() {
    let l = Layout::new();
    let r = sh(&l, "env | cut -d= -f1 | sort | tr '\\n' ' '; cat; echo end").await;
    // Nothing of the test process's environment (cargo's variables) is there.
    assert_eq!(
        r.stdout, "HOME LANG PATH PWD RF_DIR RF_SERVER TERM TMPDIR end\n",
        "{}",
        r.stderr
    );
    let r = sh(&l, "echo $HOME; echo $TMPDIR; echo $TERM").await;
    assert_eq!(
        r.stdout,
        format!(
            "{}\n{}\ndumb\n",
            l.path("ws").display(),
            l.path("tmp").display()
        )
    );
}

#[tokio::test]
async fn a_timeout_kills_the_whole_tree_and_says_so() {
    let l = Layout::new();
    let m = unique("rf-timeout");
    let cmd = format!(
        "sleep 300 & (sleep 301 &) ; setsid sh -c 'sleep 302' & \
         sh -c 'exec >&- 2>&-; sleep 303' & echo started; sleep 304 # {m}"
    );
    let r = run_spec(&l.spec(&cmd), Duration::from_secs(1)).await;
    assert_eq!(r.stdout, "started\n");
    assert_eq!(r.outcome.ended, Some(Ended::Timeout));
    assert_eq!(r.outcome.exit, Exit::Signal(9));
    assert_eq!(none_left(&m).await, Vec::<String>::new());
}

#[tokio::test]
async fn background_jobs_and_daemons_do_not_outlive_the_command() {
    let l = Layout::new();
    let m = unique("rf-daemon");
    let cmd = format!(
        "sleep 310 & (sleep 311 &) & setsid sleep 312 & nohup sleep 313 >/dev/null 2>&1 & \
         sh -c 'sh -c \"sleep 314 &\" &' ; sleep 0.2; echo done # {m}"
    );
    let r = sh(&l, &cmd).await;
    assert_eq!(r.stdout, "done\n", "{}", r.stderr);
    assert_eq!(r.outcome.exit, Exit::Code(0));
    assert_eq!(r.outcome.ended, None);
    assert!(r.outcome.leftovers >= 5, "{}", r.outcome.leftovers);
    assert_eq!(none_left(&m).await, Vec::<String>::new());
}

#[tokio::test]
async fn cancelling_stops_the_command_at_once() {
    let l = Layout::new();
    let m = unique("rf-cancel");
    let spec = l.spec(&format!("setsid sleep 320 & sleep 321 # {m}"));
    let r = run_cancellable(
        &spec,
        Duration::from_secs(60),
        tokio::time::sleep(Duration::from_millis(300)),
    )
    .await;
    assert_eq!(r.outcome.ended, Some(Ended::Cancelled));
    assert_eq!(none_left(&m).await, Vec::<String>::new());
}

#[tokio::test]
async fn dropping_the_run_still_kills_the_command() {
    let l = Layout::new();
    let m = unique("rf-drop");
    let spec = l.spec(&format!("setsid sleep 330 & sleep 331 # {m}"));
    let run = run_spec(&spec, Duration::from_secs(60));
    // The caller gives up (its task is aborted): the future is dropped mid-run.
    let _ = tokio::time::timeout(Duration::from_millis(500), run).await;
    assert_eq!(none_left(&m).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_fork_bomb_meets_the_process_limit() {
    let l = Layout::new();
    let probe = sh(&l, "true").await;
    let limit = probe.outcome.applied.process_limit;
    if limit == Some(ProcessLimit::Watch) {
        // Root without a cgroup: only the helper's count stands between a bomb and the
        // machine's process table, which it would fill before being seen. Not run here.
        eprintln!("skipped: no kernel process limit applies on this machine");
        return;
    }
    let m = unique("rf-bomb");
    let cmd = format!("b() {{ b | b & }}; b; sleep 3; echo survived # {m}");
    let r = run_spec(&l.spec(&cmd), Duration::from_secs(20)).await;
    // The kernel refused the forks beyond the limit (the shells say "Cannot fork"), or the
    // helper saw too many processes and killed them all; either way the machine's process
    // table stayed far from full and nothing is left.
    let refused = r.stderr.contains("Cannot fork");
    assert!(
        refused || r.outcome.ended == Some(Ended::ProcessLimit),
        "{:?} {}",
        r.outcome,
        &r.stderr[..r.stderr.len().min(500)]
    );
    assert_eq!(none_left(&m).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_disk_filler_stops_at_the_file_size_limit() {
    let l = Layout::new();
    let mut spec = l.spec("dd if=/dev/zero of=big bs=1M count=100; echo dd=$?");
    spec.policy.limits.file_size = Some(5 << 20);
    let r = run_spec(&spec, Duration::from_secs(30)).await;
    let size = std::fs::metadata(l.path("ws/big")).unwrap().len();
    assert!(size <= 5 << 20, "{size}: {}", r.stdout);
    // dd was stopped by SIGXFSZ (25): the shell reports 128 + 25.
    assert_eq!(r.stdout, "dd=153\n", "{}", r.stderr);
}

#[tokio::test]
async fn endless_output_is_passed_on_as_it_comes() {
    let l = Layout::new();
    // `yes` for a second: the caller gets it in pieces and memory does not grow with it
    // (the channel is bounded; here the test just counts).
    let mut total = 0usize;
    let mut pieces = 0usize;
    let outcome = ringfence_sandbox::run(
        &helper(),
        &l.spec("yes"),
        Duration::from_secs(1),
        std::future::pending(),
        |_, b| {
            total += b.len();
            pieces += 1;
        },
    )
    .await
    .unwrap();
    assert_eq!(outcome.ended, Some(Ended::Timeout));
    assert!(total > 1 << 20, "{total}");
    assert!(pieces > 10, "{pieces}");
}

#[tokio::test]
async fn a_missing_working_directory_is_a_setup_error() {
    let l = Layout::new();
    let mut spec = l.spec("true");
    spec.cwd = l.path("ws/missing");
    let err = ringfence_sandbox::run(
        &helper(),
        &spec,
        Duration::from_secs(10),
        std::future::pending(),
        |_, _| {},
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("cannot start /bin/sh in"), "{err}");
}

#[tokio::test]
async fn a_helper_that_is_not_one_is_a_clear_error() {
    let l = Layout::new();
    let helper = Helper {
        program: PathBuf::from("/bin/true"),
        args: Vec::new(),
        env: Vec::new(),
    };
    let err = ringfence_sandbox::run(
        &helper,
        &l.spec("true"),
        Duration::from_secs(10),
        std::future::pending(),
        |_, _| {},
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("without a report"), "{err}");
}

#[tokio::test]
async fn a_writable_root_reached_through_a_symlink_stays_writable() {
    // A configured root may be a symlink to the real directory: its writable copy goes back
    // where the directory really is, and commands write there.
    let l = Layout::new();
    let link = l.path("wslink");
    std::os::unix::fs::symlink(l.path("ws"), &link).unwrap();
    let mut spec = l.spec("echo x > through-link.txt && chmod 600 through-link.txt && echo ran");
    spec.cwd = link.clone();
    for w in spec.policy.write.iter_mut() {
        if *w == l.path("ws") {
            *w = link.clone();
        }
    }
    let r = run_spec(&spec, Duration::from_secs(30)).await;
    assert_eq!(r.outcome.exit, Exit::Code(0), "{}", r.stderr);
    assert!(r.outcome.applied.read_only_outside);
    assert_eq!(r.stdout, "ran\n");
    assert!(l.path("ws/through-link.txt").exists());
}

#[tokio::test]
#[allow(clippy::disallowed_methods)]
async fn the_commands_stdin_is_the_read_only_namespaces_dev_null() {
    // stdin opened before the mount namespace would be the machine's /dev/null on a
    // writable mount: its times (or, for a server run as root, its mode) could be changed
    // through /dev/stdin. (Times only here: a mode change would break the machine's
    // /dev/null if this ever regressed.)
    use std::os::unix::fs::MetadataExt;
    let l = Layout::new();
    let before = std::fs::metadata("/dev/null").unwrap().mtime();
    let r = sh(&l, "touch -m -d 2001-01-01 /dev/stdin; echo ran").await;
    assert_eq!(r.stdout, "ran\n");
    assert!(r.stderr.contains("Read-only file system"), "{}", r.stderr);
    let after = std::fs::metadata("/dev/null").unwrap().mtime();
    assert_ne!(
        after, 978_307_200,
        "the machine's /dev/null got the command's time"
    );
    assert!(after >= before || after > 978_307_200);
}

#[tokio::test]
async fn a_helper_of_another_build_is_refused_by_name() {
    // A stale helper (the first protocol's greeting) beside a newer server: it is never
    // given the command, and the error names it and the fix.
    let l = Layout::new();
    let marker = l.path("ws/ran");
    let helper = Helper {
        program: PathBuf::from("/bin/sh"),
        args: vec![
            "-c".into(),
            format!(
                "printf '\\000ringfence-sandbox-1\\n'; read spec; touch {}; cat >/dev/null",
                marker.display()
            ),
        ],
        env: Vec::new(),
    };
    let err = ringfence_sandbox::run(
        &helper,
        &l.spec("true"),
        Duration::from_secs(10),
        std::future::pending(),
        |_, _| {},
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("another build (1)"), "{err}");
    assert!(err.contains("/bin/sh"), "{err}");
    assert!(err.contains("same build"), "{err}");
    // It was never sent the command (its `read` got nothing before it was killed).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!marker.exists(), "the stale helper was given the command");
}

#[tokio::test]
async fn a_descriptor_the_server_inherited_never_reaches_the_command() {
    let l = Layout::new();
    // The helper is started with fd 7 open (not close-on-exec) on a secret outside every
    // root, as a launcher's stray pipe or `7<file` would leave it.
    let plain = helper();
    let mut args = vec![
        "-c".to_owned(),
        "exec 7<\"$0\"; exec \"$@\"".to_owned(),
        l.path("secret/c.txt").display().to_string(),
        plain.program.display().to_string(),
    ];
    args.extend(plain.args);
    let wrapped = Helper {
        program: PathBuf::from("/bin/sh"),
        args,
        env: plain.env,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let spec = l.spec("ls /proc/self/fd | tr '\\n' ' '; echo; cat <&7; echo end");
    let outcome = ringfence_sandbox::run(
        &wrapped,
        &spec,
        Duration::from_secs(30),
        std::future::pending(),
        |s, b| match s {
            Stream::Stdout => out.extend_from_slice(b),
            Stream::Stderr => err.extend_from_slice(b),
        },
    )
    .await
    .unwrap();
    let (out, err) = (String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    assert_eq!(outcome.exit, Exit::Code(0), "{out} {err}");
    assert!(out.ends_with("end\n"), "{out}");
    assert!(
        !out.contains("SECRET"),
        "the inherited descriptor was readable: {out}"
    );
    assert!(err.contains("7"), "{err}"); // the shell's "bad file descriptor" for fd 7
    // Only the command's own descriptors are open (0–2 and the one ls opened to list them).
    let listed: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert!(!listed.contains(&"7"), "{listed:?}");
}

#[tokio::test]
async fn with_the_network_on_only_internet_sockets_are_allowed() {
    let l = Layout::new();
    let mut spec = l.spec(
        "python3 -c 'import socket\nfor f in (socket.AF_INET, socket.AF_INET6, socket.AF_UNIX, socket.AF_NETLINK):\n    try:\n        socket.socket(f).close(); print(f.name, \"ok\")\n    except OSError as e:\n        print(f.name, e.strerror)'",
    );
    spec.policy.network = Network::Full;
    let r = run_spec(&spec, Duration::from_secs(30)).await;
    assert_eq!(
        r.stdout,
        "AF_INET ok\nAF_INET6 ok\nAF_UNIX Operation not permitted\nAF_NETLINK Operation not permitted\n",
        "{}",
        r.stderr
    );
}

#[tokio::test]
async fn the_command_runs_in_namespaces_of_its_own() {
    let l = Layout::new();
    let r = sh(
        &l,
        "echo pid=$$; ls /proc | grep -c '^[0-9]'; grep -c . /proc/sysvipc/shm; \
         cat /proc/net/dev | grep -c ':'; stat -f -c 'tmp=%T' \"$TMPDIR\"",
    )
    .await;
    let ns = r.outcome.applied.namespaces.expect("namespaces made");
    assert!(ns.pid && ns.ipc && ns.mount && ns.uts && ns.net, "{ns:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    // The shell is the second process of its namespace (its init is the first), and sees
    // only the processes of the command: itself, `ls` and `grep`, and the init.
    assert_eq!(lines[0], "pid=2", "{}", r.stdout);
    assert!(lines[1].parse::<u32>().unwrap() <= 4, "{}", r.stdout);
    // No System V segment of the machine's (only the header line).
    assert_eq!(lines[2], "1", "{}", r.stdout);
    // Only the loopback device.
    assert_eq!(lines[3], "1", "{}", r.stdout);
    assert_eq!(lines[4], "tmp=tmpfs", "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.outcome.applied.tmp_size, Some(64 << 20));
}

fn forbidding_helper() -> Helper {
    let mut h = helper();
    h.env.push((FORBID_ENV.to_owned(), "1".to_owned()));
    h
}

#[tokio::test]
async fn where_namespaces_are_forbidden_commands_are_refused_and_say_why() {
    let l = Layout::new();
    let spec = l.spec("echo ran > ran.txt");
    let e = ringfence_sandbox::run(
        &forbidding_helper(),
        &spec,
        Duration::from_secs(30),
        std::future::pending(),
        |_, _| {},
    )
    .await
    .unwrap_err();
    assert!(
        matches!(e, ringfence_sandbox::SandboxError::NoNamespaces(_)),
        "{e:?}"
    );
    let text = e.to_string();
    for needed in [
        "Operation not permitted",
        "deploy/apparmor/ringfence",
        "CAP_SYS_ADMIN",
        "sandbox = \"partial\"",
    ] {
        assert!(text.contains(needed), "{needed}: {text}");
    }
    assert!(!l.path("ws/ran.txt").exists(), "the command ran");
}

#[tokio::test]
async fn with_partial_the_command_runs_without_namespaces_and_says_so() {
    let l = Layout::new();
    let mut spec = l.spec("echo ran; ls /proc | grep -c '^[0-9]' ");
    spec.policy.require = ringfence_sandbox::Requirement::Partial;
    let r = run_through(
        &forbidding_helper(),
        &spec,
        Duration::from_secs(30),
        std::future::pending(),
    )
    .await;
    let (stdout, outcome) = (r.stdout, r.outcome);
    assert!(stdout.starts_with("ran\n"), "{stdout} {}", r.stderr);
    // The machine's processes are in sight (no PID namespace), and the result says so.
    assert!(
        stdout.lines().nth(1).unwrap().parse::<u32>().unwrap() > 4,
        "{stdout}"
    );
    assert_eq!(outcome.applied.namespaces, None);
    assert!(outcome.applied.ipc_refused);
    assert!(!outcome.applied.processes_hidden());
}

/// The pids of running processes whose command line is exactly `argv0` (nothing after it),
/// children of this test process.
#[allow(clippy::disallowed_methods)]
fn children_running(argv0: &str) -> Vec<i32> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().nth(1).map(str::to_owned));
            cmdline == format!("{argv0}\0").as_bytes() && ppid.as_deref() == Some(&me)
        })
        .collect()
}

#[tokio::test]
async fn a_killed_helper_leaves_nothing_running() {
    // SIGKILL to the helper mid-command (a crash, an OOM kill of the server's side): the
    // stage dies with it, the init with the stage, and the kernel ends the namespace.
    let l = Layout::new();
    let m = unique("rf-helper-killed");
    let spec = l.spec(&format!(
        "setsid sh -c 'sleep 340; :' {m} & sleep 341 # {m}"
    ));
    let helper = program_helper();
    let argv0 = helper.program.display().to_string();
    let run = tokio::spawn(async move {
        ringfence_sandbox::run(
            &helper,
            &spec,
            Duration::from_secs(60),
            std::future::pending(),
            |_, _| {},
        )
        .await
    });
    let mut killed = false;
    for _ in 0..250 {
        if !running_with(&m).is_empty() {
            for pid in children_running(&argv0) {
                let _ = rustix::process::kill_process(
                    rustix::process::Pid::from_raw(pid).unwrap(),
                    rustix::process::Signal::KILL,
                );
                killed = true;
            }
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        killed,
        "the command never started, or its helper was not found"
    );
    let result = run.await.unwrap();
    assert!(result.is_err(), "{result:?}");
    assert_eq!(none_left(&m).await, Vec::<String>::new());
}

#[tokio::test]
async fn an_ordinary_users_commands_get_their_namespaces_too() {
    // The server as an ordinary user (uid 65534, no capability, no cgroup of its own): the
    // namespaces are made inside a user namespace mapping only that user, the IPC
    // namespace's limits cannot be set there (the kernel gives them to a root it does not
    // map), so System V IPC is refused instead — and the command runs. Needs root to
    // become that user.
    if !rustix::process::getuid().is_root() {
        eprintln!("skipped: becoming another user needs root");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let l = Layout::new();
    for d in ["", "ws", "tmp", "ro"] {
        let p = l.path(d);
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let mut spec = l.spec("echo uid=$(id -u); ls /proc | grep -c '^[0-9]'; echo made > out.txt");
    // A memory limit with no memory cgroup to hold it: the case that needs the IPC
    // namespace's limits (or the refusal).
    spec.policy.limits.memory = Some(256 << 20);
    let helper = Helper {
        program: PathBuf::from("/usr/bin/setpriv"),
        args: vec![
            "--reuid=65534".into(),
            "--regid=65534".into(),
            "--clear-groups".into(),
            "--".into(),
            env!("CARGO_BIN_EXE_sandbox-test-helper").into(),
        ],
        env: Vec::new(),
    };
    let r = run_through(
        &helper,
        &spec,
        Duration::from_secs(30),
        std::future::pending(),
    )
    .await;
    assert_eq!(r.outcome.exit, Exit::Code(0), "{} {}", r.stdout, r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "uid=65534", "{}", r.stdout);
    assert!(lines[1].parse::<u32>().unwrap() <= 4, "{}", r.stdout);
    let ns = r.outcome.applied.namespaces.expect("namespaces made");
    assert!(ns.user && ns.pid && ns.ipc && ns.net, "{ns:?}");
    // Nobody may make cgroups here: no memory cgroup, so the address space and the filter
    // bound memory, and System V IPC is refused (the IPC limits could not be set).
    assert_eq!(
        r.outcome.applied.memory_limit,
        Some(ringfence_sandbox::MemoryLimit::AddressSpace)
    );
    assert!(r.outcome.applied.ipc_refused);
    assert_eq!(
        std::fs::read_to_string(l.path("ws/out.txt")).unwrap(),
        "made\n"
    );
}
