#!/usr/bin/env bash
# Follow-up delivery benchmark (bench/followups.py; results in bench/results/followups*.json,
# quoted by BENCHMARKS.md): delivery lateness (due → received by a webhook) with 100,000
# follow-ups pending and 1,000 falling due over a minute, and the scheduler's memory and
# idle CPU with 100,000 pending. Builds ringfence in release mode.
#
#   bash bench/followups.sh                 # SQLite, one scheduler
#   STORE=postgres bash bench/followups.sh  # PostgreSQL (a throwaway cluster, fsync on),
#                                           # with 1 and then 3 schedulers sharing it
#   PENDING=10000 DUE=200 DUE_SECS=20 bash bench/followups.sh
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
say() { printf '[followups.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
say "building ringfence (release, target/bench)"
( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence )
mkdir -p "$BENCH/results"
BIN="$ROOT/target/bench/release/ringfence"
ARGS=("${PENDING:-100000}" "${DUE:-1000}" "${DUE_SECS:-60}")
if [[ "${STORE:-sqlite}" != postgres ]]; then
    python3 "$BENCH/followups.py" "$BIN" "$BENCH/results/followups.json" "${ARGS[@]}"
    exit 0
fi
PG_DIR="$(mktemp -d -u /tmp/ringfence-bench-pg.XXXXXX)"
trap 'bash "$ROOT/scripts/postgres.sh" stop "$PG_DIR"' EXIT
# Durable, as SQLite is here (synchronous=FULL): the test cluster's fsync=off is for tests.
URL="$(PG_DURABLE=1 bash "$ROOT/scripts/postgres.sh" start "$PG_DIR")"
for n in 1 3; do
    say "PostgreSQL, $n scheduler(s)"
    DATABASE_URL="$URL" PG_DATA="$PG_DIR/data" SCHEDULERS=$n HEAD_START="${HEAD_START:-60}" \
        python3 "$BENCH/followups.py" "$BIN" "$BENCH/results/followups-postgres-$n.json" "${ARGS[@]}"
done
