#!/usr/bin/env bash
# A throng cluster on one host: a NATS cluster (3 servers by default), N
# throng nodes sharing one SQLite data dir, and HAProxy in front of them on
# one public port.
# Everything listens on 127.0.0.1.
#
#   scripts/cluster.sh install
#       make sure nats-server (scripts/nats.sh install) and HAProxy (Debian
#       package `haproxy`, apt-get as root) are present
#   scripts/cluster.sh start N [--base-port P] [--data-dir D] [--run-dir R]
#                              [--stats-port S] [--nats-port Q] [--nats-servers K]
#                              [-- SERVE_ARGS...]
#       public REST + gateway on P (default 8080), node i on P+i (i = 1..N),
#       HAProxy stats on S (default P+N+1), K NATS servers (default 3; 1: no
#       NATS cluster) for clients on Q..Q+K-1 (default Q = P+N+2) and routes
#       on Q+K..Q+2K-1, every node given every server's URL;
#       data dir D (default R/data); SERVE_ARGS go to every `throng serve`
#       (e.g. --config cluster.toml, --heartbeat-interval-ms 5000);
#       returns once every node and HAProxy say healthy, then prints the URLs
#   scripts/cluster.sh stop [--run-dir R]
#       stop what `start` started (nodes drain first, then HAProxy, then NATS)
#   scripts/cluster.sh kill-nats K [--run-dir R]
#       kill -9 NATS server K (1-based): a failure drill
#   scripts/cluster.sh kill-node I [--run-dir R]
#   scripts/cluster.sh start-node I [--run-dir R]
#       kill -9 node I; start it again as `start` did (returns once the
#       cluster is whole and healthy)
#   scripts/cluster.sh status [--run-dir R]
#       each node's process and GET /health, HAProxy's view of each server
#
# Run dir R (default $THRONG_CLUSTER_RUN or /tmp/throng-cluster): pid files,
# logs, the rendered haproxy.cfg, admin-token (for /api/v10/_throng/admin/*)
# and cluster.env (ports, for stop/status and other scripts).
# The server binary is $THRONG_BIN (default target/release/throng, else
# target/debug/throng). HAProxy's config comes from deploy/haproxy.cfg.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
TEMPLATE="$ROOT/deploy/haproxy.cfg"
START_TIMEOUT_S=${CLUSTER_START_TIMEOUT_S:-60}
STOP_TIMEOUT_S=15

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

say() {
  echo "cluster.sh: $*" >&2
}

usage() {
  sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

default_bin() {
  if [ -n "${THRONG_BIN:-}" ]; then
    echo "$THRONG_BIN"
  elif [ -x "$ROOT/target/release/throng" ]; then
    echo "$ROOT/target/release/throng"
  else
    echo "$ROOT/target/debug/throng"
  fi
}

# True if process $1 exists and is not a zombie.
alive() {
  local state
  [ -r "/proc/$1/stat" ] || return 1
  read -r _ _ state _ <"/proc/$1/stat" 2>/dev/null || return 1
  [ "$state" != Z ]
}

# The pid in file $1 if that process is alive and its command line contains $2
# (guards against a recycled pid: only processes this script started are touched).
pid_of() {
  local file="$1" what="$2" pid
  [ -f "$file" ] || return 1
  pid=$(<"$file")
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  alive "$pid" || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$what" || return 1
  echo "$pid"
}

# What a node's log says of why it stopped: its error or panic lines (a
# backtrace follows them and would fill a plain tail), then its last lines
# without the backtrace's frames.
log_reason() {
  grep -m 5 -E '^Error|panicked at|ERROR' "$1" >&2 || true
  tail -n 20 "$1" | grep -v '^ ' >&2 || true
}

# A process we started is still running (its pid file names a live pid).
# Right after the start its cmdline may still be this script's subshell,
# before `exec`: `pid_of` would not recognise it yet.
running() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(<"$1")
  [[ "$pid" =~ ^[0-9]+$ ]] && alive "$pid"
}

