//! The images API client against a local fake of the OpenAI Images API: the request as
//! documented, the image decoded, the moderation refusal, rate limits retried and bounded,
//! a timeout, a missing key, and an endpoint answering with a URL.

use std::time::Duration;

use base64::Engine;
use ringfence_images::client::{ImagesConfig, RetryPolicy, generator};
use ringfence_images::{GeneratedImage, ImageRequest, ImageSize};
use ringfence_net::fake_api::{FakeApi, Reply};
use ringfence_net::{WebError, WebErrorKind};
use serde_json::json;

const KEY: &str = "sk-test-91b2c3";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n fake pixels";

fn config(url: &str) -> ImagesConfig {
    ImagesConfig {
        base_url: format!("{url}/v1"),
        api_key: Some(KEY.into()),
        timeout: Duration::from_secs(5),
        retry: RetryPolicy {
            retries: 2,
            backoff: Duration::from_millis(20),
            max_wait: Duration::from_secs(2),
        },
        ..ImagesConfig::default()
    }
}

fn request() -> ImageRequest {
    ImageRequest {
        prompt: "a lighthouse at dusk".into(),
        size: ImageSize::Landscape,
        user: "alice".into(),
    }
}

/// One image asked of `fake` with the test configuration.
async fn ask(fake: &FakeApi) -> Result<GeneratedImage, WebError> {
    generator(config(&fake.url))
        .unwrap()
        .generate(request())
        .await
}

fn success() -> serde_json::Value {
    json!({
        "created": 1_713_833_628,
        "data": [{"b64_json": base64::engine::general_purpose::STANDARD.encode(PNG), "revised_prompt": "A lighthouse at dusk, oil painting"}],
        "usage": {"total_tokens": 100, "input_tokens": 50, "output_tokens": 50}
    })
}

#[tokio::test]
async fn an_image_is_asked_for_as_documented_and_decoded() {
    let fake = FakeApi::start(|_, _| Reply::json(200, success())).await;
    let image = ask(&fake).await.unwrap();
    assert_eq!(image.data, PNG);
    assert_eq!(image.mime, "image/png");
    assert_eq!(
        image.revised_prompt.as_deref(),
        Some("A lighthouse at dusk, oil painting")
    );
    let seen = fake.requests();
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.target, "/v1/images/generations");
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {KEY}").as_str())
    );
    let body = r.json();
    assert_eq!(body["model"], "gpt-image-1");
    assert_eq!(body["prompt"], "a lighthouse at dusk");
    assert_eq!(body["size"], "1536x1024");
    assert_eq!(body["n"], 1);
    assert!(
        body.get("response_format").is_none(),
        "gpt-image-1 refuses it"
    );
}

#[tokio::test]
async fn the_moderation_refusal_is_a_content_policy_violation() {
    for code in ["moderation_blocked", "content_policy_violation"] {
        let fake = FakeApi::start(move |_, _| {
            Reply::json(
                400,
                json!({"error": {"message": "Your request was rejected by the safety system.", "type": "image_generation_user_error", "param": null, "code": code}}),
            )
        })
        .await;
        let err = ask(&fake).await.unwrap_err();
        assert_eq!(err.kind, WebErrorKind::Refused, "{code}");
        assert!(
            err.message.starts_with("Content policy violation"),
            "{}",
            err.message
        );
        assert!(
            err.message.contains("rejected by the safety system"),
            "{}",
            err.message
        );
        assert_eq!(fake.requests().len(), 1, "a refusal is not retried");
    }
}

#[tokio::test]
async fn another_bad_request_quotes_the_api() {
    let fake = FakeApi::start(|_, _| {
        Reply::json(
            400,
            json!({"error": {"message": "Invalid value for size", "code": "invalid_value"}}),
        )
    })
    .await;
    let err = ask(&fake).await.unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Upstream);
    assert_eq!(
        err.message,
        "the images API answered HTTP 400: \"Invalid value for size\""
    );
}

