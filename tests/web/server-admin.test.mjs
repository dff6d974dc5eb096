// Server settings beyond roles and members: channels and categories
// (create, rename, topic, slow mode, category, order, delete), a channel's
// permission overwrites, the role order, the invites list with revoke, and
// the audit log — each seen by the other person, or by the server, as it
// happens.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild, png } from "./harness.mjs";

const env = serverAndBrowser();

test("channels, categories, overwrites, role order, invites and the audit log from server settings", async () => {
  const base = env.server.url;
  const { alice, bob, g } = await twoInAGuild(base, "Workshop");
  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b]) await p.locator("#channel-name").filter({ hasText: "# general" }).waitFor();

  await a.getByRole("button", { name: "Server settings" }).click();
  const dlg = a.getByRole("dialog", { name: "Server settings" });
  const status = dlg.getByRole("status");
  // The server's icon, picked in the overview: Bob's rail shows it, live.
  await dlg.getByLabel("Server icon (PNG, JPEG, GIF or WebP)").setInputFiles({ name: "icon.png", mimeType: "image/png", buffer: png(64, 64) });
  await status.filter({ hasText: "Icon saved." }).waitFor();
  const icon = (await rest(base, "GET", `/guilds/${g.id}`, bob.token)).icon;
  assert.match(icon, /^[0-9a-f]{32}$/);
  const rail = b.locator("#guild-list img.guild-icon");
  await rail.waitFor();
  assert.equal(await rail.getAttribute("src"), `/icons/${g.id}/${icon}.png`);
  await b.waitForFunction(() => document.querySelector("#guild-list img.guild-icon")?.naturalWidth === 64);
  await b.locator("#guild-list").getByRole("button", { name: /^Workshop/ }).waitFor();
  // Bob may not change it, and nothing of his reaches the disk.
  const denied = await fetch(`${base}/api/v10/guilds/${g.id}`, {
    method: "PATCH",
    headers: { authorization: bob.token, "content-type": "application/json" },
    body: JSON.stringify({ icon: `data:image/png;base64,${png(8, 8).toString("base64")}` }),
  });
  assert.equal(denied.status, 403);

  await dlg.getByRole("tab", { name: "Channels" }).click();
  const list = dlg.getByRole("listbox", { name: "Channels" });

  // A category, renamed.
  await dlg.getByRole("button", { name: "Create category" }).click();
  await status.filter({ hasText: "Category created." }).waitFor();
  await list.getByRole("option", { name: "NEW CATEGORY" }).waitFor();
  await dlg.getByLabel("Category name").fill("Projects");
  await dlg.getByRole("button", { name: "Save changes" }).click();
  await list.getByRole("option", { name: "PROJECTS" }).waitFor();

  // Two channels in it: plans (topic, slow mode) and alpha.
  const makeIn = async (name, topic) => {
    await dlg.getByRole("button", { name: "Create channel" }).click();
    await list.getByRole("option", { name: "# new-channel" }).and(a.locator("[aria-selected=true]")).waitFor();
    await dlg.getByLabel("Channel name").fill(name);
    if (topic) await dlg.getByLabel("Topic").fill(topic);
    if (topic) await dlg.getByLabel("Slow mode").selectOption({ label: "10 seconds" });
    await dlg.getByLabel("Category", { exact: true }).selectOption({ label: "Projects" });
    await dlg.getByRole("button", { name: "Save changes" }).click();
    await list.getByRole("option", { name: `# ${name}` }).waitFor();
  };
  await makeIn("plans", "what we build next");
  await makeIn("alpha");
  const chans = await rest(base, "GET", `/guilds/${g.id}/channels`, alice.token);
  const plans = chans.find((c) => c.name === "plans");
  const alpha = chans.find((c) => c.name === "alpha");
  const projects = chans.find((c) => c.name === "Projects");
  assert.deepEqual([plans.topic, plans.rate_limit_per_user, plans.parent_id, projects.type], ["what we build next", 10, projects.id, 4]);

  // Bob's sidebar: general, then the category's heading and its channels.
  const sidebar = () => b.evaluate(() => [...document.querySelectorAll("#channel-list li")].map((li) => li.querySelector(".category-name")?.textContent ?? li.querySelector(".channel [aria-hidden]")?.textContent));
  await b.waitForFunction(() => document.querySelectorAll("#channel-list .channel").length === 3);
  assert.deepEqual(await sidebar(), ["# general", "Projects", "# plans", "# alpha"]);

  // alpha moves above plans.
  await list.getByRole("option", { name: "# alpha" }).click();
  await dlg.getByRole("button", { name: "Move up" }).click();
  await status.filter({ hasText: "Moved alpha up." }).waitFor();
  await b.waitForFunction(
    (want) => [...document.querySelectorAll("#channel-list li")].map((li) => li.querySelector(".category-name, .channel [aria-hidden]")?.textContent).join("|") === want,
    ["# general", "Projects", "# alpha", "# plans"].join("|"),
  );

  // Bob opens #plans: its topic; he may write.
  await b.locator("#channel-list .channel", { hasText: "plans" }).click();
  await b.locator("#channel-topic").filter({ hasText: "what we build next" }).waitFor();
  assert.equal(await b.locator("#composer").isVisible(), true);

  // @everyone may not send in #plans: Bob's composer gives way there only.
  await list.getByRole("option", { name: "# plans" }).click();
  await dlg.getByLabel("Add a role to this channel's permissions").selectOption({ label: "@everyone" });
  const sendDeny = dlg.getByRole("radio", { name: "Send Messages: Deny" });
  await sendDeny.check();
  await shot(a, "settings-channels");
  await dlg.getByRole("button", { name: "Save permissions" }).click();
  await status.filter({ hasText: "Saved @everyone in plans." }).waitFor();
  await b.locator("#no-send").waitFor();
  assert.equal(await b.locator("#composer").isVisible(), false);
  await b.locator("#channel-list .channel", { hasText: "general" }).click();
  await b.locator("#composer").waitFor();
  const ow = (await rest(base, "GET", `/channels/${plans.id}`, alice.token)).permission_overwrites;
  assert.deepEqual(ow, [{ id: g.id, type: 0, allow: "0", deny: String(1 << 11) }]);

  // alpha is deleted (asked twice): gone from Bob's sidebar.
  await list.getByRole("option", { name: "# alpha" }).click();
  await dlg.getByRole("button", { name: "Delete channel" }).click();
  await dlg.getByRole("button", { name: "Really delete #alpha?" }).click();
  await status.filter({ hasText: "Deleted alpha." }).waitFor();
  await b.waitForFunction(() => ![...document.querySelectorAll("#channel-list .channel")].some((e) => e.textContent.includes("alpha")));
  assert.equal((await rest(base, "GET", `/guilds/${g.id}/channels`, bob.token)).some((c) => c.id === alpha.id), false);

  // Roles: two made, the lower one moved above the other.
  await dlg.getByRole("tab", { name: "Roles" }).click();
  for (const name of ["crew", "lead"]) {
    await dlg.getByRole("button", { name: "Create role" }).click();
    await dlg.getByLabel("Role name").fill(name);
    await dlg.getByRole("button", { name: "Save changes" }).click();
    await status.filter({ hasText: `Saved ${name}.` }).waitFor();
  }
  const order = async () => (await rest(base, "GET", `/guilds/${g.id}/roles`, alice.token)).filter((r) => r.id !== g.id).sort((x, y) => y.position - x.position).map((r) => r.name);
  const before = await order();
  const low = before[before.length - 1];
  await dlg.getByRole("listbox", { name: "Roles" }).getByRole("option", { name: low, exact: true }).click();
  await dlg.getByRole("button", { name: "Move up" }).click();
  await status.filter({ hasText: `Moved ${low} up.` }).waitFor();
  const after = await order();
  assert.deepEqual(after, [...before.slice(0, -2), low, before[before.length - 2]]);

  // Invites: the one Bob came by (1 use), revoked.
  await dlg.getByRole("tab", { name: "Invites" }).click();
  const invites = dlg.getByRole("list", { name: "Invites" });
  await invites.waitFor();
  const rows = invites.locator(".invite-row");
  assert.equal(await rows.count(), 1);
  const code = await rows.first().getAttribute("data-code");
  assert.match(await rows.first().textContent(), /#general by alice · 1 uses/);
  await shot(a, "settings-invites");
  await dlg.getByRole("button", { name: `Revoke invite ${code}` }).click();
  await dlg.getByText("No live invites.").waitFor();
  await assert.rejects(rest(base, "GET", `/invites/${code}`), /404/);

  // The audit log says all of it, newest first.
  await dlg.getByRole("tab", { name: "Audit log" }).click();
  const log = dlg.getByRole("list", { name: "Audit log" });
  await log.waitFor();
  const lines = (await log.locator(".audit-entry > span:first-child").allTextContents()).map((t) => t.trim());
  assert.equal(lines[0], `alice revoked the invite ${code}`);
  for (const want of ["alice created the channel #plans", "alice deleted the channel #alpha", "alice set permissions in #plans", "alice created the role crew"])
    assert.ok(lines.includes(want), `${want} in ${JSON.stringify(lines)}`);
  await shot(a, "settings-audit");
});
