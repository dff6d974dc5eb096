#!/usr/bin/env python3
"""A tiny in-memory stand-in for `throng`, implementing only the compat-suite contract.

It exists to self-test the harness (tests/compat/selftest/run.sh): if the suite
passes against this fake and fails against the real server, the failure is the
server's. It is NOT a reference implementation. Needs aiohttp (+ zstandard for zstd-stream).

  fake_throng.py serve --listen H:P --data-dir D --admin-token A [--heartbeat-interval-ms N]
  fake_throng.py bot create NAME --data-dir D      (prints the token as the last line)
"""

import argparse
import asyncio
import itertools
import json
import os
import secrets
import sys
import time
import zlib
from datetime import datetime, timezone

from aiohttp import WSMsgType, web

# Deliberate bugs for checking the harness's failure reports: FAKE_BUGS=no_resume,charset,zstd_frame_end,no_application,no_ack
BUGS = set(filter(None, os.environ.get("FAKE_BUGS", "").split(",")))
_ids = itertools.count(int(time.time() * 1000) << 22)


def snow():
    return str(next(_ids))


def now_iso():
    return datetime.now(timezone.utc).isoformat()


def jresp(obj, status=200):
    ct = "application/json; charset=utf-8" if "charset" in BUGS else "application/json"
    return web.Response(status=status, body=json.dumps(obj).encode(), headers={"Content-Type": ct})


def unauthorized():
    return jresp({"message": "401: Unauthorized", "code": 0}, 401)


class State:
    def __init__(self, data_dir, admin, hb_ms, base):
        self.data_dir = data_dir
        self.admin = admin
        self.hb_ms = hb_ms
        self.base = base
        self.users = {}  # id -> user obj
        self.tokens = {}  # token -> user id
        self.passwords = {}
        self.guilds = {}  # id -> dict(guild, channels, members{uid: member})
        self.channels = {}  # id -> (guild_id, channel obj)
        self.messages = {}  # channel id -> [msg]
        self.sessions = {}  # session_id -> Session
        self.app_id = snow()

    def load_bots(self):
        path = os.path.join(self.data_dir, "bots.json")
        try:
            bots = json.load(open(path))
        except FileNotFoundError:
            return
        for b in bots:
            if b["id"] not in self.users:
                self.users[b["id"]] = user_obj(b["id"], b["name"], True)
            self.tokens[b["token"]] = b["id"]

    def auth(self, request, bot_prefix_ok=True):
        self.load_bots()
        h = request.headers.get("Authorization", "")
        if h.startswith("Bot "):
            h = h[4:]
        uid = self.tokens.get(h)
        return self.users.get(uid) if uid else None


def user_obj(uid, name, bot):
    return {"id": uid, "username": name, "discriminator": "0", "global_name": None, "avatar": None, "bot": bot,
            "flags": 0, "public_flags": 0, "verified": True, "mfa_enabled": False}


def member_obj(user):
    return {"user": user, "roles": [], "joined_at": now_iso(), "deaf": False, "mute": False, "flags": 0, "nick": None}


class Session:
    def __init__(self, st, user, intents, compress):
        self.id = secrets.token_hex(16)
        self.user = user
        self.intents = intents
        self.seq = 0
        self.buffer = []
        self.ws = None
        self.enc = None
        self.compress = compress
        self.detached_at = None

    def make_encoder(self, compress):
        self.compress = compress
        if compress == "zlib-stream":
            c = zlib.compressobj()
            self.enc = lambda b: c.compress(b) + c.flush(zlib.Z_SYNC_FLUSH)
        elif compress == "zstd-stream":
            import zstandard

            if "zstd_frame_end" in BUGS:
                self.enc = lambda b: zstandard.ZstdCompressor().compress(b)
            else:
                c = zstandard.ZstdCompressor().compressobj()
                self.enc = lambda b: c.compress(b) + c.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
        else:
            self.enc = None

    async def send(self, payload):
        if self.ws is None or self.ws.closed:
            return
        data = json.dumps(payload).encode()
        try:
            if self.enc:
                await self.ws.send_bytes(self.enc(data))
            else:
                await self.ws.send_str(data.decode())
        except Exception:
            pass

    async def dispatch(self, t, d):
        self.seq += 1
        frame = {"op": 0, "t": t, "s": self.seq, "d": d}
        self.buffer.append(frame)
        await self.send(frame)


def guild_create(st, gid):
    g = st.guilds[gid]
    d = dict(g["guild"])
    d.update(channels=list(g["channels"]), members=list(g["members"].values()), member_count=len(g["members"]),
             unavailable=False, large=False, joined_at=now_iso(), threads=[], voice_states=[], presences=[],
             stage_instances=[], guild_scheduled_events=[])
    return d


async def fanout_guild(st, gid, t, d):
    members = st.guilds[gid]["members"]
    for s in list(st.sessions.values()):
        if s.user["id"] in members:
            await s.dispatch(t, d)


