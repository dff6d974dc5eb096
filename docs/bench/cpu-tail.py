#!/usr/bin/env python3
"""The machine's latency tail for a fixed piece of CPU work, no I/O.

Runs the same job (SHA-256 over 20 MiB, ~15 ms here) N times, one at a
time, and prints p50/p90/p99/max in ms and p99/p50. A request whose work
is CPU-bound and as long cannot have a better p99/p50 on this machine:
the search benchmark's p99s are read against it (docs/benchmarks.md).

    python3 docs/bench/cpu-tail.py [N]
"""
import hashlib
import sys
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
block = b"x" * (1 << 20)
times = []
for _ in range(n):
    t = time.perf_counter()
    for _ in range(20):
        hashlib.sha256(block).digest()
    times.append((time.perf_counter() - t) * 1000)
times.sort()
p = {q: times[min(int(n * q), n - 1)] for q in (0.5, 0.9, 0.99)}
print(f"n {n}: p50 {p[0.5]:.1f} ms, p90 {p[0.9]:.1f}, p99 {p[0.99]:.1f}, max {times[-1]:.1f}; p99/p50 {p[0.99] / p[0.5]:.2f}")
