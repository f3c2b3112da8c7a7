//! `[images]`: the images API behind `generate_image` (the OpenAI Images API or a compatible
//! endpoint) and the per-user daily cap — the table as written, then resolved.
//!
//! The key comes from `api_key_env` (the variable it names; it must be set), `api_key`
//! (written in the file — allowed, but a variable keeps the secret out of a file that is
//! often shared), or `OPENAI_API_KEY`. With none the family still starts: each call then
//! answers "OpenAI API key not configured" and how to set it (seed 003), unless `base_url`
//! points at a compatible endpoint, which may need no key.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::client::{DEFAULT_MODEL, ImagesConfig, OPENAI_API_KEY, OPENAI_BASE_URL};
use serde::Deserialize;

use ringfence_core::plug::{SectionInput, SettingsError};

/// The family's table in the configuration file.
pub const SECTION: &str = "images";

/// The family's part of the personal configuration `ringfence init` writes: every line a
/// comment, `# ` before a setting (remove it to use the setting), `## ` before prose.
pub const SAMPLE: &str = r#"## Images: generate_image through an OpenAI-compatible images API.
# [images]
# model = "gpt-image-1"
# api_key_env = "OPENAI_API_KEY"   # the variable holding the key
# daily_limit = 50                 # images per day; 0 turns the tool off"#;
/// The variables this family reads (none of its own: the key's variable is the provider's).
pub const ENV_VARS: &[&str] = &[];

/// Images per user per day unless configured.
pub const DEFAULT_DAILY_LIMIT: u32 = 50;
const MAX_DAILY_LIMIT: u32 = 100_000;
const DEFAULT_TIMEOUT_SECS: u64 = 180;
const MAX_TIMEOUT_SECS: u64 = 600;
const MAX_RETRIES: u32 = 5;
/// The file under the data directory holding the day's counts.
pub const USAGE_FILE: &str = "images-usage.json";

/// `[images]` as written; every key optional. `Debug` never shows `api_key`.
#[derive(Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ImagesTable {
    /// The API's base URL (default `https://api.openai.com/v1`).
    base_url: Option<String>,
    /// The model (default `gpt-image-1`).
    model: Option<String>,
    /// The variable holding the key (default `OPENAI_API_KEY`).
    api_key_env: Option<String>,
    /// The key itself (a variable is preferred).
    api_key: Option<String>,
    /// Seconds before a request is abandoned (default 180, at most 600).
    timeout_secs: Option<u64>,
    /// Retries after a rate limit (HTTP 429), 0 to 5 (default 2).
    retries: Option<u32>,
    /// Images per user per UTC day (default 50); 0 turns the tool off.
    daily_limit: Option<u32>,
}

impl fmt::Debug for ImagesTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImagesTable")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .finish_non_exhaustive()
    }
}

/// The resolved `[images]` settings.
#[derive(Debug, Clone)]
pub struct ImagesSettings {
    pub api: ImagesConfig,
    pub daily_limit: u32,
    /// Where the day's counts are kept (`<data dir>/images-usage.json`).
    pub usage_file: PathBuf,
}

