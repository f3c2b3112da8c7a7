# shellcheck shell=bash
# Installing Debian packages from the project's scripts (sourced, not run): apt_install PKG...
# installs them with apt-get (as root, or through sudo), updating the package lists only when
# the first try fails. Returns 1, with apt-get's last lines on stderr, when there is no
# apt-get, no way to be root, or the install fails. Messages go through `log` when the
# sourcing script defines one.

SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"
can_apt() { command -v apt-get >/dev/null && { [[ -z $SUDO ]] || command -v sudo >/dev/null; }; }
APT_UPDATED=0
apt_update() {
    ((APT_UPDATED)) && return 0
    $SUDO apt-get update -qq >&2 && APT_UPDATED=1
}
apt_log() {
    if declare -F log >/dev/null; then log "$*"; else printf '==> %s\n' "$*" >&2; fi
}
apt_install() {
    can_apt || return 1
    apt_log "installing Debian packages: $*"
    local out
    out=$(mktemp)
    if $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >"$out" 2>&1 ||
        { apt_update >>"$out" 2>&1 &&
            $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@" >>"$out" 2>&1; }; then
        rm -f "$out"
        return 0
    fi
    tail -n 15 "$out" | sed 's/^/    apt-get: /' >&2
    rm -f "$out"
    apt_log "apt-get install $* failed"
    return 1
}
