// Two people in two browser contexts: register through the page, one
// creates a guild, a channel and an invite, the other joins through the
// link; they chat both ways, edit and delete, see typing, presence and
// unread markers, scroll back through history, and log out.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, stats, watchCsp } from "./harness.mjs";

const env = serverAndBrowser();

async function registerInPage(page, name) {
  await page.goto(env.server.url);
  await page.getByLabel("Username").fill(name);
  await page.getByLabel("Password").fill("correct horse battery");
  await page.getByRole("button", { name: "Register" }).click();
  await page.locator("#me-name").filter({ hasText: name }).waitFor();
  return page.evaluate(() => localStorage.getItem("throng.token"));
}

const messageTexts = (page) => page.locator("#messages .message .content").allTextContents();

test("two people register, meet through an invite and chat", async () => {
  const ca = await env.browser.newContext();
  const cb = await env.browser.newContext();
  const [cspA, cspB] = [await watchCsp(ca), await watchCsp(cb)];
  const a = await ca.newPage();
  const b = await cb.newPage();
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));

  // The page at / is the client, served by the server itself.
  const index = await fetch(env.server.url + "/");
  assert.equal(index.status, 200);
  assert.match(index.headers.get("content-type"), /text\/html/);
  await a.goto(env.server.url);
  await a.getByRole("heading", { name: "Welcome to throng" }).waitFor();
  await shot(a, "01-login");

  const tokenA = await registerInPage(a, "alice");
  const tokenB = await registerInPage(b, "bob");
  assert.ok(tokenA && tokenB && tokenA !== tokenB);

  // Alice creates a guild through the dialog.
  await a.getByRole("button", { name: "Create a server" }).click();
  await a.getByLabel("Server name").fill("Tea Party");
  await a.getByRole("button", { name: "OK" }).click();
  await a.locator("#guild-name").filter({ hasText: "Tea Party" }).waitFor();
  await a.locator("#channel-name").filter({ hasText: "# general" }).waitFor();

  // ... a second channel ...
  await a.getByRole("button", { name: "New channel" }).click();
  await a.getByLabel("Channel name").fill("random");
  await a.getByRole("button", { name: "OK" }).click();
  await a.locator("#channel-name").filter({ hasText: "# random" }).waitFor();
  await a.locator("#channel-list a", { hasText: "general" }).click();
  await a.locator("#channel-name").filter({ hasText: "# general" }).waitFor();

  // ... and an invite link.
  await a.getByRole("button", { name: "Invite people" }).click();
  const link = await a.getByLabel("Share this link").inputValue();
  assert.match(link, new RegExp(`^${env.server.url}/#/invite/[A-Za-z0-9]+$`));
  await shot(a, "02-invite");
  await a.getByRole("button", { name: "Close" }).click();

  // Bob opens the link and accepts.
  await b.goto(link);
  await b.getByRole("heading", { name: "Accept the invite?" }).waitFor();
  await b.getByRole("button", { name: "OK" }).click();
  await b.locator("#guild-name").filter({ hasText: "Tea Party" }).waitFor();
  await b.locator("#channel-name").filter({ hasText: "# general" }).waitFor();

  // Presence: each sees the other online in the member list.
  const row = (page, id, status) => page.locator(`#members .mrow.member.${status}[data-user-id="${id}"]`);
  const idA = await a.evaluate(() => fetch("/api/v10/users/@me", { headers: { authorization: localStorage.getItem("throng.token") } }).then((r) => r.json()).then((u) => u.id));
  const idB = await b.evaluate(() => fetch("/api/v10/users/@me", { headers: { authorization: localStorage.getItem("throng.token") } }).then((r) => r.json()).then((u) => u.id));
  await row(a, idB, "online").waitFor();
  await row(b, idA, "online").waitFor();
  assert.equal(await a.locator("#members-head").textContent(), "Members — 2 (2 online)");

  // Typing: Bob types, Alice sees it.
  await b.getByLabel("Message", { exact: true }).pressSequentially("hel");
  await a.locator("#typing").filter({ hasText: "bob is typing…" }).waitFor();
  await shot(a, "03-typing");
  await b.getByLabel("Message", { exact: true }).fill("hello alice");
  await b.getByLabel("Message", { exact: true }).press("Enter");
  await a.locator("#messages .content", { hasText: "hello alice" }).waitFor();
  // Sending clears the indicator.
  await a.locator("#typing").filter({ hasText: /^$/ }).waitFor();

  // And back.
  await a.getByLabel("Message", { exact: true }).fill("hi bob, welcome");
  await a.getByRole("button", { name: "Send" }).click();
  await b.locator("#messages .content", { hasText: "hi bob, welcome" }).waitFor();
  assert.deepEqual(await messageTexts(b), ["hello alice", "hi bob, welcome"]);
  assert.deepEqual(await messageTexts(a), ["hello alice", "hi bob, welcome"]);
  await b.getByLabel("Message", { exact: true }).pressSequentially("nice to");
  await a.locator("#typing").filter({ hasText: "bob is typing…" }).waitFor();
  // Presence dots beside authors follow too.
  await a.locator(`.message .author[data-uid="${idB}"] .dot.online`).waitFor();
  await b.locator(`.message .author[data-uid="${idA}"] .dot.online`).waitFor();
  await shot(a, "04-conversation");
  await b.getByLabel("Message", { exact: true }).fill("");

  // Edit: Alice changes her message; Bob sees the new text marked edited.
  const mine = a.locator(".message", { hasText: "hi bob, welcome" });
  await mine.hover();
  await mine.getByRole("button", { name: "Edit message" }).click();
  const box = a.getByLabel("Edit message (Enter saves, Escape cancels)");
  await box.fill("hi bob, welcome to the party");
  await box.press("Enter");
  await b.locator(".message", { hasText: "hi bob, welcome to the party" }).locator(".edited").waitFor();
  // Bob cannot edit Alice's message: no edit or delete button on it (he may react).
  const hers = b.locator(".message", { hasText: "welcome to the party" });
  assert.equal(await hers.locator("button.edit, button.delete").count(), 0);
  assert.equal(await hers.locator("button.react").count(), 1);

  // Delete: Bob deletes his; it disappears for both.
  const his = b.locator(".message", { hasText: "hello alice" });
  await his.hover();
  await his.getByRole("button", { name: "Delete message" }).click();
  await a.locator(".message", { hasText: "hello alice" }).waitFor({ state: "detached" });
  assert.deepEqual(await messageTexts(a), ["hi bob, welcome to the party"]);
  assert.deepEqual(await messageTexts(b), ["hi bob, welcome to the party"]);
  await shot(b, "05-after-edit-delete");

  // Unread: Alice writes in #random while Bob reads #general.
  const random = b.locator("#channel-list a", { hasText: "random" });
  assert.equal(await random.getAttribute("class"), "channel");
  await a.locator("#channel-list a", { hasText: "random" }).click();
  await a.getByLabel("Message", { exact: true }).fill("over here");
  await a.getByLabel("Message", { exact: true }).press("Enter");
  await b.locator("#channel-list a.channel.unread", { hasText: "random" }).waitFor();
  // What a screen reader hears: the name and the mark.
  assert.equal(await b.locator("#channel-list").getByRole("link", { name: "random, unread messages", exact: true }).count(), 1);
  assert.equal(await b.locator("#guild-list").getByRole("button", { name: "Tea Party, unread messages", exact: true }).count(), 1);
  await shot(b, "05-unread");
  await random.click();
  await b.locator("#messages .content", { hasText: "over here" }).waitFor();
  await b.locator("#channel-list a.channel:not(.unread)", { hasText: "random" }).waitFor();
  await b.locator("#guild-list").getByRole("button", { name: "Tea Party", exact: true }).waitFor();
  // The read marker survives a reload.
  await b.reload();
  await b.locator("#channel-list a", { hasText: "random" }).waitFor();
  assert.equal(await b.locator("#channel-list a.unread").count(), 0);

  // Scroll-back: 130 older messages; the newest page shows, older pages load on scrolling up.
  const gid = await a.evaluate(() => window.__throng.guild());
  const chans = await rest(env.server.url, "GET", `/guilds/${gid}/channels`, tokenA);
  const history = chans.find((c) => c.name === "general");
  const hist = await rest(env.server.url, "POST", `/guilds/${gid}/channels`, tokenA, { name: "history", type: 0 });
  for (let i = 0; i < 130; i++) await rest(env.server.url, "POST", `/channels/${hist.id}/messages`, tokenA, { content: `old ${i}` });
  await b.locator("#channel-list a", { hasText: "history" }).click();
  await b.locator("#messages .content", { hasText: "old 129" }).waitFor();
  assert.equal(await b.locator("#messages .message").count(), 50);
  for (let i = 0; i < 20 && (await b.locator("#messages .content", { hasText: /^old 0$/ }).count()) === 0; i++) {
    await b.locator("#messages").evaluate((el) => (el.scrollTop = 0));
    await b.waitForTimeout(300);
  }
  const texts = await messageTexts(b);
  assert.equal(texts.length, 130);
  assert.deepEqual(texts, Array.from({ length: 130 }, (_, i) => `old ${i}`));
  assert.ok(history, "general channel listed");

  await b.getByLabel("Message", { exact: true }).fill("bye for now");
  await b.getByLabel("Message", { exact: true }).press("Enter");
  await a.locator("#channel-list a", { hasText: "history" }).click();
  await a.locator(`.message .author[data-uid="${idB}"] .dot.online`).waitFor();

  // Logging out ends the session: Alice sees Bob go offline; Bob sees the login form.
  await b.getByRole("button", { name: "Log out" }).click();
  await b.getByRole("heading", { name: "Welcome to throng" }).waitFor();
  assert.equal(await b.evaluate(() => localStorage.getItem("throng.token")), null);
  await row(a, idB, "offline").waitFor();
  await a.locator(`.message .author[data-uid="${idB}"] .dot.offline`).first().waitFor();
  await a.locator("#members-head").filter({ hasText: "(1 online)" }).waitFor();

  // Logging in again works with the password.
  await b.getByLabel("Username").fill("bob");
  await b.getByLabel("Password").fill("wrong password");
  await b.getByRole("button", { name: "Log in" }).click();
  await b.locator("#auth-error").filter({ hasText: "Login or password is invalid." }).waitFor();
  await b.getByLabel("Password").fill("correct horse battery");
  await b.getByRole("button", { name: "Log in" }).click();
  await b.locator("#guild-name").filter({ hasText: "Tea Party" }).waitFor();
  await row(a, idB, "online").waitFor();
  const s = await stats(a);
  assert.equal(s.state, "ready");
  assert.equal(s.identifies, 1);
  // All of it under the page's Content-Security-Policy, which refused nothing.
  assert.deepEqual(await cspA.check(a), { events: [], messages: [] });
  assert.deepEqual(await cspB.check(b), { events: [], messages: [] });
  await ca.close();
  await cb.close();
});

