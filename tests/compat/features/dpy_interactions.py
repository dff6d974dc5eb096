#!/usr/bin/env python3
"""discord.py: interactions through the library's own API. An
``app_commands.CommandTree`` synced to the guild holds a slash command with
string/integer/user/channel options, a subcommand group, an autocompleted
option, a command answering with a ``discord.ui.View`` (a button and a
select), one answering with a ``discord.ui.Modal``, one that defers and
follows up, and a user and a message context menu; and a global command
allowed in the bot's DMs, run there.

The person's side (the member, a human) is driven here too, over raw REST
with aiohttp, as Discord's client does it: the command index, then
``POST /interactions`` for each command, component and modal. Every bot
handler reports what it saw (option values, the resolved user, ...) and the
scenario waits for it (never a fixed sleep); then the member reads the
channel's history to see which answers are public. Each ``step`` carries
the invocation's nonce and the interaction's id, so the test can match the
member's own gateway events (INTERACTION_CREATE/SUCCESS, the autocomplete
choices, the modal, the ephemeral message) against them.
"""

import asyncio
import time

import aiohttp
import discord
from discord import app_commands

from dpy_common import run

FRUITS = ["apple", "apricot", "banana", "cherry", "pear"]
WAIT_S = 10.0
DISCORD_EPOCH_MS = 1420070400000


def summary(m: dict) -> dict:
    """What the member sees of an interaction's message in the history."""
    meta = m.get("interaction_metadata") or {}
    return {
        "id": m["id"], "type": m.get("type"), "content": m.get("content"), "author": (m.get("author") or {}).get("id"),
        "application_id": m.get("application_id"), "webhook_id": m.get("webhook_id"), "flags": m.get("flags", 0),
        "components": len(m.get("components") or []),
        "meta": {"id": meta.get("id"), "type": meta.get("type"), "name": meta.get("name"),
                 "command_type": meta.get("command_type"), "user": (meta.get("user") or {}).get("id")},
    }


