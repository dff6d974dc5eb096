#!/usr/bin/env python3
"""CPU and context switches by thread name over a window of a benchmark.

Run it beside docs/bench/run.sh: it waits for the first `throng serve`
process, then sums, over every `throng serve`, nats-server and
throng-bench process, each thread's CPU time and context switches
(/proc/<pid>/task/<tid>/stat and status) between START and END seconds
after that, grouped by process kind and thread name.

    python3 docs/bench/thread-cpu.py START END > threads.txt &
    NODES=8 PORT=29181 docs/bench/run.sh NAME "SEED ARGS" chat ...

For the chat runs of benchmarks-history.md (60,000 sessions, 200 s):
START 170, END 220, inside warm-cpu.py's window.
"""
import collections
import os
import sys
import time


def processes():
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cmd = open(f"/proc/{p}/cmdline", "rb").read()
        except OSError:
            continue
        exe = cmd.split(b"\x00")[0]
        if b"throng\x00serve" in cmd:
            found.append((p, "node"))
        elif b"nats-server" in exe:
            found.append((p, "nats"))
        elif b"throng-bench" in exe:
            found.append((p, "bench"))
    return found


def snapshot():
    seen = {}
    for p, kind in processes():
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tids:
            try:
                stat = open(f"/proc/{p}/task/{t}/stat").read()
                status = open(f"/proc/{p}/task/{t}/status").read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2 :].split()
            switches = sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line)
            seen[(p, t)] = (f"{kind}:{name}", int(fields[11]) + int(fields[12]), switches)
    return seen


def main():
    start, end = float(sys.argv[1]), float(sys.argv[2])
    while not any(kind == "node" for _, kind in processes()):
        time.sleep(0.2)
    t0 = time.time()
    time.sleep(max(0.0, start - (time.time() - t0)))
    first = snapshot()
    time.sleep(max(0.0, end - (time.time() - t0)))
    last = snapshot()
    hz = os.sysconf("SC_CLK_TCK")
    cpu, switches = collections.Counter(), collections.Counter()
    for k, (name, ticks, cs) in last.items():
        _, ticks0, cs0 = first.get(k, (name, 0, 0))
        cpu[name] += ticks - ticks0
        switches[name] += cs - cs0
    window = end - start
    print(f"window {window:.0f} s")
    for name, ticks in cpu.most_common():
        print(f"  {name:30s} cpu {ticks / hz / window * 100:6.1f}%  switches/s {switches[name] / window:8.0f}")
    servers = [n for n in cpu if not n.startswith("bench:")]
    print(f"  servers: {sum(cpu[n] for n in servers) / hz / window * 100:.1f}% of one core, {sum(switches[n] for n in servers) / window:.0f} switches/s")


if __name__ == "__main__":
    main()
