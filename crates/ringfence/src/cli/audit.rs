//! `audit`: prints the audit trail's lines that match every filter given (the trail itself
//! is written by `crate::audit`).

use std::path::Path;
use std::process::ExitCode;

use super::{fail, print_out};
use crate::audit::Query;

pub(super) fn run(data_dir: &Path, q: Query) -> ExitCode {
    if let Some(o) = &q.outcome
        && o != "ok"
        && o != "error"
    {
        return fail(&format!("audit --outcome {o}: use ok or error"));
    }
    let mut text = String::new();
    match crate::audit::query(data_dir, &q, &mut |line| {
        text.push_str(line);
        text.push('\n');
    }) {
        Ok(_) => {
            if !text.is_empty() {
                print_out(&text);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot read the audit log: {e}")),
    }
}
