#!/usr/bin/env bash
# Runs one throng-bench scenario against a fresh throng on this machine:
# seeds a fixture straight into a new data directory (`throng seed`), starts
# the server, runs the scenario with the server's pid (for CPU/RSS), stops
# the server. Reports land in docs/bench/<name>/.
#
#   docs/bench/run.sh NAME "SEED ARGS" SCENARIO [throng-bench args...]
#   docs/bench/run.sh chat-19k "--users 19000 --guilds 1000 --memberships-per-user 5" chat --duration 120s
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
out=docs/bench/$name

# shellcheck disable=SC2086
"$THRONG" seed --data-dir "$work/data" $seed --out "$work/fixture.json" >&2
# shellcheck disable=SC2086
"$THRONG" serve --listen "127.0.0.1:$PORT" --data-dir "$work/data" --admin-token bench $SERVER_ARGS >"$work/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true; wait $spid 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$PORT/api/v10/gateway" >/dev/null && break
    sleep 0.1
done
rm -rf "$out"
set +e
"$BENCH" "$scenario" --server "http://127.0.0.1:$PORT" --fixture "$work/fixture.json" --server-pid "$spid" --out "$out" "$@"
rc=$?
set -e
# Server warnings and errors (if any) go next to the report.
grep -aE 'WARN|ERROR' "$work/server.log" | sed 's/\x1b\[[0-9;]*m//g' | head -n 200 >"$out/server-warnings.log" || true
[ -s "$out/server-warnings.log" ] || rm -f "$out/server-warnings.log"
echo "exit status $rc" >&2
exit $rc
