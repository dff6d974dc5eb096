#!/usr/bin/env python3
"""What one huge guild costs the node that loads it (issue #31).

Seeds a guild of N members (N users, each in no other guild) into a fresh
SQLite data directory, then, RUNS times: starts `throng serve`, reads the
heap (jemalloc's `allocated`, /_throng/admin/stats) and RSS, posts one
message in the guild as a member (the post needs the guild's actor, which
loads the guild: the answer's time is the load's), reads the heap and RSS
again once it has settled, and stops the server. Per membership = the heap
the load added / N (the members' user records are in it: they are in no
other guild). The floor beside it: the bytes of the member and user rows
themselves (ids, join time, name), the least any layout can hold.

    python3 docs/bench/guild-memory.py [--members 1000000] [--runs 3]
        [--throng target-bench/release/throng] [--out docs/bench/NAME]

Prints a table; with --out writes report.md and report.json there.
Stops by itself (every wait has a deadline); loopback only.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ADMIN = "bench"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def http(method, url, body=None, headers=None, timeout=120):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, json.loads(r.read() or b"null")


def heap(base):
    _, s = http("GET", f"{base}/api/v10/_throng/admin/stats", headers={"x-throng-admin-token": ADMIN})
    return s["heap"]


def wait_up(base, proc, deadline_s=60):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            sys.exit(f"server exited with {proc.returncode}")
        try:
            http("GET", f"{base}/health", timeout=2)
            return
        except OSError:
            time.sleep(0.05)
    sys.exit("server did not come up")


def one_run(throng, data, fixture, members):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = open(os.path.join(data, "..", f"server-{port}.log"), "w")
    proc = subprocess.Popen(
        [throng, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data, "--admin-token", ADMIN],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_up(base, proc)
        before = heap(base)
        rss_before = status_kib(proc.pid, "VmRSS")
        guild = next(g for g in fixture["guilds"] if g.get("huge"))
        token = fixture["users"][0]["token"]
        auth = {"authorization": token}
        url = f"{base}/api/v10/channels/{guild['channel_ids'][0]}/messages"
        t0 = time.monotonic()
        http("POST", url, {"content": "first"}, auth)
        load_s = time.monotonic() - t0
        t0 = time.monotonic()
        http("POST", url, {"content": "second"}, auth)
        post_s = time.monotonic() - t0
        after = heap(base)
        # RSS once jemalloc's background thread has returned what the load
        # freed (its decay takes ~10 s): after 15 s, until two reads 2 s
        # apart agree within 1%, at most 60 s.
        time.sleep(15)
        rss = status_kib(proc.pid, "VmRSS")
        end = time.monotonic() + 45
        while time.monotonic() < end:
            time.sleep(2)
            now = status_kib(proc.pid, "VmRSS")
            if abs(now - rss) <= rss / 100:
                rss = now
                break
            rss = now
        peak = status_kib(proc.pid, "VmHWM")
        return {
            "load_s": load_s,
            "post_s": post_s,
            "allocated_before": before["allocated"],
            "allocated_after": after["allocated"],
            "per_member_b": (after["allocated"] - before["allocated"]) / members,
            "rss_before_kib": rss_before,
            "rss_after_kib": rss,
            "rss_per_member_b": (rss - rss_before) * 1024 / members,
            "peak_rss_kib": peak,
        }
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def floor_bytes(data):
    """Bytes of the member and user rows' own fields (the least a layout holds)."""
    import sqlite3
    db = sqlite3.connect(os.path.join(data, "throng.db"))
    (n, names) = db.execute(
        "SELECT count(*), coalesce(sum(length(u.username) + coalesce(length(u.global_name), 0)"
        " + coalesce(length(m.nick), 0)), 0) FROM members m JOIN users u ON u.id = m.user_id").fetchone()
    db.close()
    # user id 8, joined_at 8, flags and role set 4, plus the names' bytes.
    return (20 * n + names) / max(n, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--members", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--throng", default="target-bench/release/throng")
    ap.add_argument("--out")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="throng-guildmem.")
    try:
        data = os.path.join(work, "data")
        fx = os.path.join(work, "fixture.json")
        t0 = time.monotonic()
        subprocess.run([a.throng, "seed", "--data-dir", data, "--users", str(a.members), "--guilds", "0",
                        "--memberships-per-user", "0", "--huge-guild-members", str(a.members), "--out", fx],
                       check=True, stdout=subprocess.DEVNULL)
        seed_s = time.monotonic() - t0
        with open(fx) as f:
            fixture = json.load(f)
        floor = floor_bytes(data)
        runs = [one_run(a.throng, data, fixture, a.members) for _ in range(a.runs)]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    med = lambda k: statistics.median(r[k] for r in runs)
    cpu = subprocess.run(["sh", "-c", "lscpu | grep -E 'Model name|L2|L3'"], capture_output=True, text=True).stdout
    lines = [
        f"# One guild of {a.members:,} members loaded ({time.strftime('%Y-%m-%d %H:%M')})",
        "",
        f"Seeded in {seed_s:.1f} s. Host: {' / '.join(l.split(':', 1)[1].strip() for l in cpu.splitlines())}.",
        "",
        "| run | load (first post) | second post | heap added | per membership | RSS before → after | RSS per membership | peak RSS |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, r in enumerate(runs, 1):
        lines.append(
            f"| {n} | {r['load_s'] * 1000:.0f} ms | {r['post_s'] * 1000:.1f} ms | "
            f"{(r['allocated_after'] - r['allocated_before']) / 2**20:.1f} MiB | {r['per_member_b']:.0f} B | "
            f"{r['rss_before_kib'] / 1024:.1f} → {r['rss_after_kib'] / 1024:.1f} MiB | {r['rss_per_member_b']:.0f} B | "
            f"{r['peak_rss_kib'] / 1024:.1f} MiB |")
    lines += [
        "",
        f"Median: load **{med('load_s') * 1000:.0f} ms**, **{med('per_member_b'):.0f} B** of heap per membership "
        f"({med('per_member_b') * a.members / 2**20:.1f} MiB for the guild), RSS {med('rss_per_member_b'):.0f} B per membership, "
        f"peak RSS {med('peak_rss_kib') / 1024:.0f} MiB.",
        f"Floor (the rows' own fields: ids, join time, flags and role set, names): {floor:.1f} B per membership; "
        f"heap / floor = {med('per_member_b') / floor:.2f}×.",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "report.md"), "w") as f:
            f.write(text)
        with open(os.path.join(a.out, "report.json"), "w") as f:
            json.dump({"members": a.members, "seed_s": seed_s, "floor_b": floor, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
