#!/usr/bin/env python3
"""Server RSS while a 25 MiB file is uploaded: uploads are streamed to disk,
so RSS must grow by at most 2 MiB (docs/benchmarks.md, "Current figures").

Starts its own throng on loopback (a fresh data directory), registers a user
and a guild, warms the upload path up with a 1 MiB file (code pages and
first allocations), then uploads SIZE bytes (default 25 MiB, the default
`attachments.max_file_bytes`) as `multipart/form-data` with a declared
Content-Length, sampling the server's VmRSS from /proc every 2 ms. Prints
the RSS before, the peak during, after, and the growth (peak - before).
The client streams its body from a generator: it never holds the file.

Usage: python3 docs/bench/upload_rss.py [--bin target/release/throng] [--size BYTES]
Everything it starts stops by itself; standard library only.
"""

import argparse
import http.client
import json
import os
import socket
import subprocess
import tempfile
import threading
import time

BOUNDARY = "uploadrssboundaryx7MA4YWxkTrZu0gW"
CHUNK = 64 << 10


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def call(port, method, path, body=None, token=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"content-type": "application/json"}
    if token:
        headers["authorization"] = token
    c.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data) if data else None


def upload(port, token, channel, size):
    """POST a multipart message with one file of `size` pseudo-random bytes, streamed."""
    head = (
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"payload_json\"\r\n\r\n{{\"content\":\"big\"}}\r\n"
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"files[0]\"; filename=\"big.bin\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{BOUNDARY}--\r\n".encode()
    block = os.urandom(CHUNK)

    def body():
        yield head
        left = size
        while left > 0:
            n = min(left, CHUNK)
            yield block[:n]
            left -= n
        yield tail

    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.putrequest("POST", f"/api/v10/channels/{channel}/messages")
    c.putheader("authorization", token)
    c.putheader("content-type", f"multipart/form-data; boundary={BOUNDARY}")
    c.putheader("content-length", str(len(head) + size + len(tail)))
    c.endheaders()
    for part in body():
        c.send(part)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, json.loads(data)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.environ.get("THRONG_BIN", os.path.join(root, "target", "debug", "throng")))
    ap.add_argument("--size", type=int, default=25 << 20)
    args = ap.parse_args()
    port = free_port()
    with tempfile.TemporaryDirectory() as data:
        proc = subprocess.Popen([args.bin, "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(200):
                try:
                    if call(port, "GET", "/health")[0] == 200:
                        break
                except OSError:
                    time.sleep(0.05)
            _, reg = call(port, "POST", "/api/v10/auth/register", {"username": "uploader", "password": "correct horse battery"})
            token = reg["token"]
            _, guild = call(port, "POST", "/api/v10/guilds", {"name": "rss"}, token)
            channel = guild["channels"][0]["id"]
            status, _ = upload(port, token, channel, 1 << 20)
            assert status == 200, status
            time.sleep(1.0)
            before = rss_kib(proc.pid)
            peak = [before]
            stop = threading.Event()

            def sample():
                while not stop.is_set():
                    peak[0] = max(peak[0], rss_kib(proc.pid))
                    time.sleep(0.002)

            t = threading.Thread(target=sample)
            t.start()
            t0 = time.monotonic()
            status, msg = upload(port, token, channel, args.size)
            took = time.monotonic() - t0
            time.sleep(0.5)
            stop.set()
            t.join()
            after = rss_kib(proc.pid)
            assert status == 200 and msg["attachments"][0]["size"] == args.size, (status, msg)
            growth = peak[0] - before
            print(json.dumps({
                "size_bytes": args.size, "upload_s": round(took, 2), "rss_before_kib": before, "rss_peak_kib": peak[0],
                "rss_after_kib": after, "growth_kib": growth, "growth_mib": round(growth / 1024, 2),
                "target_met": growth <= 2048, "bin": args.bin,
            }))
        finally:
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
