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
# It is docs/bench/run.sh's `connect` with FLOOR=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=$1; seed=$2; shift 2
FLOOR=1 exec docs/bench/run.sh "$name" "$seed" connect "$@"
