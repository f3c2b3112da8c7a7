#!/usr/bin/env bash
# Bounded HTTP load benchmark for `ringfence serve --http`: SESSIONS concurrent MCP sessions
# (closed loop, mixed read_file / grep / edit_file) for DURATION seconds on loopback, with
# bearer tokens for USERS users. Reports p50/p90/p99 latency, throughput and errors per tool
# (bench/loadgen), the server's peak memory (VmHWM) and CPU time, and the load generator's own
# CPU time (client and server share the machine). Writes bench/results/http_load.json.
#
#   bash bench/http_load.sh                         # 200 sessions x 60 s
#   SESSIONS=20 DURATION=10 bash bench/http_load.sh # smoke run
#   PEER=1 bash bench/http_load.sh                  # also the official filesystem server behind mcp-proxy
#
# Knobs (environment):
#   SESSIONS (200)  DURATION (60, measured seconds)  WARMUP (5, seconds before the window)
#   USERS (20, bearer tokens; sessions take them round-robin)
#   MIX (read=60,grep=25,edit=15)  CLIENT_THREADS (2, loadgen runtime threads)
#   LIMITS_BLOCK (1: write `[http.limits]` with every limit disabled; 0: leave it out, for a
#                 server that does not know the key yet; default: probe the binary)
#   SERVER_BIN (use this binary instead of building target/bench/release/ringfence; SERVER_REV
#               names its commit in the JSON)
#   PEER (0; 1 adds a comparison: ringfence and the official server behind mcp-proxy, both
#         with the read/edit mix PEER_MIX (read=80,edit=20) on files both return whole)
#   OUT (bench/results/http_load.json)  KEEP_RUN_DIR (1 keeps the temporary run directory)
#   STORE (sqlite; postgres: every instance on one throwaway PostgreSQL cluster, durable,
#          a new database per run, sessions shared through it)
#   INSTANCES (1; N starts N servers and spreads the sessions over them round-robin)
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$BENCH/.." && pwd)"
PEERS="$BENCH/.peers"
CORPUS="$BENCH/.corpus/http"
WS="$CORPUS/ws"
RESULTS="$BENCH/results"
OUT="${OUT:-$RESULTS/http_load.json}"

SESSIONS="${SESSIONS:-200}"
DURATION="${DURATION:-60}"
WARMUP="${WARMUP:-5}"
USERS="${USERS:-20}"
MIX="${MIX:-read=60,grep=25,edit=15}"
PEER_MIX="${PEER_MIX:-read=80,edit=20}"
CLIENT_THREADS="${CLIENT_THREADS:-2}"
PEER="${PEER:-0}"
STORE="${STORE:-sqlite}"
INSTANCES="${INSTANCES:-1}"
OFFICIAL_PKG="@modelcontextprotocol/server-filesystem"
OFFICIAL_VERSION="${OFFICIAL_VERSION:-2026.8.31}"
MCP_PROXY_VERSION="${MCP_PROXY_VERSION:-6.7.19}"
export CARGO_TERM_COLOR=never

say() { printf '[http_load.sh %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in cargo python3 curl; do
    command -v "$tool" >/dev/null 2>&1 || { say "missing required tool: $tool"; exit 1; }
done
mkdir -p "$RESULTS" "$CORPUS"

# --- builds ----------------------------------------------------------------------------------
if [[ -n "${SERVER_BIN:-}" ]]; then
    RINGFENCE="$SERVER_BIN"
    say "using $RINGFENCE (SERVER_BIN)"
else
    say "building ringfence (release, target/bench)"
    ( cd "$ROOT" && CARGO_TARGET_DIR="$ROOT/target/bench" cargo build --release -p ringfence )
    RINGFENCE="$ROOT/target/bench/release/ringfence"
fi
say "building the load generator (release, target/loadgen)"
CARGO_TARGET_DIR="$ROOT/target/loadgen" cargo build --release --manifest-path "$BENCH/loadgen/Cargo.toml"
LOADGEN="$ROOT/target/loadgen/release/loadgen"

# --- corpus ----------------------------------------------------------------------------------
# ws/read: 40 shared files of 2-100 KB to read; ws/grep: 400 files (~1.6 MB) in 20 directories
# to search; ws/sessions/sNNN/notes.txt: one file per session to edit (rewritten every run).
say "preparing the corpus in bench/.corpus/http"
python3 - "$CORPUS" "$SESSIONS" <<'PY'
import os, random, sys
corpus, sessions = sys.argv[1], int(sys.argv[2])
ws = os.path.join(corpus, "ws")
words = ("alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega vector "
         "buffer stream parser token cursor window handler config request reply session "
         "index cache block frame record entry value state queue").split()

def line(rng, n):
    return " ".join(rng.choice(words) for _ in range(n))

def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)

