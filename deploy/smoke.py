#!/usr/bin/env python3
"""Smoke check of a throng service behind a load balancer.

    python deploy/smoke.py http://127.0.0.1:8080 [--sessions K]

Through the given public URL only: GET /health; a user registers and creates
a guild; the gateway URL handed out must be the public one (each node runs
with --public-url); K gateway sessions of that user IDENTIFY (each its own
connection, spread over the nodes by the balancer: see its stats page); one
message posted over REST must reach every session.
Exits 0 on success, 1 with a reason otherwise. Needs aiohttp (the compat
suite's venv has it: tests/compat/.venv-zstd/bin/python).
"""

import argparse
import asyncio
import json
import secrets
import sys
import time

import aiohttp

INTENTS = 1 | 512 | 32768


async def session(http, gw_url, token, ready_q, stop):
    async with http.ws_connect(gw_url, max_msg_size=0) as ws:
        seq = None
        hb = None
        try:
            async for msg in ws:
                if msg.type != aiohttp.WSMsgType.TEXT:
                    break
                f = json.loads(msg.data)
                seq = f.get("s") or seq
                if f["op"] == 10:
                    interval = f["d"]["heartbeat_interval"] / 1000

                    async def beat():
                        while True:
                            await asyncio.sleep(interval)
                            await ws.send_json({"op": 1, "d": seq})

                    hb = asyncio.ensure_future(beat())
                    await ws.send_json({"op": 2, "d": {"token": token, "intents": INTENTS,
                                                       "properties": {"os": "linux", "browser": "smoke", "device": "smoke"}}})
                elif f["op"] == 0 and f["t"] == "READY":
                    await ready_q.put(("ready", None))
                elif f["op"] == 0 and f["t"] == "MESSAGE_CREATE":
                    await ready_q.put(("message", f["d"]["content"]))
                    await stop.wait()
                    return
                elif f["op"] in (7, 9):
                    await ready_q.put(("error", f"op {f['op']}"))
                    return
            await ready_q.put(("error", f"closed {ws.close_code}"))
        finally:
            if hb:
                hb.cancel()


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--sessions", type=int, default=6)
    a = ap.parse_args()
    base = a.url.rstrip("/")
    async with aiohttp.ClientSession() as http:
        async with http.get(base + "/health") as r:
            body = await r.json()
            assert r.status == 200 and body["status"] == "ok", f"/health: {r.status} {body}"
            print(f"health via LB: {r.status} {body}")
        api = base + "/api/v10"
        name = "smoke_" + secrets.token_hex(4)
        async with http.post(api + "/auth/register", json={"username": name, "password": "pw-" + secrets.token_hex(8)}) as r:
            token = (await r.json())["token"]
        h = {"authorization": token}
        async with http.post(api + "/guilds", json={"name": "smoke"}, headers=h) as r:
            guild = await r.json()
        async with http.get(api + f"/guilds/{guild['id']}/channels", headers=h) as r:
            channel = next(c for c in await r.json() if c["type"] == 0)
        async with http.get(api + "/gateway") as r:
            gw = (await r.json())["url"]
        print(f"gateway URL handed out: {gw}")
        want = base.replace("https://", "wss://").replace("http://", "ws://")
        assert gw.rstrip("/") == want, f"the gateway URL {gw} bypasses the load balancer {base}"
        q, stop = asyncio.Queue(), asyncio.Event()
        tasks = [asyncio.ensure_future(session(http, gw.rstrip("/") + "/?v=10&encoding=json", token, q, stop))
                 for _ in range(a.sessions)]
        deadline = time.monotonic() + 30
        ready = 0
        while ready < a.sessions:
            kind, what = await asyncio.wait_for(q.get(), deadline - time.monotonic())
            assert kind == "ready", f"a session failed before READY: {what}"
            ready += 1
        print(f"{ready} sessions READY through the LB")
        content = "smoke " + secrets.token_hex(4)
        async with http.post(api + f"/channels/{channel['id']}/messages", json={"content": content}, headers=h) as r:
            assert r.status == 200, f"POST message: {r.status} {await r.text()}"
        got = 0
        while got < a.sessions:
            kind, what = await asyncio.wait_for(q.get(), deadline - time.monotonic())
            assert kind == "message" and what == content, f"unexpected {kind} {what}"
            got += 1
        print(f"message reached all {got} sessions")
        stop.set()
        await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except (AssertionError, asyncio.TimeoutError) as e:
        print(f"smoke FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
    print("smoke OK")
