#!/usr/bin/env bash
# The browser client (web/): install its pinned tools, build the bundle that
# the server embeds, check the committed bundle matches its sources, run the
# browser tests (Playwright driving Debian's chromium), and measure it.
#
#   scripts/web.sh install   npm ci in web/ (esbuild, typescript, playwright-core) and chromium
#   scripts/web.sh build     web/src -> web/dist (committed; embedded by crates/api/src/web.rs)
#   scripts/web.sh check     no markup from strings, typecheck, rebuild, fail if web/dist differs from the commit or JS > 200 KB gzipped
#   scripts/web.sh test      check, build the server, run tests/web/*.test.mjs
#   scripts/web.sh perf      the Performance API figures of docs/web-client.md
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"

install() {
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    need_root "Node.js and npm"
    apt-get update -qq && apt-get install -y -qq nodejs npm
  fi
  if [ ! -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ]; then
    need_root "chromium"
    apt-get update -qq && apt-get install -y -qq chromium
  fi
  # Emoji glyphs for the screenshots (reactions, the picker); the tests
  # themselves compare text, not pixels, so a machine without it still passes.
  if [ ! -e /usr/share/fonts/truetype/noto/NotoColorEmoji.ttf ] && [ "$(id -u)" = 0 ]; then
    { apt-get install -y -qq fonts-noto-color-emoji || { apt-get update -qq && apt-get install -y -qq fonts-noto-color-emoji; }; } >/dev/null 2>&1 ||
      echo "web.sh: fonts-noto-color-emoji not installed: emojis show as boxes in screenshots" >&2
  fi
  # Reinstall only when the lock file changed since the last install.
  if ! cmp -s web/package-lock.json web/node_modules/.package-lock.json 2>/dev/null || [ ! -d web/node_modules/esbuild ]; then
    (cd web && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

need_root() {
  if [ "$(id -u)" != 0 ]; then
    echo "$1 missing: install it (Debian: apt-get install $1)" >&2
    exit 1
  fi
}

build() {
  (cd web && node build.mjs)
}

# The client never turns a string into markup (a name or a message could
# carry any): it builds the DOM with h() of web/src/dom.ts. Nor does the page
# hold inline script or style, which its Content-Security-Policy refuses.
lint_dom() {
  local bad=0
  if grep -rnE 'innerHTML|outerHTML|insertAdjacentHTML|document\.write|createContextualFragment|DOMParser|setAttribute\(["'"'"']style' web/src; then
    echo "web/src must not build markup from strings: use h() and text nodes (web/src/dom.ts)" >&2
    bad=1
  fi
  if grep -nE '<style|style=|<script>|<script[^>]*>[^<]|[[:space:]]on[a-z]+=' web/src/index.html; then
    echo "web/src/index.html must not hold inline script, style or event handlers (the CSP refuses them)" >&2
    bad=1
  fi
  return "$bad"
}

check() {
  install
  lint_dom
  (cd web && npx --no-install tsc --noEmit -p .)
  build
  if ! git diff --quiet -- web/dist web/src/emoji-data.ts || [ -n "$(git ls-files --others --exclude-standard web/dist)" ]; then
    git --no-pager diff --stat -- web/dist web/src/emoji-data.ts
    echo "web/dist is out of date with web/src: run scripts/web.sh build and commit web/dist" >&2
    exit 1
  fi
  local gz
  gz=$(gzip -9c web/dist/app.js | wc -c)
  echo "web/dist/app.js: $(wc -c <web/dist/app.js) bytes, $gz gzipped"
  if [ "$gz" -gt 204800 ]; then
    echo "compressed JavaScript over 200 KB" >&2
    exit 1
  fi
}

server_bin() {
  if [ -z "${THRONG_BIN:-}" ]; then
    # The bundle is embedded at compile time: build after web/dist is final.
    cargo build --locked --bin throng
    export THRONG_BIN="$ROOT/target/debug/throng"
  fi
}

case "${1:-}" in
  install) install ;;
  build) install; build ;;
  check) check ;;
  test)
    check
    server_bin
    node --test --test-concurrency=1 tests/web/*.test.mjs
    ;;
  perf)
    install
    if [ -z "${THRONG_BIN:-}" ]; then
      cargo build --locked --release --bin throng
      export THRONG_BIN="$ROOT/target/release/throng"
    fi
    node tests/web/perf.mjs
    ;;
  *)
    echo "usage: scripts/web.sh install|build|check|test|perf" >&2
    exit 2
    ;;
esac
