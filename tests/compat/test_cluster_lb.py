"""The load-balancer recipe under test: scripts/cluster.sh + deploy/haproxy.cfg with real clients.

`scripts/cluster.sh start 3` (nats-server, 3 nodes on one shared data dir, HAProxy from Debian,
installed by `scripts/cluster.sh install` when missing) on a free port range; everything goes
through HAProxy's one public port:

  test_l0  /health through HAProxy is 200 and HAProxy's checks see all three servers UP
  test_l1  a discord.py bot and a discord.js bot, both pointed at the balancer only (the gateway
           URL handed out must be the balancer's), get READY; a ping posted through the balancer
           is answered by both libraries and each sees the other's pong
  test_l2  TERM of the node holding the discord.py session: HAProxy takes it out of rotation, the
           library comes back through the balancer on another node and answers a new ping
  teardown `scripts/cluster.sh stop` leaves no process of the cluster running

Env: THRONG_BIN as for the rest of the suite; COMPAT_LB_BUDGET_S (150) bounds the module.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness import HERE, BotProcess, Rest, RestError, budget_left, database_for, server_log_excerpt, start_budget, store_args, tail_file
from test_compat import Variant, check_available

ROOT = HERE.parent.parent
CLUSTER_SH = ROOT / "scripts" / "cluster.sh"
BUDGET_S = float(os.environ.get("COMPAT_LB_BUDGET_S", "150"))
STEP = 20.0
READY_TIMEOUT = 40.0
NODES = 3

DPY = Variant("dpy-zstd", "dpy", "zstd-stream", python=HERE / ".venv-zstd" / "bin" / "python")
DJS = Variant("djs", "djs", "none", djs_dir=HERE / "js")

pytestmark = pytest.mark.timeout(BUDGET_S + 60)


def _port_free(p: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False


def _free_range(n: int) -> int:
    """A base port P with P..P+n-1 all free (cluster.sh uses consecutive ports),
    below the kernel's ephemeral range where it can: cluster.sh binds them
    one by one while the NATS servers and the first nodes dial out, and an
    outgoing connection given one of them as its local port would take it."""
    low, span = 20000, 30000
    try:
        first = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        if first - n > 12000:
            low, span = 10000, first - n - 10000
    except (OSError, ValueError, IndexError):
        pass
    for _ in range(200):
        base = low + secrets.randbelow(span)
        if all(_port_free(base + i) for i in range(n)):
            return base
    raise AssertionError(f"no {n} consecutive free ports found")


def _get(url: str):
    try:
        with urllib.request.urlopen(url, timeout=3) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except Exception as e:
        return None, f"{type(e).__name__}: {e}"


class LB:
    def __init__(self, workdir: Path, throng_bin: str):
        self.workdir = workdir
        self.run = workdir / "run"
        self.bin = throng_bin
        # Public, N nodes, stats, then 3 NATS servers (client and route ports).
        self.base_port = _free_range(NODES + 2 + 6)
        self.base = f"http://127.0.0.1:{self.base_port}"
        self.stats = self.base_port + NODES + 1
        self.rest_log: list = []
        self.rest = Rest(self.base, self.rest_log)
        self.bots: list = []
        self.started = False

    def sh(self, *args, timeout=180) -> subprocess.CompletedProcess:
        env = dict(os.environ, THRONG_BIN=self.bin)
        r = subprocess.run([str(CLUSTER_SH), *args], capture_output=True, text=True, timeout=timeout, env=env,
                           stdin=subprocess.DEVNULL)
        with open(self.workdir / "cluster.sh.log", "a") as f:
            f.write(f"$ cluster.sh {' '.join(args)}\nrc={r.returncode}\n{r.stdout}\n{r.stderr}\n")
        return r

    def start(self):
        r = self.sh("install", timeout=600)
        if r.returncode != 0:
            raise AssertionError(f"scripts/cluster.sh install failed rc={r.returncode}: {r.stderr[-1500:]}")
        self.started = True
        db = database_for(self.run / "data")
        r = self.sh("start", str(NODES), "--base-port", str(self.base_port), "--run-dir", str(self.run),
                    *(["--", "--database", db] if db else []))
        if r.returncode != 0:
            raise AssertionError(f"scripts/cluster.sh start {NODES} failed rc={r.returncode}:\n{r.stderr[-2500:]}")

    def stop(self):
        for b in self.bots:
            try:
                b.stop()
            except Exception:
                pass
        if self.started:
            self.sh("stop", "--run-dir", str(self.run), timeout=120)
        with open(self.workdir / "rest.log", "w") as f:
            f.write("\n".join(self.rest_log) + "\n")

    def pid(self, name: str):
        try:
            return int((self.run / f"{name}.pid").read_text().strip())
        except (OSError, ValueError):
            return None

    def servers(self) -> dict:
        """HAProxy's view: {node i: (status, current sessions)}."""
        _, body = _get(f"http://127.0.0.1:{self.stats}/stats;csv")
        out = {}
        for line in (body or "").splitlines():
            f = line.split(",")
            if len(f) > 18 and f[0] == "throng_nodes" and f[1].startswith("node"):
                out[int(f[1][4:])] = (f[17], int(f[4] or 0))
        return out

    def node_sessions(self) -> dict:
        out = {}
        for i in range(1, NODES + 1):
            code, body = _get(f"http://127.0.0.1:{self.base_port + i}/health")
            try:
                out[i] = json.loads(body)["sessions"]
            except Exception:
                out[i] = None
        return out

    def diag(self) -> str:
        parts = ["--- REST transcript (last 10) ---", *self.rest_log[-10:],
                 f"--- cluster.sh transcript ---\n{tail_file(self.workdir / 'cluster.sh.log', 30)}",
                 f"--- HAProxy view {self.servers()} ---", tail_file(self.run / "haproxy.log", 10)]
        for b in self.bots:
            parts.append(b.summary(25, 10))
        for i in range(1, NODES + 1):
            parts.append(f"--- node {i} log ---\n" + server_log_excerpt(self.run / f"node-{i}.log", 10))
        return "\n".join(parts)

    def fail(self, msg: str):
        pytest.fail(f"[lb] {msg}\n\n{self.diag()}", pytrace=False)


