"""Passive sessions (issue #31) with both libraries. In a guild of more
members than the server's `gateway.passive_guild_members` (2 here: the
world's guild has 4), a person's session that has not opened the guild is
passive: it gets the unread state (PASSIVE_UPDATE_V1), not the messages.
The libraries' bots never open guilds (op 14 is a user client's) and must
still get every event their intents ask for: the basics scenario (send,
edit, typing, delete, nickname) checks each by the dispatch that comes
back, with no library error or warning."""

import os

import pytest

from feature_harness import make_world, run_dpy, run_djs
from harness import RawGateway

PERSON_INTENTS = 1 | 512 | 32768
SERVER_ENV = {"THRONG_GATEWAY__PASSIVE_GUILD_MEMBERS": "2", "THRONG_GATEWAY__PASSIVE_UPDATE_MS": "100"}


@pytest.fixture(scope="module")
def world():
    saved = {k: os.environ.get(k) for k in SERVER_ENV}
    os.environ.update(SERVER_ENV)
    try:
        w = make_world("passive")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    yield w
    w.stop()


@pytest.mark.parametrize("lib", ["dpy", "djs"])
def test_bots_get_every_event_of_a_large_guild_while_people_are_passive(world, lib):
    # One person per library: a person is told of a channel once until they
    # read it, and neither reads here.
    token = world.member_token if lib == "dpy" else world.member2_token
    person = RawGateway(f"ws://127.0.0.1:{world.server.port}/?v=10&encoding=json", token, PERSON_INTENTS,
                        world.workdir / f"person_{lib}.log")
    person.start()
    try:
        created = person.wait_for(lambda f: f.get("t") == "GUILD_CREATE", timeout=30)
        assert created, "the person's session never got GUILD_CREATE"
        r = run_dpy(world, "dpy_basics.py") if lib == "dpy" else run_djs(world, "djs_basics.js")
        r.assert_ok()
        name = "discord.py" if lib == "dpy" else "discord.js"
        assert r.step("edited")["event_content"] == f"edited by {name}"
        assert r.dispatched("MESSAGE_CREATE") >= 1 and r.dispatched("MESSAGE_UPDATE") >= 1 and r.dispatched("MESSAGE_DELETE") >= 1
        assert r.step("nick")["nick"] == f"{lib} nick"
        sent = r.step("sent")["id"]
        # The person heard of the bot's message as unread state only.
        update = person.wait_for(lambda f: f.get("t") == "PASSIVE_UPDATE_V1"
                                 and any(c.get("last_message_id") for c in f["d"]["channels"]), timeout=30)
        assert update, "no PASSIVE_UPDATE_V1 for the person"
        assert update["d"]["guild_id"] == world.guild
        messages = [f for f in person.frames if f.get("t") in ("MESSAGE_CREATE", "MESSAGE_UPDATE", "TYPING_START")]
        assert not [f for f in messages if f["d"].get("id") == sent or f["d"].get("channel_id") == world.channel], messages
    finally:
        person.stop()