#[tokio::test]
async fn a_rate_limit_is_retried_then_succeeds() {
    let fake = FakeApi::start(|_, i| {
        if i < 2 {
            Reply::json(
                429,
                json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}),
            )
            .with_header("retry-after", "0.05")
        } else {
            Reply::json(200, success())
        }
    })
    .await;
    let image = ask(&fake).await.unwrap();
    assert_eq!(image.data, PNG);
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn a_lasting_rate_limit_gives_up_clearly() {
    let fake = FakeApi::start(|_, _| {
        Reply::json(429, json!({"error": {"message": "Rate limit reached"}}))
    })
    .await;
    let err = ask(&fake).await.unwrap_err();
    assert_eq!(fake.requests().len(), 3);
    assert!(
        err.message
            .starts_with("rate limited: the images API answered HTTP 429"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_slow_api_times_out() {
    let fake =
        FakeApi::start(|_, _| Reply::json(200, success()).after(Duration::from_secs(3))).await;
    let mut c = config(&fake.url);
    c.timeout = Duration::from_millis(300);
    let err = generator(c).unwrap().generate(request()).await.unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Timeout);
    assert!(
        err.message.contains("did not answer within"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn without_a_key_the_openai_api_is_not_called() {
    // The default: the OpenAI API, no key.
    let err = generator(ImagesConfig::default())
        .unwrap()
        .generate(request())
        .await
        .unwrap_err();
    assert_eq!(err.kind, WebErrorKind::NotConfigured);
    assert!(
        err.message.starts_with("OpenAI API key not configured"),
        "{}",
        err.message
    );
    assert!(err.message.contains("OPENAI_API_KEY"), "{}", err.message);
}

#[tokio::test]
async fn a_compatible_endpoint_may_go_without_a_key() {
    let fake = FakeApi::start(|_, _| Reply::json(200, success())).await;
    let mut c = config(&fake.url);
    c.api_key = None;
    generator(c).unwrap().generate(request()).await.unwrap();
    assert_eq!(fake.requests()[0].header("authorization"), None);
}

#[tokio::test]
async fn a_refused_key_names_its_variable_not_its_value() {
    let fake = FakeApi::start(|_, _| {
        Reply::json(401, json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "code": "invalid_api_key"}}))
    })
    .await;
    let err = ask(&fake).await.unwrap_err();
    assert_eq!(err.kind, WebErrorKind::NotConfigured);
    assert!(err.message.contains("OPENAI_API_KEY"), "{}", err.message);
    assert!(!err.message.contains(KEY), "{}", err.message);
}

#[tokio::test]
async fn an_image_url_instead_of_the_image_is_refused_without_fetching_it() {
    let fake = FakeApi::start(|_, _| {
        Reply::json(
            200,
            json!({"created": 1, "data": [{"url": "http://169.254.169.254/latest/meta-data/"}]}),
        )
    })
    .await;
    let err = ask(&fake).await.unwrap_err();
    assert!(
        err.message.contains("a URL instead of the image"),
        "{}",
        err.message
    );
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn dall_e_models_are_asked_for_base64() {
    let fake = FakeApi::start(|_, _| Reply::json(200, success())).await;
    let mut c = config(&fake.url);
    c.model = "dall-e-3".into();
    generator(c).unwrap().generate(request()).await.unwrap();
    assert_eq!(fake.requests()[0].json()["response_format"], "b64_json");
}

#[tokio::test]
async fn malformed_json_and_bad_base64_are_upstream_errors() {
    let fake = FakeApi::start(|_, i| {
        if i == 0 {
            Reply::text(200, "<html>gateway</html>")
        } else {
            Reply::json(200, json!({"data": [{"b64_json": "%%%not base64"}]}))
        }
    })
    .await;
    let g = generator(config(&fake.url)).unwrap();
    let err = g.generate(request()).await.unwrap_err();
    assert_eq!(err.kind, WebErrorKind::Upstream);
    assert!(
        err.message.contains("not its documented JSON"),
        "{}",
        err.message
    );
    let err = g.generate(request()).await.unwrap_err();
    assert!(err.message.contains("not valid base64"), "{}", err.message);
}
