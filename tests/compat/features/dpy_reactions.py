#!/usr/bin/env python3
"""discord.py: reactions, custom emojis, pins and bulk delete through the
library's API (add_reaction, remove_reaction, clear_reaction(s),
reaction.users, create_custom_emoji, pin/unpin, channel.pins, purge), each
checked by the event that comes back."""

import asyncio

import aiohttp
import discord

from dpy_common import run

# A 1x1 PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d4944415478da63fccf00000301010018dd8db40000000049454e44ae426082"
)
THUMBS, HEART = "\N{THUMBS UP SIGN}", "\N{HEAVY BLACK HEART}\N{VARIATION SELECTOR-16}"


async def human_reacts(ctx, channel_id, message_id, emoji):
    """The member (a human) reacts over raw REST: the bot cannot react for them."""
    url = f"{ctx['api']}/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me"
    async with aiohttp.ClientSession() as s:
        async with s.put(url, headers={"Authorization": ctx["member_token"]}) as r:
            assert r.status == 204, await r.text()


async def scenario(client: discord.Client, ctx, step):
    guild = client.get_guild(int(ctx["guild"]))
    channel = guild.get_channel(int(ctx["channel"]))
    member_id = int(ctx["member_id"])
    msg = await channel.send("react to this, discord.py")

    def raw(event, check):
        return asyncio.ensure_future(client.wait_for(event, check=check, timeout=15))

    # Add: the raw event, and the cached message's reaction.
    added = raw("raw_reaction_add", lambda p: p.message_id == msg.id and str(p.emoji) == THUMBS)
    await msg.add_reaction(THUMBS)
    p = await added
    step("added", user=str(p.user_id), emoji=str(p.emoji), member=str(p.member.id) if p.member else None,
         author=str(p.message_author_id), burst=p.burst, type=int(p.type.value))
    heart = raw("raw_reaction_add", lambda p: p.message_id == msg.id and str(p.emoji) == HEART)
    await msg.add_reaction(HEART)
    await heart
    other = raw("raw_reaction_add", lambda p: p.user_id == member_id)
    await human_reacts(ctx, channel.id, msg.id, "%F0%9F%91%8D")
    await other
    # Fetched: counts and `me`, and who reacted.
    fetched = await channel.fetch_message(msg.id)
    thumbs = discord.utils.get(fetched.reactions, emoji=THUMBS)
    users = [str(u.id) async for u in thumbs.users()]
    step("fetched", reactions=[[str(r.emoji), r.count, r.me] for r in fetched.reactions], users=users)
    # Remove own, remove the member's, clear one emoji, clear all.
    removed = raw("raw_reaction_remove", lambda p: p.message_id == msg.id and p.user_id == client.user.id)
    await msg.remove_reaction(THUMBS, client.user)
    await removed
    removed = raw("raw_reaction_remove", lambda p: p.message_id == msg.id and p.user_id == member_id)
    await msg.remove_reaction(THUMBS, discord.Object(member_id))
    await removed
    cleared = raw("raw_reaction_clear_emoji", lambda p: p.message_id == msg.id)
    await msg.clear_reaction(HEART)
    p = await cleared
    step("cleared_emoji", emoji=str(p.emoji))
    await msg.add_reaction(THUMBS)
    cleared = raw("raw_reaction_clear", lambda p: p.message_id == msg.id)
    await msg.clear_reactions()
    await cleared
    step("cleared", reactions=len((await channel.fetch_message(msg.id)).reactions))

    # A custom emoji: created, announced, reacted with.
    updated = raw("guild_emojis_update", lambda g, before, after: any(e.name == "dpyblob" for e in after))
    emoji = await guild.create_custom_emoji(name="dpyblob", image=PNG)
    await updated
    step("emoji", id=str(emoji.id), emoji_name=emoji.name, in_guild=[e.name for e in guild.emojis])
    custom = raw("raw_reaction_add", lambda p: p.message_id == msg.id and p.emoji.id == emoji.id)
    await msg.add_reaction(emoji)
    p = await custom
    step("custom_reaction", id=str(p.emoji.id), emoji_name=p.emoji.name)

    # Pins.
    pinned = raw("guild_channel_pins_update", lambda c, last: c.id == channel.id and last is not None)
    await msg.pin()
    await pinned
    pins = [m async for m in channel.pins()]
    step("pins", ids=[str(m.id) for m in pins], pinned=[m.pinned for m in pins], pinned_at=str(pins[0].pinned_at))
    unpinned = raw("guild_channel_pins_update", lambda c, last: c.id == channel.id)
    await msg.unpin()
    await unpinned
    step("unpinned", pins=len([m async for m in channel.pins()]))

    # Bulk delete.
    doomed = [await channel.send(f"purge me {n}") for n in range(3)]
    bulk = raw("raw_bulk_message_delete", lambda p: p.channel_id == channel.id)
    gone = await channel.purge(limit=20, check=lambda m: m.content.startswith("purge me"))
    p = await bulk
    step("purged", deleted=sorted(str(m.id) for m in gone), seen=sorted(str(i) for i in p.message_ids),
         sent=sorted(str(m.id) for m in doomed))


if __name__ == "__main__":
    run(scenario)
