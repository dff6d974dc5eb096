#!/usr/bin/env bash
# The message search benchmark (issue #29): seed once, measure many times.
#
#   docs/bench/search.sh seed DIR "SEED ARGS"   throng seed into DIR/data (or
#                                               $DATABASE), fixture DIR/fixture.json,
#                                               seeding log DIR/seed.log
#   docs/bench/search.sh run DIR NAME [throng-bench search args...]
#                                               start throng on DIR/data (or
#                                               $DATABASE), run `throng-bench search`
#                                               with its pid, stop it; report in
#                                               docs/bench/NAME (or NAME if it starts with /)
#
#   docs/bench/search.sh seed /tmp/s10m "--users 1000 --guilds 1 --memberships-per-user 1 --channels-per-guild 10 --messages 10000000"
#   docs/bench/search.sh run /tmp/s10m search-10m-sqlite-1
#
# DATABASE=postgres://… uses PostgreSQL instead of SQLite for both steps.
# Binaries: $THRONG and $BENCH as in run.sh. Wrap each step in
# `flock /tmp/throng-heavy.lock` on a shared box.
set -euo pipefail
cd "$(dirname "$0")/../.."
THRONG=${THRONG:-target-bench/release/throng}
BENCH=${BENCH:-target-bench/release/throng-bench}
PORT=${PORT:-28191}
step=$1; dir=$2; shift 2
db_args=()
[ -n "${DATABASE:-}" ] && db_args=(--database "$DATABASE")
case $step in
seed)
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    /usr/bin/time -v "$THRONG" seed --data-dir "$dir/data" "${db_args[@]}" $1 --out "$dir/fixture.json" 2>&1 \
        | grep -av " INFO " | cut -c1-400 | tee "$dir/seed.log"
    ;;
run)
    name=$1; shift
    case $name in
        /*) out=$name ;;
        *) out=docs/bench/$name ;;
    esac
    "$THRONG" serve --listen "127.0.0.1:$PORT" --data-dir "$dir/data" "${db_args[@]}" --admin-token bench >"$dir/server.log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true' EXIT
    for _ in $(seq 300); do
        curl -fs "http://127.0.0.1:$PORT/health" >/dev/null && break
        sleep 0.1
    done
    rm -rf "$out"
    "$BENCH" search --server "http://127.0.0.1:$PORT" --fixture "$dir/fixture.json" --server-pid "$pid" --out "$out" "$@"
    ;;
*)
    echo "usage: $0 seed DIR \"SEED ARGS\" | run DIR NAME [args...]" >&2
    exit 2
    ;;
esac
