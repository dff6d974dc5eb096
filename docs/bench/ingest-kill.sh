#!/usr/bin/env bash
# Durability at full speed: `throng-bench ingest` posts as fast as the server
# accepts, SIGKILLs the server KILL_AFTER into the run, the server restarts
# on the same data, and `throng-bench history-check` looks for every
# acknowledged message in history. The report lands in docs/bench/NAME/
# (or in NAME itself when it starts with /).
#
#   docs/bench/ingest-kill.sh NAME "SEED ARGS" [ingest args...]
#   docs/bench/ingest-kill.sh ingest-kill-9 "--users 4000 --guilds 200 --memberships-per-user 5" --connections 512
#
# Env: THRONG, BENCH (binaries, as docs/bench/run.sh), PORT (28181),
# KILL_AFTER (8s), SERVER_ARGS (e.g. "--database postgres://…" for a
# PostgreSQL run: the database must be empty).
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1; seed=$2; shift 2
THRONG=${THRONG:-target-bench/release/throng}
BENCH=${BENCH:-target-bench/release/throng-bench}
PORT=${PORT:-28181}
KILL_AFTER=${KILL_AFTER:-8s}
SERVER_ARGS=${SERVER_ARGS:-}
work=$(mktemp -d /tmp/throng-kill.XXXXXX)
# A NAME starting with / is the report directory itself (as in run.sh).
case "$name" in
    /*) out=$name ;;
    *) out=docs/bench/$name ;;
esac
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"' EXIT

start() {
    # shellcheck disable=SC2086
    "$THRONG" serve --listen "127.0.0.1:$PORT" --data-dir "$work/data" --admin-token bench $SERVER_ARGS >>"$work/server.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
        curl -fs "http://127.0.0.1:$PORT/ready" >/dev/null && return 0
        sleep 0.1
    done
    echo "server did not become ready" >&2
    exit 1
}

# shellcheck disable=SC2086
"$THRONG" seed --data-dir "$work/data" $seed $SERVER_ARGS --out "$work/fixture.json" >&2
start
rm -rf "$out"
mkdir -p "$out"
"$BENCH" ingest --server "http://127.0.0.1:$PORT" --fixture "$work/fixture.json" --server-pid "$pid" \
    --kill-after "$KILL_AFTER" --acked-out "$work/acked.txt" "$@" | tee "$out/ingest.txt"
wait "$pid" 2>/dev/null || true
pid=
start
"$BENCH" history-check --server "http://127.0.0.1:$PORT" --fixture "$work/fixture.json" --acked "$work/acked.txt" | tee "$out/history-check.txt"
{
    echo "# $name: kill -9 during a full-speed ingest, then a restart"
    echo
    echo '```'
    cat "$out/ingest.txt" "$out/history-check.txt"
    echo '```'
    echo
    echo "Command: \`docs/bench/ingest-kill.sh $name \"$seed\" $*\` (KILL_AFTER=$KILL_AFTER, SERVER_ARGS=${SERVER_ARGS:-none}), $(date -u +%F)."
} >"$out/README.md"
rm -f "$out/ingest.txt" "$out/history-check.txt"