async def scenario(client: discord.Client, ctx, step):
    loop = asyncio.get_running_loop()
    gid, cid = int(ctx["guild"]), int(ctx["channel"])
    guild_obj = discord.Object(id=gid)
    tree = app_commands.CommandTree(client)

    # ---- what the bot's handlers saw, one future per name ----
    waiters: dict = {}

    def expect(name):
        fut = waiters.get(name)
        if fut is None or fut.done():
            fut = waiters[name] = loop.create_future()
        return fut

    def seen(name, info):
        fut = waiters.get(name)
        if fut is None or fut.done():
            fut = waiters[name] = loop.create_future()
        fut.set_result({"seen": True, **info})

    class Handler:
        """``async with Handler(name) as info``: reports `info` (and any
        exception, which still reaches discord.py) once the handler ends."""

        def __init__(self, name):
            self.name, self.info = name, {}

        async def __aenter__(self):
            return self.info

        async def __aexit__(self, et, ev, tb):
            if et is not None:
                self.info["error"] = f"{et.__name__}: {ev}"
            seen(self.name, self.info)
            return False

    def basics(interaction: discord.Interaction) -> dict:
        return {"interaction_id": str(interaction.id), "user": str(interaction.user.id),
                "itype": interaction.type.value, "guild": str(interaction.guild_id), "channel": str(interaction.channel_id)}

    # ---- the commands ----
    @tree.command(name="echo", description="Echoes", guild=guild_obj)
    @app_commands.describe(text="What to say", count="How often", who="Whom", where="Where")
    async def echo(interaction: discord.Interaction, text: str, count: app_commands.Range[int, 1, 10],
                   who: discord.Member, where: discord.TextChannel):
        async with Handler("echo") as info:
            info.update(basics(interaction), text=text, count=count, who=str(who.id), who_kind=type(who).__name__,
                        who_name=who.name, where=str(where.id), where_kind=type(where).__name__, where_name=where.name,
                        permissions=str(interaction.permissions.value), app_permissions=str(interaction.app_permissions.value),
                        command=interaction.command.qualified_name if interaction.command else None)
            cb = await interaction.response.send_message(f"dpy echo: {text} x{count}")
            info["response_type"] = cb.type.value if cb.type else None
            info["message_id"] = str(cb.message_id) if cb.message_id else None

    cfg = app_commands.Group(name="cfg", description="Settings")
    cfg_set = app_commands.Group(name="set", description="Set things", parent=cfg)

    @cfg_set.command(name="color", description="Sets the colour")
    async def color(interaction: discord.Interaction, value: str):
        async with Handler("color") as info:
            info.update(basics(interaction), value=value, command=interaction.command.qualified_name)
            await interaction.response.send_message(f"dpy colour set to {value}", ephemeral=True)
            original = await interaction.original_response()
            info.update(message_id=str(original.id), ephemeral=original.flags.ephemeral, content=original.content)

    tree.add_command(cfg, guild=guild_obj)

    @tree.command(name="fruit", description="Picks a fruit", guild=guild_obj)
    async def fruit(interaction: discord.Interaction, name: str):
        async with Handler("fruit") as info:
            info.update(basics(interaction), fruit=name)
            await interaction.response.send_message(f"dpy fruit: {name}")

    @fruit.autocomplete("name")
    async def fruit_autocomplete(interaction: discord.Interaction, current: str):
        choices = [app_commands.Choice(name=f, value=f) for f in FRUITS if f.startswith(current)]
        seen("fruit_autocomplete", {**basics(interaction), "current": current, "choices": [c.value for c in choices]})
        return choices

    class Panel(discord.ui.View):
        def __init__(self):
            super().__init__(timeout=120)

        @discord.ui.button(label="OK", custom_id="panel:ok", style=discord.ButtonStyle.primary)
        async def ok(self, interaction: discord.Interaction, button: discord.ui.Button):
            async with Handler("button") as info:
                info.update(basics(interaction), custom_id=button.custom_id, message=str(interaction.message.id),
                            data_custom_id=interaction.data.get("custom_id"))
                await interaction.response.defer()  # a component: DEFERRED_UPDATE_MESSAGE
                info["response_type"] = interaction.response.type.value if interaction.response.type else None
                followup = await interaction.followup.send("dpy button pressed", wait=True)
                info["followup_id"] = str(followup.id)

        @discord.ui.select(custom_id="panel:fruit", placeholder="A fruit",
                           options=[discord.SelectOption(label="Apple", value="apple"),
                                    discord.SelectOption(label="Pear", value="pear")])
        async def pick(self, interaction: discord.Interaction, select: discord.ui.Select):
            async with Handler("select") as info:
                info.update(basics(interaction), custom_id=select.custom_id, values=list(select.values),
                            message=str(interaction.message.id))
                await interaction.response.send_message(f"dpy picked {select.values[0]}")

    @tree.command(name="panel", description="Shows buttons", guild=guild_obj)
    async def panel(interaction: discord.Interaction):
        async with Handler("panel") as info:
            info.update(basics(interaction))
            cb = await interaction.response.send_message("dpy pick one", view=Panel())
            original = await interaction.original_response()
            info.update(callback_message_id=str(cb.message_id), message_id=str(original.id),
                        components=[[c.custom_id for c in row.children] for row in original.components])

    class Form(discord.ui.Modal):
        name = discord.ui.TextInput(label="Your name", custom_id="name", max_length=40)

        def __init__(self):
            super().__init__(title="Who are you", custom_id="form", timeout=120)

        async def on_submit(self, interaction: discord.Interaction):
            async with Handler("form_submit") as info:
                info.update(basics(interaction), custom_id=interaction.data.get("custom_id"), value=self.name.value)
                await interaction.response.send_message(f"dpy thanks {self.name.value}")

        async def on_error(self, interaction, error):
            # discord.py's own handler logs it (a library error: the test fails).
            await super().on_error(interaction, error)
            if not waiters.get("form_submit") or not waiters["form_submit"].done():
                seen("form_submit", {"error": f"{type(error).__name__}: {error}"})

    @tree.command(name="form", description="Asks in a form", guild=guild_obj)
    async def form(interaction: discord.Interaction):
        async with Handler("form") as info:
            info.update(basics(interaction))
            await interaction.response.send_modal(Form())
            info["response_type"] = interaction.response.type.value if interaction.response.type else None

    @tree.command(name="slow", description="Thinks first", guild=guild_obj)
    async def slow(interaction: discord.Interaction):
        async with Handler("slow") as info:
            info.update(basics(interaction))
            await interaction.response.defer(thinking=True)
            info["response_type"] = interaction.response.type.value if interaction.response.type else None
            followup = await interaction.followup.send("dpy slow done", wait=True)
            edited = await interaction.edit_original_response(content="dpy slow done (edited)")
            info.update(followup_id=str(followup.id), followup_content=followup.content, edited_id=str(edited.id),
                        edited_content=edited.content, edited_loading=edited.flags.loading)

    @tree.context_menu(name="Greet", guild=guild_obj)
    async def greet(interaction: discord.Interaction, user: discord.Member):
        async with Handler("greet") as info:
            info.update(basics(interaction), target=str(user.id), target_kind=type(user).__name__,
                        target_id=interaction.data.get("target_id"))
            await interaction.response.send_message(f"dpy hello {user.name}")

    @tree.context_menu(name="Quote", guild=guild_obj)
    async def quote(interaction: discord.Interaction, message: discord.Message):
        async with Handler("quote") as info:
            info.update(basics(interaction), target=str(message.id), content=message.content,
                        author=str(message.author.id), target_id=interaction.data.get("target_id"))
            await interaction.response.send_message(f"dpy quoting: {message.content}")

    @tree.command(name="dmping", description="Answers in DMs too")
    @app_commands.allowed_installs(guilds=True, users=False)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=False)
    async def dmping(interaction: discord.Interaction):
        async with Handler("dmping") as info:
            info.update(basics(interaction), in_guild=interaction.guild is not None,
                        bot_dm=interaction.context.dm_channel, channel_kind=type(interaction.channel).__name__,
                        user_kind=type(interaction.user).__name__)
            cb = await interaction.response.send_message("dpy dm pong")
            info["message_id"] = str(cb.message_id) if cb.message_id else None

    synced = await tree.sync(guild=guild_obj)
    step("synced", names=sorted(c.name for c in synced), types={c.name: c.type.value for c in synced})
    synced_global = await tree.sync()
    step("synced_global", names=sorted(c.name for c in synced_global),
         contexts={c.name: [x for x in ("guild", "dm_channel", "private_channel") if getattr(c.allowed_contexts, x)]
                   for c in synced_global if c.allowed_contexts})

    # ---- the person's side ----
    api = ctx["api"]
    headers = {"Authorization": ctx["member_token"]}
    counter = [0]

    def nonce():
        counter[0] += 1
        return str(((int(time.time() * 1000) - DISCORD_EPOCH_MS) << 22) | counter[0])

    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.get(f"{api}/guilds/{gid}/application-command-index") as r:
            index = await r.json()
            index_status = r.status
        apps = index.get("applications", []) if isinstance(index, dict) else []
        commands = index.get("application_commands", []) if isinstance(index, dict) else []
        app_id = next((a["id"] for a in apps if str(a.get("bot_id")) == ctx["bot_id"]), None)
        step("index", status=index_status, app_id=app_id, client_app_id=str(client.application_id),
             names=sorted(c["name"] for c in commands), versions=all(c.get("version") for c in commands),
             version=bool(index.get("version")) if isinstance(index, dict) else False)
        by_name = {c["name"]: c for c in commands}

        def command(name, options=None):
            c = by_name[name]
            d = {"id": c["id"], "name": c["name"], "type": c.get("type", 1), "version": c.get("version")}
            if options is not None:
                d["options"] = options
            return d

        async def interact(name, kind, data, message_id=None, channel=None):
            """The member's POST /interactions (in the guild's channel, or in
            `channel`: a DM), then the bot's handler `name`."""
            fut = expect(name)
            n = nonce()
            body = {"type": kind, "application_id": app_id, "channel_id": str(channel or cid), "nonce": n, "data": data}
            if channel is None:
                body["guild_id"] = str(gid)
            if ctx.get("member_session"):
                body["session_id"] = ctx["member_session"]
            if message_id is not None:
                body["message_id"] = str(message_id)
            async with http.post(f"{api}/interactions", json=body) as r:
                status, text = r.status, await r.text()
            rec = {"status": status, "nonce": n}
            if status != 204:
                rec.update(body=text[:500], seen=False)
                return rec
            try:
                rec.update(await asyncio.wait_for(asyncio.shield(fut), WAIT_S))
            except asyncio.TimeoutError:
                rec["seen"] = False
            return rec

        async def history():
            async with http.get(f"{api}/channels/{cid}/messages", params={"limit": "100"}) as r:
                assert r.status == 200, f"history: {r.status} {await r.text()}"
                return await r.json()

        async def replies(interaction_id):
            """The messages of an interaction in the member's view of the history."""
            if not interaction_id:
                return []
            return [summary(m) for m in await history() if (m.get("interaction_metadata") or {}).get("id") == interaction_id]

        # A slash command with string, integer, user and channel options.
        rec = await interact("echo", 2, command("echo", [
            {"name": "text", "type": 3, "value": "hi there"},
            {"name": "count", "type": 4, "value": 3},
            {"name": "who", "type": 6, "value": ctx["member2_id"]},
            {"name": "where", "type": 7, "value": str(cid)},
        ]))
        rec["history"] = await replies(rec.get("interaction_id"))
        step("echo", **rec)

        # A subcommand group; the answer is ephemeral.
        rec = await interact("color", 2, command("cfg", [
            {"name": "set", "type": 2, "options": [{"name": "color", "type": 1, "options": [
                {"name": "value", "type": 3, "value": "teal"}]}]}]))
        rec["history"] = await replies(rec.get("interaction_id"))
        step("color", **rec)

        # Autocomplete (a partial value, focused), then the command itself.
        rec = await interact("fruit_autocomplete", 4, command("fruit", [
            {"name": "name", "type": 3, "value": "ap", "focused": True}]))
        step("fruit_autocomplete", **rec)
        rec = await interact("fruit", 2, command("fruit", [{"name": "name", "type": 3, "value": "apricot"}]))
        rec["history"] = await replies(rec.get("interaction_id"))
        step("fruit", **rec)

        # A view: the reply carries a button and a select; the member uses both.
        rec = await interact("panel", 2, command("panel"))
        rec["history"] = await replies(rec.get("interaction_id"))
        step("panel", **rec)
        panel_message = rec.get("message_id")
        if panel_message:
            rec = await interact("button", 3, {"custom_id": "panel:ok", "component_type": 2}, message_id=panel_message)
            rec["history"] = await replies(rec.get("interaction_id"))
            step("button", **rec)
            rec = await interact("select", 3, {"custom_id": "panel:fruit", "component_type": 3, "values": ["pear"]},
                                 message_id=panel_message)
            rec["history"] = await replies(rec.get("interaction_id"))
            step("select", **rec)

        # A modal: shown by the command, submitted by the member.
        rec = await interact("form", 2, command("form"))
        step("form", **rec)
        if rec.get("seen"):
            rec = await interact("form_submit", 5, {"custom_id": "form", "components": [
                {"type": 1, "components": [{"type": 4, "custom_id": "name", "value": "Ann"}]}]})
            rec["history"] = await replies(rec.get("interaction_id"))
            step("form_submit", **rec)

        # Deferred ("thinking"), a followup that replaces it, an edit.
        rec = await interact("slow", 2, command("slow"))
        rec["history"] = await replies(rec.get("interaction_id"))
        step("slow", **rec)

        # A user context menu on member2.
        rec = await interact("greet", 2, {**command("Greet"), "target_id": ctx["member2_id"]})
        rec["history"] = await replies(rec.get("interaction_id"))
        step("greet", **rec)

        # A message context menu on a message of the member's (last: it needs
        # the message resolved, see the test).
        async with http.post(f"{api}/channels/{cid}/messages", json={"content": "quote me, discord.py"}) as r:
            target = await r.json()
        rec = await interact("quote", 2, {**command("Quote"), "target_id": target["id"]})
        rec["target_message"] = target["id"]
        rec["history"] = await replies(rec.get("interaction_id"))
        step("quote", **rec)

        # A global command in the member's DM with the bot, from the DM's index.
        async with http.post(f"{api}/users/@me/channels", json={"recipient_id": ctx["bot_id"]}) as r:
            dm = await r.json()
        async with http.get(f"{api}/channels/{dm['id']}/application-command-index") as r:
            dm_index = await r.json()
        dm_commands = {c["name"]: c for c in dm_index.get("application_commands", [])}
        rec = {"status": None, "index": sorted(dm_commands)}
        if "dmping" in dm_commands:
            c = dm_commands["dmping"]
            rec.update(await interact("dmping", 2, {"id": c["id"], "name": c["name"], "type": 1, "version": c.get("version")},
                                      channel=dm["id"]))
        async with http.get(f"{api}/channels/{dm['id']}/messages") as r:
            rec["history"] = [summary(m) for m in await r.json() if (m.get("interaction_metadata") or {}).get("id") == rec.get("interaction_id")]
        rec["dm"] = dm["id"]
        step("dmping", **rec)


if __name__ == "__main__":
    run(scenario, timeout=150)
