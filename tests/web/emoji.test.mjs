// Emojis: `:name:` completion in the composer (Unicode and the server's
// own), the composer's emoji picker with its search, and a reaction picked
// from the full picker, seen by the other person.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild, png } from "./harness.mjs";

const env = serverAndBrowser();

test("emoji completion, the emoji picker, and a reaction from the full picker", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Emotes");
  const image = `data:image/png;base64,${png(32, 32).toString("base64")}`;
  const custom = await rest(base, "POST", `/guilds/${g.id}/emojis`, alice.token, { name: "throngy", image });

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b]) await p.locator("#channel-name").filter({ hasText: "# general" }).waitFor();

  // `:thumbsu` offers :thumbsup:; Enter puts the character in.
  const input = b.getByLabel("Message", { exact: true });
  await input.pressSequentially("nice :thumbsu");
  const list = b.getByRole("listbox", { name: "Mentions" });
  await list.getByRole("option", { name: /:thumbsup:/ }).waitFor();
  await input.press("Enter");
  assert.equal(await input.inputValue(), "nice 👍 ");
  // The server's own: shown as :throngy:, sent as <:throngy:id>.
  await input.pressSequentially(":thron");
  await list.getByRole("option", { name: /:throngy:.*this server/ }).waitFor();
  await shot(b, "emoji-complete");
  await input.press("Tab");
  assert.equal(await input.inputValue(), "nice 👍 :throngy: ");

  // The picker: searched, then picked with Enter.
  await b.getByRole("button", { name: "Emoji", exact: true }).click();
  const panel = b.getByRole("dialog", { name: "Pick an emoji" });
  await panel.getByRole("gridcell", { name: ":throngy:" }).waitFor();
  await shot(b, "emoji-picker");
  await panel.getByLabel("Find an emoji").fill("tada");
  await panel.getByRole("gridcell", { name: ":tada:" }).waitFor();
  await panel.getByLabel("Find an emoji").press("Enter");
  await panel.waitFor({ state: "detached" });
  assert.equal(await input.inputValue(), "nice 👍 :throngy: 🎉");
  await input.press("Enter");
  const sent = a.locator("#messages .message", { hasText: "nice" });
  await sent.locator(`img.md-emoji[alt=":throngy:"]`).waitFor();
  const [last] = await rest(base, "GET", `/channels/${general.id}/messages?limit=1`, alice.token);
  assert.equal(last.content, `nice 👍 <:throngy:${custom.id}> 🎉`);

  // Alice reacts from the full picker (found by name); Bob sees it.
  await sent.hover();
  await sent.getByRole("button", { name: "React", exact: true }).click();
  await a.getByRole("menu", { name: "Pick a reaction" }).getByRole("menuitem", { name: "More emojis" }).click();
  const rp = a.getByRole("dialog", { name: "Pick a reaction" });
  await rp.getByLabel("Find an emoji").fill("rocket");
  await rp.getByRole("gridcell", { name: ":rocket:" }).click();
  await b.locator(`#m-${last.id} .reaction`, { hasText: "🚀" }).filter({ hasText: "1" }).waitFor();
  // And the server's own emoji as a reaction.
  await sent.hover();
  await sent.getByRole("button", { name: "React", exact: true }).click();
  await a.getByRole("menu", { name: "Pick a reaction" }).getByRole("menuitem", { name: "More emojis" }).click();
  await a.getByRole("dialog", { name: "Pick a reaction" }).getByRole("gridcell", { name: ":throngy:" }).click();
  await b.locator(`#m-${last.id} .reaction img[alt=":throngy:"]`).waitFor();
  const m = await rest(base, "GET", `/channels/${general.id}/messages/${last.id}`, bob.token);
  assert.deepEqual(m.reactions.map((r) => [r.emoji.name, r.count]).sort(), [["throngy", 1], ["🚀", 1]]);
});
