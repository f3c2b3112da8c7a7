//! `[web.search]`: the provider behind `web_search` — the table as written, resolved into a
//! [`SearchConfig`] (`None` when no provider is set: the tool then says how to set one).
//!
//! The key comes from, in order: `api_key_env` (the variable it names), `api_key` (written
//! in the file — allowed, but a variable keeps the secret out of a file that is often
//! shared or committed), or the provider's usual variable (`BRAVE_API_KEY` or
//! `BRAVE_SEARCH_API_KEY`, `TAVILY_API_KEY`, `SERPER_API_KEY`). A provider that needs a key
//! and has none stops the start, like every other mistake.

use std::fmt;
use std::time::Duration;

use crate::search::{Provider, RetryPolicy, SearchConfig};
use serde::Deserialize;

use ringfence_core::plug::{Env, SettingsError};

/// The table's name in messages.
const TABLE: &str = "web.search";
/// Default and ceiling of `timeout_secs`.
const DEFAULT_TIMEOUT_SECS: u64 = 20;
const MAX_TIMEOUT_SECS: u64 = 300;
/// Ceiling of `retries`.
const MAX_RETRIES: u32 = 5;

/// `[web.search]` as written; every key optional. `Debug` never shows `api_key`.
#[derive(Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchTable {
    /// `searxng`, `brave`, `tavily` or `serper`; unset: no web search.
    pub provider: Option<String>,
    /// The API's base URL: required for `searxng` (the instance), optional for the others
    /// (a self-hosted proxy; default the provider's public API).
    pub url: Option<String>,
    /// The environment variable holding the key (default: the provider's usual one).
    pub api_key_env: Option<String>,
    /// The key itself. Allowed, but a variable is preferred: files get shared.
    pub api_key: Option<String>,
    /// Seconds before a search is abandoned (default 20, at most 300).
    pub timeout_secs: Option<u64>,
    /// Retries after a rate limit (HTTP 429), 0 to 5 (default 2).
    pub retries: Option<u32>,
}

impl fmt::Debug for SearchTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchTable")
            .field("provider", &self.provider)
            .field("url", &self.url)
            .field("api_key_env", &self.api_key_env)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("timeout_secs", &self.timeout_secs)
            .field("retries", &self.retries)
            .finish()
    }
}

/// The provider's settings, or `None` when `[web.search]` names none. Errors name the key
/// (`web.search.provider`) or variable at fault.
pub fn resolve(
    table: Option<&SearchTable>,
    env: &dyn Env,
) -> Result<Option<SearchConfig>, SettingsError> {
    let Some(t) = table else {
        return Ok(None);
    };
    let provider = match t.provider.as_deref().map(str::trim) {
        None | Some("") => {
            let set = [
                ("url", t.url.is_some()),
                ("api_key_env", t.api_key_env.is_some()),
                ("api_key", t.api_key.is_some()),
                ("timeout_secs", t.timeout_secs.is_some()),
                ("retries", t.retries.is_some()),
            ];
            if let Some((key, _)) = set.iter().find(|(_, s)| *s) {
                return Err(SettingsError::invalid(
                    format!("{TABLE}.provider"),
                    format!("required when {TABLE}.{key} is set; use {}", providers()),
                ));
            }
            return Ok(None);
        }
        Some(name) => Provider::from_name(name).ok_or_else(|| {
            SettingsError::invalid(
                format!("{TABLE}.provider"),
                format!("`{name}` is not a search provider; use {}", providers()),
            )
        })?,
    };
    let base_url = match t.url.as_deref().map(str::trim) {
        Some(u) if u.starts_with("http://") || u.starts_with("https://") => {
            if u.contains(char::is_whitespace) {
                return Err(SettingsError::invalid(
                    format!("{TABLE}.url"),
                    format!("`{u}` holds whitespace; give one URL"),
                ));
            }
            Some(u.trim_end_matches('/').to_owned())
        }
        Some(u) => {
            return Err(SettingsError::invalid(
                format!("{TABLE}.url"),
                format!("`{u}` must start with http:// or https://"),
            ));
        }
        None if provider.default_base_url().is_none() => {
            return Err(SettingsError::invalid(
                format!("{TABLE}.url"),
                format!(
                    "required with provider = \"{provider}\": the instance's address, e.g. http://127.0.0.1:8888 (its settings.yml must list json under search.formats)"
                ),
            ));
        }
        None => None,
    };
    let (api_key, api_key_source) = api_key(provider, t, env)?;
    let timeout_secs = t.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if !(1..=MAX_TIMEOUT_SECS).contains(&timeout_secs) {
        return Err(SettingsError::invalid(
            format!("{TABLE}.timeout_secs"),
            format!("{timeout_secs} must be between 1 and {MAX_TIMEOUT_SECS}"),
        ));
    }
    let retries = t.retries.unwrap_or(RetryPolicy::default().retries);
    if retries > MAX_RETRIES {
        return Err(SettingsError::invalid(
            format!("{TABLE}.retries"),
            format!("{retries} must be between 0 and {MAX_RETRIES}"),
        ));
    }
    Ok(Some(SearchConfig {
        provider,
        base_url,
        api_key,
        api_key_source,
        timeout: Duration::from_secs(timeout_secs),
        retry: RetryPolicy {
            retries,
            ..RetryPolicy::default()
        },
    }))
}

