#!/usr/bin/env python3
"""Server CPU per message in a chat run's warm window.

A `chat` report's samples (one a second) carry the servers' CPU (every
process given with --server-pid, nats-server included) and the messages
accepted that second. The first posts of each user cost more (its
access check and caches are cold), so this skips the first SKIP seconds
of the chat phase (default 130: every user has posted twice at one post
a minute) and prints mean CPU / mean rate over the rest of that phase,
and the rows per group commit of node 1 (its admin-stats-1.json).

    python3 docs/bench/warm-cpu.py REPORT_DIR [SKIP_S]
"""
import json
import os
import sys

d = sys.argv[1]
skip = float(sys.argv[2]) if len(sys.argv) > 2 else 130.0
r = json.load(open(os.path.join(d, "report.json")))
chat = [s for s in r["samples"] if s["phase"] == "chat"]
if not chat:
    sys.exit(f"{d}: no chat phase in the samples")
t0 = chat[0]["t_s"]
w = [s for s in chat if s["t_s"] - t0 >= skip]
if not w:
    sys.exit(f"{d}: the chat phase is shorter than {skip:.0f} s")
cpu = sum(s["server_cpu_pct"] or 0 for s in w) / len(w)
rate = sum(s["msgs_per_s"] for s in w) / len(w)
line = f"{d}: {len(w)} s window, servers {cpu:.1f}% of one core at {rate:.0f} msg/s: {cpu / 100 / rate * 1e6:.0f} us per message"
stats = os.path.join(d, "admin-stats-1.json")
if os.path.exists(stats):
    wr = json.load(open(stats))["writer"]
    if wr["commits"]:
        line += f"; node 1: {wr['rows'] / wr['commits']:.2f} rows per commit"
print(line)
