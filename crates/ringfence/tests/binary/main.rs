//! The tests of the built `ringfence` binary, in one test binary: each module runs it as a
//! child process (`env!("CARGO_BIN_EXE_ringfence")`).
#![allow(clippy::disallowed_methods)] // fixtures are built by ambient path on purpose

mod cli;
mod mcp_stdio;
mod stdout_purity;
