#!/usr/bin/env bash
# The failover benchmark: a fresh 6-node cluster (scripts/cluster.sh: 3 NATS
# servers, HAProxy, one SQLite data dir seeded with a fixture), then
# `throng-bench failover` through HAProxy: writers posting with nonces,
# gateway sessions, and K kill -9 / restart rounds of the nodes in turn.
# The report lands in docs/bench/<NAME>/ (a NAME starting with / is the
# report directory itself).
#
#   docs/bench/failover.sh NAME [throng-bench failover args...]
#   docs/bench/failover.sh failover-6n --kills 20
#
# NODES (default 6), PORT (default 29080: public port, nodes on the next
# ones), SEED (default "--users 2000 --guilds 120 --memberships-per-user 3").
# Binaries: $THRONG and $BENCH (default target-bench/release/…), built with
#   CARGO_TARGET_DIR=target-bench cargo build --release -p server -p bench
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1
shift
THRONG=${THRONG:-target-bench/release/throng}
BENCH=${BENCH:-target-bench/release/throng-bench}
NODES=${NODES:-6}
PORT=${PORT:-29080}
SEED=${SEED:---users 2000 --guilds 120 --memberships-per-user 3}
case $name in
    /*) out=$name ;;
    *) out=docs/bench/$name ;;
esac
work=$(mktemp -d /tmp/throng-failover.XXXXXX)
trap 'THRONG_BIN="$THRONG" scripts/cluster.sh stop --run-dir "$work/run" >/dev/null 2>&1 || true' EXIT

# shellcheck disable=SC2086
"$THRONG" seed --data-dir "$work/data" $SEED --out "$work/fixture.json" >&2
# Writers post several times a second each: above the default REST budget.
printf '[limits]\nrest_requests_per_window = 100000\n' >"$work/cluster.toml"
THRONG_BIN="$THRONG" scripts/cluster.sh start "$NODES" --base-port "$PORT" --data-dir "$work/data" --run-dir "$work/run" \
    -- --config "$work/cluster.toml" >&2
lscpu | grep -E "Model name|L2 cache|L3 cache" >&2 || true
"$BENCH" failover --server "http://127.0.0.1:$PORT" --run-dir "$work/run" --cluster-sh scripts/cluster.sh \
    --fixture "$work/fixture.json" --out "$out" "$@"
