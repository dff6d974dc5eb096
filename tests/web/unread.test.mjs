// Unread state comes from the server's read states: READY's `read_state`
// on load, an ack (POST /channels/{c}/messages/{m}/ack) when a channel is
// read, MESSAGE_ACK to the person's other tabs. A channel opened unread
// shows "New messages" before the first unread message; a reader far up a
// channel gets "Jump to present", with a count of what came meanwhile.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();

test("unread and mention badges come from the server's read states, and reading in one tab clears the other", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Readers");
  const random = await rest(base, "POST", `/guilds/${g.id}/channels`, alice.token, { name: "random", type: 0 });
  const post = (c, content, token = alice.token) => rest(base, "POST", `/channels/${c}/messages`, token, { content });
  await post(random.id, "old news");
  const seen = await post(random.id, "read up to here");

  // Bob reads #random on the server's side (an ack, as any client would).
  await rest(base, "POST", `/channels/${random.id}/messages/${seen.id}/ack`, bob.token, { token: null });
  const first = await post(random.id, "first since");
  await post(random.id, `second since, <@${bob.id}>`);
  await post(random.id, "third since");

  // Two tabs of Bob in separate browser contexts: no shared localStorage.
  const { page: b1 } = await pageAs(env.browser, base, bob.token);
  const { page: b2 } = await pageAs(env.browser, base, bob.token);
  for (const p of [b1, b2]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [b1, b2]) {
    await p.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
    // #random is unread with one mention; #general was never read (unread
    // too: nothing of it was acked), so it is opened and read now.
    const ch = p.locator("#channel-list .channel", { hasText: "random" });
    await ch.and(p.locator(".unread")).waitFor();
    assert.equal(await ch.locator(".badge").textContent(), "1");
  }

  // Tab 1 opens #random: the line sits right before the first unread message.
  await b1.locator("#channel-list .channel", { hasText: "random" }).click();
  await b1.locator(`#m-${first.id}`).waitFor();
  const before = await b1.evaluate((id) => document.getElementById(id).previousElementSibling?.textContent, `m-${first.id}`);
  assert.equal(before, "New messages");
  assert.equal(await b1.locator("#messages .new-line").count(), 1);
  await shot(b1, "new-messages");

  // Tab 2, which never opened it, sees it read (MESSAGE_ACK): no bar, no badge.
  const ch2 = b2.locator("#channel-list .channel", { hasText: "random" });
  await b2.waitForFunction(() => {
    const el = [...document.querySelectorAll("#channel-list .channel")].find((e) => e.textContent.includes("random"));
    return el && !el.classList.contains("unread") && !el.querySelector(".badge");
  });
  assert.equal(await ch2.locator(".badge").count(), 0);

  // A fresh context (nothing stored in the browser) agrees: the server kept it.
  const { page: b3 } = await pageAs(env.browser, base, bob.token);
  await b3.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  await b3.locator("#channel-list .channel", { hasText: "random" }).waitFor();
  assert.equal(await b3.locator("#channel-list .channel.unread", { hasText: "random" }).count(), 0);
  const kept = await b3.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith("throng.read")));
  assert.deepEqual(kept, [], "read marks are not kept in the browser");
});

test("jump to present: shown far up a channel, counting what arrives, and back at the newest on click", async () => {
  const base = env.server.url;
  const { alice, bob, general } = await twoInAGuild(base, "Scrollers", ["carol", "dave"]);
  for (let i = 0; i < 60; i++) await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: `line ${i}\nsecond row\nthird row` });

  const { page: b } = await pageAs(env.browser, base, bob.token);
  b.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await b.locator("#messages .content", { hasText: "line 59" }).waitFor();
  const bar = b.locator("#jump-present");
  assert.equal(await bar.isVisible(), false);

  // Far up: the bar says so.
  await b.evaluate(() => (document.getElementById("messages").scrollTop = 0));
  await bar.filter({ hasText: "You are viewing older messages" }).waitFor();

  // Two messages arrive meanwhile: counted, and the line marks where they start.
  const m1 = await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: "while you were up" });
  await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: "and another" });
  await bar.filter({ hasText: "2 new messages below" }).waitFor();
  const line = await b.evaluate((id) => document.getElementById(id).previousElementSibling?.textContent, `m-${m1.id}`);
  assert.equal(line, "New messages");
  await shot(b, "jump-present");

  await bar.getByRole("button", { name: "Jump to present" }).click();
  await bar.waitFor({ state: "hidden" });
  assert.ok(
    await b.evaluate(() => {
      const ol = document.getElementById("messages");
      return ol.scrollHeight - ol.scrollTop - ol.clientHeight < 40;
    }),
  );
  await b.locator("#messages .content", { hasText: "and another" }).isVisible();
});
