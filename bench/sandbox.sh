#!/usr/bin/env bash
# Per-command overhead of the shell sandbox beside plain spawning and bwrap
# (bench/sandbox.py; results in bench/results/sandbox.json, quoted by BENCHMARKS.md).
# Installs bubblewrap from the Debian archive when missing (needs root) and builds ringfence
# in release mode.
#
#   bash bench/sandbox.sh             # 300 rounds of each
#   ROUNDS=1000 bash bench/sandbox.sh
#   BLOCKS=1 bash bench/sandbox.sh   # each runner's rounds in a block (results/sandbox-blocks.json)
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
say() { printf '[sandbox.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

if ! command -v bwrap >/dev/null; then
    say "installing bubblewrap"
    apt-get install -y -q bubblewrap >/dev/null || say "bubblewrap unavailable: measuring without it"
fi
# The helper program alone (ringfence-sandbox's own copy of the small `ringfence-sandbox`
# executable: the same `helper_main`), which builds in a fraction of ringfence's time.
say "building the sandbox helper (release, target/bench)"
( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence-sandbox --bin sandbox-test-helper )
mkdir -p "$BENCH/results"
python3 "$BENCH/sandbox.py" "$ROOT/target/bench/release/sandbox-test-helper" \
    "$BENCH/results/sandbox${BLOCKS:+-blocks}.json" "${ROUNDS:-300}"
