#!/usr/bin/env python3
"""discord.py: messages and the bot's own member through the library's API
(send, edit, typing, delete, nickname), each checked by the dispatch that
comes back."""

import discord

from dpy_common import run


async def scenario(client: discord.Client, ctx, step):
    guild = client.get_guild(int(ctx["guild"]))
    channel = guild.get_channel(int(ctx["channel"]))
    sent = await channel.send("hello from discord.py")
    step("sent", id=str(sent.id), content=sent.content)
    edited_event = client.wait_for("message_edit", check=lambda b, a: a.id == sent.id, timeout=15)
    edited = await sent.edit(content="edited by discord.py")
    before, after = await edited_event
    step("edited", content=edited.content, event_content=after.content, edited_at=str(after.edited_at))
    async with channel.typing():
        step("typing")
    me = await guild.me.edit(nick="dpy nick")
    step("nick", nick=me.nick if me else guild.me.nick)
    deleted_event = client.wait_for("raw_message_delete", check=lambda p: p.message_id == sent.id, timeout=15)
    await sent.delete()
    await deleted_event
    step("deleted", id=str(sent.id))


if __name__ == "__main__":
    run(scenario)
