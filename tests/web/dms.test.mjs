// Direct messages: started from a member's profile card (picture, names,
// roles, joined date), shown to the other person with an unread badge on
// the home button and in the DM list, read by opening it; a DM address
// survives a reload.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild, register } from "./harness.mjs";

const env = serverAndBrowser();

test("a DM started from a profile reaches the other person with an unread badge", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Neighbours");
  const role = await rest(base, "POST", `/guilds/${g.id}/roles`, alice.token, { name: "Helpers" });
  await rest(base, "PUT", `/guilds/${g.id}/members/${bob.id}/roles/${role.id}`, alice.token);

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b]) await p.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  const home = (p, label) => p.getByRole("button", { name: label, exact: true });
  await home(b, "Direct messages").waitFor();

  // Alice opens Bob's card from the member list: his role and joined date.
  await a.locator(`.mrow.member[data-user-id="${bob.id}"]`).click();
  const card = a.getByRole("dialog", { name: "Profile of bob" });
  await card.waitFor();
  await card.getByRole("list", { name: "Roles" }).getByText("Helpers").waitFor();
  await card.getByText(/Member of Neighbours since/).waitFor();
  assert.equal(await card.locator(".handle").textContent(), "@bob");
  await shot(a, "profile");
  await card.getByRole("button", { name: "Message" }).click();
  await a.locator("#channel-name").filter({ hasText: "@ bob" }).waitFor();
  assert.equal(await card.count(), 0, "the card closed");
  await a.locator("#input").fill("psst, a secret plan");
  await a.locator("#input").press("Enter");
  await a.locator("#messages .content", { hasText: "psst, a secret plan" }).waitFor();
  const dm = new URL(a.url()).hash.match(/^#\/channels\/@me\/(\d+)$/)?.[1];
  assert.ok(dm, `a DM address: ${a.url()}`);

  // Bob, still in #general: the home button's badge, the title.
  await home(b, "Direct messages, 1 unread").waitFor();
  assert.equal(await home(b, "Direct messages, 1 unread").locator(".badge").textContent(), "1");
  assert.equal(await b.title(), "(1) throng");
  await shot(b, "dm-badge");
  await home(b, "Direct messages, 1 unread").click();
  const entry = b.getByRole("link", { name: "alice, 1 unread" });
  await entry.waitFor();
  await entry.click();
  await b.locator("#messages .content", { hasText: "psst, a secret plan" }).waitFor();
  await home(b, "Direct messages").waitFor();
  await b.getByRole("link", { name: "alice", exact: true }).waitFor();
  assert.equal(await b.title(), "throng");

  // While Bob reads it, a reply counts nothing.
  await a.locator("#input").fill("meet at noon");
  await a.locator("#input").press("Enter");
  await b.locator("#messages .content", { hasText: "meet at noon" }).waitFor();
  await shot(b, "dm");
  assert.equal(await home(b, "Direct messages").count(), 1);

  // The DM's address survives a reload.
  assert.equal(new URL(b.url()).hash, `#/channels/@me/${dm}`);
  await b.reload();
  await b.locator("#channel-name").filter({ hasText: "@ alice" }).waitFor();
  await b.locator("#messages .content", { hasText: "meet at noon" }).waitFor();
});

test("a group DM made from the DM home reaches both others with an unread badge", async () => {
  const base = env.server.url;
  const { alice: ann, bob: ben, general } = await twoInAGuild(base, "Trio", ["ann", "ben"]);
  const cat = await register(base, "cat");
  const inv = await rest(base, "POST", `/channels/${general.id}/invites`, ann.token, {});
  await rest(base, "POST", `/invites/${inv.code}`, cat.token);
  const { page: a } = await pageAs(env.browser, base, ann.token);
  const { page: b } = await pageAs(env.browser, base, ben.token);
  const { page: c } = await pageAs(env.browser, base, cat.token);
  for (const p of [a, b, c]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b, c]) await p.locator("#channel-name").filter({ hasText: "# general" }).waitFor();

  await a.getByRole("button", { name: "Direct messages", exact: true }).click();
  await a.getByRole("button", { name: "New group DM" }).click();
  await a.getByLabel("Usernames, separated by commas").fill("nobody, ben");
  await a.getByRole("button", { name: "OK" }).click();
  await a.getByText("No one named nobody shares a server with you.").waitFor();
  await a.getByLabel("Usernames, separated by commas").fill("ben, @cat");
  await a.getByRole("button", { name: "OK" }).click();
  await a.locator("#channel-name").filter({ hasText: "👥 ben, cat" }).waitFor();
  await a.locator("#input").fill("dinner at eight?");
  await a.locator("#input").press("Enter");
  await a.locator("#messages .content", { hasText: "dinner at eight?" }).waitFor();

  for (const [p, others] of [[b, "ann, cat"], [c, "ann, ben"]]) {
    await p.getByRole("button", { name: "Direct messages, 1 unread", exact: true }).click();
    const entry = p.getByRole("link", { name: `${others}, 1 unread` });
    await entry.waitFor();
    await entry.click();
    await p.locator("#messages .content", { hasText: "dinner at eight?" }).waitFor();
  }
  await b.locator("#input").fill("yes!");
  await b.locator("#input").press("Enter");
  await c.locator("#messages .content", { hasText: "yes!" }).waitFor();
  await a.locator("#messages .content", { hasText: "yes!" }).waitFor();
  await shot(c, "group-dm");
});
