//! A BERT encoder (the architecture of all-MiniLM-L6-v2 and other sentence-transformers
//! models) on candle, with the pooling and normalisation sentence-transformers applies.
//!
//! Written for inference only: no dropout, absolute position embeddings, exact (erf) GELU.

use std::collections::HashMap;

use candle_core::{D, DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, VarBuilder};
use serde::Deserialize;

use crate::EmbedError;

/// The fields of a Hugging Face `config.json` the encoder needs.
#[derive(Debug, Clone, Deserialize)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    #[serde(default)]
    pub hidden_act: Option<String>,
    #[serde(default)]
    pub model_type: Option<String>,
    #[serde(default)]
    pub position_embedding_type: Option<String>,
}

fn default_type_vocab() -> usize {
    2
}

fn default_eps() -> f64 {
    1e-12
}

impl BertConfig {
    /// Refuses configurations this encoder would compute wrongly.
    pub fn check(&self) -> Result<(), EmbedError> {
        let bad = |what: String| Err(EmbedError::Model(what));
        if let Some(t) = &self.model_type
            && t != "bert"
        {
            return bad(format!(
                "config.json says model_type {t:?}; only BERT encoders (such as all-MiniLM-L6-v2) are supported"
            ));
        }
        if let Some(p) = &self.position_embedding_type
            && p != "absolute"
        {
            return bad(format!(
                "config.json says position_embedding_type {p:?}; only \"absolute\" is supported"
            ));
        }
        if let Some(act) = &self.hidden_act
            && act != "gelu"
        {
            return bad(format!(
                "config.json says hidden_act {act:?}; only \"gelu\" is supported"
            ));
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return bad(format!(
                "config.json: hidden_size {} is not a multiple of num_attention_heads {}",
                self.hidden_size, self.num_attention_heads
            ));
        }
        Ok(())
    }
}

/// How token vectors become one sentence vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    /// The mean of the token vectors under the attention mask (all-MiniLM-L6-v2).
    Mean,
    /// The first token's vector.
    Cls,
}

/// Up to this many tokens, dense layers skip the general matrix product (see
/// [`Dense::forward_small`]).
const SMALL_ROWS: usize = 48;

/// A dense layer over the last dimension, its weight stored transposed and contiguous
/// (`in × out`) so every call is one plain 2-D matrix product over all tokens at once.
struct Dense {
    weight_t: Tensor,
    bias: Tensor,
    out: usize,
}

impl Dense {
    fn load(vb: VarBuilder, input: usize, out: usize) -> candle_core::Result<Dense> {
        let weight = vb.get((out, input), "weight")?;
        let weight_t = weight.t()?.contiguous()?;
        Ok(Dense {
            weight_t,
            bias: vb.get(out, "bias")?,
            out,
        })
    }

    /// Several layers reading the same input as one (query, key and value side by side).
    fn concat(parts: &[Dense]) -> candle_core::Result<Dense> {
        let weights: Vec<&Tensor> = parts.iter().map(|d| &d.weight_t).collect();
        let biases: Vec<&Tensor> = parts.iter().map(|d| &d.bias).collect();
        let weight_t = Tensor::cat(&weights, 1)?.contiguous()?;
        Ok(Dense {
            weight_t,
            bias: Tensor::cat(&biases, 0)?,
            out: parts.iter().map(|d| d.out).sum(),
        })
    }

    fn forward(&self, x: &Tensor) -> candle_core::Result<Tensor> {
        let dims = x.dims();
        let input = dims[dims.len() - 1];
        let rows = x.elem_count() / input;
        let mut shape = dims.to_vec();
        *shape.last_mut().unwrap_or(&mut 0) = self.out;
        if rows <= SMALL_ROWS {
            return self.forward_small(x, rows, input)?.reshape(shape);
        }
        x.reshape((rows, input))?
            .matmul(&self.weight_t)?
            .broadcast_add(&self.bias)?
            .reshape(shape)
    }

