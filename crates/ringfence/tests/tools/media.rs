//! Images and audio come back as media content, typed by their bytes, capped, and (with the
//! default `image-resize` feature) downscaled when very large.

use crate::common::Fx;
use ringfence_core::{Content, Limits, ToolErrorKind};
use ringfence_fs::Access;
use serde_json::json;

fn png(w: u32, h: u32) -> Vec<u8> {
    // A gradient with noise, so it does not compress to nothing.
    let img = image::RgbImage::from_fn(w, h, |x, y| {
        let n = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)) as u8;
        image::Rgb([(x % 256) as u8, (y % 256) as u8, n])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png).unwrap();
    out.into_inner()
}

fn wav(samples: usize) -> Vec<u8> {
    let data_len = (samples * 2) as u32;
    let mut v = Vec::new();
    v.extend_from_slice(b"RIFF");
    v.extend_from_slice(&(36 + data_len).to_le_bytes());
    v.extend_from_slice(b"WAVEfmt ");
    v.extend_from_slice(&16u32.to_le_bytes());
    v.extend_from_slice(&1u16.to_le_bytes()); // PCM
    v.extend_from_slice(&1u16.to_le_bytes()); // mono
    v.extend_from_slice(&8000u32.to_le_bytes());
    v.extend_from_slice(&16000u32.to_le_bytes());
    v.extend_from_slice(&2u16.to_le_bytes());
    v.extend_from_slice(&16u16.to_le_bytes());
    v.extend_from_slice(b"data");
    v.extend_from_slice(&data_len.to_le_bytes());
    v.resize(v.len() + samples * 2, 0x11);
    v
}

fn media_block(content: &[Content]) -> (&str, &[u8]) {
    content
        .iter()
        .find_map(|c| match c {
            Content::Image { mime, data } | Content::Audio { mime, data } => {
                Some((mime.as_str(), data.as_slice()))
            }
            Content::Text(_) => None,
        })
        .expect("a media block")
}

#[tokio::test]
async fn small_images_come_back_as_they_are_from_either_tool() {
    let fx = Fx::new();
    let bytes = png(40, 30);
    // The name lies; the bytes decide.
    fx.write("picture.dat", &bytes);
    for (tool, args) in [
        ("read_media_file", json!({"path": "picture.dat"})),
        ("read_file", json!({"path": "picture.dat"})),
    ] {
        let out = fx.call_full(tool, args).await.unwrap();
        let (mime, data) = media_block(&out.content);
        assert_eq!(mime, "image/png", "{tool}");
        assert_eq!(data, bytes.as_slice(), "{tool}");
        let Content::Text(line) = &out.content[0] else {
            panic!("text first")
        };
        assert!(line.ends_with(", 40×30."), "{line}");
    }
}

#[tokio::test]
async fn very_large_images_are_downscaled_to_fit() {
    let fx = Fx::new();
    fx.write("big.png", png(3000, 1000));
    let out = fx
        .call_full("read_media_file", json!({"path": "big.png"}))
        .await
        .unwrap();
    let (mime, data) = media_block(&out.content);
    assert_eq!(mime, "image/jpeg");
    let img = image::load_from_memory(data).unwrap();
    assert_eq!((img.width(), img.height()), (1568, 523));
    let Content::Text(line) = &out.content[0] else {
        panic!()
    };
    assert!(line.contains("downscaled from 3000×1000"), "{line}");
    // A smaller bound on request.
    let out = fx
        .call_full(
            "read_media_file",
            json!({"path": "big.png", "max_dimension": 300}),
        )
        .await
        .unwrap();
    let img = image::load_from_memory(media_block(&out.content).1).unwrap();
    assert_eq!(img.width(), 300);
    // And to fit a byte cap.
    let limits = Limits {
        max_media_bytes: 60_000,
        max_image_dimension: 0,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    fx.write("big.png", png(2000, 2000));
    let out = fx
        .call_full("read_media_file", json!({"path": "big.png"}))
        .await
        .unwrap();
    assert!(media_block(&out.content).1.len() <= 60_000);
}

#[tokio::test]
async fn audio_is_returned_or_refused_by_size() {
    let limits = Limits {
        max_media_bytes: 10_000,
        ..Limits::default()
    };
    let fx = Fx::with(limits, &[], Access::ReadWrite);
    let small = wav(1000);
    fx.write("beep.wav", &small);
    let out = fx
        .call_full("read_media_file", json!({"path": "beep.wav"}))
        .await
        .unwrap();
    assert_eq!(media_block(&out.content), ("audio/wav", small.as_slice()));
    fx.write("long.wav", wav(100_000));
    let err = fx.err("read_media_file", json!({"path": "long.wav"})).await;
    assert_eq!(err.kind, ToolErrorKind::TooLarge);
}

#[tokio::test]
async fn what_is_not_media_is_refused_clearly() {
    let fx = Fx::new();
    fx.write("notes.txt", "just text\n");
    let err = fx
        .err("read_media_file", json!({"path": "notes.txt"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::WrongType);
    assert!(err.message.contains("read_file"), "{}", err.message);
    // A PNG signature on garbage is not an image.
    fx.write("fake.png", b"\x89PNG\r\n\x1a\nnot really an image at all");
    let err = fx.err("read_media_file", json!({"path": "fake.png"})).await;
    assert_eq!(err.kind, ToolErrorKind::Binary);
    let err = fx
        .err("read_media_file", json!({"path": "../outside.png"}))
        .await;
    assert_eq!(err.kind, ToolErrorKind::OutsideWorkspace);
}
