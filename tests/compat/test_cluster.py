"""Real clients against a 3-node throng cluster (issue 12, first "Must show" test).

The test starts its own nats-server (scripts/nats.sh install finds or builds the pinned
v2.15.2) and three `throng serve --nats ... --node-id i` nodes on one shared SQLite data dir,
all on free ports; everything is stopped at the end. Layout:

  node 1: discord.py bot (REST + gateway), bob's raw gateway session
  node 2: the guild's actor (guilds are created until the admin owner route says node 2)
  node 3: discord.js bot (REST + gateway), alice's raw session (presences + member list, op 14)

  test_c0  the cluster formed; the guild's owner is node 2 on every node's view; sessions sit
           on the nodes above (per-node /health session counts)
  test_c1  both libraries log in, get READY and the guild
  test_c2  messages both ways: alice's ping -> each library replies pong and sees the other's
           reply; a ping from the js bot's account -> discord.py replies -> discord.js sees it;
           and the reverse; history (read on node 2) holds everything once, in order
  test_c3  member list: alice's op 14 (node 3) gets a SYNC of all four members, then list ops
           (GUILD_MEMBER_LIST_UPDATE) as bob and the bots come online on nodes 1 and 3, and an
           UPDATE carrying bob's op 3 status (dnd)
  test_c4  presence: alice, the guild's only GUILD_PRESENCES subscriber, sees PRESENCE_UPDATE for
           bob and the bots coming online and for bob's op 3 dnd
  test_c5  no library errors or warnings, every process alive, heartbeats ACKed

Env: THRONG_BIN as for the rest of the suite; COMPAT_CLUSTER_BUDGET_S (150) bounds the module.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import pytest

from harness import HERE, BotProcess, RawGateway, Rest, RestError, Server, _kill_tree, budget_left, free_port, \
    server_log_excerpt, start_budget, tail_file
from test_compat import Variant, check_available

ROOT = HERE.parent.parent
HEARTBEAT_MS = int(os.environ.get("COMPAT_HEARTBEAT_MS", "2500"))
BUDGET_S = float(os.environ.get("COMPAT_CLUSTER_BUDGET_S", "150"))
STEP = 20.0
READY_TIMEOUT = 40.0

GUILDS, GUILD_MEMBERS, GUILD_PRESENCES, GUILD_MESSAGES, MESSAGE_CONTENT = 1, 2, 256, 512, 32768
WATCHER_INTENTS = GUILDS | GUILD_MEMBERS | GUILD_PRESENCES | GUILD_MESSAGES | MESSAGE_CONTENT
PLAIN_INTENTS = GUILDS | GUILD_MESSAGES | MESSAGE_CONTENT
OWNER_NODE = 2

DPY = Variant("dpy-zstd", "dpy", "zstd-stream", python=HERE / ".venv-zstd" / "bin" / "python")
DJS = Variant("djs", "djs", "none", djs_dir=HERE / "js")

pytestmark = pytest.mark.timeout(BUDGET_S + 60)


def nats_binary() -> str:
    r = subprocess.run([str(ROOT / "scripts" / "nats.sh"), "install"], capture_output=True, text=True, timeout=600,
                       stdin=subprocess.DEVNULL)
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    if r.returncode != 0 or not lines:
        pytest.fail(f"scripts/nats.sh install failed (rc={r.returncode}): {r.stderr[-1500:]}", pytrace=False)
    return lines[-1].strip()


class Nats:
    def __init__(self, workdir: Path):
        self.bin = nats_binary()
        self.port = free_port()
        self.url = f"nats://127.0.0.1:{self.port}"
        self.log_path = workdir / "nats.log"
        self.proc = None

    def start(self):
        self._logf = open(self.log_path, "ab")
        self.proc = subprocess.Popen([self.bin, "-a", "127.0.0.1", "-p", str(self.port)], stdout=self._logf,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"nats-server exited rc={self.proc.returncode}: {tail_file(self.log_path, 20)}")
            try:
                import socket
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"nats-server did not listen on {self.port} within 10 s")

    def stop(self):
        if self.proc is not None:
            _kill_tree(self.proc)
            self._logf.close()
            self.proc = None


def health(server: Server):
    try:
        with urllib.request.urlopen(server.base + "/health", timeout=3) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


@dataclass
class Cluster:
    workdir: Path
    nats: Nats
    nodes: list
    rest_log: list = field(default_factory=list)
    guild_id: str = ""
    channel_id: str = ""
    alice: dict = field(default_factory=dict)
    bob: dict = field(default_factory=dict)
    dpy_token: str = ""
    dpy_id: str = ""
    djs_token: str = ""
    djs_id: str = ""
    owner_answers: dict = field(default_factory=dict)
    guilds_tried: int = 0
    watcher: Optional[RawGateway] = None  # alice on node 3
    bobgw: Optional[RawGateway] = None  # bob on node 1
    dpy: Optional[BotProcess] = None  # node 1
    djs: Optional[BotProcess] = None  # node 3
    ready: dict = field(default_factory=dict)
    list_sync: Optional[dict] = None
    op3_mark: Optional[int] = None

    def node(self, i: int) -> Server:
        return self.nodes[i - 1]

    def rest(self, i: int) -> Rest:
        return Rest(self.node(i).base, self.rest_log)

    def req(self, i, *a, **kw):
        try:
            return self.rest(i).request(*a, **kw)
        except RestError as exc:
            self.fail(f"REST call on node {i} failed: {exc}")

    def post(self, i: int, auth: str, content: str) -> dict:
        _, m, _ = self.req(i, "POST", f"/api/v10/channels/{self.channel_id}/messages", {"content": content}, auth=auth)
        if not isinstance(m, dict) or "id" not in m:
            self.fail(f"POST message on node {i} returned no id: {m!r}")
        return m

    def diag(self) -> str:
        parts = ["--- REST transcript (last 15) ---", *self.rest_log[-15:]]
        for b in (self.dpy, self.djs):
            if b:
                parts.append(b.summary(30, 15))
        for name, g in (("alice@node3", self.watcher), ("bob@node1", self.bobgw)):
            if g:
                parts.append(f"--- {name} raw gateway " + g.summary(20))
        for i, s in enumerate(self.nodes, 1):
            parts.append(f"--- node {i} log tail ({s.log_path}) alive={s.alive()} ---")
            parts.append(server_log_excerpt(s.log_path, 15))
        return "\n".join(parts)

    def fail(self, msg: str):
        pytest.fail(f"[cluster] {msg}\n\n{self.diag()}", pytrace=False)


def _artifacts() -> Path:
    """COMPAT_ARTIFACTS/cluster, else .artifacts/<timestamp>-cluster (sorts beside the suite's own runs)."""
    root = os.environ.get("COMPAT_ARTIFACTS")
    if root:
        p = Path(root) / "cluster"
    else:
        base = HERE / ".artifacts"
        base.mkdir(exist_ok=True)
        for old in sorted(d for d in base.glob("*-cluster") if d.is_dir())[:-4]:
            shutil.rmtree(old, ignore_errors=True)
        p = base / (time.strftime("%Y%m%d-%H%M%S") + "-cluster")
    p.mkdir(parents=True, exist_ok=True)
    return p


def _pinned_bin(workdir: Path) -> str:
    b = os.environ.get("THRONG_BIN", str(ROOT / "target" / "debug" / "throng"))
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        pytest.fail(f"server binary {b} not found/executable; build it or set THRONG_BIN", pytrace=False)
    pinned = workdir / "throng.bin"
    try:
        with open(b, "rb") as f:
            if f.read(4) == b"\x7fELF":
                if pinned.exists():
                    pinned.unlink()
                os.link(b, pinned)
                return str(pinned)
    except OSError:
        pass
    return b


def _teardown(c: Cluster):
    stops = [b.stop for b in (c.dpy, c.djs) if b] + [g.stop for g in (c.watcher, c.bobgw) if g]
    stops += [s.stop for s in c.nodes] + [c.nats.stop]
    for stop in stops:  # each one, even if an earlier one failed
        try:
            stop()
        except Exception as e:  # pragma: no cover - reported, not fatal
            print(f"[cluster] teardown: {stop!r} raised {type(e).__name__}: {e}")
    with open(c.workdir / "rest.log", "w") as f:
        f.write("\n".join(c.rest_log) + "\n")


def _converge(c: Cluster, timeout: float = 20.0):
    want = list(range(1, len(c.nodes) + 1))
    deadline = time.monotonic() + timeout
    for i, s in enumerate(c.nodes, 1):
        while True:
            code, body = health(s)
            if code == 200 and isinstance(body, dict) and body.get("cluster_nodes") == want:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"node {i} never saw the cluster {want}: /health -> {code} {body}")
            time.sleep(0.1)


