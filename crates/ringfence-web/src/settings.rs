//! `[web]`: what `web_fetch` may reach and how (the SSRF guard's allow-list, the operator's
//! domain lists, robots.txt, caps and timeouts, a proxy), the page cache, and `[web.search]`
//! — the table as written, then resolved. `RINGFENCE_WEB_ALLOW_PRIVATE` adds to
//! `allow_private`.

use std::time::Duration;

use serde::Deserialize;

use ringfence_core::plug::{Env, SectionInput, SettingsError};

/// The family's table in the configuration file.
pub const SECTION: &str = "web";

/// The family's part of the personal configuration `ringfence init` writes: every line a
/// comment, `# ` before a setting (remove it to use the setting), `## ` before prose.
pub const SAMPLE: &str = r#"## Web: web_fetch reads pages (never internal addresses); web_search needs a provider.
# [web]
# blocked_domains = ["example.net"]   # never fetched, nor their subdomains
# [web.search]
# provider = "brave"               # brave | tavily | serper | searxng (searxng also needs url)
# api_key_env = "BRAVE_API_KEY"    # the variable holding the key"#;

/// Comma-separated networks, addresses or host names `web_fetch` may reach although they are
/// private (added to `[web] allow_private`).
pub const RINGFENCE_WEB_ALLOW_PRIVATE: &str = "RINGFENCE_WEB_ALLOW_PRIVATE";
/// The variables this family reads.
pub const ENV_VARS: &[&str] = &[RINGFENCE_WEB_ALLOW_PRIVATE];

/// `[web]`, as written.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebConfig {
    /// Private networks (CIDRs), addresses or host names web_fetch may reach.
    allow_private: Option<Vec<String>>,
    /// Only these domains (and their subdomains) may be fetched.
    allowed_domains: Option<Vec<String>>,
    /// These domains (and their subdomains) are never fetched.
    blocked_domains: Option<Vec<String>>,
    /// Honour robots.txt (default true).
    robots: Option<bool>,
    /// The download cap in megabytes (default 10).
    max_download_mb: Option<f64>,
    /// The largest image returned as image content, in megabytes (default 5).
    max_image_mb: Option<f64>,
    /// Redirects followed (default 10, at most 20).
    max_redirects: Option<usize>,
    /// Seconds to wait for a connection (default 10).
    connect_timeout_secs: Option<u64>,
    /// Seconds for a whole fetch, redirects included (default 30).
    timeout_secs: Option<u64>,
    /// An outbound proxy (http:// or https://) for every fetch.
    proxy: Option<String>,
    /// Seconds a fetched document is kept for paging (default 300; 0 turns the cache off).
    cache_ttl_secs: Option<u64>,
    /// Documents the page cache holds for each user (default 64).
    cache_entries: Option<usize>,
    /// Megabytes the page cache holds for each user (default 16).
    cache_user_mb: Option<f64>,
    /// Megabytes the page cache holds, all users together (default 128).
    cache_mb: Option<f64>,
    /// `[web.search]`: the search provider.
    search: Option<crate::search_settings::SearchTable>,
}

/// The resolved `[web]` settings.
#[derive(Debug, Clone)]
pub struct WebSettings {
    pub allow_private: Vec<String>,
    pub allowed_domains: Vec<String>,
    pub blocked_domains: Vec<String>,
    pub robots: bool,
    pub max_download_bytes: usize,
    pub max_image_bytes: usize,
    pub max_redirects: usize,
    pub connect_timeout: Duration,
    pub timeout: Duration,
    pub proxy: Option<String>,
    /// The page cache: each user's share, and the bound for all users together.
    pub cache: crate::tools::CacheLimits,
    /// The search provider, when one is configured.
    pub search: Option<crate::search::SearchConfig>,
}

impl WebSettings {
    /// `[web]` from the file, then the variables.
    pub fn resolve(input: &SectionInput<'_>) -> Result<WebSettings, SettingsError> {
        let file: WebConfig = input.table(SECTION)?;
        resolve(file, input.env)
    }
}

