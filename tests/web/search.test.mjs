// Message search: typed in the header's box with Discord's filters, the
// results in a panel, and a jump to the message (older than the loaded
// page, in another channel), which lands in the address: a reload opens
// the same message again.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();

test("a search with filters finds a message and jumps to it; the deep link survives a reload", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Finds");
  const random = await rest(base, "POST", `/guilds/${g.id}/channels`, alice.token, { name: "random", type: 0 });
  // The one to find, by bob in #general, then 80 more: older than the
  // first page the channel loads. Decoys: the word by alice, and by bob
  // in #random.
  const target = await rest(base, "POST", `/channels/${general.id}/messages`, bob.token, { content: "the pineapple pizza recipe is in the pins" });
  await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: "pineapple? really?" });
  await rest(base, "POST", `/channels/${random.id}/messages`, bob.token, { content: "pineapple facts" });
  for (let i = 0; i < 80; i++) await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: `filler ${i}` });

  const { page: a } = await pageAs(env.browser, base, alice.token);
  a.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await a.locator("#messages .content", { hasText: "filler 79" }).waitFor();
  // Open #random first: the jump has to change channel.
  await a.getByRole("link", { name: "random" }).click();
  await a.locator("#channel-name").filter({ hasText: "# random" }).waitFor();

  const box = a.getByRole("searchbox", { name: "Search messages" });
  await box.fill("pineapple from:bob in:general");
  await box.press("Enter");
  const panel = a.getByRole("complementary", { name: "Search" });
  await panel.getByRole("status").filter({ hasText: "1 result" }).waitFor();
  const results = panel.getByRole("list", { name: "Search results" }).locator(".search-result");
  assert.equal(await results.count(), 1);
  assert.match(await results.first().textContent(), /#general.*bob.*the pineapple pizza recipe/);
  // Without the filters: all three.
  await box.fill("pineapple");
  await box.press("Enter");
  await panel.getByRole("status").filter({ hasText: "3 results" }).waitFor();
  await box.fill("pineapple from:bob in:general");
  await box.press("Enter");
  await panel.getByRole("status").filter({ hasText: "1 result" }).waitFor();
  await shot(a, "search");

  await panel.getByRole("button", { name: "Jump to bob's message" }).click();
  const line = a.locator(`#m-${target.id}`);
  await line.waitFor({ timeout: 15_000 });
  await a.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  const inView = () =>
    a.waitForFunction((id) => {
      const el = document.getElementById(`m-${id}`);
      const list = document.getElementById("messages");
      if (!el || !list) return false;
      const r = el.getBoundingClientRect(), box = list.getBoundingClientRect();
      return r.top >= box.top && r.bottom <= box.bottom;
    }, target.id, { timeout: 15_000 });
  await inView();
  assert.equal(new URL(a.url()).hash, `#/channels/${g.id}/${general.id}/${target.id}`);

  // The address is a deep link: a reload lands on the same message.
  await a.reload();
  await line.waitFor({ timeout: 15_000 });
  await inView();
  assert.equal(await a.locator("#channel-name").textContent(), "# general");

  // An unknown name in a filter is said, not searched.
  await box.fill("pineapple from:nobody");
  await box.press("Enter");
  await panel.getByRole("status").filter({ hasText: "No member named nobody." }).waitFor();
  await panel.getByRole("button", { name: "Close search" }).click();
  assert.equal(await panel.isVisible(), false);
});