marker = os.path.join(corpus, "shared.complete")
if not os.path.exists(marker):
    rng = random.Random(42)
    # Shared read files: sizes spread log-uniformly from 2 KB to 100 KB, ~80-byte lines.
    sizes = [int(2048 * (50 ** (i / 39))) for i in range(40)]
    small = []
    for i, size in enumerate(sizes):
        lines, total = [], 0
        while total < size:
            l = f"{len(lines) + 1:05d} " + line(rng, 10)
            lines.append(l)
            total += len(l) + 1
        rel = f"read/f{i:03d}.txt"
        write(os.path.join(ws, rel), "\n".join(lines) + "\n")
        # Files both servers return whole (ringfence caps a read at 500 lines / 30,000 chars).
        if total < 25000 and len(lines) < 450:
            small.append(rel)
    write(os.path.join(corpus, "read-list.txt"), "\n".join(f"read/f{i:03d}.txt" for i in range(40)) + "\n")
    write(os.path.join(corpus, "read-list-small.txt"), "\n".join(small) + "\n")
    # Grep tree: 20 dirs x 20 files x ~50 lines. Planted: a rare token (5 lines), a
    # function-like regex (~60 lines), and TODO (~240 lines: over grep's 100-match cap).
    for d in range(20):
        for f in range(20):
            n = d * 20 + f
            out = []
            for k in range(50):
                l = line(rng, 8)
                if n % 80 == 7 and k == 10:
                    l += " needle_quartz_rare"
                if (n * 50 + k) % 331 == 0:
                    l = f"fn {rng.choice(words)}_handler(req: Request) -> Reply {{"
                if (n * 50 + k) % 83 == 0:
                    l += "  // TODO: " + line(rng, 3)
                out.append(l)
            write(os.path.join(ws, f"grep/d{d:02d}/m{n:03d}.txt"), "\n".join(out) + "\n")
    open(marker, "w").close()

# Per-session edit files: regenerated every run (a marker line toggled by edit_file).
sdir = os.path.join(ws, "sessions")
if os.path.isdir(sdir):
    for name in os.listdir(sdir):
        p = os.path.join(sdir, name, "notes.txt")
        if os.path.exists(p):
            os.remove(p)
rng = random.Random(7)
for s in range(sessions):
    body = [f"# notes of session {s:03d}"] + [line(rng, 9) for _ in range(30)]
    body.insert(15, "marker: off")
    write(os.path.join(sdir, f"s{s:03d}", "notes.txt"), "\n".join(body) + "\n")
PY
GREP_PATTERNS=(--grep-pattern 'needle_[a-z]+_rare' --grep-pattern 'fn [a-z]+_handler\(' --grep-pattern 'TODO')

# --- helpers ---------------------------------------------------------------------------------
RUN="$(mktemp -d "${TMPDIR:-/tmp}/ringfence-http-load.XXXXXX")"
SERVER_PID=""
SERVER_PIDS=()
SAMPLER_PID=""
PG_DIR=""
cleanup() {
    [[ -n "$SAMPLER_PID" ]] && kill "$SAMPLER_PID" 2>/dev/null || true
    [[ -n "$SERVER_PID" ]] && kill -TERM "$SERVER_PID" 2>/dev/null || true
    for p in "${SERVER_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    [[ -n "$PG_DIR" ]] && bash "$ROOT/scripts/postgres.sh" stop "$PG_DIR" >/dev/null 2>&1 || true
    if [[ "${KEEP_RUN_DIR:-0}" == 1 ]]; then say "run directory kept: $RUN"; else rm -rf "$RUN"; fi
}
trap cleanup EXIT

