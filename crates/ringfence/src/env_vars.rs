//! The environment variables ringfence's core reads (a family's own are listed by its plug:
//! `FamilyPlug::ENV_VARS`).

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
/// Tool preset: `full` (default), `iris`, `llm-chat`.
pub const RINGFENCE_PRESET: &str = "RINGFENCE_PRESET";
/// Tools or families to add to the preset (comma-separated).
pub const RINGFENCE_ADD_TOOLS: &str = "RINGFENCE_ADD_TOOLS";
/// Tools or families to disable (comma-separated).
pub const RINGFENCE_DISABLE_TOOLS: &str = "RINGFENCE_DISABLE_TOOLS";
/// What the MCP client's roots may do: `narrow` (default), `ignore`, `extend`.
pub const RINGFENCE_CLIENT_ROOTS: &str = "RINGFENCE_CLIENT_ROOTS";
/// Log filter (`error`, `warn`, `info`, `debug`, `trace`, or a tracing directive).
pub const RINGFENCE_LOG: &str = "RINGFENCE_LOG";
/// Log line format: `text` (default) or `json`.
pub const RINGFENCE_LOG_FORMAT: &str = "RINGFENCE_LOG_FORMAT";
/// `[store] url`: a PostgreSQL URL (makes PostgreSQL the store).
pub const RINGFENCE_DATABASE_URL: &str = "RINGFENCE_DATABASE_URL";
/// `[store] backend`: `sqlite` or `postgres`.
pub const RINGFENCE_STORE_BACKEND: &str = "RINGFENCE_STORE_BACKEND";

/// Seed 002's variables, honoured for compatibility (they override `[limits]` in the file).
pub const LLM_CHAT_FS_MAX_SEARCH_RESULTS: &str = "LLM_CHAT_FS_MAX_SEARCH_RESULTS";
pub const LLM_CHAT_FS_MAX_DISPLAY_ENTRIES: &str = "LLM_CHAT_FS_MAX_DISPLAY_ENTRIES";
pub const LLM_CHAT_FS_MAX_TOTAL_ENTRIES: &str = "LLM_CHAT_FS_MAX_TOTAL_ENTRIES";
pub const LLM_CHAT_FS_SEARCH_TIMEOUT: &str = "LLM_CHAT_FS_SEARCH_TIMEOUT";
pub const LLM_CHAT_FS_MAX_CHARS_PER_FILE: &str = "LLM_CHAT_FS_MAX_CHARS_PER_FILE";
pub const LLM_CHAT_FS_MAX_FILE_SIZE: &str = "LLM_CHAT_FS_MAX_FILE_SIZE";
pub const LLM_CHAT_FS_REQUIRE_READ_BEFORE_WRITE: &str = "LLM_CHAT_FS_REQUIRE_READ_BEFORE_WRITE";

/// Seed 000's variables, honoured as aliases (ringfence's own settings win): the workspace
/// root (after `RINGFENCE_ROOTS`), and `false` turning the file tools off.
pub const IRIS_WORKSPACE_ROOT: &str = "IRIS_WORKSPACE_ROOT";
pub const IRIS_FILESYSTEM_ENABLED: &str = "IRIS_FILESYSTEM_ENABLED";

/// Platform variables consulted for defaults.
pub const XDG_DATA_HOME: &str = "XDG_DATA_HOME";
pub const XDG_CONFIG_HOME: &str = "XDG_CONFIG_HOME";
pub const HOME: &str = "HOME";
/// Windows: the home directory, the roaming and the local application data folders.
pub const USERPROFILE: &str = "USERPROFILE";
pub const APPDATA: &str = "APPDATA";
pub const LOCALAPPDATA: &str = "LOCALAPPDATA";

/// The core's variables (with the families', the names checked for typos at start).
pub const ALL: &[&str] = &[
    RINGFENCE_CONFIG,
    RINGFENCE_DATA_DIR,
    RINGFENCE_ROOTS,
    RINGFENCE_DENYLIST,
    RINGFENCE_TOOLS,
    RINGFENCE_PRESET,
    RINGFENCE_ADD_TOOLS,
    RINGFENCE_DISABLE_TOOLS,
    RINGFENCE_LOG,
    RINGFENCE_LOG_FORMAT,
    RINGFENCE_CLIENT_ROOTS,
    RINGFENCE_DATABASE_URL,
    RINGFENCE_STORE_BACKEND,
];
