//! Every environment variable ringfence reads, in one place.

/// Path of the TOML configuration file.
pub const RINGFENCE_CONFIG: &str = "RINGFENCE_CONFIG";
/// Data directory (default workspace, spilled tool output).
pub const RINGFENCE_DATA_DIR: &str = "RINGFENCE_DATA_DIR";
/// Roots, `:`-separated absolute paths, each optionally followed by `:ro` or `:rw`.
pub const RINGFENCE_ROOTS: &str = "RINGFENCE_ROOTS";
/// Denylist patterns (gitignore syntax), comma-separated.
pub const RINGFENCE_DENYLIST: &str = "RINGFENCE_DENYLIST";
/// Tools or families to enable (comma-separated; default: all).
pub const RINGFENCE_TOOLS: &str = "RINGFENCE_TOOLS";
/// Tools or families to disable (comma-separated).
pub const RINGFENCE_DISABLE_TOOLS: &str = "RINGFENCE_DISABLE_TOOLS";
/// Log filter (`error`, `warn`, `info`, `debug`, `trace`, or a tracing directive).
pub const RINGFENCE_LOG: &str = "RINGFENCE_LOG";

/// Platform variables consulted for defaults.
pub const XDG_DATA_HOME: &str = "XDG_DATA_HOME";
pub const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";
pub const HOME: &str = "HOME";

/// All ringfence variables (for `--help` and validation of typos).
pub const ALL: &[&str] = &[
    RINGFENCE_CONFIG,
    RINGFENCE_DATA_DIR,
    RINGFENCE_ROOTS,
    RINGFENCE_DENYLIST,
    RINGFENCE_TOOLS,
    RINGFENCE_DISABLE_TOOLS,
    RINGFENCE_LOG,
];
