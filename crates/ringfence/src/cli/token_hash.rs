//! `token-hash`: the configuration form (`blake3:<hex>`) of a bearer token read from stdin.

use std::io::Read;
use std::process::ExitCode;

use super::{fail, print_out};

pub(super) fn run() -> ExitCode {
    let mut token = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut token) {
        return fail(&format!("cannot read the token from stdin: {e}"));
    }
    let token = token.trim();
    if token.len() < 16 {
        return fail(
            "the token is shorter than 16 characters; use a long random one (e.g. `openssl rand -hex 32`)",
        );
    }
    print_out(&ringfence_mcp::token_hash(token));
    ExitCode::SUCCESS
}
