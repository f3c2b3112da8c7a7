//! The sandbox applied for real: each case runs in a child process (this test binary started
//! again with `child_process_entry` and the case in its environment), which restricts itself
//! and reports what it could and could not do, one `name=result` line each; the parent
//! asserts on those lines. A restriction applied in the test process itself would bind every
//! later test.
#![cfg(target_os = "linux")] // the sandbox is Linux's
#![allow(clippy::disallowed_methods)] // fixtures and probes use std::fs on purpose
#![allow(clippy::print_stdout)] // the child reports to its parent on stdout
#![allow(clippy::print_stderr)] // a test says why it skipped

use std::path::{Path, PathBuf};
use std::process::Command;

use ringfence_sandbox::{Enforcement, Limits, Policy, restrict_self, system_read_paths};

mod escape;
mod helper;

const CASE: &str = "RINGFENCE_SANDBOX_TEST_CASE";
const DIR: &str = "RINGFENCE_SANDBOX_TEST_DIR";

/// `<dir>/ws` (writable), `<dir>/ro` (read-only) and `<dir>/secret` (neither), each with a
/// file.
fn layout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (sub, file) in [("ws", "a.txt"), ("ro", "b.txt"), ("secret", "c.txt")] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
        std::fs::write(dir.path().join(sub).join(file), format!("{sub} content\n")).unwrap();
    }
    dir
}

/// Runs `case` in a sandboxed child over `dir`; its report lines.
fn child(case: &str, dir: &Path) -> Vec<String> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_process_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CASE, case)
        .env(DIR, dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<String> = stdout
        .lines()
        .filter(|l| l.starts_with("report "))
        .map(|l| l.trim_start_matches("report ").to_owned())
        .collect();
    assert!(
        lines.iter().any(|l| l == "done="),
        "the child did not finish: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines
}

fn policy(dir: &Path, system: bool) -> Policy {
    let mut read = vec![dir.join("ro")];
    if system {
        read.extend(system_read_paths());
    }
    let mut write = vec![dir.join("ws")];
    write.extend(ringfence_sandbox::device_write_paths());
    Policy {
        read,
        write,
        limits: Limits {
            open_files: Some(200),
            ..Limits::default()
        },
        network: ringfence_sandbox::Network::None,
        others_processes: 0,
        require: ringfence_sandbox::Requirement::Full,
        namespaces: false,
        user_namespace: ringfence_sandbox::UserNamespace::Auto,
        tmp: None,
        landlock_abi_cap: None,
    }
}

fn outcome<T>(r: std::io::Result<T>) -> &'static str {
    match r {
        Ok(_) => "ok",
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => "denied",
        // EROFS: outside the writable roots everything is mounted read-only.
        Err(e) if e.raw_os_error() == Some(30) => "read-only",
        Err(_) => "error",
    }
}

/// The way an ordinary user's server gets there: inside a new user namespace (taken here
/// even by root). A user namespace needs a single-threaded process, and the test harness
/// has two threads, so the probe runs in a forked child, which has only this one; it makes
/// no allocation the other thread could hold a lock of (that thread waits for this test).
#[allow(unsafe_code)]
fn user_namespace_probe(dir: &Path, report: &dyn Fn(&str, &str)) {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: fork(2); the child only makes system calls and writes to stdout, then _exits.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let r = ringfence_sandbox::read_only_outside(
            &[dir.join("ws")],
            ringfence_sandbox::NamespaceKind::User,
        );
        report("mounted", &format!("{:?}", r.map_err(|e| format!("{e:?}"))));
        let chmod = |p: &str| {
            outcome(std::fs::set_permissions(
                dir.join(p),
                std::fs::Permissions::from_mode(0o777),
            ))
        };
        report("chmod_ws", chmod("ws/a.txt"));
        report("chmod_secret", chmod("secret/c.txt"));
        report(
            "write_ws",
            outcome(std::fs::write(dir.join("ws/userns.txt"), "x")),
        );
        report("uid", &rustix::process::getuid().as_raw().to_string());
        use std::io::Write;
        let _ = std::io::stdout().flush();
        // SAFETY: ends the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above; `status` is a valid out-pointer.
    unsafe { libc::waitpid(pid, &mut status, 0) };
}

