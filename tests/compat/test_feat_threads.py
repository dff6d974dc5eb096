"""Threads with both libraries through their own API: start from a message
and alone (private), talk in them, add and remove members, leave and join,
archive, list active and archived threads, delete; every change comes back
as its event and the server agrees over REST."""

import pytest

from feature_harness import make_world, run_dpy, run_djs


@pytest.fixture(scope="module")
def world():
    w = make_world("threads", bot_owns=True)
    yield w
    w.stop()


@pytest.mark.parametrize("lib", ["dpy", "djs"])
def test_threads(world, lib):
    r = run_dpy(world, "dpy_threads.py") if lib == "dpy" else run_djs(world, "djs_threads.js")
    r.assert_ok()
    name = "dpy thread" if lib == "dpy" else "djs thread"
    c = r.step("created")
    assert c["id"] == c["starter"] and c["parent"] == world.channel and c["owner"] == world.bot_id, c
    assert c["event_name"] == name and c["archive_minutes"] == 60
    assert c["type"] in ("public_thread", 11)
    assert r.step("message") == {**r.step("message"), "content": "hello thread", "in_thread": True}
    assert r.step("members")["ids"] == sorted([world.bot_id, world.member_id])
    assert r.step("members_after")["ids"] == [world.bot_id]
    assert c["id"] in r.step("active")["ids"]
    a = r.step("archived")
    assert a["archived"] is True and c["id"] in a["listed"], a
    p = r.step("private")
    assert p["type"] in ("private_thread", 12) and p["invitable"] is False
    for t in ("THREAD_CREATE", "THREAD_UPDATE", "THREAD_DELETE", "THREAD_MEMBERS_UPDATE"):
        assert r.dispatched(t) >= 1, t
    # Over REST: archived, the private one gone, the messages in the thread.
    _, thread = world.api("GET", f"/channels/{c['id']}")
    assert thread["thread_metadata"]["archived"] is True and thread["message_count"] == 1
    world.api("GET", f"/channels/{r.step('deleted')['id']}", expect=(404,))
    _, history = world.api("GET", f"/channels/{c['id']}/messages")
    assert [m["content"] for m in history] == ["hello thread"]
