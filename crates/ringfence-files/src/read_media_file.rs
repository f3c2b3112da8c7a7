//! `read_media_file`: an image or audio file as MCP media content.

use std::io::Read;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::media::{self, MediaKind};
use crate::text::thousands;
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::{Annotations, BlockingTool, ToolContext, ToolOutput};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadMediaFileArgs {
    /// Path of the image or audio file (absolute, or relative to workspace root).
    pub path: String,
    /// Downscale images so neither side exceeds this many pixels (default: config, 1,568).
    #[serde(default)]
    pub max_dimension: Option<u32>,
}

pub struct ReadMediaFile;

impl BlockingTool for ReadMediaFile {
    type Args = ReadMediaFileArgs;
    const NAME: &'static str = "read_media_file";
    const FAMILY: &'static str = super::FAMILY;
    const DESCRIPTION: &'static str = "Returns an image (PNG, JPEG, GIF, WebP, BMP) or audio file (WAV, MP3, OGG, FLAC, M4A, AIFF) as media content you can see or hear, with its type detected from the bytes. Images larger than 1,568 pixels on a side or 5 MiB are downscaled to fit; audio above 5 MiB is refused. read_file on an image or audio file does the same.";
    const ANNOTATIONS: Annotations = Annotations {
        title: "Read image or audio",
        read_only: true,
        destructive: false,
        idempotent: true,
        open_world: false,
    };
    fn run(&self, ctx: &ToolContext, args: ReadMediaFileArgs) -> ToolResult<ToolOutput> {
        let target = ctx.session.workspace.resolve(&args.path)?;
        let (file, meta) = target.open_read()?;
        let mut head = Vec::with_capacity(media::SNIFF_BYTES);
        let mut reader = file.into_std();
        (&mut reader)
            .take(media::SNIFF_BYTES as u64)
            .read_to_end(&mut head)
            .map_err(|e| ToolError::new(ToolErrorKind::Io, format!("{}: {e}", args.path)))?;
        let Some(kind) = media::sniff(&head) else {
            return Err(ToolError::new(
                ToolErrorKind::WrongType,
                format!(
                    "{}: not an image or audio file this tool knows (PNG, JPEG, GIF, WebP, BMP, WAV, MP3, OGG, FLAC, M4A, AIFF); use read_file for text",
                    args.path
                ),
            ));
        };
        read_media(
            ctx,
            &target,
            reader,
            head,
            meta.len(),
            kind,
            args.max_dimension,
        )
    }
}

/// Reads the rest of a media file whose first bytes are `head` and returns it as content.
pub(crate) fn read_media(
    ctx: &ToolContext,
    target: &ringfence_fs::Target,
    mut reader: std::fs::File,
    head: Vec<u8>,
    len: u64,
    kind: MediaKind,
    max_dimension: Option<u32>,
) -> ToolResult<ToolOutput> {
    // Images may be downscaled, so read up to a generous bound; audio must fit as it is.
    let hard_cap = match kind {
        MediaKind::Image(_) => 256 * 1024 * 1024,
        MediaKind::Audio(_) => ctx.limits.max_media_bytes,
    };
    if len > hard_cap {
        return Err(ToolError::new(
            ToolErrorKind::TooLarge,
            format!(
                "{}: the file is {} bytes, above the {}-byte limit for media content",
                target.input(),
                thousands(len),
                thousands(hard_cap)
            ),
        ));
    }
    let mut bytes = head;
    (&mut reader)
        .take(hard_cap)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(ToolErrorKind::Io, format!("{}: {e}", target.input())))?;
    ctx.check_cancelled()?;
    let content = media::to_content(
        &target.absolute().display().to_string(),
        kind,
        bytes,
        ctx.limits.max_media_bytes,
        max_dimension.unwrap_or(ctx.limits.max_image_dimension),
    )?;
    Ok(ToolOutput::blocks(content).with_structured(json!({
        "path": target.absolute().display().to_string(),
        "mime": kind.mime(),
    })))
}
