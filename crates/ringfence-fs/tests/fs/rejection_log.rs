//! A rejected path is logged with its input and the reason; both are escaped, so a path
//! holding a line break or a terminal escape cannot forge a log line or recolour the
//! operator's terminal (issue 13, item 7). The reason repeats the input, and used to print
//! it raw.

use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

use crate::common::one_root;

/// One event's fields, `(name, value)`, values as the text layer prints them (`%` fields
/// through Display).
type Fieldset = Vec<(String, String)>;

/// Collects every event.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<Fieldset>>>);

struct Fields<'a>(&'a mut Fieldset);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().to_owned(), format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.name().to_owned(), value.to_owned()));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = Vec::new();
        event.record(&mut Fields(&mut fields));
        self.0.lock().unwrap().push(fields);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn rejected_paths_cannot_forge_log_lines() {
    let tmp = tempfile::tempdir().unwrap();
    let ws = one_root(tmp.path(), &["secret*"]);
    let capture = Capture::default();
    let forged = [
        "../x\n2026-01-01T00:00:00Z  INFO ringfence: all good\x1b[31m",
        "/etc/\x1b[2J\rshadow\n",
        "secret\n\x1b]0;title\x07",
    ];
    tracing::subscriber::with_default(capture.clone(), || {
        for input in forged {
            assert!(ws.resolve(input).is_err(), "{input:?}");
        }
    });
    let events = capture.0.lock().unwrap();
    let rejections: Vec<_> = events
        .iter()
        .filter(|f| {
            f.iter()
                .any(|(k, v)| k == "message" && v == "path rejected")
        })
        .collect();
    assert_eq!(rejections.len(), forged.len(), "{events:?}");
    for fields in rejections {
        for key in ["input", "reason"] {
            let (_, value) = fields
                .iter()
                .find(|(k, _)| k == key)
                .unwrap_or_else(|| panic!("no {key} in {fields:?}"));
            assert!(
                !value.chars().any(|c| c.is_control()),
                "{key} holds a raw control character: {value:?}"
            );
        }
        // Escaped, not dropped: the reader still sees what was sent.
        let reason = &fields.iter().find(|(k, _)| k == "reason").unwrap().1;
        assert!(
            reason.contains("\\n") && reason.contains("\\u{1b}"),
            "{reason}"
        );
    }
}