def _owner(c: Cluster, via: int, guild_id: str):
    s = c.node(via)
    _, body, _ = Rest(s.base, c.rest_log).request(
        "GET", f"/api/v10/_throng/admin/guilds/{guild_id}/owner", headers={"X-Throng-Admin-Token": s.admin},
        expect=(200,))
    return body.get("node") if isinstance(body, dict) else None


def _setup(c: Cluster, throng_bin: str):
    c.nats.start()
    for i in (1, 2, 3):
        (c.workdir / f"node{i}").mkdir(exist_ok=True)
        s = Server(throng_bin, c.workdir / f"node{i}", heartbeat_ms=HEARTBEAT_MS, data_dir=c.workdir / "data",
                   extra_args=["--nats", c.nats.url, "--node-id", str(i)])
        c.nodes.append(s)
        # node 1 creates the shared store before the others open it
        if i == 1:
            s.start()
    for s in c.nodes[1:]:
        s.start()
    _converge(c)

    r1 = Rest(c.node(1).base, c.rest_log)
    for who in ("alice", "bob"):
        name = f"{who}_{secrets.token_hex(3)}"
        _, reg, _ = r1.request("POST", "/api/v10/auth/register", {"username": name, "password": "pw-" + secrets.token_hex(8)},
                               expect=(200, 201))
        _, me, _ = r1.request("GET", "/api/v10/users/@me", auth=reg["token"], expect=(200,))
        setattr(c, who, {"token": reg["token"], "id": str(me["id"]), "name": name})

    # Guilds until one is placed on node 2 (each try has a ~1/3 chance).
    for attempt in range(1, 41):
        _, g, _ = r1.request("POST", "/api/v10/guilds", {"name": f"cluster {attempt}"}, auth=c.alice["token"],
                             expect=(200, 201))
        c.guilds_tried = attempt
        if _owner(c, 1, str(g["id"])) == OWNER_NODE:
            c.guild_id = str(g["id"])
            break
    if not c.guild_id:
        raise AssertionError(f"none of {c.guilds_tried} guilds was placed on node {OWNER_NODE}")
    c.owner_answers = {i: _owner(c, i, c.guild_id) for i in (1, 2, 3)}
    _, chans, _ = r1.request("GET", f"/api/v10/guilds/{c.guild_id}/channels", auth=c.alice["token"], expect=(200,))
    c.channel_id = str(next(ch for ch in chans if ch.get("type") == 0)["id"])

    c.dpy_token = c.node(1).create_bot("cluster-dpy")
    c.djs_token = c.node(3).create_bot("cluster-djs")
    for attr, tok in (("dpy_id", c.dpy_token), ("djs_id", c.djs_token)):
        _, me, _ = r1.request("GET", "/api/v10/users/@me", auth=f"Bot {tok}", expect=(200,))
        setattr(c, attr, str(me["id"]))
    # Membership changes go through the actor on node 2 from node 3's REST.
    r3 = Rest(c.node(3).base, c.rest_log)
    _, inv, _ = r3.request("POST", f"/api/v10/channels/{c.channel_id}/invites", {}, auth=c.alice["token"], expect=(200,))
    r3.request("POST", f"/api/v10/invites/{inv['code']}", {}, auth=c.bob["token"], expect=(200,))
    for uid in (c.dpy_id, c.djs_id):
        r3.request("POST", f"/api/v10/oauth2/authorize?client_id={uid}&scope=bot",
                   {"guild_id": c.guild_id, "permissions": "0", "authorize": True}, auth=c.alice["token"], expect=(200,))

    # alice watches from node 3: presences + member list
    c.watcher = RawGateway(f"ws://127.0.0.1:{c.node(3).port}/?v=10&encoding=json", c.alice["token"], WATCHER_INTENTS,
                           c.workdir / "alice_node3_gateway.log")
    c.watcher.start()
    gc = c.watcher.wait_for(lambda f: f.get("t") == "GUILD_CREATE" and str(f["d"]["id"]) == c.guild_id, STEP)
    if gc is None:
        raise AssertionError(f"alice on node 3 got no GUILD_CREATE for {c.guild_id} (close={c.watcher.close_code}, "
                             f"error={c.watcher.error})")
    mark = len(c.watcher.frames)
    c.watcher.send({"op": 14, "d": {"guild_id": c.guild_id, "typing": True, "activities": True,
                                    "channels": {c.channel_id: [[0, 99]]}}})
    c.list_sync = c.watcher.wait_for(
        lambda f: f.get("t") == "GUILD_MEMBER_LIST_UPDATE" and any(o.get("op") == "SYNC" for o in f["d"]["ops"]),
        STEP, start=mark)
    if c.list_sync is None:
        raise AssertionError("alice's op 14 on node 3 got no GUILD_MEMBER_LIST_UPDATE SYNC")

    # bob on node 1, then the two libraries
    c.bobgw = RawGateway(f"ws://127.0.0.1:{c.node(1).port}/?v=10&encoding=json", c.bob["token"], PLAIN_INTENTS,
                         c.workdir / "bob_node1_gateway.log")
    c.bobgw.start()
    if c.bobgw.wait_for(lambda f: f.get("t") == "GUILD_CREATE" and str(f["d"]["id"]) == c.guild_id, STEP) is None:
        raise AssertionError(f"bob on node 1 got no GUILD_CREATE (close={c.bobgw.close_code}, error={c.bobgw.error})")
    c.dpy = BotProcess("bot-dpy-node1", [str(DPY.python), str(HERE / "bots" / "dpy_bot.py"), "--base", c.node(1).base,
                                         "--token", c.dpy_token], c.workdir)
    c.djs = BotProcess("bot-djs-node3", [shutil.which("node"), str(HERE / "bots" / "djs_bot.js"), "--base",
                                         c.node(3).base, "--token", c.djs_token, "--djs-dir", str(DJS.djs_dir)],
                       c.workdir)
    c.dpy.start()
    c.djs.start()


