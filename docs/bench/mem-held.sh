#!/usr/bin/env bash
# Holds N identified idle sessions ($F5's fixture: 5 guilds each) against a
# fresh throng and prints its RSS and jemalloc heap counters while they are
# all held (run.sh's connect reports RSS only after the ramp, and reads the
# admin stats after its sessions have begun to close). Per-session cost is
# the difference between two runs (e.g. 1,000 and 19,000) over 18,000.
#
#   docs/bench/mem-held.sh 19000
#
# Binaries: $THRONG and $BENCH as in run.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
n=$1
THRONG=${THRONG:-target-bench/release/throng}
BENCH=${BENCH:-target-bench/release/throng-bench}
PORT=${PORT:-28181}
work=$(mktemp -d /tmp/throng-mem.XXXXXX)
"$THRONG" seed --data-dir "$work/data" --users 19000 --guilds 1000 --memberships-per-user 5 --out "$work/fixture.json" >&2
"$THRONG" serve --listen "127.0.0.1:$PORT" --data-dir "$work/data" --admin-token bench --heartbeat-interval-ms 5000 >"$work/server.log" 2>&1 &
server=$!
trap 'kill "$server" "${gen:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 300); do curl -fs "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.2; done
"$BENCH" connect --server "http://127.0.0.1:$PORT" --fixture "$work/fixture.json" --rate 2000 --workers 2 \
    --duration 60s --max-sessions "$n" --admin-token bench --out "$work/report" >"$work/bench.log" 2>&1 &
gen=$!
stats() { curl -fs -H 'x-throng-admin-token: bench' "http://127.0.0.1:$PORT/api/v10/_throng/admin/stats"; }
for _ in $(seq 600); do
    s=$(stats | python3 -c 'import sys, json; print(json.load(sys.stdin)["sessions"])' 2>/dev/null || echo 0)
    [ "$s" -ge "$n" ] && break
    sleep 0.5
done
# Let the last GUILD_CREATEs be acknowledged (replay trimmed) and jemalloc's decay run.
sleep 12
rss=$(awk '/VmRSS/ {print $2}' "/proc/$server/status")
stats | python3 -c "import sys, json; d = json.load(sys.stdin); h = d['heap']; print(f\"sessions {d['sessions']} rss_kib $rss allocated {h['allocated']} active {h['active']} resident {h['resident']}\")"
