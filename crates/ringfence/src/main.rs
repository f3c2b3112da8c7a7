//! The `ringfence` binary.

mod app;
mod audit;
mod cli;
mod config;
mod data_dir;
mod env_vars;
mod families;
mod pages;
mod sessions;
mod store;

fn main() -> std::process::ExitCode {
    // The sandbox helper of a shell command: before anything else (no thread, no runtime,
    // no logging), because it restricts the process it runs in.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == ringfence_sandbox::HELPER_ARG)
    {
        return std::process::ExitCode::from(ringfence_sandbox::helper_main() as u8);
    }
    cli::run_main()
}
