// Replies: "Reply" on a message opens the reply bar over the composer
// (Escape or × drops it); the reply goes with its message_reference, shows
// to everyone with the original's author and text above it, and a click
// there jumps to the original.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();

test("a reply shows what it answers and jumps to it", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Threaded");
  const original = await rest(base, "POST", `/channels/${general.id}/messages`, bob.token, { content: "who brought the cake?" });
  for (let i = 0; i < 30; i++) await rest(base, "POST", `/channels/${general.id}/messages`, bob.token, { content: `crumbs everywhere ${i}` });

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b]) await p.locator("#messages .content", { hasText: "crumbs everywhere 29" }).waitFor();

  const line = a.locator(`#m-${original.id}`);
  await line.hover();
  await line.getByRole("button", { name: "Reply", exact: true }).click();
  const bar = a.locator("#reply-bar");
  await bar.filter({ hasText: "Replying to bob" }).waitFor();
  // Escape drops it; Reply again.
  await a.locator("#input").press("Escape");
  await bar.waitFor({ state: "hidden" });
  await line.hover();
  await line.getByRole("button", { name: "Reply", exact: true }).click();
  await bar.filter({ hasText: "Replying to bob" }).waitFor();
  await a.locator("#input").fill("me! it was me");
  await shot(a, "reply-bar");
  await a.locator("#input").press("Enter");
  await bar.waitFor({ state: "hidden" });
  // The bar goes when the send starts; the line shows once the server has it.
  await a.locator("#messages .content", { hasText: "me! it was me" }).waitFor();

  const [reply] = await rest(base, "GET", `/channels/${general.id}/messages?limit=1`, alice.token);
  assert.equal(reply.content, "me! it was me");
  assert.equal(reply.type, 19);
  assert.equal(reply.message_reference.message_id, original.id);

  // Bob sees it with what it answers; a click there brings the original into view.
  const ref = b.locator(`#m-${reply.id} .reply-ref`);
  await ref.waitFor();
  assert.equal(await ref.getAttribute("aria-label"), "Replying to bob: who brought the cake?. Jump to it");
  await shot(b, "reply");
  await ref.click();
  await b.waitForFunction((id) => {
    const el = document.getElementById(`m-${id}`);
    const list = document.getElementById("messages").getBoundingClientRect();
    const r = el?.getBoundingClientRect();
    return !!r && r.top >= list.top && r.bottom <= list.bottom && location.hash.endsWith(`/${id}`);
  }, original.id);
});
