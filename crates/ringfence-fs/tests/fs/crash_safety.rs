//! Crash test: a child process (this same test binary, re-executed with `--exact` and an
//! environment variable selecting child mode) loops replacing one file with `write_atomic`,
//! alternating two large contents; the parent SIGKILLs it at random moments.
//!
//! After every kill the file is wholly one complete version (header + full body, body all
//! one byte matching the header), never torn, never empty, never missing once it first
//! existed, and its sequence number never goes backwards. The only other entries on disk
//! are hidden `.data.bin.<12 hex>.rftmp` temp files abandoned by a killed write (at most one
//! per kill); walks (grep, glob) never list them.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ringfence_fs::{WalkOptions, WriteOptions};

use crate::common::{one_root, walk_rels};

const CHILD_ENV: &str = "RINGFENCE_CRASH_CHILD_ROOT";
const READY: &str = "RINGFENCE-CRASH-CHILD-READY";
const FILE: &str = "data.bin";
const BODY: usize = 1 << 20;
const ROUNDS: usize = 30;

/// The child's test name as libtest knows it (and as `--exact` must match it): the path of
/// `crash_child_writer` in this test binary, without the crate's own name.
fn child_test_name() -> String {
    match module_path!().split_once("::") {
        Some((_crate, module)) => format!("{module}::crash_child_writer"),
        None => "crash_child_writer".to_owned(),
    }
}

fn header(seq: u64, fill: u8) -> String {
    format!("RFCRASH seq={seq:010} fill={}\n", fill as char)
}

fn version(seq: u64) -> Vec<u8> {
    let fill = if seq.is_multiple_of(2) { b'A' } else { b'B' };
    let mut v = header(seq, fill).into_bytes();
    v.resize(v.len() + BODY, fill);
    v
}

/// Checks that `data` is exactly one complete version; returns its sequence number.
fn parse_version(data: &[u8]) -> Result<u64, String> {
    let nl = data
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| format!("no header line in {} bytes", data.len()))?;
    let head = std::str::from_utf8(&data[..nl]).map_err(|_| "header not UTF-8".to_string())?;
    let seq: u64 = head
        .strip_prefix("RFCRASH seq=")
        .and_then(|r| r.split(' ').next())
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad header {head:?}"))?;
    let want = version(seq);
    if data.len() != want.len() {
        return Err(format!("torn: {} bytes, want {}", data.len(), want.len()));
    }
    if data != want.as_slice() {
        let at = data
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!("torn: differs from version {seq} at byte {at}"));
    }
    Ok(seq)
}

/// Child mode: replace `data.bin` forever. Without the environment variable (a normal test
/// run) this does nothing.
#[test]
fn crash_child_writer() {
    let Ok(root) = std::env::var(CHILD_ENV) else {
        return;
    };
    let root = PathBuf::from(root);
    let ws = one_root(&root, &[]);
    // Continue the sequence where the previous (killed) child left off.
    let mut seq = std::fs::read(root.join(FILE))
        .ok()
        .and_then(|d| parse_version(&d).ok())
        .map_or(0, |s| s + 1);
    let mut out = std::io::stdout();
    writeln!(out, "{READY}").unwrap();
    out.flush().unwrap();
    loop {
        let data = version(seq);
        let target = ws.resolve(FILE).unwrap();
        target
            .write_atomic(&data, &WriteOptions::default())
            .unwrap();
        seq += 1;
    }
}

