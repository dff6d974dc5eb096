#!/usr/bin/env python3
"""discord.py 2.7.x compat bot for throng.

Usage: dpy_bot.py --base http://127.0.0.1:PORT --token TOKEN

Points discord.py at the server (discord-compat.md 2.1): patches
``discord.http.Route.BASE`` and ``DiscordWebSocket.DEFAULT_GATEWAY``.

Prints one JSON object per line on stdout (machine readable, flushed):
  {"event": "start", "lib": "discord.py", "version": ..., "compression": "zstd-stream"|"zlib-stream"}
  {"event": "connect"} / {"event": "disconnect"}
  {"event": "raw", "t": "READY"|"RESUMED"|"GUILD_CREATE"|..., "s": n}   (every dispatch received)
  {"event": "guild_create", "id": ..., "source": "guild_available"|"guild_join", "channels": [...]}
  {"event": "ready", "user_id": ..., "guilds": [...], "session_id": ...}
  {"event": "message", "id", "content", "author_id", "author_bot", "guild_id", "channel_id"}
  {"event": "reply_sent", "id", "content", "reference_id", "channel_id"}
  {"event": "resumed"}
  {"event": "error", "where": ..., "type": ..., "message": ..., "traceback": ...}
  {"event": "log", "level": "WARNING"|"ERROR", "logger": ..., "message": ...}
  {"event": "login_error", "type": "LoginFailure", "message": ...}  then exit 3
  {"event": "fatal", ...} then exit 1
Debug logging (library DEBUG + raw frames) goes to stderr.
"""

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
import traceback

import yarl
import discord
import discord.gateway
import discord.http
import discord.utils

T0 = time.monotonic()


def emit(event, **fields):
    fields = {"event": event, "t_ms": int((time.monotonic() - T0) * 1000), **fields}
    sys.stdout.write(json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()


class JsonLogHandler(logging.Handler):
    """Forward library warnings/errors to stdout as JSON so the harness sees them."""

    # optional voice dependencies are irrelevant to a text bot
    BENIGN = ("voice will NOT be supported",)

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True, help="http://127.0.0.1:PORT")
    ap.add_argument("--token", required=True)
    args = ap.parse_args()

    base = args.base.rstrip("/")
    host = yarl.URL(base)
    discord.http.Route.BASE = base + "/api/v10"
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL.build(
        scheme="wss" if host.scheme == "https" else "ws", host=host.host, port=host.port, path="/"
    )

    # Test shim (network latency): discord.py reconnects within a few ms of a drop, faster than the
    # harness can post "while away" messages, so the server's replay buffer would never be exercised.
    # Delay only the *resuming* reconnect; the library's protocol behaviour is unchanged.
    delay_ms = int(os.environ.get("COMPAT_RESUME_DELAY_MS", "1000"))
    _orig_from_client = discord.gateway.DiscordWebSocket.from_client.__func__

    async def from_client(cls, client, *a, **kw):
        if kw.get("resume") and delay_ms > 0:
            emit("resume_delay", ms=delay_ms)
            await asyncio.sleep(delay_ms / 1000)
        return await _orig_from_client(cls, client, *a, **kw)

    discord.gateway.DiscordWebSocket.from_client = classmethod(from_client)

    # library debug log to stderr, warnings+ also as JSON on stdout
    logging.basicConfig(
        level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    h = JsonLogHandler(level=logging.WARNING)
    logging.getLogger("discord").addHandler(h)

    intents = discord.Intents.default()
    intents.message_content = True
    intents.members = True

    client = discord.Client(intents=intents, enable_debug_events=True)

    emit(
        "start",
        lib="discord.py",
        version=discord.__version__,
        compression=discord.utils._ActiveDecompressionContext.COMPRESSION_TYPE,
        api_base=discord.http.Route.BASE,
        gateway=str(discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY),
    )

    @client.event
    async def on_connect():
        emit("connect")

    @client.event
    async def on_disconnect():
        emit("disconnect")

    @client.event
    async def on_socket_raw_receive(msg):
        print("<<< " + (msg if isinstance(msg, str) else repr(msg))[:4000], file=sys.stderr, flush=True)
        try:
            data = json.loads(msg)
        except Exception as e:
            emit("error", where="raw_receive_json", type=type(e).__name__, message=str(e), raw=str(msg)[:500])
            return
        if data.get("op") == 0:
            emit("raw", t=data.get("t"), s=data.get("s"))
        else:
            emit("raw_op", op=data.get("op"), d=data.get("d") if data.get("op") in (7, 9) else None)

    @client.event
    async def on_socket_raw_send(payload):
        text = payload if isinstance(payload, str) else repr(payload)
        # do not leak tokens in logs needlessly; they are throwaway test tokens anyway
        print(">>> " + text[:2000], file=sys.stderr, flush=True)

    async def _guild(source, guild):
        emit(
            "guild_create",
            id=str(guild.id),
            source=source,
            name=guild.name,
            channels=[{"id": str(c.id), "type": int(c.type.value), "name": c.name} for c in guild.channels],
            me=str(guild.me.id) if guild.me else None,
            member_count=guild.member_count,
        )

    @client.event
    async def on_guild_available(guild):
        await _guild("guild_available", guild)

    @client.event
    async def on_guild_join(guild):
        await _guild("guild_join", guild)

    @client.event
    async def on_ready():
        emit(
            "ready",
            user_id=str(client.user.id),
            username=client.user.name,
            guilds=[str(g.id) for g in client.guilds],
            session_id=client.ws.session_id if client.ws else None,
        )

    @client.event
    async def on_resumed():
        emit("resumed")

    @client.event
    async def on_message(message: discord.Message):
        emit(
            "message",
            id=str(message.id),
            content=message.content,
            author_id=str(message.author.id),
            author_bot=message.author.bot,
            guild_id=str(message.guild.id) if message.guild else None,
            channel_id=str(message.channel.id),
            reference_id=str(message.reference.message_id) if message.reference else None,
            mentions=[str(u.id) for u in message.mentions],
        )
        if message.author.id == client.user.id:
            return
        if message.content == "ping":
            try:
                reply = await message.reply("pong")
            except Exception as e:
                emit("error", where="reply", type=type(e).__name__, message=str(e), traceback=traceback.format_exc())
                return
            emit(
                "reply_sent",
                id=str(reply.id),
                content=reply.content,
                reference_id=str(reply.reference.message_id) if reply.reference else None,
                channel_id=str(reply.channel.id),
            )

    @client.event
    async def on_error(event_method, *a, **kw):
        et, ev, tb = sys.exc_info()
        emit(
            "error",
            where=event_method,
            type=et.__name__ if et else None,
            message=str(ev),
            traceback="".join(traceback.format_exception(et, ev, tb)),
        )

    async def runner():
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, lambda: asyncio.ensure_future(client.close()))
            except NotImplementedError:  # pragma: no cover
                pass
        async with client:
            await client.start(args.token, reconnect=True)

    try:
        asyncio.run(runner())
    except discord.LoginFailure as e:
        emit("login_error", type=type(e).__name__, qualname=f"{type(e).__module__}.{type(e).__qualname__}", message=str(e))
        sys.exit(3)
    except Exception as e:
        emit(
            "fatal",
            type=type(e).__name__,
            qualname=f"{type(e).__module__}.{type(e).__qualname__}",
            message=str(e),
            traceback=traceback.format_exc(),
        )
        sys.exit(1)
    emit("exit")


if __name__ == "__main__":
    main()
