// Mentions: typed with the composer's autocomplete (@ a person, @ a role,
// # a channel), sent as Discord's syntax, shown to the person mentioned
// highlighted, with a mention badge on the channel and the server until
// they read it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();

test("a mention typed with autocomplete becomes <@id>, and the person mentioned sees it highlighted with a badge", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Callouts");
  const random = await rest(base, "POST", `/guilds/${g.id}/channels`, alice.token, { name: "random", type: 0 });
  const role = await rest(base, "POST", `/guilds/${g.id}/roles`, alice.token, { name: "Helpers", mentionable: true });
  await rest(base, "PUT", `/guilds/${g.id}/members/${bob.id}/roles/${role.id}`, alice.token);

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await a.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  // Bob reads #random meanwhile.
  await b.getByRole("link", { name: "random" }).click();
  await b.locator("#channel-name").filter({ hasText: "# random" }).waitFor();

  const input = a.locator("#input");
  const picker = a.getByRole("listbox", { name: "Mentions" });
  await input.click();
  await input.pressSequentially("hey @bo");
  await picker.getByRole("option", { name: /bob/ }).waitFor();
  await shot(a, "mention-picker");
  await input.press("Enter");
  assert.equal(await input.inputValue(), "hey @bob ");
  await input.pressSequentially("and @Help");
  await picker.getByRole("option", { name: /@Helpers/ }).waitFor();
  await input.press("Tab");
  await input.pressSequentially("see #ran");
  await picker.getByRole("option", { name: "#random" }).waitFor();
  await input.press("ArrowDown");
  await input.press("Enter");
  assert.equal(await input.inputValue(), "hey @bob and @Helpers see #random ");
  await input.press("Enter");
  // Stored once it comes back over the gateway.
  await a.locator("#messages .content", { hasText: "see #random" }).waitFor();

  const [sent] = await rest(base, "GET", `/channels/${general.id}/messages?limit=1`, alice.token);
  assert.equal(sent.content, `hey <@${bob.id}> and <@&${role.id}> see <#${random.id}>`);
  assert.deepEqual(sent.mentions.map((u) => u.id), [bob.id]);
  assert.deepEqual(sent.mention_roles, [role.id]);

  // Bob: a badge on #general and on the server.
  const link = b.getByRole("link", { name: "general, unread messages, 1 mention" });
  await link.waitFor();
  assert.equal(await link.locator(".badge").textContent(), "1");
  await b.getByRole("button", { name: "Callouts, unread messages, 1 mention" }).waitFor();
  // A role mention counts too.
  await rest(base, "POST", `/channels/${general.id}/messages`, alice.token, { content: `<@&${role.id}> standup in 5` });
  await b.getByRole("link", { name: "general, unread messages, 2 mentions" }).waitFor();
  await shot(b, "mention-badge");

  // He opens it: highlighted, the mention his own; the badges go.
  await b.getByRole("link", { name: "general, unread messages, 2 mentions" }).click();
  const line = b.locator(`#m-${sent.id}`);
  await line.waitFor();
  assert.match(await line.getAttribute("class"), /\bmentioned\b/);
  assert.equal(await line.locator(".mention-me").textContent(), "@bob");
  assert.match(await line.locator(".content").textContent(), /hey @bob and @Helpers see #random/);
  await b.getByRole("link", { name: "general", exact: true }).waitFor();
  await b.getByRole("button", { name: "Callouts", exact: true }).waitFor();
  await shot(b, "mentioned");
});