@pytest.fixture(scope="module")
def lb():
    start_budget(BUDGET_S)
    check_available(DPY)
    check_available(DJS)
    root = os.environ.get("COMPAT_ARTIFACTS")
    workdir = Path(root) / "lb" if root else HERE / ".artifacts" / (time.strftime("%Y%m%d-%H%M%S") + "-lb")
    if not root:
        for old in sorted(d for d in (HERE / ".artifacts").glob("*-lb") if d.is_dir())[:-4]:
            shutil.rmtree(old, ignore_errors=True)
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"\n[compat] lb artifacts: {workdir}")
    b = os.environ.get("THRONG_BIN", str(ROOT / "target" / "debug" / "throng"))
    if not (os.path.isfile(b) and os.access(b, os.X_OK)):
        pytest.fail(f"server binary {b} not found/executable", pytrace=False)
    pinned = workdir / "throng.bin"
    if pinned.exists():
        pinned.unlink()
    try:
        os.link(b, pinned)
        b = str(pinned)
    except OSError:
        pass
    c = LB(workdir, b)
    try:
        c.start()
    except BaseException as exc:
        msg = f"[lb] setup failed: {type(exc).__name__}: {exc}\n\n{c.diag()}"
        c.stop()
        if isinstance(exc, Exception):
            pytest.fail(msg, pytrace=False)
        raise
    try:
        yield c
    finally:
        c.stop()
        # Nothing of the cluster may outlive `stop`.
        left = []
        for name in [f"node-{i}" for i in range(1, NODES + 1)] + ["haproxy", "nats/nats"]:
            p = c.pid(name)
            if p and os.path.exists(f"/proc/{p}") and "Z" not in Path(f"/proc/{p}/stat").read_text().split(")")[1][:3]:
                left.append(f"{name} pid {p}")
        assert not left, f"scripts/cluster.sh stop left processes running: {left}"


@pytest.fixture(autouse=True)
def _budget_guard():
    if budget_left() <= 0:
        pytest.fail(f"lb time budget of {BUDGET_S:.0f}s (COMPAT_LB_BUDGET_S) exhausted", pytrace=False)
    yield


def test_l0_health_and_checks_through_haproxy(lb: LB):
    code, body = _get(lb.base + "/health")
    if code != 200 or json.loads(body).get("cluster_nodes") != list(range(1, NODES + 1)):
        lb.fail(f"/health through HAProxy -> {code} {body}")
    view = lb.servers()
    if sorted(view) != list(range(1, NODES + 1)) or any(st != "UP" for st, _ in view.values()):
        lb.fail(f"HAProxy's checks: {view}; expected {NODES} servers UP")
    code, body = _get(lb.base + "/api/v10/gateway")
    if code != 200 or json.loads(body).get("url", "").rstrip("/") != f"ws://127.0.0.1:{lb.base_port}":
        lb.fail(f"GET /api/v10/gateway through HAProxy -> {code} {body}: the gateway URL must be the balancer's")


def _ready(lb: LB, bot: BotProcess, start=0, timeout=READY_TIMEOUT):
    ev = bot.wait_for(lambda e: e["event"] in ("ready", "fatal", "login_error"), timeout, start=start)
    if ev is None or ev["event"] != "ready":
        lb.fail(f"{bot.name} did not become ready through the balancer: {ev!r}")
    return ev


def _pinged(lb: LB, human_token: str, channel: str, bots: list):
    marks = [b.mark() for b in bots]
    deadline = time.monotonic() + STEP
    while True:
        # 503 + Retry-After is the documented answer while a guild moves to another node
        status, ping, _ = lb.rest.request("POST", f"/api/v10/channels/{channel}/messages", {"content": "ping"},
                                          auth=human_token, expect=(200, 503))
        if status == 200:
            break
        if time.monotonic() > deadline:
            lb.fail(f"POST ping through the balancer kept answering 503 for {STEP:.0f} s: {ping!r}")
        time.sleep(0.5)
    pid = str(ping["id"])
    replies = {}
    for b, m in zip(bots, marks):
        rs = b.wait_for(lambda e: e["event"] == "reply_sent" and e.get("reference_id") == pid, STEP, start=m)
        if rs is None:
            lb.fail(f"{b.name} did not answer ping {pid} posted through the balancer")
        replies[b.name] = (rs["id"], m)
    return pid, replies


