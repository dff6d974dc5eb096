#!/usr/bin/env bash
# Read-state acks at full speed against one node, beside the floor of the
# same HTTP stack with the same tokens (GET /users/@me: auth and a small
# JSON answer), measured in the same run, alternately.
#
#   docs/bench/acks.sh NAME [ROUNDS] [DURATION] [CONNECTIONS]
#   docs/bench/acks.sh acks-s19 2 15s 64
#
# Seeds 2,000 people in 100 guilds of 2 channels (5 guilds each), starts a
# release `throng serve`, and runs `wrk` (Debian's): every request is one
# person acking a channel of theirs at a new message id (round robin over
# the 20,000 person-channel pairs, so each person stays far below the REST
# rate limit). Writes docs/bench/NAME/report.md (or NAME itself if it
# starts with /). Needs wrk and python3; binaries as docs/bench/run.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1; rounds=${2:-2}; duration=${3:-15s}; conns=${4:-64}
THRONG=${THRONG:-target-bench/release/throng}
PORT=${PORT:-28191}
command -v wrk >/dev/null || { echo "acks.sh: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
case $name in
    /*) out=$name ;;
    *) out=docs/bench/$name ;;
esac
work=$(mktemp -d /tmp/throng-acks.XXXXXX)
"$THRONG" seed --data-dir "$work/data" --users 2000 --guilds 100 --memberships-per-user 5 --channels-per-guild 2 \
    --out "$work/fixture.json" >&2
"$THRONG" serve --listen "127.0.0.1:$PORT" --data-dir "$work/data" --admin-token bench >"$work/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 300); do curl -fs "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done

# The wrk scripts: every (token, channel) pair of the fixture.
python3 - "$work" <<'EOF'
import json, sys
work = sys.argv[1]
fx = json.load(open(f"{work}/fixture.json"))
token = {u["id"]: u["token"] for u in fx["users"]}
pairs = [(token[m], c) for g in fx["guilds"] for m in g["member_ids"] for c in g["channel_ids"]]
rows = ",\n".join(f'{{"{t}","{c}"}}' for t, c in pairs)
common = f"""
local pairs_ = {{
{rows}
}}
local n = 0
local id = 0
setup = function(thread) id = id + 1; thread:set("tid", id) end
init = function() n = tid * 100000000 end
"""
report = """
done = function(summary, latency, requests)
  io.write(string.format("RESULT requests=%d duration_us=%d errors_status=%d errors_other=%d p50_us=%d p99_us=%d\\n",
    summary.requests, summary.duration, summary.errors.status,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99)))
end
"""
ack = common + """
request = function()
  n = n + 1
  local p = pairs_[(n % #pairs_) + 1]
  -- A new message id each time (a snowflake-sized number, built as text:
  -- LuaJIT's numbers are doubles), so each ack moves the mark.
  local mid = "1500000" .. string.format("%012d", n)
  return wrk.format("POST", "/api/v10/channels/" .. p[2] .. "/messages/" .. mid .. "/ack",
    {["Authorization"] = p[1], ["Content-Type"] = "application/json"}, '{"token":null}')
end
""" + report
floor = common + """
request = function()
  n = n + 1
  local p = pairs_[(n % #pairs_) + 1]
  return wrk.format("GET", "/api/v10/users/@me", {["Authorization"] = p[1]})
end
""" + report
open(f"{work}/ack.lua", "w").write(ack)
open(f"{work}/floor.lua", "w").write(floor)
print(f"{len(pairs)} person-channel pairs", file=sys.stderr)
EOF

cpu_ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
mkdir -p "$out"
results=()
for r in $(seq 1 "$rounds"); do
    for kind in floor ack; do
        before=$(cpu_ticks)
        line=$(wrk -t2 -c"$conns" -d"$duration" -s "$work/$kind.lua" "http://127.0.0.1:$PORT" | tee "$out/wrk-$kind-$r.txt" | grep '^RESULT')
        after=$(cpu_ticks)
        results+=("$kind round=$r cpu_ticks=$((after - before)) hz=$hz $line")
        echo "${results[-1]}" >&2
    done
done
rows=$(curl -fs -H 'x-throng-admin-token: bench' "http://127.0.0.1:$PORT/api/v10/_throng/admin/stats" || echo '{}')
printf '%s\n' "${results[@]}" >"$out/results.txt"
echo "$rows" >"$out/admin-stats.json"
grep -aE 'WARN|ERROR' "$work/server.log" | sed 's/\x1b\[[0-9;]*m//g' | head -n 200 >"$out/server-warnings.log" || true
[ -s "$out/server-warnings.log" ] || rm -f "$out/server-warnings.log"
# The stored states: every ack landed (one row per pair acked).
sqlite3 "$work/data/throng.db" "SELECT COUNT(*), SUM(last_message_id > 0) FROM read_states" >"$out/read-states-rows.txt" 2>/dev/null || true

python3 - "$out" "$conns" "$duration" <<'EOF'
import re, sys, statistics
out, conns, duration = sys.argv[1], sys.argv[2], sys.argv[3]
runs = {"floor": [], "ack": []}
for line in open(f"{out}/results.txt"):
    kind = line.split()[0]
    kv = dict(re.findall(r"(\w+)=(\d+)", line))
    secs = int(kv["duration_us"]) / 1e6
    reqs = int(kv["requests"])
    cpu_s = int(kv["cpu_ticks"]) / int(kv["hz"])
    runs[kind].append({"rate": reqs / secs, "p50": int(kv["p50_us"]) / 1000, "p99": int(kv["p99_us"]) / 1000,
                       "cpu_us": cpu_s / reqs * 1e6, "bad": int(kv["errors_status"]) + int(kv["errors_other"]), "reqs": reqs})
med = lambda k, f: statistics.median(r[f] for r in runs[k])
rows_txt = open(f"{out}/read-states-rows.txt").read().strip() if __import__("os").path.exists(f"{out}/read-states-rows.txt") else "?"
with open(f"{out}/report.md", "w") as f:
    f.write(f"# Read-state acks, one node ({len(runs['ack'])} rounds, wrk -t2 -c{conns} -d{duration})\n\n")
    f.write("| run | requests/s | p50 ms | p99 ms | server CPU µs/request | non-2xx or errors |\n|---|---|---|---|---|---|\n")
    for k in ("floor", "ack"):
        for i, r in enumerate(runs[k], 1):
            label = "floor: GET /users/@me" if k == "floor" else "POST .../ack"
            f.write(f"| {label} #{i} | {r['rate']:,.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['cpu_us']:.1f} | {r['bad']} of {r['reqs']:,} |\n")
    f.write(f"\nMedians: acks **{med('ack','rate'):,.0f}/s** (p99 {med('ack','p99'):.2f} ms, {med('ack','cpu_us'):.1f} µs CPU each); "
            f"floor {med('floor','rate'):,.0f}/s ({med('floor','cpu_us'):.1f} µs); acks at **{med('ack','rate')/med('floor','rate'):.2f}×** the floor's rate.\n\n")
    f.write(f"Stored read states after the run (rows, rows past 0): {rows_txt}.\n")
print(open(f"{out}/report.md").read())
EOF