@pytest.fixture(scope="module")
def cluster():
    start_budget(BUDGET_S)
    check_available(DPY)
    check_available(DJS)
    workdir = _artifacts()
    print(f"\n[compat] cluster artifacts: {workdir}")
    throng_bin = _pinned_bin(workdir)
    c = Cluster(workdir=workdir, nats=Nats(workdir), nodes=[])
    try:
        _setup(c, throng_bin)
    except BaseException as exc:
        # Nothing started here may outlive the test, whatever went wrong (a timeout included).
        msg = f"[cluster] setup failed: {type(exc).__name__}: {exc}\n\n{c.diag()}"
        _teardown(c)
        if isinstance(exc, Exception):
            pytest.fail(msg, pytrace=False)
        raise
    try:
        yield c
    finally:
        _teardown(c)


@pytest.fixture(autouse=True)
def _budget_guard():
    if budget_left() <= 0:
        pytest.fail(f"cluster time budget of {BUDGET_S:.0f}s (COMPAT_CLUSTER_BUDGET_S) exhausted", pytrace=False)
    yield


def require_ready(c: Cluster, which: str) -> dict:
    if which in c.ready:
        return c.ready[which]
    bot = c.dpy if which == "dpy" else c.djs
    ev = bot.wait_for(lambda e: e["event"] in ("ready", "fatal", "login_error"), READY_TIMEOUT)
    if ev is None or ev["event"] != "ready":
        c.fail(f"{which} bot did not become ready: {ev!r}")
    c.ready[which] = ev
    return ev


