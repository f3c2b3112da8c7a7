//! Fixture shared by the tool tests: a fresh root and data directory per test, a session
//! over them, and helpers that call a tool the way the transport would.

use std::path::PathBuf;
use std::sync::Arc;

use ringfence_core::{
    Limits, Progress, Session, SpillStore, ToolContext, ToolError, ToolOutput, Toolbox,
};
use ringfence_files::journal::{Journaling, MemoryJournal};
use ringfence_files::{self as files, FileServices};
use ringfence_fs::{Access, Denylist, Root, RootOrigin, RootSpec, Workspace};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub struct Fx {
    pub tmp: tempfile::TempDir,
    /// The first root (`<tmp>/ws`), current at the start.
    pub root: PathBuf,
    /// Every root, in order (the first is `root`).
    pub roots: Vec<PathBuf>,
    pub data: PathBuf,
    pub ctx: ToolContext,
    pub toolbox: Toolbox,
}

impl Fx {
    pub fn new() -> Fx {
        Fx::with(Limits::default(), &[], Access::ReadWrite)
    }

    pub fn with(limits: Limits, deny: &[&str], access: Access) -> Fx {
        Fx::with_roots(limits, deny, &[("ws", access)])
    }

    /// Several roots, each a directory `<tmp>/<name>` with its access level; the first is
    /// current. `<tmp>/outside` exists too, outside every root.
    pub fn with_roots(limits: Limits, deny: &[&str], roots: &[(&str, Access)]) -> Fx {
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        std::fs::create_dir_all(tmp.path().join("outside")).unwrap();
        let denylist = Arc::new(Denylist::new(deny).unwrap());
        let mut paths = Vec::new();
        let mut ws_roots = Vec::new();
        for (name, access) in roots {
            let path = tmp.path().join(name);
            std::fs::create_dir_all(&path).unwrap();
            ws_roots.push(Arc::new(
                Root::new(
                    RootSpec::configured(path.clone(), *access),
                    denylist.clone(),
                )
                .unwrap(),
            ));
            paths.push(path);
        }
        let root = paths[0].clone();
        let spill_root = Arc::new(
            Root::new(
                RootSpec {
                    path: data.join("tool-output"),
                    access: Access::ReadOnly,
                    origin: RootOrigin::Internal,
                    label: "tool-output".into(),
                },
                Arc::new(Denylist::empty()),
            )
            .unwrap(),
        );
        let ws = Workspace::new(ws_roots)
            .unwrap()
            .with_internal_root(spill_root.clone());
        let ctx = ToolContext {
            session: Arc::new(Session::new(ws)),
            limits: Arc::new(limits),
            spill: Arc::new(SpillStore::new(spill_root)),
            cancel: CancellationToken::new(),
            progress: Progress::none(),
            steps: None,
            sampler: None,
            runner: None,
        };
        Fx {
            tmp,
            root,
            roots: paths,
            data,
            ctx,
            toolbox: Toolbox::of(&[files::family(FileServices {
                journal: Journaling::to(Arc::new(MemoryJournal::default())),
            })]),
        }
    }

    pub async fn call(&self, tool: &str, args: Value) -> Result<String, ToolError> {
        self.call_full(tool, args).await.map(|o| o.all_text())
    }

    /// The whole output: content blocks and structured content.
    pub async fn call_full(&self, tool: &str, args: Value) -> Result<ToolOutput, ToolError> {
        let tool = self.toolbox.get(tool).expect("tool exists").clone();
        tool.call(self.ctx.clone(), args).await
    }

    /// The absolute path of `rel` in the first root, as results show it.
    pub fn abs(&self, rel: &str) -> String {
        if rel.is_empty() || rel == "." {
            self.root.display().to_string()
        } else {
            self.root.join(rel).display().to_string()
        }
    }

    /// Calls and expects success.
    pub async fn ok(&self, tool: &str, args: Value) -> String {
        match self.call(tool, args.clone()).await {
            Ok(text) => text,
            Err(e) => panic!("{tool} {args} failed: {:?}: {}", e.kind, e.message),
        }
    }

    /// Calls and expects failure.
    pub async fn err(&self, tool: &str, args: Value) -> ToolError {
        match self.call(tool, args.clone()).await {
            Ok(text) => panic!("{tool} {args} unexpectedly succeeded: {text}"),
            Err(e) => e,
        }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.path(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(p, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.path(rel)).unwrap()
    }

    pub fn read_str(&self, rel: &str) -> String {
        String::from_utf8(self.read(rel)).unwrap()
    }

    /// Replaces temp paths and uuids so outputs can be snapshotted.
    pub fn mask(&self, text: &str) -> String {
        let mut out = text.replace(&self.data.display().to_string(), "[DATA]");
        out = out.replace(&self.root.display().to_string(), "[ROOT]");
        // uuids in spill names
        let re = regex_lite_uuid(&out);
        out = re;
        out
    }
}

fn regex_lite_uuid(s: &str) -> String {
    // 8-4-4-4-12 hex groups
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < bytes.len() {
        if i + 36 <= bytes.len() && is_uuid(&s[i..i + 36]) {
            out.push_str("[UUID]");
            i += 36;
        } else {
            let ch = s[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

fn is_uuid(s: &str) -> bool {
    s.char_indices().all(|(i, c)| {
        if [8, 13, 18, 23].contains(&i) {
            c == '-'
        } else {
            c.is_ascii_hexdigit()
        }
    })
}

/// The spill path printed in a notice (`Full output saved to <path>.`).
pub fn spill_path(text: &str) -> String {
    let start =
        text.find("Full output saved to ").expect("spill notice") + "Full output saved to ".len();
    let rest = &text[start..];
    let end = rest.find(". Use read_file").expect("end of spill path");
    rest[..end].to_owned()
}
