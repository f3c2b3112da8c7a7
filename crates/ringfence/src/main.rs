//! The `ringfence` binary.

mod app;
mod audit;
mod cli;
mod config;
mod env_vars;

fn main() -> std::process::ExitCode {
    cli::run_main()
}
