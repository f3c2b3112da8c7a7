#!/usr/bin/env bash
# Runs every coverage-guided fuzz target (fuzz/fuzz_targets/) for a set time each and writes
# what ran and what it found to bench/results/fuzz.md. See SECURITY.md, "Fuzzing".
#
#   bash bench/fuzz.sh                  every target, FUZZ_SECS each
#   FUZZ_SECS=600 bash bench/fuzz.sh    longer
#   TARGETS="jwt path_resolution" bash bench/fuzz.sh
#   REPLAY=1 bash bench/fuzz.sh         only replay the committed seeds (a quick check)
#
# Installs cargo-fuzz (crates.io) if missing. The targets build on the stable toolchain with
# libFuzzer's coverage instrumentation and no sanitizer (`--sanitizer none`: address
# sanitizing needs a nightly compiler; ringfence's own crates forbid `unsafe` code), in
# release mode with debug assertions and overflow checks on. Each run starts from the
# committed seeds (fuzz/seeds/<target>) plus what earlier runs kept (fuzz/corpus/<target>,
# not committed); a crash or a timeout (a call running past 10 s) stops that target and
# leaves its input in fuzz/artifacts/<target>/ — replay it with
# `cd fuzz && cargo fuzz run --sanitizer none -O -a <target> <file>`.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FUZZ_SECS="${FUZZ_SECS:-120}"
REPLAY="${REPLAY:-0}"
CARGO_FUZZ_VERSION="0.13.2"
FLAGS=(--sanitizer none -O -a)
cd "$ROOT/fuzz"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "==> installing cargo-fuzz $CARGO_FUZZ_VERSION" >&2
    cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION"
fi

TARGETS="${TARGETS:-$(cargo fuzz list)}"
echo "==> building: $TARGETS" >&2
cargo fuzz build "${FLAGS[@]}" >&2

mkdir -p "$ROOT/bench/results"
REPORT="$ROOT/bench/results/fuzz.md"
{
    echo "# Fuzzing run ($(date -u +%Y-%m-%d), commit $(git -C "$ROOT" rev-parse --short HEAD))"
    echo
    if [[ "$REPLAY" == 1 ]]; then
        echo "Replay of the committed seeds only."
    else
        echo "Each target ran for ${FUZZ_SECS} s (\`FUZZ_SECS=${FUZZ_SECS} bash bench/fuzz.sh\`)."
    fi
    echo
    echo "| target | runs | coverage (edges) | corpus | result |"
    echo "|---|---:|---:|---:|---|"
} >"$REPORT"

FAILED=0
for t in $TARGETS; do
    corpus="corpus/$t"
    mkdir -p "$corpus" "artifacts/$t"
    cp -n "seeds/$t/"* "$corpus/" 2>/dev/null || true
    log="$(mktemp)"
    if [[ "$REPLAY" == 1 ]]; then
        args=(-runs=0)
    else
        args=(-max_total_time="$FUZZ_SECS")
    fi
    echo "==> $t" >&2
    rc=0
    cargo fuzz run "${FLAGS[@]}" "$t" "$corpus" -- \
        "${args[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" >"$log" 2>&1 || rc=$?
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo "?")
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || echo "?")
    size=$(find "$corpus" -type f | wc -l)
    if [[ $rc -eq 0 ]]; then
        result="no crash, no timeout"
    else
        FAILED=1
        found=$(grep -oE 'ERROR: libFuzzer: [a-z-]+|panicked at [^:]+:[0-9]+' "$log" | head -1 || true)
        result="**failed** (exit $rc): ${found:-see the log}; input in fuzz/artifacts/$t/"
        tail -40 "$log" >&2
    fi
    echo "| $t | $runs | $cov | $size | $result |" >>"$REPORT"
    rm -f "$log"
done

cat "$REPORT"
exit "$FAILED"
