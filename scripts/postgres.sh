#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests (and for trying the shared store by hand).
#
#   bash scripts/postgres.sh start DIR   installs PostgreSQL from Debian's packages if it is
#                                        missing, makes a new cluster in DIR listening on
#                                        127.0.0.1 (a free port), with password
#                                        authentication (scram-sha-256) and a role and
#                                        database `ringfence`; prints the URL on stdout
#                                        (plain TCP: sslmode=disable)
#
# The server also speaks TLS, with a certificate for the name `localhost` signed by a CA
# made for the cluster (DIR/tls/ca.pem), for the tests of certificate checking.
#   bash scripts/postgres.sh stop DIR    stops the cluster and removes DIR
#
# The cluster trades durability for speed (fsync off; PG_DURABLE=1 keeps it on, for
# benchmarks): it is for tests only. Run as root,
# the server runs as the `postgres` system user (PostgreSQL refuses to run as root).
set -euo pipefail

log() { printf 'postgres.sh: %s\n' "$*" >&2; }
die() {
    log "error: $*"
    exit 1
}

# The directory holding initdb, pg_ctl and postgres: Debian's versioned one, else PATH's.
bindir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        [[ -x "$d/initdb" && -x "$d/pg_ctl" ]] && {
            echo "$d"
            return 0
        }
    done
    if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
        dirname "$(command -v initdb)"
        return 0
    fi
    return 1
}

install_postgres() {
    bindir >/dev/null && return 0
    log "PostgreSQL is not installed: installing Debian's package"
    local sudo=""
    [[ $(id -u) -eq 0 ]] || sudo="sudo"
    command -v apt-get >/dev/null || die "no apt-get here: install PostgreSQL (13 or newer) and put initdb and pg_ctl on PATH"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 ||
        { $sudo apt-get update -q >&2 && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; } ||
        die "apt-get install postgresql failed"
    bindir >/dev/null || die "PostgreSQL was installed but initdb was not found"
}

# A CA and a server certificate for `localhost` (not 127.0.0.1) in $1.
make_tls() {
    local tls=$1
    command -v openssl >/dev/null || die "openssl is needed for the cluster's certificate (apt-get install openssl)"
    mkdir -p "$tls"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ringfence test CA" \
        -keyout "$tls/ca.key" -out "$tls/ca.pem" >/dev/null 2>&1 || die "cannot make the test CA"
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$tls/server.key" -out "$tls/server.csr" >/dev/null 2>&1 || die "cannot make the server key"
    printf 'subjectAltName=DNS:localhost\n' >"$tls/ext.cnf"
    openssl x509 -req -in "$tls/server.csr" -CA "$tls/ca.pem" -CAkey "$tls/ca.key" \
        -CAcreateserial -days 2 -extfile "$tls/ext.cnf" -out "$tls/server.pem" >/dev/null 2>&1 ||
        die "cannot sign the server certificate"
    chmod 600 "$tls/server.key"
    [[ $(id -u) -eq 0 ]] && chown -R postgres "$tls"
    return 0
}

# Runs a command as the cluster's owner.
as_owner() {
    if [[ $(id -u) -eq 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
    local dir=$1
    [[ -e "$dir" ]] && die "$dir already exists: stop that cluster first (scripts/postgres.sh stop $dir)"
    install_postgres
    local bin port password
    bin=$(bindir)
    port=$(free_port)
    password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    mkdir -p "$dir"
    if [[ $(id -u) -eq 0 ]]; then
        id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
        chown postgres "$dir"
    fi
    chmod 700 "$dir"
    printf '%s\n' "$password" >"$dir/.pw"
    [[ $(id -u) -eq 0 ]] && chown postgres "$dir/.pw"
    as_owner "$bin/initdb" -D "$dir/data" -U ringfence --pwfile="$dir/.pw" \
        --auth=scram-sha-256 -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 ||
        { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    rm -f "$dir/.pw"
    make_tls "$dir/tls"
    # Tests trade durability for speed; PG_DURABLE=1 (benchmarks) keeps PostgreSQL's defaults.
    local speed="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    [[ "${PG_DURABLE:-0}" == 1 ]] && speed=""
    as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir $speed -c max_connections=400 -c ssl=on -c ssl_cert_file=$dir/tls/server.pem -c ssl_key_file=$dir/tls/server.key" >&2 ||
        { cat "$dir/server.log" >&2; die "the server did not start"; }
    PGPASSWORD=$password PGSSLMODE=disable psql -X -q -h 127.0.0.1 -p "$port" -U ringfence -d postgres \
        -c "CREATE DATABASE ringfence" >&2 || die "cannot create the database"
    echo "postgres://ringfence:$password@127.0.0.1:$port/ringfence?sslmode=disable"
}

stop() {
    local dir=$1
    [[ -d "$dir" ]] || return 0
    local bin
    if bin=$(bindir) && [[ -d "$dir/data" ]]; then
        as_owner "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
}

case "${1:-}" in
start) start "${2:?usage: postgres.sh start DIR}" ;;
stop) stop "${2:?usage: postgres.sh stop DIR}" ;;
*) die "usage: postgres.sh start DIR | stop DIR" ;;
esac
