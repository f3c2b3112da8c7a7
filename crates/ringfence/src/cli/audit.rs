//! `audit`: prints the audit trail's lines that match every filter given (the trail itself
//! is written by `crate::audit`): from the data directory's files, or with the PostgreSQL
//! store from its table, which holds every instance's calls.

use std::process::ExitCode;

use super::{fail, print_out};
use crate::audit::Query;

pub(super) fn run(app: &crate::app::App, q: Query) -> ExitCode {
    if let Some(o) = &q.outcome
        && o != "ok"
        && o != "error"
    {
        return fail(&format!("audit --outcome {o}: use ok or error"));
    }
    let mut text = String::new();
    let mut out = |line: &str| {
        text.push_str(line);
        text.push('\n');
    };
    let read = match crate::store::audit(app.store()) {
        Ok(Some(shared)) => shared.query(&q, &mut out).map_err(|e| e.to_string()),
        Ok(None) => crate::audit::query(app.data_dir(), &q, &mut out).map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match read {
        Ok(_) => {
            if !text.is_empty() {
                print_out(&text);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot read the audit log: {e}")),
    }
}
