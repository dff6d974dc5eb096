"""Feature scenarios with both libraries: roles, a member's roles, channel
overwrites, bans and kicks through each library's high-level API (see
features/dpy_roles.py, features/djs_roles.js). The humans' own raw gateway
sessions show who received a hidden channel's message; REST shows what
stayed."""

import datetime

import pytest

from feature_harness import make_world, run_djs, run_dpy
from harness import RawGateway

# GUILDS | GUILD_MEMBERS | GUILD_MESSAGES | MESSAGE_CONTENT
HUMAN_INTENTS = 1 | 2 | 512 | 32768


def human_session(world, token, name):
    gw = RawGateway(f"ws://127.0.0.1:{world.server.port}/?v=10&encoding=json", token, HUMAN_INTENTS, world.workdir / f"{name}-gateway.txt")
    gw.start()
    assert gw.wait_for(lambda f: f.get("t") == "GUILD_CREATE", 15), f"{name}: no GUILD_CREATE ({gw.error})"
    return gw


@pytest.mark.parametrize("lib", ["dpy", "djs"])
def test_roles_overwrites_bans_and_kicks(lib):
    world = make_world(f"roles_{lib}", bot_admin=True)
    member = member2 = None
    try:
        member = human_session(world, world.member_token, "member")
        member2 = human_session(world, world.member2_token, "member2")
        # Something of member2's for the ban to delete.
        _, spam = world.api("POST", f"/channels/{world.channel}/messages", {"content": "spam"}, auth=world.member2_token)
        r = run_dpy(world, "dpy_roles.py") if lib == "dpy" else run_djs(world, "djs_roles.js")
        r.assert_ok()
        name = "discord.py" if lib == "dpy" else "discord.js"

        # The timeout as each library parsed it: ten minutes from now.
        until = datetime.datetime.fromisoformat(r.step("timed_out")["until"].replace("Z", "+00:00"))
        left = (until - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        assert 0 < left <= 600, left
        r.step("timeout_lifted")
        # The member's own session saw it start and end.
        upd = lambda timed: lambda f: f.get("t") == "GUILD_MEMBER_UPDATE" and f["d"]["user"]["id"] == world.member_id and bool(f["d"].get("communication_disabled_until")) == timed
        assert member.wait_for(upd(True), 15), "the member saw the timeout"
        start = member.frames.index(member.wait_for(upd(True), 1))
        assert member.wait_for(upd(False), 15, start=start + 1), "the member saw it lifted"

        created = r.step("role_created")
        assert created["event_id"] == created["id"] and created["position"] == 1 and created["colour"] == 0x3498DB
        assert r.step("hidden")["overwrites"] == 2
        edited = r.step("role_edited")
        assert (edited["role_name"], edited["hoist"]) == (f"{lib}-seer-renamed", True)
        for t in ("GUILD_ROLE_CREATE", "GUILD_ROLE_UPDATE", "GUILD_ROLE_DELETE", "GUILD_BAN_ADD", "GUILD_BAN_REMOVE"):
            assert r.dispatched(t) >= 1, t

        # Who received the hidden channel's message: the member with the
        # role did; member2 lost the channel (CHANNEL_DELETE) and did not.
        secret = r.step("secret")
        public = f"public from {name}"
        for gw in (member, member2):
            assert gw.wait_for(lambda f: f.get("t") == "MESSAGE_CREATE" and f["d"]["content"] == public, 15), "public message"
        contents = lambda gw: [f["d"]["content"] for f in gw.dispatches("MESSAGE_CREATE")]
        assert f"secret from {name}" in contents(member)
        assert f"secret from {name}" not in contents(member2)
        assert [f["d"]["id"] for f in member2.dispatches("CHANNEL_DELETE")] == [secret["channel"]]
        # The member kept the channel until its role was deleted at the end.
        assert member.wait_for(lambda f: f.get("t") == "CHANNEL_DELETE" and f["d"]["id"] == secret["channel"], 15)
        order = [f.get("t") for f in member.dispatches() if f["d"].get("id") == secret["channel"] or f["d"].get("channel_id") == secret["channel"]]
        assert order[-2:] == ["MESSAGE_CREATE", "CHANNEL_DELETE"] and order.count("CHANNEL_DELETE") == 1, order

        # The ban: member2's message purged, the ban listed with its reason,
        # the invite refused; after the unban they joined, then were kicked.
        assert spam["id"] in r.step("banned")["purged"]
        entry = r.step("ban_entry")
        assert (entry["reason"], entry["user"]) == ("compat: spam", world.member2_id)
        refused = r.step("join_refused")
        assert (refused["status"], refused["code"]) == (403, 40007)
        assert r.step("rejoined")["status"] == 200
        assert member2.wait_for(lambda f: f.get("t") == "GUILD_DELETE", 15), "member2's session left the guild"
        world.api("GET", f"/guilds/{world.guild}/members/{world.member2_id}", expect=(404,))
        _, bans = world.api("GET", f"/guilds/{world.guild}/bans")
        assert bans == []
        _, history = world.api("GET", f"/channels/{world.channel}/messages?limit=50")
        assert spam["id"] not in [m["id"] for m in history]
        _, roles = world.api("GET", f"/guilds/{world.guild}/roles")
        # The bot's own managed role (it joined by authorization) stays too.
        managed = [x for x in roles if x["managed"]]
        assert [x["tags"]["bot_id"] for x in managed] == [world.bot_id], roles
        assert sorted(x["name"] for x in roles if not x["managed"]) == ["@everyone", "bot admin"]
        _, m = world.api("GET", f"/guilds/{world.guild}/members/{world.member_id}")
        assert m["roles"] == []
    finally:
        for gw in (member, member2):
            if gw:
                gw.stop()
        world.stop()
