"""Test harness for the throng real-client compat suite.

Pieces:
  * ``Server``      - runs ``throng serve`` on a free port with a temp data dir.
  * ``Rest``        - tiny synchronous REST client (urllib) that records every exchange.
  * ``RawGateway``  - the human's raw gateway session (aiohttp in a background thread).
  * ``BotProcess``  - a library bot subprocess emitting JSON lines on stdout.

Everything records a transcript so that a failing assertion can print exactly
which request/response or gateway frame broke.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import deque
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Whole-run time budget: every wait is clamped to it, so a badly broken server makes the suite
# fail fast instead of running into the CI timeout (set the start with start_budget()).
_BUDGET_DEADLINE = None


def start_budget(seconds: float) -> None:
    global _BUDGET_DEADLINE
    _BUDGET_DEADLINE = time.monotonic() + seconds


def budget_left() -> float:
    return float("inf") if _BUDGET_DEADLINE is None else max(0.0, _BUDGET_DEADLINE - time.monotonic())


def _clamp(timeout: float) -> float:
    return min(timeout, budget_left())
DEFAULT_BIN = "/work/main/target/debug/throng"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def server_log_excerpt(path: Path, n: int = 40) -> str:
    """Tail of the server log without ANSI colours/backtrace frames, plus any
    panic messages and the error `throng` exited with (`Error: ...`)."""
    try:
        raw = open(path, "r", errors="replace").read().splitlines()
    except FileNotFoundError:
        return "<no server log>"
    lines = [_ANSI.sub("", l) for l in raw]
    lines = [l for l in lines if not re.match(r"^\s+(\d+: |at )", l)]
    panics = []
    for i, l in enumerate(lines):
        if "panicked at" in l or l.startswith("Error: "):
            msg = l + (" :: " + lines[i + 1] if i + 1 < len(lines) else "")
            if msg not in panics:
                panics.append(msg)
    out, prev, rep = [], None, 0
    for l in lines[-4 * n:]:
        if l == prev:
            rep += 1
            continue
        if rep:
            out.append(f"    (previous line repeated {rep} more times)")
        out.append(l if len(l) <= 600 else l[:600] + "...")
        prev, rep = l, 0
    if rep:
        out.append(f"    (previous line repeated {rep} more times)")
    head = ("PANICS AND ERRORS:\n  " + "\n  ".join(panics[:5]) + "\n") if panics else ""
    return head + "\n".join(out[-n:])


def tail_file(path: Path, n: int = 60, width: int = 600) -> str:
    try:
        with open(path, "r", errors="replace") as f:
            lines = deque(f, maxlen=n)
        return "".join(l if len(l) <= width else l[:width] + f"...(+{len(l) - width} chars)\n" for l in lines)
    except FileNotFoundError:
        return "<no file>"


def _kill_tree(proc: subprocess.Popen, grace: float = 3.0) -> None:
    """Terminate a process we started (its own process group), then kill it."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        try:
            proc.terminate()
        except ProcessLookupError:
            return
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
        proc.wait(timeout=5)


# --------------------------------------------------------------------------- REST


class RestError(AssertionError):
    pass


class Rest:
    def __init__(self, base: str, log: list):
        self.base = base.rstrip("/")
        self.log = log  # shared transcript list of strings

    def request(self, method, path, body=None, auth=None, headers=None, expect=(200, 201, 204), timeout=10):
        url = self.base + path
        data = None
        hdrs = {"User-Agent": "throng-compat-harness"}
        if body is not None:
            data = json.dumps(body).encode()
            hdrs["Content-Type"] = "application/json"
        if auth:
            hdrs["Authorization"] = auth
        if headers:
            hdrs.update(headers)
        req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
        t0 = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                status, rbody, rhdrs = resp.status, resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as e:
            status, rbody, rhdrs = e.code, e.read(), dict(e.headers or {})
        except Exception as e:  # connection refused, timeout...
            entry = f"{method} {path} body={_short(body)} -> EXCEPTION {type(e).__name__}: {e}"
            self.log.append(entry)
            raise RestError(entry) from e
        dt = (time.monotonic() - t0) * 1000
        text = rbody.decode("utf-8", "replace")
        entry = (
            f"{method} {path} body={_short(body)} -> {status} ({dt:.0f} ms) "
            f"content-type={rhdrs.get('Content-Type')!r} body={_short(text, 600)}"
        )
        self.log.append(entry)
        if expect and status not in expect:
            raise RestError(f"unexpected status {status} (expected {expect}):\n  {entry}")
        parsed = None
        if text:
            try:
                parsed = json.loads(text)
            except ValueError:
                if expect:
                    raise RestError(f"response is not JSON:\n  {entry}")
        return status, parsed, rhdrs


