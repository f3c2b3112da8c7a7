#!/usr/bin/env bash
# web_fetch throughput beside mcp-server-fetch (bench/web_fetch.py; results in
# bench/results/web_fetch.json, quoted by BENCHMARKS.md). Installs mcp-server-fetch into a
# venv of its own (bench/.peers/fetch-venv) and builds ringfence in release mode.
#
#   bash bench/web_fetch.sh            # 3 rounds over the 130 pages
#   ROUNDS=5 bash bench/web_fetch.sh
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
VENV="$BENCH/.peers/fetch-venv"
PEER_VERSION="${PEER_VERSION:-2026.10.24}"
say() { printf '[web_fetch.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

say "building ringfence (release, target/bench)"
( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence )
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c "import mcp_server_fetch" 2>/dev/null; then
    say "installing mcp-server-fetch==$PEER_VERSION into $VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --disable-pip-version-check --quiet "mcp-server-fetch==$PEER_VERSION"
fi
mkdir -p "$BENCH/results"
python3 "$BENCH/web_fetch.py" "$ROOT/target/bench/release/ringfence" "$VENV/bin/python" \
    "$BENCH/results/web_fetch.json" "${ROUNDS:-3}"
