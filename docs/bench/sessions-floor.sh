#!/usr/bin/env bash
# The floor of many idle gateway sessions on this box (issue #31): runs the
# bare program crates/bench/examples/sessions_floor.rs once per RUN, each
# under the shared heavy-work lock and a time limit, and keeps its output.
#
#   docs/bench/sessions-floor.sh OUT [RUN ...]
#
# OUT is a folder (e.g. docs/bench/sessions-floor); each RUN is one quoted
# list of sessions_floor keys, e.g. "total=500000 interval=41.25 hold=90".
# Without RUNs: 100k, 250k, 500k and 600k at 41.25 s, then 500k at 20 s.
# Appends to OUT/host.txt (CPU, caches, kernel, limits, the sysctls that
# bound the run), writes OUT/run-K.txt per run (K numbered on from the runs
# already in OUT) and OUT/results.txt (the RESULT lines of every run in OUT).
#
# Sysctls: each one that bounds the run is printed; the few that are below
# what the largest run needs are raised for the run, printed as changed,
# and put back when the script exits, printed as restored.
# Environment: BIN (default target/release/examples/sessions_floor, built
# here if missing), LOCK (default /tmp/heavy.lock).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: $0 OUT [RUN ...]}
shift
RUNS=("$@")
if [ ${#RUNS[@]} -eq 0 ]; then
  RUNS=("total=100000" "total=250000" "total=500000" "total=600000" "total=500000 interval=20")
fi
BIN=${BIN:-target/release/examples/sessions_floor}
LOCK=${LOCK:-/tmp/heavy.lock}
mkdir -p "$OUT"

if [ ! -x "$BIN" ]; then
  CARGO_INCREMENTAL=0 flock "$LOCK" cargo build --release -p bench --example sessions_floor
fi

# The largest total asked for sets what the sysctls must allow.
MAX=0
for r in "${RUNS[@]}"; do
  t=$(sed -n 's/.*total=\([0-9]*\).*/\1/p' <<<"$r")
  t=${t:-100000}
  [ "$t" -gt "$MAX" ] && MAX=$t
done

declare -A OLD=()
restore() {
  for k in "${!OLD[@]}"; do
    sysctl -q -w "$k=${OLD[$k]}" && echo "restored $k = ${OLD[$k]}" | tee -a "$OUT/host.txt"
  done
}
trap restore EXIT
# raise KEY MIN: sets KEY to MIN for the run if it is lower (first field).
raise() {
  local k=$1 min=$2 cur
  cur=$(sysctl -n "$k" 2>/dev/null) || { echo "sysctl $k: absent"; return; }
  local first=${cur%%[[:space:]]*}
  if [ "$first" -lt "$min" ]; then
    OLD[$k]=$cur
    sysctl -q -w "$k=$min"
    echo "changed $k: $cur -> $min (restored at exit)"
  else
    echo "sysctl $k = $cur (enough for $MAX sessions, unchanged)"
  fi
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  lscpu | grep -E '^(Model name|CPU\(s\)|Thread|L1d|L1i|L2|L3)' | sed 's/  */ /g'
  echo "kernel: $(uname -r); memory: $(free -g | awk '/^Mem/{print $2}') GiB"
  echo "ulimit -n: soft $(ulimit -Sn), hard $(ulimit -Hn)"
  for k in net.ipv4.ip_local_port_range net.ipv4.tcp_mem net.ipv4.tcp_rmem net.ipv4.tcp_wmem \
    net.ipv4.tcp_max_syn_backlog net.ipv4.tcp_max_tw_buckets fs.nr_open kernel.pid_max; do
    echo "sysctl $k = $(sysctl -n "$k" 2>/dev/null | tr '\t' ' ' || echo absent)"
  done
  # Printed again after each run: 0 there, with every session open, means
  # no rule asks for tracking and the table bounds nothing.
  echo "nf_conntrack: max $(sysctl -n net.netfilter.nf_conntrack_max 2>/dev/null || echo absent)," \
    "entries now $(cat /proc/sys/net/netfilter/nf_conntrack_count 2>/dev/null || echo absent)"
  echo "TCP memory: tcp_mem is in pages (4 KiB): past its third value new socket buffers fail"
} | tee -a "$OUT/host.txt"
# In this shell, not a pipeline's, so that the trap knows what to restore.
# Two descriptors per session plus a margin for the rest of the box.
raise fs.file-max $((2 * MAX + 200000)) >>"$OUT/host.txt"
raise net.core.somaxconn 4096 >>"$OUT/host.txt"
tail -n 2 "$OUT/host.txt"

k=$(find "$OUT" -maxdepth 1 -name 'run-*.txt' | wc -l)
for r in "${RUNS[@]}"; do
  k=$((k + 1))
  t=$(sed -n 's/.*total=\([0-9]*\).*/\1/p' <<<"$r")
  hold=$(sed -n 's/.*hold=\([0-9.]*\).*/\1/p' <<<"$r")
  limit=$(( ${t:-100000} / 5000 + ${hold:-90} + 300 ))
  echo "== run $k: $r (at most $limit s)" | tee "$OUT/run-$k.txt"
  # shellcheck disable=SC2086 # each RUN is a list of words
  flock "$LOCK" timeout "$limit" "$BIN" $r 2>&1 | tee -a "$OUT/run-$k.txt" || echo "run $k failed: $?" | tee -a "$OUT/run-$k.txt"
  echo "conntrack entries after run $k: $(cat /proc/sys/net/netfilter/nf_conntrack_count 2>/dev/null || echo absent)" | tee -a "$OUT/run-$k.txt"
  sleep 5
done
for f in $(ls "$OUT"/run-*.txt | sort -V); do
  grep -h '^RESULT' "$f" | sed "s|^|$(basename "$f" .txt) |"
done > "$OUT/results.txt" || true
cat "$OUT/results.txt"
