#!/usr/bin/env bash
# Builds ringfence (release, in its own target dir), installs the peers if missing, prepares
# the corpora, runs every benchmark side by side and writes bench/results/latest.json (+ .md).
# Re-runnable: what is already installed or generated is kept.
#
#   bash bench/run.sh                 # everything
#   RUNS=3 ONLY=grep,glob bash bench/run.sh
#
# Knobs (environment): RUNS (timed runs per grep/glob/read case, default 5), WARMUP (1),
# LAT_CALLS (200), STARTS (20), ONLY (comma-separated sections: grep,glob,bigread,edit,
# latency,startup,tree), CORPUS_SRC (default: the cargo registry sources), WAIT_IDLE (seconds to
# wait for other work on the machine to finish before timing, default 300).
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
PEERS="$BENCH/.peers"
CORPUS="$BENCH/.corpus"
RESULTS="$BENCH/results"
OFFICIAL_PKG="@modelcontextprotocol/server-filesystem"
OFFICIAL_VERSION="${OFFICIAL_VERSION:-2026.8.31}"
RUSTFS_VERSION="${RUSTFS_VERSION:-0.4.5}"
export CARGO_TERM_COLOR=never

say() { printf '[run.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

mkdir -p "$PEERS/logs" "$CORPUS" "$RESULTS"

# --- tools -----------------------------------------------------------------------------------
if ! command -v rg >/dev/null 2>&1; then
    say "installing ripgrep (apt)"
    apt-get update -qq && apt-get install -y -qq ripgrep
fi
if ! command -v fdfind >/dev/null 2>&1 && ! command -v fd >/dev/null 2>&1; then
    say "installing fd (apt fd-find)"
    apt-get update -qq && apt-get install -y -qq fd-find
fi
if [[ ! -x /usr/bin/time ]]; then
    say "installing GNU time (apt)"
    apt-get update -qq && apt-get install -y -qq time
fi
FD_BIN="$(command -v fdfind || command -v fd)"
export FD_BIN
for tool in cargo node npm python3 find du wc; do
    command -v "$tool" >/dev/null 2>&1 || { say "missing required tool: $tool"; exit 1; }
done
PY=python3
command -v python3.11 >/dev/null 2>&1 && PY=python3.11

# --- ringfence (release) ---------------------------------------------------------------------
say "building ringfence (release, target/bench)"
( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence )
RINGFENCE="$ROOT/target/bench/release/ringfence"

# --- peers -----------------------------------------------------------------------------------
OFFICIAL_JS="$PEERS/npm/node_modules/$OFFICIAL_PKG/dist/index.js"
if [[ ! -f "$OFFICIAL_JS" ]] || ! grep -q "\"version\": \"$OFFICIAL_VERSION\"" \
        "$PEERS/npm/node_modules/$OFFICIAL_PKG/package.json"; then
    say "installing $OFFICIAL_PKG@$OFFICIAL_VERSION (npm) into bench/.peers/npm"
    mkdir -p "$PEERS/npm"
    [[ -f "$PEERS/npm/package.json" ]] || echo '{"name":"ringfence-bench-peers","private":true}' > "$PEERS/npm/package.json"
    npm install --prefix "$PEERS/npm" --no-audit --no-fund "$OFFICIAL_PKG@$OFFICIAL_VERSION" \
        > "$PEERS/logs/npm-install.log" 2>&1
fi

RUSTFS="$PEERS/cargo/bin/rust-mcp-filesystem"
if [[ ! -x "$RUSTFS" ]] || ! "$RUSTFS" --version 2>/dev/null | grep -q "$RUSTFS_VERSION"; then
    say "installing rust-mcp-filesystem $RUSTFS_VERSION (cargo install; compiles for several minutes)"
    ( unset CARGO_TARGET_DIR; cargo install rust-mcp-filesystem --version "$RUSTFS_VERSION" \
        --locked --force --root "$PEERS/cargo" ) > "$PEERS/logs/rustfs-install.log" 2>&1
fi

# --- corpora ---------------------------------------------------------------------------------
# A frozen copy of the cargo registry sources (the live directory changes as crates are
# fetched, and copying keeps the comparison stable across runs).
if [[ ! -f "$CORPUS/cargo-src.complete" ]]; then
    SRC="${CORPUS_SRC:-}"
    if [[ -z "$SRC" ]]; then
        SRC="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/index.crates.io-*/ 2>/dev/null | head -1 || true)"
    fi
    [[ -n "$SRC" && -d "$SRC" ]] || { say "no cargo registry sources found; set CORPUS_SRC"; exit 1; }
    say "copying corpus from $SRC"
    rm -rf "$CORPUS/cargo-src" "$CORPUS/cargo-src.tmp"
    cp -a "$SRC" "$CORPUS/cargo-src.tmp"
    mv "$CORPUS/cargo-src.tmp" "$CORPUS/cargo-src"
    touch "$CORPUS/cargo-src.complete"   # marker kept outside the searched tree
fi
say "generating synthetic files (skipped when present)"
"$PY" "$BENCH/prepare.py" "$CORPUS"

# --- run -------------------------------------------------------------------------------------
RF_DATA="$CORPUS/rf-data"
rm -rf "$RF_DATA" "$CORPUS/work"
mkdir -p "$RF_DATA"

GIT_REV="$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(cd "$ROOT" && git status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null)" ]]; then
    GIT_REV="$GIT_REV+dirty"
fi

LOAD1="$(cut -d' ' -f1 /proc/loadavg)"
if awk -v l="$LOAD1" 'BEGIN { exit !(l > 0.5) }'; then
    say "warning: load average is $LOAD1; other work on the machine will skew the timings"
fi
say "running benchmarks (ringfence $GIT_REV)"
"$PY" "$BENCH/bench.py" \
    --ringfence "$RINGFENCE" \
    --official-js "$OFFICIAL_JS" --official-version "$OFFICIAL_VERSION" \
    --rustfs "$RUSTFS" --rustfs-args="${RUSTFS_ARGS:---allow-write}" --rustfs-version "$RUSTFS_VERSION" \
    --git-rev "$GIT_REV" \
    --corpus "$CORPUS/cargo-src" \
    --big-file "$CORPUS/big/big.txt" \
    --edit-file "$CORPUS/edit/edit.txt" \
    --small-file "$CORPUS/small/small.txt" \
    --work "$CORPUS/work" \
    --rf-data "$RF_DATA" \
    --runs "${RUNS:-5}" --warmup "${WARMUP:-1}" \
    --lat-calls "${LAT_CALLS:-200}" --starts "${STARTS:-20}" \
    --tree "$CORPUS/tree" \
    --only "${ONLY:-grep,glob,bigread,edit,latency,startup,tree}" --wait-idle "${WAIT_IDLE:-300}" \
    --out "$RESULTS/latest.json"
say "wrote $RESULTS/latest.json and $RESULTS/latest.md"
