// Server management: the roles editor changes what a member may do (the
// send box goes when @everyone loses Send Messages and comes back with a
// role created in the editor that has it), and a ban with a reason removes
// the member live.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();

test("roles made in the editor change who may send; a ban removes the member live", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Moderated");

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b]) await p.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  await b.getByLabel("Message", { exact: true }).waitFor();

  // Alice takes Send Messages from @everyone.
  await a.getByRole("button", { name: "Server settings" }).click();
  const dlg = a.getByRole("dialog", { name: "Server settings" });
  await dlg.getByRole("tab", { name: "Roles" }).click();
  await dlg.getByRole("option", { name: "@everyone" }).click();
  await dlg.getByRole("form", { name: "Edit @everyone" }).waitFor();
  await dlg.getByLabel("Send Messages", { exact: true }).uncheck();
  await dlg.getByRole("button", { name: "Save changes" }).click();
  await dlg.getByRole("status").filter({ hasText: "Saved @everyone." }).waitFor();
  // Bob's send box goes, live; a note says why.
  await b.getByText("You do not have permission to send messages in this channel.").waitFor();
  assert.equal(await b.locator("#composer").isHidden(), true);
  await shot(b, "no-send");

  // A new role with Send Messages, given to Bob: his box comes back.
  await dlg.getByRole("button", { name: "Create role" }).click();
  await dlg.getByRole("form", { name: "Edit new role" }).waitFor();
  await dlg.getByLabel("Role name").fill("Speakers");
  await dlg.getByLabel("Send Messages", { exact: true }).check();
  await dlg.getByRole("button", { name: "Save changes" }).click();
  await dlg.getByRole("status").filter({ hasText: "Saved Speakers." }).waitFor();
  await dlg.getByRole("option", { name: "Speakers" }).waitFor();
  await shot(a, "roles-editor");
  await dlg.getByRole("tab", { name: "Members" }).click();
  await dlg.getByRole("group", { name: "Roles of bob" }).getByLabel("Speakers").check();
  await dlg.getByRole("status").filter({ hasText: "Speakers given to bob." }).waitFor();
  await b.locator("#composer:not([hidden])").waitFor();
  await b.getByLabel("Message", { exact: true }).fill("I may speak again");
  await b.getByLabel("Message", { exact: true }).press("Enter");
  await a.locator("#messages .content", { hasText: "I may speak again" }).waitFor();

  // Alice bans Bob with a reason: his client loses the server at once,
  // Alice's member list loses him.
  const row = dlg.getByRole("listitem", { name: "bob" });
  await row.getByRole("button", { name: "Ban" }).click();
  await row.getByLabel("Reason to ban bob").fill("spamming the channel");
  await shot(a, "ban");
  await row.getByRole("button", { name: "Confirm ban" }).click();
  await dlg.getByRole("status").filter({ hasText: "bob banned." }).waitFor();
  await b.getByRole("button", { name: /^Moderated/ }).waitFor({ state: "detached" });
  await dlg.getByRole("list", { name: "Bans" }).getByText("spamming the channel").waitFor();
  const bans = await rest(base, "GET", `/guilds/${g.id}/bans`, alice.token);
  assert.deepEqual(bans.map((x) => [x.user.id, x.reason]), [[bob.id, "spamming the channel"]]);
  await dlg.getByRole("button", { name: "Close settings" }).click();
  await a.waitForFunction((id) => !document.querySelector(`.mrow.member[data-user-id="${id}"]`), bob.id);
});

