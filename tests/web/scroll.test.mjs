// Where the message list stays as it changes. The browser keeps it in place
// (CSS scroll anchoring, web/src/chunks.ts), not a script measuring it:
// reading at the newest, it stays at the bottom as messages arrive and the
// oldest leave, in a channel too short to scroll and as the composer grows;
// reading further up, a page of older messages drawn above and new ones
// arriving below leave the message in view where it was, at the very top
// of the list too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, rest, pageAs, twoInAGuild, png } from "./harness.mjs";

const env = serverAndBrowser();

/** How far the list is from its bottom, and whether message `id` is in view. */
const place = (page, id) =>
  page.evaluate((id) => {
    const ol = document.getElementById("messages");
    const r = ol.getBoundingClientRect();
    const li = id && document.getElementById(`m-${id}`)?.getBoundingClientRect();
    return { gap: ol.scrollHeight - ol.scrollTop - ol.clientHeight, inView: !!li && li.bottom <= r.bottom + 1 && li.top >= r.top - 1 };
  }, id);

/** Two animation frames, for what is drawn a frame at a time. */
const frames = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

test("reading at the newest, the list stays at the bottom: a short channel filling up, pictures, the oldest leaving, the composer growing", async () => {
  const base = env.server.url;
  const { alice, bob, general } = await twoInAGuild(base, "Followers");
  const say = (content) => rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content });
  await say("first");
  const { page } = await pageAs(env.browser, base, bob.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#messages .content", { hasText: "first" }).waitFor();

  // Too short to scroll at first; it fills up and scrolls, one at a time.
  let last;
  for (let i = 0; i < 30; i++) last = await say(`filling ${i}\nwith a second line`);
  await page.locator(`#m-${last.id}`).waitFor();
  await frames(page);
  let p = await place(page, last.id);
  assert.ok(p.gap < 2 && p.inView, `filled up: ${JSON.stringify(p)}`);

  // A picture (its size known before it loads) and more after it.
  const form = new FormData();
  form.append("payload_json", JSON.stringify({ content: "a picture" }));
  form.append("files[0]", new Blob([png(400, 300)], { type: "image/png" }), "shot.png");
  const r = await fetch(`${base}/api/v10/channels/${general.id}/messages`, { method: "POST", headers: { authorization: alice.token }, body: form });
  assert.ok(r.ok);
  for (let i = 0; i < 3; i++) last = await say(`after the picture ${i}`);
  await page.locator(`#m-${last.id}`).waitFor();
  await page.locator("#messages .attachments img").evaluate((img) => img.decode().catch(() => {}));
  await frames(page);
  p = await place(page, last.id);
  assert.ok(p.gap < 2 && p.inView, `after a picture: ${JSON.stringify(p)}`);

  // Past the 300 kept: 20 at a time, the oldest leaving as they come.
  for (let i = 0; i < 300; i += 20) {
    const batch = await Promise.all(Array.from({ length: 20 }, (_, k) => say(`busy ${i + k}`)));
    last = batch.reduce((a, b) => (BigInt(a.id) > BigInt(b.id) ? a : b));
  }
  await page.locator(`#m-${last.id}`).waitFor();
  await frames(page);
  p = await place(page, last.id);
  assert.ok(p.gap < 2 && p.inView, `busy: ${JSON.stringify(p)}`);
  assert.equal(await page.locator("#messages .message").count(), 300);

  // The composer grows with five lines: the newest stays in view above it.
  const input = page.locator("#input");
  await input.click();
  for (let i = 0; i < 5; i++) {
    await input.pressSequentially(`line ${i}`);
    await input.press("Shift+Enter");
  }
  await frames(page);
  p = await place(page, last.id);
  assert.ok(p.gap < 2 && p.inView, `composer grown: ${JSON.stringify(p)}`);
  assert.equal(await page.locator("#jump-present").isVisible(), false);
});

test("reading further up, older pages drawn above and new messages below leave the message in view where it was", async () => {
  const base = env.server.url;
  const { alice, bob, general } = await twoInAGuild(base, "Anchors", ["erin", "frank"]);
  for (let i = 0; i < 160; i++) await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: `row ${i}${i % 3 ? "" : "\nwith a second line"}` });
  const { page } = await pageAs(env.browser, base, bob.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#messages .content", { hasText: "row 159" }).waitFor();
  const drawn = () => page.locator("#messages .message").count();
  assert.equal(await drawn(), 50);

  // A message near the top of the view (not the first one drawn, which
  // loses its date line to the page above it), and where it is.
  const inView = () =>
    page.evaluate(() => {
      const ol = document.getElementById("messages");
      const top = ol.getBoundingClientRect().top;
      const li = [...ol.querySelectorAll(".message")].find((el) => el.getBoundingClientRect().top >= top + 100);
      return { id: li.id, top: li.getBoundingClientRect().top - top };
    });
  const sameAs = async (was, what) => {
    const now = await page.evaluate((id) => {
      const ol = document.getElementById("messages");
      return document.getElementById(id).getBoundingClientRect().top - ol.getBoundingClientRect().top;
    }, was.id);
    assert.ok(Math.abs(now - was.top) <= 2, `${what}: ${was.id} moved from ${was.top} to ${now}`);
  };

  // 100 px from the top: the next page loads and is drawn above.
  await page.evaluate(() => (document.getElementById("messages").scrollTop = 100));
  await frames(page);
  let was = await inView();
  await page.waitForFunction(() => document.querySelectorAll("#messages .message").length === 100);
  await frames(page);
  await sameAs(was, "a page drawn above");

  // Messages arriving below while up here: counted, and nothing moves.
  was = await inView();
  for (let i = 0; i < 3; i++) await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: `new ${i}` });
  await page.locator("#jump-present").filter({ hasText: "3 new messages below" }).waitFor();
  await frames(page);
  await sameAs(was, "new messages below");

  // At the very top (where a browser keeps no place by itself).
  await page.evaluate(() => (document.getElementById("messages").scrollTop = 0));
  await frames(page);
  was = await inView();
  await page.waitForFunction(() => document.querySelectorAll("#messages .message").length >= 153);
  await frames(page);
  await sameAs(was, "a page drawn above the very top");
});
