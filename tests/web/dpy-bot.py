"""An unmodified discord.py bot for the browser test of interactions
(commands-dpy.test.mjs), everything through the library's own API: an
``app_commands.CommandTree`` synced to the guild (a string and a ranged
integer option, autocomplete, a user and a message context menu), a
``discord.ui.View`` with a button and a select, a ``discord.ui.Modal``,
``defer(thinking=True)`` then ``edit_original_response`` and a followup,
and an ephemeral reply. A person drives it from the web client.

Usage: python dpy-bot.py BASE BOT_TOKEN GUILD (with the compat venv's
python: tests/compat/.venv-zstd, made by tests/compat/setup.sh). Prints
"ready" once its commands are synced. Every library warning or error is
printed as "LIBRARY PROBLEM ..." on stderr: the test fails on it.
"""

import asyncio
import logging
import sys
import traceback

import discord
import discord.gateway
import discord.http
import yarl
from discord import app_commands

base, token, guild_id = sys.argv[1].rstrip("/"), sys.argv[2], int(sys.argv[3])
host = yarl.URL(base)
discord.http.Route.BASE = base + "/api/v10"
discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL.build(scheme="ws", host=host.host, port=host.port, path="/")

BENIGN = ("voice will NOT be supported", "PyNaCl is not installed")


class Problems(logging.Handler):
    def emit(self, record):
        msg = record.getMessage()
        if any(b in msg for b in BENIGN):
            return
        sys.stderr.write(f"LIBRARY PROBLEM {record.levelname} {record.name}: {msg}\n")
        if record.exc_info:
            sys.stderr.write("".join(traceback.format_exception(*record.exc_info)))
        sys.stderr.flush()


logging.basicConfig(level=logging.INFO, stream=sys.stderr)
logging.getLogger("discord").addHandler(Problems(level=logging.WARNING))

FRUITS = ["apple", "apricot", "banana", "cherry"]
client = discord.Client(intents=discord.Intents.default())
tree = app_commands.CommandTree(client)
guild = discord.Object(id=guild_id)


@tree.command(name="greet", description="Greets someone", guild=guild)
async def greet(interaction: discord.Interaction, name: str, times: app_commands.Range[int, 1, 3] = 1):
    await interaction.response.send_message(f"dpy greets {name} x{times}")


class Panel(discord.ui.View):
    def __init__(self):
        super().__init__(timeout=120)

    @discord.ui.button(label="Press", custom_id="dpy:press", style=discord.ButtonStyle.success)
    async def press(self, interaction: discord.Interaction, button: discord.ui.Button):
        await interaction.response.send_message("dpy: only you pressed it", ephemeral=True)

    @discord.ui.select(custom_id="dpy:fruit", placeholder="A fruit",
                       options=[discord.SelectOption(label="Apple", value="apple"),
                                discord.SelectOption(label="Pear", value="pear")])
    async def pick(self, interaction: discord.Interaction, select: discord.ui.Select):
        await interaction.response.send_message(f"dpy picked {select.values[0]}")


@tree.command(name="panel", description="Shows a button and a select", guild=guild)
async def panel(interaction: discord.Interaction):
    await interaction.response.send_message("dpy panel", view=Panel())


class Details(discord.ui.Modal, title="Your details"):
    name = discord.ui.TextInput(label="Your name", custom_id="name", max_length=40)

    async def on_submit(self, interaction: discord.Interaction):
        await interaction.response.send_message(f"dpy thanks {self.name.value}")


@tree.command(name="form", description="Asks in a form", guild=guild)
async def form(interaction: discord.Interaction):
    await interaction.response.send_modal(Details())


@tree.command(name="slow", description="Thinks first", guild=guild)
async def slow(interaction: discord.Interaction):
    await interaction.response.defer(thinking=True)
    await interaction.edit_original_response(content="dpy done thinking")
    await interaction.followup.send("dpy one more thing")


@tree.command(name="fruit", description="Picks a fruit", guild=guild)
async def fruit(interaction: discord.Interaction, name: str):
    await interaction.response.send_message(f"dpy fruit: {name}")


@fruit.autocomplete("name")
async def fruit_choices(interaction: discord.Interaction, current: str):
    return [app_commands.Choice(name=f, value=f) for f in FRUITS if f.startswith(current)]


@tree.context_menu(name="Wave", guild=guild)
async def wave(interaction: discord.Interaction, user: discord.Member):
    await interaction.response.send_message(f"dpy waves at {user.name}")


@tree.context_menu(name="Quote", guild=guild)
async def quote(interaction: discord.Interaction, message: discord.Message):
    await interaction.response.send_message(f"dpy quotes: {message.content}")


@tree.error
async def on_tree_error(interaction, error):
    sys.stderr.write(f"LIBRARY PROBLEM command error: {error!r}\n")
    sys.stderr.flush()


@client.event
async def on_error(event_method, *args, **kwargs):
    sys.stderr.write(f"LIBRARY PROBLEM in {event_method}: {traceback.format_exc()}\n")
    sys.stderr.flush()


@client.event
async def on_ready():
    await tree.sync(guild=guild)
    print("ready", flush=True)


async def main():
    async with client:
        await client.start(token, reconnect=False)


asyncio.run(main())