port_answers() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

check_port() {
  [[ "$1" =~ ^[0-9]+$ ]] && [ "$1" -ge 1 ] && [ "$1" -le 65535 ] || die "bad port: $1"
  ! port_answers "$1" || die "127.0.0.1:$1 is already in use"
}

# GET http://127.0.0.1:$1/health: prints "CODE BODY".
health() {
  curl -s -m 2 -o - -w ' %{http_code}' "http://127.0.0.1:$1/health" 2>/dev/null || true
}

find_haproxy() {
  command -v haproxy 2>/dev/null || { [ -x /usr/sbin/haproxy ] && echo /usr/sbin/haproxy; } || return 1
}

cmd_install() {
  "$ROOT/scripts/nats.sh" install >/dev/null
  if ! find_haproxy >/dev/null; then
    [ "$(id -u)" = 0 ] || die "haproxy is missing: install the Debian package (apt-get install haproxy) as root"
    say "installing haproxy (Debian package)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y haproxy >&2 ||
      { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y haproxy >&2; } ||
      die "apt-get install haproxy failed"
  fi
  local hap
  hap=$(find_haproxy) || die "haproxy still missing after install"
  say "$("$hap" -v | head -n 1)"
  say "nats-server $("$ROOT/scripts/nats.sh" install 2>/dev/null | tail -n 1)"
}

