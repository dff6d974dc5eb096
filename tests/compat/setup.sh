#!/usr/bin/env bash
# Idempotent setup for the throng real-client compat suite.
# Needs only package registries (PyPI, npm). Creates, under tests/compat/:
#   .venv-zstd   discord.py 2.7.1 + zstandard + pytest  -> discord.py negotiates compress=zstd-stream
#   .venv-zlib   discord.py 2.7.1 + pytest (NO zstandard) -> discord.py negotiates compress=zlib-stream
#   js/          discord.js 14.28.1 (npm ci from the committed lock)       -> plain JSON gateway
#   js-zlib/     discord.js 14.28.1 + zlib-sync (native addon, optional)   -> compress=zlib-stream
# A failing zlib-sync build is reported and tolerated (the djs-zlib variant is then skipped).
set -euo pipefail
cd "$(dirname "$0")"
HERE=$(pwd)
PY=${PYTHON:-python3}

log() { printf '[compat-setup] %s\n' "$*"; }

make_venv() { # name requirements-file expected-compression
  local name=$1 req=$2 expect=$3 venv="$HERE/$1"
  local stamp="$venv/.requirements.sha256" sum
  sum=$(cat "$req" requirements-zlib.txt | sha256sum | cut -d' ' -f1)
  if [[ ! -x "$venv/bin/python" ]]; then
    log "creating $name"
    "$PY" -m venv "$venv"
  fi
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$sum" ]]; then
    log "installing $req into $name"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    echo "$sum" >"$stamp"
  fi
  if [[ "$name" == ".venv-zlib" ]] && "$venv/bin/python" -c 'import zstandard' 2>/dev/null; then
    log "$name must not contain zstandard; uninstalling it"
    "$venv/bin/python" -m pip uninstall --quiet -y zstandard
  fi
  local got
  got=$("$venv/bin/python" -c 'import discord, discord.utils as u; print(u._ActiveDecompressionContext.COMPRESSION_TYPE)')
  if [[ "$got" != "$expect" ]]; then
    log "ERROR: $name makes discord.py use $got, expected $expect"
    exit 1
  fi
  log "$name: discord.py $("$venv/bin/python" -c 'import discord; print(discord.__version__)') -> gateway compress=$got"
}

make_venv .venv-zstd requirements-zstd.txt zstd-stream
make_venv .venv-zlib requirements-zlib.txt zlib-stream

command -v node >/dev/null || { log "ERROR: node not found"; exit 1; }
command -v npm >/dev/null || { log "ERROR: npm not found"; exit 1; }

npm_install() { # dir
  local dir=$1
  local stamp="$dir/node_modules/.lock.sha256" sum
  sum=$(sha256sum "$dir/package-lock.json" 2>/dev/null | cut -d' ' -f1 || true)
  if [[ -n "$sum" && -f "$stamp" && "$(cat "$stamp")" == "$sum" ]]; then
    return 0
  fi
  if [[ -f "$dir/package-lock.json" ]]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) || return 1
  else
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error) || return 1
    sum=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
  fi
  echo "$sum" >"$stamp"
}

npm_install "$HERE/js"
log "js: discord.js $(node -p "require('$HERE/js/node_modules/discord.js/package.json').version") (no zlib-sync -> plain JSON)"
if (cd "$HERE/js" && node -e "require('zlib-sync')" 2>/dev/null); then
  log "ERROR: zlib-sync is resolvable from js/ (stray node_modules above it?); the plain variant would be compressed"
  exit 1
fi

# zlib-sync compiles a native addon with node-gyp; without internet it needs local node headers.
if [[ -z "${npm_config_nodedir:-}" && -f /usr/include/node/node_version.h ]]; then
  hdr=$(awk '/define NODE_(MAJOR|MINOR|PATCH)_VERSION/{printf "%s%s", sep, $3; sep="."}' /usr/include/node/node_version.h)
  if [[ "v$hdr" == "$(node --version)" ]]; then
    export npm_config_nodedir=/usr
  fi
fi
log "node $(node --version), node-gyp nodedir=${npm_config_nodedir:-<default: download headers>}"
rm -f "$HERE/js-zlib/.unavailable"
if npm_install "$HERE/js-zlib" >"$HERE/js-zlib/.install.log" 2>&1 \
  && (cd "$HERE/js-zlib" && node -e "require('zlib-sync')") >>"$HERE/js-zlib/.install.log" 2>&1; then
  log "js-zlib: discord.js + zlib-sync $(node -p "require('$HERE/js-zlib/node_modules/zlib-sync/package.json').version") installed -> compress=zlib-stream"
else
  rm -f "$HERE/js-zlib/node_modules/.lock.sha256"
  tail -20 "$HERE/js-zlib/.install.log" >"$HERE/js-zlib/.unavailable" || true
  log "WARNING: zlib-sync could not be installed (see js-zlib/.install.log); the djs-zlib variant will be SKIPPED"
fi
log "done"
