"""Interactions with both libraries through their own API (see
features/dpy_interactions.py, features/djs_interactions.js): the bot syncs
guild commands (a slash command with string/integer/user/channel options, a
subcommand group, an autocompleted option, a view with a button and a
select, a modal, a deferred answer, a user and a message context menu); the
member, a human, runs each of them over REST (`POST /interactions`, as
Discord's client does) and the library's handlers answer. Asserted: what the
handlers saw, what the member sees in the channel's history (public answers,
no ephemeral one), and what the member's own gateway session gets
(INTERACTION_CREATE/SUCCESS with its nonce, the autocomplete choices, the
modal, the ephemeral message) while member2's gets none of it. Last, a
global command allowed in the bot's DMs runs in the member's DM with it."""

import pytest

from feature_harness import make_world, run_djs, run_dpy
from harness import RawGateway

pytestmark = pytest.mark.timeout(420)

# GUILDS | GUILD_MEMBERS | GUILD_MESSAGES | MESSAGE_CONTENT
HUMAN_INTENTS = 1 | 2 | 512 | 32768
EPHEMERAL, LOADING = 1 << 6, 1 << 7
NAMES = ["Greet", "Quote", "cfg", "echo", "form", "fruit", "panel", "slow"]
LIB = {"dpy": "discord.py", "djs": "discord.js"}
MEMBER_CLASS = {"dpy": "Member", "djs": "GuildMember"}


def human_session(world, token, name):
    gw = RawGateway(f"ws://127.0.0.1:{world.server.port}/?v=10&encoding=json", token, HUMAN_INTENTS, world.workdir / f"{name}-gateway.txt")
    gw.start()
    assert gw.wait_for(lambda f: f.get("t") == "GUILD_CREATE", 15), f"{name}: no GUILD_CREATE ({gw.error})"
    return gw


@pytest.fixture(scope="module")
def world():
    # No extra permissions: answering an interaction needs none, and the
    # member sees the channel and may use application commands by default.
    w = make_world("interactions")
    yield w
    w.stop()


@pytest.fixture(scope="module")
def sessions(world):
    member = human_session(world, world.member_token, "member")
    member2 = human_session(world, world.member2_token, "member2")
    yield member, member2
    member.stop()
    member2.stop()


class Run:
    def __init__(self, lib, result, world, member, member2):
        self.lib, self.r, self.world, self.member, self.member2 = lib, result, world, member, member2

    def step(self, name):
        return self.r.step(name)

    def handled(self, name):
        """The member's invocation `name` was accepted (204) and the library's handler ran without error."""
        s = self.step(name)
        assert s["status"] == 204, f"POST /interactions for {name}: {s['status']} {s.get('body')}"
        problems = "\n".join(str(p)[:600] for p in self.r.problems())
        assert s.get("seen") is True, f"{self.lib}: the {name} handler never ran\nstep: {s}\nlibrary problems:\n{problems}"
        assert not s.get("error"), f"{self.lib}: the {name} handler failed: {s['error']}\nlibrary problems:\n{problems}"
        assert s["user"] == self.world.member_id, s
        return s

    def gateway(self, t, nonce, who=None, timeout=10):
        gw = who or self.member
        return gw.wait_for(lambda f: f.get("op") == 0 and f.get("t") == t and f["d"].get("nonce") == nonce, timeout)

    def acknowledged(self, s):
        """The member's own session got INTERACTION_CREATE and INTERACTION_SUCCESS with its nonce."""
        created = self.gateway("INTERACTION_CREATE", s["nonce"])
        assert created, f"member: no INTERACTION_CREATE with nonce {s['nonce']}\n{self.member.summary()}"
        assert created["d"]["id"] == s["interaction_id"], created
        ok = self.gateway("INTERACTION_SUCCESS", s["nonce"])
        assert ok and ok["d"]["id"] == s["interaction_id"], f"member: no INTERACTION_SUCCESS for {s['nonce']}\n{self.member.summary()}"

    def app_id(self):
        return self.step("index")["app_id"]

    def public(self, s, type_, command_type=None, name=None):
        """The one message of the interaction in the member's history, as Discord shows it."""
        assert len(s["history"]) == 1, f"history for interaction {s['interaction_id']}: {s['history']}"
        m = s["history"][0]
        app = self.app_id()
        assert (m["author"], m["application_id"], m["webhook_id"]) == (self.world.bot_id, app, app), m
        assert m["type"] == type_, m
        assert (m["meta"]["id"], m["meta"]["user"]) == (s["interaction_id"], self.world.member_id), m
        assert m["meta"]["type"] == s["itype"], m
        if command_type is not None:
            assert (m["meta"]["command_type"], m["meta"]["name"]) == (command_type, name), m
        assert not m["flags"] & (EPHEMERAL | LOADING), m
        return m