# Renders the HAProxy config for N nodes from the template (see deploy/haproxy.cfg).
render_haproxy() {
  local n="$1" base="$2" stats="$3" run="$4" maxconn="$5" per_server="$6" out="$7" i servers=""
  for ((i = 1; i <= n; i++)); do
    servers+="    server node$i 127.0.0.1:$((base + i))"$'\n'
  done
  awk -v public="$base" -v stats="$stats" -v sock="$run/haproxy.sock" -v maxconn="$maxconn" \
    -v per="$per_server" -v servers="$servers" '
    /^ *# BEGIN servers *$/ { print; printf "%s", servers; skip = 1; next }
    /^ *# END servers *$/   { skip = 0 }
    skip { next }
    /^ *[^# ].*# @public$/  { sub(/bind [^ ]+/, "bind 127.0.0.1:" public) }
    /^ *[^# ].*# @stats$/   { sub(/bind [^ ]+/, "bind 127.0.0.1:" stats) }
    /^ *[^# ].*# @maxconn$/ { sub(/maxconn [0-9]+/, "maxconn " maxconn) }
    /^ *[^# ].*# @socket$/  { sub(/stats socket [^ ]+/, "stats socket " sock) }
    /^ *default-server / { sub(/maxconn [0-9]+/, "maxconn " per) }
    { print }' "$TEMPLATE" >"$out"
}

RUN=${THRONG_CLUSTER_RUN:-/tmp/throng-cluster}

stop_pidfile() { # file what name
  local file="$1" what="$2" name="$3" pid
  if pid=$(pid_of "$file" "$what"); then
    kill -TERM "$pid" 2>/dev/null || true
    echo "$pid"
  else
    rm -f "$file"
  fi
}

wait_gone() { # name pid file
  local name="$1" pid="$2" file="$3" deadline=$((SECONDS + STOP_TIMEOUT_S))
  while alive "$pid"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      say "$name (pid $pid) ignored TERM for ${STOP_TIMEOUT_S}s: KILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  rm -f "$file"
  say "stopped $name (pid $pid)"
}

cmd_stop() {
  [ -d "$RUN" ] || { say "no run dir $RUN: nothing to stop"; return 0; }
  local f pid pids=() files=() names=()
  # Nodes first, all at once: each drains (health 503 "draining", RECONNECT
  # to its sessions) while HAProxy is still there to route their reconnects.
  for f in "$RUN"/node-*.pid; do
    [ -e "$f" ] || continue
    if pid=$(stop_pidfile "$f" "serve" "$(basename "$f" .pid)"); then
      [ -n "$pid" ] && { pids+=("$pid"); files+=("$f"); names+=("$(basename "$f" .pid)"); }
    fi
  done
  for i in "${!pids[@]}"; do
    wait_gone "${names[$i]}" "${pids[$i]}" "${files[$i]}"
  done
  if pid=$(stop_pidfile "$RUN/haproxy.pid" "haproxy" haproxy) && [ -n "$pid" ]; then
    wait_gone haproxy "$pid" "$RUN/haproxy.pid"
  fi
  for f in "$RUN"/nats "$RUN"/nats-*; do
    [ -d "$f" ] || continue
    "$ROOT/scripts/nats.sh" stop "$f" || true
  done
  rm -f "$RUN/haproxy.sock"
}

cmd_status() {
  [ -f "$RUN/cluster.env" ] || die "no cluster in $RUN (no cluster.env)"
  # shellcheck disable=SC1091
  . "$RUN/cluster.env"
  local i pid rc=0 h
  echo "cluster in $RUN: $NODES nodes, public http://127.0.0.1:$PUBLIC_PORT, stats http://127.0.0.1:$STATS_PORT/stats, NATS $NATS_URL"
  for ((i = 1; i <= ${NATS_SERVERS:-1}; i++)); do
    if pid=$(pid_of "$RUN/nats-$i/nats.pid" nats-server); then echo "nats-server $i  pid $pid  up"; else echo "nats-server $i  DOWN"; rc=1; fi
  done
  for ((i = 1; i <= NODES; i++)); do
    h=$(health $((PUBLIC_PORT + i)))
    if pid=$(pid_of "$RUN/node-$i.pid" serve); then
      printf 'node %-3s pid %-7s 127.0.0.1:%s  health %s\n' "$i" "$pid" $((PUBLIC_PORT + i)) "${h:-<no answer>}"
      [[ "$h" == *" 200" ]] || rc=1
    else
      printf 'node %-3s DOWN\n' "$i"
      rc=1
    fi
  done
  if pid=$(pid_of "$RUN/haproxy.pid" haproxy); then
    echo "haproxy      pid $pid  public health: $(health "$PUBLIC_PORT")"
    # pxname,svname,...: field 18 is status, 5 scur (current sessions), 8 stot (total)
    curl -s -m 2 "http://127.0.0.1:$STATS_PORT/stats;csv" 2>/dev/null |
      awk -F, '$1 == "throng_nodes" && $2 != "BACKEND" && $2 != "FRONTEND" {
        printf "  haproxy sees %-7s %-6s current %s total %s\n", $2, $18, $5, $8 }' || true
  else
    echo "haproxy      DOWN"
    rc=1
  fi
  return $rc
}

# Starts node I of a cluster in the background (pid in R/node-I.pid):
# launch_node I PUBLIC_PORT DATA_DIR NATS_URL BIN TOKEN NOFILE [SERVE_ARGS...]
launch_node() {
  local i="$1" base="$2" data="$3" nats_url="$4" bin="$5" token="$6" hard="$7" port=$(($2 + $1))
  shift 7
  (
    ulimit -n "$hard" 2>/dev/null || true
    # HAProxy (on this host) says who the client is in X-Forwarded-For:
    # limits keyed on the client's address (logins, registrations) use it.
    export THRONG_HTTP__TRUSTED_PROXIES="${THRONG_HTTP__TRUSTED_PROXIES:-127.0.0.1}"
    echo "$bin serve --listen 127.0.0.1:$port --data-dir $data --nats $nats_url --node-id $i --public-url ws://127.0.0.1:$base --admin-token <token> $*"
    exec setsid "$bin" serve --listen "127.0.0.1:$port" --data-dir "$data" --nats "$nats_url" \
      --node-id "$i" --public-url "ws://127.0.0.1:$base" --admin-token "$token" "$@" </dev/null
  ) >>"$RUN/node-$i.log" 2>&1 &
  echo $! >"$RUN/node-$i.pid"
}

# kill -9 of node I (a failure drill; `start-node I` brings it back).
cmd_kill_node() {
  local i="$1" pid
  pid=$(pid_of "$RUN/node-$i.pid" serve) || die "node $i is not running in $RUN"
  kill -KILL "$pid"
  say "killed node $i (pid $pid)"
}

# Starts node I again as `start` did; returns once every node is healthy
# and sees the whole cluster again.
cmd_start_node() {
  local i="$1" args=() token deadline=$((SECONDS + START_TIMEOUT_S)) want h j
  [ -f "$RUN/cluster.env" ] || die "no cluster in $RUN (no cluster.env)"
  # shellcheck disable=SC1091
  . "$RUN/cluster.env"
  [[ "$i" =~ ^[0-9]+$ ]] && [ "$i" -ge 1 ] && [ "$i" -le "$NODES" ] || die "node must be 1-$NODES"
  ! pid_of "$RUN/node-$i.pid" serve >/dev/null || die "node $i is running"
  [ -f "$RUN/serve-args" ] && mapfile -d '' args <"$RUN/serve-args"
  token=$(<"$RUN/admin-token")
  launch_node "$i" "$PUBLIC_PORT" "$DATA_DIR" "$NATS_URL" "$THRONG_BIN" "$token" "${HARD_NOFILE:-20000}" "${args[@]}"
  want=$(seq -s, 1 "$NODES")
  for ((j = 1; j <= NODES; j++)); do
    while :; do
      h=$(health $((PUBLIC_PORT + j)))
      if [[ "$h" == *" 200" ]] && [ "$(echo "${h% *}" | jq -c '.cluster_nodes' 2>/dev/null | tr -d '[]')" = "$want" ]; then
        break
      fi
      [ "$SECONDS" -lt "$deadline" ] || die "node $j not healthy in a cluster of 1..$NODES within ${START_TIMEOUT_S}s: $h"
      sleep 0.1
    done
  done
  say "started node $i again (pid $(<"$RUN/node-$i.pid"))"
}

cmd_start() {
  [ $# -ge 1 ] || usage
  local n="$1" base=8080 data="" stats="" natsport="" nservers=3 serve_args=()
  shift
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "N must be 1-64, got $n"
  while [ $# -gt 0 ]; do
    case "$1" in
      --base-port) base="$2"; shift 2 ;;
      --data-dir) data="$2"; shift 2 ;;
      --run-dir) RUN="$2"; shift 2 ;;
      --stats-port) stats="$2"; shift 2 ;;
      --nats-port) natsport="$2"; shift 2 ;;
      --nats-servers) nservers="$2"; shift 2 ;;
      --) shift; serve_args=("$@"); break ;;
      *) usage ;;
    esac
  done
  [[ "$nservers" =~ ^[0-9]+$ ]] && [ "$nservers" -ge 1 ] && [ "$nservers" -le 9 ] || die "--nats-servers must be 1-9"
  stats=${stats:-$((base + n + 1))}
  natsport=${natsport:-$((base + n + 2))}
  local bin i pid hap
  bin=$(default_bin)
  [ -x "$bin" ] || die "server binary $bin missing: build it (cargo build --release --bin throng) or set THRONG_BIN"
  [ -f "$TEMPLATE" ] || die "missing $TEMPLATE"

  mkdir -p "$RUN"
  RUN=$(cd "$RUN" && pwd)
  for f in "$RUN"/node-*.pid "$RUN/haproxy.pid" "$RUN"/nats*/nats.pid; do
    [ -e "$f" ] || continue
    if pid=$(pid_of "$f" "serve\|haproxy\|nats-server"); then
      die "a cluster is already running from $RUN ($(basename "$f") = pid $pid): scripts/cluster.sh stop --run-dir $RUN"
    fi
  done
  rm -f "$RUN"/node-*.pid "$RUN"/node-*.log "$RUN/haproxy.pid" "$RUN/haproxy.log" "$RUN/cluster.env"
  data=${data:-$RUN/data}
  mkdir -p "$data"
  data=$(cd "$data" && pwd)
  for ((i = 0; i <= n; i++)); do check_port $((base + i)); done
  check_port "$stats"
  for ((i = 0; i < 2 * nservers; i++)); do check_port $((natsport + i)); done

  cmd_install
  hap=$(find_haproxy)

  # On any failure from here on, stop what was started.
  trap 'say "start failed; stopping what was started"; cmd_stop' EXIT
  trap 'exit 130' INT TERM

  local token
  if [ -s "$RUN/admin-token" ]; then
    token=$(<"$RUN/admin-token")
  else
    token="adm-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    (umask 077 && echo "$token" >"$RUN/admin-token")
  fi

  # NATS: one server, or a cluster of them (each dials every route; a
  # node takes every client URL and moves to another server if its own fails).
  local nats_url="" routes="" u
  for ((i = 0; i < nservers; i++)); do routes+="${routes:+,}nats://127.0.0.1:$((natsport + nservers + i))"; done
  for ((i = 1; i <= nservers; i++)); do
    if [ "$nservers" -eq 1 ]; then
      u=$("$ROOT/scripts/nats.sh" start "$RUN/nats-1" "$natsport" | tail -n 1)
    else
      u=$("$ROOT/scripts/nats.sh" start "$RUN/nats-$i" $((natsport + i - 1)) $((natsport + nservers + i - 1)) "$routes" | tail -n 1)
    fi
    nats_url+="${nats_url:+,}$u"
  done

  # File descriptors: HAProxy needs two per proxied connection.
  local hard maxconn per_server
  hard=$(ulimit -Hn)
  [ "$hard" = unlimited ] && hard=1048576
  maxconn=$(((hard - 1000) / 2))
  [ "$maxconn" -gt 400000 ] && maxconn=400000
  per_server=${CLUSTER_SERVER_MAXCONN:-$(((maxconn + n - 1) / n))}
  [ "$per_server" -gt 19000 ] && per_server=19000

  cat >"$RUN/cluster.env" <<EOF
