//! `generate_image` (seed 003): an image from a description, saved in the workspace and
//! returned inline.

use std::sync::Arc;

use jiff::Timestamp;
use ringfence_fs::{TargetState, WriteOptions};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::cap::{DailyCap, day_of};
use super::{GeneratedImage, ImageGenerator, ImageRequest, ImageSize};
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, AsyncTool, BoxFuture, Content, ToolContext, ToolOutput};
use ringfence_net::{WebError, WebErrorKind};

/// The workspace folder images are saved under.
pub const IMAGES_DIR: &str = "images";
/// The longest description accepted, in characters (the OpenAI Images API's own limit
/// for gpt-image-1).
pub const MAX_DESCRIPTION_CHARS: usize = 32_000;
/// The longest slug in a file name, in bytes.
const SLUG_MAX: usize = 40;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GenerateImageArgs {
    /// Detailed image description.
    pub description: String,
    /// 1024x1024, 1536x1024, or 1024x1536 (default: 1024x1024).
    #[schemars(extend("enum" = ["1024x1024", "1536x1024", "1024x1536"], "default" = "1024x1024"))]
    pub size: Option<String>,
}

pub struct GenerateImage {
    pub(crate) generator: Arc<dyn ImageGenerator>,
    pub(crate) cap: Arc<DailyCap>,
}

const DESCRIPTION: &str = "Generate an image from a text description using OpenAI's GPT Image model. Give a detailed description (subject, setting, style, lighting, composition). size: 1024x1024 (default, square), 1536x1024 (landscape) or 1024x1536 (portrait). Returns the image inline plus the path where it was saved in the workspace (images/YYYY-MM-DD/…png).";

impl AsyncTool for GenerateImage {
    type Args = GenerateImageArgs;
    const NAME: &'static str = "generate_image";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = DESCRIPTION;
    const ANNOTATIONS: Annotations = Annotations {
        title: "Generate image",
        read_only: false,
        destructive: false,
        idempotent: false,
        open_world: true,
    };

    fn run(
        self: Arc<Self>,
        ctx: ToolContext,
        args: GenerateImageArgs,
    ) -> BoxFuture<'static, ToolResult<ToolOutput>> {
        Box::pin(async move {
            let prompt = args.description.trim().to_owned();
            if prompt.is_empty() {
                return Err(ToolError::invalid(
                    "description is empty: describe the image to make (subject, setting, style)",
                ));
            }
            if prompt.chars().count() > MAX_DESCRIPTION_CHARS {
                return Err(ToolError::invalid(format!(
                    "description is longer than {MAX_DESCRIPTION_CHARS} characters; shorten it"
                )));
            }
            let size = match args.size.as_deref() {
                None => ImageSize::Square,
                Some(s) => ImageSize::parse(s).ok_or_else(|| {
                    let sizes: Vec<&str> = ImageSize::ALL.iter().map(|s| s.as_str()).collect();
                    ToolError::invalid(format!(
                        "size `{s}` is not offered; use one of {} (default 1024x1024)",
                        sizes.join(", ")
                    ))
                })?,
            };
            let user = ctx.session.user().to_owned();
            let now = Timestamp::now();
            self.cap.take(&user, now)?;
            let request = ImageRequest {
                prompt: prompt.clone(),
                size,
                user: user.clone(),
            };
            // A slot is given back only when nothing can have been made and billed: the
            // request was refused before any work (no or a refused key, a moderation refusal,
            // a rate limit that never cleared, a bad request). A cancelled call, a timeout or a
            // failure after the request went out keeps it: the image may still be made.
            let made = tokio::select! {
                made = self.generator.generate(request) => made,
                _ = ctx.cancel.cancelled() => return Err(ToolError::cancelled()),
            };
            let made = made.inspect_err(|e| {
                if not_billed(e) {
                    self.cap.give_back(&user, now);
                }
            });
            let image = made.map_err(ToolError::from).and_then(checked)?;
            let day = day_of(now);
            let saved = ctx
                .blocking({
                    let (data, ext, slug) =
                        (image.data.clone(), extension(&image.mime), slug(&prompt));
                    move |ctx| save(&ctx, &day, &slug, ext, &data)
                })
                .await;
            Ok(output(&image, size, saved))
        })
    }
}

/// Whether a failed generation certainly made nothing (see the caller).
fn not_billed(e: &WebError) -> bool {
    match e.kind {
        WebErrorKind::NotConfigured | WebErrorKind::Refused | WebErrorKind::Invalid => true,
        WebErrorKind::Upstream => e.message.starts_with("rate limited"),
        WebErrorKind::Timeout | WebErrorKind::Unsupported => false,
    }
}

