//! Swap race: while one thread keeps swapping `root/d` between a real directory and a
//! symlink to `outside/` (atomic `RENAME_EXCHANGE`, and a two-step rename that leaves `d`
//! missing for a moment so writers race `create_parents` against the swap), writer threads
//! resolve `d/...` and `write_atomic` with `create_parents`, and a walker walks the root.
//!
//! Afterwards: not one file was created or changed in `outside/`, every write that reported
//! success is found inside the root with its content, and no walk ever reported an entry
//! that exists only in `outside/` (i.e. the walk never entered the symlink).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ringfence_fs::{FsErrorKind, WalkOptions, WriteOptions};
use rustix::fs::{CWD, RenameFlags, renameat_with};

use crate::common::{one_root, snapshot, walk_rels};

/// Swaps to perform (at least), and the wall-clock budget for the whole race.
const MIN_SWAPS: usize = 4000;
const BUDGET: Duration = Duration::from_secs(8);

/// Every regular file under `dir` (not following symlinks), by file name.
fn files_by_name(dir: &Path, out: &mut BTreeMap<String, Vec<(PathBuf, Vec<u8>)>>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let ft = std::fs::symlink_metadata(&p).unwrap().file_type();
        if ft.is_dir() {
            files_by_name(&p, out);
        } else if ft.is_file() {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let data = std::fs::read(&p).unwrap();
            out.entry(name).or_default().push((p, data));
        }
    }
}