# --------------------------------------------------------------------------- tests


def test_c0_cluster_and_placement(cluster: Cluster):
    c = cluster
    for i, s in enumerate(c.nodes, 1):
        code, body = health(s)
        if code != 200 or body.get("status") != "ok" or body.get("node") != i or body.get("cluster_nodes") != [1, 2, 3]:
            c.fail(f"node {i} /health -> {code} {body}")
    if c.owner_answers != {1: OWNER_NODE, 2: OWNER_NODE, 3: OWNER_NODE}:
        c.fail(f"nodes disagree on the owner of guild {c.guild_id}: {c.owner_answers}")
    require_ready(c, "dpy")
    require_ready(c, "djs")
    # The guild's only actor runs on node 2; each session sits where it connected.
    views = {i: health(s)[1] for i, s in enumerate(c.nodes, 1)}
    actors = {i: v.get("guild_actors") for i, v in views.items()}
    if not actors[2] or actors[2] < 1:
        c.fail(f"guild actors per node {actors}: node 2 runs none")
    sessions = {i: v.get("sessions") for i, v in views.items()}
    if sessions != {1: 2, 2: 0, 3: 2}:
        c.fail(f"sessions per node {sessions}; expected node 1: dpy bot + bob, node 2: none, node 3: djs bot + alice")


