//! `doctor`: is this setup working, and if not, what to do. Each finding names what was
//! checked, how it came out and the fix: the configuration, the data directory and its modes,
//! each root, each family (off and why; its own checks), the shell's sandbox on this kernel,
//! and — unless `--offline` — what the configuration reaches (the search provider, the
//! calendar, mail servers, PostgreSQL, the model). Exit status 1 when something configured
//! does not work.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ringfence_core::plug::{Check, Outcome, ProbeCall, ProbeEnv};
use ringfence_fs::Access;

use super::{print_out, runtime};
use crate::app::App;
use crate::config::{Config, Overrides};
use crate::families::FAMILIES;

#[derive(Debug, clap::Args)]
pub(super) struct DoctorArgs {
    /// The findings as JSON: an array of {section, subject, outcome, detail, fix}.
    #[arg(long)]
    json: bool,
    /// Check this machine only: reach no search provider, calendar server, mail server,
    /// database or model (each of those checks sends one small request).
    #[arg(long)]
    offline: bool,
}

/// One finding under its section (`configuration`, `roots`, a family's name).
#[derive(Debug, serde::Serialize)]
struct Finding {
    section: String,
    #[serde(flatten)]
    check: Check,
}

#[derive(Default)]
struct Report(Vec<Finding>);

impl Report {
    fn add(&mut self, section: &str, check: Check) {
        self.0.push(Finding {
            section: section.to_owned(),
            check,
        });
    }

    fn failed(&self) -> bool {
        self.0.iter().any(|f| f.check.outcome == Outcome::Problem)
    }

    fn text(&self) -> String {
        let mut out = String::new();
        let mut section = "";
        for f in &self.0 {
            if f.section != section {
                section = &f.section;
                out.push_str(&format!("{section}\n"));
            }
            let mark = match f.check.outcome {
                Outcome::Ok => "ok     ",
                Outcome::Note => "note   ",
                Outcome::Problem => "PROBLEM",
            };
            out.push_str(&format!(
                "  {mark} {}: {}\n",
                f.check.subject, f.check.detail
            ));
            if let Some(fix) = &f.check.fix {
                out.push_str(&format!("          fix: {fix}\n"));
            }
        }
        let (problems, notes) = self
            .0
            .iter()
            .fold((0, 0), |(p, n), f| match f.check.outcome {
                Outcome::Problem => (p + 1, n),
                Outcome::Note => (p, n + 1),
                Outcome::Ok => (p, n),
            });
        out.push_str(&match problems {
            0 => format!("\nNo problems ({notes} notes)."),
            1 => format!("\n1 problem ({notes} notes)."),
            n => format!("\n{n} problems ({notes} notes)."),
        });
        out
    }
}

