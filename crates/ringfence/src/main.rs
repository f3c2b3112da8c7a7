//! The `ringfence` binary.

mod app;
mod audit;
mod cli;
mod config;
mod data_dir;
mod env_vars;
mod families;
mod sessions;
mod supervisor;

fn main() -> std::process::ExitCode {
    cli::run_main()
}
