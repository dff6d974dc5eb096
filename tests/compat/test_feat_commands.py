"""Application commands with both libraries through their own API:
discord.py's `tree.sync()` (global and guild) and `tree.fetch_commands()`,
discord.js's `client.application.commands.set([...])` and
`rest.put(Routes.applicationGuildCommands(...))`; the commands come back
as registered, ids survive a second sync, and REST agrees."""

import pytest

from feature_harness import make_world, run_dpy, run_djs


@pytest.fixture(scope="module")
def world():
    w = make_world("commands", bot_owns=True)
    yield w
    w.stop()


def app_id(world):
    _, app = world.api("GET", "/applications/@me", auth=world.bot_token)
    return app["id"]


def test_dpy_tree_sync(world):
    r = run_dpy(world, "dpy_commands.py")
    r.assert_ok()
    assert r.step("synced_global")["names"] == ["Inspect User", "admin", "ping"]
    f = r.step("fetched_global")
    assert f["names"] == ["Inspect User", "admin", "ping"]
    assert f["ping_options"] == ["times", "note"] and f["ping_choices"] == ["one", "two"]
    g = r.step("synced_guild")
    assert g["names"] == ["Inspect User", "admin", "ping"] and g["guild_ids"] == [world.guild]
    assert r.step("resynced")["same_ids"] is True
    assert r.step("cleared_guild")["count"] == 0
    _, cmds = world.api("GET", f"/applications/{app_id(world)}/commands", auth=world.bot_token)
    assert sorted(c["name"] for c in cmds) == ["Inspect User", "admin", "ping"]


def test_djs_commands_set_and_rest_put(world):
    r = run_djs(world, "djs_commands.js")
    r.assert_ok()
    assert r.step("set_global")["names"] == ["Inspect User", "admin", "ping"]
    f = r.step("fetched_global")
    assert f["ping_options"] == ["times", "note"] and f["ping_choices"] == ["one", "two"]
    g = r.step("guild")
    assert g["put"] == ["admin", "ping"] and g["fetched"] == ["admin", "ping"] and g["guild_ids"] == [world.guild]
    one = r.step("one")
    assert one["edited"] == "Echoes back" and "echo" not in one["names"]
    assert r.step("reset")["same_ids"] is True
    _, cmds = world.api("GET", f"/applications/{app_id(world)}/guilds/{world.guild}/commands", auth=world.bot_token)
    assert sorted(c["name"] for c in cmds) == ["admin", "ping"]
