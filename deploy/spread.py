#!/usr/bin/env python3
"""How evenly HAProxy spreads gateway sessions over a cluster's nodes.

    python3 deploy/spread.py --run-dir R --fixture F.json --sessions N [--scenario connect|chat]
                             [--rate 400] [--hold 30s] [--bench throng-bench] [-- BENCH_ARGS...]

R is the run dir of `scripts/cluster.sh start` (cluster.env, node-i.pid). The script runs
`throng-bench connect` (or `chat`) against the public port only (so every session goes through
HAProxy), samples each node's open sessions (GET /health) and HAProxy's current sessions
per server (stats CSV) once a second, and reads each node's CPU time from
/proc/PID/stat before and after. It prints one row per node and the max/min ratios of
connections and CPU. Standard library only.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime


def get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.read().decode()
    except urllib.error.HTTPError as e:
        return e.read().decode()
    except Exception:
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run-dir", default=os.environ.get("THRONG_CLUSTER_RUN", "/tmp/throng-cluster"))
    ap.add_argument("--fixture", required=True)
    ap.add_argument("--sessions", type=int, required=True)
    ap.add_argument("--scenario", default="connect", choices=["connect", "chat"],
                    help="connect: idle sessions; chat: every user posts once per --interval (throng-bench chat)")
    ap.add_argument("--rate", type=int, default=400)
    ap.add_argument("--hold", default="30s")
    ap.add_argument("--bench", default=os.environ.get("THRONG_BENCH_BIN", "target/release/throng-bench"))
    ap.add_argument("--out", default=None)
    ap.add_argument("bench_args", nargs="*")
    a = ap.parse_args()

    env = {}
    with open(os.path.join(a.run_dir, "cluster.env")) as f:
        for line in f:
            k, _, v = line.strip().partition("=")
            env[k] = v
    n, public, stats = int(env["NODES"]), int(env["PUBLIC_PORT"]), int(env["STATS_PORT"])
    pids = {}
    for i in range(1, n + 1):
        with open(os.path.join(a.run_dir, f"node-{i}.pid")) as f:
            pids[i] = int(f.read().strip())
    with open(os.path.join(a.run_dir, "haproxy.pid")) as f:
        hap = int(f.read().strip())
    cpu0 = {i: cpu_seconds(p) for i, p in pids.items()}
    hap0 = cpu_seconds(hap)

    samples = []  # (t, {node: sessions}, {node: haproxy scur})
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            sess = {}
            for i in range(1, n + 1):
                body = get(f"http://127.0.0.1:{public + i}/health")
                try:
                    sess[i] = json.loads(body)["sessions"]
                except Exception:
                    sess[i] = None
            scur = {}
            for line in (get(f"http://127.0.0.1:{stats}/stats;csv") or "").splitlines():
                f = line.split(",")
                if len(f) > 5 and f[0] == "throng_nodes" and f[1].startswith("node"):
                    scur[int(f[1][4:])] = int(f[4] or 0)
            samples.append((time.time(), sess, scur))
            stop.wait(1.0)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    cmd = [a.bench, a.scenario, "--server", f"http://127.0.0.1:{public}", "--fixture", a.fixture,
           "--max-sessions", str(a.sessions), "--rate", str(a.rate), "--duration", a.hold, "--quiet",
           *[x for i in pids.values() for x in ("--server-pid", str(i))]]
    if a.out:
        cmd += ["--out", a.out]
    cmd += a.bench_args
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.time()
    rc = subprocess.call(cmd)
    wall = time.time() - t0
    stop.set()
    th.join()
    cpu1 = {i: cpu_seconds(p) for i, p in pids.items()}
    hap_cpu = cpu_seconds(hap) - hap0

    # The sample with the most sessions open in total (during the hold).
    best = max(samples, key=lambda s: sum(v or 0 for v in s[1].values()), default=None)
    if best is None:
        sys.exit("no samples")
    _, sess, scur = best
    cpu = {i: cpu1[i] - cpu0[i] for i in pids}
    print(f"\nthrong-bench exit {rc}, {wall:.0f} s wall; peak sample: {sum(v or 0 for v in sess.values())} sessions")
    print("| node | sessions (node /health) | HAProxy current | CPU s |")
    print("|---|---|---|---|")
    for i in range(1, n + 1):
        print(f"| {i} | {sess.get(i)} | {scur.get(i)} | {cpu[i]:.2f} |")
    vals = [v for v in sess.values() if v]
    if vals:
        print(f"sessions max/min = {max(vals)}/{min(vals)} = {max(vals) / min(vals):.3f}")
    cv = [v for v in cpu.values() if v > 0]
    if cv:
        print(f"CPU max/min = {max(cv):.2f}/{min(cv):.2f} = {max(cv) / min(cv):.3f}")
    print(f"HAProxy CPU {hap_cpu:.2f} s; nodes together {sum(cpu.values()):.2f} s")
    sys.exit(rc)


if __name__ == "__main__":
    main()
