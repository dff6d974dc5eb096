"""Shared by the discord.py feature scenarios (tests/compat/features/dpy_*.py).

A scenario is an async function ``scenario(client, ctx, step)`` that drives the
library's own high-level API (``guild.create_role``, ``message.add_reaction``,
...) once the client is ready. ``run(scenario)`` points discord.py at the
server, logs in with the bot token, runs the scenario with a time limit and
prints one JSON object per line on stdout:

  {"event": "ready", ...}              the library's on_ready
  {"event": "step", "name": ..., ...}  whatever the scenario emits
  {"event": "dispatch", "t": ...}      every gateway dispatch the library received
  {"event": "log", "level": ..., ...}  a library warning or error (fails the test)
  {"event": "error", ...}              an exception anywhere (fails the test)
  {"event": "done"}                    the scenario returned

Arguments: --base http://HOST:PORT --token BOT_TOKEN --ctx JSON (ids and tokens
the harness made: guild, channel, owner, ...). Library debug output goes to
stderr.
"""

import argparse
import asyncio
import json
import logging
import sys
import time
import traceback

import discord
import discord.gateway
import discord.http
import yarl

T0 = time.monotonic()


def emit(event, **fields):
    fields = {"event": event, "t_ms": int((time.monotonic() - T0) * 1000), **fields}
    sys.stdout.write(json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()


class JsonLogHandler(logging.Handler):
    """Library warnings and errors as JSON events: the harness fails on them."""

    BENIGN = ("voice will NOT be supported", "PyNaCl is not installed")

    def emit(self, record):  # noqa: D401 - logging API
        try:
            msg = record.getMessage()
            if any(b in msg for b in self.BENIGN):
                return
            fields = {"level": record.levelname, "logger": record.name, "message": msg}
            if record.exc_info:
                fields["traceback"] = "".join(traceback.format_exception(*record.exc_info))
            emit("log", **fields)
        except Exception:  # pragma: no cover
            pass


def default_intents():
    intents = discord.Intents.default()
    intents.message_content = True
    intents.members = True
    return intents


def run(scenario, intents=None, timeout=60.0):
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--ctx", default="{}")
    args = ap.parse_args()
    ctx = json.loads(args.ctx)

    base = args.base.rstrip("/")
    host = yarl.URL(base)
    discord.http.Route.BASE = base + "/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL.build(scheme="ws", host=host.host, port=host.port, path="/")
    logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("discord").addHandler(JsonLogHandler(level=logging.WARNING))

    client = discord.Client(intents=intents or default_intents(), enable_debug_events=True)
    emit("start", lib="discord.py", version=discord.__version__)
    outcome = {"ok": False}

    @client.event
    async def on_socket_event_type(t):
        emit("dispatch", t=t)

    @client.event
    async def on_error(event_method, *a, **kw):
        et, ev, tb = sys.exc_info()
        emit("error", where=event_method, type=et.__name__ if et else None, message=str(ev),
             traceback="".join(traceback.format_exception(et, ev, tb)))

    @client.event
    async def on_ready():
        emit("ready", user_id=str(client.user.id), guilds=[str(g.id) for g in client.guilds])
        try:
            await asyncio.wait_for(scenario(client, ctx, lambda name, **f: emit("step", name=name, **f)), timeout)
            outcome["ok"] = True
            emit("done")
        except Exception as e:
            emit("error", where="scenario", type=type(e).__name__, message=str(e), traceback=traceback.format_exc())
        finally:
            await client.close()

    async def main():
        async with client:
            await client.start(args.token, reconnect=False)

    try:
        asyncio.run(main())
    except Exception as e:
        emit("fatal", type=type(e).__name__, message=str(e), traceback=traceback.format_exc())
        sys.exit(1)
    sys.exit(0 if outcome["ok"] else 1)
