//! `[memory]`: the database, the embedding provider (`RINGFENCE_EMBEDDINGS` and
//! `RINGFENCE_MODEL_DIR` beat the file) and the ranking settings — the table as written,
//! then resolved.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use ringfence_core::plug::{Env, SectionInput, SettingsError};

/// The family's table in the configuration file.
pub const SECTION: &str = "memory";

/// The family's part of the personal configuration `ringfence init` writes: every line a
/// comment, `# ` before a setting (remove it to use the setting), `## ` before prose.
pub const SAMPLE: &str = r#"## Memory: the truths and memories the assistant keeps about you (remember, recall, …).
## Search is by meaning once the embedding model is installed (`ringfence model install`),
## by words until then.
# [memory]
# pinned_in_instructions = false   # also put pinned truths in the instructions at connect
# [memory.embeddings]
# provider = "local"               # "local" (all-MiniLM-L6-v2), "openai" (any compatible endpoint) or "none""#;

/// Embedding provider for memory search: `local` (default), `openai`, `none`.
pub const RINGFENCE_EMBEDDINGS: &str = "RINGFENCE_EMBEDDINGS";
/// The local embedding model's directory (default `<data dir>/models/all-MiniLM-L6-v2`).
pub const RINGFENCE_MODEL_DIR: &str = "RINGFENCE_MODEL_DIR";
/// The variables this family reads.
pub const ENV_VARS: &[&str] = &[RINGFENCE_EMBEDDINGS, RINGFENCE_MODEL_DIR];

/// `[memory]`: truths and memories.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct MemoryConfig {
    /// The database file (default `<data dir>/memory.db`).
    pub database: Option<PathBuf>,
    /// Append the user's pinned truths to the instructions sent at `initialize`
    /// (default false; they are always offered as a resource and a prompt).
    pub pinned_in_instructions: Option<bool>,
    pub embeddings: Option<EmbeddingsConfig>,
    pub search: Option<SearchConfig>,
}

/// `[memory.embeddings]`: how meanings are computed.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmbeddingsConfig {
    /// `local` (default: all-MiniLM-L6-v2 from `model_dir`, when installed), `openai` (an
    /// OpenAI-compatible endpoint), or `none` (words only).
    pub provider: Option<String>,
    /// The local model's directory (default `<data dir>/models/all-MiniLM-L6-v2`).
    pub model_dir: Option<PathBuf>,
    /// `openai`: the API base, e.g. `http://127.0.0.1:11434/v1`.
    pub url: Option<String>,
    /// `openai`: the model name.
    pub model: Option<String>,
    /// `openai`: the environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// `openai`: ask for vectors of this length (models that support it).
    pub dimensions: Option<usize>,
    /// `openai`: seconds before a request is abandoned (default 30).
    pub timeout_secs: Option<u64>,
}

/// `[memory.search]`: ranking weights and thresholds (see docs/design/memory.md).
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchConfig {
    pub lexical_weight: Option<f32>,
    pub time_weight: Option<f32>,
    pub recency_weight: Option<f32>,
    pub usage_weight: Option<f32>,
    pub recency_half_life_days: Option<f32>,
    pub min_relevance: Option<f32>,
    pub min_lexical: Option<f32>,
    pub duplicate_threshold: Option<f32>,
}

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
    pub rank: crate::store::RankConfig,
}

/// Where `ringfence model install` puts the model and the server looks for it by default.
pub fn default_model_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("models").join(ringfence_embed::DEFAULT_MODEL)
}

