#!/usr/bin/env python3
"""discord.py: attachments and webhooks through the library's API. Uploads a
file (channel.send(file=...)), reads it back from the URL the library reports
(Attachment.read) and with a Range request (urllib), deletes it; creates a
webhook (channel.create_webhook), sends through it with and without a file
(webhook.send(wait=True)), sees its MESSAGE_CREATE, lists and deletes it."""

import asyncio
import hashlib
import io
import urllib.request

import discord

from dpy_common import run


def content(seed: int, n: int) -> bytes:
    return bytes((i * 31 + seed) % 251 for i in range(n))


def ranged(url: str, first: int, last: int):
    req = urllib.request.Request(url, headers={"Range": f"bytes={first}-{last}"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.headers.get("Content-Range"), r.read()


async def scenario(client: discord.Client, ctx, step):
    guild = client.get_guild(int(ctx["guild"]))
    channel = guild.get_channel(int(ctx["channel"]))
    gone_data = content(1, 300_000)
    kept_data = content(2, 120_000)

    gone = await channel.send("a file", file=discord.File(io.BytesIO(gone_data), filename="gone.bin"))
    a = gone.attachments[0]
    read = await a.read()
    status, crange, part = await asyncio.to_thread(ranged, a.url, 100, 199)
    step("uploaded", id=str(gone.id), url=a.url, size=a.size, filename=a.filename, read_same=read == gone_data,
         range_status=status, content_range=crange, range_same=part == gone_data[100:200],
         sha=hashlib.sha256(gone_data).hexdigest())
    deleted = client.wait_for("raw_message_delete", check=lambda p: p.message_id == gone.id, timeout=15)
    await gone.delete()
    await deleted
    step("deleted", id=str(gone.id))

    kept = await channel.send(file=discord.File(io.BytesIO(kept_data), filename="kept.txt", description="kept file"))
    k = kept.attachments[0]
    step("kept", url=k.url, size=k.size, content_type=k.content_type, description=k.description,
         sha=hashlib.sha256(kept_data).hexdigest())

    hook = await channel.create_webhook(name="dpy hook")
    step("webhook", id=str(hook.id), token_set=bool(hook.token), channel_id=str(hook.channel_id))
    seen = client.wait_for("message", check=lambda m: m.webhook_id == hook.id, timeout=15)
    sent = await hook.send("from the webhook", username="dpy alias", wait=True)
    event = await seen
    step("executed", id=str(sent.id), webhook_id=str(sent.webhook_id), author=sent.author.name, bot=sent.author.bot,
         event_id=str(event.id), event_webhook_id=str(event.webhook_id), event_author=event.author.name)
    hook_data = content(3, 40_000)
    with_file = await hook.send("webhook file", file=discord.File(io.BytesIO(hook_data), filename="hook.bin"), wait=True)
    hread = await with_file.attachments[0].read()
    step("executed_file", id=str(with_file.id), read_same=hread == hook_data, webhook_id=str(with_file.webhook_id))

    in_channel = await channel.webhooks()
    in_guild = await guild.webhooks()
    step("listed", channel=[str(h.id) for h in in_channel], guild=[str(h.id) for h in in_guild])
    await hook.delete()
    after = await channel.webhooks()
    step("webhook_deleted", remaining=[str(h.id) for h in after])


if __name__ == "__main__":
    run(scenario)
