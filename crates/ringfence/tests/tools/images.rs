//! generate_image with a fake generator: sizes, the size error, where the image is saved,
//! the daily cap, failures giving the slot back, and a read-only workspace.

use std::sync::{Arc, Mutex};

use ringfence_core::tool::BoxFuture;
use ringfence_core::{Content, Limits, ToolErrorKind, Toolbox};
use ringfence_fs::Access;
use ringfence_images::{
    self as images, GeneratedImage, ImageGenerator, ImageRequest, ImageServices, ImageSize,
    MemoryLedger,
};
use ringfence_web::tools::{WebError, WebErrorKind};
use serde_json::json;

use crate::common::Fx;

/// The smallest PNG signature plus a body: enough for the tool's type check.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\nfake image body";

/// Answers every request with `PNG` (or the error it holds) and remembers the requests.
#[derive(Default)]
struct FakeGenerator {
    seen: Mutex<Vec<ImageRequest>>,
    fail: Option<WebError>,
    bytes: Option<Vec<u8>>,
}

impl ImageGenerator for FakeGenerator {
    fn generate(
        &self,
        request: ImageRequest,
    ) -> BoxFuture<'static, Result<GeneratedImage, WebError>> {
        self.seen.lock().unwrap().push(request);
        let result = match &self.fail {
            Some(e) => Err(e.clone()),
            None => Ok(GeneratedImage {
                mime: "image/png".into(),
                data: self.bytes.clone().unwrap_or_else(|| PNG.to_vec()),
                revised_prompt: None,
            }),
        };
        Box::pin(async move { result })
    }
}

fn fixture(access: Access, generator: Arc<FakeGenerator>, daily_limit: u32) -> Fx {
    let mut fx = Fx::with(Limits::default(), &[], access);
    fx.toolbox = Toolbox::of(&[images::family(ImageServices {
        generator,
        daily_limit,
        ledger: Arc::new(MemoryLedger),
    })]);
    fx
}

fn today() -> String {
    jiff::Timestamp::now().strftime("%Y-%m-%d").to_string()
}

#[tokio::test]
async fn the_image_is_returned_inline_and_saved_under_images_and_the_date() {
    let generator = Arc::new(FakeGenerator::default());
    let fx = fixture(Access::ReadWrite, generator.clone(), 10);
    let out = fx
        .call_full(
            "generate_image",
            json!({"description": "A cozy coffee shop with warm lighting", "size": "1536x1024"}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.content[0],
        Content::Image {
            mime: "image/png".into(),
            data: PNG.to_vec()
        }
    );
    let s = out.structured.clone().unwrap();
    assert_eq!(s["saved"], true);
    assert_eq!(s["size"], "1536x1024");
    let path = s["path"].as_str().unwrap();
    let prefix = format!("images/{}/a-cozy-coffee-shop-with-warm-lighting-", today());
    assert!(
        path.starts_with(&prefix) && path.ends_with(".png"),
        "{path}"
    );
    assert_eq!(
        path.len(),
        prefix.len() + 8 + 4,
        "an 8-character id: {path}"
    );
    assert_eq!(fx.read(path), PNG);
    assert!(out.all_text().contains(path), "{}", out.all_text());
    let seen = generator.seen.lock().unwrap();
    assert_eq!(seen[0].size, ImageSize::Landscape);
    assert_eq!(seen[0].prompt, "A cozy coffee shop with warm lighting");
}

#[tokio::test]
async fn every_offered_size_is_passed_and_the_default_is_square() {
    let generator = Arc::new(FakeGenerator::default());
    let fx = fixture(Access::ReadWrite, generator.clone(), 10);
    for size in ["1024x1024", "1536x1024", "1024x1536"] {
        fx.ok(
            "generate_image",
            json!({"description": "a cat", "size": size}),
        )
        .await;
    }
    fx.ok("generate_image", json!({"description": "a cat"}))
        .await;
    let sizes: Vec<&str> = generator
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.size.as_str())
        .collect();
    assert_eq!(sizes, ["1024x1024", "1536x1024", "1024x1536", "1024x1024"]);
    // Two images of the same description never share a file.
    let dir = fx.path(&format!("images/{}", today()));
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 4);
}

#[tokio::test]
async fn a_size_not_offered_is_an_argument_error_listing_the_sizes() {
    let generator = Arc::new(FakeGenerator::default());
    let fx = fixture(Access::ReadWrite, generator.clone(), 10);
    let err = fx
        .err(
            "generate_image",
            json!({"description": "a cat", "size": "512x512"}),
        )
        .await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    assert_eq!(
        err.message,
        "size `512x512` is not offered; use one of 1024x1024, 1536x1024, 1024x1536 (default 1024x1024)"
    );
    let err = fx.err("generate_image", json!({"description": "  "})).await;
    assert!(
        err.message.contains("description is empty"),
        "{}",
        err.message
    );
    let err = fx.err("generate_image", json!({"prompt": "a cat"})).await;
    assert_eq!(err.kind, ToolErrorKind::InvalidArgument);
    assert!(
        generator.seen.lock().unwrap().is_empty(),
        "nothing was asked for"
    );
}

