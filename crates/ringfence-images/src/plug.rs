//! The images family's plug: `generate_image` through the configured images API, with a
//! per-user daily cap whose counts are kept in the data directory (so a restart does not
//! reset them).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ringfence_core::plug::{
    BuildError, FamilyEnv, FamilyPlug, Lazy, SectionInput, SettingsError, Shown,
};
use ringfence_core::{BoxFuture, Family, FamilyInfo};
use ringfence_net::{WebError, WebErrorKind};

use crate::settings::{self as config, ImagesSettings};
use crate::{self as family, ImageServices, UsageLedger};

pub struct ImagesPlug;

impl FamilyPlug for ImagesPlug {
    type Settings = ImagesSettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);
    const SAMPLE: Option<&'static str> = Some(config::SAMPLE);
    const ENV_VARS: &'static [&'static str] = config::ENV_VARS;

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<ImagesSettings, SettingsError> {
        ImagesSettings::resolve(input)
    }

    fn shown(&self, s: &ImagesSettings) -> Shown {
        Shown::default()
            .value("base_url", s.api.base_url.as_str())
            .value("model", s.api.model.as_str())
            .secret("api_key", s.api.api_key.is_some())
            .number("timeout_secs", s.api.timeout.as_secs())
            .number("retries", u64::from(s.api.retry.retries))
            .number("daily_limit", u64::from(s.daily_limit))
    }

    fn build(&self, settings: &ImagesSettings, _env: &FamilyEnv<'_>) -> Result<Family, BuildError> {
        // Nothing opens here: the client is made on the first call, the ledger read then.
        Ok(family::family(ImageServices {
            generator: Arc::new(LazyGenerator(Lazy::new({
                let config = settings.api.clone();
                move || crate::client::generator(config.clone())
            }))),
            daily_limit: settings.daily_limit,
            ledger: Arc::new(FileLedger {
                path: settings.usage_file.clone(),
            }),
        }))
    }
}

/// The images API client, made on first use.
struct LazyGenerator(Lazy<dyn family::ImageGenerator>);

impl family::ImageGenerator for LazyGenerator {
    fn generate(
        &self,
        request: family::ImageRequest,
    ) -> BoxFuture<'static, Result<family::GeneratedImage, WebError>> {
        match self.0.open() {
            Ok(generator) => generator.generate(request),
            Err(e) => {
                let e = WebError::new(
                    WebErrorKind::NotConfigured,
                    format!("the images API client could not be made: {e}"),
                );
                Box::pin(async move { Err(e) })
            }
        }
    }
}

/// The day's counts in a small JSON file under the data directory
/// (`{"day": "2026-03-01", "counts": {"alice": 3}}`), 0600, replaced whole on each change.
struct FileLedger {
    path: PathBuf,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Usage {
    day: String,
    counts: HashMap<String, u32>,
}

impl UsageLedger for FileLedger {
    fn load(&self, day: &str) -> HashMap<String, u32> {
        match read_usage(&self.path) {
            Ok(Some(u)) if u.day == day => u.counts,
            Ok(_) => HashMap::new(),
            Err(e) => {
                tracing::warn!(file = %self.path.display(), error = %e, "cannot read the image counts; counting today from zero");
                HashMap::new()
            }
        }
    }

    fn save(&self, day: &str, counts: &HashMap<String, u32>) {
        let usage = Usage {
            day: day.to_owned(),
            counts: counts.clone(),
        };
        if let Err(e) = write_usage(&self.path, &usage) {
            tracing::warn!(file = %self.path.display(), error = %e, "cannot save the image counts; a restart today would forget them");
        }
    }
}

#[allow(clippy::disallowed_methods)] // the operator's data directory, not a root
fn read_usage(path: &Path) -> std::io::Result<Option<Usage>> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(std::io::Error::other),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The day's counts, written whole or not at all, private to the server's account.
fn write_usage(path: &Path, usage: &Usage) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        ringfence_fs::create_private_dir_all(dir)?;
    }
    let bytes = serde_json::to_vec(usage).map_err(std::io::Error::other)?;
    ringfence_fs::write_private_file(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_keeps_the_day_across_instances() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("data").join(config::USAGE_FILE);
        let counts: HashMap<String, u32> = [("alice".to_owned(), 3)].into();
        FileLedger { path: path.clone() }.save("2026-03-01", &counts);
        let again = FileLedger { path: path.clone() };
        assert_eq!(again.load("2026-03-01"), counts);
        assert!(again.load("2026-03-02").is_empty());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            #[allow(clippy::disallowed_methods)] // checking the file the test made
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // A damaged file counts from zero instead of failing the call.
        #[allow(clippy::disallowed_methods)]
        std::fs::write(&path, b"{not json").unwrap();
        assert!(FileLedger { path }.load("2026-03-01").is_empty());
    }
}