def test_l1_libraries_through_the_balancer(lb: LB):
    run_data = lb.run / "data"
    tokens = {}
    for name in ("lb-dpy", "lb-djs"):
        r = subprocess.run([lb.bin, "bot", "create", name, *store_args(run_data)], capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        lines = [l for l in r.stdout.splitlines() if l.strip()]
        if r.returncode != 0 or not lines:
            lb.fail(f"throng bot create {name} failed: {r.stderr[-800:]}")
        tokens[name] = lines[-1].strip()
    try:
        _, reg, _ = lb.rest.request("POST", "/api/v10/auth/register",
                                    {"username": "lbhuman_" + secrets.token_hex(3), "password": "pw-" + secrets.token_hex(8)})
        human = reg["token"]
        _, g, _ = lb.rest.request("POST", "/api/v10/guilds", {"name": "lb guild"}, auth=human)
        _, chans, _ = lb.rest.request("GET", f"/api/v10/guilds/{g['id']}/channels", auth=human)
        channel = str(next(ch for ch in chans if ch["type"] == 0)["id"])
        ids = {}
        for name, tok in tokens.items():
            _, me, _ = lb.rest.request("GET", "/api/v10/users/@me", auth=f"Bot {tok}")
            ids[name] = str(me["id"])
            lb.rest.request("POST", f"/api/v10/oauth2/authorize?client_id={me['id']}&scope=bot",
                            {"guild_id": g["id"], "permissions": "0", "authorize": True}, auth=human)
    except (RestError, KeyError, StopIteration) as e:
        lb.fail(f"REST setup through the balancer failed: {e}")
    dpy = BotProcess("lb-bot-dpy", [str(DPY.python), str(HERE / "bots" / "dpy_bot.py"), "--base", lb.base,
                                    "--token", tokens["lb-dpy"]], lb.workdir)
    djs = BotProcess("lb-bot-djs", [shutil.which("node"), str(HERE / "bots" / "djs_bot.js"), "--base", lb.base,
                                    "--token", tokens["lb-djs"], "--djs-dir", str(DJS.djs_dir)], lb.workdir)
    lb.bots += [dpy, djs]
    dpy.start()
    djs.start()
    for b in (dpy, djs):
        ev = _ready(lb, b)
        if str(g["id"]) not in (ev.get("guilds") or []):
            lb.fail(f"{b.name} READY without its guild {g['id']}: {ev.get('guilds')}")
    sessions = lb.node_sessions()
    if sum(v or 0 for v in sessions.values()) != 2:
        lb.fail(f"sessions per node {sessions}: expected the two bots' sessions, through the balancer")
    pid, replies = _pinged(lb, human, channel, [dpy, djs])
    for b, other in ((dpy, djs), (djs, dpy)):
        rid, m = replies[other.name]
        seen = b.wait_for(lambda e: e["event"] == "message" and e.get("id") == rid, STEP, start=m)
        if seen is None or seen.get("reference_id") != pid:
            lb.fail(f"{b.name} did not see {other.name}'s pong {rid}: {seen!r}")
    lb.state = {"human": human, "channel": channel, "dpy": dpy, "djs": djs}


def test_l2_node_stops_library_comes_back_through_haproxy(lb: LB):
    st = getattr(lb, "state", None)
    if st is None:
        lb.fail("test_l1 did not set up the bots")
    dpy, djs = st["dpy"], st["djs"]
    before = lb.node_sessions()
    # Stop a node that holds at least one of the two bots' sessions.
    holders = [i for i, n in before.items() if n]
    if not holders:
        lb.fail(f"no node holds a session: {before}")
    victim = holders[0]
    pid = lb.pid(f"node-{victim}")
    os.kill(pid, 15)
    deadline = time.monotonic() + STEP
    while lb.servers().get(victim, ("?",))[0] == "UP":
        if time.monotonic() > deadline:
            lb.fail(f"HAProxy still has node {victim} UP {STEP:.0f} s after it was stopped: {lb.servers()}")
        time.sleep(0.2)
    # The bot(s) of that node reconnect through the balancer to the remaining nodes.
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        after = lb.node_sessions()
        alive = {i: n for i, n in after.items() if i != victim}
        if sum(v or 0 for v in alive.values()) == 2:
            break
        if time.monotonic() > deadline:
            lb.fail(f"after stopping node {victim} the bots' sessions did not come back on the other nodes: "
                    f"before {before}, now {after}")
        time.sleep(0.5)
    _pinged(lb, st["human"], st["channel"], [dpy, djs])
    for b in (dpy, djs):
        if b.exited:
            lb.fail(f"{b.name} exited")
        fatal = [e for e in b.events if e.get("event") in ("fatal", "login_error")]
        if fatal:
            lb.fail(f"{b.name}: {fatal}")
