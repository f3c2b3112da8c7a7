//! The memory family's plug: truths and memories per user in `memory.db` (or the shared
//! PostgreSQL database `[store]` names), searched by meaning with the configured embeddings;
//! the pinned truths as a resource, a prompt and (optionally) instructions.

use std::path::Path;
use std::sync::Arc;

use ringfence_core::family::{Family, FamilyInfo};
use ringfence_core::plug::{
    BuildError, Check, FamilyEnv, FamilyPlug, Lazy, SectionInput, SettingsError, Shown,
};
use ringfence_store::pg::copy;
use ringfence_store::{OpenError, SharedStore};

use crate::settings::{self as config, EmbeddingProvider, MemorySettings};
use crate::store::{EmbedderLoader, MemoryDb};
use crate::{
    self as family, Item, Kind, MemoryBackend, MemoryError, MemoryServices, NewItem, Query,
    SearchOutcome, StoreOutcome, UpdateOutcome,
};

/// How often searches' access counts are written.
const ACCESS_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

pub struct MemoryPlug;

impl FamilyPlug for MemoryPlug {
    type Settings = MemorySettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);
    const SAMPLE: Option<&'static str> = Some(config::SAMPLE);
    const ENV_VARS: &'static [&'static str] = config::ENV_VARS;

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<MemorySettings, SettingsError> {
        MemorySettings::resolve(input)
    }

    fn state(&self, settings: &MemorySettings, _data_dir: &Path) -> Vec<copy::Family> {
        vec![crate::store::state(settings.database.clone())]
    }

    fn shown(&self, s: &MemorySettings) -> Shown {
        let path = |p: &Path| p.display().to_string();
        let mut shown = Shown::default()
            .value("database", path(&s.database))
            .value("pinned_in_instructions", s.pinned_in_instructions);
        shown = match &s.provider {
            EmbeddingProvider::Local { model_dir } => shown
                .value("embeddings.provider", "local")
                .value("embeddings.model_dir", path(model_dir)),
            EmbeddingProvider::OpenAi {
                url,
                model,
                api_key_env,
                dimensions,
                timeout_secs,
            } => {
                let shown = shown
                    .value("embeddings.provider", "openai")
                    .value("embeddings.url", url.as_str())
                    .value("embeddings.model", model.as_str())
                    .value(
                        "embeddings.api_key_env",
                        api_key_env.as_deref().unwrap_or_default(),
                    );
                let shown = match dimensions {
                    Some(n) => shown.number("embeddings.dimensions", *n as u64),
                    None => shown.raw("embeddings.dimensions", "(the model's)".to_owned()),
                };
                shown.number("embeddings.timeout_secs", *timeout_secs)
            }
            EmbeddingProvider::None => shown.value("embeddings.provider", "none"),
        };
        let r = &s.rank;
        [
            ("lexical_weight", r.lexical_weight),
            ("time_weight", r.time_weight),
            ("recency_weight", r.recency_weight),
            ("usage_weight", r.usage_weight),
            ("recency_half_life_days", r.recency_half_life_days),
            ("min_relevance", r.min_relevance),
            ("min_lexical", r.min_lexical),
            ("duplicate_threshold", r.duplicate_threshold),
        ]
        .into_iter()
        .fold(shown, |shown, (k, v)| {
            shown.raw(&format!("search.{k}"), format!("{v}"))
        })
    }

    fn checks(&self, settings: &MemorySettings, _data_dir: &Path) -> Vec<Check> {
        let subject = "memory search";
        vec![match &settings.provider {
            EmbeddingProvider::Local { model_dir }
                if ringfence_embed::install::is_installed(model_dir) =>
            {
                Check::ok(
                    subject,
                    format!(
                        "by meaning and words, with {} in {}",
                        ringfence_embed::DEFAULT_MODEL,
                        model_dir.display()
                    ),
                )
            }
            EmbeddingProvider::Local { model_dir } => Check::note(
                subject,
                format!(
                    "by words only: the embedding model is not in {}",
                    model_dir.display()
                ),
                "run `ringfence model install` to search by meaning too",
            ),
            EmbeddingProvider::OpenAi { url, model, .. } => Check::ok(
                subject,
                format!(
                    "by meaning and words, with the model {model} at {}",
                    url.split(['?', '#'])
                        .next()
                        .map(|u| match u.split_once("://") {
                            // Never a login written into the address.
                            Some((scheme, rest)) => format!(
                                "{scheme}://{}",
                                rest.rsplit_once('@').map_or(rest, |(_, host)| host)
                            ),
                            None => u.to_owned(),
                        })
                        .unwrap_or_default()
                ),
            ),
            EmbeddingProvider::None => Check::ok(
                subject,
                "by words only ([memory.embeddings] provider = \"none\")",
            ),
        }]
    }

    fn build(&self, settings: &MemorySettings, env: &FamilyEnv<'_>) -> Result<Family, BuildError> {
        let (store, opened) = (env.store.clone(), settings.clone());
        let memory = Arc::new(LazyMemory(Lazy::new(move || open(&store, &opened))));
        if env.background {
            // The model takes a moment to read; the handshake must not wait. Calls that need
            // memory before then wait for the database; searches wait for the model.
            let opener = memory.clone();
            env.supervisor.spawn("memory-open", move |_| {
                if let Ok(db) = opener.get() {
                    db.warm_up();
                }
            });
            // Searches count their hits in memory; the counts reach the database here.
            let writer = memory.clone();
            env.supervisor
                .every("memory-access", ACCESS_FLUSH, move || writer.flush());
        }
        let flushed = memory.clone();
        env.supervisor
            .at_exit("memory access counts", move || flushed.flush());
        Ok(family::family(MemoryServices {
            backend: memory.clone(),
            pinned_in_instructions: settings.pinned_in_instructions,
        })
        .with_section(Arc::new(crate::page::MemoryPage { memory })))
    }
}

