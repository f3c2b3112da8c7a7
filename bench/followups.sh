#!/usr/bin/env bash
# Follow-up delivery benchmark (bench/followups.py; results in bench/results/followups.json,
# quoted by BENCHMARKS.md): delivery lateness (due → received by a webhook) with 100,000
# follow-ups pending and 1,000 falling due over a minute, and the scheduler's memory and
# idle CPU with 100,000 pending. Builds ringfence in release mode.
#
#   bash bench/followups.sh
#   PENDING=10000 DUE=200 DUE_SECS=20 bash bench/followups.sh
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
say() { printf '[followups.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
say "building ringfence (release, target/bench)"
( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence )
mkdir -p "$BENCH/results"
python3 "$BENCH/followups.py" "$ROOT/target/bench/release/ringfence" \
    "$BENCH/results/followups.json" "${PENDING:-100000}" "${DUE:-1000}" "${DUE_SECS:-60}"