def test_c1_libraries_ready_with_the_guild(cluster: Cluster):
    c = cluster
    for which, bot, uid in (("dpy", c.dpy, c.dpy_id), ("djs", c.djs, c.djs_id)):
        ev = require_ready(c, which)
        if ev.get("user_id") != uid:
            c.fail(f"{which} READY user {ev.get('user_id')} != bot {uid}")
        if c.guild_id not in (ev.get("guilds") or []):
            c.fail(f"{which} bot on its node is ready without guild {c.guild_id} (owned by node 2): {ev.get('guilds')}")
        gcs = [e for e in bot.find("guild_create") if e.get("id") == c.guild_id]
        if not gcs or not any(ch.get("id") == c.channel_id for ch in gcs[-1].get("channels", [])):
            c.fail(f"{which}: library's guild {c.guild_id} lacks channel {c.channel_id}: {gcs[-1:]}")


def _reply_for(bot: BotProcess, ping_id: str, start: int, timeout=STEP):
    return bot.wait_for(lambda e: e["event"] == "reply_sent" and e.get("reference_id") == ping_id
                        or (e["event"] == "error" and e.get("where") == "reply"), timeout, start=start)


def _seen(bot: BotProcess, msg_id: str, start: int, timeout=STEP):
    return bot.wait_for(lambda e: e["event"] == "message" and e.get("id") == msg_id, timeout, start=start)


def test_c2_messages_both_ways(cluster: Cluster):
    c = cluster
    require_ready(c, "dpy")
    require_ready(c, "djs")
    posted = []  # ids in post order

    # 1. alice (REST on node 2, the owner) says ping; each library answers and sees the other's answer.
    md, mj = c.dpy.mark(), c.djs.mark()
    ping = c.post(2, c.alice["token"], "ping")
    pid = str(ping["id"])
    posted.append(pid)
    replies = {}
    for which, bot, other in (("dpy", c.dpy, c.djs), ("djs", c.djs, c.dpy)):
        seen = _seen(bot, pid, md if which == "dpy" else mj)
        if seen is None or seen.get("author_id") != c.alice["id"] or seen.get("guild_id") != c.guild_id:
            c.fail(f"{which} bot did not see alice's ping {pid} with author/guild right: {seen!r}")
        rs = _reply_for(bot, pid, md if which == "dpy" else mj)
        if rs is None or rs["event"] != "reply_sent":
            c.fail(f"{which} library did not reply to ping {pid}: {rs!r}")
        replies[which] = rs["id"]
    for which, bot, frm, mark in (("dpy", c.dpy, "djs", md), ("djs", c.djs, "dpy", mj)):
        rid = replies[frm]
        seen = _seen(bot, rid, mark)
        want_author = c.djs_id if frm == "djs" else c.dpy_id
        if seen is None:
            c.fail(f"{which} bot never saw the {frm} bot's pong {rid}")
        if (seen.get("author_id"), seen.get("content"), seen.get("reference_id")) != (want_author, "pong", pid):
            c.fail(f"{which} saw {frm}'s pong as {seen!r}")
    posted += sorted(replies.values(), key=int)

    # 2. a ping from the js bot's account (REST on node 3) -> discord.py (node 1) replies -> discord.js sees it.
    # 3. and the reverse: a ping from the py bot's account (node 1) -> discord.js (node 3) replies -> discord.py sees it.
    for sender, node, sender_bot, responder, resp_name in (
            (c.djs_token, 3, c.djs, c.dpy, "dpy"), (c.dpy_token, 1, c.dpy, c.djs, "djs")):
        ms, mr = sender_bot.mark(), responder.mark()
        p = c.post(node, f"Bot {sender}", "ping")
        p_id = str(p["id"])
        posted.append(p_id)
        rs = _reply_for(responder, p_id, mr)
        if rs is None or rs["event"] != "reply_sent":
            c.fail(f"{resp_name} library did not answer the other bot's ping {p_id}: {rs!r}")
        posted.append(rs["id"])
        seen = _seen(sender_bot, rs["id"], ms)
        if seen is None or seen.get("reference_id") != p_id or seen.get("content") != "pong":
            c.fail(f"the pinging bot did not see {resp_name}'s pong {rs['id']} to its ping {p_id}: {seen!r}")
        own = _seen(sender_bot, p_id, ms, timeout=1)
        if own is None:
            c.fail(f"the pinging bot's library did not see its own ping {p_id} (MESSAGE_CREATE to the author's session)")
        if [e for e in sender_bot.events[ms:] if e.get("event") == "reply_sent"]:
            c.fail("a bot answered a message it should not have (its own ping or a pong)")

    # Every message reached the raw sessions on both nodes, and the history (read on node 2) has each once, in order.
    for name, gw in (("alice@node3", c.watcher), ("bob@node1", c.bobgw)):
        for mid in posted:
            if gw.wait_for(lambda f: f.get("t") == "MESSAGE_CREATE" and str(f["d"]["id"]) == mid, STEP) is None:
                c.fail(f"{name} never got MESSAGE_CREATE {mid}")
        got = [str(f["d"]["id"]) for f in gw.dispatches("MESSAGE_CREATE")]
        if sorted(got, key=int) != sorted(posted, key=int) or len(got) != len(set(got)):
            c.fail(f"{name} MESSAGE_CREATE ids {got} != posted {posted} (missing or duplicated)")
    _, hist, _ = c.req(2, "GET", f"/api/v10/channels/{c.channel_id}/messages?limit=50", auth=c.alice["token"],
                       expect=(200,))
    ids = [str(m["id"]) for m in hist][::-1]
    if ids != sorted(posted, key=int):
        c.fail(f"history oldest-first {ids} != the {len(posted)} messages posted {sorted(posted, key=int)}")


