#!/usr/bin/env bash
# The floor under IDENTIFY (issue #31): `throng-bench connect` against a bare
# gateway (`throng-bench identify-floor`) that answers each fixture user with
# a READY and one GUILD_CREATE per guild of throng's sizes and does nothing
# else; the report's server CPU per READY is the machine's, not throng's.
#
#   docs/bench/identify-floor.sh NAME "SEED ARGS" [throng-bench connect args...]
#   docs/bench/identify-floor.sh identify-floor-s46 "--users 19000 --guilds 1000 --memberships-per-user 5" --rate 10000 --workers 2 --duration 10s
#
# FLOOR_ARGS passes sizes to the floor (default: --ready-bytes 870
# --guild-create-bytes 2100, throng's for that fixture).
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1; seed=$2; shift 2
THRONG=${THRONG:-target-bench/release/throng}
BENCH=${BENCH:-target-bench/release/throng-bench}
PORT=${PORT:-28181}
work=$(mktemp -d /tmp/throng-floor.XXXXXX)
case $name in
    /*) out=$name ;;
    *) out=docs/bench/$name ;;
esac
# shellcheck disable=SC2086
"$THRONG" seed --data-dir "$work/data" $seed --out "$work/fixture.json" >&2
# shellcheck disable=SC2086
"$BENCH" identify-floor --listen "127.0.0.1:$PORT" --fixture "$work/fixture.json" ${FLOOR_ARGS:-} >"$work/floor.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for _ in $(seq 300); do
    curl -fs "http://127.0.0.1:$PORT/health" >/dev/null && break
    sleep 0.1
done
rm -rf "$out"
"$BENCH" connect --server "http://127.0.0.1:$PORT" --fixture "$work/fixture.json" --server-pid "$pid" --out "$out" "$@"
