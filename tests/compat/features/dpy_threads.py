#!/usr/bin/env python3
"""discord.py: threads through the library's API. A thread from a message
(`message.create_thread`) and a private one (`channel.create_thread`),
messages in them (`thread.send`), members added and removed, leave and
join, archive (`thread.edit(archived=True)`) and the lists of active and
archived threads, then delete."""

import discord

from dpy_common import run


async def scenario(client: discord.Client, ctx, step):
    guild = client.get_guild(int(ctx["guild"]))
    channel = guild.get_channel(int(ctx["channel"]))
    starter = await channel.send("a thread starts here")
    created = client.wait_for("thread_create", check=lambda t: t.id == starter.id, timeout=15)
    thread = await starter.create_thread(name="dpy thread", auto_archive_duration=60)
    event = await created
    step("created", id=str(thread.id), starter=str(starter.id), type=str(thread.type), parent=str(thread.parent_id),
         owner=str(thread.owner_id), event_name=event.name, archive_minutes=thread.auto_archive_duration)

    said = client.wait_for("message", check=lambda m: m.channel.id == thread.id, timeout=15)
    await thread.send("hello thread")
    got = await said
    step("message", content=got.content, in_thread=isinstance(got.channel, discord.Thread))

    member = guild.get_member(int(ctx["member_id"])) or await guild.fetch_member(int(ctx["member_id"]))
    await thread.add_user(member)
    members = await thread.fetch_members()
    step("members", ids=sorted(str(m.id) for m in members))
    await thread.remove_user(member)
    await thread.leave()
    await thread.join()
    after = await thread.fetch_members()
    step("members_after", ids=sorted(str(m.id) for m in after))

    active = await guild.active_threads()
    step("active", ids=[str(t.id) for t in active])

    updated = client.wait_for("thread_update", check=lambda b, a: a.id == thread.id and a.archived, timeout=15)
    await thread.edit(archived=True)
    _, archived = await updated
    listed = [t async for t in channel.archived_threads(limit=10)]
    step("archived", archived=archived.archived, listed=[str(t.id) for t in listed])

    private = await channel.create_thread(name="dpy private", type=discord.ChannelType.private_thread, invitable=False)
    await private.send("just us")
    step("private", type=str(private.type), invitable=private.invitable)

    deleted = client.wait_for("raw_thread_delete", check=lambda p: p.thread_id == private.id, timeout=15)
    await private.delete()
    await deleted
    step("deleted", id=str(private.id))


if __name__ == "__main__":
    run(scenario)
