#!/usr/bin/env python3
"""discord.py: what a community uses beyond chat, through the library's API.

Member search: `guild.query_members` (gateway op 8 with a query) finds the
two members by their username prefix and then by a nickname the bot gave;
`guild.fetch_members` pages the whole list over REST; the REST search route
answers through the library's own HTTP client. `client.fetch_guild` with
`with_counts` (sent as `1`, as nextcord, disnake and py-cord send it) gets
the counts.

Audit log: the bot renames a member, creates a role and kicks a member
with reasons; `guild.audit_logs` reads them back (all, by action, by user,
oldest first), every entry parsed by the library, and
`on_audit_log_entry_create` hears the kick.
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

    general = guild.get_channel(int(ctx["channel"]))
    sent = await general.send("searchable zebra crossing")
    hits = await client.http.request(Route("GET", "/guilds/{guild_id}/messages/search", guild_id=guild.id),
                                     params={"content": "zebra", "author_id": client.user.id})
    step("search", total=hits["total_results"], ids=[h[0]["id"] for h in hits["messages"]], sent=str(sent.id))

    heard = client.wait_for("audit_log_entry_create", check=lambda e: e.action == discord.AuditLogAction.kick, timeout=15)
    role = await guild.create_role(name="dpy-audited", reason="compat: a role")
    await guild.kick(m1, reason="compat: a kick")
    live = await heard
    step("heard", action=str(live.action), target=str(live.target.id), reason=live.reason)
    entries = [e async for e in guild.audit_logs(limit=50)]
    step("audit_all", actions=[str(e.action) for e in entries], users=sorted({str(e.user.id) for e in entries if e.user}),
         changes=[[c for c, _ in e.changes.after] for e in entries[:3]])
    kicks = [e async for e in guild.audit_logs(action=discord.AuditLogAction.kick)]
    step("audit_kicks", targets=[str(e.target.id) for e in kicks], reasons=[e.reason for e in kicks])
    mine = [e async for e in guild.audit_logs(user=client.user, limit=2)]
    step("audit_mine", actions=[str(e.action) for e in mine])
    oldest = [e async for e in guild.audit_logs(oldest_first=True, limit=100)]
    step("audit_oldest", ids=[str(e.id) for e in oldest], newest=[str(e.id) for e in entries])
    created = [e async for e in guild.audit_logs(action=discord.AuditLogAction.role_create, limit=1)]
    step("audit_role", target=str(created[0].target.id), role=str(role.id), role_name=created[0].after.name, reason=created[0].reason)


if __name__ == "__main__":
    run(scenario)
