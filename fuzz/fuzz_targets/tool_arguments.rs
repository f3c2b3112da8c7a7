//! Tool arguments: any JSON for any tool is parsed, checked and either run or refused with a
//! tool error — never a panic, never a hang past the call's time limit (libFuzzer's
//! `-timeout` catches a tool that ignores cancellation). Every file and memory tool, over a
//! read-only root with files in it (so the arguments reach the tools' own checks, and nothing
//! accumulates on disk between runs); the memory backend refuses every operation after the
//! arguments are checked.
#![no_main]

use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use ringfence_fs::{Access, Denylist, Root, RootOrigin, RootSpec, Workspace};
use ringfence_core::{
    CallRequest, CallScope, Limits, Progress, Session, SpillStore, ToolRunner, Toolbox,
};
use ringfence_files::journal::Journaling;
use ringfence_memory::{
    Item, Kind, MemoryBackend, MemoryError, MemoryServices, NewItem, Query, SearchOutcome,
    StoreOutcome, UpdateOutcome,
};
use serde_json::Value;

#[derive(Debug)]
struct NoMemory;

fn refuse<T>() -> Result<T, MemoryError> {
    Err(MemoryError::new("no memory database in the fuzz target"))
}

impl MemoryBackend for NoMemory {
    fn store(&self, _: &str, _: Kind, _: NewItem) -> Result<StoreOutcome, MemoryError> {
        refuse()
    }
    fn search(&self, _: &str, _: Kind, _: &Query) -> Result<SearchOutcome, MemoryError> {
        refuse()
    }
    fn update(&self, _: &str, _: Kind, _: i64, _: &str) -> Result<UpdateOutcome, MemoryError> {
        refuse()
    }
    fn delete(&self, _: &str, _: Kind, _: i64) -> Result<Option<Item>, MemoryError> {
        refuse()
    }
    fn pinned(&self, _: &str) -> Result<Vec<Item>, MemoryError> {
        refuse()
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    runner: ToolRunner,
    names: Vec<&'static str>,
    scope: CallScope,
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("notes.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(root.join("src/deep/data.bin"), [0u8, 159, 146, 150]).unwrap();
    std::fs::write(root.join("image.png"), b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR").unwrap();
    let denylist = Arc::new(Denylist::new(&["*.key"]).unwrap());
    let spec = RootSpec::configured(root, Access::ReadOnly);
    let spill_root = Arc::new(
        Root::new(
            RootSpec {
                path: dir.path().join("data/tool-output"),
                access: Access::ReadOnly,
                origin: RootOrigin::Internal,
                label: "tool-output".into(),
            },
            Arc::new(Denylist::empty()),
        )
        .unwrap(),
    );
    let workspace = Workspace::new(vec![Arc::new(Root::new(spec, denylist).unwrap())])
        .unwrap()
        .with_internal_root(spill_root.clone());
    let families = [
        ringfence_files::family(ringfence_files::FileServices {
            journal: Journaling::off(),
        }),
        ringfence_memory::family(MemoryServices {
            backend: Arc::new(NoMemory),
            pinned_in_instructions: false,
        }),
    ];
    let toolbox = Toolbox::of(&families);
    let names = toolbox.iter().map(|t| t.name()).collect();
    let runner = ToolRunner::new(toolbox, Arc::new(Limits::default()))
        .with_call_timeout(Some(Duration::from_secs(5)));
    Fixture {
        _dir: dir,
        runtime: tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        runner,
        names,
        scope: CallScope {
            session: Arc::new(Session::new(workspace)),
            spill: Arc::new(SpillStore::new(spill_root)),
        },
    }
});

fuzz_target!(|data: &[u8]| {
    let Some((&pick, json)) = data.split_first() else {
        return;
    };
    let Ok(args) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let fx = &*FIXTURE;
    let tool = fx.names[pick as usize % fx.names.len()];
    let outcome = fx.runtime.block_on(fx.runner.call(CallRequest {
        tool,
        args,
        user: "fuzz",
        session_id: "fuzz",
        scope: Ok(fx.scope.clone()),
        received: Instant::now(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Progress::none(),
        ready: None,
        sampler: None,
    }));
    // The tool is offered, so the runner never answers "unknown tool"; the call itself may
    // succeed or fail, but a failure is a tool error with a message for the model.
    match outcome.expect("an offered tool") {
        Ok(_) => {}
        Err(e) => assert!(!e.message.is_empty(), "{tool}: an empty error message"),
    }
});