@pytest.fixture(scope="module", params=["dpy", "djs"])
def run(request, world, sessions):
    member, member2 = sessions
    ready = member.wait_for(lambda f: f.get("t") == "READY", 5)
    session = ready["d"].get("session_id") if ready else None
    if request.param == "dpy":
        r = run_dpy(world, "dpy_interactions.py", timeout=200, member_session=session)
    else:
        r = run_djs(world, "djs_interactions.js", timeout=200, member_session=session)
    return Run(request.param, r, world, member, member2)


def test_sync_and_command_index(run):
    synced = run.step("synced")
    assert synced["names"] == NAMES
    assert (synced["types"]["Greet"], synced["types"]["Quote"], synced["types"]["echo"]) == (2, 3, 1)
    idx = run.step("index")
    assert idx["status"] == 200, idx
    assert idx["app_id"] and idx["app_id"] == idx["client_app_id"], idx
    # The guild's index: its commands, and the global one allowed in guilds too.
    assert idx["names"] == sorted(NAMES + ["dmping"]) and idx["versions"] is True and idx["version"] is True, idx


def test_slash_command_options(run):
    s = run.handled("echo")
    assert (s["itype"], s["guild"], s["channel"], s["command"]) == (2, run.world.guild, run.world.channel, "echo"), s
    assert (s["text"], s["count"]) == ("hi there", 3), s
    assert (s["who"], s["who_kind"]) == (run.world.member2_id, MEMBER_CLASS[run.lib]), s
    assert (s["where"], s["where_kind"]) == (run.world.channel, "TextChannel"), s
    assert s["permissions"] and s["app_permissions"], s
    m = run.public(s, 20, command_type=1, name="echo")
    assert m["content"] == f"{run.lib} echo: hi there x3" and m["id"] == s["message_id"], m
    run.acknowledged(s)
    # member2 took no part in any interaction: none of the invoker's events reach it.
    for t in ("INTERACTION_CREATE", "INTERACTION_SUCCESS", "INTERACTION_MODAL_CREATE", "APPLICATION_COMMAND_AUTOCOMPLETE_RESPONSE"):
        assert not run.member2.dispatches(t), t


def test_subcommand_group_ephemeral_reply(run):
    s = run.handled("color")
    assert (s["value"], s["command"]) == ("teal", "cfg set color"), s
    assert s["ephemeral"] is True and s["content"] == f"{run.lib} colour set to teal", s
    assert s["history"] == [], f"an ephemeral answer is in the history: {s['history']}"
    run.acknowledged(s)
    mine = run.member.wait_for(lambda f: f.get("t") == "MESSAGE_CREATE" and f["d"]["id"] == s["message_id"], 10)
    assert mine and mine["d"]["flags"] & EPHEMERAL, f"the invoker did not get the ephemeral message\n{run.member.summary()}"
    assert mine["d"]["interaction_metadata"]["id"] == s["interaction_id"], mine
    # member2 got the public answer that came after it, and never the ephemeral one.
    later = run.step("fruit")["history"]
    assert later, "no public answer after the ephemeral one"
    assert run.member2.wait_for(lambda f: f.get("t") == "MESSAGE_CREATE" and f["d"]["id"] == later[0]["id"], 10), "member2: no public answer"
    assert not [f for f in run.member2.dispatches("MESSAGE_CREATE") if f["d"]["id"] == s["message_id"]], "member2 got the ephemeral message"


def test_autocomplete(run):
    s = run.handled("fruit_autocomplete")
    assert (s["itype"], s["current"], s["choices"]) == (4, "ap", ["apple", "apricot"]), s
    got = run.gateway("APPLICATION_COMMAND_AUTOCOMPLETE_RESPONSE", s["nonce"])
    assert got, f"member: no autocomplete choices for nonce {s['nonce']}\n{run.member.summary()}"
    assert [c["value"] for c in got["d"]["choices"]] == ["apple", "apricot"], got
    assert got["d"]["application_id"] == run.app_id(), got
    f = run.handled("fruit")
    assert f["fruit"] == "apricot", f
    assert run.public(f, 20, command_type=1, name="fruit")["content"] == f"{run.lib} fruit: apricot"
    run.acknowledged(f)