test("phone width: one pane at a time, navigation behind a button", async () => {
  const { token } = await rest(env.server.url, "POST", "/auth/register", null, { username: "phone", password: "correct horse" });
  const g = await rest(env.server.url, "POST", "/guilds", token, { name: "Pocket" });
  const ctx = await env.browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  await ctx.addInitScript((t) => localStorage.setItem("throng.token", t), token);
  const p = await ctx.newPage();
  await p.goto(env.server.url);
  await p.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  const nav = p.getByRole("navigation", { name: "Servers" });
  // The server rail is off screen until the menu button opens it.
  assert.ok((await nav.boundingBox()).x < 0, "navigation hidden at phone width");
  assert.equal(await p.locator("#members").isVisible(), false);
  const input = await p.getByLabel("Message", { exact: true }).boundingBox();
  assert.ok(input.width > 250 && input.x + input.width <= 390, "composer fits the screen");
  await p.getByLabel("Message", { exact: true }).fill("from my phone");
  await p.getByLabel("Message", { exact: true }).press("Enter");
  await p.locator("#messages .content", { hasText: "from my phone" }).waitFor();
  await shot(p, "06-phone-chat");
  const menu = p.getByRole("button", { name: "Servers and channels" });
  assert.equal(await menu.getAttribute("aria-expanded"), "false");
  await menu.click();
  await p.waitForFunction(() => document.querySelector(".rail").getBoundingClientRect().x >= 0);
  assert.equal(await menu.getAttribute("aria-expanded"), "true");
  await shot(p, "07-phone-nav");
  await p.keyboard.press("Escape");
  await p.waitForFunction(() => document.querySelector("#nav").getBoundingClientRect().right <= 0);
  // The member list opens over the chat and closes again.
  const membersButton = p.getByRole("button", { name: "Members", exact: true });
  assert.equal(await membersButton.getAttribute("aria-expanded"), "false");
  await membersButton.click();
  await p.locator('#members .mrow.member[data-user-id]').first().waitFor();
  const panel = await p.locator("#members").boundingBox();
  assert.ok(panel.x >= 0 && panel.x + panel.width <= 390, "member panel on screen");
  assert.equal(await membersButton.getAttribute("aria-expanded"), "true");
  await shot(p, "08-phone-members");
  await membersButton.click();
  await p.locator("#members").waitFor({ state: "hidden" });
  await membersButton.click();
  await p.locator("#members").waitFor();
  await p.keyboard.press("Escape");
  await p.locator("#members").waitFor({ state: "hidden" });
  assert.equal(await membersButton.getAttribute("aria-expanded"), "false");
  assert.ok(g.id);
  await ctx.close();
});

