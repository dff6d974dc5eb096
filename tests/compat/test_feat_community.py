"""Feature scenarios with both libraries: what a community uses beyond chat
(see features/dpy_community.py, features/djs_community.js). Member search by
name prefix over the gateway (op 8) and REST, with a nickname the bot set;
`with_counts` as every library sends it. The audit log read through each
library's own call, with filters and pages, and its live event. Message
search through each library's REST client."""

import pytest

from feature_harness import make_world, run_djs, run_dpy


@pytest.mark.parametrize("lib", ["dpy", "djs"])
def test_member_search_and_counts(lib):
    world = make_world(f"community_{lib}", bot_admin=True)
    try:
        r = run_dpy(world, "dpy_community.py") if lib == "dpy" else run_djs(world, "djs_community.js")
        r.assert_ok()
        q = r.step("query")
        assert q["both"] == sorted([world.member_id, world.member2_id]), q
        assert q["only2"] == [world.member2_id], q
        n = r.step("query_nick")
        assert n["ids"] == [world.member2_id] and n["nicks"] == ["Zephyr"], n
        if lib == "dpy":
            assert r.step("fetch_members")["ids"] == sorted([world.owner_id, world.bot_id, world.member_id, world.member2_id])
            rest = r.step("rest_search")
            assert rest["ids"] == [world.member2_id] and rest["nicks"] == ["Zephyr"], rest
        else:
            assert n["gateway"] == [world.member2_id], n
        c = r.step("with_counts")
        assert c["members"] == c["raw_members"] == 4, c
        # The server's own view agrees.
        _, found = world.api("GET", f"/guilds/{world.guild}/members/search?query=zephyr&limit=5")
        assert [m["user"]["id"] for m in found] == [world.member2_id]

        found = r.step("search")
        assert (found["total"], found["ids"]) == (1, [found["sent"]]), found

        kick, role_create, member_update = (("AuditLogAction.kick", "AuditLogAction.role_create", "AuditLogAction.member_update")
                                            if lib == "dpy" else (20, 30, 24))
        heard = r.step("heard")
        assert (heard["action"], heard["target"], heard["reason"]) == (kick, world.member_id, "compat: a kick"), heard
        every = r.step("audit_all")
        assert every["actions"][:3] == [kick, role_create, member_update], every
        assert world.bot_id in every["users"], every
        assert every["changes"][1][:2] == ["name", "permissions"], every
        kicks = r.step("audit_kicks")
        assert (kicks["targets"], kicks["reasons"]) == ([world.member_id], ["compat: a kick"]), kicks
        assert r.step("audit_mine")["actions"] == [kick, role_create]
        role = r.step("audit_role")
        assert (role["target"], role["role_name"], role["reason"]) == (role["role"], f"{lib}-audited", "compat: a role"), role
        if lib == "dpy":
            oldest = r.step("audit_oldest")
            assert oldest["ids"] == list(reversed(oldest["newest"])), oldest
    finally:
        world.stop()
