#!/usr/bin/env python3
"""schemathesis against a live throng: the OpenAPI document's claims, checked.

Starts `throng serve` on a fresh data directory and makes real things to
aim at: a bot and a user, both members of the bot's guild (and a user
banned from it), with a channel,
messages, a reaction, a pin, a role, an emoji, a webhook, an invite, a
thread, application commands and a DM. Writes a schemathesis configuration
whose path parameters draw from those ids 80% of the time (random ids the
rest) and runs `st run` four times: every method but DELETE as the user,
then as the bot, then DELETE of parts, then DELETE of whole guilds and
channels (last, so that they do not empty the fixtures of the others).
Checks: no 5xx, documented status codes and content types, bodies of the
documented schemas. Exits non-zero on any failure, or when the server
logged a panic. Usage (scripts/api-check.sh sets these up):

    THRONG_BIN=target/debug/throng tests/api/.venv/bin/python tests/api/run.py [MAX_EXAMPLES]
"""

import base64
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ST = os.path.join(os.path.dirname(sys.executable), "st")
CHECKS = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance"
# A 1x1 PNG: the emoji fixture's image.
PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
    )
).decode()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, base: str):
        self.base = base

    def call(self, method: str, path: str, auth: str | None = None, body=None, ok=(200, 201, 204)):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if data is not None:
            req.add_header("content-type", "application/json")
        if auth:
            req.add_header("authorization", auth)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                status, text = r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            status, text = e.code, e.read().decode()
        if status not in ok:
            raise SystemExit(f"fixture: {method} {path} -> {status} {text[:500]}")
        return json.loads(text) if text else None


def fixtures(api: Api, bot: str) -> tuple[dict[str, list[str]], str]:
    """Real ids for each path parameter name, and a member's (user) token."""
    reg = api.call("POST", "/auth/register", body={"username": "st_user", "password": "correct horse battery"})
    user, user_id = reg["token"], reg["user_id"]
    me = api.call("GET", "/users/@me", bot)
    app = api.call("GET", "/applications/@me", bot)["id"]
    guild = api.call("POST", "/guilds", bot, {"name": "schemathesis"})
    gid = guild["id"]
    channel = api.call("GET", f"/guilds/{gid}/channels", bot)[0]["id"]
    invite = api.call("POST", f"/channels/{channel}/invites", bot, {"max_age": 0})["code"]
    api.call("POST", f"/invites/{invite}", user)
    # A banned user: the ban routes' reads have one to find.
    banned = api.call("POST", "/auth/register", body={"username": "st_banned", "password": "correct horse battery"})
    api.call("POST", f"/invites/{invite}", banned["token"])
    api.call("PUT", f"/guilds/{gid}/bans/{banned['user_id']}", bot, {"delete_message_seconds": 0})
    messages = [api.call("POST", f"/channels/{channel}/messages", bot, {"content": f"fixture {i}"})["id"] for i in range(3)]
    api.call("PUT", f"/channels/{channel}/messages/{messages[0]}/reactions/%F0%9F%91%8D/@me", bot)
    api.call("PUT", f"/channels/{channel}/messages/pins/{messages[1]}", bot)
    role = api.call("POST", f"/guilds/{gid}/roles", bot, {"name": "fixture"})["id"]
    api.call("PUT", f"/guilds/{gid}/members/{user_id}/roles/{role}", bot)
    emoji = api.call("POST", f"/guilds/{gid}/emojis", bot, {"name": "fixture", "image": f"data:image/png;base64,{PNG}"})["id"]
    hook = api.call("POST", f"/channels/{channel}/webhooks", bot, {"name": "fixture"})
    thread = api.call("POST", f"/channels/{channel}/threads", bot, {"name": "fixture thread", "type": 11})["id"]
    command = api.call("POST", f"/applications/{app}/commands", bot, {"name": "fixture", "description": "a fixture"})["id"]
    guild_command = api.call("POST", f"/applications/{app}/guilds/{gid}/commands", bot, {"name": "gfixture", "description": "a fixture"})["id"]
    dm = api.call("POST", "/users/@me/channels", bot, {"recipient_id": user_id})["id"]
    ids = {
        "guild_id": [gid],
        "channel_id": [channel, thread, dm],
        "message_id": messages,
        "user_id": ["@me", me["id"], user_id, banned["user_id"]],
        "role_id": [role, gid],
        "overwrite_id": [role, user_id],
        "emoji_id": [emoji],
        "emoji": ["%F0%9F%91%8D", f"fixture:{emoji}"],
        "webhook_id": [hook["id"]],
        "token": [hook["token"]],
        "code": [invite],
        "app_id": [app],
        "command_id": [command, guild_command],
    }
    return ids, user


