#!/usr/bin/env bash
# Runs one throng-bench scenario against a fresh throng on this machine:
# seeds a fixture straight into a new data directory (`throng seed`), starts
# the server, runs the scenario with the server's pid (for CPU/RSS), stops
# the server. Reports land in docs/bench/<name>/ (a NAME starting with / is
# the report directory itself, e.g. a scratch run under /tmp).
#
#   docs/bench/run.sh NAME "SEED ARGS" SCENARIO [throng-bench args...]
#   docs/bench/run.sh chat-19k "--users 19000 --guilds 1000 --memberships-per-user 5" chat --duration 120s
#
# NODES=N (N > 1) runs a cluster instead: a nats-server (scripts/nats.sh) and N
# nodes sharing the data directory on ports PORT..PORT+N-1; the scenario gets
# every node as a --server and every node's pid plus nats-server's as
# --server-pid (so CPU and RSS are the whole cluster's).
#
# FLOOR=1 (one node) serves the scenario from the bare gateway of
# `throng-bench identify-floor` instead of throng (the floor under IDENTIFY,
# docs/bench/identify-floor.sh), with FLOOR_ARGS passed to it.
#
# Binaries: $THRONG (default target-bench/release/throng) and $BENCH
# (default target-bench/release/throng-bench); build them with
#   CARGO_TARGET_DIR=target-bench cargo build --release -p server -p bench
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1; seed=$2; scenario=$3; shift 3
THRONG=${THRONG:-target-bench/release/throng}
BENCH=${BENCH:-target-bench/release/throng-bench}
PORT=${PORT:-28181}
SERVER_ARGS=${SERVER_ARGS:-}
work=$(mktemp -d /tmp/throng-bench.XXXXXX)
case $name in
    /*) out=$name ;;
    *) out=docs/bench/$name ;;
esac

# shellcheck disable=SC2086
"$THRONG" seed --data-dir "$work/data" $seed --out "$work/fixture.json" >&2
NODES=${NODES:-1}
pids=()
servers=()
if [ "$NODES" -gt 1 ]; then
    NATS_BIN=$(scripts/nats.sh install | tail -n 1)
    NATS_PORT=$((PORT + 1000))
    "$NATS_BIN" -a 127.0.0.1 -p "$NATS_PORT" >"$work/nats.log" 2>&1 &
    pids+=($!)
    sleep 0.5
    for n in $(seq 1 "$NODES"); do
        p=$((PORT + n - 1))
        # shellcheck disable=SC2086
        "$THRONG" serve --listen "127.0.0.1:$p" --data-dir "$work/data" --admin-token bench \
            --nats "nats://127.0.0.1:$NATS_PORT" --node-id "$n" $SERVER_ARGS >"$work/server-$n.log" 2>&1 &
        pids+=($!)
        servers+=(--server "http://127.0.0.1:$p")
        # The first node creates nothing new, but let it open the store first.
        [ "$n" = 1 ] && sleep 0.5
    done
elif [ -n "${FLOOR:-}" ]; then
    # shellcheck disable=SC2086
    "$BENCH" identify-floor --listen "127.0.0.1:$PORT" --fixture "$work/fixture.json" ${FLOOR_ARGS:-} >"$work/server-1.log" 2>&1 &
    pids+=($!)
    servers+=(--server "http://127.0.0.1:$PORT")
else
    # shellcheck disable=SC2086
    "$THRONG" serve --listen "127.0.0.1:$PORT" --data-dir "$work/data" --admin-token bench $SERVER_ARGS >"$work/server-1.log" 2>&1 &
    pids+=($!)
    servers+=(--server "http://127.0.0.1:$PORT")
fi
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
# Every node up and, in a cluster, seeing all NODES nodes (so no guild moves mid-run).
for n in $(seq 1 "$NODES"); do
    for _ in $(seq 300); do
        h=$(curl -fs "http://127.0.0.1:$((PORT + n - 1))/health" || true)
        # (grep finds nothing while the node is not up yet: not an error)
        seen=$(printf '%s' "$h" | { grep -o '"cluster_nodes":\[[0-9,]*\]' || true; } | tr -cd ',' | wc -c)
        if [ -n "$h" ] && { [ "$NODES" = 1 ] || [ "$seen" = $((NODES - 1)) ]; }; then break; fi
        sleep 0.1
    done
done
pid_args=()
for p in "${pids[@]}"; do pid_args+=(--server-pid "$p"); done
rm -rf "$out"
set +e
"$BENCH" "$scenario" "${servers[@]}" --fixture "$work/fixture.json" "${pid_args[@]}" --out "$out" "$@"
rc=$?
set -e
# Each node's own counters at the end (in a cluster: bus messages per node;
# the floor has none).
[ -n "${FLOOR:-}" ] || for n in $(seq 1 "$NODES"); do
    curl -fs -H 'x-throng-admin-token: bench' "http://127.0.0.1:$((PORT + n - 1))/api/v10/_throng/admin/stats" >"$out/admin-stats-$n.json" || true
done
# Server warnings and errors (if any) go next to the report.
cat "$work"/server-*.log | grep -aE 'WARN|ERROR' | sed 's/\x1b\[[0-9;]*m//g' | head -n 200 >"$out/server-warnings.log" || true
[ -s "$out/server-warnings.log" ] || rm -f "$out/server-warnings.log"
# In a cluster: every change of a node's view of the membership (a ring change moves guilds).
if [ "$NODES" -gt 1 ]; then
    for n in $(seq 1 "$NODES"); do
        grep -a 'membership changed' "$work/server-$n.log" | sed 's/\x1b\[[0-9;]*m//g' | sed "s/^/node $n: /"
    done >"$out/membership.log" || true
fi
echo "exit status $rc" >&2
exit $rc
