//! Images and audio as MCP media content: the type sniffed from the bytes (never trusted
//! from the name), a size cap, and downscaling of very large images when built with the
//! `image-resize` feature.

use crate::text::thousands;
use ringfence_core::error::{ToolError, ToolErrorKind, ToolResult};
use ringfence_core::tool::Content;

/// What kind of media the first bytes say a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    Image(&'static str),
    Audio(&'static str),
}

impl MediaKind {
    pub fn mime(self) -> &'static str {
        match self {
            MediaKind::Image(m) | MediaKind::Audio(m) => m,
        }
    }
}

/// Bytes [`sniff`] needs at most.
pub const SNIFF_BYTES: usize = 18;

/// The media type of a file from its first bytes, or `None` if it is not a known image or
/// audio format.
pub fn sniff(head: &[u8]) -> Option<MediaKind> {
    use MediaKind::{Audio, Image};
    let at = |i: usize, sig: &[u8]| head.get(i..i + sig.len()) == Some(sig);
    if at(0, b"\x89PNG\r\n\x1a\n") {
        Some(Image("image/png"))
    } else if at(0, b"\xff\xd8\xff") {
        Some(Image("image/jpeg"))
    } else if at(0, b"GIF87a") || at(0, b"GIF89a") {
        Some(Image("image/gif"))
    } else if at(0, b"RIFF") && at(8, b"WEBP") {
        Some(Image("image/webp"))
    } else if at(0, b"BM") && is_bmp_header(head) {
        Some(Image("image/bmp"))
    } else if at(0, b"RIFF") && at(8, b"WAVE") {
        Some(Audio("audio/wav"))
    } else if at(0, b"ID3") || (head.len() >= 2 && head[0] == 0xFF && head[1] & 0xE6 == 0xE2) {
        // An ID3 tag, or an MPEG audio frame header (layer III).
        Some(Audio("audio/mpeg"))
    } else if at(0, b"OggS") {
        Some(Audio("audio/ogg"))
    } else if at(0, b"fLaC") {
        Some(Audio("audio/flac"))
    } else if at(4, b"ftypM4A") {
        Some(Audio("audio/mp4"))
    } else if at(0, b"FORM") && at(8, b"AIFF") {
        Some(Audio("audio/aiff"))
    } else {
        None
    }
}

