"""Feature scenarios with both libraries: reactions (add, remove one's own
and another's, list who reacted, clear one emoji and all), a custom emoji
(create, GUILD_EMOJIS_UPDATE, react with it), pins (pin, list both ways,
unpin) and bulk delete, each through the library's own API and seen back
as its event. The bot owns the guild, so it has every permission."""

import pytest

from feature_harness import make_world, run_dpy, run_djs

THUMBS, HEART = "\N{THUMBS UP SIGN}", "\N{HEAVY BLACK HEART}\N{VARIATION SELECTOR-16}"


@pytest.fixture(scope="module")
def world():
    w = make_world("reactions", bot_owns=True)
    yield w
    w.stop()


def check_common(world, r, lib):
    r.assert_ok()
    for t in ("MESSAGE_REACTION_ADD", "MESSAGE_REACTION_REMOVE", "MESSAGE_REACTION_REMOVE_EMOJI", "MESSAGE_REACTION_REMOVE_ALL",
              "GUILD_EMOJIS_UPDATE", "CHANNEL_PINS_UPDATE", "MESSAGE_DELETE_BULK"):
        assert r.dispatched(t) >= 1, f"{lib}: no {t}"
    fetched = r.step("fetched")
    assert sorted(fetched["users"]) == sorted([world.bot_id, world.member_id])
    assert fetched["reactions"] == [[THUMBS, 2, True], [HEART, 1, True]]
    assert r.step("cleared_emoji")["emoji"] == HEART
    assert r.step("cleared")["reactions"] == 0
    emoji = r.step("emoji")
    assert emoji["emoji_name"] in emoji["in_guild"]
    assert r.step("custom_reaction")["id"] == emoji["id"]
    pins = r.step("pins")
    assert len(pins["ids"]) == 1 and pins["pinned"] == [True]
    assert r.step("unpinned")["pins"] == 0
    purged = r.step("purged")
    assert purged["deleted"] == purged["seen"] == purged["sent"]
    # Seen by a raw client: the emoji exists, its image is served, the custom reaction stays.
    _, emojis = world.api("GET", f"/guilds/{world.guild}/emojis")
    assert emoji["id"] in [e["id"] for e in emojis]
    _, history = world.api("GET", f"/channels/{world.channel}/messages?limit=50")
    assert not set(purged["sent"]) & {m["id"] for m in history}
    reacted = [m for m in history if m["id"] == pins["ids"][0]][0]
    assert [x["emoji"]["id"] for x in reacted["reactions"]] == [emoji["id"]]
    assert reacted["reactions"][0]["me"] is True, "the bot (the guild owner) reacted"
    _, seen_by_member = world.api("GET", f"/channels/{world.channel}/messages/{reacted['id']}", auth=world.member_token)
    assert seen_by_member["reactions"][0]["me"] is False, "me is the requester's"
    status, _, hdrs = world.rest.request("GET", f"/emojis/{emoji['id']}.webp", expect=None)
    assert status == 200 and {k.lower(): v for k, v in hdrs.items()}["content-type"] == "image/png"
    notices = [m for m in history if m["type"] == 6 and m.get("message_reference", {}).get("message_id") == pins["ids"][0]]
    assert notices, "the pin's system message"


def test_dpy(world):
    r = run_dpy(world, "dpy_reactions.py")
    check_common(world, r, "dpy")
    added = r.step("added")
    assert added == {**added, "user": world.bot_id, "member": world.bot_id, "emoji": THUMBS, "burst": False, "type": 0}
    assert r.step("pins")["pinned_at"] != "None"


def test_djs(world):
    r = run_djs(world, "djs_reactions.js")
    check_common(world, r, "djs")
    added = r.step("added")
    assert (added["emoji"], added["me"], added["type"], added["burst"]) == (THUMBS, True, 0, False)
    assert r.step("pins")["old"] == r.step("pins")["ids"]
    assert f"/emojis/{r.step('emoji')['id']}." in r.step("emoji")["url"]