def _list_updates(c: Cluster, start: int):
    return [f for f in c.watcher.frames[start:] if f.get("t") == "GUILD_MEMBER_LIST_UPDATE"]


def _member_ids_in_ops(frames) -> set:
    out = set()
    for f in frames:
        for o in f["d"].get("ops", []):
            items = o.get("items") or ([o["item"]] if o.get("item") else [])
            for it in items:
                m = it.get("member") if isinstance(it, dict) else None
                if m and m.get("user"):
                    out.add(str(m["user"]["id"]))
    return out


def _bob_goes_dnd(c: Cluster) -> int:
    """bob (node 1) sends op 3 status dnd once; returns alice's frame index from before it."""
    if c.op3_mark is None:
        c.op3_mark = len(c.watcher.frames)
        c.bobgw.send({"op": 3, "d": {"status": "dnd", "since": None, "activities": [], "afk": False}})
    return c.op3_mark


def test_c3_member_list_ops(cluster: Cluster):
    c = cluster
    require_ready(c, "dpy")
    require_ready(c, "djs")
    # The SYNC alice got on node 3 for her op 14, from the actor on node 2, lists all four members.
    d = c.list_sync["d"]
    if str(d.get("guild_id")) != c.guild_id or d.get("member_count") != 4:
        c.fail(f"member list SYNC: guild {d.get('guild_id')} member_count {d.get('member_count')} (want 4): "
               f"{json.dumps(d)[:800]}")
    members = _member_ids_in_ops([c.list_sync])
    want = {c.alice["id"], c.bob["id"], c.dpy_id, c.djs_id}
    if members != want:
        c.fail(f"member list SYNC holds {members}, expected {want}")
    # Later list ops move bob (node 1) and both bots (nodes 1 and 3) into the online group.
    deadline = time.monotonic() + STEP
    while True:
        ups = _list_updates(c, 0)
        moved = _member_ids_in_ops(ups[1:])
        if {c.bob["id"], c.dpy_id, c.djs_id} <= moved and ups[-1]["d"].get("online_count") == 4:
            break
        if time.monotonic() > deadline:
            c.fail(f"member-list ops after the SYNC touched {moved} with online_count "
                   f"{[f['d'].get('online_count') for f in ups]}; expected bob and both bots going online (4 online)")
        time.sleep(0.1)
    # bob's op 3 (node 1) -> an op for his list item with status dnd.
    mark = _bob_goes_dnd(c)
    lu = c.watcher.wait_for(lambda f: f.get("t") == "GUILD_MEMBER_LIST_UPDATE"
                            and c.bob["id"] in _member_ids_in_ops([f]), STEP, start=mark)
    if lu is None:
        c.fail("alice's member list got no op for bob's op 3 status change")
    ops = lu["d"]["ops"]
    statuses = [((it.get("member") or {}).get("presence") or {}).get("status")
                for o in ops for it in (o.get("items") or [o.get("item") or {}])
                if str(((it.get("member") or {}).get("user") or {}).get("id")) == c.bob["id"]]
    if "dnd" not in statuses:
        c.fail(f"member-list op for bob does not carry status dnd: {json.dumps(ops)[:800]}")