fn resolve(file: WebConfig, env: &dyn Env) -> Result<WebSettings, SettingsError> {
    let mut allow_private = file.allow_private.unwrap_or_default();
    ringfence_net::AllowList::parse(&allow_private)
        .map_err(|e| SettingsError::invalid("web.allow_private", e.to_string()))?;
    if let Some(extra) = env.get(RINGFENCE_WEB_ALLOW_PRIVATE) {
        let extra: Vec<String> = extra
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        ringfence_net::AllowList::parse(&extra)
            .map_err(|e| SettingsError::invalid(RINGFENCE_WEB_ALLOW_PRIVATE, e.to_string()))?;
        allow_private.extend(extra);
    }
    let domains = |key: &str, list: Option<Vec<String>>| -> Result<Vec<String>, SettingsError> {
        list.unwrap_or_default()
            .into_iter()
            .map(|d| {
                crate::tools::domain_name(&d).ok_or_else(|| {
                    SettingsError::invalid(
                        format!("web.{key}"),
                        format!(
                            "`{}` is not a domain name; write names like example.com (no scheme or path)",
                            d.trim()
                        ),
                    )
                })
            })
            .collect()
    };
    let megabytes = |key: &str, value: Option<f64>, default: f64| -> Result<usize, SettingsError> {
        let mb = value.unwrap_or(default);
        if !(mb > 0.0 && mb <= 1024.0) {
            return Err(SettingsError::invalid(
                format!("web.{key}"),
                format!("must be more than 0 and at most 1024 (megabytes), got {mb}"),
            ));
        }
        Ok((mb * 1_000_000.0) as usize)
    };
    let seconds =
        |key: &str, value: Option<u64>, default: u64| -> Result<Duration, SettingsError> {
            match value.unwrap_or(default) {
                0 => Err(SettingsError::invalid(
                    format!("web.{key}"),
                    "must be at least 1 second",
                )),
                s if s > 3600 => Err(SettingsError::invalid(
                    format!("web.{key}"),
                    "must be at most 3600 seconds",
                )),
                s => Ok(Duration::from_secs(s)),
            }
        };
    let max_redirects = file.max_redirects.unwrap_or(10);
    if max_redirects > 20 {
        return Err(SettingsError::invalid(
            "web.max_redirects",
            format!("must be at most 20, got {max_redirects}"),
        ));
    }
    if let Some(proxy) = file.proxy.as_deref().filter(|p| !p.trim().is_empty()) {
        let ok = url::Url::parse(proxy.trim())
            .ok()
            .is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some());
        if !ok {
            return Err(SettingsError::invalid(
                "web.proxy",
                format!(
                    "`{proxy}` is not an http:// or https:// proxy URL (e.g. http://proxy.internal:3128)"
                ),
            ));
        }
    }
    // One user's share never exceeds the whole cache, so one user alone never evicts another's
    // pages (see crate::tools::PageCache).
    let cache = crate::tools::CacheLimits {
        ttl: Duration::from_secs(file.cache_ttl_secs.unwrap_or(300)),
        entries_per_user: file.cache_entries.unwrap_or(64),
        bytes_per_user: megabytes("cache_user_mb", file.cache_user_mb, 16.0)?,
        total_bytes: megabytes("cache_mb", file.cache_mb, 128.0)?,
    };
    if cache.bytes_per_user > cache.total_bytes {
        return Err(SettingsError::invalid(
            "web.cache_user_mb",
            format!(
                "one user's share ({} MB) is larger than the whole cache (web.cache_mb = {} MB); lower cache_user_mb or raise cache_mb",
                cache.bytes_per_user / 1_000_000,
                cache.total_bytes / 1_000_000
            ),
        ));
    }
    Ok(WebSettings {
        allow_private,
        allowed_domains: domains("allowed_domains", file.allowed_domains)?,
        blocked_domains: domains("blocked_domains", file.blocked_domains)?,
        robots: file.robots.unwrap_or(true),
        max_download_bytes: megabytes("max_download_mb", file.max_download_mb, 10.0)?,
        max_image_bytes: megabytes("max_image_mb", file.max_image_mb, 5.0)?,
        max_redirects,
        connect_timeout: seconds("connect_timeout_secs", file.connect_timeout_secs, 10)?,
        timeout: seconds("timeout_secs", file.timeout_secs, 30)?,
        proxy: file.proxy.filter(|p| !p.trim().is_empty()),
        cache,
        search: crate::search_settings::resolve(file.search.as_ref(), env)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Vars(Vec<(&'static str, &'static str)>);
    impl Env for Vars {
        fn get(&self, key: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, v)| v.to_string())
        }
    }

    fn parse(toml_text: &str) -> WebConfig {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let s = resolve(WebConfig::default(), &Vars(vec![])).unwrap();
        assert!(s.robots);
        assert_eq!(s.max_download_bytes, 10_000_000);
        assert_eq!(s.max_redirects, 10);
        assert_eq!(s.connect_timeout, Duration::from_secs(10));
        assert_eq!(s.timeout, Duration::from_secs(30));
        assert!(s.allow_private.is_empty() && s.proxy.is_none());
        assert_eq!(
            s.cache,
            crate::tools::CacheLimits {
                ttl: Duration::from_secs(300),
                entries_per_user: 64,
                bytes_per_user: 16_000_000,
                total_bytes: 128_000_000,
            }
        );
    }

    #[test]
    fn the_variable_adds_to_allow_private_and_bad_entries_are_named() {
        let file = parse("allow_private = [\"10.1.2.0/24\"]");
        let s = resolve(
            file,
            &Vars(vec![(
                RINGFENCE_WEB_ALLOW_PRIVATE,
                "wiki.internal, 192.168.1.5",
            )]),
        )
        .unwrap();
        assert_eq!(
            s.allow_private,
            ["10.1.2.0/24", "wiki.internal", "192.168.1.5"]
        );
        let err = resolve(parse("allow_private = [\"10.0.0.0/99\"]"), &Vars(vec![])).unwrap_err();
        assert!(err.to_string().contains("web.allow_private"), "{err}");
        let err = resolve(
            WebConfig::default(),
            &Vars(vec![(RINGFENCE_WEB_ALLOW_PRIVATE, "not a host!")]),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains(RINGFENCE_WEB_ALLOW_PRIVATE),
            "{err}"
        );
    }

    #[test]
    fn out_of_range_values_name_their_key() {
        for (text, key) in [
            ("max_download_mb = 0", "web.max_download_mb"),
            ("timeout_secs = 0", "web.timeout_secs"),
            ("max_redirects = 50", "web.max_redirects"),
            ("proxy = \"ftp://x\"", "web.proxy"),
            ("proxy = \"socks5://127.0.0.1:1080\"", "web.proxy"),
            (
                "blocked_domains = [\"https://x.com/\"]",
                "web.blocked_domains",
            ),
            ("cache_mb = 0", "web.cache_mb"),
            ("cache_user_mb = 2000", "web.cache_user_mb"),
            ("cache_user_mb = 64\ncache_mb = 32", "web.cache_user_mb"),
        ] {
            let err = resolve(parse(text), &Vars(vec![])).unwrap_err();
            assert!(err.to_string().contains(key), "{text}: {err}");
        }
    }
}
