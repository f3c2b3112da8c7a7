//! Why a configuration was refused. Each error names the file, key, variable or flag at
//! fault; the command line prints it after `configuration error: ` and exits with 2.

use std::path::PathBuf;

use crate::env_vars;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The configuration file cannot be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not TOML, or holds a key or a value its schema does not take.
    #[error("config file {}: {}", path.display(), ringfence_core::plug::words::toml_error(source))]
    Parse {
        path: PathBuf,
        source: toml::de::Error,
    },
    /// A top-level key of the file that no setting and no family takes.
    #[error("config file {}: unknown key `{key}` (the file takes: {known})", path.display())]
    UnknownKey {
        path: PathBuf,
        key: String,
        known: String,
    },
    /// A path that must be absolute is not.
    #[error("{key}: `{}` must be an absolute path", path.display())]
    NotAbsolute { key: String, path: PathBuf },
    /// Nothing names a data directory and none can be derived.
    #[error(
        "cannot find a data directory: set {}, or HOME (on Windows LOCALAPPDATA)",
        env_vars::RINGFENCE_DATA_DIR
    )]
    NoDataDir,
    /// Two roots resolve to the same directory.
    #[error("root `{}` is listed twice", .0.display())]
    DuplicateRoot(PathBuf),
    /// A value is refused: `key` names where it came from, `reason` what is wrong.
    #[error("{key}: {reason}")]
    Invalid { key: String, reason: String },
    /// A family's section was refused (the error names the key).
    #[error(transparent)]
    Settings(#[from] ringfence_core::plug::SettingsError),
    /// The limits' own check refused them (its message names the key).
    #[error(transparent)]
    Limits(#[from] ringfence_core::LimitsError),
    #[error("tools.preset: {0}")]
    Preset(#[source] ringfence_core::SelectionError),
    /// `[http] tokens`.
    #[error(transparent)]
    Tokens(#[from] ringfence_mcp::TokenConfigError),
    /// The HTTPS certificate or key.
    #[error(transparent)]
    Tls(#[from] ringfence_mcp::TlsError),
    #[error("http.tls_cert and http.tls_key go together: set both or neither")]
    TlsHalf,
    /// `[http.oauth]`, refused when the validator is built (it may fetch the key set).
    #[error("http.oauth: {0}")]
    Oauth(#[source] ringfence_mcp::JwtConfigError),
}

impl ConfigError {
    pub fn invalid(key: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.into(),
            reason: reason.into(),
        }
    }

    pub fn not_absolute(key: impl Into<String>, path: impl Into<PathBuf>) -> ConfigError {
        ConfigError::NotAbsolute {
            key: key.into(),
            path: path.into(),
        }
    }
}
