#!/usr/bin/env bash
# Real-client compatibility suite: discord.py 2.7.1 (zstd-stream and zlib-stream) and
# discord.js 14.28.1 (plain, and zlib-stream when zlib-sync could be built) against throng.
#
#   scripts/compat.sh [--build] [--skip-setup] [pytest args...]
#
#   --build       run `cargo build --bin throng` first (otherwise the existing binary is used)
#   --skip-setup  do not run tests/compat/setup.sh
# Env: THRONG_BIN (default target/debug/throng), COMPAT_VARIANTS=dpy-zstd,djs,... to restrict,
#      COMPAT_ARTIFACTS=dir for logs (default tests/compat/.artifacts/<timestamp>/).
# Runs test_compat.py and the 3-node cluster tests test_cluster.py (needs nats-server v2.15.2:
# scripts/nats.sh install) and test_cluster_lb.py (scripts/cluster.sh; installs HAProxy from Debian
# when missing); `scripts/compat.sh test_cluster.py` runs only that file.
# Exits non-zero on any failure, and also when no test ran or every test was skipped.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
COMPAT="$ROOT/tests/compat"

build=0 setup=1
args=()
for a in "$@"; do
  case "$a" in
    --build) build=1 ;;
    --skip-setup) setup=0 ;;
    *) args+=("$a") ;;
  esac
done

if [[ $setup == 1 ]]; then
  "$COMPAT/setup.sh" || { echo "[compat] setup.sh failed" >&2; exit 1; }
fi

export THRONG_BIN=${THRONG_BIN:-$ROOT/target/debug/throng}
if [[ $build == 1 ]]; then
  (cd "$ROOT" && cargo build --bin throng) || { echo "[compat] cargo build --bin throng failed" >&2; exit 1; }
fi
if [[ ! -x "$THRONG_BIN" ]]; then
  echo "[compat] server binary $THRONG_BIN missing: run 'cargo build --bin throng' (or pass --build)" >&2
  exit 1
fi

if [[ -f "$COMPAT/js-zlib/.unavailable" ]]; then
  echo "[compat] NOTE: zlib-sync is not installed here; running discord.js in the plain (uncompressed) variant only."
fi

# One pytest (from the zstd venv) runs the whole suite; each discord.py variant runs its bot with
# its own venv's python (.venv-zstd / .venv-zlib), discord.js variants use node with js/ or js-zlib/.
export COMPAT_STRICT=1
junit=$(mktemp /tmp/compat-junit.XXXXXX.xml)
trap 'rm -f "$junit"' EXIT
cd "$COMPAT"
# The suite is test_compat.py (pytest.ini's testpaths) plus the 3-node cluster tests: test_cluster.py
# (its own nats-server and nodes) and test_cluster_lb.py (scripts/cluster.sh + HAProxy); all run
# unless the arguments name test files or node ids themselves.
files=(test_compat.py test_feat_*.py test_cluster.py test_cluster_lb.py)
for a in "${args[@]}"; do
  case "$a" in
    *.py | *.py::*) files=() ;;
  esac
done
"$COMPAT/.venv-zstd/bin/python" -m pytest -v --junitxml="$junit" "${files[@]}" "${args[@]}"
rc=$?

# pytest exits 5 when nothing was collected; also refuse a run where nothing actually passed.
ran=$("$COMPAT/.venv-zstd/bin/python" - "$junit" <<'EOF'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except Exception:
    print(0); sys.exit()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
t = sum(int(s.get("tests", 0)) - int(s.get("skipped", 0)) - int(s.get("failures", 0)) - int(s.get("errors", 0)) for s in suites)
print(t)
EOF
)
if [[ $rc == 5 ]]; then
  echo "[compat] FAIL: no tests were collected/run (pytest exit 5)" >&2
  exit 5
fi
if [[ $rc == 0 && "${ran:-0}" -lt 1 ]]; then
  echo "[compat] FAIL: no test passed (all skipped?)" >&2
  exit 1
fi
if [[ $rc != 0 ]]; then
  echo "[compat] FAIL: pytest exit code $rc; logs under $COMPAT/.artifacts/ (or \$COMPAT_ARTIFACTS)" >&2
fi
exit $rc
