//! run_shell_command through the tool: results, argument errors, the working directory and
//! roots, timeouts and cancellation, capped output with its spill file, progress, the
//! courtesy refusal, per-user concurrency, the data-directory guard and the environment.
//! This test binary stands in for ringfence's as the sandbox helper (`helper_entry`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ringfence_core::{Limits, Progress, ToolErrorKind, Toolbox};
use ringfence_fs::Access;
use ringfence_sandbox::Helper;
use ringfence_shell::{self as shell, ShellConfig};
use serde_json::{Value, json};

use crate::common::Fx;

const HELPER_ENV: &str = "RINGFENCE_TOOLS_TEST_HELPER";

/// The sandbox helper's side, when this binary is started as one.
#[test]
fn helper_entry() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    std::process::exit(ringfence_sandbox::helper_main());
}

pub(crate) fn config() -> ShellConfig {
    let mut cfg = ShellConfig::new(Helper {
        program: std::env::current_exe().unwrap(),
        args: [
            "--exact",
            "shell::helper_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ]
        .map(String::from)
        .to_vec(),
        env: vec![(HELPER_ENV.to_owned(), "1".to_owned())],
    });
    cfg.max_processes = 64;
    cfg
}

fn fx_with(cfg: ShellConfig, roots: &[(&str, Access)]) -> Fx {
    let mut fx = Fx::with_roots(Limits::default(), &[], roots);
    fx.toolbox = Toolbox::of(&[shell::family(cfg)]);
    fx
}

fn fx() -> Fx {
    fx_with(config(), &[("ws", Access::ReadWrite)])
}

async fn run(fx: &Fx, args: Value) -> (String, Value) {
    let out = fx
        .call_full("run_shell_command", args.clone())
        .await
        .unwrap_or_else(|e| panic!("{args}: {:?} {}", e.kind, e.message));
    (out.all_text(), out.structured.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_reports_exit_code_streams_and_the_sandbox() {
    let fx = fx();
    fx.write("a.txt", "hello\n");
    let (text, s) = run(&fx, json!({"command": "cat a.txt; echo oops >&2; exit 7"})).await;
    assert!(text.starts_with("Exit code: 7\n"), "{text}");
    assert!(text.contains("\nstdout:\nhello\n"), "{text}");
    assert!(text.contains("\nstderr:\noops\n"), "{text}");
    assert!(text.contains("Sandbox: Landlock ABI"), "{text}");
    assert_eq!(s["exitCode"], 7);
    assert_eq!(s["stdout"], "hello\n");
    assert_eq!(s["stderr"], "oops\n");
    assert_eq!(s["timedOut"], false);
    assert_eq!(s["sandbox"]["enabled"], true);
    assert_eq!(s["sandbox"]["seccomp"], true);
    assert_eq!(s["sandbox"]["readOnlyOutside"], true);
    assert_eq!(s["sandbox"]["network"], "none");
    assert_eq!(s["workingDirectory"], fx.root.display().to_string());
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_arguments_name_the_problem() {
    let fx = fx();
    for (args, needle) in [
        (json!({"command": "  "}), "command is empty"),
        (json!({"command": "true", "timeout": 0}), "at most 300"),
        (json!({"command": "true", "timeout": 301}), "at most 300"),
        (json!({"command": "true", "timeout": -5}), "more than 0"),
        (json!({"command": "true", "cwd": "x"}), "unknown field"),
        (json!({}), "missing field `command`"),
        (
            json!({"command": format!("echo {}", "x".repeat(70_000))}),
            "command is 70005 bytes, at most 65536; write long content to a file",
        ),
    ] {
        let e = fx.err("run_shell_command", args.clone()).await;
        assert_eq!(e.kind, ToolErrorKind::InvalidArgument, "{args}");
        assert!(e.message.contains(needle), "{}", e.message);
    }
    // Just under the limit runs.
    let (_, s) = run(
        &fx,
        json!({"command": format!("echo {} | wc -c", "x".repeat(60_000))}),
    )
    .await;
    assert_eq!(s["stdout"], "60001\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_working_directory_follows_the_containment_rules() {
    let fx = fx();
    std::fs::create_dir_all(fx.path("sub/dir")).unwrap();
    fx.write("file.txt", "x");
    let (_, s) = run(
        &fx,
        json!({"command": "pwd", "workingDirectory": "sub/dir"}),
    )
    .await;
    assert_eq!(s["stdout"], format!("{}\n", fx.path("sub/dir").display()));
    let outside = fx.tmp.path().join("outside").display().to_string();
    let e = fx
        .err(
            "run_shell_command",
            json!({"command": "pwd", "workingDirectory": outside}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::OutsideWorkspace, "{}", e.message);
    let e = fx
        .err(
            "run_shell_command",
            json!({"command": "pwd", "workingDirectory": "../outside"}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::OutsideWorkspace, "{}", e.message);
    let e = fx
        .err(
            "run_shell_command",
            json!({"command": "pwd", "workingDirectory": "missing"}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::NotFound, "{}", e.message);
    let e = fx
        .err(
            "run_shell_command",
            json!({"command": "pwd", "workingDirectory": "file.txt"}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::WrongType, "{}", e.message);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_read_only_root_is_read_only_to_commands_and_outside_is_out_of_reach() {
    let fx = fx_with(
        config(),
        &[("ws", Access::ReadWrite), ("ro", Access::ReadOnly)],
    );
    std::fs::write(fx.tmp.path().join("ro/r.txt"), "ro text\n").unwrap();
    std::fs::write(fx.tmp.path().join("outside/secret.txt"), "SECRET\n").unwrap();
    let ro = fx.tmp.path().join("ro");
    let outside = fx.tmp.path().join("outside");
    let cmd = format!(
        "cat {ro}/r.txt; echo x > {ro}/new.txt; cat {out}/secret.txt; echo y > {out}/y.txt; echo made > here.txt",
        ro = ro.display(),
        out = outside.display()
    );
    let (_, s) = run(&fx, json!({ "command": cmd })).await;
    assert_eq!(s["stdout"], "ro text\n");
    let stderr = s["stderr"].as_str().unwrap();
    // Reading outside: Landlock refuses. Writing into the read-only root or outside: the
    // mounts there are read-only.
    assert_eq!(stderr.matches("Permission denied").count(), 1, "{stderr}");
    assert_eq!(
        stderr.matches("Read-only file system").count(),
        2,
        "{stderr}"
    );
    assert!(!ro.join("new.txt").exists());
    assert!(!outside.join("y.txt").exists());
    assert_eq!(fx.read_str("here.txt"), "made\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_kills_the_command_and_says_so() {
    let fx = fx();
    let (text, s) = run(
        &fx,
        json!({"command": "echo before; sleep 30; echo after", "timeout": 0.5}),
    )
    .await;
    assert!(text.starts_with("Timed out after 0.5 s"), "{text}");
    assert_eq!(s["timedOut"], true);
    // Stopped during the sleep: what came after it never ran.
    assert_eq!(s["stdout"], "before\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_shorter_than_the_sandbox_setup_says_the_command_never_started() {
    let fx = fx();
    let marker = fx.tmp.path().join("ws/ran");
    let e = fx
        .err(
            "run_shell_command",
            json!({"command": "touch ran", "timeout": 0.001}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::Timeout, "{}", e.message);
    assert!(e.message.contains("never started"), "{}", e.message);
    assert!(e.message.contains("longer timeout"), "{}", e.message);
    assert!(!marker.exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_the_call_stops_the_command() {
    let fx = fx();
    let cancel = fx.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    });
    let e = fx
        .err("run_shell_command", json!({"command": "sleep 30"}))
        .await;
    assert_eq!(e.kind, ToolErrorKind::Cancelled);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_command_leaves_no_saved_output_behind() {
    // Output past what the result shows starts a spill file; a call that ends without a
    // result (cancelled here) must not leave it under the data directory.
    let mut cfg = config();
    cfg.shown_chars = 1000;
    let fx = fx_with(cfg, &[("ws", Access::ReadWrite)]);
    let spill_dir = fx.ctx.spill.root().absolute_path().to_path_buf();
    let files = || {
        std::fs::read_dir(&spill_dir)
            .map(|d| d.flatten().count())
            .unwrap_or(0)
    };
    let before = files();
    let cancel = fx.ctx.cancel.clone();
    let watch = spill_dir.clone();
    tokio::spawn(async move {
        // Cancel once the spill file exists (the output has passed the shown part).
        for _ in 0..200 {
            if std::fs::read_dir(&watch).is_ok_and(|d| d.flatten().count() > before) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        cancel.cancel();
    });
    let e = fx
        .err(
            "run_shell_command",
            json!({"command": "seq 1 100000; sleep 30"}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::Cancelled);
    assert_eq!(
        files(),
        before,
        "the cancelled call's spill file was left behind"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn long_output_is_cut_and_saved_whole() {
    let mut cfg = config();
    cfg.shown_chars = 1000;
    let fx = fx_with(cfg, &[("ws", Access::ReadWrite)]);
    let (text, s) = run(&fx, json!({"command": "seq 1 100000; echo small >&2"})).await;
    assert_eq!(s["stdoutTruncated"], true);
    assert_eq!(s["stderrTruncated"], false);
    assert_eq!(s["stderr"], "small\n");
    let shown = s["stdout"].as_str().unwrap();
    assert!(shown.starts_with("1\n2\n3\n"), "{shown}");
    assert!(shown.ends_with("99999\n100000\n"), "{shown}");
    assert!(shown.chars().count() < 1200, "{}", shown.len());
    let file = s["stdoutFile"].as_str().unwrap();
    let expected: String = (1..=100000).map(|n| format!("{n}\n")).collect();
    assert_eq!(std::fs::read_to_string(file).unwrap(), expected);
    assert!(text.contains(file), "{text}");
    assert_eq!(s["stdoutBytes"], expected.len());
}

#[tokio::test(flavor = "multi_thread")]
async fn progress_carries_new_lines_while_it_runs() {
    let mut fx = fx();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = seen.clone();
    fx.ctx.progress = Progress::new(move |u| {
        sink.lock().unwrap().push(u.message.unwrap_or_default());
    });
    run(
        &fx,
        json!({"command": "for i in 1 2 3 4; do echo line$i; sleep 0.4; done"}),
    )
    .await;
    let seen = seen.lock().unwrap().join("\n");
    assert!(seen.contains("line2") && seen.contains("line3"), "{seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn privilege_words_are_refused_at_once_and_bypasses_meet_the_sandbox() {
    let fx = fx();
    for cmd in ["sudo id", "ls; su -c id", "echo $(sudo id)"] {
        let e = fx.err("run_shell_command", json!({ "command": cmd })).await;
        assert_eq!(e.kind, ToolErrorKind::Refused, "{cmd}");
        assert!(e.message.contains("is refused"), "{}", e.message);
    }
    // Spelled past the list: it runs, and gains nothing (no capability, whoever we are).
    let (_, s) = run(
        &fx,
        json!({"command": "s''u -c 'grep CapEff /proc/self/status' 2>&1; grep CapEff /proc/self/status"}),
    )
    .await;
    let stdout = s["stdout"].as_str().unwrap();
    assert!(
        stdout.contains("CapEff:\t0000000000000000"),
        "{stdout} / {}",
        s["stderr"]
    );
    assert!(!stdout.contains("CapEff:\t000001"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn one_user_may_run_only_so_many_commands_at_once() {
    let mut cfg = config();
    cfg.concurrent_per_user = 1;
    let fx = Arc::new(fx_with(cfg, &[("ws", Access::ReadWrite)]));
    let first = {
        let fx = fx.clone();
        tokio::spawn(async move {
            fx.call("run_shell_command", json!({"command": "sleep 1.5"}))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let e = fx
        .err("run_shell_command", json!({"command": "true"}))
        .await;
    assert_eq!(e.kind, ToolErrorKind::Refused);
    assert!(e.message.contains("at most 1 at once"), "{}", e.message);
    first.await.unwrap().unwrap();
    // The slot is free again.
    fx.ok("run_shell_command", json!({"command": "true"})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_root_holding_the_data_directory_is_refused() {
    let mut cfg = config();
    let fx0 = Fx::new();
    cfg.protected = vec![fx0.root.join("data")];
    let mut fx = fx0;
    fx.toolbox = Toolbox::of(&[shell::family(cfg)]);
    let e = fx
        .err("run_shell_command", json!({"command": "true"}))
        .await;
    assert_eq!(e.kind, ToolErrorKind::Refused);
    assert!(e.message.contains("data directory"), "{}", e.message);
    // A root inside the protected directory (the default workspace) is fine.
    let mut cfg = config();
    cfg.protected = vec![fx.tmp.path().to_path_buf()];
    fx.toolbox = Toolbox::of(&[shell::family(cfg)]);
    fx.ok("run_shell_command", json!({"command": "true"})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_writable_root_holding_ringfences_own_files_is_refused() {
    let mut cfg = config();
    let mut fx = fx_with(
        config(),
        &[("ws", Access::ReadWrite), ("ro", Access::ReadOnly)],
    );
    let exe = fx.tmp.path().join("ws/bin/ringfence-sandbox");
    cfg.unwritable = vec![(exe, "the sandbox helper executable".to_owned())];
    fx.toolbox = Toolbox::of(&[shell::family(cfg)]);
    let e = fx
        .err("run_shell_command", json!({"command": "true"}))
        .await;
    assert_eq!(e.kind, ToolErrorKind::Refused);
    assert!(
        e.message.contains("holds the sandbox helper executable")
            && e.message.contains("outside the writable roots"),
        "{}",
        e.message
    );
    // In a read-only root it cannot be replaced: commands run.
    let mut cfg = config();
    cfg.unwritable = vec![(
        fx.tmp.path().join("ro/ringfence"),
        "the ringfence executable".to_owned(),
    )];
    fx.toolbox = Toolbox::of(&[shell::family(cfg)]);
    fx.ok("run_shell_command", json!({"command": "true"})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_root_nested_in_a_writable_root_is_refused() {
    for inner in [Access::ReadOnly, Access::ReadWrite] {
        let fx = fx_with(config(), &[("ws", Access::ReadWrite), ("ws/inner", inner)]);
        let e = fx
            .err("run_shell_command", json!({"command": "true"}))
            .await;
        assert_eq!(e.kind, ToolErrorKind::Refused, "{}", e.message);
        assert!(
            e.message.contains("lies inside the writable root")
                && e.message.contains("must not nest roots"),
            "{}",
            e.message
        );
    }
    // Beside each other, or a writable root inside a read-only one, is fine.
    let fx = fx_with(
        config(),
        &[("ws", Access::ReadWrite), ("ro", Access::ReadOnly)],
    );
    fx.ok("run_shell_command", json!({"command": "true"})).await;
    let fx = fx_with(
        config(),
        &[("ro/ws", Access::ReadWrite), ("ro", Access::ReadOnly)],
    );
    fx.ok("run_shell_command", json!({"command": "true"})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_is_clean_plus_the_operators_variables() {
    let mut cfg = config();
    cfg.env = vec![("PROJECT_MODE".to_owned(), "test".to_owned())];
    let fx = fx_with(cfg, &[("ws", Access::ReadWrite)]);
    let (_, s) = run(
        &fx,
        json!({"command": "env | cut -d= -f1 | sort | tr '\\n' ' '; echo; echo $PROJECT_MODE; test -d \"$TMPDIR\" && touch \"$TMPDIR/t\" && echo tmp-ok"}),
    )
    .await;
    assert_eq!(
        s["stdout"], "HOME LANG PATH PROJECT_MODE PWD TERM TMPDIR \ntest\ntmp-ok\n",
        "{}",
        s["stderr"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_private_path_under_a_granted_system_directory_is_refused() {
    // A data directory under /usr (granted to every command for reading): refused, by
    // name, with the way out; the command never runs.
    let mut cfg = config();
    cfg.private = vec![(
        std::path::PathBuf::from("/usr/share/ringfence-test/data"),
        "ringfence's data directory".to_owned(),
    )];
    let mut fx = fx();
    fx.toolbox = Toolbox::of(&[shell::family(cfg)]);
    let e = fx
        .err(
            "run_shell_command",
            json!({"command": "echo ran > ran.txt"}),
        )
        .await;
    assert_eq!(e.kind, ToolErrorKind::Refused);
    for needed in [
        "ringfence's data directory (/usr/share/ringfence-test/data)",
        "beneath /usr/share",
        "RINGFENCE_DATA_DIR",
    ] {
        assert!(e.message.contains(needed), "{needed}: {}", e.message);
    }
    assert!(!fx.root.join("ws/ran.txt").exists());
    // Outside the system directories it runs.
    let mut cfg = config();
    cfg.private = vec![(
        fx.tmp.path().join("data"),
        "ringfence's data directory".to_owned(),
    )];
    fx.toolbox = Toolbox::of(&[shell::family(cfg)]);
    fx.ok("run_shell_command", json!({"command": "true"})).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_past_its_memory_is_killed_and_the_result_says_so() {
    let mut cfg = config();
    cfg.limits.memory = Some(128 << 20);
    cfg.limits.address_space = Some(128 << 20);
    cfg.max_tmp = 16 << 20;
    let mut fx = fx();
    fx.toolbox = Toolbox::of(&[shell::family(cfg)]);
    let (text, s) = run(
        &fx,
        json!({"command": "python3 -c 'import os\nfd = os.memfd_create(\"x\")\nfor _ in range(512): os.write(fd, bytes(1 << 20))\nprint(\"HELD-ALL\")'"}),
    )
    .await;
    assert!(!text.contains("HELD-ALL"), "{text}");
    if s["sandbox"]["memoryLimit"] == "cgroup" {
        assert!(
            text.starts_with("Killed: the command ran out of memory (128 MiB"),
            "{text}"
        );
        assert_eq!(s["memoryLimitExceeded"], true);
        assert!(text.contains("memory: cgroup 128 MiB"), "{text}");
    } else {
        // No memory cgroup on this machine: memfd is refused instead.
        assert!(text.contains("Operation not permitted"), "{text}");
    }
    assert!(text.contains("$TMPDIR: tmpfs 16 MiB"), "{text}");
    assert!(text.contains("namespaces: pid (own /proc)"), "{text}");
}