test("a member's name shows in their highest coloured role's colour, in the member list and on their messages", async () => {
  const base = env.server.url;
  const { alice: gina, bob: hal, g, general } = await twoInAGuild(base, "Colours", ["gina", "hal"]);
  const gold = await rest(base, "POST", `/guilds/${g.id}/roles`, gina.token, { name: "Gold", color: 0xf1c40f, hoist: true });
  const plain = await rest(base, "POST", `/guilds/${g.id}/roles`, gina.token, { name: "Plain" });
  for (const r of [gold, plain]) await rest(base, "PUT", `/guilds/${g.id}/members/${hal.id}/roles/${r.id}`, gina.token);
  const m = await rest(base, "POST", `/channels/${general.id}/messages`, hal.token, { content: "shiny" });
  const { page } = await pageAs(env.browser, base, gina.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  const row = page.locator(`#members .mrow.member[data-user-id="${hal.id}"] .mname`);
  await row.waitFor();
  assert.equal(await row.evaluate((el) => getComputedStyle(el).color), "rgb(241, 196, 15)");
  const author = page.locator(`#m-${m.id} .author`);
  await author.waitFor();
  assert.equal(await author.evaluate((el) => getComputedStyle(el).color), "rgb(241, 196, 15)");
  // Gina has no coloured role: her name keeps the default colour.
  const mine = await rest(base, "POST", `/channels/${general.id}/messages`, gina.token, { content: "plain me" });
  const own = page.locator(`#m-${mine.id} .author`);
  await own.waitFor();
  assert.notEqual(await own.evaluate((el) => getComputedStyle(el).color), "rgb(241, 196, 15)");
  await shot(page, "role-colours");
  // The role turns red: names already drawn follow, in the list and on messages.
  await rest(base, "PATCH", `/guilds/${g.id}/roles/${gold.id}`, gina.token, { color: 0xe74c3c });
  const red = "rgb(231, 76, 60)";
  await page.waitForFunction(
    ([a, r, want]) => [a, r].every((s) => { const el = document.querySelector(s); return el && getComputedStyle(el).color === want; }),
    [`#m-${m.id} .author`, `#members .mrow.member[data-user-id="${hal.id}"] .mname`, red],
  );
  // Taking the role away gives the name the default colour again.
  await rest(base, "DELETE", `/guilds/${g.id}/members/${hal.id}/roles/${gold.id}`, gina.token);
  await page.waitForFunction(([s, no]) => getComputedStyle(document.querySelector(s)).color !== no, [`#m-${m.id} .author`, red]);
});

test("a timeout from the members tab takes the member's send box away live, and removing it gives it back", async () => {
  const base = env.server.url;
  const { alice: ivy, bob: jon, g, general } = await twoInAGuild(base, "Timeouts", ["ivy", "jon"]);
  const { page: a } = await pageAs(env.browser, base, ivy.token);
  const { page: b } = await pageAs(env.browser, base, jon.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await b.getByLabel("Message", { exact: true }).waitFor();

  await a.getByRole("button", { name: "Server settings" }).click();
  const dlg = a.getByRole("dialog", { name: "Server settings" });
  await dlg.getByRole("tab", { name: "Members" }).click();
  const row = dlg.getByRole("listitem", { name: "jon" });
  await row.getByLabel("Time out jon").selectOption({ label: "1 hour" });
  await dlg.getByRole("status").filter({ hasText: "jon timed out." }).waitFor();
  await row.getByText(/^Timed out until/).waitFor();
  await shot(a, "timeout-admin");

  // Jon's box goes at once, with a note saying until when.
  await b.getByText(/^You are timed out until/).waitFor();
  assert.equal(await b.locator("#composer").isHidden(), true);
  await shot(b, "timed-out");
  // The server agrees: a send is refused, reading is not, and every
  // member sees when it ends.
  await assert.rejects(rest(base, "POST", `/channels/${general.id}/messages`, jon.token, { content: "let me speak" }), /403 .*50013/);
  assert.ok(Array.isArray(await rest(base, "GET", `/channels/${general.id}/messages?limit=5`, jon.token)));
  const seen = await rest(base, "GET", `/guilds/${g.id}/members/${jon.id}`, jon.token);
  const ends = Date.parse(seen.communication_disabled_until);
  assert.ok(ends > Date.now() + 50 * 60_000 && ends <= Date.now() + 61 * 60_000, seen.communication_disabled_until);
  // The audit log names it.
  const log = await rest(base, "GET", `/guilds/${g.id}/audit-logs?action_type=24`, ivy.token);
  assert.deepEqual(log.audit_log_entries[0].changes.map((c) => c.key), ["communication_disabled_until"]);

  // Ivy removes it: Jon's box comes back and his message goes through.
  await row.getByRole("button", { name: "Remove timeout" }).click();
  await dlg.getByRole("status").filter({ hasText: "jon's timeout removed." }).waitFor();
  await b.locator("#composer:not([hidden])").waitFor();
  await b.getByLabel("Message", { exact: true }).fill("back again");
  await b.getByLabel("Message", { exact: true }).press("Enter");
  await a.locator("#messages .content", { hasText: "back again" }).waitFor();
});
