#!/usr/bin/env python3
"""CPU time and context switches per thread name over a window.

    docs/bench/thread_cpu.py SECONDS PREFIX[,PREFIX...]

Sums, over every process whose name starts with one of the prefixes, the
user+system CPU (from /proc/PID/task/TID/stat) and the voluntary and
involuntary context switches (from .../status) of its threads, grouped by
(process name, thread name), between now and SECONDS later. Run it while a
broadcast is in its window, e.g. 52 s after starting the big-guild run:

    docs/bench/thread_cpu.py 10 throng

Divide by the deliveries in the window (one message per second to 100,000
sessions: about 1,000,000 in 10 s) for CPU per delivery. perf's per-command
filter (`perf report --comm`) lost about a quarter of the delivery threads'
samples here, so per-thread figures come from this instead.
"""
import collections
import os
import sys
import time


def snapshot(prefixes):
    cpu, vol, invol = collections.Counter(), collections.Counter(), collections.Counter()
    tick = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm = open(f"/proc/{pid}/comm").read().strip()
            if not comm.startswith(prefixes):
                continue
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                stat = open(f"/proc/{pid}/task/{tid}/stat").read()
                status = open(f"/proc/{pid}/task/{tid}/status").read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            key = (comm, name)
            cpu[key] += (int(fields[11]) + int(fields[12])) / tick
            for line in status.splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    vol[key] += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    invol[key] += int(line.split()[1])
    return cpu, vol, invol


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    seconds, prefixes = float(sys.argv[1]), tuple(sys.argv[2].split(","))
    a = snapshot(prefixes)
    time.sleep(seconds)
    b = snapshot(prefixes)
    rows = [(b[0][k] - a[0].get(k, 0), b[1][k] - a[1].get(k, 0), b[2][k] - a[2].get(k, 0), k) for k in b[0]]
    print(f"{'process':<16} {'thread':<18} {'CPU s':>8} {'voluntary':>10} {'involuntary':>12}")
    for c, v, i, (comm, name) in sorted(rows, reverse=True):
        if c > 0:
            print(f"{comm:<16} {name:<18} {c:8.2f} {v:10d} {i:12d}")


if __name__ == "__main__":
    main()
