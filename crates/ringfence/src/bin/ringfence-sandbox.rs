//! `ringfence-sandbox`: the sandbox helper of `run_shell_command` as a small executable of
//! its own. ringfence starts it (when it is installed beside the `ringfence` binary) for every
//! command; it does what `ringfence __sandbox-helper` does, but starts in a fraction of the
//! time, which is most of a short command's overhead. See `ringfence_sandbox::helper_main`.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(ringfence_sandbox::helper_main() as u8)
}