#[test]
fn swapping_a_directory_for_a_symlink_never_leaks() {
    let tmp = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(tmp.path()).unwrap();
    let root = top.join("root");
    let outside = top.join("outside");
    std::fs::create_dir_all(root.join("d")).unwrap();
    std::fs::create_dir_all(outside.join("deep")).unwrap();
    // Names that exist only outside: a walk reporting one of them entered the symlink.
    for i in 0..8 {
        std::fs::write(outside.join(format!("marker{i}")), "OUTSIDE").unwrap();
    }
    std::fs::write(outside.join("deep/marker_deep"), "OUTSIDE").unwrap();
    // `alt` is the other half of the swap: an absolute symlink to outside.
    std::os::unix::fs::symlink(&outside, root.join("alt")).unwrap();
    let outside_before = snapshot(&outside, None);

    let ws = one_root(&root, &[]);

    let stop = AtomicBool::new(false);
    let swaps = AtomicUsize::new(0);
    let next = AtomicUsize::new(0);
    let written: Mutex<Vec<(String, Vec<u8>)>> = Mutex::new(Vec::new());
    let refusals: Mutex<BTreeMap<String, usize>> = Mutex::new(BTreeMap::new());
    let walks = AtomicUsize::new(0);
    let samples: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let walk_violations: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let start = Instant::now();

    std::thread::scope(|s| {
        // The swapper.
        s.spawn(|| {
            let d = root.join("d");
            let alt = root.join("alt");
            let hold = root.join("hold");
            let mut strays = 0usize;
            let mut i = 0usize;
            while i < MIN_SWAPS || start.elapsed() < BUDGET / 2 {
                if start.elapsed() > BUDGET {
                    break;
                }
                if i % 4 != 3 {
                    // Atomic: `d` and `alt` trade places (dir <-> symlink).
                    renameat_with(CWD, &d, CWD, &alt, RenameFlags::EXCHANGE).unwrap();
                } else {
                    // Two steps: `d` is missing for a moment, so writers race `create_parents`
                    // against the swap. If a writer recreated `d` and `alt` is the symlink,
                    // the rename fails and the fresh directory is moved aside (inside the
                    // root); if `alt` is the directory, it replaces an empty fresh `d`.
                    std::fs::rename(&d, &hold).unwrap();
                    std::thread::yield_now();
                    while std::fs::rename(&alt, &d).is_err() {
                        strays += 1;
                        let _ = std::fs::rename(&d, root.join(format!("stray{strays}")));
                    }
                    std::fs::rename(&hold, &alt).unwrap();
                }
                i += 1;
                if i.is_multiple_of(64) {
                    std::thread::yield_now();
                }
            }
            swaps.store(i, Ordering::Relaxed);
            stop.store(true, Ordering::Relaxed);
        });
        // Writers: `d/f{n}` and `d/n{n}/f{n}` (the latter creates a directory under `d`).
        for _ in 0..2 {
            s.spawn(|| {
                let opts = WriteOptions {
                    create_parents: true,
                    ..WriteOptions::default()
                };
                while !stop.load(Ordering::Relaxed) {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let name = format!("f{n}");
                    let input = if n.is_multiple_of(3) {
                        format!("d/n{n}/{name}")
                    } else {
                        format!("d/{name}")
                    };
                    let data = format!("write {n}").into_bytes();
                    let res = ws
                        .resolve(&input)
                        .and_then(|t| t.write_atomic(&data, &opts));
                    match res {
                        Ok(()) => written.lock().unwrap().push((name, data)),
                        Err(e) => {
                            *refusals
                                .lock()
                                .unwrap()
                                .entry(format!("{:?}", e.kind()))
                                .or_default() += 1;
                            if e.kind() != FsErrorKind::OutsideRoot {
                                let source = std::error::Error::source(&e).map(|s| s.to_string());
                                samples
                                    .lock()
                                    .unwrap()
                                    .push(format!("{input}: {e} ({source:?})"));
                            }
                        }
                    }
                }
            });
        }
        // Walker.
        s.spawn(|| {
            let opts = WalkOptions {
                threads: 1,
                ..WalkOptions::default()
            };
            while !stop.load(Ordering::Relaxed) {
                let t = ws.resolve("~").unwrap();
                let seen = walk_rels(&t, &opts).unwrap();
                walks.fetch_add(1, Ordering::Relaxed);
                for rel in seen {
                    let last = rel.rsplit('/').next().unwrap();
                    // Only writer files (`f*`), writer dirs (`n*`) and our own dirs exist
                    // inside; `marker*` / `deep` exist only outside.
                    let inside_name = last.starts_with('f')
                        || last.starts_with('n')
                        || last.starts_with(".f") // an in-flight temp file `.f12.xxxx.rftmp`
                        || ["d", "alt", "hold"].contains(&last)
                        || last.starts_with("stray");
                    if !inside_name || rel.contains("marker") || rel.contains("deep") {
                        walk_violations.lock().unwrap().push(rel);
                    }
                }
            }
        });
    });

    let elapsed = start.elapsed();
    let outside_after = snapshot(&outside, None);
    assert_eq!(
        outside_before, outside_after,
        "the swap race created or changed files outside the root"
    );
    let v = walk_violations.into_inner().unwrap();
    assert!(v.is_empty(), "walk reported entries from outside: {v:?}");

    // Every reported success is inside the root, with its content, exactly once.
    let written = written.into_inner().unwrap();
    let mut found = BTreeMap::new();
    files_by_name(&root, &mut found);
    for (name, data) in &written {
        let hits = found.get(name).map(Vec::as_slice).unwrap_or_default();
        assert_eq!(
            hits.len(),
            1,
            "{name}: expected exactly one copy inside the root"
        );
        assert_eq!(&hits[0].1, data, "{name}: wrong content");
    }
    // Refusals: OutsideRoot (`d` was the symlink), NotFound (the two-step swap renamed a
    // directory over the empty `d` a writer had just created, deleting the directory the
    // writer held: its temp file cannot be created there), SymlinkLoop (the symlink budget,
    // which also bounds retries against a hostile swapper, ran out).
    let refusals = refusals.into_inner().unwrap();
    for kind in refusals.keys() {
        assert!(
            kind == &format!("{:?}", FsErrorKind::OutsideRoot)
                || kind == &format!("{:?}", FsErrorKind::NotFound)
                || kind == &format!("{:?}", FsErrorKind::SymlinkLoop),
            "unexpected refusal kind {kind}: {refusals:?}; first few: {:?}",
            samples.lock().unwrap().iter().take(12).collect::<Vec<_>>()
        );
    }
    let swaps = swaps.load(Ordering::Relaxed);
    // The race must actually have been run: thousands of swaps, both outcomes seen.
    assert!(swaps >= 1000, "only {swaps} swaps in {elapsed:?}");
    assert!(!written.is_empty(), "no write succeeded: {refusals:?}");
    assert!(
        refusals.get("OutsideRoot").copied().unwrap_or(0) > 0,
        "no write was refused: the swap never raced ({} writes)",
        written.len()
    );
    assert!(walks.load(Ordering::Relaxed) > 0);
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "race: {swaps} swaps, {} writes landed inside, refusals {refusals:?}, {} walks, {elapsed:?}",
            written.len(),
            walks.load(Ordering::Relaxed),
        );
    }
    assert!(elapsed < Duration::from_secs(20), "race took {elapsed:?}");
}
