#!/usr/bin/env bash
# ringfence for macOS and Windows, from this Linux machine.
#
#   bash scripts/cross.sh check [TARGET...]   type-check and lint (cargo clippy) for other platforms
#   bash scripts/cross.sh build [TARGET...]   release binaries, sizes printed at the end
#   bash scripts/cross.sh symbols             the Apple framework symbols the build calls
#   bash scripts/cross.sh wine                the private-file helpers run as Windows code
#
# Targets (default for `check`: x86_64-apple-darwin and x86_64-pc-windows-gnu; for `build`:
# those, aarch64-apple-darwin, and the static Linux build of scripts/build-static.sh):
#   x86_64-apple-darwin  aarch64-apple-darwin  x86_64-pc-windows-gnu  x86_64-unknown-linux-musl
#
# `check` is what the test command runs, so that a Linux-only call cannot slip back into
# code that every platform compiles: the whole workspace with its tests for macOS, the
# libraries, binaries and examples for Windows (the test suites use Unix fixtures; they run
# on Linux).
#
# What it installs when missing (nothing system-wide):
#   - the Rust targets (rustup target add);
#   - cargo-zigbuild and zig (the PyPI packages cargo-zigbuild and ziglang, pinned below) in
#     a virtual environment at .cache/xbuild: zig is the C compiler and linker for the other
#     targets (the bundled SQLite, ring and blake3 are C and assembly).
# No Apple SDK is used (none can be downloaded here). zig brings its own stubs of the macOS
# system library; the three frameworks the dependencies call — CoreFoundation and Security
# (the platform's certificate verifier, through reqwest) and SystemConfiguration (the
# computer's name, through tokio-postgres) — are described to the linker by text stubs
# (`.tbd`) this script writes into .cache/xbuild/macos-stubs from scripts/macos-symbols.txt:
# each framework's install path and the symbols the build uses. The binary then loads the
# real frameworks on a Mac. When a dependency starts calling a symbol the list lacks, the
# link fails naming it; `bash scripts/cross.sh symbols` lists again what the last macOS
# build's libraries call (llvm-nm of rustup's llvm-tools) into scripts/macos-symbols.txt.
#
# `check` and `build` run nothing they build: this machine runs Linux only. The README's
# platform table says what that means. `wine` is the one exception: it builds the example
# crates/ringfence-fs/examples/private_acl.rs for x86_64-pc-windows-gnu and runs it under
# Wine (Debian's wine64, installed with apt-get when missing; the test command runs this
# step), so the Win32 calls that give ringfence's private files their access lists run on
# every test run. Wine is not Windows: it keeps an access list as Unix mode bits, so it
# loses the "protected" flag; the example is told so (--wine) and checks the rest. Debian
# 12's Wine lacks bcryptprimitives.dll, which Rust's standard library imports, so a
# stand-in (scripts/wine/bcryptprimitives.c) is compiled with zig next to the program.
#
# Environment: CARGO_TARGET_DIR (default: target/cross, apart from the Linux build's, so
# that switching targets does not rebuild the native tree), OUT_DIR for the binaries
# (default: <target dir>/dist/<target>/).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

CARGO_ZIGBUILD_VERSION=0.24.1
ZIGLANG_VERSION=0.17.1
VENV=$ROOT/.cache/xbuild
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/cross}

usage() {
    sed -n '2,7p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
    exit 2
}