test("keyboard only: log in, pick a channel and send", async () => {
  await rest(env.server.url, "POST", "/auth/register", null, { username: "keys", password: "correct horse" });
  const ctx = await env.browser.newContext();
  const p = await ctx.newPage();
  await p.goto(env.server.url);
  // Focus starts in the username field; Tab moves to the password, Enter submits.
  await p.keyboard.type("keys");
  await p.keyboard.press("Tab");
  await p.keyboard.type("correct horse");
  await p.keyboard.press("Enter");
  await p.locator("#me-name").filter({ hasText: "keys" }).waitFor();
  // Create a server with the keyboard: focus the button, Enter, type, Enter.
  await p.getByRole("button", { name: "Create a server" }).focus();
  await p.keyboard.press("Enter");
  await p.keyboard.type("Keyed");
  await p.keyboard.press("Enter");
  await p.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  await p.getByLabel("Message", { exact: true }).focus();
  await p.keyboard.type("typed without a mouse");
  await p.keyboard.press("Enter");
  await p.locator("#messages .content", { hasText: "typed without a mouse" }).waitFor();
  // ArrowUp in the empty composer edits the last own message.
  await p.keyboard.press("ArrowUp");
  await p.keyboard.press("End");
  await p.keyboard.type(" (fixed)");
  await p.keyboard.press("Enter");
  await p.locator("#messages .content", { hasText: "typed without a mouse (fixed)" }).waitFor();
  // Join another server by pasting an invite code into "Join a server".
  const host = await rest(env.server.url, "POST", "/auth/register", null, { username: "host", password: "correct horse" });
  const other = await rest(env.server.url, "POST", "/guilds", host.token, { name: "Elsewhere" });
  const [oc] = await rest(env.server.url, "GET", `/guilds/${other.id}/channels`, host.token);
  const code = (await rest(env.server.url, "POST", `/channels/${oc.id}/invites`, host.token, {})).code;
  await p.getByRole("button", { name: "Join a server with an invite" }).focus();
  await p.keyboard.press("Enter");
  await p.keyboard.type(code);
  await p.keyboard.press("Enter");
  await p.locator("#guild-name").filter({ hasText: "Elsewhere" }).waitFor();
  assert.equal(await p.locator("#guild-list button").count(), 2);
  // A bad code is refused in the dialog, which stays open.
  await p.getByRole("button", { name: "Join a server with an invite" }).click();
  await p.getByLabel("Invite link or code").fill("nosuchcode");
  await p.getByRole("button", { name: "OK" }).click();
  await p.locator("#dlg-error").filter({ hasText: /Unknown Invite/i }).waitFor();
  await p.getByRole("button", { name: "Cancel" }).click();
  // Every control has an accessible name.
  const unnamed = await p.evaluate(() =>
    [...document.querySelectorAll("button, input, textarea, a[href]")]
      .filter((el) => el.offsetParent !== null)
      .filter((el) => !(el.getAttribute("aria-label") || el.textContent.trim() || (el.id && document.querySelector(`label[for="${el.id}"]`))))
      .map((el) => el.outerHTML),
  );
  assert.deepEqual(unnamed, []);
  await ctx.close();
});
