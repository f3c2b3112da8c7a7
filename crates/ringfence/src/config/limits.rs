//! `[limits]`, with seed 002's `LLM_CHAT_FS_*` variables on top (for deployments moving
//! over from it), checked once.

use ringfence_core::Limits;

use super::{ConfigError, Env};
use crate::env_vars;

pub(super) fn resolve(file: Option<&Limits>, env: &dyn Env) -> Result<Limits, ConfigError> {
    let mut limits = file.cloned().unwrap_or_default();
    seed_002_limits(env, &mut limits)?;
    limits.validate().map_err(ConfigError::Limits)?;
    Ok(limits)
}

/// Seed 002's configuration variables, for deployments moving over from it.
fn seed_002_limits(env: &dyn Env, limits: &mut Limits) -> Result<(), ConfigError> {
    let num = |key: &str| -> Result<Option<u64>, ConfigError> {
        match env.get(key).filter(|v| !v.trim().is_empty()) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .map(Some)
                .map_err(|_| ConfigError::invalid(key, format!("`{v}` is not a whole number"))),
        }
    };
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_SEARCH_RESULTS)? {
        limits.max_search_results = n as usize;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_DISPLAY_ENTRIES)? {
        limits.max_display_entries = n as usize;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_TOTAL_ENTRIES)? {
        limits.max_total_entries = n as usize;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_SEARCH_TIMEOUT)? {
        limits.search_timeout_ms = n;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_CHARS_PER_FILE)? {
        limits.max_chars_per_file = n as usize;
    }
    if let Some(n) = num(env_vars::LLM_CHAT_FS_MAX_FILE_SIZE)? {
        limits.max_file_size = n;
    }
    if let Some(v) = env
        .get(env_vars::LLM_CHAT_FS_REQUIRE_READ_BEFORE_WRITE)
        .filter(|v| !v.trim().is_empty())
    {
        limits.require_read_before_write = match v.trim() {
            "true" | "1" | "yes" => true,
            "false" | "0" | "no" => false,
            other => {
                return Err(ConfigError::invalid(
                    env_vars::LLM_CHAT_FS_REQUIRE_READ_BEFORE_WRITE,
                    format!("`{other}` is not true or false"),
                ));
            }
        };
    }
    Ok(())
}
