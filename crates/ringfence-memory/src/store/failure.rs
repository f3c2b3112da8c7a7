//! The memory store's own failures, carried inside the store's error
//! ([`ringfence_store::StoreError::Family`]).

use std::sync::Arc;

use ringfence_embed::EmbedError;
use ringfence_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum MemoryFailure {
    /// No embedding provider is configured: memory search matches words only.
    #[error(
        "no embedding model is configured (memory.embeddings.provider = \"none\"); for search by meaning set it to \"local\" and run `ringfence model install`"
    )]
    NoEmbedder,
    /// The embedding model could not be loaded (the failure is remembered for
    /// `RETRY_LOAD`, hence shared).
    #[error(transparent)]
    ModelLoad(Arc<EmbedError>),
    /// The embedder failed on some texts.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// The embedder answered without a vector.
    #[error("the embedder returned no vector")]
    NoVector,
    /// Search by meaning failed for this question (it is answered by words).
    #[error("the embedding model failed ({0})")]
    ModelFailed(#[source] Box<StoreError>),
    /// The rows are being embedded again for a new model (in the background).
    #[error(
        "embedding stored rows again for the model {model}: {done} of {total} done; until it finishes, search matches words only"
    )]
    Reembedding {
        done: usize,
        total: usize,
        model: String,
    },
    /// Embedding the rows again failed (it is tried again after a while).
    #[error(
        "embedding stored rows again for the model {model} failed ({why}); it is tried again within a minute, and until it is done search matches words only"
    )]
    ReembedFailed { model: String, why: String },
    /// The looking up of the question's words panicked.
    #[error("the word search panicked")]
    WordSearchPanicked,
    /// A store collided with a concurrent store of the same text that then vanished.
    #[error("a concurrent store conflicted; retry")]
    StoreConflict,
    /// An update collided with a concurrent store of the same text.
    #[error("another session stored the same text at this moment; search and retry")]
    UpdateConflict,
    /// An exported record whose vector is not base64.
    #[error("embedding.vector is not base64: {0}")]
    RecordVector(#[source] base64::DecodeError),
}

impl From<MemoryFailure> for StoreError {
    fn from(f: MemoryFailure) -> StoreError {
        StoreError::family(f)
    }
}