/// Truths and memories, opened on first use (or by a background job at start-up).
#[derive(Debug)]
pub(crate) struct LazyMemory(Lazy<MemoryDb>);

impl LazyMemory {
    /// Writes pending access counts (before the process exits).
    fn flush(&self) {
        if let Some(db) = self.0.opened() {
            db.flush();
        }
    }

    pub(crate) fn get(&self) -> Result<&Arc<MemoryDb>, MemoryError> {
        self.0.get()
    }
}

impl MemoryBackend for LazyMemory {
    fn store(&self, user: &str, kind: Kind, item: NewItem) -> Result<StoreOutcome, MemoryError> {
        self.get()?.store(user, kind, item)
    }
    fn search(&self, user: &str, kind: Kind, query: &Query) -> Result<SearchOutcome, MemoryError> {
        self.get()?.search(user, kind, query)
    }
    fn update(
        &self,
        user: &str,
        kind: Kind,
        id: i64,
        content: &str,
    ) -> Result<UpdateOutcome, MemoryError> {
        self.get()?.update(user, kind, id, content)
    }
    fn delete(&self, user: &str, kind: Kind, id: i64) -> Result<Option<Item>, MemoryError> {
        self.get()?.delete(user, kind, id)
    }
    fn pinned(&self, user: &str) -> Result<Vec<Item>, MemoryError> {
        self.get()?.pinned(user)
    }
}

/// The memory database `[store]` names with the configured embedder: `memory.db` (made
/// 0600, a missing directory 0700: facts about people), or PostgreSQL's tables.
pub fn open(store: &SharedStore, settings: &MemorySettings) -> Result<Arc<MemoryDb>, OpenError> {
    let loader = || embedder_loader(&settings.provider);
    let opened = store.open(
        "memory database",
        || MemoryDb::open(&settings.database, loader(), settings.rank.clone()),
        |pg| MemoryDb::open_postgres(pg, loader(), settings.rank.clone()),
    );
    if let Err(e) = &opened {
        tracing::error!(error = %e, "the memory tools are unavailable");
    }
    opened
}

/// How the configured embedding provider is loaded.
fn embedder_loader(provider: &EmbeddingProvider) -> Option<EmbedderLoader> {
    match provider.clone() {
        EmbeddingProvider::None => None,
        EmbeddingProvider::Local { model_dir } => Some(Box::new(move || {
            #[cfg(feature = "local-embeddings")]
            {
                ringfence_embed::LocalModel::load(&model_dir)
                    .map(|m| Arc::new(m) as Arc<dyn ringfence_embed::Embedder>)
            }
            #[cfg(not(feature = "local-embeddings"))]
            {
                let _ = &model_dir;
                Err(ringfence_embed::EmbedError::Model("this ringfence was built without the local model (feature local-embeddings); use memory.embeddings.provider = \"openai\"".into()))
            }
        })),
        EmbeddingProvider::OpenAi {
            url,
            model,
            api_key_env,
            dimensions,
            timeout_secs,
        } => Some(Box::new(move || {
            let api_key = api_key_env.as_ref().and_then(|v| std::env::var(v).ok());
            ringfence_embed::OpenAiEmbedder::new(ringfence_embed::OpenAiConfig {
                url: url.clone(),
                model: model.clone(),
                api_key,
                dimensions,
                timeout: std::time::Duration::from_secs(timeout_secs),
            })
            .map(|e| Arc::new(e) as Arc<dyn ringfence_embed::Embedder>)
        })),
    }
}