    /// A few rows (a search query): the general matrix product would copy ("pack") the
    /// whole weight matrix on every call, which costs more than the arithmetic. Here each
    /// weight row is read once and added, scaled, into every output row (vectorised).
    fn forward_small(&self, x: &Tensor, rows: usize, input: usize) -> candle_core::Result<Tensor> {
        let xs = x.flatten_all()?.to_vec1::<f32>()?;
        let bias = self.bias.to_vec1::<f32>()?;
        let out_n = self.out;
        let mut out: Vec<f32> = Vec::with_capacity(rows * out_n);
        for _ in 0..rows {
            out.extend_from_slice(&bias);
        }
        let (storage, layout) = self.weight_t.storage_and_layout();
        let candle_core::Storage::Cpu(cpu) = &*storage else {
            candle_core::bail!("the encoder runs on the CPU only");
        };
        let all = cpu.as_slice::<f32>()?;
        let w = &all[layout.start_offset()..layout.start_offset() + input * out_n];
        crate::small_matmul_acc(&xs, w, &mut out, rows, input);
        Tensor::from_vec(out, (rows, out_n), x.device())
    }
}

struct SelfAttention {
    /// Query, key and value in one product.
    qkv: Dense,
    output: Dense,
    norm: LayerNorm,
    heads: usize,
    head_dim: usize,
}

impl SelfAttention {
    fn load(vb: VarBuilder, cfg: &BertConfig) -> candle_core::Result<SelfAttention> {
        let h = cfg.hidden_size;
        let own = vb.pp("self");
        Ok(SelfAttention {
            qkv: Dense::concat(&[
                Dense::load(own.pp("query"), h, h)?,
                Dense::load(own.pp("key"), h, h)?,
                Dense::load(own.pp("value"), h, h)?,
            ])?,
            output: Dense::load(vb.pp("output").pp("dense"), h, h)?,
            norm: candle_nn::layer_norm(h, cfg.layer_norm_eps, vb.pp("output").pp("LayerNorm"))?,
            heads: cfg.num_attention_heads,
            head_dim: h / cfg.num_attention_heads,
        })
    }

    /// `x`: [batch, seq, hidden]; `mask_bias`: [batch, 1, 1, seq] (0 or a large negative).
    fn forward(&self, x: &Tensor, mask_bias: &Tensor) -> candle_core::Result<Tensor> {
        let (b, s, hidden) = x.dims3()?;
        let qkv = self.qkv.forward(x)?;
        let split = |i: usize| -> candle_core::Result<Tensor> {
            qkv.narrow(2, i * hidden, hidden)?
                .reshape((b, s, self.heads, self.head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let (q, k, v) = (split(0)?, split(1)?, split(2)?);
        let scale = 1.0 / (self.head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(mask_bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b, s, hidden))?;
        self.norm.forward(&(self.output.forward(&context)? + x)?)
    }
}

struct Layer {
    attention: SelfAttention,
    intermediate: Dense,
    output: Dense,
    norm: LayerNorm,
}

impl Layer {
    fn load(vb: VarBuilder, cfg: &BertConfig) -> candle_core::Result<Layer> {
        Ok(Layer {
            attention: SelfAttention::load(vb.pp("attention"), cfg)?,
            intermediate: Dense::load(
                vb.pp("intermediate").pp("dense"),
                cfg.hidden_size,
                cfg.intermediate_size,
            )?,
            output: Dense::load(
                vb.pp("output").pp("dense"),
                cfg.intermediate_size,
                cfg.hidden_size,
            )?,
            norm: candle_nn::layer_norm(
                cfg.hidden_size,
                cfg.layer_norm_eps,
                vb.pp("output").pp("LayerNorm"),
            )?,
        })
    }

    fn forward(&self, x: &Tensor, mask_bias: &Tensor) -> candle_core::Result<Tensor> {
        let attended = self.attention.forward(x, mask_bias)?;
        let inner = self.intermediate.forward(&attended)?.gelu_erf()?;
        self.norm
            .forward(&(self.output.forward(&inner)? + attended)?)
    }
}

/// The encoder with its weights.
pub struct Bert {
    words: Embedding,
    positions: Embedding,
    token_types: Embedding,
    norm: LayerNorm,
    layers: Vec<Layer>,
    max_positions: usize,
    device: Device,
}

impl std::fmt::Debug for Bert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bert")
            .field("layers", &self.layers.len())
            .finish()
    }
}

impl Bert {
    /// Builds the encoder from named weights (a safetensors file's contents). Weight names
    /// may carry a `bert.` prefix (checkpoints saved from BertForMaskedLM and friends).
    pub fn from_weights(
        mut weights: HashMap<String, Tensor>,
        cfg: &BertConfig,
    ) -> Result<Bert, EmbedError> {
        cfg.check()?;
        if !weights.contains_key("embeddings.word_embeddings.weight")
            && weights.contains_key("bert.embeddings.word_embeddings.weight")
        {
            weights = weights
                .into_iter()
                .filter_map(|(k, v)| k.strip_prefix("bert.").map(|k| (k.to_owned(), v)))
                .collect();
        }
        // Half-precision checkpoints are widened once; the CPU computes in f32.
        for t in weights.values_mut() {
            if t.dtype() != DType::F32 && t.dtype().is_float() {
                *t = t.to_dtype(DType::F32).map_err(EmbedError::from_candle)?;
            }
        }
        let device = Device::Cpu;
        let vb = VarBuilder::from_tensors(weights, DType::F32, &device);
        let build = || -> candle_core::Result<Bert> {
            let e = vb.pp("embeddings");
            let h = cfg.hidden_size;
            Ok(Bert {
                words: candle_nn::embedding(cfg.vocab_size, h, e.pp("word_embeddings"))?,
                positions: candle_nn::embedding(
                    cfg.max_position_embeddings,
                    h,
                    e.pp("position_embeddings"),
                )?,
                token_types: candle_nn::embedding(
                    cfg.type_vocab_size,
                    h,
                    e.pp("token_type_embeddings"),
                )?,
                norm: candle_nn::layer_norm(h, cfg.layer_norm_eps, e.pp("LayerNorm"))?,
                layers: (0..cfg.num_hidden_layers)
                    .map(|i| Layer::load(vb.pp("encoder").pp("layer").pp(i), cfg))
                    .collect::<candle_core::Result<_>>()?,
                max_positions: cfg.max_position_embeddings,
                device: device.clone(),
            })
        };
        build().map_err(|e| {
            EmbedError::Model(format!(
                "model.safetensors does not hold the weights config.json describes: {e}"
            ))
        })
    }

    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Sentence vectors for a padded batch: `ids`, `type_ids` and `mask` are `batch × seq`
    /// row-major. Returns one vector per row, pooled, and unit length if `normalize`.
    pub fn encode(
        &self,
        ids: &[u32],
        type_ids: &[u32],
        mask: &[u32],
        batch: usize,
        pooling: Pooling,
        normalize: bool,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.encode_inner(ids, type_ids, mask, batch, pooling, normalize)
            .map_err(EmbedError::from_candle)
    }

