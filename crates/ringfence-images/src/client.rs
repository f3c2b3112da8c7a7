//! The images API client behind `generate_image`: the OpenAI Images API
//! (`POST {base_url}/images/generations`, `gpt-image-1` by default) or any endpoint that
//! speaks it.
//!
//! The image comes back base64-encoded in `data[0].b64_json`. An endpoint that answers with
//! a `url` instead is refused with a message saying so: fetching an address taken from a
//! response would be a request the operator never configured, and it would have to pass
//! the SSRF guard; asking the endpoint for `b64_json` is the fix. The moderation refusal
//! (HTTP 400 with code `moderation_blocked` or `content_policy_violation`) is reported as
//! "Content policy violation", and a missing key as "OpenAI API key not configured", as seed
//! 003 names them.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::{GeneratedImage, ImageGenerator, ImageRequest};
use base64::Engine;
use reqwest::StatusCode;
use ringfence_core::BoxFuture;
use ringfence_net::{WebError, WebErrorKind};
use serde::Deserialize;
use serde_json::json;

pub use ringfence_net::RetryPolicy;
use ringfence_net::api_message;
use ringfence_net::service::{Service as Api, SetupError};

/// The OpenAI API's base URL.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";
/// The model asked for unless configured otherwise.
pub const DEFAULT_MODEL: &str = "gpt-image-1";
/// Where the key is read from unless configured otherwise.
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";

/// How to reach the images API. `Debug` never shows the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ImagesConfig {
    /// The API's base URL (`…/v1`), without `/images/generations`.
    pub base_url: String,
    pub model: String,
    /// Required for the OpenAI API; a compatible endpoint elsewhere may need none.
    pub api_key: Option<String>,
    /// Where the key came from or should be put (`OPENAI_API_KEY`), for messages.
    pub api_key_source: String,
    /// The whole-request timeout (images take a while: default 180 s).
    pub timeout: Duration,
    pub retry: RetryPolicy,
}

impl Default for ImagesConfig {
    fn default() -> ImagesConfig {
        ImagesConfig {
            base_url: OPENAI_BASE_URL.to_owned(),
            model: DEFAULT_MODEL.to_owned(),
            api_key: None,
            api_key_source: OPENAI_API_KEY.to_owned(),
            timeout: Duration::from_secs(180),
            retry: RetryPolicy {
                retries: 2,
                backoff: Duration::from_secs(2),
                max_wait: Duration::from_secs(20),
            },
        }
    }
}

impl fmt::Debug for ImagesConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImagesConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("api_key_source", &self.api_key_source)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

/// The generator `config` describes. Fails only when the base URL is not an http(s) URL;
/// a missing key is reported by each call (so the tool is listed and says how to fix it).
pub fn generator(config: ImagesConfig) -> Result<Arc<dyn ImageGenerator>, SetupError> {
    let base = config.base_url.trim().trim_end_matches('/');
    let endpoint = url::Url::parse(&format!("{base}/images/generations"))
        .map_err(|e| SetupError::Url(format!("images base URL `{base}` is not a URL: {e}")))?;
    if !matches!(endpoint.scheme(), "http" | "https") {
        return Err(SetupError::Url(format!(
            "images base URL `{base}` must start with http:// or https://"
        )));
    }
    let needs_key = base == OPENAI_BASE_URL;
    let api = Api::new(
        "the images API",
        config.timeout,
        config.retry,
        config.api_key,
        config.api_key_source,
    )?;
    Ok(Arc::new(OpenAiImages {
        inner: Arc::new(Inner {
            api,
            endpoint,
            model: config.model,
            needs_key,
        }),
    }))
}

struct Inner {
    api: Api,
    endpoint: url::Url,
    model: String,
    needs_key: bool,
}

struct OpenAiImages {
    inner: Arc<Inner>,
}