def test_c4_presence_updates_cross_nodes(cluster: Cluster):
    """alice (GUILD_PRESENCES, node 3) is the guild's only presence subscriber; its actor is on node 2."""
    c = cluster
    require_ready(c, "dpy")
    require_ready(c, "djs")
    for who, uid in (("bob@node1", c.bob["id"]), ("dpy bot@node1", c.dpy_id), ("djs bot@node3", c.djs_id)):
        p = c.watcher.wait_for(lambda f: f.get("t") == "PRESENCE_UPDATE" and str(f["d"]["user"]["id"]) == uid
                               and f["d"].get("status") == "online", STEP)
        if p is None:
            c.fail(f"alice (node 3, GUILD_PRESENCES) got no PRESENCE_UPDATE online for {who} ({uid}) from the "
                   f"actor on node 2 (her member list did get the change)")
        if str(p["d"].get("guild_id")) != c.guild_id:
            c.fail(f"PRESENCE_UPDATE for {who} carries guild_id {p['d'].get('guild_id')}")
    mark = _bob_goes_dnd(c)
    p = c.watcher.wait_for(lambda f: f.get("t") == "PRESENCE_UPDATE" and str(f["d"]["user"]["id"]) == c.bob["id"],
                           STEP, start=mark)
    if p is None or p["d"].get("status") != "dnd":
        c.fail(f"alice did not see bob's op 3 status dnd as a PRESENCE_UPDATE: {p!r}")


def test_c5_no_library_errors_and_all_alive(cluster: Cluster):
    c = cluster
    require_ready(c, "dpy")
    require_ready(c, "djs")
    # Live through a few heartbeat intervals after the later READY.
    wait = max(c.ready["dpy"]["_rx"], c.ready["djs"]["_rx"]) + 3 * HEARTBEAT_MS / 1000 + 0.5 - time.monotonic()
    if wait > 0:
        time.sleep(min(wait, budget_left()))
    problems = []
    for name, bot in (("dpy", c.dpy), ("djs", c.djs)):
        for e in bot.problems():
            e = {k: v for k, v in e.items() if k != "_rx"}
            problems.append(f"{name}: " + json.dumps(e, default=str)[:700])
        for w in [e for e in bot.find("log") if e.get("level") in ("WARNING", "WARN")]:
            problems.append(f"{name} library warning: " + json.dumps({k: v for k, v in w.items() if k != "_rx"})[:600])
        drops = [e for e in bot.events if e.get("event") in ("disconnect", "reconnecting", "shard_disconnect")]
        if drops:
            problems.append(f"{name} connection dropped: {drops[:3]}")
        acks = [e for e in bot.events if (e.get("event") == "raw_op" and e.get("op") == 11) or e.get("event") == "heartbeat_ack"]
        if len(acks) < 2:
            problems.append(f"{name} got only {len(acks)} heartbeat ACKs")
        if bot.exited:
            problems.append(f"{name} bot process exited (rc={bot.proc.returncode})")
    for name, gw in (("alice@node3", c.watcher), ("bob@node1", c.bobgw)):
        if gw.closed:
            problems.append(f"{name} raw session closed (code={gw.close_code}, error={gw.error})")
    for i, s in enumerate(c.nodes, 1):
        if not s.alive():
            problems.append(f"node {i} died")
    if c.nats.proc.poll() is not None:
        problems.append("nats-server died")
    if problems:
        c.fail("problems during the cluster run:\n  " + "\n  ".join(problems))
