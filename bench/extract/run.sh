#!/usr/bin/env bash
# Web page extraction: quality (4-gram shingle F1) and time per page of ringfence's web_fetch
# (as an MCP client receives it) and extractor, trafilatura and mcp-server-fetch, on
# Readability.js's test pages and on the development and evaluation parts of the labelled set.
# See BENCHMARKS.md, "Web page extraction quality", and bench/extract/README.md.
#
#   bash bench/extract/run.sh                  # everything; results in bench/results/extract.md
#   SETS=dev bash bench/extract/run.sh         # some parts (readability, dev, eval)
#   ONLY=trafilatura bash bench/extract/run.sh # some extractors (names as in the report)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
READABILITY="${READABILITY:-$ROOT/../shared/corpora/readability-pages}"
SETS="${SETS:-readability,dev,eval}"
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

# newspaper4k's test pages (labelled by hand here: heldout/), from its source distribution.
if [ ! -d "$CACHE/heldout/newspaper4k-0.9.6/tests/data/html" ]; then
  mkdir -p "$CACHE/heldout"
  "$VENV/bin/pip" download -q --no-deps --no-binary :all: newspaper4k==0.9.6 -d "$CACHE/heldout"
  tar xzf "$CACHE/heldout/newspaper4k-0.9.6.tar.gz" -C "$CACHE/heldout" \
    --wildcards 'newspaper4k-0.9.6/tests/data/html/*'
fi
# The registry packages that ship labelled pages (sources/SOURCES.md), and Mercury's site rules.
if [ ! -f "$CACHE/sources/manifest.jsonl" ]; then
  PIP="$VENV/bin/python -m pip" bash "$HERE/sources/fetch.sh" "$CACHE/sources"
fi
node "$HERE/sources/mercury_rules.js" "$CACHE/sources/parser-2.2.2" > "$CACHE/sources/rules.json"
if [ ! -f "$CACHE/sources/mercury.jsonl" ]; then
  [ -d "$CACHE/mercury/node_modules/@postlight/parser" ] || bash "$HERE/sources/mercury_install.sh" "$CACHE/mercury"
  "$VENV/bin/python" -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["source"].startswith("npm:@postlight"):
        print(json.dumps({"id": r["id"], "html": r["html"], "url": r["url"]}))' "$CACHE/sources/manifest.jsonl" \
    | NODE_PATH="$CACHE/mercury/node_modules" node "$HERE/sources/mercury_parse.js" > "$CACHE/sources/mercury.jsonl.part"
  mv "$CACHE/sources/mercury.jsonl.part" "$CACHE/sources/mercury.jsonl"
fi
# The labelled set, split by site into development and evaluation parts (sets.py says how).
"$VENV/bin/python" "$HERE/sets.py" "$CACHE/sources" "$CACHE/heldout" "$READABILITY" "$CACHE/sets.json"

# Release builds: the server, and ringfence's extractor alone (an example of ringfence-web).
(cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build -q --release -p ringfence --bin ringfence)
(cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build -q --release -p ringfence-web --example extract_pages)
CANDIDATES=""
if [ -n "${ONLY:-}" ] && printf '%s' "$ONLY" | grep -qE 'dom_smoothie|rs-trafilatura|readability 0.3'; then
  # The Rust crates compared when the extractor was chosen: their own workspace, so none of
  # them becomes a dependency of ringfence.
  CARGO_TARGET_DIR="$HERE/.target" cargo build -q --release --manifest-path "$HERE/candidates/Cargo.toml"
  CANDIDATES="$HERE/.target/release/extract-candidates"
fi

mkdir -p "$ROOT/bench/results"
"$VENV/bin/python" "$HERE/bench.py" \
  --ours "$ROOT/target/bench/release/examples/extract_pages" \
  --server "$ROOT/target/bench/release/ringfence" \
  --candidates "$CANDIDATES" --readability "$READABILITY" --sets-json "$CACHE/sets.json" \
  --sets "$SETS" --only "${ONLY:-}" \
  --out "$ROOT/bench/results/extract.md" --json "$HERE/out/extract.json"