/// The image, if its bytes are one of the types the tool returns (the declared type is
/// replaced by what the bytes are).
fn checked(mut image: GeneratedImage) -> ToolResult<GeneratedImage> {
    let sniffed = sniff(&image.data).ok_or_else(|| {
        ToolError::new(
            ToolErrorKind::Unavailable,
            format!(
                "the images API returned {} bytes that are not a PNG, JPEG or WebP image; try again, or an operator checks [images] base_url",
                image.data.len()
            ),
        )
    })?;
    image.mime = sniffed.to_owned();
    Ok(image)
}

/// The image type of `data` by its signature.
fn sniff(data: &[u8]) -> Option<&'static str> {
    if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if data.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if data.len() >= 12 && &data[..4] == b"RIFF" && &data[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

fn extension(mime: &str) -> &'static str {
    match mime {
        "image/jpeg" => "jpg",
        "image/webp" => "webp",
        _ => "png",
    }
}

/// Where an image was saved: its workspace-relative and absolute paths.
struct Saved {
    path: String,
    absolute: String,
}

/// Saves `data` as `images/<day>/<slug>-<id>.<ext>` in the current workspace, never over an
/// existing file.
fn save(ctx: &ToolContext, day: &str, slug: &str, ext: &str, data: &[u8]) -> ToolResult<Saved> {
    for _ in 0..4 {
        let id = &uuid::Uuid::new_v4().simple().to_string()[..8];
        let path = format!("{IMAGES_DIR}/{day}/{slug}-{id}.{ext}");
        let target = ctx.session.workspace.resolve(&path)?;
        target.require_writable()?;
        if target.state() != TargetState::Missing {
            continue;
        }
        target.write_atomic(
            data,
            &WriteOptions {
                create_parents: true,
                ..WriteOptions::default()
            },
        )?;
        return Ok(Saved {
            path: target.display().to_string(),
            absolute: target.absolute().display().to_string(),
        });
    }
    Err(ToolError::new(
        ToolErrorKind::AlreadyExists,
        "could not find a free file name under images/; try again",
    ))
}

/// The result: the image, then a line saying where it was saved (or why it was not: the
/// image is returned all the same, since it was made and counted).
fn output(image: &GeneratedImage, size: ImageSize, saved: ToolResult<Saved>) -> ToolOutput {
    let kb = image.data.len().div_ceil(1024);
    let (text, structured) = match &saved {
        Ok(s) => (
            format!(
                "Generated a {} image ({kb} KB), saved to {} ({}).",
                size.as_str(),
                s.path,
                s.absolute
            ),
            json!({"saved": true, "path": s.path, "absolute_path": s.absolute}),
        ),
        Err(e) => (
            format!(
                "Generated a {} image ({kb} KB), shown here but NOT saved: {}",
                size.as_str(),
                e.message
            ),
            json!({"saved": false, "save_error": e.message}),
        ),
    };
    let mut structured = structured;
    structured["size"] = json!(size.as_str());
    structured["mime"] = json!(image.mime);
    structured["bytes"] = json!(image.data.len());
    let mut text = text;
    if let Some(revised) = &image.revised_prompt {
        text.push_str(&format!(
            "\nThe provider revised the description to: {revised}"
        ));
        structured["revised_prompt"] = json!(revised);
    }
    ToolOutput::blocks(vec![
        Content::Image {
            mime: image.mime.clone(),
            data: image.data.clone(),
        },
        Content::Text(text),
    ])
    .with_structured(structured)
}

/// A short, safe file-name stem from a description: its first words, lower-case ASCII
/// letters and digits joined by `-`, at most 40 bytes, cut between words (`image` when
/// nothing is left).
pub fn slug(description: &str) -> String {
    let mut out = String::new();
    for word in description
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_ascii_lowercase();
        let extra = if out.is_empty() {
            word.len()
        } else {
            word.len() + 1
        };
        if out.len() + extra > SLUG_MAX {
            if out.is_empty() {
                out.push_str(&word[..SLUG_MAX]);
            }
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word);
    }
    if out.is_empty() {
        "image".to_owned()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_short_ascii_and_safe() {
        assert_eq!(
            slug("A cozy coffee shop with warm lighting, wooden tables, plants on windowsills"),
            "a-cozy-coffee-shop-with-warm-lighting"
        );
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("日本の庭園"), "image");
        assert_eq!(slug("Café  Zürich!"), "caf-z-rich");
        assert_eq!(slug(&"x".repeat(100)).len(), SLUG_MAX);
    }

    #[test]
    fn image_types_are_known_by_their_bytes() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(sniff(&[0xff, 0xd8, 0xff, 0xe0]), Some("image/jpeg"));
        assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"<html>"), None);
    }
}