impl ImagesSettings {
    /// `[images]` from the file, the key from the environment.
    pub fn resolve(input: &SectionInput<'_>) -> Result<ImagesSettings, SettingsError> {
        let t: ImagesTable = input.table(SECTION)?;
        let key = |k: &str| format!("{SECTION}.{k}");
        let mut api = ImagesConfig::default();
        if let Some(url) = &t.base_url {
            let url = url.trim();
            if !(url.starts_with("http://") || url.starts_with("https://"))
                || url.contains(char::is_whitespace)
            {
                return Err(SettingsError::invalid(
                    key("base_url"),
                    format!("`{url}` must be one http:// or https:// URL (e.g. {OPENAI_BASE_URL})"),
                ));
            }
            api.base_url = url.trim_end_matches('/').to_owned();
        }
        match t.model.as_deref().map(str::trim) {
            Some("") => {
                return Err(SettingsError::invalid(
                    key("model"),
                    format!("is empty; remove it for {DEFAULT_MODEL} or name a model"),
                ));
            }
            Some(m) => api.model = m.to_owned(),
            None => {}
        }
        let from_var = |var: &str| {
            input
                .env
                .get(var)
                .map(|k| k.trim().to_owned())
                .filter(|k| !k.is_empty())
        };
        (api.api_key, api.api_key_source) = match (&t.api_key_env, &t.api_key) {
            (Some(_), Some(_)) => {
                return Err(SettingsError::invalid(
                    key("api_key"),
                    format!(
                        "set {} or {}, not both (a variable is preferred)",
                        key("api_key"),
                        key("api_key_env")
                    ),
                ));
            }
            (Some(var), None) => {
                let var = var.trim();
                match from_var(var) {
                    Some(k) => (Some(k), var.to_owned()),
                    None => {
                        return Err(SettingsError::invalid(
                            key("api_key_env"),
                            format!("the variable `{var}` is not set"),
                        ));
                    }
                }
            }
            (None, Some(k)) if k.trim().is_empty() => {
                return Err(SettingsError::invalid(
                    key("api_key"),
                    format!("is empty; remove it to read {OPENAI_API_KEY}"),
                ));
            }
            (None, Some(k)) => (Some(k.trim().to_owned()), key("api_key")),
            (None, None) => (from_var(OPENAI_API_KEY), OPENAI_API_KEY.to_owned()),
        };
        let timeout_secs = t.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
        if !(1..=MAX_TIMEOUT_SECS).contains(&timeout_secs) {
            return Err(SettingsError::invalid(
                key("timeout_secs"),
                format!("{timeout_secs} must be between 1 and {MAX_TIMEOUT_SECS}"),
            ));
        }
        api.timeout = Duration::from_secs(timeout_secs);
        if let Some(r) = t.retries {
            if r > MAX_RETRIES {
                return Err(SettingsError::invalid(
                    key("retries"),
                    format!("{r} must be between 0 and {MAX_RETRIES}"),
                ));
            }
            api.retry.retries = r;
        }
        let daily_limit = t.daily_limit.unwrap_or(DEFAULT_DAILY_LIMIT);
        if daily_limit > MAX_DAILY_LIMIT {
            return Err(SettingsError::invalid(
                key("daily_limit"),
                format!("{daily_limit} must be between 0 (tool off) and {MAX_DAILY_LIMIT}"),
            ));
        }
        Ok(ImagesSettings {
            api,
            daily_limit,
            usage_file: input.data_dir.join(USAGE_FILE),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The settings from a file's text and variables, with the data directory they used.
    fn load_file(
        toml: &str,
        env: &[(&str, &str)],
    ) -> Result<(ImagesSettings, std::path::PathBuf), SettingsError> {
        let dir = tempfile::tempdir().unwrap();
        let s = ringfence_core::plug::resolve_text(&crate::ImagesPlug, toml, env, dir.path())?;
        Ok((s, dir.path().to_owned()))
    }

    #[test]
    fn defaults_without_a_table() {
        let (s, data_dir) = load_file("log = \"info\"\n", &[]).unwrap();
        assert_eq!(s.api.base_url, OPENAI_BASE_URL);
        assert_eq!(s.api.model, DEFAULT_MODEL);
        assert_eq!(s.api.api_key, None);
        assert_eq!(s.api.api_key_source, OPENAI_API_KEY);
        assert_eq!(s.daily_limit, DEFAULT_DAILY_LIMIT);
        assert_eq!(s.usage_file, data_dir.join(USAGE_FILE));
        let (s, _) = load_file("", &[(OPENAI_API_KEY, "sk-env")]).unwrap();
        assert_eq!(s.api.api_key.as_deref(), Some("sk-env"));
    }

    #[test]
    fn the_table_as_written() {
        let toml = "[images]\nbase_url = \"http://127.0.0.1:9000/v1/\"\nmodel = \"flux\"\n\
                    api_key_env = \"MY_KEY\"\ntimeout_secs = 30\nretries = 0\ndaily_limit = 3\n";
        let (s, _) = load_file(toml, &[("MY_KEY", "k"), (OPENAI_API_KEY, "other")]).unwrap();
        assert_eq!(s.api.base_url, "http://127.0.0.1:9000/v1");
        assert_eq!(s.api.model, "flux");
        assert_eq!(s.api.api_key.as_deref(), Some("k"));
        assert_eq!(s.api.api_key_source, "MY_KEY");
        assert_eq!(s.api.timeout, Duration::from_secs(30));
        assert_eq!(s.api.retry.retries, 0);
        assert_eq!(s.daily_limit, 3);
        assert!(!format!("{s:?}").contains("\"k\""), "{s:?}");
    }

    #[test]
    fn mistakes_name_their_key() {
        for (toml, env, key) in [
            (
                "[images]\nbase_url = \"api.openai.com\"\n",
                vec![],
                "images.base_url",
            ),
            ("[images]\nmodel = \" \"\n", vec![], "images.model"),
            (
                "[images]\napi_key_env = \"NOPE\"\n",
                vec![],
                "images.api_key_env",
            ),
            (
                "[images]\napi_key = \"a\"\napi_key_env = \"B\"\n",
                vec![("B", "b")],
                "images.api_key",
            ),
            (
                "[images]\ntimeout_secs = 0\n",
                vec![],
                "images.timeout_secs",
            ),
            ("[images]\nretries = 6\n", vec![], "images.retries"),
            (
                "[images]\ndaily_limit = 1000000\n",
                vec![],
                "images.daily_limit",
            ),
            ("[images]\nsize = \"1024x1024\"\n", vec![], "size"),
        ] {
            let err = load_file(toml, &env).unwrap_err().to_string();
            assert!(err.contains(key), "{toml}: {err}");
        }
    }
}
