use super::*;

#[test]
fn placeholder_page_extracts() {
    let e = extract(
        "<html><head><title>T</title></head><body><p>Hello world.</p></body></html>",
        None,
    );
    assert_eq!(e.title.as_deref(), Some("T"));
    assert!(e.text.contains("Hello world."));
}
