"""Feature scenarios with both libraries: attachments and webhooks through
each library's high-level API (upload, read back, delete; create a webhook,
execute it with and without a file, list, delete). The test checks what the
library cannot: the file is byte-identical over a Range request (urllib),
the deleted message's file is gone from disk, and the kept one is there."""

import hashlib
import urllib.request

import pytest

from feature_harness import make_world, run_dpy, run_djs


@pytest.fixture(scope="module")
def world():
    w = make_world("files", bot_owns=True)
    yield w
    w.stop()


def blob(world, sha: str):
    return world.server.data_dir / "attachments" / sha[:2] / sha


def fetch(url: str, rng: str | None = None):
    req = urllib.request.Request(url, headers={"Range": rng} if rng else {})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, r.headers, r.read()


@pytest.mark.parametrize("lib", ["dpy", "djs"])
def test_attachments_and_webhooks(world, lib):
    r = run_dpy(world, "dpy_files.py") if lib == "dpy" else run_djs(world, "djs_files.js")
    r.assert_ok()
    up = r.step("uploaded")
    assert up["read_same"] and up["size"] == 300_000 and up["filename"] == "gone.bin"
    if lib == "dpy":
        assert (up["range_status"], up["content_range"], up["range_same"]) == (206, "bytes 100-199/300000", True)
    # Deleted with its message: gone from disk, and its URL answers 404.
    assert not blob(world, up["sha"]).exists()
    with pytest.raises(urllib.error.HTTPError) as e:
        fetch(up["url"])
    assert e.value.code == 404

    kept = r.step("kept")
    assert kept["description"] == "kept file" and kept["content_type"].startswith("text/plain")
    assert blob(world, kept["sha"]).exists()
    status, headers, body = fetch(kept["url"])
    assert status == 200 and hashlib.sha256(body).hexdigest() == kept["sha"] and headers["Content-Length"] == "120000"
    status, headers, part = fetch(kept["url"], "bytes=1000-1099")
    assert (status, headers["Content-Range"], len(part)) == (206, "bytes 1000-1099/120000", 100)
    with pytest.raises(urllib.error.HTTPError) as e:
        fetch(kept["url"], "bytes=200000-")
    assert e.value.code == 416

    hook = r.step("webhook")
    assert hook["token_set"] and hook["channel_id"] == world.channel
    ex = r.step("executed")
    assert ex["webhook_id"] == hook["id"] and ex["event_webhook_id"] == hook["id"] and ex["event_id"] == ex["id"]
    assert ex["author"] == f"{lib} alias" and ex["event_author"] == f"{lib} alias" and ex["bot"] is True
    assert r.step("executed_file")["read_same"] and r.step("executed_file")["webhook_id"] == hook["id"]
    listed = r.step("listed")
    assert hook["id"] in listed["channel"] and hook["id"] in listed["guild"]
    assert hook["id"] not in r.step("webhook_deleted")["remaining"]
    # History as a raw client sees it: the webhook's messages carry webhook_id.
    _, history = world.api("GET", f"/channels/{world.channel}/messages?limit=10")
    mine = [m for m in history if m["id"] in (ex["id"], r.step("executed_file")["id"])]
    assert len(mine) == 2 and all(m["webhook_id"] == hook["id"] and m["author"]["bot"] for m in mine)
