//! The memory family: truths and memories per user in `memory.db` (or the shared
//! PostgreSQL database `[store]` names), searched by meaning with
//! the configured embeddings; the pinned truths as a resource, a prompt and (optionally)
//! instructions.

use std::sync::Arc;

use ringfence_memory::store::{EmbedderLoader, MemoryDb};
use ringfence_memory::{
    self as family, Item, Kind, MemoryBackend, MemoryError, MemoryServices, NewItem, Query,
    SearchOutcome, StoreOutcome, UpdateOutcome,
};
use ringfence_tools::{Family, FamilyInfo};

use super::{FamilyEnv, FamilyPlug};
use crate::config::{Config, ConfigError, SectionInput};
use crate::store::SharedStore;

mod config;

pub use config::{EmbeddingProvider, MemorySettings, default_model_dir};

/// How often searches' access counts are written.
const ACCESS_FLUSH: std::time::Duration = std::time::Duration::from_secs(2);

pub struct MemoryPlug;

impl FamilyPlug for MemoryPlug {
    type Settings = MemorySettings;
    const SECTION: Option<&'static str> = Some(config::SECTION);
    const ENV_VARS: &'static [&'static str] = config::ENV_VARS;

    fn info(&self) -> &'static FamilyInfo {
        &family::INFO
    }

    fn settings(&self, input: &SectionInput<'_>) -> Result<MemorySettings, ConfigError> {
        MemorySettings::resolve(input)
    }

    fn build(&self, settings: &MemorySettings, env: &FamilyEnv<'_>) -> Result<Family, String> {
        let memory = Arc::new(LazyMemory {
            cell: std::sync::OnceLock::new(),
            settings: settings.clone(),
            store: env
                .shared
                .get_or_init(|| SharedStore::new(env.config.store.clone())),
        });
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
            backend: memory,
            pinned_in_instructions: settings.pinned_in_instructions,
        }))
    }
}

/// The resolved `[memory]` settings (for the `model` and `memory` commands).
pub fn settings(config: &Config) -> &MemorySettings {
    config.families.get(family::INFO.name)
}

/// The memory database `[store]` names, opened now (for the `memory` commands).
pub fn open_now(config: &Config) -> Result<Arc<MemoryDb>, String> {
    open_memory_db(&SharedStore::new(config.store.clone()), settings(config))
}

/// Truths and memories, opened on first use (or by a background job at start-up).
struct LazyMemory {
    cell: std::sync::OnceLock<Result<Arc<MemoryDb>, String>>,
    settings: MemorySettings,
    store: Arc<SharedStore>,
}

impl std::fmt::Debug for LazyMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyMemory")
            .field("database", &self.settings.database)
            .finish()
    }
}

impl LazyMemory {
    /// Writes pending access counts (before the process exits).
    fn flush(&self) {
        if let Some(Ok(db)) = self.cell.get() {
            db.flush();
        }
    }

    fn get(&self) -> Result<&Arc<MemoryDb>, MemoryError> {
        self.cell
            .get_or_init(|| open_memory_db(&self.store, &self.settings))
            .as_ref()
            .map_err(|e| MemoryError::new(e.clone()))
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

/// Opens the memory database `[store]` names with the configured embedder.
fn open_memory_db(store: &SharedStore, settings: &MemorySettings) -> Result<Arc<MemoryDb>, String> {
    store.memory(
        &settings.database,
        embedder_loader(&settings.provider),
        settings.rank.clone(),
    )
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