impl MemorySettings {
    /// `[memory]` from the file, then the variables.
    pub fn resolve(input: &SectionInput<'_>) -> Result<MemorySettings, SettingsError> {
        let file: MemoryConfig = input.table(SECTION)?;
        let (env, data_dir) = (input.env, input.data_dir);
        let database = match &file.database {
            Some(p) if !p.is_absolute() => {
                return Err(SettingsError::not_absolute("memory.database", p));
            }
            Some(p) => p.clone(),
            None => data_dir.join("memory.db"),
        };
        let provider = embedding_provider(&file, env, data_dir)?;
        let rank = rank(&file)?;
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
) -> Result<EmbeddingProvider, SettingsError> {
    let e = file.embeddings.clone().unwrap_or_default();
    let provider_name = env
        .get(RINGFENCE_EMBEDDINGS)
        .filter(|s| !s.trim().is_empty())
        .or(e.provider.clone())
        .unwrap_or_else(|| "local".into());
    let model_dir = match env
        .get(RINGFENCE_MODEL_DIR)
        .filter(|s| !s.trim().is_empty())
    {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
        Some(d) => {
            return Err(SettingsError::not_absolute(RINGFENCE_MODEL_DIR, d));
        }
        None => match &e.model_dir {
            Some(d) if !d.is_absolute() => {
                return Err(SettingsError::not_absolute(
                    "memory.embeddings.model_dir",
                    d,
                ));
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
                    SettingsError::invalid(
                        "memory.embeddings.url",
                        "required with provider = \"openai\" (e.g. http://127.0.0.1:11434/v1)",
                    )
                })?;
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(SettingsError::invalid(
                    "memory.embeddings.url",
                    format!("`{url}` must start with http:// or https://"),
                ));
            }
            let model = e
                .model
                .clone()
                .filter(|m| !m.trim().is_empty())
                .ok_or_else(|| {
                    SettingsError::invalid(
                        "memory.embeddings.model",
                        "required with provider = \"openai\" (e.g. nomic-embed-text)",
                    )
                })?;
            if let Some(var) = &e.api_key_env
                && env.get(var).filter(|k| !k.is_empty()).is_none()
            {
                return Err(SettingsError::invalid(
                    "memory.embeddings.api_key_env",
                    format!("the variable {var} is not set"),
                ));
            }
            if e.dimensions == Some(0) {
                return Err(SettingsError::invalid(
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
            return Err(SettingsError::invalid(
                "memory.embeddings.provider",
                format!("`{other}` is not valid; use `local`, `openai` or `none`"),
            ));
        }
    };
    Ok(provider)
}

/// `[memory.search]` over the default ranking.
fn rank(file: &MemoryConfig) -> Result<crate::store::RankConfig, SettingsError> {
    let mut rank = crate::store::RankConfig::default();
    if let Some(sc) = &file.search {
        let unit = |key: &str, v: Option<f32>, into: &mut f32| -> Result<(), SettingsError> {
            if let Some(v) = v {
                if !(0.0..=1.0).contains(&v) {
                    return Err(SettingsError::invalid(
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
        unit("time_weight", sc.time_weight, &mut rank.time_weight)?;
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
                return Err(SettingsError::invalid(
                    "memory.search.recency_half_life_days",
                    format!("{h} must be more than 0"),
                ));
            }
            rank.recency_half_life_days = h;
        }
    }
    Ok(rank)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str, env: &[(&str, &str)], dir: &Path) -> Result<MemorySettings, SettingsError> {
        ringfence_core::plug::resolve_text(&crate::MemoryPlug, toml, env, dir)
    }

    #[test]
    fn the_table_then_the_variables() {
        let toml = "[memory]\ndatabase = \"/srv/m.db\"\npinned_in_instructions = true\n\
                    [memory.embeddings]\nprovider = \"none\"\n\
                    [memory.search]\nmin_relevance = 0.5\n";
        let dir = tempfile::tempdir().unwrap();
        let m = load(toml, &[], dir.path()).unwrap();
        assert_eq!(m.database, PathBuf::from("/srv/m.db"));
        assert!(m.pinned_in_instructions);
        assert_eq!(m.provider, EmbeddingProvider::None);
        assert_eq!(m.rank.min_relevance, 0.5);
        // RINGFENCE_EMBEDDINGS and RINGFENCE_MODEL_DIR beat the file.
        let m = load(
            toml,
            &[
                (RINGFENCE_EMBEDDINGS, "local"),
                (RINGFENCE_MODEL_DIR, "/models/minilm"),
            ],
            dir.path(),
        )
        .unwrap();
        assert_eq!(
            m.provider,
            EmbeddingProvider::Local {
                model_dir: "/models/minilm".into()
            }
        );
    }

    #[test]
    fn without_a_table_the_defaults_under_the_data_directory() {
        let dir = tempfile::tempdir().unwrap();
        let m = load("log = \"info\"\n", &[], dir.path()).unwrap();
        assert_eq!(m.database, dir.path().join("memory.db"));
        assert!(!m.pinned_in_instructions);
        assert_eq!(
            m.provider,
            EmbeddingProvider::Local {
                model_dir: default_model_dir(dir.path())
            }
        );
    }

    #[test]
    fn mistakes_name_their_key() {
        for (toml, env, key) in [
            ("[memory]\ndatabase = \"m.db\"\n", vec![], "memory.database"),
            (
                "[memory.embeddings]\nprovider = \"cloud\"\n",
                vec![],
                "memory.embeddings.provider",
            ),
            (
                "[memory.embeddings]\nprovider = \"openai\"\nmodel = \"m\"\n",
                vec![],
                "memory.embeddings.url",
            ),
            (
                "[memory.search]\nrecency_half_life_days = 0.0\n",
                vec![],
                "memory.search.recency_half_life_days",
            ),
            (
                "",
                vec![(RINGFENCE_MODEL_DIR, "models")],
                RINGFENCE_MODEL_DIR,
            ),
        ] {
            let dir = tempfile::tempdir().unwrap();
            let err = load(toml, &env, dir.path()).unwrap_err().to_string();
            assert!(err.contains(key), "{toml}: {err}");
        }
    }
}