def _short(x, n=300):
    if x is None:
        return "-"
    s = x if isinstance(x, str) else json.dumps(x)
    # never print full tokens
    return s if len(s) <= n else s[:n] + f"...(+{len(s) - n} chars)"


# --------------------------------------------------------------------------- server

# COMPAT_DATABASE_URL=postgres://USER@HOST:PORT/DB runs every server on PostgreSQL instead of SQLite:
# each data directory (one server, or the nodes of one cluster sharing it) gets a fresh database on
# that PostgreSQL server, created with psql. Unset: SQLite in the data directory, as by default.
_DATABASES: dict = {}


def database_for(data_dir: Path):
    """The `--database` URL of servers on `data_dir` (None: SQLite)."""
    url = os.environ.get("COMPAT_DATABASE_URL")
    if not url:
        return None
    key = str(Path(data_dir).resolve())
    if key not in _DATABASES:
        name = "compat_" + secrets.token_hex(6)
        r = subprocess.run([os.environ.get("COMPAT_PSQL", "psql"), url, "-v", "ON_ERROR_STOP=1", "-qc", f"CREATE DATABASE {name}"],
                           capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise AssertionError(f"psql could not create database {name} on {url}: {r.stderr[-1000:]}")
        base, _, _ = url.rpartition("/")
        _DATABASES[key] = f"{base}/{name}"
    return _DATABASES[key]


def store_args(data_dir: Path) -> list:
    """`--data-dir DIR` plus `--database URL` when the suite runs on PostgreSQL."""
    db = database_for(data_dir)
    return ["--data-dir", str(data_dir)] + (["--database", db] if db else [])


class Server:
    def __init__(self, bin_path: str, workdir: Path, heartbeat_ms: int = 5000, extra_args=(), data_dir=None):
        self.extra_args = list(extra_args)
        self.bin = bin_path
        self.workdir = workdir
        # data_dir: several cluster nodes may share one (default: a fresh one under workdir)
        self.data_dir = Path(data_dir) if data_dir is not None else workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.admin = "adm-" + secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.heartbeat_ms = heartbeat_ms
        self.log_path = workdir / "server.log"
        self.proc = None
        self._logf = None

    def start(self, timeout=20.0):
        cmd = [
            self.bin, "serve",
            "--listen", f"127.0.0.1:{self.port}",
            *store_args(self.data_dir),
            "--admin-token", self.admin,
            "--heartbeat-interval-ms", str(self.heartbeat_ms),
            *self.extra_args,
        ]
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env.setdefault("NO_COLOR", "1")
        env.setdefault("RUST_BACKTRACE", "0")  # panic message + location; full backtraces drown the log tail
        self._logf = open(self.log_path, "ab")
        self._logf.write((" ".join(cmd) + "\n").encode())
        self._logf.flush()
        self.proc = subprocess.Popen(
            cmd, stdout=self._logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"throng serve exited with rc={self.proc.returncode} before becoming ready\n"
                    f"--- server log ---\n{server_log_excerpt(self.log_path)}"
                )
            try:
                with urllib.request.urlopen(self.base + "/api/v10/gateway", timeout=2) as r:
                    body = r.read().decode()
                    if r.status == 200:
                        doc = json.loads(body)
                        expected = f"ws://127.0.0.1:{self.port}"
                        if doc.get("url") not in (expected, expected + "/"):
                            raise AssertionError(
                                f"GET /api/v10/gateway -> {body!r}; expected url {expected!r}"
                            )
                        return
                    last = f"status {r.status}"
            except AssertionError:
                raise
            except Exception as e:
                last = f"{type(e).__name__}: {e}"
            time.sleep(0.1)
        raise AssertionError(
            f"throng serve not ready after {timeout}s (last: {last})\n--- server log ---\n{server_log_excerpt(self.log_path)}"
        )

    def create_bot(self, name: str) -> str:
        cmd = [self.bin, "bot", "create", name, *store_args(self.data_dir)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
        with open(self.log_path, "a") as f:
            f.write(f"$ {' '.join(cmd)}\nrc={r.returncode}\nstderr: {r.stderr[-2000:]}\n")
        lines = [l.strip() for l in r.stdout.splitlines() if l.strip()]
        if r.returncode != 0 or not lines:
            raise AssertionError(
                f"`throng bot create` failed rc={r.returncode}\nstdout: {r.stdout!r}\nstderr: {r.stderr[-3000:]}"
            )
        return lines[-1]

    def stop(self):
        if self.proc is not None:
            _kill_tree(self.proc)
        if self._logf:
            self._logf.close()
            self._logf = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


# --------------------------------------------------------------------------- human raw gateway


class RawGateway:
    """The human's raw gateway session: plain JSON text frames, no compression.

    Runs its own asyncio loop in a thread. Records every frame (in and out).
    """

    def __init__(self, url: str, token: str, intents: int, transcript_path: Path):
        self.url = url
        self.token = token
        self.intents = intents
        self.transcript_path = transcript_path
        self.frames = []  # received decoded frames (dicts) or {"_raw":...}
        self.cond = threading.Condition()
        self.close_code = None
        self.closed = False
        self.error = None
        self.seq = None
        self._loop = None
        self._thread = None
        self._stop = None
        self._tf = open(transcript_path, "a")

    def _record(self, direction, text):
        self._tf.write(f"{time.strftime('%H:%M:%S')} {direction} {text[:4000]}\n")
        self._tf.flush()

    def start(self):
        self._thread = threading.Thread(target=self._run, name="raw-gateway", daemon=True)
        self._thread.start()

    def _run(self):
        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(self._main())
        except Exception as e:  # pragma: no cover - recorded
            self.error = f"{type(e).__name__}: {e}"
        finally:
            with self.cond:
                self.closed = True
                self.cond.notify_all()
            self._loop.close()

    async def _main(self):
        import aiohttp

        self._stop = asyncio.Event()
        async with aiohttp.ClientSession() as sess:
            try:
                ws = await asyncio.wait_for(
                    sess.ws_connect(self.url, autoclose=False, autoping=True, max_msg_size=0), 10)
            except Exception as e:
                self.error = f"connect {self.url}: {type(e).__name__}: {e}"
                self._record("!!", self.error)
                return
            self._ws = ws
            hb_task = None
            try:
                while True:
                    recv = asyncio.ensure_future(ws.receive())
                    stop = asyncio.ensure_future(self._stop.wait())
                    done, _ = await asyncio.wait({recv, stop}, return_when=asyncio.FIRST_COMPLETED)
                    if stop in done:
                        recv.cancel()
                        await ws.close(code=1000)
                        return
                    stop.cancel()
                    msg = recv.result()
                    if msg.type == aiohttp.WSMsgType.TEXT:
                        text = msg.data
                    elif msg.type == aiohttp.WSMsgType.BINARY:
                        text = None
                        self._record("<<", f"BINARY frame ({len(msg.data)} bytes) on an uncompressed session: {msg.data[:60]!r}")
                        with self.cond:
                            self.frames.append({"_binary": True, "len": len(msg.data)})
                            self.cond.notify_all()
                        continue
                    elif msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING, aiohttp.WSMsgType.CLOSED):
                        self.close_code = ws.close_code if ws.close_code is not None else msg.data
                        self._record("<<", f"CLOSE code={self.close_code} extra={msg.extra!r}")
                        return
                    elif msg.type == aiohttp.WSMsgType.ERROR:
                        self.error = f"ws error: {msg.data!r}"
                        self._record("!!", self.error)
                        return
                    else:
                        continue
                    self._record("<<", text)
                    try:
                        frame = json.loads(text)
                    except ValueError:
                        frame = {"_unparseable": text[:500]}
                    if isinstance(frame, dict) and frame.get("s") is not None:
                        self.seq = frame["s"]
                    op = frame.get("op") if isinstance(frame, dict) else None
                    if op == 10:
                        interval = (frame.get("d") or {}).get("heartbeat_interval", 41250)
                        await self._send(ws, {"op": 1, "d": self.seq})
                        hb_task = asyncio.ensure_future(self._heartbeat(ws, interval))
                        await self._send(
                            ws,
                            {
                                "op": 2,
                                "d": {
                                    "token": self.token,
                                    "properties": {"os": "linux", "browser": "test", "device": "test"},
                                    "intents": self.intents,
                                },
                            },
                        )
                    elif op == 1:
                        await self._send(ws, {"op": 1, "d": self.seq})
                    with self.cond:
                        self.frames.append(frame)
                        self.cond.notify_all()
            finally:
                if hb_task:
                    hb_task.cancel()

    def send(self, payload, timeout: float = 5.0):
        """Send one frame (e.g. op 3 presence, op 14 member list) from the test thread."""
        ws = getattr(self, "_ws", None)
        if self._loop is None or ws is None or self.closed:
            raise AssertionError(f"raw gateway {self.url} is not connected (error={self.error}, close={self.close_code})")
        asyncio.run_coroutine_threadsafe(self._send(ws, payload), self._loop).result(timeout)

    async def _send(self, ws, payload):
        text = json.dumps(payload)
        shown = text.replace(self.token, "<token>") if self.token else text
        self._record(">>", shown)
        await ws.send_str(text)

    async def _heartbeat(self, ws, interval_ms):
        try:
            while True:
                await asyncio.sleep(interval_ms / 1000)
                await self._send(ws, {"op": 1, "d": self.seq})
        except asyncio.CancelledError:
            pass
        except Exception as e:
            self._record("!!", f"heartbeat failed: {e}")

    def wait_for(self, pred, timeout: float, start: int = 0):
        """Return the first frame at index >= start satisfying pred, or None after timeout."""
        deadline = time.monotonic() + _clamp(timeout)
        i = start
        with self.cond:
            while True:
                while i < len(self.frames):
                    f = self.frames[i]
                    i += 1
                    try:
                        if pred(f):
                            return f
                    except Exception:
                        pass
                if self.closed:
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def dispatches(self, t=None):
        with self.cond:
            return [f for f in self.frames if isinstance(f, dict) and f.get("op") == 0 and (t is None or f.get("t") == t)]

    def stop(self):
        if self._loop and self._stop and not self.closed:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread:
            self._thread.join(timeout=5)
        self._tf.close()

    def summary(self, n=25) -> str:
        return f"(human gateway transcript: {self.transcript_path})\n" + tail_file(self.transcript_path, n)


# --------------------------------------------------------------------------- bot process


class BotProcess:
    def __init__(self, name: str, cmd: list, workdir: Path, env=None):
        self.name = name
        self.cmd = cmd
        self.stdout_path = workdir / f"{name}.stdout.jsonl"
        self.stderr_path = workdir / f"{name}.stderr.log"
        self.events = []
        self.cond = threading.Condition()
        self.proc = None
        self.env = env
        self._reader = None
        self.exited = False

    def start(self):
        self._errf = open(self.stderr_path, "ab")
        env = dict(os.environ)
        env.update(self.env or {})
        env["PYTHONUNBUFFERED"] = "1"
        self.proc = subprocess.Popen(
            self.cmd,
            stdout=subprocess.PIPE,
            stderr=self._errf,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, name=f"reader-{self.name}", daemon=True)
        self._reader.start()

    def _read(self):
        with open(self.stdout_path, "ab") as out:
            for line in self.proc.stdout:
                out.write(line)
                out.flush()
                s = line.decode("utf-8", "replace").strip()
                if not s:
                    continue
                try:
                    ev = json.loads(s)
                except ValueError:
                    ev = {"event": "stdout_text", "text": s}
                if not isinstance(ev, dict):
                    ev = {"event": "stdout_text", "text": s}
                ev["_rx"] = time.monotonic()  # harness arrival time
                with self.cond:
                    self.events.append(ev)
                    self.cond.notify_all()
        self.proc.wait()
        with self.cond:
            self.exited = True
            self.cond.notify_all()

    def wait_for(self, pred, timeout: float, start: int = 0):
        deadline = time.monotonic() + _clamp(timeout)
        i = start
        with self.cond:
            while True:
                while i < len(self.events):
                    ev = self.events[i]
                    i += 1
                    try:
                        if pred(ev):
                            return ev
                    except Exception:
                        pass
                if self.exited:
                    return None
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(left)

    def wait_exit(self, timeout: float):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def find(self, event=None, **match):
        with self.cond:
            return [
                e for e in self.events
                if (event is None or e.get("event") == event) and all(e.get(k) == v for k, v in match.items())
            ]

    def mark(self) -> int:
        with self.cond:
            return len(self.events)

    def stop(self):
        if self.proc is not None:
            _kill_tree(self.proc, grace=4)
        if self._reader:
            self._reader.join(timeout=5)
        try:
            self._errf.close()
        except Exception:
            pass

    def problems(self):
        """Library-side errors the bot reported."""
        return [e for e in self.events if e.get("event") in ("error", "fatal", "login_error")
                or (e.get("event") == "log" and e.get("level") in ("ERROR", "CRITICAL"))]

    def summary(self, n_events=40, n_stderr=25) -> str:
        with self.cond:
            evs = list(self.events)
        parts = [f"--- {self.name} rc={self.proc.poll() if self.proc else None} last {n_events} events ({self.stdout_path}) ---"]
        for e in evs[-n_events:]:
            e = dict(e)
            e.pop("_rx", None)
            tb = e.pop("traceback", None) or (e.pop("stack", None) if e.get("event") in ("error", "fatal", "login_error") else None)
            parts.append(json.dumps(e, default=str)[:700])
            if tb:
                parts.append("    " + str(tb).replace("\n", "\n    "))
        parts.append(f"--- {self.name} stderr tail ({self.stderr_path}) ---")
        parts.append(tail_file(self.stderr_path, n_stderr, width=400))
        return "\n".join(parts)