/// A small xorshift generator seeded from the clock (the seed is in every failure message).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn is_temp_of_data(name: &str) -> bool {
    // `.data.bin.<12 lowercase hex>.rftmp`
    name.strip_prefix(".data.bin.")
        .and_then(|r| r.strip_suffix(".rftmp"))
        .is_some_and(|id| id.len() == 12 && id.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[test]
fn sigkill_mid_write_never_tears_the_file() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return; // never recurse from a child
    }
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap().join("root");
    std::fs::create_dir(&root).unwrap();
    let ws = one_root(&root, &[]);
    let exe = std::env::current_exe().unwrap();
    let child_name = child_test_name();
    let seed = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    let mut rng = Rng(seed);
    let started = Instant::now();

    let mut existed = false;
    let mut last_seq: Option<u64> = None;
    let mut leftovers = 0usize;
    let mut kills_mid_write = 0usize;
    // Round 0 waits until the first version is complete (however slow the disk), so that
    // "never missing once it existed" is asserted after every one of the random kills.
    for round in 0..=ROUNDS {
        let ctx = format!("round {round}, seed {seed}");
        let mut child = Command::new(&exe)
            .args([
                child_name.as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &root)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Wait until the child is in its write loop, then kill it 1–50 ms later.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        loop {
            match lines.next() {
                // libtest prints `test <module>::crash_child_writer ... ` without a newline first.
                Some(Ok(line)) if line.contains(READY) => break,
                Some(Ok(_)) => continue,
                other => panic!("{ctx}: child ended before it was ready: {other:?}"),
            }
        }
        if round == 0 {
            let deadline = Instant::now() + Duration::from_secs(60);
            while std::fs::symlink_metadata(root.join(FILE)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "{ctx}: no write completed in 60 s"
                );
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let delay = Duration::from_millis(1 + rng.next() % 50);
        std::thread::sleep(delay);
        child.kill().unwrap(); // SIGKILL on Unix
        let status = child.wait().unwrap();
        assert!(
            !status.success(),
            "{ctx}: the child must have been killed, got {status}"
        );

        // The file: absent only before the very first completed write.
        match std::fs::read(root.join(FILE)) {
            Ok(data) => {
                existed = true;
                let seq = parse_version(&data).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                if let Some(last) = last_seq {
                    assert!(seq >= last, "{ctx}: seq went back from {last} to {seq}");
                }
                last_seq = Some(seq);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                assert!(!existed, "{ctx}: the file vanished after it first existed");
            }
            Err(e) => panic!("{ctx}: {e}"),
        }

        // What a walk sees: the file alone (temp files of writes are never listed).
        let walked = walk_rels(&ws.resolve("~").unwrap(), &WalkOptions::default()).unwrap();
        assert!(
            walked.iter().all(|n| n.as_str() == FILE),
            "{ctx}: a walk listed {walked:?}"
        );
        // What is on disk: the file, plus only abandoned temp files of killed writes.
        let names: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let temps: Vec<&String> = names.iter().filter(|n| is_temp_of_data(n)).collect();
        let others: Vec<&String> = names
            .iter()
            .filter(|n| n.as_str() != FILE && !is_temp_of_data(n))
            .collect();
        assert!(others.is_empty(), "{ctx}: unexpected entries {others:?}");
        assert!(
            temps.len() <= leftovers + 1,
            "{ctx}: more than one new temp file from one kill: {temps:?}"
        );
        if temps.len() > leftovers {
            kills_mid_write += 1;
        }
        leftovers = temps.len();
        // Abandoned temp files are regular files, never larger than one version, created
        // 0600 and given the final mode (0644) just before the fsync and rename.
        for t in temps {
            let meta = std::fs::symlink_metadata(root.join(t)).unwrap();
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            assert!(meta.is_file(), "{ctx}: {t}");
            assert!(
                mode == 0o600 || mode == 0o644,
                "{ctx}: {t} has mode {mode:o}"
            );
            assert!(meta.len() as usize <= version(0).len(), "{ctx}: {t}");
        }
    }
    assert!(existed, "seed {seed}: the child never completed a write");
    // Kept final content: mode of a fresh file is 0644.
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(root.join(FILE))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o644);
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!(
            "crash: {} kills, last seq {last_seq:?}, {kills_mid_write} kills left a temp \
             file ({leftovers} abandoned .rftmp files), seed {seed}, {:?}",
            ROUNDS + 1,
            started.elapsed()
        );
    }
}
