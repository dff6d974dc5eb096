// Pins: "Pin" on a message (for those who may), the mark on it live for
// everyone, the channel's pins in a panel with a jump to each, and unpin.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();

test("a pin shows on the message for everyone and in the pins panel", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Pinboard");
  const rules = await rest(base, "POST", `/channels/${general.id}/messages`, bob.token, { content: "the rules: be kind" });
  await rest(base, "POST", `/channels/${general.id}/messages`, bob.token, { content: "and bring snacks" });

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b]) await p.locator(`#m-${rules.id}`).waitFor();

  const line = a.locator(`#m-${rules.id}`);
  await line.hover();
  await line.getByRole("button", { name: "Pin", exact: true }).click();
  await line.getByText("📌 Pinned").waitFor();
  // Bob sees the mark come, live.
  await b.locator(`#m-${rules.id}`).getByText("📌 Pinned").waitFor();
  const pins = await rest(base, "GET", `/channels/${general.id}/pins`, bob.token);
  assert.deepEqual(pins.map((m) => m.id), [rules.id]);

  await b.getByRole("button", { name: "Pins", exact: true }).click();
  const panel = b.getByRole("complementary", { name: "Pinned messages" });
  await panel.getByRole("status").filter({ hasText: "1 pinned message" }).waitFor();
  assert.match(await panel.locator(".search-result").first().textContent(), /bob.*the rules: be kind/);
  await shot(b, "pins");

  // Alice unpins: the mark goes for Bob and his open panel empties.
  await line.hover();
  await line.getByRole("button", { name: "Unpin", exact: true }).click();
  await b.locator(`#m-${rules.id}`).getByText("📌 Pinned").waitFor({ state: "detached" });
  await panel.getByRole("status").filter({ hasText: "No pinned messages" }).waitFor();
});
