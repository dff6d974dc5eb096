#!/usr/bin/env bash
# Fuzz targets of fuzz/ (cargo-fuzz, nightly). See docs/fuzzing.md.
#
#   scripts/fuzz.sh check [SECONDS]        every target for SECONDS (default 20) each: CI
#   scripts/fuzz.sh run TARGET [SECONDS]   one target for SECONDS (default 600)
#   scripts/fuzz.sh cmin [TARGET]          minimise the stored corpora
#   scripts/fuzz.sh list                   the targets
#
# Runs at the lowest CPU priority, one fuzz process at a time, on the
# corpora in fuzz/corpus/<target>/ (new inputs are added there). A crash
# leaves its input in fuzz/artifacts/<target>/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(ws_frame gateway_payload compress_roundtrip decompress member_list_ranges rest_json rest_query snowflake multipart)

need_tools() {
  rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
  if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    nice -n 19 cargo install cargo-fuzz --locked
  fi
}

run_one() { # target seconds [scratch]: with "scratch", new inputs go to a
  # temporary directory and the stored corpus is only read (CI leaves the
  # checkout as it found it)
  local t=$1 secs=$2 rc=0 log dirs
  mkdir -p "fuzz/corpus/$t"
  log=$(mktemp)
  dirs="corpus/$t"
  if [ "${3:-}" = scratch ]; then
    dirs="$(mktemp -d) corpus/$t"
  fi
  echo "== fuzz $t for ${secs}s"
  # shellcheck disable=SC2086
  (cd fuzz && nice -n 19 cargo +nightly fuzz run "$t" $dirs -- \
    -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048) >"$log" 2>&1 || rc=$?
  grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|Done )' "$log" || true
  if [ "$rc" -ne 0 ]; then
    # The panic or sanitizer report and the failing input.
    grep -E -A12 'panicked|==[0-9]+== ?ERROR|Failing input|Output of' "$log" | head -n 80 >&2 || tail -n 60 "$log" >&2
  fi
  rm -f "$log"
  return "$rc"
}

case "${1:-check}" in
  list) printf '%s\n' "${TARGETS[@]}" ;;
  check)
    need_tools
    secs=${2:-20}
    (cd fuzz && nice -n 19 cargo +nightly fuzz build)
    failed=()
    for t in "${TARGETS[@]}"; do run_one "$t" "$secs" scratch || failed+=("$t"); done
    if [ ${#failed[@]} -gt 0 ]; then
      echo "fuzz: crashes in ${failed[*]} (inputs in fuzz/artifacts/)" >&2
      exit 1
    fi
    echo "fuzz: ${#TARGETS[@]} targets, no crash"
    ;;
  run)
    need_tools
    run_one "${2:?target}" "${3:-600}"
    ;;
  cmin)
    need_tools
    for t in ${2:-${TARGETS[@]}}; do (cd fuzz && nice -n 19 cargo +nightly fuzz cmin "$t" "corpus/$t"); done
    ;;
  *) sed -n '2,12p' "$0" >&2; exit 2 ;;
esac
