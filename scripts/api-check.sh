#!/usr/bin/env bash
# schemathesis (pinned in tests/api/requirements.txt) against a live server:
# every operation of /api/v10/openapi.json with generated valid and invalid
# input, authenticated as a bot, path ids drawn from real fixtures. Fails on
# any 5xx, undocumented status or content type, or body unlike its schema.
#
#   scripts/api-check.sh [MAX_EXAMPLES]   (default 50; THRONG_BIN picks the binary, default target/debug/throng)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=tests/api/.venv
stamp="$VENV/.requirements.sha256"
sum=$(sha256sum tests/api/requirements.txt | cut -d' ' -f1)
if [[ ! -x "$VENV/bin/python" ]]; then
  python3 -m venv "$VENV"
fi
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$sum" ]]; then
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r tests/api/requirements.txt
  echo "$sum" >"$stamp"
fi
export THRONG_BIN="${THRONG_BIN:-$PWD/target/debug/throng}"
[[ -x "$THRONG_BIN" ]] || cargo build --locked --bin throng
exec "$VENV/bin/python" tests/api/run.py "${1:-50}"