/// A BMP file header: reserved fields zero and a known DIB header size (so a text file that
/// happens to start with `BM` stays text).
fn is_bmp_header(head: &[u8]) -> bool {
    let u32_at = |i: usize| {
        head.get(i..i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    head.get(6..10) == Some(&[0, 0, 0, 0][..])
        && matches!(u32_at(14), Some(12 | 40 | 52 | 56 | 64 | 108 | 124))
}

/// Turns a media file's bytes into content blocks: the media itself and a line describing
/// it. Images over the caps are downscaled (with `image-resize`) or refused.
pub fn to_content(
    display: &str,
    kind: MediaKind,
    bytes: Vec<u8>,
    max_bytes: u64,
    max_dimension: u32,
) -> ToolResult<Vec<Content>> {
    match kind {
        MediaKind::Audio(mime) => {
            if bytes.len() as u64 > max_bytes {
                return Err(too_large(display, bytes.len(), max_bytes, "audio"));
            }
            let line = format!(
                "{display}: {mime}, {} bytes.",
                thousands(bytes.len() as u64)
            );
            Ok(vec![
                Content::Text(line),
                Content::Audio {
                    mime: mime.to_owned(),
                    data: bytes,
                },
            ])
        }
        MediaKind::Image(mime) => {
            let (mime, data, note) = fit_image(display, mime, bytes, max_bytes, max_dimension)?;
            let line = format!(
                "{display}: {mime}, {} bytes{note}.",
                thousands(data.len() as u64)
            );
            Ok(vec![
                Content::Text(line),
                Content::Image {
                    mime: mime.to_owned(),
                    data,
                },
            ])
        }
    }
}

fn too_large(display: &str, len: usize, max: u64, what: &str) -> ToolError {
    ToolError::new(
        ToolErrorKind::TooLarge,
        format!(
            "{display}: the {what} is {} bytes, above the {}-byte limit for media content",
            thousands(len as u64),
            thousands(max)
        ),
    )
}

#[cfg(not(feature = "image-resize"))]
fn fit_image(
    display: &str,
    mime: &'static str,
    bytes: Vec<u8>,
    max_bytes: u64,
    _max_dimension: u32,
) -> ToolResult<(&'static str, Vec<u8>, String)> {
    if bytes.len() as u64 > max_bytes {
        let mut err = too_large(display, bytes.len(), max_bytes, "image");
        err.message
            .push_str(" (this build cannot downscale images: it lacks the image-resize feature)");
        return Err(err);
    }
    Ok((mime, bytes, String::new()))
}

#[cfg(feature = "image-resize")]
fn fit_image(
    display: &str,
    mime: &'static str,
    bytes: Vec<u8>,
    max_bytes: u64,
    max_dimension: u32,
) -> ToolResult<(&'static str, Vec<u8>, String)> {
    use image::{GenericImageView, ImageFormat, ImageReader};
    let format = match mime {
        "image/png" => ImageFormat::Png,
        "image/jpeg" => ImageFormat::Jpeg,
        "image/gif" => ImageFormat::Gif,
        "image/webp" => ImageFormat::WebP,
        // Formats without a codec here are passed through when they fit.
        _ => {
            if bytes.len() as u64 > max_bytes {
                return Err(too_large(display, bytes.len(), max_bytes, "image"));
            }
            return Ok((mime, bytes, String::new()));
        }
    };
    let mut reader = ImageReader::with_format(std::io::Cursor::new(&bytes), format);
    // Decoding is bounded: a small file claiming enormous dimensions is refused, not
    // allocated.
    reader.limits(limits_for_decode());
    let (w, h) = match reader.into_dimensions() {
        Ok(d) => d,
        Err(e) => {
            return Err(ToolError::new(
                ToolErrorKind::Binary,
                format!("{display}: looks like {mime} but cannot be decoded: {e}"),
            ));
        }
    };
    let too_big = bytes.len() as u64 > max_bytes;
    let too_wide = max_dimension > 0 && (w > max_dimension || h > max_dimension);
    if !too_big && !too_wide {
        return Ok((mime, bytes, format!(", {w}×{h}")));
    }
    let mut reader = ImageReader::with_format(std::io::Cursor::new(&bytes), format);
    reader.limits(limits_for_decode());
    let img = reader.decode().map_err(|e| {
        ToolError::new(
            ToolErrorKind::TooLarge,
            format!("{display}: the {w}×{h} image could not be decoded for downscaling: {e}"),
        )
    })?;
    let mut side = if max_dimension > 0 {
        max_dimension.min(w.max(h))
    } else {
        w.max(h)
    };
    // Photos compress better as JPEG; keep PNG for images with transparency.
    let keep_png = img.color().has_alpha();
    loop {
        let small = img.resize(side, side, image::imageops::FilterType::Triangle);
        let mut out = std::io::Cursor::new(Vec::new());
        let (fmt, out_mime) = if keep_png {
            (ImageFormat::Png, "image/png")
        } else {
            (ImageFormat::Jpeg, "image/jpeg")
        };
        let written = if keep_png {
            small.write_to(&mut out, fmt)
        } else {
            small.to_rgb8().write_to(&mut out, fmt)
        };
        written.map_err(|e| {
            ToolError::new(
                ToolErrorKind::Io,
                format!("{display}: re-encoding the downscaled image failed: {e}"),
            )
        })?;
        let data = out.into_inner();
        let (nw, nh) = small.dimensions();
        if data.len() as u64 <= max_bytes || side <= 64 {
            if data.len() as u64 > max_bytes {
                return Err(too_large(
                    display,
                    data.len(),
                    max_bytes,
                    "downscaled image",
                ));
            }
            return Ok((
                out_mime,
                data,
                format!(
                    ", downscaled from {w}×{h} ({} bytes) to {nw}×{nh}",
                    thousands(bytes.len() as u64)
                ),
            ));
        }
        side = side * 3 / 4;
    }
}

#[cfg(feature = "image-resize")]
fn limits_for_decode() -> image::Limits {
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(512 * 1024 * 1024);
    limits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_by_content() {
        assert_eq!(
            sniff(b"\x89PNG\r\n\x1a\n\0\0"),
            Some(MediaKind::Image("image/png"))
        );
        assert_eq!(
            sniff(b"\xff\xd8\xff\xe0"),
            Some(MediaKind::Image("image/jpeg"))
        );
        assert_eq!(sniff(b"GIF89a.."), Some(MediaKind::Image("image/gif")));
        assert_eq!(
            sniff(b"RIFF\0\0\0\0WEBPVP8 "),
            Some(MediaKind::Image("image/webp"))
        );
        assert_eq!(
            sniff(b"RIFF\0\0\0\0WAVEfmt "),
            Some(MediaKind::Audio("audio/wav"))
        );
        assert_eq!(sniff(b"ID3\x04\0"), Some(MediaKind::Audio("audio/mpeg")));
        assert_eq!(
            sniff(b"\xff\xfb\x90\x64"),
            Some(MediaKind::Audio("audio/mpeg"))
        );
        assert_eq!(sniff(b"OggS\0\x02"), Some(MediaKind::Audio("audio/ogg")));
        assert_eq!(
            sniff(b"fLaC\0\0\0\x22"),
            Some(MediaKind::Audio("audio/flac"))
        );
        assert_eq!(
            sniff(b"\0\0\0\x20ftypM4A "),
            Some(MediaKind::Audio("audio/mp4"))
        );
        assert_eq!(sniff(b"plain text here"), None);
        assert_eq!(sniff(b"BMW and Audi are car makers\n"), None);
        let mut bmp = b"BM\x36\0\0\0\0\0\0\0\x36\0\0\0\x28\0\0\0".to_vec();
        bmp.resize(18, 0);
        assert_eq!(sniff(&bmp), Some(MediaKind::Image("image/bmp")));
        assert_eq!(sniff(b"\x89PN"), None);
        // UTF-16 text with a BOM is not mistaken for MPEG audio.
        assert_eq!(sniff(b"\xff\xfeh\0i\0"), None);
    }
}