[[ $# -ge 1 ]] || usage
MODE=$1
shift

tools() {
    if ! "$VENV/bin/cargo-zigbuild" --version 2>/dev/null | grep -q "$CARGO_ZIGBUILD_VERSION" ||
        ! "$VENV/bin/python" -c "import ziglang" 2>/dev/null; then
        echo "==> installing cargo-zigbuild $CARGO_ZIGBUILD_VERSION and zig ($ZIGLANG_VERSION) in $VENV" >&2
        python3 -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
            "cargo-zigbuild==$CARGO_ZIGBUILD_VERSION" "ziglang==$ZIGLANG_VERSION"
    fi
    # cargo-zigbuild finds zig through `python -m ziglang` of the first python on PATH.
    export PATH="$VENV/bin:$PATH"
}

SYMBOLS=$ROOT/scripts/macos-symbols.txt
STUBS=$VENV/macos-stubs

# The stub SDK: <framework>.framework/<framework>.tbd for each framework in SYMBOLS (lines
# "Framework _symbol"), for x86_64 and arm64.
write_stubs() {
    rm -rf "$STUBS"
    local fw
    for fw in $(awk '!/^#/ && NF == 2 { print $1 }' "$SYMBOLS" | sort -u); do
        local dir="$STUBS/System/Library/Frameworks/$fw.framework"
        mkdir -p "$dir"
        {
            echo "--- !tapi-tbd"
            echo "tbd-version: 4"
            echo "targets: [ x86_64-macos, arm64-macos ]"
            echo "install-name: '/System/Library/Frameworks/$fw.framework/Versions/A/$fw'"
            echo "exports:"
            echo "  - targets: [ x86_64-macos, arm64-macos ]"
            echo "    symbols: ["
            awk -v fw="$fw" '!/^#/ && $1 == fw { printf "%s      %s", (n++ ? ",\n" : ""), $2 } END { print "" }' "$SYMBOLS"
            echo "    ]"
            echo "..."
        } >"$dir/$fw.tbd"
    done
}

add_target() {
    if ! rustup target list --installed | grep -qx "$1"; then
        echo "==> rustup target add $1" >&2
        rustup target add "$1"
    fi
}

case "$MODE" in
check)
    targets=("$@")
    [[ ${#targets[@]} -gt 0 ]] || targets=(x86_64-apple-darwin x86_64-pc-windows-gnu)
    tools
    for t in "${targets[@]}"; do
        add_target "$t"
        case "$t" in
        *-apple-darwin) scope=(--workspace --all-targets) ;;
        *) scope=(--workspace --lib --bins --examples) ;;
        esac
        echo "==> cargo clippy --target $t ${scope[*]} (warnings denied)" >&2
        # (RUSTFLAGS with --target reaches the target's code only, not build scripts.)
        RUSTFLAGS="${RUSTFLAGS:-} -D warnings" cargo-zigbuild clippy --target "$t" "${scope[@]}"
    done
    ;;
build)
    targets=("$@")
    [[ ${#targets[@]} -gt 0 ]] ||
        targets=(x86_64-apple-darwin aarch64-apple-darwin x86_64-pc-windows-gnu x86_64-unknown-linux-musl)
    tools
    sizes=()
    for t in "${targets[@]}"; do
        if [[ $t == x86_64-unknown-linux-musl ]]; then
            # The static Linux build has its own script (musl-gcc, split debug info, smoke
            # tests that run it).
            echo "==> scripts/build-static.sh x86_64" >&2
            OUT_DIR="$CARGO_TARGET_DIR/dist" bash scripts/build-static.sh x86_64
            bin="$CARGO_TARGET_DIR/dist/$t/ringfence"
        else
            add_target "$t"
            echo "==> cargo zigbuild --release --target $t -p ringfence" >&2
            if [[ $t == *-apple-darwin ]]; then
                write_stubs
                SDKROOT=$STUBS cargo-zigbuild build --release --target "$t" -p ringfence
            else
                cargo-zigbuild build --release --target "$t" -p ringfence
            fi
            exe=ringfence
            [[ $t == *windows* ]] && exe=ringfence.exe
            out=${OUT_DIR:-$CARGO_TARGET_DIR/dist}/$t
            mkdir -p "$out"
            cp "$CARGO_TARGET_DIR/$t/release/$exe" "$out/"
            bin="$out/$exe"
        fi
        kind=""
        command -v file >/dev/null && kind=$(file -b "$bin" | cut -c1-70)
        sizes+=("$(awk -v t="$t" -v b="$(stat -c %s "$bin")" -v k="$kind" 'BEGIN { printf "%-28s %6.1f MiB  %s", t, b / 1048576, k }')")
    done
    printf '\n==> binaries\n'
    printf '    %s\n' "${sizes[@]}"
    ;;
symbols)
    # What the libraries of the last macOS release build call in Apple's frameworks, by
    # prefix: CF → CoreFoundation, Sec → Security, SC → SystemConfiguration.
    rustup component add llvm-tools >&2
    nm=$(rustc --print sysroot)/lib/rustlib/$(rustc -vV | awk '/^host:/ { print $2 }')/bin/llvm-nm
    deps=$CARGO_TARGET_DIR/x86_64-apple-darwin/release/deps
    [[ -d $deps ]] || { echo "no macOS build in $deps: run \`bash scripts/cross.sh build x86_64-apple-darwin\` first" >&2; exit 1; }
    {
        echo "# Apple framework symbols the macOS build calls: written by \`bash scripts/cross.sh symbols\`."
        for f in "$deps"/*.rlib; do "$nm" -u "$f" 2>/dev/null; done |
            awk '{ print $NF }' | sort -u |
            awk '/^_k?CF/ { print "CoreFoundation", $0 } /^_k?Sec/ { print "Security", $0 } /^_k?SC/ { print "SystemConfiguration", $0 }'
    } >"$SYMBOLS"
    echo "$(grep -vc '^#' "$SYMBOLS") symbols in $SYMBOLS" >&2
    ;;
wine)
    t=x86_64-pc-windows-gnu
    tools
    add_target "$t"
    # shellcheck source=scripts/apt.sh
    source "$ROOT/scripts/apt.sh"
    WINE=$(command -v wine64 || command -v wine || true)
    [[ -n $WINE || ! -x /usr/lib/wine/wine64 ]] || WINE=/usr/lib/wine/wine64
    if [[ -z $WINE ]]; then
        apt_install wine64 || { echo "cannot install wine64 (Debian's package): the Windows run needs it" >&2; exit 1; }
        WINE=$(command -v wine64 || echo /usr/lib/wine/wine64)
    fi
    echo "==> cargo zigbuild --target $t -p ringfence-fs --example private_acl" >&2
    cargo-zigbuild build --target "$t" -p ringfence-fs --example private_acl
    RUN=$ROOT/.cache/wine
    rm -rf "$RUN/scratch"
    mkdir -p "$RUN/scratch"
    cp "$CARGO_TARGET_DIR/$t/debug/examples/private_acl.exe" "$RUN/"
    python -m ziglang cc -target x86_64-windows-gnu -shared -O2 \
        -o "$RUN/bcryptprimitives.dll" "$ROOT/scripts/wine/bcryptprimitives.c" -ladvapi32
    echo "==> $WINE private_acl.exe (Wine $("$WINE" --version 2>/dev/null || echo '?'))" >&2
    # Wine's own messages (making its prefix, no 32-bit part) are not the program's.
    rc=0
    # (No Mono or Gecko: the program needs neither, and Wine would offer to fetch them.)
    WINEPREFIX=$RUN/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml=" "$WINE" "$RUN/private_acl.exe" "Z:${RUN//\//\\}\\scratch" --wine \
        2>"$RUN/wine.log" || rc=$?
    if ((rc != 0)); then
        echo "private_acl.exe exited $rc; its stderr and Wine's (.cache/wine/wine.log):" >&2
        tail -n 20 "$RUN/wine.log" >&2
    fi
    exit "$rc"
    ;;
*)
    usage
    ;;
esac