pub(super) fn run(args: &DoctorArgs, over: &Overrides) -> ExitCode {
    let mut report = Report::default();
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    examine(&mut report, args.offline, over, &cwd);
    if args.json {
        print_out(&serde_json::to_string_pretty(&report.0).expect("findings are JSON"));
    } else {
        print_out(&report.text());
    }
    if report.failed() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn examine(report: &mut Report, offline: bool, over: &Overrides, cwd: &Path) {
    let config = match Config::load(over, &crate::config::ProcessEnv, cwd) {
        Ok(c) => {
            let file = c.config_file.as_ref().map_or_else(
                || "none: the embedded defaults (`ringfence init` writes a file)".to_owned(),
                |f| format!("{} (valid)", f.display()),
            );
            report.add("configuration", Check::ok("file", file));
            c
        }
        Err(e) => {
            report.add(
                "configuration",
                Check::problem(
                    "file",
                    e.to_string(),
                    "correct it (`ringfence init --print` shows a commented one); nothing else can be checked until it loads",
                ),
            );
            return;
        }
    };
    data_directory(report, &config);
    roots(report, &config);
    let app = match App::build(&config, false) {
        Ok(a) => a,
        Err(e) => {
            report.add(
                "configuration",
                Check::problem("tools", e.to_string(), "change the tool selection"),
            );
            return;
        }
    };
    let rt = runtime();
    let probe_env = ProbeEnv {
        data_dir: &config.data_dir,
    };
    for plug in FAMILIES {
        let name = plug.info().name;
        let on = plug
            .info()
            .tools
            .iter()
            .any(|t| app.toolbox.get(t).is_some());
        if !on {
            let why = app
                .withheld
                .iter()
                .find(|(f, _)| *f == name)
                .map(|(_, why)| why.clone())
                .unwrap_or_else(|| "the tool selection leaves its tools out".into());
            report.add(name, Check::ok("off", why));
            if name == ringfence_shell::FAMILY {
                // What this kernel would give commands, were the shell turned on.
                shell_if_on(report, over, cwd, &rt);
            }
            continue;
        }
        for check in plug.checks(&config.families, &config.data_dir) {
            report.add(name, check);
        }
        if let Some(call) = plug.probe_call(&config.families) {
            // The sandbox is this machine's; the others reach out.
            if !offline || name == ringfence_shell::FAMILY {
                report.add(name, probe(&app, &call, &rt));
            }
        }
        if !offline {
            for check in rt.block_on(plug.probe(&config.families, &probe_env)) {
                report.add(name, check);
            }
        }
    }
    if !offline {
        store(report, &config);
        model(report, &config, &rt);
    }
    app.shutdown();
}

/// Makes `call` as the local user, through the runner.
fn probe(app: &App, call: &ProbeCall, rt: &tokio::runtime::Runtime) -> Check {
    let outcome = rt.block_on(app.call_once(
        ringfence_core::LOCAL_USER,
        "doctor",
        call.tool,
        call.args.clone(),
    ));
    match outcome {
        Ok(Ok(out)) => {
            let text = out.all_text();
            let detail = call
                .line
                .and_then(|prefix| text.lines().find_map(|l| l.strip_prefix(prefix)))
                .map(str::to_owned)
                .unwrap_or_else(|| format!("{} answered", call.tool));
            let partial = detail.contains("NOT ")
                || detail.contains("NO ")
                || detail.contains("no memory cgroup");
            if partial {
                Check::note(
                    &call.subject,
                    detail,
                    "what is missing is named above, with what it costs; docs/shell.md says how to get it",
                )
            } else {
                Check::ok(&call.subject, detail)
            }
        }
        Ok(Err(e)) => Check::problem(
            &call.subject,
            e.message,
            "the message above says what to do",
        ),
        Err(e) => Check::problem(&call.subject, e.to_string(), "check the roots"),
    }
}

/// The shell's sandbox on this kernel, with the shell turned on for this check only.
fn shell_if_on(report: &mut Report, over: &Overrides, cwd: &Path, rt: &tokio::runtime::Runtime) {
    let mut env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    env.insert("RINGFENCE_SHELL_ENABLED".into(), "true".into());
    let over = Overrides {
        enable: vec!["run_shell_command".into()],
        add: Vec::new(),
        disable: Vec::new(),
        preset: None,
        ..over.clone()
    };
    let Ok(config) = Config::load(&over, &env, cwd) else {
        return;
    };
    let Ok(app) = App::build(&config, false) else {
        return;
    };
    let plug = FAMILIES
        .iter()
        .find(|p| p.info().name == ringfence_shell::FAMILY)
        .expect("the shell family is listed");
    if let Some(mut call) = plug.probe_call(&config.families) {
        call.subject = "sandbox, were the shell on".into();
        let mut check = probe(&app, &call, rt);
        if check.outcome == Outcome::Problem {
            // Not a problem of this setup: the shell is off.
            check.outcome = Outcome::Note;
        }
        report.add(ringfence_shell::FAMILY, check);
    }
    app.shutdown();
}

/// The permission bits of an entry (`None` where there are none: Windows).
fn unix_mode(m: &std::fs::Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        Some(m.permissions().mode() & 0o777)
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        None
    }
}

/// Whether this account may write in the directory `path` (Windows: not checked, since the
/// read-only mark means nothing on a directory and the access list is not read; `true`).
#[allow(clippy::disallowed_methods)] // a configured root, named for a check
fn writable(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        true
    }
}

/// The data directory, and the modes of what it holds.
#[allow(clippy::disallowed_methods)] // ringfence's own data directory, not a root
fn data_directory(report: &mut Report, config: &Config) {
    let dir = &config.data_dir;
    let section = "data directory";
    match std::fs::metadata(dir) {
        Err(_) => report.add(
            section,
            Check::ok(
                dir.display().to_string(),
                "not made yet: doctor's own checks and the first start make it (mode 0700)",
            ),
        ),
        Ok(m) if !m.is_dir() => report.add(
            section,
            Check::problem(
                dir.display().to_string(),
                "is not a directory",
                "move it away, or name another data directory (data_dir, --data-dir)",
            ),
        ),
        Ok(m) => {
            let Some(mode) = unix_mode(&m) else {
                #[cfg(windows)]
                report.add(section, access_list_check(dir));
                return;
            };
            report.add(
                section,
                if mode & 0o077 == 0 {
                    Check::ok(dir.display().to_string(), format!("mode {mode:04o}"))
                } else {
                    Check::note(
                        dir.display().to_string(),
                        format!("mode {mode:04o}: other accounts may look inside"),
                        format!(
                            "the next `ringfence serve` makes it 0700 (or: chmod 700 {})",
                            dir.display()
                        ),
                    )
                },
            );
            for state in crate::families::state(config) {
                let Ok(m) = std::fs::metadata(&state.file) else {
                    continue;
                };
                let mode = unix_mode(&m).unwrap_or(0);
                if mode & 0o077 != 0 {
                    report.add(
                        section,
                        Check::note(
                            state.file.display().to_string(),
                            format!("mode {mode:04o}: readable by other accounts"),
                            format!(
                                "the next `ringfence serve` makes it 0600 (or: chmod 600 {})",
                                state.file.display()
                            ),
                        ),
                    );
                }
            }
        }
    }
}

