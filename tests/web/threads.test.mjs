// Threads: "Thread" on a message starts one (named in a dialog) and opens
// it in the side panel; its messages go there, not into the channel; the
// other person sees the thread under the message, live, opens it and
// answers; "Threads" in the header lists the channel's threads.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();

test("a thread started from a message, written in from the panel by both, listed under Threads", async () => {
  const base = env.server.url;
  const { alice, bob, general } = await twoInAGuild(base, "Travellers");
  const starter = await rest(base, "POST", `/channels/${general.id}/messages`, bob.token, { content: "let's plan the trip" });
  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b]) await p.locator(`#m-${starter.id}`).waitFor();

  // Alice starts "Trip" from Bob's message and writes in it.
  const line = a.locator(`#m-${starter.id}`);
  await line.hover();
  await line.getByRole("button", { name: "Thread", exact: true }).click();
  await a.getByLabel("Thread name").fill("Trip");
  await a.getByRole("button", { name: "OK" }).click();
  const panelA = a.getByRole("complementary", { name: "🧵 Trip" });
  await panelA.waitFor();
  await panelA.getByLabel("Message in thread Trip").fill("day one: museum");
  await panelA.getByLabel("Message in thread Trip").press("Enter");
  await panelA.locator(".message .content", { hasText: "day one: museum" }).waitFor();

  // Bob: the thread under the message, live, with its count; not in the channel.
  const link = b.locator(`#m-${starter.id} .thread-link`);
  await link.filter({ hasText: "1 message" }).waitFor();
  assert.equal(await b.locator("#messages .content", { hasText: "day one" }).count(), 0);
  await link.click();
  const panelB = b.getByRole("complementary", { name: "🧵 Trip" });
  await panelB.locator(".message .content", { hasText: "day one: museum" }).waitFor();
  await panelB.getByLabel("Message in thread Trip").fill("sounds good");
  await panelB.getByRole("button", { name: "Send" }).click();
  // Alice sees the answer in her open panel, and the count under the message.
  await panelA.locator(".message .content", { hasText: "sounds good" }).waitFor();
  await line.locator(".thread-link").filter({ hasText: "2 messages" }).waitFor();
  await link.filter({ hasText: "2 messages" }).waitFor();
  await shot(b, "thread");

  const msgs = await rest(base, "GET", `/channels/${starter.id}/messages`, alice.token);
  assert.deepEqual(msgs.map((m) => m.content).reverse(), ["day one: museum", "sounds good"]);
  const inChannel = await rest(base, "GET", `/channels/${general.id}/messages`, alice.token);
  assert.ok(!inChannel.some((m) => m.content === "sounds good"));

  // The header's Threads: the list, and Open from it.
  await a.getByRole("button", { name: "Close threads" }).click();
  await a.getByRole("button", { name: "Threads", exact: true }).click();
  const list = a.getByRole("complementary", { name: "Threads in #general" });
  const row = list.getByRole("list", { name: "Active threads" }).locator(".thread-row");
  await row.filter({ hasText: "Trip" }).filter({ hasText: "2 messages" }).waitFor();
  await shot(a, "threads-list");
  await list.getByRole("button", { name: "Open thread Trip" }).click();
  await a.getByRole("complementary", { name: "🧵 Trip" }).locator(".message .content", { hasText: "sounds good" }).waitFor();
});
