"""Feature scenarios with both libraries: messages and the bot's own member
(send, edit, typing, delete, nickname) through each library's high-level
API; every change comes back as its dispatch, and the history agrees."""

import pytest

from feature_harness import make_world, run_dpy, run_djs


@pytest.fixture(scope="module")
def world():
    w = make_world("basics")
    yield w
    w.stop()


@pytest.mark.parametrize("lib", ["dpy", "djs"])
def test_messages_and_own_member(world, lib):
    r = run_dpy(world, "dpy_basics.py") if lib == "dpy" else run_djs(world, "djs_basics.js")
    r.assert_ok()
    name = "discord.py" if lib == "dpy" else "discord.js"
    assert r.step("edited")["content"] == f"edited by {name}"
    assert r.step("edited")["event_content"] == f"edited by {name}"
    assert r.dispatched("MESSAGE_UPDATE") >= 1 and r.dispatched("MESSAGE_DELETE") >= 1
    assert r.step("nick")["nick"] == f"{lib} nick"
    # Deleted: gone from history; the member keeps the nickname.
    _, history = world.api("GET", f"/channels/{world.channel}/messages?limit=50")
    assert r.step("deleted")["id"] not in [m["id"] for m in history]
    _, member = world.api("GET", f"/guilds/{world.guild}/members/{world.bot_id}")
    assert member["nick"] == f"{lib} nick"
