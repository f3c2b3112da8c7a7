//! Files that are not UTF-8: UTF-16 with a byte-order mark and legacy code pages are read
//! decoded (saying so) and edited in their own encoding; anything that would not round-trip
//! is refused with the file untouched.

use crate::common::Fx;
use ringfence_core::ToolErrorKind;
use serde_json::json;

fn utf16le(s: &str) -> Vec<u8> {
    let mut out = vec![0xFF, 0xFE];
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out
}

fn utf16be(s: &str) -> Vec<u8> {
    let mut out = vec![0xFE, 0xFF];
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_be_bytes());
    }
    out
}

#[tokio::test]
async fn utf16_files_are_read_and_edited_in_utf16() {
    let fx = Fx::new();
    fx.write("w.txt", utf16le("Grüße\r\nzweite Zeile\r\n"));
    let out = fx.ok("read_file", json!({"path": "w.txt"})).await;
    assert_eq!(
        out,
        "     1\tGrüße\n     2\tzweite Zeile\n\n(Decoded from UTF-16LE. Edits keep that encoding; text it cannot represent is refused.)"
    );
    let out = fx
        .ok(
            "edit_file",
            json!({"path": "w.txt", "old_string": "zweite", "new_string": "dritte 🎉"}),
        )
        .await;
    assert!(
        out.contains("Kept the file's CRLF line endings. Kept the file's UTF-16LE encoding."),
        "{out}"
    );
    assert_eq!(fx.read("w.txt"), utf16le("Grüße\r\ndritte 🎉 Zeile\r\n"));
    // The batch form decodes too.
    fx.write("b.txt", utf16be("eins\nzwei\n"));
    let out = fx.ok("read_file", json!({"paths": ["b.txt"]})).await;
    assert!(out.contains("(lines 1-2 of 2) ---\neins\nzwei\n"), "{out}");
    assert!(out.contains("Decoded from UTF-16BE"), "{out}");
    // And whole-file writes keep the encoding.
    fx.ok("write_file", json!({"path": "b.txt", "content": "drei\n"}))
        .await;
    assert_eq!(fx.read("b.txt"), utf16be("drei\n"));
}

#[tokio::test]
async fn legacy_code_pages_round_trip_and_refuse_what_they_cannot_hold() {
    let fx = Fx::new();
    let original = b"Caf\xe9 cr\xe8me br\xfbl\xe9e: 5 \x80\nDeuxi\xe8me ligne\n".to_vec();
    fx.write("menu.txt", &original);
    let out = fx.ok("read_file", json!({"path": "menu.txt"})).await;
    assert!(out.starts_with("     1\tCafé crème brûlée: 5 €\n"), "{out}");
    assert!(out.contains("Decoded from windows-1252"), "{out}");
    // An edit that fits the code page is written in it.
    fx.ok(
        "replace_file_content",
        json!({"path": "menu.txt", "old_content": "5 €", "new_content": "6 € (façon maison)"}),
    )
    .await;
    assert_eq!(
        fx.read("menu.txt"),
        b"Caf\xe9 cr\xe8me br\xfbl\xe9e: 6 \x80 (fa\xe7on maison)\nDeuxi\xe8me ligne\n".to_vec()
    );
    // One that does not is refused, naming the character, and nothing changes.
    let before = fx.read("menu.txt");
    for (tool, args) in [
        (
            "edit_file",
            json!({"path": "menu.txt", "old_string": "Deuxième", "new_string": "Второй"}),
        ),
        (
            "insert_file_content",
            json!({"path": "menu.txt", "content": "寿司"}),
        ),
        (
            "write_file",
            json!({"path": "menu.txt", "content": "Łódź\n"}),
        ),
    ] {
        let err = fx.err(tool, args).await;
        assert_eq!(err.kind, ToolErrorKind::Encoding, "{tool}: {}", err.message);
        assert!(err.message.contains("windows-1252"), "{}", err.message);
        assert!(err.message.contains("U+"), "{}", err.message);
        assert_eq!(fx.read("menu.txt"), before, "{tool}");
    }
}

#[tokio::test]
async fn undo_restores_the_original_bytes_of_a_legacy_file() {
    let fx = Fx::new();
    let original = b"na\xefve r\xe9sum\xe9\n".to_vec();
    fx.write("r.txt", &original);
    fx.ok("read_file", json!({"path": "r.txt"})).await;
    fx.ok(
        "edit_file",
        json!({"path": "r.txt", "old_string": "naïve", "new_string": "clever"}),
    )
    .await;
    fx.ok("undo_edit", json!({"path": "r.txt"})).await;
    assert_eq!(fx.read("r.txt"), original);
}

#[tokio::test]
async fn binary_files_stay_refused() {
    let fx = Fx::new();
    fx.write("x.bin", b"\x00\x01\x02\x03\xff\xfe\x00");
    let err = fx.err("read_file", json!({"path": "x.bin"})).await;
    assert_eq!(err.kind, ToolErrorKind::Binary);
    // Odd-length "UTF-16" is not text either.
    fx.write("odd.txt", [0xFF, 0xFE, 0x41]);
    let err = fx.err("read_file", json!({"path": "odd.txt"})).await;
    assert_eq!(err.kind, ToolErrorKind::Binary);
}
