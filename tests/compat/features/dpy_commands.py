#!/usr/bin/env python3
"""discord.py: application commands through the library's API: a
CommandTree with a slash command (options and choices), a group and a
context menu, `tree.sync()` globally and for the guild, then the commands
fetched back (`tree.fetch_commands`)."""

import discord
from discord import app_commands

from dpy_common import run


async def scenario(client: discord.Client, ctx, step):
    tree = app_commands.CommandTree(client)
    guild = discord.Object(id=int(ctx["guild"]))

    @tree.command(name="ping", description="Replies with pong")
    @app_commands.describe(times="How many pongs")
    @app_commands.choices(times=[app_commands.Choice(name="one", value=1), app_commands.Choice(name="two", value=2)])
    async def ping(interaction: discord.Interaction, times: app_commands.Choice[int], note: str = ""):
        pass

    group = app_commands.Group(name="admin", description="Admin tools")

    @group.command(name="purge", description="Purges messages")
    async def purge(interaction: discord.Interaction, count: int):
        pass

    tree.add_command(group)

    @tree.context_menu(name="Inspect User")
    async def inspect(interaction: discord.Interaction, user: discord.User):
        pass

    synced = await tree.sync()
    step("synced_global", names=sorted(c.name for c in synced), types=sorted(str(c.type) for c in synced))
    fetched = await tree.fetch_commands()
    ping_cmd = next(c for c in fetched if c.name == "ping")
    step("fetched_global", names=sorted(c.name for c in fetched),
         ping_options=[o.name for o in ping_cmd.options], ping_choices=[c.name for c in ping_cmd.options[0].choices])

    tree.copy_global_to(guild=guild)
    synced_guild = await tree.sync(guild=guild)
    fetched_guild = await tree.fetch_commands(guild=guild)
    step("synced_guild", names=sorted(c.name for c in synced_guild), guild_ids=sorted({str(c.guild_id) for c in fetched_guild}))

    # Syncing again keeps the ids; an emptied tree removes them.
    again = await tree.sync()
    step("resynced", same_ids=sorted(c.id for c in again) == sorted(c.id for c in synced))
    tree.clear_commands(guild=guild)
    emptied = await tree.sync(guild=guild)
    step("cleared_guild", count=len(emptied))


if __name__ == "__main__":
    run(scenario)
