#!/usr/bin/env bash
# Calendar listing benchmark (bench/calendar_list.py; results in bench/results/calendar.json,
# quoted by BENCHMARKS.md): list_calendar_events(days: 30) over 10,000 events in the local
# calendar and in a Radicale server, next to the Python iCalendar stack and the caldav
# package in the same run. Builds ringfence in release mode; uses the test venv (.venv,
# made by scripts/test.sh) for Radicale and the peers.
#
#   bash bench/calendar.sh
#   EVENTS=2000 RUNS=10 bash bench/calendar.sh
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
say() { printf '[calendar.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
if [[ ! -x "$ROOT/.venv/bin/python" ]]; then
    say "no .venv: run bash scripts/test.sh once (it installs radicale and caldav)"
    exit 2
fi
say "building ringfence (release, target/bench)"
( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence )
mkdir -p "$BENCH/results"
"$ROOT/.venv/bin/python" "$BENCH/calendar_list.py" "$ROOT/target/bench/release/ringfence" \
    "$BENCH/results/calendar.json" "${EVENTS:-10000}" "${RUNS:-30}"
