//! The web family's plug: `web_fetch` through the SSRF-guarded fetcher, and `web_search`
//! through the configured provider.

use std::sync::Arc;

use ringfence_core::plug::{
    BuildError, FamilyEnv, FamilyPlug, Lazy, ProbeCall, SectionInput, SettingsError, Shown,
};
use ringfence_core::{BoxFuture, Family, FamilyInfo};

use crate::settings::{self as config, WebSettings};
use crate::tools::{self as family, FetchRequest, Fetched, Fetcher, WebError, WebServices};

pub struct WebPlug;

impl FamilyPlug for WebPlug {
    type Settings = WebSettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);
    const SAMPLE: Option<&'static str> = Some(config::SAMPLE);
    const ENV_VARS: &'static [&'static str] = config::ENV_VARS;

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<WebSettings, SettingsError> {
        WebSettings::resolve(input)
    }

    fn shown(&self, s: &WebSettings) -> Shown {
        const MB: u64 = 1_000_000;
        let shown = Shown::default()
            .value("allow_private", s.allow_private.clone())
            .value("allowed_domains", s.allowed_domains.clone())
            .value("blocked_domains", s.blocked_domains.clone())
            .value("robots", s.robots)
            .megabytes("max_download_mb", s.max_download_bytes as u64, MB)
            .megabytes("max_image_mb", s.max_image_bytes as u64, MB)
            .number("max_redirects", s.max_redirects as u64)
            .number("connect_timeout_secs", s.connect_timeout.as_secs())
            .number("timeout_secs", s.timeout.as_secs())
            .raw(
                "proxy",
                if s.proxy.is_some() { "(set)" } else { "(none)" }.to_owned(),
            )
            .number("cache_ttl_secs", s.cache.ttl.as_secs())
            .number("cache_entries", s.cache.entries_per_user as u64)
            .megabytes("cache_user_mb", s.cache.bytes_per_user as u64, MB)
            .megabytes("cache_mb", s.cache.total_bytes as u64, MB);
        match &s.search {
            None => shown.raw("search.provider", "(none: no web search)".to_owned()),
            Some(search) => shown
                .value("search.provider", search.provider.name())
                .value(
                    "search.url",
                    search
                        .base_url
                        .as_deref()
                        .or(search.provider.default_base_url())
                        .unwrap_or_default(),
                )
                .secret("search.api_key", search.api_key.is_some())
                .number("search.timeout_secs", search.timeout.as_secs())
                .number("search.retries", u64::from(search.retry.retries)),
        }
    }

    /// One search for a word, when a provider is configured: the key and the provider work.
    fn probe_call(&self, settings: &WebSettings) -> Option<ProbeCall> {
        let search = settings.search.as_ref()?;
        Some(ProbeCall {
            subject: format!("web search ({})", search.provider.name()),
            tool: "web_search",
            args: serde_json::json!({"query": "ringfence", "max_results": 1}),
            line: None,
        })
    }

    fn build(&self, settings: &WebSettings, _env: &FamilyEnv<'_>) -> Result<Family, BuildError> {
        Ok(family::family(WebServices {
            fetcher: Arc::new(LazyFetcher(Lazy::new({
                let settings = settings.clone();
                move || make_fetcher(&settings)
            }))),
            searcher: match &settings.search {
                Some(search) => Some(
                    crate::search::searcher(search.clone())
                        .map_err(|e| BuildError::new(family::FAMILY, e))?,
                ),
                None => None,
            },
            cache: settings.cache,
        }))
    }
}

/// The fetcher, made on the first fetch (its HTTP client loads the TLS roots).
struct LazyFetcher(Lazy<dyn Fetcher>);

impl LazyFetcher {
    fn get(&self) -> Result<&Arc<dyn Fetcher>, WebError> {
        self.0
            .open()
            .map_err(|e| match e.downcast_ref::<WebError>() {
                Some(e) => e.clone(),
                None => WebError::new(crate::tools::WebErrorKind::Upstream, e.to_string()),
            })
    }
}

impl Fetcher for LazyFetcher {
    fn fetch(&self, request: FetchRequest) -> BoxFuture<'static, Result<Fetched, WebError>> {
        match self.get() {
            Ok(f) => f.fetch(request),
            Err(e) => {
                let e = e.clone();
                Box::pin(async move { Err(e) })
            }
        }
    }
}

fn make_fetcher(s: &WebSettings) -> Result<Arc<dyn Fetcher>, WebError> {
    use crate::tools::WebErrorKind;
    let unavailable = |e: String| {
        tracing::error!(error = %e, "cannot make the web fetcher; web_fetch is unavailable");
        WebError::new(
            WebErrorKind::Upstream,
            format!("web_fetch is unavailable: {e}"),
        )
    };
    let allow = ringfence_net::AllowList::parse(&s.allow_private)
        .map_err(|e| unavailable(e.to_string()))?;
    let settings = crate::FetchSettings {
        allowed_domains: s.allowed_domains.clone(),
        blocked_domains: s.blocked_domains.clone(),
        robots: s.robots,
        max_bytes: s.max_download_bytes,
        max_image_bytes: s.max_image_bytes,
        max_redirects: s.max_redirects,
        connect_timeout: s.connect_timeout,
        timeout: s.timeout,
        proxy: s.proxy.clone(),
    };
    let fetcher = crate::WebFetcher::new(settings, ringfence_net::Guard::new(allow))
        .map_err(|e| unavailable(e.to_string()))?;
    Ok(Arc::new(fetcher))
}
