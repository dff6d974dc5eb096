#!/usr/bin/env python3
"""discord.py: roles, overwrites, bans and kicks through the library's API.

The bot (an ADMINISTRATOR role) creates a role, gives it to `member`, hides
a new channel from @everyone but not from that role, and posts there (the
test checks who received it on the humans' own gateway sessions); edits,
moves and deletes roles; times `member` out and lifts it; bans `member2` (their recent messages go), whose
invite join is then refused; unbans them (the join works) and kicks them.
Every change is checked by the event the library parsed.
"""

import datetime

import aiohttp
import discord

from dpy_common import run

LIB = "discord.py"


async def human_join(ctx, code, token):
    """`token`'s human accepts an invite, as a client would (not the bot)."""
    async with aiohttp.ClientSession() as s:
        async with s.post(f"{ctx['api']}/invites/{code}", json={}, headers={"Authorization": token}) as r:
            body = await r.json(content_type=None)
            return r.status, (body or {}).get("code")


async def scenario(client: discord.Client, ctx, step):
    guild = client.get_guild(int(ctx["guild"]))
    general = guild.get_channel(int(ctx["channel"]))
    member = guild.get_member(int(ctx["member_id"]))
    member2_id = int(ctx["member2_id"])

    created = client.wait_for("guild_role_create", check=lambda r: r.name == "dpy-seer", timeout=15)
    role = await guild.create_role(name="dpy-seer", colour=discord.Colour(0x3498DB), permissions=discord.Permissions.none(),
                                   reason="compat: roles")
    seen = await created
    step("role_created", id=str(role.id), position=role.position, colour=role.colour.value, event_id=str(seen.id))

    given = client.wait_for("member_update", check=lambda b, a: a.id == member.id and role in a.roles, timeout=15)
    await member.add_roles(role)
    await given
    step("role_given", member=str(member.id))

    # A ten-minute timeout, then lifted: each seen in the member's update.
    timed = client.wait_for("member_update", check=lambda b, a: a.id == member.id and a.is_timed_out(), timeout=15)
    await member.timeout(datetime.timedelta(minutes=10), reason="compat: timeout")
    _, after = await timed
    step("timed_out", until=after.timed_out_until.isoformat())
    lifted = client.wait_for("member_update", check=lambda b, a: a.id == member.id and not a.is_timed_out(), timeout=15)
    await member.timeout(None)
    await lifted
    step("timeout_lifted")

    secret = await guild.create_text_channel("dpy-secret")
    await secret.set_permissions(role, view_channel=True)
    hidden = client.wait_for("guild_channel_update",
                             check=lambda b, a: a.id == secret.id and a.overwrites_for(guild.default_role).view_channel is False,
                             timeout=15)
    await secret.set_permissions(guild.default_role, view_channel=False)
    _, after = await hidden
    step("hidden", channel=str(secret.id), overwrites=len(after.overwrites))
    said = await secret.send(f"secret from {LIB}")
    await general.send(f"public from {LIB}")
    step("secret", channel=str(secret.id), message=str(said.id))

    renamed = client.wait_for("guild_role_update", check=lambda b, a: a.id == role.id and a.name == "dpy-seer-renamed", timeout=15)
    await role.edit(name="dpy-seer-renamed", hoist=True)
    before, after = await renamed
    step("role_edited", role_name=after.name, hoist=after.hoist)
    # A new role goes to the bottom and every other moves up one (each a
    # GUILD_ROLE_UPDATE): the library's positions are current once the
    # bot's own role, the top one, has moved.
    shifted = client.wait_for("guild_role_update", check=lambda b, a: a.id == int(ctx["bot_role"]), timeout=15)
    second = await guild.create_role(name="dpy-second")
    await shifted
    moved = client.wait_for("guild_role_update", check=lambda b, a: a.id == second.id and a.position == 2, timeout=15)
    await second.edit(position=2)
    await moved
    step("role_moved", roles=[(r.name, r.position) for r in guild.roles])

    banned = client.wait_for("member_ban", check=lambda g, u: u.id == member2_id, timeout=15)
    purged = client.wait_for("raw_bulk_message_delete", timeout=15)
    await guild.ban(discord.Object(member2_id), delete_message_seconds=3600, reason="compat: spam")
    await banned
    bulk = await purged
    step("banned", purged=sorted(str(i) for i in bulk.message_ids))
    ban = await guild.fetch_ban(discord.Object(member2_id))
    step("ban_entry", reason=ban.reason, user=str(ban.user.id))
    invite = await general.create_invite(max_age=600)
    status, code = await human_join(ctx, invite.code, ctx["member2_token"])
    step("join_refused", status=status, code=code)

    unbanned = client.wait_for("member_unban", check=lambda g, u: u.id == member2_id, timeout=15)
    await guild.unban(discord.Object(member2_id))
    await unbanned
    joined = client.wait_for("member_join", check=lambda m: m.id == member2_id, timeout=15)
    status, _ = await human_join(ctx, invite.code, ctx["member2_token"])
    await joined
    step("rejoined", status=status)

    kicked = client.wait_for("raw_member_remove", check=lambda p: p.user.id == member2_id, timeout=15)
    await guild.kick(discord.Object(member2_id))
    await kicked
    step("kicked", user=str(member2_id))

    for r in (second, role):
        deleted = client.wait_for("guild_role_delete", check=lambda x, rid=r.id: x.id == rid, timeout=15)
        await r.delete()
        await deleted
    step("roles_deleted", left=[r.name for r in guild.roles])


if __name__ == "__main__":
    run(scenario)