def make_app(st: State):
    routes = web.RouteTableDef()

    @routes.get("/api/v10/gateway")
    async def gateway(request):
        return jresp({"url": st.base.replace("http://", "ws://")})

    @routes.get("/api/v10/gateway/bot")
    async def gateway_bot(request):
        if not st.auth(request):
            return unauthorized()
        return jresp({"url": st.base.replace("http://", "ws://"), "shards": 1,
                      "session_start_limit": {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1}})

    @routes.get("/api/v10/users/@me")
    async def me(request):
        u = st.auth(request)
        return jresp(u) if u else unauthorized()

    @routes.get("/api/v10/oauth2/applications/@me")
    async def app_me(request):
        u = st.auth(request)
        if not u:
            return unauthorized()
        return jresp({"id": u["id"], "name": u["username"], "description": "", "icon": None, "bot_public": True,
                      "bot_require_code_grant": False, "owner": u, "verify_key": "00", "flags": 0})

    @routes.post("/api/v10/auth/register")
    async def register(request):
        b = await request.json()
        uid = snow()
        st.users[uid] = user_obj(uid, b["username"], False)
        tok = "u." + secrets.token_urlsafe(24)
        st.tokens[tok] = uid
        st.passwords[uid] = b.get("password")
        return jresp({"token": tok, "user_id": uid})

    @routes.post("/api/v10/auth/login")
    async def login(request):
        b = await request.json()
        uid = next((u for u, p in st.passwords.items() if st.users[u]["username"] == b.get("username")
                    and p == b.get("password")), None)
        if uid is None:
            return jresp({"message": "Invalid login", "code": 50035}, 400)
        tok = "u." + secrets.token_urlsafe(24)
        st.tokens[tok] = uid
        return jresp({"token": tok, "user_id": uid})

    @routes.post("/api/v10/guilds")
    async def create_guild(request):
        u = st.auth(request)
        if not u:
            return unauthorized()
        b = await request.json()
        gid, cid = snow(), snow()
        guild = {"id": gid, "name": b["name"], "owner_id": u["id"], "icon": None, "features": [],
                 "roles": [{"id": gid, "name": "@everyone", "permissions": "1071698660929", "position": 0, "color": 0,
                            "hoist": False, "managed": False, "mentionable": False, "flags": 0}],
                 "emojis": [], "stickers": [], "verification_level": 0, "default_message_notifications": 0,
                 "explicit_content_filter": 0, "mfa_level": 0, "system_channel_id": cid, "premium_tier": 0,
                 "preferred_locale": "en-US", "nsfw_level": 0}
        chan = {"id": cid, "type": 0, "guild_id": gid, "name": "general", "position": 0, "permission_overwrites": [],
                "topic": None, "nsfw": False, "parent_id": None, "last_message_id": None, "rate_limit_per_user": 0}
        st.guilds[gid] = {"guild": guild, "channels": [chan], "members": {u["id"]: member_obj(u)}}
        st.channels[cid] = (gid, chan)
        st.messages[cid] = []
        for s in list(st.sessions.values()):
            if s.user["id"] == u["id"]:
                await s.dispatch("GUILD_CREATE", guild_create(st, gid))
        return jresp(guild, 201)

    @routes.get("/api/v10/guilds/{gid}/channels")
    async def channels(request):
        if not st.auth(request):
            return unauthorized()
        return jresp(st.guilds[request.match_info["gid"]]["channels"])

    @routes.put("/api/v10/guilds/{gid}/members/{uid}")
    async def add_member(request):
        if not st.auth(request):
            return unauthorized()
        gid, uid = request.match_info["gid"], request.match_info["uid"]
        st.load_bots()
        m = member_obj(st.users[uid])
        st.guilds[gid]["members"][uid] = m
        for s in list(st.sessions.values()):
            if s.user["id"] == uid:
                await s.dispatch("GUILD_CREATE", guild_create(st, gid))
        return jresp(dict(m, guild_id=gid), 201)

    @routes.post("/api/v10/channels/{cid}/messages")
    async def post_message(request):
        u = st.auth(request)
        if not u:
            return unauthorized()
        cid = request.match_info["cid"]
        gid, _ = st.channels[cid]
        b = await request.json()
        msg = {"id": snow(), "channel_id": cid, "guild_id": gid, "author": u, "content": b.get("content", ""),
               "timestamp": now_iso(), "edited_timestamp": None, "tts": False, "mention_everyone": False,
               "mentions": [], "mention_roles": [], "attachments": [], "embeds": [], "pinned": False, "type": 0,
               "flags": 0, "components": []}
        if b.get("nonce") is not None:
            msg["nonce"] = str(b["nonce"])
        ref = b.get("message_reference")
        if ref:
            rid = str(ref["message_id"])
            msg["type"] = 19
            msg["message_reference"] = {"type": 0, "message_id": rid, "channel_id": str(ref.get("channel_id") or cid),
                                        "guild_id": gid}
            msg["referenced_message"] = next((m for m in st.messages[cid] if m["id"] == rid), None)
        st.messages[cid].append(msg)
        out = dict(msg, member={k: v for k, v in st.guilds[gid]["members"][u["id"]].items() if k != "user"})
        await fanout_guild(st, gid, "MESSAGE_CREATE", out)
        return jresp(out)

    @routes.get("/api/v10/channels/{cid}/messages")
    async def get_messages(request):
        if not st.auth(request):
            return unauthorized()
        limit = int(request.query.get("limit", 50))
        return jresp(list(reversed(st.messages[request.match_info["cid"]]))[:limit])

    @routes.post("/api/v10/_throng/admin/drop-sessions")
    async def drop(request):
        if request.headers.get("X-Throng-Admin-Token") != st.admin:
            return unauthorized()
        uid = str((await request.json())["user_id"])
        n = 0
        for s in list(st.sessions.values()):
            if s.user["id"] == uid and s.ws is not None and not s.ws.closed:
                ws, s.ws = s.ws, None
                s.detached_at = time.monotonic()
                await ws.close(code=4000, message=b"dropped by admin")
                n += 1
        return jresp({"dropped": n})

    @routes.get("/")
    async def gateway_ws(request):
        ws = web.WebSocketResponse(autoping=True, max_msg_size=0)
        await ws.prepare(request)
        compress = request.query.get("compress")
        conn = Session(st, None, 0, compress)  # temporary holder for the encoder until identify/resume
        conn.ws = ws
        conn.make_encoder(compress)
        await conn.send({"op": 10, "d": {"heartbeat_interval": st.hb_ms}, "s": None, "t": None})
        session = None
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                if msg.type == WSMsgType.BINARY:
                    await ws.close(code=4002)
                break
            p = json.loads(msg.data)
            op, d = p.get("op"), p.get("d")
            if op == 1:
                if "no_ack" in BUGS:
                    continue
                await conn.send({"op": 11, "d": None, "s": None, "t": None})
            elif op == 2:
                st.load_bots()
                uid = st.tokens.get(str(d.get("token", "")).removeprefix("Bot "))
                if not uid:
                    await ws.close(code=4004, message=b"Authentication failed")
                    break
                user = st.users[uid]
                session = Session(st, user, d.get("intents", 0), compress)
                session.ws, session.enc = ws, conn.enc
                st.sessions[session.id] = session
                gids = [g for g, v in st.guilds.items() if uid in v["members"]]
                await session.dispatch("READY", {
                    "v": 10, "user": user, "guilds": [{"id": g, "unavailable": True} for g in gids],
                    "session_id": session.id, "resume_gateway_url": st.base.replace("http://", "ws://"),
                    **({} if "no_application" in BUGS else {"application": {"id": uid if user["bot"] else st.app_id, "flags": 0}}),
                    "private_channels": [],
                    "relationships": [], "presences": [], "user_settings": {}})
                for g in gids:
                    await session.dispatch("GUILD_CREATE", guild_create(st, g))
            elif op == 6:
                s = st.sessions.get(d.get("session_id"))
                st.load_bots()
                expired = s is not None and s.detached_at is not None and \
                    time.monotonic() - s.detached_at > st.resume_window
                if "no_resume" in BUGS or s is None or expired or st.tokens.get(str(d.get("token", "")).removeprefix("Bot ")) != s.user["id"]:
                    await conn.send({"op": 9, "d": False, "s": None, "t": None})
                    continue
                session = s
                session.detached_at = None
                session.ws, session.enc = ws, conn.enc
                seq = d.get("seq") or 0
                for f in session.buffer:
                    if f["s"] > seq:
                        await session.send(f)
                await session.dispatch("RESUMED", {})
            elif op == 8:
                gid = str(d.get("guild_id"))
                if gid in st.guilds:
                    await session.dispatch("GUILD_MEMBERS_CHUNK", {
                        "guild_id": gid, "members": list(st.guilds[gid]["members"].values()), "chunk_index": 0,
                        "chunk_count": 1, "nonce": d.get("nonce"), "not_found": [], "presences": []})
        if session is not None and session.ws is ws:
            session.ws = None
        return ws

    app = web.Application()
    app.add_routes(routes)
    return app


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--listen", required=True)
    s.add_argument("--data-dir", required=True)
    s.add_argument("--admin-token", required=True)
    s.add_argument("--heartbeat-interval-ms", type=int, default=41250)
    s.add_argument("--resume-window-ms", type=int, default=120000)
    b = sub.add_parser("bot")
    b.add_argument("action", choices=["create"])
    b.add_argument("name")
    b.add_argument("--data-dir", required=True)
    a = ap.parse_args()
    if a.cmd == "bot":
        os.makedirs(a.data_dir, exist_ok=True)
        path = os.path.join(a.data_dir, "bots.json")
        bots = json.load(open(path)) if os.path.exists(path) else []
        tok = "b." + secrets.token_urlsafe(24)
        bots.append({"id": snow(), "name": a.name, "token": tok})
        json.dump(bots, open(path, "w"))
        print(f"created bot {a.name}")
        print(tok)
        return
    host, port = a.listen.rsplit(":", 1)
    st = State(a.data_dir, a.admin_token, a.heartbeat_interval_ms, f"http://{host}:{port}")
    st.resume_window = a.resume_window_ms / 1000
    web.run_app(make_app(st), host=host, port=int(port), print=lambda *x: print(*x, flush=True))


if __name__ == "__main__":
    main()