#[tokio::test]
async fn the_daily_cap_stops_the_next_image_and_says_when_it_resets() {
    let generator = Arc::new(FakeGenerator::default());
    let fx = fixture(Access::ReadWrite, generator.clone(), 2);
    fx.ok("generate_image", json!({"description": "one"})).await;
    fx.ok("generate_image", json!({"description": "two"})).await;
    let err = fx
        .err("generate_image", json!({"description": "three"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::Refused);
    assert!(
        err.message.contains("daily image limit reached"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("resets at 00:00 UTC"),
        "{}",
        err.message
    );
    assert_eq!(
        generator.seen.lock().unwrap().len(),
        2,
        "the third was never asked for"
    );
}

#[tokio::test]
async fn a_failed_generation_does_not_count_and_keeps_its_message() {
    let generator = Arc::new(FakeGenerator {
        fail: Some(WebError::new(
            WebErrorKind::Refused,
            "Content policy violation: rejected",
        )),
        ..FakeGenerator::default()
    });
    let fx = fixture(Access::ReadWrite, generator.clone(), 1);
    for _ in 0..3 {
        let err = fx.err("generate_image", json!({"description": "x"})).await;
        assert_eq!(err.kind, ToolErrorKind::Refused);
        assert!(
            err.message.starts_with("Content policy violation"),
            "{}",
            err.message
        );
    }
    assert_eq!(
        generator.seen.lock().unwrap().len(),
        3,
        "failures gave their slot back"
    );
    assert!(!fx.path("images").exists());
}

/// A timeout may come after the API started (and billed) the image: its slot is kept, so
/// timing calls out cannot get around the cap.
#[tokio::test]
async fn a_timed_out_generation_keeps_its_slot() {
    let generator = Arc::new(FakeGenerator {
        fail: Some(WebError::new(
            WebErrorKind::Timeout,
            "timed out after 180 s waiting for the images API",
        )),
        ..FakeGenerator::default()
    });
    let fx = fixture(Access::ReadWrite, generator.clone(), 1);
    let err = fx.err("generate_image", json!({"description": "x"})).await;
    assert_eq!(err.kind, ToolErrorKind::Timeout);
    let err = fx.err("generate_image", json!({"description": "x"})).await;
    assert!(
        err.message.contains("resets at 00:00 UTC"),
        "{}",
        err.message
    );
    assert_eq!(generator.seen.lock().unwrap().len(), 1, "the cap held");
}

#[tokio::test]
async fn a_missing_key_is_reported_as_not_configured() {
    let generator = Arc::new(FakeGenerator {
        fail: Some(WebError::new(
            WebErrorKind::NotConfigured,
            "OpenAI API key not configured: an operator sets OPENAI_API_KEY",
        )),
        ..FakeGenerator::default()
    });
    let fx = fixture(Access::ReadWrite, generator, 5);
    let err = fx.err("generate_image", json!({"description": "x"})).await;
    assert_eq!(err.kind, ToolErrorKind::Disabled);
    assert!(err.message.starts_with("OpenAI API key not configured"));
}

#[tokio::test]
async fn bytes_that_are_not_an_image_are_refused() {
    let generator = Arc::new(FakeGenerator {
        bytes: Some(b"<html>error</html>".to_vec()),
        ..FakeGenerator::default()
    });
    let fx = fixture(Access::ReadWrite, generator, 5);
    let err = fx.err("generate_image", json!({"description": "x"})).await;
    assert_eq!(err.kind, ToolErrorKind::Unavailable);
    assert!(
        err.message.contains("not a PNG, JPEG or WebP"),
        "{}",
        err.message
    );
    assert!(!fx.path("images").exists());
}

#[tokio::test]
async fn a_read_only_workspace_still_gets_the_image_but_says_it_was_not_saved() {
    let generator = Arc::new(FakeGenerator::default());
    let fx = fixture(Access::ReadOnly, generator, 5);
    let out = fx
        .call_full("generate_image", json!({"description": "a lighthouse"}))
        .await
        .unwrap();
    assert!(matches!(out.content[0], Content::Image { .. }));
    let text = out.all_text();
    assert!(text.contains("NOT saved"), "{text}");
    assert!(text.contains("read-only"), "{text}");
    let s = out.structured.unwrap();
    assert_eq!(s["saved"], false);
    assert!(s.get("path").is_none());
    assert!(!fx.path("images").exists());
}

#[tokio::test]
async fn a_zero_limit_turns_the_tool_off() {
    let generator = Arc::new(FakeGenerator::default());
    let fx = fixture(Access::ReadWrite, generator.clone(), 0);
    let err = fx.err("generate_image", json!({"description": "x"})).await;
    assert_eq!(err.kind, ToolErrorKind::Disabled);
    assert!(err.message.contains("daily_limit = 0"), "{}", err.message);
    assert!(generator.seen.lock().unwrap().is_empty());
}

#[tokio::test]
async fn the_schema_offers_the_seed_parameters() {
    let fx = fixture(Access::ReadWrite, Arc::new(FakeGenerator::default()), 1);
    let tool = fx.toolbox.get("generate_image").unwrap();
    let schema = serde_json::Value::Object(tool.input_schema());
    assert_eq!(schema["required"], json!(["description"]));
    assert_eq!(
        schema["properties"]["size"]["enum"],
        json!(["1024x1024", "1536x1024", "1024x1536"])
    );
    assert_eq!(schema["properties"]["size"]["default"], "1024x1024");
    assert_eq!(schema["additionalProperties"], false);
}