NODES=$n
PUBLIC_PORT=$base
STATS_PORT=$stats
NATS_PORT=$natsport
NATS_SERVERS=$nservers
NATS_URL=$nats_url
DATA_DIR=$data
THRONG_BIN=$bin
EOF

  # What `start-node` needs to start a node again as this start did.
  if [ ${#serve_args[@]} -gt 0 ]; then printf '%s\0' "${serve_args[@]}" >"$RUN/serve-args"; else : >"$RUN/serve-args"; fi
  echo "HARD_NOFILE=$hard" >>"$RUN/cluster.env"
  start_node() { launch_node "$1" "$base" "$data" "$nats_url" "$bin" "$token" "$hard" "${serve_args[@]}"; }

  # Node 1 first: it creates (migrates) the shared SQLite store; then the rest at once.
  local deadline=$((SECONDS + START_TIMEOUT_S))
  start_node 1
  until port_answers $((base + 1)); do
    running "$RUN/node-1.pid" || { log_reason "$RUN/node-1.log"; say "node 1 exited"; false; }
    [ "$SECONDS" -lt "$deadline" ] || { log_reason "$RUN/node-1.log"; say "node 1 did not listen within ${START_TIMEOUT_S}s"; false; }
    sleep 0.1
  done
  for ((i = 2; i <= n; i++)); do start_node "$i"; done

  # Every node healthy and in agreement on the live set (1..N).
  local want h
  want=$(seq -s, 1 "$n")
  for ((i = 1; i <= n; i++)); do
    while :; do
      h=$(health $((base + i)))
      if [[ "$h" == *" 200" ]] && [ "$(echo "${h% *}" | jq -c '.cluster_nodes' 2>/dev/null | tr -d '[]')" = "$want" ]; then
        break
      fi
      # Any node that died meanwhile ends the wait at once, with its reason.
      for ((j = 1; j <= n; j++)); do
        running "$RUN/node-$j.pid" || { log_reason "$RUN/node-$j.log"; say "node $j exited"; false; }
      done
      [ "$SECONDS" -lt "$deadline" ] || { say "node $i not healthy in a cluster of 1..$n within ${START_TIMEOUT_S}s: $h"; false; }
      sleep 0.2
    done
  done

  render_haproxy "$n" "$base" "$stats" "$RUN" "$maxconn" "$per_server" "$RUN/haproxy.cfg"
  "$hap" -c -q -f "$RUN/haproxy.cfg" >&2 || { say "rendered $RUN/haproxy.cfg is invalid"; false; }
  (exec setsid "$hap" -f "$RUN/haproxy.cfg" </dev/null) >>"$RUN/haproxy.log" 2>&1 &
  echo $! >"$RUN/haproxy.pid"

  # HAProxy up, every server UP in its checks, /health through it.
  local up
  while :; do
    up=$(curl -s -m 2 "http://127.0.0.1:$stats/stats;csv" 2>/dev/null |
      awk -F, '$1 == "throng_nodes" && $2 ~ /^node/ && $18 == "UP"' | wc -l || true)
    if [ "$up" -eq "$n" ] && [[ "$(health "$base")" == *" 200" ]]; then
      break
    fi
    running "$RUN/haproxy.pid" || { tail -n 20 "$RUN/haproxy.log" >&2; say "haproxy exited"; false; }
    [ "$SECONDS" -lt "$deadline" ] || { say "haproxy sees $up of $n servers UP after ${START_TIMEOUT_S}s"; false; }
    sleep 0.2
  done
  trap - EXIT INT TERM

  cat <<EOF
throng cluster: $n nodes, NATS, HAProxy (run dir $RUN)
  REST       http://127.0.0.1:$base/api/v10
  gateway    ws://127.0.0.1:$base/?v=10&encoding=json
  health     http://127.0.0.1:$base/health
  stats      http://127.0.0.1:$stats/stats   (CSV: /stats;csv)
  NATS       $nats_url
  nodes      $(for ((i = 1; i <= n; i++)); do printf 'http://127.0.0.1:%s ' $((base + i)); done)
  data dir   $data (shared SQLite)
  admin      X-Throng-Admin-Token from $RUN/admin-token
  logs       $RUN/node-*.log $RUN/haproxy.log $RUN/nats-*/nats.log
  stop       scripts/cluster.sh stop --run-dir $RUN
EOF
}

[ $# -ge 1 ] || usage
command="$1"
shift
case "$command" in
  install) [ $# -eq 0 ] || usage; cmd_install ;;
  start) cmd_start "$@" ;;
  kill-node | start-node)
    [ $# -ge 1 ] || usage
    k="$1"
    shift
    while [ $# -gt 0 ]; do
      case "$1" in
        --run-dir) RUN="$2"; shift 2 ;;
        *) usage ;;
      esac
    done
    if [ "$command" = kill-node ]; then cmd_kill_node "$k"; else cmd_start_node "$k"; fi
    ;;
  kill-nats)
    [ $# -ge 1 ] || usage
    k="$1"
    shift
    while [ $# -gt 0 ]; do
      case "$1" in
        --run-dir) RUN="$2"; shift 2 ;;
        *) usage ;;
      esac
    done
    pid=$(pid_of "$RUN/nats-$k/nats.pid" nats-server) || die "no NATS server $k running in $RUN"
    kill -KILL "$pid"
    say "killed NATS server $k (pid $pid)"
    ;;
  stop | status)
    while [ $# -gt 0 ]; do
      case "$1" in
        --run-dir) RUN="$2"; shift 2 ;;
        *) usage ;;
      esac
    done
    RUN=$( [ -d "$RUN" ] && cd "$RUN" && pwd || echo "$RUN")
    "cmd_$command"
    ;;
  *) usage ;;
esac