/// The key and where it came from (for messages; never the key).
fn api_key(
    provider: Provider,
    t: &SearchTable,
    env: &dyn Env,
) -> Result<(Option<String>, String), SettingsError> {
    let from_var = |var: &str| {
        env.get(var)
            .map(|k| k.trim().to_owned())
            .filter(|k| !k.is_empty())
    };
    if !provider.needs_key() {
        if let Some(key) = [
            ("api_key", t.api_key.is_some()),
            ("api_key_env", t.api_key_env.is_some()),
        ]
        .iter()
        .find(|(_, s)| *s)
        .map(|(k, _)| *k)
        {
            return Err(SettingsError::invalid(
                format!("{TABLE}.{key}"),
                format!("{provider} takes no API key; remove it"),
            ));
        }
        return Ok((None, format!("{TABLE}.api_key_env")));
    }
    if t.api_key.is_some() && t.api_key_env.is_some() {
        return Err(SettingsError::invalid(
            format!("{TABLE}.api_key"),
            format!(
                "set {TABLE}.api_key or {TABLE}.api_key_env, not both (a variable is preferred)"
            ),
        ));
    }
    if let Some(var) = t.api_key_env.as_deref().map(str::trim) {
        if var.is_empty() {
            return Err(SettingsError::invalid(
                format!("{TABLE}.api_key_env"),
                "is empty: name the variable that holds the key",
            ));
        }
        return match from_var(var) {
            Some(key) => Ok((Some(key), var.to_owned())),
            None => Err(SettingsError::invalid(
                format!("{TABLE}.api_key_env"),
                format!("the variable {var} is not set"),
            )),
        };
    }
    if let Some(key) = &t.api_key {
        let key = key.trim();
        if key.is_empty() {
            return Err(SettingsError::invalid(
                format!("{TABLE}.api_key"),
                format!(
                    "is empty; remove it to read {}",
                    provider.key_vars().join(" or ")
                ),
            ));
        }
        return Ok((Some(key.to_owned()), format!("{TABLE}.api_key")));
    }
    for var in provider.key_vars() {
        if let Some(key) = from_var(var) {
            return Ok((Some(key), (*var).to_owned()));
        }
    }
    Err(SettingsError::invalid(
        format!("{TABLE}.provider"),
        format!(
            "\"{provider}\" needs an API key: set {} in the environment (or name another variable with {TABLE}.api_key_env)",
            provider.key_vars().join(" or ")
        ),
    ))
}

