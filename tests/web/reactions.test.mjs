// Reactions: added from a message's picker, shown with their counts under
// it, pressed when they are yours, toggled by a click, live for everyone
// in the channel, and who reacted in the tooltip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, register, pageAs } from "./harness.mjs";

const env = serverAndBrowser();

test("two people react to a message and see each other's reactions live", async () => {
  const base = env.server.url;
  const alice = await register(base, "alice");
  const bob = await register(base, "bob");
  const g = await rest(base, "POST", "/guilds", alice.token, { name: "Reacts" });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, alice.token);
  const inv = await rest(base, "POST", `/channels/${general.id}/invites`, alice.token, {});
  await rest(base, "POST", `/invites/${inv.code}`, bob.token);
  const msg = await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: "party tonight?" });
  // One reaction before anyone looks: the history carries it.
  await rest(base, "PUT", `/channels/${general.id}/messages/${msg.id}/reactions/${encodeURIComponent("🎉")}/@me`, alice.token);

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  const chip = (p, e) => p.locator(`#m-${msg.id} .reaction[data-emoji="${e}"]`);
  for (const p of [a, b]) await chip(p, "🎉").waitFor();
  assert.equal(await chip(a, "🎉").getAttribute("aria-pressed"), "true");
  assert.equal(await chip(b, "🎉").getAttribute("aria-pressed"), "false");

  // Bob adds 👍 from the picker: both see it, pressed only for him.
  const line = b.locator(`#m-${msg.id}`);
  await line.hover();
  await line.getByRole("button", { name: "React", exact: true }).click();
  await b.getByRole("menu", { name: "Pick a reaction" }).getByRole("menuitem", { name: "React with 👍" }).click();
  await chip(b, "👍").filter({ hasText: "1" }).waitFor();
  await chip(a, "👍").filter({ hasText: "1" }).waitFor();
  assert.equal(await chip(b, "👍").getAttribute("aria-pressed"), "true");
  assert.equal(await chip(a, "👍").getAttribute("aria-pressed"), "false");

  // Alice clicks it: 2 for both; the tooltip names them both.
  await chip(a, "👍").click();
  await chip(a, "👍").filter({ hasText: "2" }).waitFor();
  await chip(b, "👍").filter({ hasText: "2" }).waitFor();
  await chip(b, "👍").hover();
  await b.waitForFunction((id) => document.querySelector(`#m-${id} .reaction[data-emoji="👍"]`)?.title.includes("alice"), msg.id);
  assert.match(await chip(b, "👍").getAttribute("title"), /bob.*alice|alice.*bob/);
  await shot(b, "reactions");

  // Bob takes his back: 1; the 🎉 Alice takes back goes entirely.
  await chip(b, "👍").click();
  await chip(a, "👍").filter({ hasText: "1" }).waitFor();
  await chip(a, "🎉").click();
  await chip(b, "🎉").waitFor({ state: "detached" });
  const left = await rest(base, "GET", `/channels/${general.id}/messages/${msg.id}`, alice.token);
  assert.deepEqual(left.reactions.map((r) => [r.emoji.name, r.count, r.me]), [["👍", 1, true]]);
});
