#!/usr/bin/env bash
# A private PostgreSQL 15 server for development and tests (never the system
# service: its own data directory, port and sockets).
#
#   scripts/postgres.sh install          make sure the PostgreSQL 15 server
#                                        binaries are present; prints their
#                                        directory on the last line
#   scripts/postgres.sh start DIR PORT   initdb DIR if it is empty, start on
#                                        127.0.0.1:PORT (sockets in DIR, log
#                                        DIR/postgres.log), create database
#                                        throng; prints its URL on the last line
#   scripts/postgres.sh stop DIR         stop it (pg_ctl stop -m fast)
#
# PostgreSQL refuses to run as root: as root, the server runs as the system
# user throng-pg (created if missing), so DIR must be reachable by that user.
set -euo pipefail

PG_MAJOR=15
PG_USER=throng-pg
DB_NAME=throng

die() {
  echo "postgres.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '4,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

is_root() {
  [ "$(id -u)" = 0 ]
}

# Prints the directory holding pg_ctl and initdb of PostgreSQL $PG_MAJOR.
find_bindir() {
  local c dir
  for c in "$(command -v pg_ctl 2>/dev/null || true)" "/usr/lib/postgresql/$PG_MAJOR/bin/pg_ctl"; do
    [ -x "$c" ] || continue
    # /usr/local/bin/pg_ctl may be a symlink into /usr/lib/postgresql/N/bin.
    dir=$(dirname "$(readlink -f "$c")")
    [ -x "$dir/initdb" ] || continue
    # "pg_ctl (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)"
    if "$dir/pg_ctl" --version 2>/dev/null | grep -Eq "^pg_ctl \(PostgreSQL\) $PG_MAJOR(\.|$| )"; then
      echo "$dir"
      return 0
    fi
  done
  return 1
}

cmd_install() {
  local dir
  if dir=$(find_bindir); then
    echo "PostgreSQL $PG_MAJOR server binaries found" >&2
    echo "$dir"
    return 0
  fi
  is_root || die "PostgreSQL $PG_MAJOR server binaries are missing: install postgresql-$PG_MAJOR (as root: scripts/postgres.sh install)"
  echo "installing postgresql-$PG_MAJOR with apt-get" >&2
  apt-get update -qq >&2
  # The package may create and start a system cluster; harmless, and not used.
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$PG_MAJOR" >&2; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2 || die "apt-get install postgresql-$PG_MAJOR failed"
  fi
  dir=$(find_bindir) || die "installed, but no PostgreSQL $PG_MAJOR pg_ctl/initdb found (is Debian's postgresql another major version?)"
  echo "$dir"
}

ensure_pg_user() {
  if ! id -u "$PG_USER" >/dev/null 2>&1; then
    echo "creating system user $PG_USER" >&2
    useradd -r -M -d /nonexistent -s /usr/sbin/nologin "$PG_USER"
  fi
}

# Runs a server command as the right user, from a directory that user can
# enter (initdb and postgres chdir back to the cwd, and warn if they cannot).
as_pg() {
  if is_root; then
    (cd / && runuser -u "$PG_USER" -- "$@")
  else
    (cd / && "$@")
  fi
}

# Absolute path of DIR, created if missing; as root, owned by $PG_USER.
prepare_dir() {
  local dir="$1"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  case "$dir" in
    *"'"* | *'"'* | *' '*) die "DIR must not contain quotes or spaces: $dir" ;;
  esac
  if is_root; then
    ensure_pg_user
    chown "$PG_USER:" "$dir"
    as_pg test -w "$dir" || die "$PG_USER cannot write $dir (a parent directory is not traversable?): use a directory under /tmp or /var/tmp"
  fi
  chmod 700 "$dir"
  echo "$dir"
}

is_running() {
  as_pg "$1/pg_ctl" -D "$2" status >/dev/null 2>&1
}

cmd_start() {
  [ $# -eq 2 ] || usage
  local dir="$1" port="$2" bindir psql createdb socket running_port
  if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
    die "bad port: $port"
  fi
  bindir=$(find_bindir) || die "PostgreSQL $PG_MAJOR is not installed: run scripts/postgres.sh install"
  dir=$(prepare_dir "$dir")
  socket="$dir/.s.PGSQL.$port"
  [ "${#socket}" -lt 108 ] || die "DIR is too long for a unix socket path ($socket): use a shorter one"

  if [ ! -f "$dir/PG_VERSION" ]; then
    if [ -n "$(ls -A "$dir")" ]; then
      die "$dir is neither empty nor a PostgreSQL data directory"
    fi
    echo "initdb $dir" >&2
    local out
    out=$(as_pg "$bindir/initdb" -D "$dir" -U postgres --auth=trust -E UTF8 --no-locale 2>&1) || {
      echo "$out" >&2
      die "initdb failed"
    }
  fi
  [ "$(<"$dir/PG_VERSION")" = "$PG_MAJOR" ] || die "$dir holds a PostgreSQL $(<"$dir/PG_VERSION") cluster, not $PG_MAJOR"

  if is_running "$bindir" "$dir"; then
    # postmaster.pid, line 4: the port it listens on.
    running_port=$(sed -n 4p "$dir/postmaster.pid")
    [ "$running_port" = "$port" ] || die "already running on $dir with port $running_port, not $port: stop it first"
    echo "already running on $dir" >&2
  else
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      die "127.0.0.1:$port is already in use"
    fi
    as_pg "$bindir/pg_ctl" -D "$dir" -l "$dir/postgres.log" -w -t 30 \
      -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories='$dir'" start >&2 ||
      {
        tail -n 20 "$dir/postgres.log" >&2 || true
        die "pg_ctl start failed (log: $dir/postgres.log)"
      }
  fi

  psql="$bindir/psql"
  [ -x "$psql" ] || psql=psql
  createdb="$bindir/createdb"
  [ -x "$createdb" ] || createdb=createdb
  if [ "$("$psql" -h 127.0.0.1 -p "$port" -U postgres -d postgres -XtAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'")" != 1 ]; then
    "$createdb" -h 127.0.0.1 -p "$port" -U postgres "$DB_NAME"
    echo "created database $DB_NAME" >&2
  fi
  echo "postgres://postgres@127.0.0.1:$port/$DB_NAME"
}

cmd_stop() {
  [ $# -eq 1 ] || usage
  local dir="$1" bindir
  [ -f "$dir/PG_VERSION" ] || die "$dir is not a PostgreSQL data directory"
  dir=$(cd "$dir" && pwd)
  bindir=$(find_bindir) || die "PostgreSQL $PG_MAJOR is not installed"
  if ! is_running "$bindir" "$dir"; then
    echo "no server running on $dir" >&2
    return 0
  fi
  as_pg "$bindir/pg_ctl" -D "$dir" -m fast -w -t 30 stop >&2
}

[ $# -ge 1 ] || usage
command="$1"
shift
case "$command" in
  install)
    [ $# -eq 0 ] || usage
    cmd_install
    ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  *) usage ;;
esac