impl ImageGenerator for OpenAiImages {
    fn generate(
        &self,
        request: ImageRequest,
    ) -> BoxFuture<'static, Result<GeneratedImage, WebError>> {
        let inner = self.inner.clone();
        Box::pin(async move { inner.generate(request).await })
    }
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    b64_json: Option<String>,
    url: Option<String>,
    revised_prompt: Option<String>,
}

impl Inner {
    async fn generate(&self, request: ImageRequest) -> Result<GeneratedImage, WebError> {
        let api = &self.api;
        let key = match (api.key_if_any(), self.needs_key) {
            (Some(k), _) => Some(k),
            (None, false) => None,
            (None, true) => {
                return Err(WebError::new(
                    WebErrorKind::NotConfigured,
                    format!(
                        "OpenAI API key not configured: an operator sets {} in the server's environment (or names another variable with [images] api_key_env)",
                        api.key_source
                    ),
                ));
            }
        };
        let mut body = json!({
            "model": self.model,
            "prompt": request.prompt,
            "size": request.size.as_str(),
            "n": 1,
        });
        // DALL·E models answer with a URL unless asked; GPT Image models always send the
        // image and refuse the parameter.
        if self.model.starts_with("dall-e") {
            body["response_format"] = json!("b64_json");
        }
        let body = body.to_string();
        let reply = api
            .send(|| {
                let r = api
                    .client
                    .post(self.endpoint.clone())
                    .header("Content-Type", "application/json")
                    .body(body.clone());
                match key {
                    Some(k) => r.bearer_auth(k),
                    None => r,
                }
            })
            .await?;
        if reply.status == StatusCode::BAD_REQUEST
            && let Some(why) = moderation_refusal(&reply.body)
        {
            return Err(WebError::new(
                WebErrorKind::Refused,
                format!(
                    "Content policy violation: the images API's safety system rejected the description ({}); describe the image differently",
                    api.scrub(&why)
                ),
            ));
        }
        api.check(&reply)?;
        let response: Response = api.json(&reply)?;
        let Some(item) = response.data.into_iter().next() else {
            return Err(WebError::new(
                WebErrorKind::Upstream,
                "the images API answered without an image (empty `data`); try again",
            ));
        };
        let Some(b64) = item.b64_json else {
            let why = if item.url.is_some() {
                "a URL instead of the image; an operator configures the endpoint to return b64_json (ringfence does not fetch image URLs from responses)"
            } else {
                "neither b64_json nor a URL"
            };
            return Err(WebError::new(
                WebErrorKind::Upstream,
                format!("the images API answered with {why}"),
            ));
        };
        let data = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .map_err(|e| {
                WebError::new(
                    WebErrorKind::Upstream,
                    format!(
                        "the images API sent an image that is not valid base64 ({e}); try again"
                    ),
                )
            })?;
        Ok(GeneratedImage {
            mime: "image/png".to_owned(),
            data,
            revised_prompt: item.revised_prompt.filter(|p| !p.trim().is_empty()),
        })
    }
}

/// The API's message when a 400 is its moderation refusal (`error.code` is
/// `moderation_blocked` or `content_policy_violation`).
fn moderation_refusal(body: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(body).ok()?;
    let code = v.get("error")?.get("code")?.as_str()?;
    matches!(code, "moderation_blocked" | "content_policy_violation")
        .then(|| api_message(&v).unwrap_or_else(|| code.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moderation_refusals_are_recognised_by_their_code() {
        let body = br#"{"error":{"message":"Your request was rejected by the safety system.","type":"image_generation_user_error","code":"moderation_blocked"}}"#;
        assert_eq!(
            moderation_refusal(body).as_deref(),
            Some("Your request was rejected by the safety system.")
        );
        assert!(
            moderation_refusal(br#"{"error":{"message":"bad size","code":"invalid_value"}}"#)
                .is_none()
        );
        assert!(moderation_refusal(b"nope").is_none());
    }

    #[test]
    fn debug_never_shows_the_key() {
        let c = ImagesConfig {
            api_key: Some("sk-hidden".into()),
            ..ImagesConfig::default()
        };
        assert!(!format!("{c:?}").contains("sk-hidden"));
    }
}