/// Windows: whether the data directory's access list lets only this account and SYSTEM in.
#[cfg(windows)]
fn access_list_check(dir: &std::path::Path) -> Check {
    let name = dir.display().to_string();
    match ringfence_fs::access_list_of(dir) {
        Ok(Some(list)) if !list.owned_by_account => Check::problem(
            name,
            format!(
                "owned by {}, not by this account: its owner can change who may look inside",
                list.owner
            ),
            "name a data directory this account made (data_dir, --data-dir), or take ownership (takeown /f)",
        ),
        Ok(Some(list)) if list.is_owner_only() => {
            Check::ok(name, "access list: this account and SYSTEM only")
        }
        Ok(Some(list)) => {
            let mut what = Vec::new();
            if !list.others.is_empty() {
                what.push(format!(
                    "others may look inside ({})",
                    list.others.join(", ")
                ));
            }
            if !list.account_full {
                what.push("this account lacks full control".to_string());
            }
            if !list.protected {
                what.push("it takes entries from its folder's list".to_string());
            }
            Check::note(
                name,
                format!("access list: {}", what.join("; ")),
                "the next `ringfence serve` gives it one for this account and SYSTEM only",
            )
        }
        Ok(None) => Check::problem(
            name,
            "is a link or junction",
            "name the directory it points to as the data directory (data_dir, --data-dir)",
        ),
        Err(e) => Check::note(
            name,
            format!("cannot read its access list: {e}"),
            "check who may look inside with `icacls` on the directory",
        ),
    }
}

/// Each root: there, a directory, and writable when it is read-write.
#[allow(clippy::disallowed_methods)] // the configured roots themselves, checked before use
fn roots(report: &mut Report, config: &Config) {
    let section = "roots";
    if config.roots.is_empty() {
        let ws = config.data_dir.join("workspace");
        report.add(
            section,
            Check::ok(
                ws.display().to_string(),
                "read-write, the default workspace (name directories with `serve PATH…` or roots in the configuration)",
            ),
        );
        return;
    }
    for root in &config.roots {
        let name = root.path.display().to_string();
        if root.is_template() {
            report.add(
                section,
                Check::ok(name, "made per user at their first call"),
            );
            continue;
        }
        let access = match root.access {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        };
        let check = match std::fs::metadata(&root.path) {
            Err(e) => Check::problem(
                name,
                format!("cannot be opened: {e}"),
                "create it, or change the roots (every call fails until then)",
            ),
            Ok(m) if !m.is_dir() => Check::problem(name, "is not a directory", "name a directory"),
            Ok(_) if root.access == Access::ReadWrite && !writable(&root.path) => Check::problem(
                name,
                "read-write, but this account cannot write in it",
                "give this account write access, or make the root read-only (`PATH:ro`)",
            ),
            Ok(_) => Check::ok(name, access),
        };
        report.add(section, check);
    }
}

/// PostgreSQL, when the state lives there: connected and answering.
fn store(report: &mut Report, config: &Config) {
    let shared = config.store.shared_store();
    let Some(pg) = shared.pg() else {
        return;
    };
    report.add(
        "store",
        match pg {
            Ok(_) => Check::ok("PostgreSQL", "connected"),
            Err(e) => Check::problem(
                "PostgreSQL",
                e.to_string(),
                "check [store] url (or RINGFENCE_DATABASE_URL), the password and ca_file",
            ),
        },
    );
}

/// The model of `[llm]`, when it is an HTTP API: one request for one token.
fn model(report: &mut Report, config: &Config, rt: &tokio::runtime::Runtime) {
    let Some(llm) = &config.llm else {
        return;
    };
    let subject = format!("model ({})", llm.provider_name());
    let Some(model) = llm.api_model() else {
        report.add(
            "llm",
            Check::ok(
                subject,
                "the connected client's own model (sampling): checked when a client connects",
            ),
        );
        return;
    };
    let model = match model {
        Ok(m) => m,
        Err(e) => {
            report.add(
                "llm",
                Check::problem(subject, e.to_string(), "check [llm] and the key's variable"),
            );
            return;
        }
    };
    let request = ringfence_llm::ChatRequest {
        system: String::new(),
        messages: vec![ringfence_llm::Message::user("Reply with the word OK.")],
        tools: Vec::new(),
        max_tokens: 1,
    };
    report.add(
        "llm",
        match rt.block_on(model.chat(request)) {
            Ok(_) => Check::ok(subject, format!("{} answered", model.describe())),
            Err(e) => Check::problem(
                subject,
                e.to_string(),
                "check [llm] base_url, model and the key's variable",
            ),
        },
    );
}
