#!/usr/bin/env bash
# shellcheck disable=SC2317  # (the checks are called through `check`, which it does not follow)
# Fully static Linux builds of ringfence and ringfence-sandbox (musl libc), smoke-tested.
#
#   bash scripts/build-static.sh [x86_64] [aarch64] [-- CARGO-BUILD-ARGS...]
#
# Targets: x86_64 (x86_64-unknown-linux-musl, the default) and aarch64
# (aarch64-unknown-linux-musl). Runs on a Debian or Ubuntu x86_64 machine; a native build
# on an aarch64 machine works the same way. What it installs when missing:
#   - the Rust target (rustup target add);
#   - a C compiler for musl, which the bundled SQLite, ring and blake3 need:
#       x86_64:  `musl-gcc`, Debian's package musl-tools;
#       aarch64 on x86_64: `aarch64-linux-gnu-gcc` (package gcc-aarch64-linux-gnu, also the
#       linker) and the musl headers and `aarch64-linux-musl-gcc` of package musl-dev:arm64,
#       which needs Debian's multiarch: `dpkg --add-architecture arm64` (done here, once);
#   - for the smoke test of an aarch64 build on another machine: qemu-user-static.
# Without apt-get (or root or sudo) it stops and says what to install.
#
# The build uses the `dist` profile (release code plus line tables). Each binary is then
# split in two, written to OUT_DIR/<target>/ (default <cargo target dir>/static/<target>/):
#   ringfence, ringfence-sandbox   no debug info; the function symbols kept, so that a
#                                  backtrace names its functions
#   *.debug                        the line tables and the full symbol table, compressed;
#                                  kept beside the binary, backtraces also give file:line
#                                  (the binary points at it with .gnu_debuglink)
#
# Then, for each target, checks that the binaries are static (file, ldd, readelf), and runs
# `ringfence --version`, a one-shot `ringfence call list_directory`, a `run_shell_command`
# through the static ringfence-sandbox, and an MCP stdio handshake (initialize, tools/list)
# written by hand through a pipe. An aarch64 build on an x86_64 machine runs under
# qemu-user, without the shell call: the server's exec of the aarch64 helper fails there
# (Exec format error) unless the kernel's binfmt_misc hands it to qemu.
#
# Environment: PROFILE (default dist), OUT_DIR, CARGO_TARGET_DIR, SMOKE=0 to skip the smoke
# tests. Arguments after `--` go to `cargo build` (e.g. `-- --no-default-features`).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PROFILE=${PROFILE:-dist}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
OUT_BASE=${OUT_DIR:-$TARGET_DIR/static}
SMOKE=${SMOKE:-1}
[[ $TARGET_DIR == /* ]] || TARGET_DIR="$PWD/$TARGET_DIR"
[[ $OUT_BASE == /* ]] || OUT_BASE="$PWD/$OUT_BASE"
BINS=(ringfence ringfence-sandbox)

log() { printf 'build-static.sh: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}
mib() { awk -v b="$(stat -c %s "$1")" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }

targets=()
cargo_args=()
while (($#)); do
    case $1 in
    x86_64 | x86_64-unknown-linux-musl) targets+=(x86_64) ;;
    aarch64 | arm64 | aarch64-unknown-linux-musl) targets+=(aarch64) ;;
    --)
        shift
        cargo_args=("$@")
        break
        ;;
    -h | --help)
        sed -n '3,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
        exit 0
        ;;
    *) die "unknown argument '$1' (targets: x86_64, aarch64; cargo arguments after --)" ;;
    esac
    shift
done
((${#targets[@]})) || targets=(x86_64)

[[ $(uname -s) == Linux ]] || die "this script builds on Linux only (it needs a musl toolchain)"
HOST_ARCH=$(uname -m)
command -v cargo >/dev/null || die "cargo is not on PATH"
command -v rustup >/dev/null || die "rustup is not on PATH (needed to add the musl targets)"

# --- installing what is missing -------------------------------------------------------

# shellcheck source=scripts/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

add_rust_target() {
    local triple=$1
    rustup target list --installed | grep -qx "$triple" && return 0
    log "adding the Rust target $triple (rustup target add)"
    rustup target add "$triple" >&2 || die "rustup target add $triple failed"
}

# The C compiler (and, for a cross build, linker and binutils prefix) of a target. Sets
# CC_FOR, LINKER_FOR (empty: cargo's default), TOOL_PREFIX; returns 1 with REASON set when
# they cannot be had here.
REASON=""
setup_toolchain() {
    local arch=$1
    CC_FOR="" LINKER_FOR="" TOOL_PREFIX="" REASON=""
    if [[ $arch == "$HOST_ARCH" ]]; then
        # Native: Debian's musl-gcc wraps the system gcc with musl's headers and libc.
        if ! command -v musl-gcc >/dev/null; then
            apt_install musl-tools || true
        fi
        if ! command -v musl-gcc >/dev/null; then
            REASON="no C compiler for musl: install musl-gcc (Debian/Ubuntu: apt-get install musl-tools), or set CC_${arch}_unknown_linux_musl to a musl C compiler"
            return 1
        fi
        CC_FOR=musl-gcc
        return 0
    fi
    if [[ $HOST_ARCH == x86_64 && $arch == aarch64 ]]; then
        # Cross: Debian's aarch64 gcc, given musl's aarch64 headers by the
        # aarch64-linux-musl-gcc wrapper of musl-dev:arm64. The glibc headers of the cross gcc
        # alone do not do: SQLite then calls open64, fstat64, ... which static musl lacks.
        if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
            apt_install gcc-aarch64-linux-gnu binutils-aarch64-linux-gnu || true
        fi
        if ! command -v aarch64-linux-musl-gcc >/dev/null || [[ ! -d /usr/include/aarch64-linux-musl ]]; then
            if can_apt && command -v dpkg >/dev/null; then
                if ! dpkg --print-foreign-architectures | grep -qx arm64; then
                    log "adding Debian's arm64 architecture (dpkg --add-architecture arm64) for musl-dev:arm64"
                    if $SUDO dpkg --add-architecture arm64; then
                        APT_UPDATED=0
                        apt_update || true
                    fi
                fi
                apt_install musl-dev:arm64 || true
            fi
        fi
        if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
            REASON="no aarch64 cross compiler and linker: install gcc-aarch64-linux-gnu (Debian/Ubuntu)"
            return 1
        fi
        if ! command -v aarch64-linux-musl-gcc >/dev/null || [[ ! -d /usr/include/aarch64-linux-musl ]]; then
            REASON="no musl headers for aarch64: on Debian, dpkg --add-architecture arm64 && apt-get update && apt-get install musl-dev:arm64 (it brings aarch64-linux-musl-gcc); elsewhere an aarch64-linux-musl cross gcc, as CC_aarch64_unknown_linux_musl"
            return 1
        fi
        CC_FOR=aarch64-linux-musl-gcc
        LINKER_FOR=aarch64-linux-gnu-gcc
        TOOL_PREFIX=aarch64-linux-gnu-
        return 0
    fi
    REASON="building for $arch on a $HOST_ARCH machine is not set up in this script (only x86_64 -> aarch64, or native)"
    return 1
}

# How to run a binary of the target here: nothing (native) or qemu-user.
RUNNER=()
setup_runner() {
    local arch=$1
    RUNNER=()
    [[ $arch == "$HOST_ARCH" ]] && return 0
    local q
    for q in "qemu-$arch-static" "qemu-$arch"; do
        command -v "$q" >/dev/null && {
            RUNNER=("$q")
            return 0
        }
    done
    apt_install qemu-user-static || true
    for q in "qemu-$arch-static" "qemu-$arch"; do
        command -v "$q" >/dev/null && {
            RUNNER=("$q")
            return 0
        }
    done
    return 1
}

# --- building and splitting ---------------------------------------------------------

# split_debug TOOL_PREFIX SRC OUT_DIR NAME: OUT_DIR/NAME (function symbols only, debuglink)
# and OUT_DIR/NAME.debug (line tables + full symbol table, zlib-compressed).
split_debug() {
    local prefix=$1 src=$2 out=$3 name=$4
    local objcopy="${prefix}objcopy" nm="${prefix}nm" keep
    command -v "$objcopy" >/dev/null || die "$objcopy not found (binutils)"
    keep=$(mktemp)
    rm -f "$out/$name" "$out/$name.debug"
    "$objcopy" --only-keep-debug --compress-debug-sections=zlib "$src" "$out/$name.debug"
    # Text symbols (t, T, W): what a backtrace names. Data and local labels are dropped.
    "$nm" --defined-only --format=posix "$src" | awk '$2 ~ /^[tTwW]$/ { print $1 }' | sort -u >"$keep"
    (cd "$out" && "$objcopy" --strip-all --keep-symbols="$keep" --add-gnu-debuglink="$name.debug" "$src" "$name")
    rm -f "$keep"
}

# --- smoke tests ----------------------------------------------------------------------

FAILED=0
check() { # check DESCRIPTION COMMAND...: runs it, prints ok/FAILED
    local what=$1
    shift
    if "$@"; then
        printf '  ok      %s\n' "$what"
    else
        printf '  FAILED  %s\n' "$what"
        FAILED=1
    fi
}

is_static() {
    local prefix=$1 bin=$2 f
    f=$(file -b "$bin")
    printf '          file: %s\n' "$f"
    [[ $f == *"statically linked"* || $f == *"static-pie linked"* ]] || return 1
    # No program interpreter and no shared libraries needed.
    ! "${prefix}readelf" -lW "$bin" | grep -q 'INTERP' || return 1
    ! "${prefix}readelf" -dW "$bin" | grep -q '(NEEDED)' || return 1
}

ldd_static() {
    local out
    out=$(ldd "$1" 2>&1 || true)
    printf '          ldd: %s\n' "$out"
    [[ $out == *"statically linked"* || $out == *"not a dynamic executable"* ]]
}

# A clean environment for the smoke runs: nothing of the user's configuration or data.
smoke_env() {
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$SMOKE_DIR/home" TMPDIR="$SMOKE_DIR/tmp" \
        XDG_CONFIG_HOME="$SMOKE_DIR/home/.config" XDG_DATA_HOME="$SMOKE_DIR/home/.local/share" \
        RINGFENCE_LOG=warn "$@"
}

smoke_version() {
    local out
    out=$(smoke_env "${RUNNER[@]}" "$1" --version 2>&1) || {
        printf '          %s\n' "$out"
        return 1
    }
    printf '          %s\n' "$out"
    [[ $out == ringfence* ]]
}

smoke_list_directory() {
    local out
    out=$(smoke_env "${RUNNER[@]}" "$1" call list_directory '{"path":"."}' --root "$SMOKE_DIR/root" 2>&1) || {
        printf '          %s\n' "$out" | head -20
        return 1
    }
    printf '%s\n' "$out" | head -12 | sed 's/^/          /'
    [[ $out == *hello.txt* && $out == *notes* ]]
}

smoke_shell() {
    local out
    out=$(smoke_env RINGFENCE_SHELL_ENABLED=true "${RUNNER[@]}" "$1" call run_shell_command \
        '{"command":"echo static-ok; cat hello.txt"}' --root "$SMOKE_DIR/root" 2>&1) || {
        printf '%s\n' "$out" | head -20 | sed 's/^/          /'
        return 1
    }
    printf '%s\n' "$out" | head -12 | sed 's/^/          /'
    [[ $out == *static-ok* && $out == *hello* ]]
}

# MCP over stdio, by hand: initialize, notifications/initialized, tools/list, each a line on
# the server's stdin; read its stdout until the answer to tools/list, then close stdin.
smoke_mcp() {
    local bin=$1 line got_init=0 got_tools=0 ntools
    local err="$SMOKE_DIR/mcp.stderr"
    coproc MCP { smoke_env "${RUNNER[@]}" "$bin" serve "$SMOKE_DIR/root" 2>"$err"; }
    local to=${MCP[1]} from=${MCP[0]} pid=$MCP_PID
    printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"build-static.sh","version":"1"}}}' >&"$to"
    while IFS= read -r -t 60 line <&"$from"; do
        if [[ $line == *'"id":1'* && $line == *'"result"'* ]]; then
            got_init=1
            printf '          initialize -> %s\n' "$(grep -o '"serverInfo":{[^}]*}' <<<"$line" || echo "${line:0:160}")"
            break
        fi
    done
    if ((got_init)); then
        printf '%s\n' '{"jsonrpc":"2.0","method":"notifications/initialized"}' >&"$to"
        printf '%s\n' '{"jsonrpc":"2.0","id":2,"method":"tools/list"}' >&"$to"
        while IFS= read -r -t 60 line <&"$from"; do
            if [[ $line == *'"id":2'* ]]; then
                ntools=$(grep -o '"inputSchema"' <<<"$line" | wc -l)
                printf '          tools/list -> %s tools (%s)\n' "$ntools" \
                    "$(grep -o '"name":"[a-z_]*"' <<<"$line" | head -6 | sed 's/"name"://; s/"//g' | paste -sd, -),..."
                [[ $line == *'"list_directory"'* && $ntools -gt 0 ]] && got_tools=1
                break
            fi
        done
    fi
    exec {to}>&-
    local status=0
    wait "$pid" || status=$?
    printf '          server exit status after stdin closed: %s\n' "$status"
    if ! ((got_init && got_tools)); then
        sed 's/^/          stderr: /' "$err" | head -20
        return 1
    fi
}

# --- main -----------------------------------------------------------------------------

declare -A SUMMARY
overall=0
for arch in "${targets[@]}"; do
    triple="$arch-unknown-linux-musl"
    T=$(tr 'a-z-' 'A-Z_' <<<"$triple")
    t=${triple//-/_}
    log "== $triple"
    add_rust_target "$triple"
    if ! setup_toolchain "$arch"; then
        log "cannot build $triple here: $REASON"
        SUMMARY[$arch]="not built: $REASON"
        overall=1
        continue
    fi
    build_env=("CC_$t=${CC_FOR}")
    [[ -n $LINKER_FOR ]] && build_env+=("CARGO_TARGET_${T}_LINKER=$LINKER_FOR")
    [[ -n $TOOL_PREFIX ]] && build_env+=("AR_$t=${TOOL_PREFIX}ar")
    log "cargo build --profile $PROFILE --target $triple -p ringfence --bins ${cargo_args[*]:-}  (${build_env[*]})"
    start=$(date +%s)
    if ! (cd "$ROOT" && env "${build_env[@]}" CARGO_TARGET_DIR="$TARGET_DIR" \
        cargo build --locked --profile "$PROFILE" --target "$triple" -p ringfence --bins "${cargo_args[@]}"); then
        SUMMARY[$arch]="build failed (see cargo's output above)"
        overall=1
        continue
    fi
    secs=$(($(date +%s) - start))
    out="$OUT_BASE/$triple"
    mkdir -p "$out"
    for b in "${BINS[@]}"; do
        split_debug "$TOOL_PREFIX" "$TARGET_DIR/$triple/$PROFILE/$b" "$out" "$b"
    done

    echo
    echo "$triple: built in ${secs}s; in $out:"
    for b in "${BINS[@]}"; do
        printf '  %-24s %s   (%s: %s; unsplit build output %s)\n' "$b" "$(mib "$out/$b")" \
            "$b.debug" "$(mib "$out/$b.debug")" "$(mib "$TARGET_DIR/$triple/$PROFILE/$b")"
    done
    FAILED=0
    for b in "${BINS[@]}"; do
        check "$b is static" is_static "$TOOL_PREFIX" "$out/$b"
        [[ $arch == "$HOST_ARCH" ]] && check "ldd $b" ldd_static "$out/$b"
    done
    smoke_note=""
    if [[ $SMOKE == 1 ]]; then
        if setup_runner "$arch"; then
            SMOKE_DIR=$(mktemp -d)
            mkdir -p "$SMOKE_DIR/root/notes" "$SMOKE_DIR/home" "$SMOKE_DIR/tmp"
            echo hello >"$SMOKE_DIR/root/hello.txt"
            ((${#RUNNER[@]})) && echo "  (running under ${RUNNER[*]})"
            check "ringfence --version" smoke_version "$out/ringfence"
            check "ringfence call list_directory" smoke_list_directory "$out/ringfence"
            if ((${#RUNNER[@]})); then
                smoke_note="; run_shell_command not tried under qemu-user"
                echo "  skipped run_shell_command: under qemu-user the aarch64 helper cannot be exec'd (Exec format error, unless binfmt_misc runs it through qemu)"
            else
                check "ringfence call run_shell_command (through ringfence-sandbox)" smoke_shell "$out/ringfence"
            fi
            check "MCP stdio: initialize + tools/list" smoke_mcp "$out/ringfence"
            rm -rf "$SMOKE_DIR"
        else
            smoke_note="; not run: no qemu-$arch here to run it (Debian: qemu-user-static)"
            echo "  smoke tests skipped: no qemu-$arch to run an $arch binary on $HOST_ARCH"
        fi
    else
        smoke_note="; smoke tests skipped (SMOKE=0)"
    fi
    if ((FAILED)); then
        SUMMARY[$arch]="built in ${secs}s, checks FAILED$smoke_note"
        overall=1
    else
        SUMMARY[$arch]="built in ${secs}s, ringfence $(mib "$out/ringfence"), ringfence-sandbox $(mib "$out/ringfence-sandbox"), checks passed$smoke_note"
    fi
    echo
done

echo "summary:"
for arch in "${targets[@]}"; do
    printf '  %-28s %s\n' "$arch-unknown-linux-musl" "${SUMMARY[$arch]}"
done
exit $overall
