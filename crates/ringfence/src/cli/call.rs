//! `call TOOL JSON`: one tool call as the local user (or `--user`); the result on stdout.

use std::io::Read;
use std::process::ExitCode;

use serde_json::Value;

use super::{fail, print_out, raise_fd_limit, runtime};
use crate::app::App;

pub(super) fn run(app: App, tool_name: &str, json: &str, user: Option<&str>) -> ExitCode {
    raise_fd_limit();
    let runner = app.runner(None, None);
    if let Some(why) = runner.not_offered(tool_name) {
        return fail(&format!("{tool_name} is turned off on this server: {why}"));
    }
    if runner.toolbox().get(tool_name).is_none() {
        let names: Vec<&str> = runner.toolbox().iter().map(|t| t.name()).collect();
        return fail(&format!(
            "unknown tool `{tool_name}`; available: {}",
            names.join(", ")
        ));
    }
    let text = if json == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut s) {
            return fail(&format!("cannot read arguments from stdin: {e}"));
        }
        s
    } else {
        json.to_owned()
    };
    let args: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return fail(&format!("arguments are not valid JSON: {e}")),
    };
    let outcome = runtime().block_on(app.call_once(
        user.unwrap_or(ringfence_core::LOCAL_USER),
        "cli",
        tool_name,
        args,
    ));
    app.shutdown();
    match outcome {
        Err(unknown) => fail(&unknown.to_string()),
        Ok(Ok(out)) => {
            print_out(&out.all_text());
            ExitCode::SUCCESS
        }
        Ok(Err(err)) => {
            print_out(&format!("Error: {}", err.message));
            if matches!(
                err.kind,
                ringfence_core::error::ToolErrorKind::NotReadFirst
                    | ringfence_core::error::ToolErrorKind::Stale
            ) {
                super::say(
                    "(From the command line, `ringfence call --overwrite …` writes over it: the read-first rule is for models.)",
                );
            }
            ExitCode::from(1)
        }
    }
}