def config(path: str, base: str, bot: str, ids: dict[str, list[str]], admin: str, max_examples: int):
    def q(s: str) -> str:
        return json.dumps(s)

    lines = [
        f"base-url = {q(base)}",
        f"headers = {{ Authorization = {q(bot)}, X-Throng-Admin-Token = {q(admin)} }}",
        "workers = 1",
        "request-timeout = 30.0",
        "[generation]",
        f"max-examples = {max_examples}",
        "[checks]",
        "enabled = false",
    ]
    for c in CHECKS.split(","):
        lines += [f"[checks.{c}]", "enabled = true"]
    for name, values in ids.items():
        lines += [f"[dictionaries.{name}]", f"values = {json.dumps(values)}"]
    lines.append("[parameters]")
    for name in ids:
        lines.append(f'"path.{name}" = {{ dictionary = {q(name)}, probability = 0.8 }}')
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def summary(out: str) -> str:
    """schemathesis' closing line (`N passed, ... in Xs`), colours stripped."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", out)
    found = [l.strip(" =") for l in plain.splitlines() if re.search(r"\d+ (passed|failed)|No issues found|issues? found", l)]
    return found[-1] if found else "(no summary line)"


def main() -> int:
    max_examples = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    bin_ = os.environ.get("THRONG_BIN", "target/debug/throng")
    tmp = tempfile.mkdtemp(prefix="throng-st-")
    port = free_port()
    admin = "schemathesis-admin"
    env = {k: v for k, v in os.environ.items() if not k.startswith("THRONG_") or k == "THRONG_BIN"}
    env.update(
        {
            "THRONG_REST_REQUESTS_PER_WINDOW": "1000000",
            "THRONG_LIMITS__MAX_GUILDS_PER_USER": "100000",
            # Generated logins and registrations: past the budgets they are
            # 429s, which are documented but cover nothing more.
            "THRONG_AUTH__LOGIN_PER_ADDRESS": "1000000",
            "THRONG_AUTH__LOGIN_PER_ACCOUNT": "1000000",
            "THRONG_AUTH__REGISTER_PER_ADDRESS": "1000000",
            "RUST_LOG": "warn",
        }
    )
    store = ["--data-dir", os.path.join(tmp, "data")]
    bot_out = subprocess.run([bin_, "bot", "create", "st_bot", *store], env=env, capture_output=True, text=True, check=True)
    bot = "Bot " + bot_out.stdout.split()[-1]
    log = open(os.path.join(tmp, "server.log"), "w")
    server = subprocess.Popen(
        [bin_, "serve", "--listen", f"127.0.0.1:{port}", "--admin-token", admin, *store],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}/api/v10"
    rc = 1
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=2)
                break
            except Exception:
                time.sleep(0.1)
        ids, user = fixtures(Api(base), bot)
        cfg = os.path.join(tmp, "schemathesis.toml")
        config(cfg, base, bot, ids, admin, max_examples)
        user_cfg = os.path.join(tmp, "schemathesis-user.toml")
        config(user_cfg, base, user, ids, admin, max_examples)
        rc = 0
        totals = {"generated": 0, "passed": 0, "failed": 0}
        # Deleting the guild or channel itself goes last: it would empty
        # the fixtures of every other operation.
        whole = r"^/(guilds/\{guild_id\}|channels/\{channel_id\}|users/@me/guilds/\{guild_id\})$"
        passes = (
            # The user first: the bot's run may ban or kick the user.
            # Not its logout: it would revoke the token the run uses (the
            # bot's run calls it, and a bot's token is refused).
            ("every method but DELETE, as a user", user_cfg, ["--exclude-method", "DELETE", "--exclude-path-regex", "^/auth/logout$"]),
            ("every method but DELETE, as a bot", cfg, ["--exclude-method", "DELETE"]),
            ("DELETE of parts", cfg, ["--include-method", "DELETE", "--exclude-path-regex", whole]),
            ("DELETE of guilds and channels", cfg, ["--include-method", "DELETE", "--include-path-regex", whole]),
        )
        for name, conf, select in passes:
            cmd = [ST, "--config-file", conf, "run", f"{base}/openapi.json", *select, "--no-color", "--seed", "1"]
            if os.environ.get("API_CHECK_REPORT"):
                cmd += ["--report", "ndjson", "--report-dir", os.path.join(os.environ["API_CHECK_REPORT"], name.replace(" ", "-"))]
            print(f"== schemathesis: {name}\n$ {' '.join(cmd)}", flush=True)
            # In the temporary directory: schemathesis keeps a cache where it runs.
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, env=env, cwd=tmp)
            sys.stdout.write(p.stdout[-20000:])
            sys.stdout.write(p.stderr[-5000:])
            line = summary(p.stdout)
            print(f"schemathesis ({name}) summary: {line}", flush=True)
            for k in totals:
                m = re.search(rf"(\d+) {k}", line)
                totals[k] += int(m.group(1)) if m else 0
            rc = rc or p.returncode
        print(
            f"schemathesis: {len(passes)} runs, {totals['generated']} test cases, {totals['passed']} passed, "
            f"{totals['failed']} failed, exit {rc}",
            flush=True,
        )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
    text = open(os.path.join(tmp, "server.log")).read()
    if "panicked" in text:
        print("the server panicked:\n" + text[-5000:])
        rc = rc or 1
    shutil.rmtree(tmp, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
