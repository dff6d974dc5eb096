"""DMs with both libraries through their own API: the bot opens a DM
(`user.send`, `member.send`), a human answers over raw REST, the library
receives the DM through its message event (no guild), and the human's raw
gateway session sees the DM appear (CHANNEL_CREATE) with the message."""

import pytest

from feature_harness import make_world, run_dpy, run_djs
from harness import RawGateway

DIRECT_MESSAGES = 1 << 12


@pytest.fixture(scope="module")
def world():
    w = make_world("dms", bot_owns=True)
    yield w
    w.stop()


@pytest.mark.parametrize("lib", ["dpy", "djs"])
def test_dms_both_ways(world, lib):
    name = "discord.py" if lib == "dpy" else "discord.js"
    # A member of its own for each library: the DM is new, so its first message announces it.
    member_id, member_token = (world.member_id, world.member_token) if lib == "dpy" else (world.member2_id, world.member2_token)
    url = f"ws://127.0.0.1:{world.server.port}/?v=10&encoding=json"
    human = RawGateway(url, member_token, DIRECT_MESSAGES | 1, world.workdir / f"human-{lib}.log")
    human.start()
    try:
        assert human.wait_for(lambda f: f.get("t") == "READY", timeout=15)
        ids = {"member_id": member_id, "member_token": member_token}
        r = run_dpy(world, "dpy_dms.py", **ids) if lib == "dpy" else run_djs(world, "djs_dms.js", **ids)
        r.assert_ok()
        sent = r.step("sent")
        assert sent["guild"] is None
        assert sent["channel_type"] in ("private", 1), sent
        got = r.step("received")
        assert got["content"] == "hello bot, from a human" and got["guild"] is None and got["dm"], got
        hist = r.step("history")
        assert hist["same"] and hist["contents"][:2] == ["hello bot, from a human", f"hello from {name}"], hist
        assert r.step("member_dm") == {**r.step("member_dm"), "content": "hi back", "dm": True}
        assert r.step("edited")["content"] == "hello member (edited)"
        assert r.dispatched("MESSAGE_CREATE") >= 4
        # The human's own gateway: the DM appeared, then the bot's message.
        created = human.wait_for(lambda f: f.get("t") == "CHANNEL_CREATE" and f["d"].get("type") == 1, timeout=15)
        assert created["d"]["recipients"][0]["id"] == world.bot_id
        msg = human.wait_for(lambda f: f.get("t") == "MESSAGE_CREATE" and f["d"]["content"] == "hello member", timeout=15)
        assert "guild_id" not in msg["d"]
        # History over REST, as the human.
        _, history = world.api("GET", f"/channels/{created['d']['id']}/messages", auth=member_token)
        assert [m["content"] for m in history][:1] == ["hi back"]
    finally:
        human.stop()
