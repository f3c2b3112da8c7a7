//! The sandbox helper as a program of its own, for this crate's tests: what ringfence's
//! `ringfence-sandbox` executable is, built here so that the tests can start the helper the
//! way ringfence does — a fresh, single-threaded process (a user namespace can only be made
//! by one). ringfence ships its own (`crates/ringfence/src/bin/ringfence-sandbox.rs`).

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(ringfence_sandbox::helper_main() as u8)
}