/// `` `searxng`, `brave`, `tavily` or `serper` ``.
fn providers() -> String {
    let names: Vec<String> = Provider::ALL.iter().map(|p| format!("`{p}`")).collect();
    let (last, rest) = names.split_last().expect("providers");
    format!("{} or {last}", rest.join(", "))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn table(toml_text: &str) -> SearchTable {
        toml::from_str(toml_text).unwrap()
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn no_table_or_no_provider_means_no_search() {
        assert!(resolve(None, &env(&[])).unwrap().is_none());
        assert!(resolve(Some(&table("")), &env(&[])).unwrap().is_none());
    }

    #[test]
    fn searxng_takes_its_url_and_no_key() {
        let c = resolve(
            Some(&table(
                "provider = \"searxng\"\nurl = \"http://127.0.0.1:8888/\"\n",
            )),
            &env(&[]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.provider, Provider::Searxng);
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:8888"));
        assert_eq!(c.api_key, None);
        assert_eq!(c.timeout, Duration::from_secs(DEFAULT_TIMEOUT_SECS));
    }

    #[test]
    fn keys_come_from_the_named_variable_the_file_or_the_usual_one() {
        let t = table("provider = \"brave\"\n");
        let c = resolve(Some(&t), &env(&[("BRAVE_SEARCH_API_KEY", "k2")]))
            .unwrap()
            .unwrap();
        assert_eq!(c.api_key.as_deref(), Some("k2"));
        assert_eq!(c.api_key_source, "BRAVE_SEARCH_API_KEY");
        assert_eq!(c.base_url, None);
        // BRAVE_API_KEY first.
        let c = resolve(
            Some(&t),
            &env(&[("BRAVE_API_KEY", "k1"), ("BRAVE_SEARCH_API_KEY", "k2")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.api_key.as_deref(), Some("k1"));
        let t = table(
            "provider = \"tavily\"\napi_key_env = \"MY_TAVILY\"\ntimeout_secs = 5\nretries = 0\n",
        );
        let c = resolve(
            Some(&t),
            &env(&[("MY_TAVILY", "tv"), ("TAVILY_API_KEY", "other")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(c.api_key.as_deref(), Some("tv"));
        assert_eq!(c.api_key_source, "MY_TAVILY");
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert_eq!(c.retry.retries, 0);
        let t = table(
            "provider = \"serper\"\napi_key = \"in-file\"\nurl = \"https://proxy.example/serper\"\n",
        );
        let c = resolve(Some(&t), &env(&[])).unwrap().unwrap();
        assert_eq!(c.api_key.as_deref(), Some("in-file"));
        assert_eq!(c.api_key_source, "web.search.api_key");
        assert_eq!(c.base_url.as_deref(), Some("https://proxy.example/serper"));
    }

    #[test]
    fn mistakes_name_their_key_and_the_fix() {
        for (text, vars, key, hint) in [
            (
                "provider = \"google\"\n",
                vec![],
                "web.search.provider",
                "`searxng`, `brave`, `tavily` or `serper`",
            ),
            (
                "url = \"http://x\"\n",
                vec![],
                "web.search.provider",
                "required when web.search.url",
            ),
            (
                "provider = \"searxng\"\n",
                vec![],
                "web.search.url",
                "required",
            ),
            (
                "provider = \"searxng\"\nurl = \"ftp://x\"\n",
                vec![],
                "web.search.url",
                "http://",
            ),
            (
                "provider = \"searxng\"\nurl = \"http://x\"\napi_key = \"k\"\n",
                vec![],
                "web.search.api_key",
                "takes no API key",
            ),
            (
                "provider = \"brave\"\n",
                vec![],
                "web.search.provider",
                "BRAVE_API_KEY or BRAVE_SEARCH_API_KEY",
            ),
            (
                "provider = \"tavily\"\napi_key_env = \"NOPE\"\n",
                vec![],
                "web.search.api_key_env",
                "NOPE is not set",
            ),
            (
                "provider = \"tavily\"\napi_key = \"a\"\napi_key_env = \"B\"\n",
                vec![("B", "b")],
                "web.search.api_key",
                "not both",
            ),
            (
                "provider = \"serper\"\ntimeout_secs = 0\n",
                vec![("SERPER_API_KEY", "k")],
                "web.search.timeout_secs",
                "between 1 and 300",
            ),
            (
                "provider = \"serper\"\nretries = 9\n",
                vec![("SERPER_API_KEY", "k")],
                "web.search.retries",
                "between 0 and 5",
            ),
        ] {
            let err = resolve(Some(&table(text)), &env(&vars))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(key), "{text}: {err}");
            assert!(err.contains(hint), "{text}: {err}");
        }
    }

    #[test]
    fn unknown_keys_are_refused_and_debug_hides_the_key() {
        assert!(toml::from_str::<SearchTable>("providr = \"brave\"\n").is_err());
        let t = table("provider = \"brave\"\napi_key = \"sk-secret\"\n");
        assert!(!format!("{t:?}").contains("sk-secret"));
        let c = resolve(Some(&t), &env(&[])).unwrap().unwrap();
        assert!(!format!("{c:?}").contains("sk-secret"));
    }
}