/// The child's side: restrict, probe, report.
#[test]
fn child_process_entry() {
    let (Ok(case), Ok(dir)) = (std::env::var(CASE), std::env::var(DIR)) else {
        return; // an ordinary test run: nothing to do
    };
    let dir = PathBuf::from(dir);
    println!(); // the harness's "test … " prefix ends here
    let report = |name: &str, value: &str| println!("report {name}={value}");
    if case == "user_namespace" {
        user_namespace_probe(&dir, &report);
        report("done", "");
        return;
    }
    let applied = restrict_self(&policy(&dir, case == "exec")).unwrap();
    report("abi", &applied.landlock_abi.to_string());
    report(
        "full",
        &(applied.enforcement == Enforcement::Full).to_string(),
    );
    report("scoped", &applied.scoped.to_string());
    report("nnp", &applied.no_new_privs.to_string());
    match case.as_str() {
        "files" => {
            report("read_ws", outcome(std::fs::read(dir.join("ws/a.txt"))));
            report(
                "write_ws",
                outcome(std::fs::write(dir.join("ws/new.txt"), "x")),
            );
            report("read_ro", outcome(std::fs::read(dir.join("ro/b.txt"))));
            report(
                "write_ro",
                outcome(std::fs::write(dir.join("ro/x.txt"), "x")),
            );
            report(
                "read_secret",
                outcome(std::fs::read(dir.join("secret/c.txt"))),
            );
            report(
                "write_secret",
                outcome(std::fs::write(dir.join("secret/y.txt"), "x")),
            );
            report("list_parent", outcome(std::fs::read_dir(&dir)));
            use std::os::unix::fs::PermissionsExt;
            let chmod = |p: &str| {
                outcome(std::fs::set_permissions(
                    dir.join(p),
                    std::fs::Permissions::from_mode(0o777),
                ))
            };
            report("chmod_ws", chmod("ws/a.txt"));
            report("chmod_ro", chmod("ro/b.txt"));
            report("chmod_secret", chmod("secret/c.txt"));
            report("read_only_outside", &applied.read_only_outside.to_string());
            report("read_etc_hostname", outcome(std::fs::read("/etc/hostname")));
            report("write_dev_null", outcome(std::fs::write("/dev/null", "x")));
            // Asked of the kernel (prctl), not taken from the report.
            report(
                "kernel_nnp",
                &rustix::thread::no_new_privs().unwrap_or(false).to_string(),
            );
            let nofile = rustix::process::getrlimit(rustix::process::Resource::Nofile);
            report("nofile", &format!("{:?}", nofile.current));
            let parent = rustix::process::getppid().unwrap();
            report(
                "signal_parent",
                outcome(rustix::process::test_kill_process(parent).map_err(Into::into)),
            );
        }
        "exec" => {
            // A program started after the restriction inherits it.
            let out = Command::new("/bin/sh")
                .arg("-c")
                .arg("cat secret/c.txt; echo made > ws/out.txt; cat ro/b.txt")
                .current_dir(&dir)
                .output()
                .unwrap();
            report(
                "sh_stdout",
                &String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .replace('\n', "|"),
            );
            report(
                "sh_secret_refused",
                &String::from_utf8_lossy(&out.stderr)
                    .contains("Permission denied")
                    .to_string(),
            );
        }
        other => panic!("unknown case {other}"),
    }
    report("done", "");
}

fn value<'a>(lines: &'a [String], name: &str) -> &'a str {
    lines
        .iter()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name} in {lines:?}"))
}

#[test]
fn inside_a_user_namespace_the_outside_is_read_only_too() {
    let dir = layout();
    let lines = child("user_namespace", dir.path());
    assert_eq!(value(&lines, "mounted"), "Ok(UserAndMount)", "{lines:?}");
    assert_eq!(value(&lines, "chmod_ws"), "ok");
    assert_eq!(value(&lines, "write_ws"), "ok");
    assert_eq!(value(&lines, "chmod_secret"), "read-only");
    // The user is mapped to itself: files keep their owner.
    assert_eq!(
        value(&lines, "uid"),
        rustix::process::getuid().as_raw().to_string()
    );
    assert!(dir.path().join("ws/userns.txt").exists());
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        std::fs::metadata(dir.path().join(p))
            .unwrap()
            .permissions()
            .mode()
    };
    assert_eq!(mode("ws/a.txt") & 0o777, 0o777);
    assert_ne!(mode("secret/c.txt") & 0o777, 0o777);
}

#[test]
fn a_restricted_process_reaches_its_roots_and_nothing_else() {
    let dir = layout();
    let lines = child("files", dir.path());
    assert!(
        value(&lines, "abi").parse::<u8>().unwrap() >= 1,
        "{lines:?}"
    );
    assert_eq!(value(&lines, "full"), "true", "{lines:?}");
    assert_eq!(value(&lines, "read_ws"), "ok");
    assert_eq!(value(&lines, "write_ws"), "ok");
    assert_eq!(value(&lines, "read_ro"), "ok");
    // Outside the writable roots the mounts are read-only: the kernel says so before
    // Landlock is asked.
    assert_eq!(value(&lines, "read_only_outside"), "true", "{lines:?}");
    assert_eq!(value(&lines, "write_ro"), "read-only");
    assert_eq!(value(&lines, "read_secret"), "denied");
    assert_eq!(value(&lines, "write_secret"), "read-only");
    // Modes: Landlock does not control them; the read-only mounts do.
    assert_eq!(value(&lines, "chmod_ws"), "ok");
    assert_eq!(value(&lines, "chmod_ro"), "read-only");
    assert_eq!(value(&lines, "chmod_secret"), "read-only");
    assert_eq!(value(&lines, "list_parent"), "denied");
    // Without the system paths in the policy, /etc is out of reach too.
    assert_eq!(value(&lines, "read_etc_hostname"), "denied");
    assert_eq!(value(&lines, "write_dev_null"), "ok");
    assert_eq!(value(&lines, "nnp"), "true");
    assert_eq!(value(&lines, "kernel_nnp"), "true");
    assert_eq!(value(&lines, "nofile"), "Some(200)");
    assert!(dir.path().join("ws/new.txt").exists());
    assert!(!dir.path().join("ro/x.txt").exists());
    assert!(!dir.path().join("secret/y.txt").exists());
    if value(&lines, "scoped") == "true" {
        // Signal scoping: the unsandboxed parent cannot be signalled from inside.
        assert_eq!(value(&lines, "signal_parent"), "denied", "{lines:?}");
    }
}

#[test]
fn a_program_started_inside_inherits_the_restriction() {
    let dir = layout();
    let lines = child("exec", dir.path());
    assert_eq!(value(&lines, "sh_stdout"), "ro content", "{lines:?}");
    assert_eq!(value(&lines, "sh_secret_refused"), "true", "{lines:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ws/out.txt")).unwrap(),
        "made\n"
    );
}