CLK_TCK="$(getconf CLK_TCK)"
# user and system CPU seconds of a process so far
proc_cpu() { awk -v t="$CLK_TCK" '{ sub(/^.*\) /, ""); printf "%.2f %.2f\n", $12 / t, $13 / t }' "/proc/$1/stat"; }
proc_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
# VmRSS of the given processes every second, one line each: seconds, pid, KiB
start_sampler() {
    ( t0=$(date +%s.%N)
      while :; do
          for p in "$@"; do
              r=$(awk '$1 == "VmRSS:" { print $2 }' "/proc/$p/status" 2>/dev/null) || r=""
              [[ -n "$r" ]] && printf '%s %s %s\n' "$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')" "$p" "$r"
          done
          sleep 1
      done ) > "$RUN/rss.txt" 2>/dev/null &
    SAMPLER_PID=$!
}
stop_sampler() { [[ -n "$SAMPLER_PID" ]] && kill "$SAMPLER_PID" 2>/dev/null; wait "$SAMPLER_PID" 2>/dev/null || true; SAMPLER_PID=""; }
wait_url() { # URL of the health check, pid that must stay alive
    for _ in $(seq 1 200); do
        curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# --- ringfence configuration -----------------------------------------------------------------
say "generating $USERS bearer tokens"
: > "$RUN/tokens.txt"
{
    echo "# generated by bench/http_load.sh for one run"
    echo "[http]"
    echo "tokens = ["
    for i in $(seq 1 "$USERS"); do
        tok="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
        echo "$tok" >> "$RUN/tokens.txt"
        hash="$(printf '%s' "$tok" | "$RINGFENCE" token-hash)"
        printf '  { user = "u%02d", hash = "%s" },\n' "$i" "$hash"
    done
    echo "]"
} > "$RUN/config.base.toml"
LIMITS_TOML='
# The benchmark measures the server, not the per-user limiter: every limit disabled (0).
[http.limits]
concurrent = 0
rate = 0'
if [[ -z "${LIMITS_BLOCK:-}" ]]; then
    # Probe: does this binary accept [http.limits]? (Unknown keys are a configuration error.)
    { cat "$RUN/config.base.toml"; echo "$LIMITS_TOML"; } > "$RUN/probe.toml"
    if "$RINGFENCE" --config "$RUN/probe.toml" --data-dir "$RUN/probe-data" tools >/dev/null 2>"$RUN/probe.err"; then
        LIMITS_BLOCK=1
    else
        LIMITS_BLOCK=0
        say "this ringfence does not accept [http.limits] yet ($(head -c 200 "$RUN/probe.err" | tr '\n' ' ')); leaving it out"
    fi
fi
cp "$RUN/config.base.toml" "$RUN/config.toml"
[[ "$LIMITS_BLOCK" == 1 ]] && echo "$LIMITS_TOML" >> "$RUN/config.toml"

GIT_REV="$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "${SERVER_BIN:-}" ]]; then
    GIT_REV="${SERVER_REV:-unknown (SERVER_BIN)}"
elif [[ -n "$(cd "$ROOT" && git status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null)" ]]; then
    GIT_REV="$GIT_REV+dirty"
fi
RF_VERSION="$("$RINGFENCE" --version 2>/dev/null || echo unknown)"

# PostgreSQL (STORE=postgres): one durable throwaway cluster for the whole benchmark.
PG_URL=""
if [[ "$STORE" == postgres ]]; then
    PG_DIR="$(mktemp -d -u "${TMPDIR:-/tmp}/ringfence-bench-pg.XXXXXX")"
    say "starting a throwaway PostgreSQL cluster (fsync on)"
    PG_URL="$(PG_DURABLE=1 bash "$ROOT/scripts/postgres.sh" start "$PG_DIR")"
fi
# CPU seconds (user+system) of the database's processes so far (the server and its
# connections, which the pools keep open through a run).
db_cpu() {
    [[ -n "$PG_DIR" ]] || { echo 0; return; }
    local pm; pm="$(head -1 "$PG_DIR/data/postmaster.pid")"
    local total=0 p
    for p in "$pm" $(pgrep -P "$pm"); do
        total="$(awk -v t="$CLK_TCK" -v acc="$total" '{ sub(/^.*\) /, ""); printf "%.2f", acc + ($12 + $13) / t }' "/proc/$p/stat" 2>/dev/null || echo "$total")"
    done
    echo "$total"
}

# One ringfence run: $1 label, $2 mix, $3 read list, then extra loadgen arguments. INSTANCES
# servers (each its own data directory; with STORE=postgres all on one new database).
run_ringfence() {
    local label="$1" mix="$2" list="$3"; shift 3
    local log="$RUN/server-$label.log"
    python3 - "$CORPUS" "$SESSIONS" <<'PY'
import os, sys
corpus, sessions = sys.argv[1], int(sys.argv[2])
for s in range(sessions):
    p = os.path.join(corpus, "ws", "sessions", f"s{s:03d}", "notes.txt")
    t = open(p).read().replace("marker: on", "marker: off")
    open(p, "w").write(t)
PY
    sync   # no writeback of an earlier run's files during this one
    local store_env=()
    if [[ -n "$PG_URL" ]]; then
        local db="bench_${label//[^a-zA-Z0-9]/_}_$RANDOM"
        psql -X -q "$PG_URL" -c "CREATE DATABASE $db" >/dev/null
        store_env=(RINGFENCE_DATABASE_URL="$(python3 -c 'import re,sys; print(re.sub(r"(postgres(?:ql)?://[^/?]*)(/[^?]*)?", lambda m: m.group(1) + "/" + sys.argv[2], sys.argv[1], count=1))' "$PG_URL" "$db")")
    fi
    local urls=() n port data
    SERVER_PIDS=()
    for n in $(seq 1 "$INSTANCES"); do
        data="$RUN/data-$label-$n"
        rm -rf "$data"; mkdir -p "$data"
        port="$(free_port)"
        say "[$label] starting ringfence $n/$INSTANCES on 127.0.0.1:$port (store: $STORE)"
        env "${store_env[@]}" RINGFENCE_LOG="${RINGFENCE_LOG:-warn}" "$RINGFENCE" --config "$RUN/config.toml" \
            --data-dir "$data" serve "$WS" --http "127.0.0.1:$port" 2> "$log.$n" &
        SERVER_PIDS+=($!)
        wait_url "http://127.0.0.1:$port/healthz" "$!" || { say "ringfence did not come up:"; cat "$log.$n" >&2; exit 1; }
        urls+=(--url "http://127.0.0.1:$port/mcp")
    done
    SERVER_PID="${SERVER_PIDS[0]}"
    sum_cpu() { local u=0 s=0 p c; for p in "${SERVER_PIDS[@]}"; do c="$(proc_cpu "$p")"; u="$(awk -v a="$u" -v b="${c% *}" 'BEGIN { printf "%.2f", a + b }')"; s="$(awk -v a="$s" -v b="${c#* }" 'BEGIN { printf "%.2f", a + b }')"; done; echo "$u $s"; }
    sum_kib() { local t=0 p; for p in "${SERVER_PIDS[@]}"; do t=$(( t + $(proc_kib "$p" "$1") )); done; echo "$t"; }
    local cpu0 hwm0 load0 dbcpu0; cpu0="$(sum_cpu)"; hwm0="$(sum_kib VmHWM)"; dbcpu0="$(db_cpu)"
    load0="$(cut -d' ' -f1-3 /proc/loadavg)"
    start_sampler "${SERVER_PIDS[@]}"
    say "[$label] loadgen: $SESSIONS sessions over $INSTANCES instance(s), ${DURATION} s (+${WARMUP} s warm-up), mix $mix"
    local rc=0
    "$LOADGEN" "${urls[@]}" --sessions "$SESSIONS" --duration-secs "$DURATION" \
        --warmup-secs "$WARMUP" --tokens-file "$RUN/tokens.txt" --mix "$mix" --read-list "$list" \
        --threads "$CLIENT_THREADS" --label "$label" --out "$RUN/loadgen-$label.json" "$@" || rc=$?
    local cpu1 hwm1 rss1 load1 dbcpu1; cpu1="$(sum_cpu)"; dbcpu1="$(db_cpu)"
    hwm1="$(sum_kib VmHWM)"; rss1="$(sum_kib VmRSS)"
    load1="$(cut -d' ' -f1-3 /proc/loadavg)"
    stop_sampler
    local src=0 p
    for p in "${SERVER_PIDS[@]}"; do kill -TERM "$p"; done
    for p in "${SERVER_PIDS[@]}"; do wait "$p" || src=$?; done
    SERVER_PID=""; SERVER_PIDS=()
    cat "$log".* > "$log"
    python3 - "$RUN" "$label" "$rc" "$src" "$cpu0" "$cpu1" "$hwm0" "$hwm1" "$rss1" "$load0" "$load1" "$log" "$RUN/data-$label-1" "$STORE" "$INSTANCES" "$dbcpu0" "$dbcpu1" <<'PY'
import json, os, re, sys
run, label, rc, src, cpu0, cpu1, hwm0, hwm1, rss1, load0, load1, log, data, store, instances, db0, db1 = sys.argv[1:]
u0, s0 = map(float, cpu0.split()); u1, s1 = map(float, cpu1.split())
rss = []
p = os.path.join(run, "rss.txt")
for line in open(p):
    t, _pid, kib = line.split()
    rss.append([float(t), int(kib)])
os.remove(p)
text = open(log, errors="replace").read()
problems = [l for l in text.splitlines() if re.search(r"\b(WARN|ERROR)\b", l)]
spill = os.path.join(data, "tool-output")
spill_files = sum(len(f) for _, _, f in os.walk(spill)) if os.path.isdir(spill) else 0
audit = os.path.join(data, "audit")
audit_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(audit) for f in fs) if os.path.isdir(audit) else 0
json.dump({
    "exit_code_loadgen": int(rc), "exit_code_server": int(src),
    "store": store, "instances": int(instances),
    "server": {
        "peak_rss_kib": int(hwm1), "peak_rss_after_startup_kib": int(hwm0), "rss_at_end_kib": int(rss1),
        "cpu_user_s": round(u1 - u0, 2), "cpu_sys_s": round(s1 - s0, 2),
        "database_cpu_s": round(float(db1) - float(db0), 2),
        "rss_timeline_kib": rss[::max(1, len(rss) // 120)],
        "log_warnings_errors": len(problems), "log_sample": problems[:10],
        "spill_files_written": spill_files, "audit_bytes": audit_bytes,
    },
    "loadavg_start": load0, "loadavg_end": load1,
}, open(os.path.join(run, f"server-{label}.json"), "w"))
PY
    # The data directories hold the run's spill files (a copy of every capped output; GBs at
    # full load): gone before the next run unless kept.
    [[ "${KEEP_RUN_DIR:-0}" == 1 ]] || rm -rf "$RUN"/data-"$label"-*
    say "[$label] servers' peak RSS $((hwm1 / 1024)) MiB (VmHWM, summed), loadgen exit $rc, server exit $src"
}

# The official server behind mcp-proxy (one node process for the server, one for the bridge;
# every HTTP session is multiplexed onto the one stdio connection).
run_official() {
    local label="$1" mix="$2" list="$3"; shift 3
    local log="$RUN/server-$label.log"
    local proxy_js="$PEERS/npm/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs"
    local official_js="$PEERS/npm/node_modules/$OFFICIAL_PKG/dist/index.js"
    python3 - "$CORPUS" "$SESSIONS" <<'PY'
import os, sys
corpus, sessions = sys.argv[1], int(sys.argv[2])
for s in range(sessions):
    p = os.path.join(corpus, "ws", "sessions", f"s{s:03d}", "notes.txt")
    t = open(p).read().replace("marker: on", "marker: off")
    open(p, "w").write(t)
PY
    sync
    local port; port="$(free_port)"
    say "[$label] starting mcp-proxy $MCP_PROXY_VERSION + $OFFICIAL_PKG $OFFICIAL_VERSION on 127.0.0.1:$port"
    # --no-eventStore: no per-session replay buffer (ringfence keeps none either).
    node "$proxy_js" --host 127.0.0.1 --port "$port" --server stream --no-eventStore \
        -- node "$official_js" "$WS" > "$log" 2>&1 &
    SERVER_PID=$!
    # mcp-proxy has no health route: wait for the port, then for the child server.
    local up=0
    for _ in $(seq 1 200); do
        if curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then up=1; break; fi
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.05
    done
    [[ "$up" == 1 ]] || { say "mcp-proxy did not come up:"; cat "$log" >&2; exit 1; }
    local child; child="$(pgrep -P "$SERVER_PID" -f "$official_js" | head -1)"
    [[ -n "$child" ]] || { say "official server process not found under mcp-proxy"; cat "$log" >&2; exit 1; }
    local pcpu0 ccpu0 load0; pcpu0="$(proc_cpu "$SERVER_PID")"; ccpu0="$(proc_cpu "$child")"
    load0="$(cut -d' ' -f1-3 /proc/loadavg)"
    start_sampler "$SERVER_PID" "$child"
    say "[$label] loadgen: $SESSIONS sessions, ${DURATION} s (+${WARMUP} s warm-up), mix $mix"
    local rc=0
    "$LOADGEN" --url "http://127.0.0.1:$port/mcp" --sessions "$SESSIONS" --duration-secs "$DURATION" \
        --warmup-secs "$WARMUP" --flavor official --path-prefix "$WS/" --mix "$mix" --read-list "$list" \
        --threads "$CLIENT_THREADS" --label "$label" --out "$RUN/loadgen-$label.json" "$@" || rc=$?
    local pcpu1 ccpu1 phwm chwm load1; pcpu1="$(proc_cpu "$SERVER_PID")"; ccpu1="$(proc_cpu "$child")"
    phwm="$(proc_kib "$SERVER_PID" VmHWM)"; chwm="$(proc_kib "$child" VmHWM)"
    load1="$(cut -d' ' -f1-3 /proc/loadavg)"
    stop_sampler
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
    kill -TERM "$child" 2>/dev/null || true
    SERVER_PID=""
    python3 - "$RUN" "$label" "$rc" "$pcpu0" "$pcpu1" "$ccpu0" "$ccpu1" "$phwm" "$chwm" "$load0" "$load1" <<'PY'
import json, os, sys
run, label, rc, p0, p1, c0, c1, phwm, chwm, load0, load1 = sys.argv[1:]
pu0, ps0 = map(float, p0.split()); pu1, ps1 = map(float, p1.split())
cu0, cs0 = map(float, c0.split()); cu1, cs1 = map(float, c1.split())
rss = [l.split() for l in open(os.path.join(run, "rss.txt"))]
os.remove(os.path.join(run, "rss.txt"))
json.dump({
    "exit_code_loadgen": int(rc),
    "server": {
        "peak_rss_kib": int(phwm) + int(chwm),
        "bridge_peak_rss_kib": int(phwm), "official_peak_rss_kib": int(chwm),
        "cpu_user_s": round(pu1 - pu0 + cu1 - cu0, 2), "cpu_sys_s": round(ps1 - ps0 + cs1 - cs0, 2),
        "bridge_cpu_s": round(pu1 - pu0 + ps1 - ps0, 2), "official_cpu_s": round(cu1 - cu0 + cs1 - cs0, 2),
        "rss_timeline_kib": [[float(t), int(p), int(k)] for t, p, k in rss][::max(1, len(rss) // 120)],
    },
    "loadavg_start": load0, "loadavg_end": load1,
}, open(os.path.join(run, f"server-{label}.json"), "w"))
PY
    say "[$label] bridge+server peak RSS $(( (phwm + chwm) / 1024 )) MiB, loadgen exit $rc"
}

# --- runs ------------------------------------------------------------------------------------
LOAD1="$(cut -d' ' -f1 /proc/loadavg)"
if awk -v l="$LOAD1" 'BEGIN { exit !(l > 0.5) }'; then
    say "warning: load average is $LOAD1; other work on the machine will skew the figures"
fi
RUNS=(main)
run_ringfence main "$MIX" "$CORPUS/read-list.txt" "${GREP_PATTERNS[@]}"

if [[ "$PEER" == 1 ]]; then
    command -v node >/dev/null 2>&1 || { say "PEER=1 needs node and npm"; exit 1; }
    for pkg in "$OFFICIAL_PKG@$OFFICIAL_VERSION" "mcp-proxy@$MCP_PROXY_VERSION"; do
        name="${pkg%@*}"
        if ! grep -qs "\"version\": \"${pkg##*@}\"" "$PEERS/npm/node_modules/$name/package.json"; then
            say "installing $pkg (npm) into bench/.peers/npm"
            mkdir -p "$PEERS/npm" "$PEERS/logs"
            [[ -f "$PEERS/npm/package.json" ]] || echo '{"name":"ringfence-bench-peers","private":true}' > "$PEERS/npm/package.json"
            npm install --prefix "$PEERS/npm" --no-audit --no-fund "$pkg" >> "$PEERS/logs/npm-install.log" 2>&1
        fi
    done
    # Same read/edit mix for both (the official server has no content search), on files
    # both return whole; ringfence keeps its bearer tokens, mcp-proxy runs without a key.
    run_ringfence ringfence-readedit "$PEER_MIX" "$CORPUS/read-list-small.txt"
    run_official official-readedit "$PEER_MIX" "$CORPUS/read-list-small.txt"
    RUNS+=(ringfence-readedit official-readedit)
fi

# --- result ----------------------------------------------------------------------------------
python3 - "$RUN" "$OUT" "$GIT_REV" "$RF_VERSION" "$LIMITS_BLOCK" "$USERS" "${RUNS[@]}" <<'PY'
import json, os, platform, sys, time
run, out, rev, version, limits, users, *labels = sys.argv[1:]
result = {
    "benchmark": "http_load",
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "ringfence": {"git_rev": rev, "version": version, "http_limits_block": limits == "1", "users": int(users)},
    "machine": {"nproc": os.cpu_count(), "kernel": platform.release()},
    "runs": {},
}
for label in labels:
    r = {}
    p = os.path.join(run, f"loadgen-{label}.json")
    if os.path.exists(p):
        r["loadgen"] = json.load(open(p))
    p = os.path.join(run, f"server-{label}.json")
    if os.path.exists(p):
        r.update(json.load(open(p)))
    result["runs"][label] = r
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as f:
    json.dump(result, f, indent=1)
    f.write("\n")
print(f"{'run':<20} {'calls/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'peak RSS MiB':>13} {'server CPU s':>13} {'loadgen CPU s':>14}", file=sys.stderr)
for label, r in result["runs"].items():
    lg = r.get("loadgen", {}); o = lg.get("overall", {}); s = r.get("server", {})
    errs = lg.get("all_phases", {}).get("errors", "?")
    cpu = lg.get("loadgen_cpu", {})
    print(f"{label:<20} {o.get('throughput_per_s', 0):>9.1f} {o.get('p50_ms', 0):>8.2f} {o.get('p99_ms', 0):>8.2f} {errs:>7} "
          f"{s.get('peak_rss_kib', 0) / 1024:>13.1f} {s.get('cpu_user_s', 0) + s.get('cpu_sys_s', 0):>13.1f} "
          f"{cpu.get('user_s', 0) + cpu.get('sys_s', 0):>14.1f}", file=sys.stderr)
PY
say "wrote ${OUT#"$ROOT/"}"
