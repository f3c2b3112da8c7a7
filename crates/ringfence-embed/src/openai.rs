//! An OpenAI-compatible `/v1/embeddings` endpoint (OpenAI, Ollama, llama.cpp server, vLLM…).

use std::sync::OnceLock;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

use crate::{EmbedError, Embedder, normalize};

/// Texts sent in one request.
const BATCH: usize = 64;
/// The largest answer read (a batch of 64 vectors of 4,096 floats as JSON is ~5 MB).
const MAX_RESPONSE: u64 = 64 * 1024 * 1024;

/// Where and how to reach the endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// The API base, e.g. `http://127.0.0.1:11434/v1`; `/embeddings` is appended.
    pub url: String,
    /// The model name the endpoint knows, e.g. `nomic-embed-text`.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set.
    pub api_key: Option<String>,
    /// Asked for with `dimensions` when set (models that support shortening).
    pub dimensions: Option<usize>,
    pub timeout: Duration,
}

/// Embeds through an OpenAI-compatible HTTP endpoint.
pub struct OpenAiEmbedder {
    config: OpenAiConfig,
    agent: ureq::Agent,
    id: String,
    /// Learned from the first answer unless configured.
    dims: OnceLock<usize>,
}

impl std::fmt::Debug for OpenAiEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the API key.
        f.debug_struct("OpenAiEmbedder")
            .field("url", &self.config.url)
            .field("model", &self.config.model)
            .finish()
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    embedding: Vec<f32>,
    #[serde(default)]
    index: Option<usize>,
}

impl OpenAiEmbedder {
    pub fn new(config: OpenAiConfig) -> Result<OpenAiEmbedder, EmbedError> {
        let url = config.url.trim_end_matches('/');
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(EmbedError::Provider(format!(
                "embeddings url {:?} must start with http:// or https:// (for example http://127.0.0.1:11434/v1)",
                config.url
            )));
        }
        if config.model.trim().is_empty() {
            return Err(EmbedError::Provider(
                "the embeddings endpoint needs a model name (memory.embeddings.model)".into(),
            ));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let id = format!("openai:{}@{}", config.model, url);
        let dims = OnceLock::new();
        if let Some(d) = config.dimensions {
            let _ = dims.set(d);
        }
        Ok(OpenAiEmbedder {
            config: OpenAiConfig {
                url: url.to_owned(),
                ..config
            },
            agent,
            id,
            dims,
        })
    }

    fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let endpoint = format!("{}/embeddings", self.config.url);
        let mut body = json!({ "model": self.config.model, "input": texts });
        if let Some(d) = self.config.dimensions {
            body["dimensions"] = json!(d);
        }
        let mut req = self.agent.post(&endpoint);
        if let Some(key) = &self.config.api_key {
            req = req.header("Authorization", &format!("Bearer {key}"));
        }
        let fail =
            |what: String| EmbedError::Provider(format!("embeddings endpoint {endpoint}: {what}"));
        let mut resp = req
            .send_json(&body)
            .map_err(|e| fail(format!("{e}. Is the server running?")))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .with_config()
            .limit(MAX_RESPONSE)
            .read_to_string()
            .map_err(|e| fail(format!("reading the answer: {e}")))?;
        if !status.is_success() {
            let excerpt: String = text.chars().take(300).collect();
            return Err(fail(format!("HTTP {status}: {excerpt}")));
        }
        let answer: Answer = serde_json::from_str(&text)
            .map_err(|e| fail(format!("not an OpenAI embeddings answer: {e}")))?;
        if answer.data.len() != texts.len() {
            return Err(fail(format!(
                "asked for {} vectors, got {}",
                texts.len(),
                answer.data.len()
            )));
        }
        let mut out = vec![Vec::new(); texts.len()];
        for (pos, item) in answer.data.into_iter().enumerate() {
            let i = item.index.unwrap_or(pos);
            if i >= out.len() || !out[i].is_empty() {
                return Err(fail(format!("answer has a bad or repeated index {i}")));
            }
            out[i] = item.embedding;
        }
        let want = *self.dims.get_or_init(|| out[0].len());
        for v in &mut out {
            if v.len() != want || want == 0 {
                return Err(fail(format!(
                    "vector of {} dimensions where {want} were expected",
                    v.len()
                )));
            }
            normalize(v);
        }
        Ok(out)
    }
}

impl Embedder for OpenAiEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dims(&self) -> usize {
        self.dims.get().copied().unwrap_or(0)
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut out = Vec::with_capacity(texts.len());
        for chunk in texts.chunks(BATCH) {
            out.extend(self.request(chunk)?);
        }
        Ok(out)
    }
}
