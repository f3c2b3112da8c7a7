//! `[memory]`: the database, the embedding provider (`RINGFENCE_EMBEDDINGS` and
//! `RINGFENCE_MODEL_DIR` beat the file) and the ranking settings.

use std::path::{Path, PathBuf};

use super::raw::MemoryConfig;
use super::{ConfigError, Env};
use crate::env_vars;

/// The resolved embedding provider.
#[derive(Debug, Clone, PartialEq)]
pub enum EmbeddingProvider {
    Local {
        model_dir: PathBuf,
    },
    OpenAi {
        url: String,
        model: String,
        /// The variable to read the key from at start.
        api_key_env: Option<String>,
        dimensions: Option<usize>,
        timeout_secs: u64,
    },
    None,
}

/// The resolved `[memory]` settings.
#[derive(Debug, Clone)]
pub struct MemorySettings {
    pub database: PathBuf,
    pub pinned_in_instructions: bool,
    pub provider: EmbeddingProvider,
    pub rank: ringfence_store::memory::RankConfig,
}

/// Where `ringfence model install` puts the model and the server looks for it by default.
pub fn default_model_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models").join(ringfence_embed::DEFAULT_MODEL)
}

impl MemorySettings {
    pub(super) fn resolve(
        file: Option<&MemoryConfig>,
        env: &dyn Env,
        data_dir: &Path,
    ) -> Result<MemorySettings, ConfigError> {
        let empty = MemoryConfig::default();
        let file = file.unwrap_or(&empty);
        let database = match &file.database {
            Some(p) if !p.is_absolute() => {
                return Err(ConfigError::not_absolute("memory.database", p));
            }
            Some(p) => p.clone(),
            None => data_dir.join("memory.db"),
        };
        let provider = embedding_provider(file, env, data_dir)?;
        let rank = rank(file)?;
        Ok(MemorySettings {
            database,
            pinned_in_instructions: file.pinned_in_instructions.unwrap_or(false),
            provider,
            rank,
        })
    }
}

/// `[memory.embeddings]`, the provider named by `RINGFENCE_EMBEDDINGS` winning over the
/// file's, and `RINGFENCE_MODEL_DIR` over `model_dir`.
fn embedding_provider(
    file: &MemoryConfig,
    env: &dyn Env,
    data_dir: &Path,
) -> Result<EmbeddingProvider, ConfigError> {
    let e = file.embeddings.clone().unwrap_or_default();
    let provider_name = env
        .get(env_vars::RINGFENCE_EMBEDDINGS)
        .filter(|s| !s.trim().is_empty())
        .or(e.provider.clone())
        .unwrap_or_else(|| "local".into());
    let model_dir = match env
        .get(env_vars::RINGFENCE_MODEL_DIR)
        .filter(|s| !s.trim().is_empty())
    {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
        Some(d) => {
            return Err(ConfigError::not_absolute(env_vars::RINGFENCE_MODEL_DIR, d));
        }
        None => match &e.model_dir {
            Some(d) if !d.is_absolute() => {
                return Err(ConfigError::not_absolute("memory.embeddings.model_dir", d));
            }
            Some(d) => d.clone(),
            None => default_model_dir(data_dir),
        },
    };
    let provider = match provider_name.trim() {
        "local" => EmbeddingProvider::Local { model_dir },
        "none" => EmbeddingProvider::None,
        "openai" => {
            let url = e
                .url
                .clone()
                .filter(|u| !u.trim().is_empty())
                .ok_or_else(|| {
                    ConfigError::invalid(
                        "memory.embeddings.url",
                        "required with provider = \"openai\" (e.g. http://127.0.0.1:11434/v1)",
                    )
                })?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(ConfigError::invalid(
                    "memory.embeddings.url",
                    format!("`{url}` must start with http:// or https://"),
                ));
            }
            let model = e
                .model
                .clone()
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| {
                    ConfigError::invalid(
                        "memory.embeddings.model",
                        "required with provider = \"openai\" (e.g. nomic-embed-text)",
                    )
                })?;
            if let Some(var) = &e.api_key_env
                && env.get(var).filter(|k| !k.is_empty()).is_none()
            {
                return Err(ConfigError::invalid(
                    "memory.embeddings.api_key_env",
                    format!("the variable {var} is not set"),
                ));
            }
            if e.dimensions == Some(0) {
                return Err(ConfigError::invalid(
                    "memory.embeddings.dimensions",
                    "must be at least 1",
                ));
            }
            EmbeddingProvider::OpenAi {
                url,
                model,
                api_key_env: e.api_key_env.clone(),
                dimensions: e.dimensions,
                timeout_secs: e.timeout_secs.unwrap_or(30).max(1),
            }
        }
        other => {
            return Err(ConfigError::invalid(
                "memory.embeddings.provider",
                format!("`{other}` is not valid; use `local`, `openai` or `none`"),
            ));
        }
    };
    Ok(provider)
}

/// `[memory.search]` over the default ranking.
fn rank(file: &MemoryConfig) -> Result<ringfence_store::memory::RankConfig, ConfigError> {
    let mut rank = ringfence_store::memory::RankConfig::default();
    if let Some(sc) = &file.search {
        let unit = |key: &str, v: Option<f32>, into: &mut f32| -> Result<(), ConfigError> {
            if let Some(v) = v {
                if !(0.0..=1.0).contains(&v) {
                    return Err(ConfigError::invalid(
                        format!("memory.search.{key}"),
                        format!("{v} must be between 0 and 1"),
                    ));
                }
                *into = v;
            }
            Ok(())
        };
        unit(
            "lexical_weight",
            sc.lexical_weight,
            &mut rank.lexical_weight,
        )?;
        unit(
            "recency_weight",
            sc.recency_weight,
            &mut rank.recency_weight,
        )?;
        unit("usage_weight", sc.usage_weight, &mut rank.usage_weight)?;
        unit("min_relevance", sc.min_relevance, &mut rank.min_relevance)?;
        unit("min_lexical", sc.min_lexical, &mut rank.min_lexical)?;
        unit(
            "duplicate_threshold",
            sc.duplicate_threshold,
            &mut rank.duplicate_threshold,
        )?;
        if let Some(h) = sc.recency_half_life_days {
            if h.is_nan() || h <= 0.0 {
                return Err(ConfigError::invalid(
                    "memory.search.recency_half_life_days",
                    format!("{h} must be more than 0"),
                ));
            }
            rank.recency_half_life_days = h;
        }
    }
    Ok(rank)
}
