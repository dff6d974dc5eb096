// The "add a bot" page: the invitation link a bot's author shares,
// /oauth2/authorize?client_id=APP&scope=bot+applications.commands&permissions=N.
// The owner of a server opens it (logging in first if need be, and coming
// back to the same address), reads what the bot asks for in words, picks
// the server and authorizes: the bot is then a member with a managed role
// carrying exactly those permissions. Someone who manages no server has
// nothing to pick. Every page runs under the CSP without a violation.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { rmSync } from "node:fs";
import { BIN, startServer, launch, shot, rest, register, tempDir, watchCsp } from "./harness.mjs";

const GUILD = "Bots & <Friends>";
// A 1x1 PNG: the bot's avatar, served by this server (img-src 'self').
const PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
let server, browser, dir, bot, owner, guild;

before(async () => {
  dir = tempDir("addbot");
  // The bot exists before the server starts, as `throng bot create` makes it.
  const out = execFileSync(BIN, ["bot", "create", "helper", "--data-dir", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const token = out.trim().split("\n").pop();
  server = await startServer({ dataDir: dir });
  browser = await launch();
  const user = await rest(server.url, "PATCH", "/users/@me", `Bot ${token}`, { avatar: PNG });
  assert.ok(user.avatar);
  bot = { token, id: user.id, name: user.global_name || user.username, avatar: user.avatar };
  owner = await register(server.url, "owner");
  guild = await rest(server.url, "POST", "/guilds", owner.token, { name: GUILD });
});
after(async () => {
  await browser?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const link = (clientId, permissions = "2048") =>
  `${server.url}/oauth2/authorize?client_id=${clientId}&scope=bot%20applications.commands&permissions=${permissions}`;

async function contextAs(token) {
  const ctx = await browser.newContext();
  const csp = await watchCsp(ctx);
  if (token) await ctx.addInitScript((t) => localStorage.setItem("throng.token", t), token);
  const page = await ctx.newPage();
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  return { ctx, csp, page };
}

test("a server's owner adds a bot through its invitation link", async () => {
  // Not logged in yet: the login form first, then back at the same address.
  const { ctx, csp, page } = await contextAs(null);
  await page.goto(link(bot.id));
  await page.locator("#auth-error").filter({ hasText: "Log in or register to add the bot." }).waitFor();
  await page.getByLabel("Username").fill("owner");
  await page.getByLabel("Password").fill("correct horse");
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("heading", { name: `Add ${bot.name} to a server` }).waitFor();
  assert.equal(page.url(), link(bot.id));
  assert.equal(await page.locator("#app").isVisible(), false, "the consent page, not the chat");
  // The bot's avatar, from this server.
  await page.waitForFunction(() => document.getElementById("consent-avatar")?.naturalWidth === 1);
  assert.equal(await page.locator("#consent-avatar").getAttribute("src"), `/avatars/${bot.id}/${bot.avatar}.png`);

  // What the bot asks for, in words: 2048 is SEND_MESSAGES.
  assert.equal(await page.locator("#consent-me").textContent(), "owner");
  const perms = await page.locator("#consent-perms li").evaluateAll((li) => li.map((l) => [l.dataset.flag, l.textContent]));
  assert.deepEqual(perms, [["SEND_MESSAGES", "Send Messages SEND_MESSAGES"]]);
  // The one server the owner manages, named as text.
  const options = await page.locator("#consent-guild option:not([disabled])").evaluateAll((os) => os.map((o) => [o.value, o.textContent]));
  assert.deepEqual(options, [[guild.id, GUILD]]);
  await page.getByLabel("Add to server").selectOption(guild.id);
  await shot(page.locator("#consent-card"), "addbot-consent");
  await page.getByRole("button", { name: "Authorize" }).click();
  await page.locator("#consent-result").filter({ hasText: `${bot.name} is now a member of ${GUILD}.` }).waitFor();
  await shot(page.locator("#consent-card"), "addbot-done");
  assert.deepEqual(await csp.check(page), { events: [], messages: [] });
  await ctx.close();

  // The server did it: the bot is a member, with a managed role of its own
  // that carries exactly the permissions asked for.
  const member = await rest(server.url, "GET", `/guilds/${guild.id}/members/${bot.id}`, owner.token);
  assert.equal(member.user.id, bot.id);
  const roles = await rest(server.url, "GET", `/guilds/${guild.id}/roles`, owner.token);
  const managed = roles.find((r) => r.managed && r.tags?.bot_id === bot.id);
  assert.ok(managed, JSON.stringify(roles));
  assert.equal(managed.permissions, "2048");
  assert.ok(member.roles.includes(managed.id));
});

test("someone who manages no server has nothing to pick", async () => {
  // A member of the owner's server, without MANAGE_GUILD there, and owner of none.
  const guest = await register(server.url, "guest");
  const [general] = await rest(server.url, "GET", `/guilds/${guild.id}/channels`, owner.token);
  const inv = await rest(server.url, "POST", `/channels/${general.id}/invites`, owner.token, {});
  await rest(server.url, "POST", `/invites/${inv.code}`, guest.token);

  const { ctx, csp, page } = await contextAs(guest.token);
  await page.goto(link(bot.id, "8"));
  await page.getByRole("heading", { name: `Add ${bot.name} to a server` }).waitFor();
  await page.locator("#consent-no-guild").waitFor();
  assert.equal(await page.locator("#consent-guild").count(), 0);
  assert.equal(await page.getByRole("button", { name: "Authorize" }).isDisabled(), true);
  // ADMINISTRATOR stands out.
  assert.deepEqual(await page.locator("#consent-perms li.danger").allTextContents(), ["Administrator ADMINISTRATOR"]);
  await shot(page.locator("#consent-card"), "addbot-no-guild");
  await page.getByRole("button", { name: "Cancel" }).click();
  await page.locator("#consent-result").filter({ hasText: `${bot.name} was not added to any server.` }).waitFor();
  assert.deepEqual(await csp.check(page), { events: [], messages: [] });
  await ctx.close();
});

test("the server's refusal is shown as it says it", async () => {
  // A manager (MANAGE_GUILD through a role) may add bots, but may not give
  // one a permission they lack themselves: ADMINISTRATOR here.
  const manager = await register(server.url, "manager");
  const [general] = await rest(server.url, "GET", `/guilds/${guild.id}/channels`, owner.token);
  const inv = await rest(server.url, "POST", `/channels/${general.id}/invites`, owner.token, {});
  await rest(server.url, "POST", `/invites/${inv.code}`, manager.token);
  const role = await rest(server.url, "POST", `/guilds/${guild.id}/roles`, owner.token, { name: "managers", permissions: "32" });
  await rest(server.url, "PUT", `/guilds/${guild.id}/members/${manager.id}/roles/${role.id}`, owner.token);

  const { ctx, csp, page } = await contextAs(manager.token);
  await page.goto(link(bot.id, "8"));
  await page.getByLabel("Add to server").selectOption(guild.id);
  await page.getByRole("button", { name: "Authorize" }).click();
  await page.locator("#consent-error").filter({ hasText: "Missing Permissions" }).waitFor();
  // Still on the page, free to try again.
  assert.equal(await page.getByRole("button", { name: "Authorize" }).isEnabled(), true);
  const roles = await rest(server.url, "GET", `/guilds/${guild.id}/roles`, owner.token);
  assert.equal(roles.filter((r) => r.managed).length, 1, "no second managed role");
  assert.deepEqual(await csp.check(page), { events: [], messages: [] });
  await ctx.close();
});

test("a link to an application that does not exist says so", async () => {
  const { ctx, csp, page } = await contextAs(owner.token);
  await page.goto(link("1234"));
  await page.locator("#consent-error").filter({ hasText: "Unknown Application" }).waitFor();
  assert.equal(await page.getByRole("button", { name: "Authorize" }).count(), 0);
  // A link without numeric permissions never reaches the server.
  await page.goto(`${server.url}/oauth2/authorize?client_id=${bot.id}&scope=bot&permissions=<b>8</b>`);
  await page.locator("#consent-error").filter({ hasText: "not a valid invitation" }).waitFor();
  // Nor does a sign-in for another application (a redirect with a code): this page only adds bots.
  await page.goto(`${server.url}/oauth2/authorize?client_id=${bot.id}&scope=identify&response_type=code&redirect_uri=https://example.com/cb`);
  await page.locator("#consent-error").filter({ hasText: "only adds bots" }).waitFor();
  assert.deepEqual(await csp.check(page), { events: [], messages: [] });
  await ctx.close();
});

test("server settings lead to the same consent page from a bot's application id", async () => {
  const { ctx, page } = await contextAs(owner.token);
  await page.goto(server.url);
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  await page.getByRole("button", { name: "Server settings" }).click();
  const dlg = page.getByRole("dialog", { name: "Server settings" });
  const field = dlg.getByLabel(/The bot's application id/);
  await field.fill("not an id");
  await dlg.getByRole("button", { name: "Continue" }).click();
  await dlg.getByRole("status").filter({ hasText: "Paste the bot's application id or its invitation link." }).waitFor();
  // An invitation link pasted whole works too; the page is the consent page.
  await field.fill(link(bot.id));
  await dlg.getByRole("button", { name: "Continue" }).click();
  await page.getByRole("heading", { name: `Add ${bot.name} to a server` }).waitFor();
  assert.match(page.url(), new RegExp(`/oauth2/authorize\\?client_id=${bot.id}&scope=bot`));
  await ctx.close();
});
