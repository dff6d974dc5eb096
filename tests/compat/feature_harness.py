"""Harness of the feature tests (test_feat_*.py): real discord.py and
discord.js scripts drive one feature through each library's own high-level
API against a fresh server.

``make_world(name)`` starts a server (SQLite, or PostgreSQL with
COMPAT_DATABASE_URL) with a bot, an owner who made a guild and added the bot,
and two more humans who joined by invite (member, member2). With
``bot_owns=True`` the bot creates the guild itself (so it has every
permission) and the owner human joins by invite like the others. With
``bot_admin=True`` the owner gives the bot a role with ADMINISTRATOR (every
permission; in the role hierarchy it sits above the humans, who have no
roles, and below the owner). ``run_dpy``/``run_djs`` run one scenario script
(features/dpy_*.py, features/djs_*.js; see dpy_common.py / djs_common.js) with
the bot's token and the world's ids, wait for it to end and return its events.
``Result.assert_ok()`` fails on a non-zero exit, a missing ``done``, and any
library error, exception or warning the script saw.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness import HERE, DEFAULT_BIN, BotProcess, Rest, Server, server_log_excerpt

FEATURES = HERE / "features"
DPY_PYTHON = HERE / ".venv-zstd" / "bin" / "python"
DJS_DIR = HERE / "js"


def artifacts_dir(name: str) -> Path:
    root = os.environ.get("COMPAT_ARTIFACTS")
    base = Path(root) if root else HERE / ".artifacts" / ("features-" + time.strftime("%Y%m%d-%H%M%S"))
    d = base / name
    d.mkdir(parents=True, exist_ok=True)
    return d


@dataclass
class World:
    server: Server
    rest: Rest
    workdir: Path
    bot_token: str
    bot_id: str
    owner_token: str
    owner_id: str
    member_token: str
    member_id: str
    member2_token: str
    member2_id: str
    guild: str
    channel: str
    # The guild owner: the owner human, or the bot (bot_owns).
    guild_owner_token: str = ""
    # The bot's ADMINISTRATOR role (bot_admin), else "".
    bot_role: str = ""

    def ctx(self, **extra) -> dict:
        return {
            "guild": self.guild, "channel": self.channel, "bot_id": self.bot_id,
            "owner_id": self.owner_id, "owner_token": self.owner_token,
            "member_id": self.member_id, "member_token": self.member_token,
            "member2_id": self.member2_id, "member2_token": self.member2_token,
            "bot_role": self.bot_role, "api": self.server.base + "/api/v10", **extra,
        }

    def api(self, method, path, body=None, auth=None, expect=(200, 201, 204)):
        """REST as a raw client (the guild owner unless `auth` says otherwise)."""
        return self.rest.request(method, "/api/v10" + path, body=body, auth=auth or self.guild_owner_token, expect=expect)[:2]

    def stop(self):
        self.server.stop()


ADMINISTRATOR = 1 << 3


def make_world(name: str, bot_owns: bool = False, bot_admin: bool = False) -> World:
    bin_path = os.environ.get("THRONG_BIN", DEFAULT_BIN)
    workdir = artifacts_dir(name)
    server = Server(bin_path, workdir, heartbeat_ms=5000)
    server.start()
    log: list = []
    rest = Rest(server.base, log)
    bot_token = "Bot " + server.create_bot(f"{name[:20]}-bot")
    _, me, _ = rest.request("GET", "/api/v10/users/@me", auth=bot_token)

    def human(user: str):
        _, v, _ = rest.request("POST", "/api/v10/auth/register", body={"username": user, "password": "correct horse battery"})
        _, u, _ = rest.request("GET", "/api/v10/users/@me", auth=v["token"])
        return v["token"], u["id"]

    owner_token, owner_id = human(f"{name[:20]}_owner")
    member_token, member_id = human(f"{name[:20]}_member")
    member2_token, member2_id = human(f"{name[:20]}_member2")
    creator = bot_token if bot_owns else owner_token
    _, g, _ = rest.request("POST", "/api/v10/guilds", body={"name": f"{name} guild"}, auth=creator)
    channel = g["channels"][0]["id"]
    _, inv, _ = rest.request("POST", f"/api/v10/channels/{channel}/invites", body={"max_uses": 0}, auth=creator)
    joiners = [owner_token, member_token, member2_token] if bot_owns else [member_token, member2_token]
    if not bot_owns:
        # A bot joins only by being authorized by someone with MANAGE_GUILD.
        rest.request("POST", f"/api/v10/oauth2/authorize?client_id={me['id']}&scope=bot+applications.commands",
                     body={"guild_id": g["id"], "permissions": "0", "authorize": True}, auth=owner_token)
    for t in joiners:
        rest.request("POST", f"/api/v10/invites/{inv['code']}", body={}, auth=t)
    bot_role = ""
    if bot_admin and not bot_owns:
        _, role, _ = rest.request("POST", f"/api/v10/guilds/{g['id']}/roles",
                                  body={"name": "bot admin", "permissions": str(ADMINISTRATOR)}, auth=owner_token)
        rest.request("PUT", f"/api/v10/guilds/{g['id']}/members/{me['id']}/roles/{role['id']}", auth=owner_token)
        bot_role = role["id"]
    return World(server, rest, workdir, bot_token, me["id"], owner_token, owner_id, member_token, member_id, member2_token,
                 member2_id, g["id"], channel, guild_owner_token=creator, bot_role=bot_role)


class Result:
    def __init__(self, proc: BotProcess, rc):
        self.proc = proc
        self.rc = rc
        self.events = list(proc.events)

    def steps(self, name=None):
        return [e for e in self.events if e.get("event") == "step" and (name is None or e.get("name") == name)]

    def step(self, name):
        found = self.steps(name)
        assert found, f"step {name!r} missing\n{self.proc.summary()}"
        return found[-1]

    def dispatched(self, t) -> int:
        return sum(1 for e in self.events if e.get("event") == "dispatch" and e.get("t") == t)

    def problems(self):
        return [e for e in self.events if e.get("event") in ("error", "fatal") or e.get("event") == "log"]

    def assert_ok(self):
        bad = self.problems()
        assert not bad, "library errors or warnings:\n" + "\n".join(json.dumps(b, default=str)[:1500] for b in bad) + "\n" + self.proc.summary()
        assert any(e.get("event") == "done" for e in self.events), f"scenario did not finish (rc={self.rc})\n{self.proc.summary()}"
        assert self.rc == 0, f"scenario exited {self.rc}\n{self.proc.summary()}"


def _run(world: World, name: str, cmd: list, timeout: float) -> Result:
    proc = BotProcess(name, cmd, world.workdir)
    proc.start()
    rc = proc.wait_exit(timeout)
    if rc is None:
        proc.stop()
        pytest.fail(f"{name} did not end within {timeout}s\n{proc.summary()}\n--- server ---\n{server_log_excerpt(world.server.log_path)}")
    proc.stop()
    return Result(proc, rc)


def run_dpy(world: World, script: str, timeout: float = 90.0, **ctx) -> Result:
    if not DPY_PYTHON.exists():
        pytest.fail(f"{DPY_PYTHON} missing: run tests/compat/setup.sh")
    cmd = [str(DPY_PYTHON), str(FEATURES / script), "--base", world.server.base, "--token", world.bot_token.removeprefix("Bot "),
           "--ctx", json.dumps(world.ctx(**ctx))]
    return _run(world, Path(script).stem, cmd, timeout)


def run_djs(world: World, script: str, timeout: float = 90.0, **ctx) -> Result:
    node = shutil.which("node")
    if not node:
        pytest.fail("node not found")
    cmd = [node, str(FEATURES / script), "--base", world.server.base, "--token", world.bot_token.removeprefix("Bot "),
           "--djs-dir", str(DJS_DIR), "--ctx", json.dumps(world.ctx(**ctx))]
    return _run(world, Path(script).stem, cmd, timeout)
