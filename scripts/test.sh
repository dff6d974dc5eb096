#!/usr/bin/env bash
# Installs what the tests need and runs every test: formatting, lints, the
# Rust test suites, and the real-client compatibility suite (discord.py and
# discord.js, installed pinned by tests/compat/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\n== %s\n' "$*"; }

# System packages: the system zlib (per-connection deflate uses it directly).
if ! pkg-config --exists zlib 2>/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    say "installing zlib1g-dev and pkg-config"
    apt-get update -qq && apt-get install -y -qq zlib1g-dev pkg-config
  else
    echo "zlib development files are missing: install zlib1g-dev and pkg-config" >&2
    exit 1
  fi
fi
rustup component add rustfmt clippy >/dev/null 2>&1 || true
# A run from scratch gains nothing from incremental compilation, and its
# files were a third of the disk a cold run used.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# The cluster tests run against a real nats-server (pinned version).
say "nats-server"
NATS_BIN="$(scripts/nats.sh install | tail -n 1)"
export THRONG_NATS_SERVER="$NATS_BIN"
"$THRONG_NATS_SERVER" --version
# promtool (Debian's prometheus package) checks the /metrics format in the
# Rust tests, which fail without it (unless THRONG_SKIP_PROMTOOL=1, never here).
if ! command -v promtool >/dev/null; then
  say "installing promtool (prometheus)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; }
fi
# The load-balancer recipe's tests (tests/compat/test_cluster_lb.py) need HAProxy.
say "HAProxy"
scripts/cluster.sh install

say "cargo fmt --check"
cargo fmt --all --check
# Every repository path named in backticks in the docs exists.
say "paths named in the docs"
python3 scripts/check-doc-paths.py --self-test
python3 scripts/check-doc-paths.py
say "cargo clippy"
cargo clippy --locked --all-targets -- -D warnings
say "cargo build (binaries)"
cargo build --locked --bins
# PostgreSQL: a private server for the store's conformance suite and the
# server's PostgreSQL tests (they fail without it, unless THRONG_SKIP_POSTGRES=1,
# never here).
say "postgresql"
PG_BIN="$(scripts/postgres.sh install | tail -n 1)"
PG_DIR="$(mktemp -d /tmp/throng-pg.XXXXXX)"
trap 'scripts/postgres.sh stop "$PG_DIR" || true; rm -rf "$PG_DIR"' EXIT
PG_PORT=$((20000 + RANDOM % 30000))
while (exec 3<>"/dev/tcp/127.0.0.1/$PG_PORT") 2>/dev/null; do PG_PORT=$((20000 + RANDOM % 30000)); done
THRONG_TEST_POSTGRES_URL="$(scripts/postgres.sh start "$PG_DIR" "$PG_PORT" | tail -n 1)"
export THRONG_TEST_POSTGRES_URL
# The disk-full test of the write path mounts a tmpfs (needs root, as CI is).
if [ "$(id -u)" = 0 ]; then export THRONG_REQUIRE_ROOT=1; fi
echo "$THRONG_TEST_POSTGRES_URL"

say "cargo test"
cargo test --locked --workspace -- --skip security:: --skip security_http::
# The security suite (docs/security.md): who may join, log in, keep a
# token, connect; one test per way in that was once open.
say "security suite"
SEC_LOG="$(mktemp)"
# The same features as the step above (--workspace), so nothing rebuilds.
cargo test --locked --workspace --test it -- security 2>&1 | tee "$SEC_LOG"
grep -Eq "test result: ok\. [1-9][0-9]* passed" "$SEC_LOG" || { echo "the security suite ran no test" >&2; exit 1; }
rm -f "$SEC_LOG"
say "compatibility with real client libraries"
THRONG_BIN="$PWD/target/debug/throng" scripts/compat.sh
# The same suite with every server on PostgreSQL (a fresh database per
# server or cluster on the private PostgreSQL above).
say "compatibility with real client libraries, on PostgreSQL"
COMPAT_DATABASE_URL="$THRONG_TEST_POSTGRES_URL" COMPAT_PSQL="$PG_BIN/psql" \
  THRONG_BIN="$PWD/target/debug/throng" scripts/compat.sh --skip-setup

# ---------------------------------------------------------------------------
# The OpenAPI document against the live server (docs/api.md): schemathesis,
# 0 server errors and 0 answers unlike the document.
say "schemathesis against /api/v10/openapi.json"
THRONG_BIN="$PWD/target/debug/throng" scripts/api-check.sh 50

# ---------------------------------------------------------------------------
say "web client (bundle in sync with web/src, browser tests in Debian's chromium)"
THRONG_BIN="$PWD/target/debug/throng" scripts/web.sh test

# ---------------------------------------------------------------------------
# Fuzzing (docs/fuzzing.md): every cargo-fuzz target for 20 s on its stored
# corpus, so a regression in a parser shows up here. Needs nightly.
say "fuzz targets (20 s each)"
scripts/fuzz.sh check 20
