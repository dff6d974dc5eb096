#!/usr/bin/env python3
"""discord.py: what a community uses beyond chat, through the library's API.

Member search: `guild.query_members` (gateway op 8 with a query) finds the
two members by their username prefix and then by a nickname the bot gave;
`guild.fetch_members` pages the whole list over REST; the REST search route
answers through the library's own HTTP client. `client.fetch_guild` with
`with_counts` (sent as `1`, as nextcord, disnake and py-cord send it) gets
the counts.
"""

import discord
from discord.http import Route

from dpy_common import run


async def scenario(client: discord.Client, ctx, step):
    guild = client.get_guild(int(ctx["guild"]))
    m1 = await guild.fetch_member(int(ctx["member_id"]))
    m2 = await guild.fetch_member(int(ctx["member2_id"]))

    both = await guild.query_members(query=m1.name.upper(), limit=10)
    only2 = await guild.query_members(query=m2.name, limit=10)
    step("query", both=sorted(str(m.id) for m in both), only2=[str(m.id) for m in only2])

    await m2.edit(nick="Zephyr")
    by_nick = await guild.query_members(query="zep", limit=5)
    step("query_nick", ids=[str(m.id) for m in by_nick], nicks=[m.nick for m in by_nick])

    everyone = [m async for m in guild.fetch_members(limit=None)]
    step("fetch_members", ids=sorted(str(m.id) for m in everyone))

    raw = await client.http.request(Route("GET", "/guilds/{guild_id}/members/search", guild_id=guild.id),
                                    params={"query": "ZEP", "limit": 10})
    step("rest_search", ids=[m["user"]["id"] for m in raw], nicks=[m.get("nick") for m in raw])

    counted = await client.fetch_guild(guild.id, with_counts=True)
    raw = await client.http.request(Route("GET", "/guilds/{guild_id}", guild_id=guild.id), params={"with_counts": 1})
    step("with_counts", members=counted.approximate_member_count, raw_members=raw.get("approximate_member_count"))


if __name__ == "__main__":
    run(scenario)
