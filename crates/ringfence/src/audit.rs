//! The audit trail: every tool call as one JSON line in `<data dir>/audit/audit.jsonl`,
//! written by a background thread (a call only queues its line), rotated by size, and
//! queried with `ringfence audit`. With the PostgreSQL store the same thread also writes
//! each batch of lines to the shared `audit_log` table, where `ringfence audit` then reads
//! every instance's calls.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use ringfence_core::{AuditEvent, AuditSink};
use ringfence_store::pg::audit::{AuditFilter, AuditLine, PgAudit};

/// Lines queued at most; beyond that lines are counted as dropped (and the count logged)
/// rather than blocking a call.
const QUEUE: usize = 16_384;
/// The current file is rotated when it grows past this.
pub const MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Rotated files kept (`audit.jsonl.1` is the newest).
pub const KEEP: usize = 5;

#[derive(Debug)]
pub struct AuditFile {
    tx: Mutex<Option<SyncSender<AuditLine>>>,
    dropped: AtomicU64,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

pub fn audit_path(data_dir: &Path) -> PathBuf {
    data_dir.join("audit").join("audit.jsonl")
}

impl AuditFile {
    #[allow(clippy::disallowed_methods)] // the operator's data directory, not a root
    pub fn open(data_dir: &Path, shared: Option<Arc<PgAudit>>) -> std::io::Result<Arc<AuditFile>> {
        let path = audit_path(data_dir);
        ringfence_fs::create_private_dir_all(path.parent().expect("audit dir"))?;
        let file = open_append(&path)?;
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let worker = std::thread::Builder::new()
            .name("ringfence-audit".into())
            .spawn(move || write_loop(path, file, rx, shared))?;
        Ok(Arc::new(AuditFile {
            tx: Mutex::new(Some(tx)),
            dropped: AtomicU64::new(0),
            worker: Mutex::new(Some(worker)),
        }))
    }

    /// Writes everything queued and stops the writer (before the process exits).
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(w) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = w.join();
        }
        let dropped = self.dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            tracing::error!(
                dropped,
                "audit lines were dropped because the writer fell behind"
            );
        }
    }
}

impl AuditSink for AuditFile {
    fn record(&self, event: AuditEvent) {
        let Ok(json) = serde_json::to_string(&event) else {
            return;
        };
        let line = AuditLine {
            time: event.time,
            user: event.user,
            session: event.session,
            tool: event.tool,
            outcome: event.outcome.to_owned(),
            line: json,
        };
        let tx = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = tx.as_ref() else { return };
        match tx.try_send(line) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_power_of_two() {
                    tracing::error!(dropped = n, "audit queue full; audit lines dropped");
                }
            }
        }
    }
}

/// Opens the trail for appending; a new file is 0600 (who called what, with which paths, is
/// the operator's to read). Rotated files keep the mode through the rename.
fn open_append(path: &Path) -> std::io::Result<std::fs::File> {
    ringfence_fs::open_with_mode(
        path,
        ringfence_fs::PRIVATE_FILE_MODE,
        ringfence_fs::Opening::Append,
    )
}

#[allow(clippy::disallowed_methods)] // the operator's data directory, not a root
fn write_loop(
    path: PathBuf,
    file: std::fs::File,
    rx: Receiver<AuditLine>,
    shared: Option<Arc<PgAudit>>,
) {
    let mut shared_failing = false;
    let mut size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut out = std::io::BufWriter::new(file);
    while let Ok(line) = rx.recv() {
        let mut batch = vec![line];
        batch.extend(rx.try_iter());
        for entry in &batch {
            let line = &entry.line;
            if size > MAX_BYTES {
                let _ = out.flush();
                for k in (1..KEEP).rev() {
                    let _ = std::fs::rename(rotated(&path, k), rotated(&path, k + 1));
                }
                let _ = std::fs::rename(&path, rotated(&path, 1));
                match open_append(&path) {
                    Ok(f) => out = std::io::BufWriter::new(f),
                    Err(e) => {
                        tracing::error!(error = %e, "cannot reopen the audit log");
                        return;
                    }
                }
                size = 0;
            }
            if let Err(e) = writeln!(out, "{line}") {
                tracing::error!(error = %e, "audit write failed");
            }
            size += line.len() as u64 + 1;
        }
        let _ = out.flush();
        if let Some(pg) = &shared {
            match pg.append(&batch) {
                Ok(()) if shared_failing => {
                    shared_failing = false;
                    tracing::info!("audit lines reach the shared store again");
                }
                Ok(()) => {}
                Err(e) => {
                    if !shared_failing {
                        tracing::error!(error = %e, lines = batch.len(), "audit lines could not be written to the shared store (they are in the file)");
                    }
                    shared_failing = true;
                }
            }
        }
    }
    let _ = out.flush();
}