    fn encode_inner(
        &self,
        ids: &[u32],
        type_ids: &[u32],
        mask: &[u32],
        batch: usize,
        pooling: Pooling,
        normalize: bool,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let seq = ids.len() / batch.max(1);
        let dev = &self.device;
        let ids = Tensor::from_slice(ids, (batch, seq), dev)?;
        let type_ids = Tensor::from_slice(type_ids, (batch, seq), dev)?;
        let mask_f = Tensor::from_slice(mask, (batch, seq), dev)?.to_dtype(DType::F32)?;
        let positions = Tensor::arange(0u32, seq as u32, dev)?;

        let x = self
            .words
            .forward(&ids)?
            .broadcast_add(&self.positions.forward(&positions)?)?
            .add(&self.token_types.forward(&type_ids)?)?;
        let mut x = self.norm.forward(&x)?;
        // 0 where a token is real, a large negative where it is padding.
        let mask_bias =
            ((mask_f.ones_like()? - &mask_f)? * -1e4f64)?.reshape((batch, 1, 1, seq))?;
        for layer in &self.layers {
            x = layer.forward(&x, &mask_bias)?;
        }
        let pooled = match pooling {
            Pooling::Mean => {
                let m = mask_f.unsqueeze(2)?;
                let summed = x.broadcast_mul(&m)?.sum(1)?;
                let counts = m.sum(1)?.clamp(1e-9f64, f64::MAX)?;
                summed.broadcast_div(&counts)?
            }
            Pooling::Cls => x.narrow(1, 0, 1)?.squeeze(1)?,
        };
        let pooled = if normalize {
            let norms = pooled
                .sqr()?
                .sum_keepdim(D::Minus1)?
                .sqrt()?
                .clamp(1e-12f64, f64::MAX)?;
            pooled.broadcast_div(&norms)?
        } else {
            pooled
        };
        pooled.to_vec2::<f32>()
    }
}
