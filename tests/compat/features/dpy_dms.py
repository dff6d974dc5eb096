#!/usr/bin/env python3
"""discord.py: DMs through the library's API. The bot opens a DM with a
user (`user.send`) and a member (`member.send`); the human answers through
raw REST; the library gets the answer through on_message, outside any
guild, and reads the DM's history."""

import aiohttp
import discord

from dpy_common import run


async def human_says(ctx, token, channel_id, content):
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{ctx['api']}/channels/{channel_id}/messages", json={"content": content},
                          headers={"Authorization": token}) as r:
            assert r.status == 200, await r.text()
            return await r.json()


async def scenario(client: discord.Client, ctx, step):
    guild = client.get_guild(int(ctx["guild"]))
    owner = await client.fetch_user(int(ctx["owner_id"]))
    sent = await owner.send("hello from discord.py")
    dm = sent.channel
    step("sent", channel_type=str(dm.type), channel_id=str(dm.id), guild=None if sent.guild is None else str(sent.guild.id))

    answered = client.wait_for("message", check=lambda m: m.channel.id == dm.id and m.author.id == owner.id, timeout=15)
    await human_says(ctx, ctx["owner_token"], dm.id, "hello bot, from a human")
    got = await answered
    step("received", content=got.content, guild=None if got.guild is None else str(got.guild.id),
         dm=isinstance(got.channel, discord.DMChannel), author=str(got.author.id))

    # The same DM again: the library reuses it; history has both messages.
    again = await owner.create_dm()
    history = [m.content async for m in again.history(limit=10)]
    step("history", same=again.id == dm.id, contents=history)

    # A member of the guild, through member.send.
    member = guild.get_member(int(ctx["member_id"])) or await guild.fetch_member(int(ctx["member_id"]))
    to_member = await member.send("hello member")
    answered = client.wait_for("message", check=lambda m: m.channel.id == to_member.channel.id and m.author.id == member.id, timeout=15)
    await human_says(ctx, ctx["member_token"], to_member.channel.id, "hi back")
    got = await answered
    step("member_dm", content=got.content, dm=isinstance(got.channel, discord.DMChannel))

    # Edit and delete in a DM, as in a guild.
    edited = await to_member.edit(content="hello member (edited)")
    await to_member.delete()
    step("edited", content=edited.content)


if __name__ == "__main__":
    run(scenario)
