#!/usr/bin/env bash
# Several instances sharing one PostgreSQL (issue 18): HTTP throughput with 1, 2 and 3
# `serve --http` instances on one throwaway cluster (the sessions spread round-robin over
# them, every MCP session and its events in the database), beside one instance on the
# embedded SQLite default — whose difference to one PostgreSQL instance is the cost of the
# shared session store per call. Each run is bench/http_load.sh; results in
# bench/results/instances-*.json and the table in bench/results/instances.json.
#
#   bash bench/instances.sh
#   SESSIONS=30 DURATION=10 bash bench/instances.sh    # smoke run
#
# Knobs: SESSIONS (60), DURATION (30), MIX (read=80,edit=20: reads record what was read,
# edits check it and write the edit journal — the state a shared session keeps).
set -euo pipefail
BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RESULTS="$BENCH/results"
export SESSIONS="${SESSIONS:-60}" DURATION="${DURATION:-30}" MIX="${MIX:-read=80,edit=20}"
runs=("sqlite 1" "postgres 1" "postgres 2" "postgres 3")
for r in "${runs[@]}"; do
    set -- $r
    STORE="$1" INSTANCES="$2" OUT="$RESULTS/instances-$1-$2.json" bash "$BENCH/http_load.sh"
done
python3 - "$RESULTS" "${runs[@]}" <<'PY'
import json, os, sys
results, *runs = sys.argv[1:]
table = []
for r in runs:
    store, n = r.split()
    doc = json.load(open(os.path.join(results, f"instances-{store}-{n}.json")))
    main = doc["runs"]["main"]
    lg, srv = main["loadgen"], main["server"]
    o = lg["overall"]
    calls = o.get("calls") or round(o["throughput_per_s"] * lg["params"]["duration_s"])
    cpu = srv["cpu_user_s"] + srv["cpu_sys_s"]
    table.append({
        "store": store, "instances": int(n), "calls_per_s": o["throughput_per_s"],
        "p50_ms": o["p50_ms"], "p99_ms": o["p99_ms"], "errors": lg["all_phases"]["errors"],
        "servers_cpu_s": round(cpu, 1), "database_cpu_s": srv.get("database_cpu_s", 0.0),
        "cpu_ms_per_call": round(1000 * (cpu + srv.get("database_cpu_s", 0.0)) / max(calls, 1), 3),
        "servers_peak_rss_mib": round(srv["peak_rss_kib"] / 1024, 1),
    })
json.dump({"runs": table}, open(os.path.join(results, "instances.json"), "w"), indent=1)
print(f"{'store':<9} {'inst':>4} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} {'srv CPU s':>9} {'db CPU s':>8} {'CPU ms/call':>11} {'RSS MiB':>8}")
for t in table:
    print(f"{t['store']:<9} {t['instances']:>4} {t['calls_per_s']:>8.1f} {t['p50_ms']:>7.2f} {t['p99_ms']:>7.2f} {t['errors']:>6} "
          f"{t['servers_cpu_s']:>9.1f} {t['database_cpu_s']:>8.1f} {t['cpu_ms_per_call']:>11.3f} {t['servers_peak_rss_mib']:>8.1f}")
PY
