#!/usr/bin/env bash
# A throwaway PostgreSQL for the test run: Debian's server, run as the `postgres` user on a Unix
# socket in a temp dir (no TCP port), installed when missing.
#   eval "$(bash scripts/postgres.sh start)"   # exports TOOLSHELL_TEST_POSTGRES_URL and TOOLSHELL_TEST_POSTGRES_DIR
#   bash scripts/postgres.sh stop "$TOOLSHELL_TEST_POSTGRES_DIR"
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/retry.sh

bin_dir() {
  local initdb
  initdb=$(command -v initdb 2>/dev/null || ls /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$initdb" ] && dirname "$(readlink -f "$initdb")"
}

case "${1:-}" in
  start)
    if [ -z "$(bin_dir)" ]; then
      [ "$(id -u)" -eq 0 ] || { echo "postgres: initdb is missing; install Debian's postgresql package" >&2; exit 1; }
      retry apt-get update -qq >/dev/null
      DEBIAN_FRONTEND=noninteractive retry apt-get install -y -qq postgresql >/dev/null
    fi
    BIN=$(bin_dir)
    RUN=()
    [ "$(id -u)" -eq 0 ] && RUN=(runuser -u postgres --)
    DIR=$(mktemp -d /tmp/toolshell-pg.XXXXXX)
    [ "$(id -u)" -eq 0 ] && chown postgres "$DIR"
    "${RUN[@]}" "$BIN/initdb" -D "$DIR/data" -A trust -U postgres -E UTF8 --no-sync >"$DIR/initdb.log" 2>&1 \
      || { cat "$DIR/initdb.log" >&2; exit 1; }
    # fsync off: a test cluster is thrown away; max_connections covers the fleet tests' workers (their
    # pools, LISTEN connections and `--processes` children) and the suite's own stores, with room.
    "${RUN[@]}" "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w \
      -o "-k $DIR -c listen_addresses='' -c fsync=off -c max_connections=1000" start >/dev/null \
      || { cat "$DIR/server.log" >&2; exit 1; }
    echo "export TOOLSHELL_TEST_POSTGRES_URL='postgresql://postgres@/postgres?host=$DIR'"
    echo "export TOOLSHELL_TEST_POSTGRES_DIR='$DIR'"
    ;;
  stop)
    DIR=${2:?the directory start printed}
    BIN=$(bin_dir)
    RUN=()
    [ "$(id -u)" -eq 0 ] && RUN=(runuser -u postgres --)
    "${RUN[@]}" "$BIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$DIR"
    ;;
  *)
    echo "usage: bash scripts/postgres.sh start | stop DIR" >&2
    exit 2
    ;;
esac