def test_button_and_select(run):
    p = run.handled("panel")
    assert p["components"] == [["panel:ok"], ["panel:fruit"]], p
    assert p["message_id"] == p["callback_message_id"], p
    pm = run.public(p, 20, command_type=1, name="panel")
    assert pm["id"] == p["message_id"] and pm["components"] == 2, pm

    b = run.handled("button")
    assert (b["itype"], b["custom_id"], b["message"], b["response_type"]) == (3, "panel:ok", p["message_id"], 6), b
    bm = run.public(b, bm_type(run, b))
    assert bm["content"] == f"{run.lib} button pressed" and bm["id"] == b["followup_id"], bm
    run.acknowledged(b)

    s = run.handled("select")
    assert (s["itype"], s["custom_id"], s["values"], s["message"]) == (3, "panel:fruit", ["pear"], p["message_id"]), s
    sm = run.public(s, bm_type(run, s))
    assert sm["content"] == f"{run.lib} picked pear", sm
    run.acknowledged(s)


def bm_type(run, s):
    """The type of a component's answer: whatever the server gave it, checked
    to be one Discord uses for it (0 DEFAULT or 19 REPLY), not a command's."""
    t = s["history"][0]["type"] if s["history"] else None
    assert t in (0, 19), f"a component's answer has type {t}"
    return t


def test_modal(run):
    s = run.handled("form")
    shown = run.gateway("INTERACTION_MODAL_CREATE", s["nonce"])
    assert shown, f"member: no INTERACTION_MODAL_CREATE for nonce {s['nonce']}\n{run.member.summary()}"
    d = shown["d"]
    assert (d["id"], d["custom_id"], d["title"], d["channel_id"]) == (s["interaction_id"], "form", "Who are you", run.world.channel), d
    assert "name" in custom_ids(d["components"]), d
    assert d["application"]["id"] == run.app_id(), d
    run.acknowledged(s)

    name = {"dpy": "Ann", "djs": "Bob"}[run.lib]
    sub = run.handled("form_submit")
    assert (sub["itype"], sub["custom_id"], sub["value"]) == (5, "form", name), sub
    m = run.public(sub, bm_type(run, sub))
    assert m["content"] == f"{run.lib} thanks {name}", m
    run.acknowledged(sub)


def custom_ids(components):
    out = []
    for c in components or []:
        if c.get("custom_id"):
            out.append(c["custom_id"])
        out += custom_ids(c.get("components"))
        if c.get("component"):
            out += custom_ids([c["component"]])
    return out


def test_defer_followup_and_edit(run):
    s = run.handled("slow")
    assert s["response_type"] == 5, s
    # The first followup after a deferred answer replaces the "thinking" message.
    assert s["followup_id"] == s["edited_id"], s
    assert s["followup_content"] == f"{run.lib} slow done", s
    assert (s["edited_content"], s["edited_loading"]) == (f"{run.lib} slow done (edited)", False), s
    m = run.public(s, 20, command_type=1, name="slow")
    assert (m["id"], m["content"]) == (s["followup_id"], f"{run.lib} slow done (edited)"), m
    run.acknowledged(s)


def test_user_context_menu(run):
    s = run.handled("greet")
    assert (s["itype"], s["target"], s["target_id"], s["target_kind"]) == (2, run.world.member2_id, run.world.member2_id, MEMBER_CLASS[run.lib]), s
    m = run.public(s, 23, command_type=2, name="Greet")
    assert m["content"].startswith(f"{run.lib} hello "), m
    run.acknowledged(s)


def test_message_context_menu(run):
    s = run.handled("quote")
    assert (s["target"], s["target_id"]) == (s["target_message"], s["target_message"]), s
    assert (s["content"], s["author"]) == (f"quote me, {LIB[run.lib]}", run.world.member_id), s
    m = run.public(s, 23, command_type=3, name="Quote")
    assert m["content"] == f"{run.lib} quoting: quote me, {LIB[run.lib]}", m
    run.acknowledged(s)


def test_command_in_a_dm_with_the_bot(run):
    synced = run.step("synced_global")
    assert synced["names"] == ["dmping"], synced
    s = run.step("dmping")
    assert s["index"] == ["dmping"], f"the DM's index offers the bot's DM commands only: {s}"
    s = run.handled("dmping")
    assert (s["itype"], s["channel"], s["in_guild"]) == (2, s["dm"], False), s
    assert s["guild"] in (None, "None"), s
    if run.lib == "dpy":
        assert (s["bot_dm"], s["channel_kind"], s["user_kind"]) == (True, "DMChannel", "User"), s
    else:
        # discord.js keeps no uncached DM channel without Partials.Channel (as on Discord).
        assert (s["context"], s["user_kind"], s["member"]) == (1, "User", None), s
    m = run.public(s, 20, command_type=1, name="dmping")
    assert m["content"] == f"{run.lib} dm pong" and m["id"] == s["message_id"], m


def test_no_library_errors(run):
    run.r.assert_ok()
