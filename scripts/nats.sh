#!/usr/bin/env bash
# A local NATS server (with JetStream) for development and tests.
#
#   scripts/nats.sh install          make sure nats-server v2.15.2 is available;
#                                    prints its path on the last line
#   scripts/nats.sh start DIR PORT [CLUSTER_PORT ROUTES]
#                                    start one on 127.0.0.1:PORT, JetStream store
#                                    in DIR, log DIR/nats.log, pid DIR/nats.pid;
#                                    with CLUSTER_PORT, a member of the NATS
#                                    cluster "throng" that takes routes there
#                                    and dials ROUTES (nats://HOST:PORT,...);
#                                    returns once the port answers (<= ~10 s)
#   scripts/nats.sh stop DIR         stop it: TERM, then KILL after ~10 s
#
# The binary comes from PATH or $HOME/go/bin if it is already v2.15.2, else
# from `go install` (Go from PATH or /usr/local/go/bin). It needs Go >= 1.26;
# Debian's golang-go (1.19) is too old, so a machine without Go fails here
# with a message instead of installing that.
set -euo pipefail

NATS_VERSION=2.15.2
NATS_MODULE=github.com/nats-io/nats-server/v2
START_TIMEOUT_S=10
STOP_TIMEOUT_S=10

die() {
  echo "nats.sh: $*" >&2
  exit 1
}

usage() {
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Prints the path of the first nats-server that reports v$NATS_VERSION.
find_nats() {
  local candidates=() c
  if c=$(command -v nats-server 2>/dev/null); then candidates+=("$c"); fi
  candidates+=("${GOBIN:-}/nats-server" "$HOME/go/bin/nats-server")
  if [ -n "${GOPATH:-}" ]; then candidates+=("${GOPATH%%:*}/bin/nats-server"); fi
  for c in "${candidates[@]}"; do
    [ -x "$c" ] || continue
    # `nats-server --version` prints "nats-server: v2.15.2".
    if [ "$("$c" --version 2>/dev/null)" = "nats-server: v$NATS_VERSION" ]; then
      echo "$c"
      return 0
    fi
  done
  return 1
}

find_go() {
  if command -v go >/dev/null 2>&1; then
    command -v go
  elif [ -x /usr/local/go/bin/go ]; then
    echo /usr/local/go/bin/go
  else
    return 1
  fi
}

cmd_install() {
  local bin go gobin
  if bin=$(find_nats); then
    echo "nats-server v$NATS_VERSION already installed" >&2
    echo "$bin"
    return 0
  fi
  go=$(find_go) || die "nats-server v$NATS_VERSION is not installed and Go is missing: nats-server v$NATS_VERSION needs Go >= 1.26: install the official Go toolchain into /usr/local/go (Debian's golang-go, 1.19, is too old)"
  echo "installing nats-server v$NATS_VERSION with $go ($("$go" version))" >&2
  "$go" install "$NATS_MODULE@v$NATS_VERSION" >&2 || die "go install $NATS_MODULE@v$NATS_VERSION failed"
  gobin=$("$go" env GOBIN)
  if [ -z "$gobin" ]; then
    gobin="$("$go" env GOPATH)"
    gobin="${gobin%%:*}/bin"
  fi
  bin="$gobin/nats-server"
  [ -x "$bin" ] || die "go install succeeded but $bin is missing"
  [ "$("$bin" --version)" = "nats-server: v$NATS_VERSION" ] || die "$bin reports '$("$bin" --version)', not v$NATS_VERSION"
  echo "$bin"
}

# True if something accepts TCP connections on 127.0.0.1:$1.
port_answers() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# True if process $1 exists and is not a zombie (an exited child not yet
# reaped still answers kill -0).
alive() {
  local state
  [ -r "/proc/$1/stat" ] || return 1
  read -r _ _ state _ <"/proc/$1/stat" 2>/dev/null || return 1
  [ "$state" != Z ]
}

# The pid in DIR/nats.pid if that process is alive and is a nats-server.
running_pid() {
  local pidfile="$1/nats.pid" pid
  [ -f "$pidfile" ] || return 1
  pid=$(<"$pidfile")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  # Guard against a recycled pid.
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q nats-server || return 1
  echo "$pid"
}

cmd_start() {
  [ $# -eq 2 ] || [ $# -eq 4 ] || usage
  local dir="$1" port="$2" bin pid deadline cluster=()
  if [ $# -eq 4 ]; then
    [[ "$3" =~ ^[0-9]+$ ]] || die "bad cluster port: $3"
    # A cluster needs each server named (JetStream's meta group); routes to
    # itself among ROUTES are ignored by nats-server.
    cluster=(--name "nats-$port" --cluster_name throng --cluster "nats://127.0.0.1:$3" --routes "$4")
  fi
  if ! [[ "$port" =~ ^[0-9]+$ ]] || [ "$port" -lt 1 ] || [ "$port" -gt 65535 ]; then
    die "bad port: $port"
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if pid=$(running_pid "$dir"); then
    die "a nats-server (pid $pid) is already running with store $dir; stop it first"
  fi
  port_answers "$port" && die "127.0.0.1:$port is already in use"
  bin=$(cmd_install 2>/dev/null | tail -n 1) || die "nats-server v$NATS_VERSION is not available: run scripts/nats.sh install"

  # setsid + nohup: the server outlives this script and its terminal.
  setsid nohup "$bin" -a 127.0.0.1 -p "$port" -js -sd "$dir" "${cluster[@]}" </dev/null >>"$dir/nats.log" 2>&1 &
  pid=$!
  echo "$pid" >"$dir/nats.pid"

  deadline=$((SECONDS + START_TIMEOUT_S))
  until port_answers "$port"; do
    if ! alive "$pid"; then
      rm -f "$dir/nats.pid"
      tail -n 20 "$dir/nats.log" >&2 || true
      die "nats-server exited during startup (log: $dir/nats.log)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      kill -KILL "$pid" 2>/dev/null || true
      rm -f "$dir/nats.pid"
      tail -n 20 "$dir/nats.log" >&2 || true
      die "nats-server did not answer on 127.0.0.1:$port within ${START_TIMEOUT_S}s (log: $dir/nats.log)"
    fi
    sleep 0.1
  done
  running_pid "$dir" >/dev/null || die "nats-server answers on $port but pid $pid is not it (log: $dir/nats.log)"
  echo "nats-server v$NATS_VERSION pid $pid on nats://127.0.0.1:$port (JetStream store $dir)" >&2
  echo "nats://127.0.0.1:$port"
}

cmd_stop() {
  [ $# -eq 1 ] || usage
  local dir="$1" pid deadline
  [ -d "$dir" ] || die "no such directory: $dir"
  if ! pid=$(running_pid "$dir"); then
    rm -f "$dir/nats.pid"
    echo "no nats-server running for $dir" >&2
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_TIMEOUT_S))
  while alive "$pid"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "nats-server pid $pid ignored TERM for ${STOP_TIMEOUT_S}s: KILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  rm -f "$dir/nats.pid"
  echo "stopped nats-server pid $pid" >&2
}

[ $# -ge 1 ] || usage
command="$1"
shift
case "$command" in
  install) [ $# -eq 0 ] || usage; cmd_install ;;
  start) cmd_start "$@" ;;
  stop) cmd_stop "$@" ;;
  *) usage ;;
esac