fn rotated(path: &Path, k: usize) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{k}"));
    PathBuf::from(s)
}

/// What `ringfence audit` selects (the same filters for the file and the shared table).
pub type Query = AuditFilter;

/// Whether the line `v` passes every filter of `q`. RFC 3339 prefixes compare as strings
/// (all times are UTC, same format).
fn matches(q: &Query, v: &serde_json::Value) -> bool {
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("");
    q.user.as_deref().is_none_or(|u| field("user") == u)
        && q.tool.as_deref().is_none_or(|t| field("tool") == t)
        && q.outcome.as_deref().is_none_or(|o| field("outcome") == o)
        && q.session.as_deref().is_none_or(|s| field("session") == s)
        && q.since.as_deref().is_none_or(|s| field("time") >= s)
        && q.until.as_deref().is_none_or(|u| field("time") < u)
}

/// The matching lines, oldest first, across the rotated files and the current one.
#[allow(clippy::disallowed_methods)] // the operator's data directory, not a root
pub fn query(data_dir: &Path, q: &Query, out: &mut dyn FnMut(&str)) -> std::io::Result<usize> {
    let path = audit_path(data_dir);
    let mut files: Vec<PathBuf> = (1..=KEEP).rev().map(|k| rotated(&path, k)).collect();
    files.push(path);
    // Text each matching line holds as the writer spells it (compact JSON): a line without
    // it is passed over unparsed — on a shared server most lines are other people's.
    let needles: Vec<String> = [
        ("user", &q.user),
        ("tool", &q.tool),
        ("session", &q.session),
    ]
    .into_iter()
    .filter_map(|(k, v)| {
        let v = serde_json::to_string(v.as_deref()?).ok()?;
        Some(format!("\"{k}\":{v}"))
    })
    .collect();
    let mut n = 0;
    for f in files {
        let Ok(file) = std::fs::File::open(&f) else {
            continue;
        };
        for line in std::io::BufReader::new(file).lines() {
            let line = line?;
            if !needles.iter().all(|needle| line.contains(needle.as_str())) {
                continue;
            }
            let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if matches(q, &v) {
                out(&line);
                n += 1;
            }
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(user: &str, tool: &str, args: serde_json::Value) -> String {
        serde_json::to_string(&ringfence_core::runner::AuditEvent {
            time: "2026-12-06T10:00:00.000Z".into(),
            user: user.into(),
            session: "s1".into(),
            tool: tool.into(),
            args,
            outcome: "ok",
            error: None,
            duration_ms: 1.0,
        })
        .unwrap()
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // the test's own directory
    fn a_query_finds_each_users_lines_whatever_their_name_and_arguments_say() {
        let dir = tempfile::tempdir().unwrap();
        let path = audit_path(dir.path());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let odd = "we\"ird \\ ñame";
        let lines = [
            event("alice", "read_file", serde_json::json!({})),
            // Bob's call whose arguments name alice: not hers.
            event("bob", "read_file", serde_json::json!({"user": "alice"})),
            event(odd, "write_file", serde_json::json!({})),
            event("alice", "write_file", serde_json::json!({})),
            "not json \"user\":\"alice\"".to_owned(),
        ];
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        let found = |user: Option<&str>, tool: Option<&str>| {
            let q = Query {
                user: user.map(str::to_owned),
                tool: tool.map(str::to_owned),
                ..Query::default()
            };
            let mut out = Vec::new();
            let n = query(dir.path(), &q, &mut |l| out.push(l.to_owned())).unwrap();
            assert_eq!(n, out.len());
            out
        };
        assert_eq!(
            found(Some("alice"), None),
            [lines[0].clone(), lines[3].clone()]
        );
        assert_eq!(found(Some(odd), None), [lines[2].clone()]);
        assert_eq!(found(Some("alice"), Some("write_file")), [lines[3].clone()]);
        assert_eq!(found(None, Some("read_file")).len(), 2);
        assert_eq!(
            found(None, None).len(),
            4,
            "an unreadable line is passed over"
        );
    }
}
