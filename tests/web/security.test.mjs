// Issue 25 in the browser. The page and its files carry a strict
// Content-Security-Policy and the page is used (register, create a server,
// chat) without a single violation; names, server and channel names,
// topics, role names and messages that look like markup show as text and
// run nothing; logging out revokes the token on the server.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, register, watchCsp } from "./harness.mjs";

const env = serverAndBrowser();

const HEADERS = {
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "cross-origin-opener-policy": "same-origin",
};

function assertPolicy(path, r) {
  const csp = r.headers.get("content-security-policy");
  assert.ok(csp, `${path}: a Content-Security-Policy`);
  assert.match(csp, /frame-ancestors 'none'/, path);
  assert.match(csp, /default-src 'none'/, path);
  assert.match(csp, /script-src 'self'(;|$)/, path);
  assert.match(csp, /style-src 'self'(;|$)/, path);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, path);
  for (const [k, v] of Object.entries(HEADERS)) assert.equal(r.headers.get(k), v, `${path}: ${k}`);
  return csp;
}

test("the page carries its policy and is used without a single violation", async () => {
  const gateway = env.server.url.replace(/^http/, "ws");
  for (const path of ["/", "/app.js", "/app.css", "/oauth2/authorize?client_id=1&scope=bot&permissions=8"]) {
    const r = await fetch(env.server.url + path);
    assert.equal(r.status, 200, path);
    const csp = assertPolicy(path, r);
    // The gateway's own origin (Config::gateway_url) is allowed to connect.
    assert.match(csp, new RegExp(`connect-src 'self' ${gateway}(;|$)`), path);
  }
  // The API reference has its own policy, as strict, without the gateway.
  for (const path of ["/api/v10/docs", "/api/v10/docs.js", "/api/v10/docs.css"]) {
    const r = await fetch(env.server.url + path);
    assert.equal(r.status, 200, path);
    assert.match(assertPolicy(path, r), /connect-src 'self'(;|$)/, path);
  }

  const ctx = await env.browser.newContext();
  const csp = await watchCsp(ctx);
  const page = await ctx.newPage();
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.goto(env.server.url);
  await page.getByLabel("Username").fill("careful");
  await page.getByLabel("Password").fill("correct horse battery");
  await page.getByRole("button", { name: "Register" }).click();
  await page.locator("#me-name").filter({ hasText: "careful" }).waitFor();
  await page.getByRole("button", { name: "Create a server" }).click();
  await page.getByLabel("Server name").fill("Walled Garden");
  await page.getByRole("button", { name: "OK" }).click();
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  await page.getByLabel("Message", { exact: true }).fill("hello under a policy");
  await page.getByLabel("Message", { exact: true }).press("Enter");
  await page.locator("#messages .content", { hasText: "hello under a policy" }).waitFor();
  // The member list places its rows through the CSSOM (allowed), not style attributes.
  const row = page.locator("#members .mrow.member").first();
  await row.waitFor();
  assert.equal(await row.evaluate((el) => el.style.top), "36px");
  assert.equal(await row.getAttribute("style"), "top: 36px;");
  // Editing builds a textarea in place.
  await page.getByLabel("Message", { exact: true }).press("ArrowUp");
  await page.getByLabel("Edit message (Enter saves, Escape cancels)").press("End");
  await page.keyboard.type(", edited");
  await page.keyboard.press("Enter");
  await page.locator("#messages .content", { hasText: "hello under a policy, edited" }).waitFor();
  // The gateway connected under the policy (connect-src).
  await page.waitForFunction(() => window.__throng.stats().state === "ready");

  const seen = await csp.check(page);
  assert.deepEqual(seen, { events: [], messages: [] }, "no CSP violation");
  await ctx.close();
});

const GUILD = `<img src=x onerror="window.__xss=1">`;
const MESSAGES = ["<script>window.__xss=2</script>", "<img src=x onerror=window.__xss=3>", "[click](javascript:window.__xss=4)", "javascript:window.__xss=5"];
// Display names are at most 32 characters: a global assignment from an inline handler.
const GLOBAL_NAME = `<img src=x onerror=__xss=6>`;
const CHANNEL = `<img src=x onerror=window.__xss=7>`;
const TOPIC = `<script>window.__xss=8</script><b>bold?</b>`;
const ROLE = `<svg onload=window.__xss=9>`;
const LINK = "https://example.com/a?b=1&c=2";

test("hostile names, topics and messages show as text and run nothing", async () => {
  const base = env.server.url;
  const mallory = (await rest(base, "POST", "/auth/register", null, { username: "mallory", password: "correct horse", global_name: GLOBAL_NAME })).token;
  const victim = await register(base, "victim");
  const g = await rest(base, "POST", "/guilds", mallory, { name: GUILD });
  const ch = await rest(base, "POST", `/guilds/${g.id}/channels`, mallory, { name: CHANNEL, type: 0 });
  await rest(base, "PATCH", `/channels/${ch.id}`, mallory, { topic: TOPIC });
  // A hoisted role gives the member list a group headed by its name.
  const me = await rest(base, "GET", "/users/@me", mallory);
  const role = await rest(base, "POST", `/guilds/${g.id}/roles`, mallory, { name: ROLE, hoist: true });
  await rest(base, "PUT", `/guilds/${g.id}/members/${me.id}/roles/${role.id}`, mallory);
  const inv = await rest(base, "POST", `/channels/${ch.id}/invites`, mallory, {});
  await rest(base, "POST", `/invites/${inv.code}`, victim.token);
  for (const content of [...MESSAGES, `see ${LINK}. now`]) await rest(base, "POST", `/channels/${ch.id}/messages`, mallory, { content });

  // Mallory is online (so her hoisted role heads a group of the member
  // list), on a page of her own that shows the same data.
  const mctx = await env.browser.newContext();
  const mcsp = await watchCsp(mctx);
  await mctx.addInitScript((t) => localStorage.setItem("throng.token", t), mallory);
  const mpage = await mctx.newPage();
  mpage.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await mpage.goto(base);
  await mpage.locator("#guild-name").filter({ hasText: GUILD }).waitFor();

  const ctx = await env.browser.newContext();
  const csp = await watchCsp(ctx);
  await ctx.addInitScript((t) => localStorage.setItem("throng.token", t), victim.token);
  const page = await ctx.newPage();
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.goto(base);
  await page.locator("#channel-list a", { hasText: CHANNEL }).click();
  await page.locator("#messages .content", { hasText: "now" }).waitFor();
  await page.locator(`#members .mrow.group[data-group="${role.id}"]`).waitFor();
  await page.locator("#members .mrow.member .mname", { hasText: GLOBAL_NAME }).waitFor();
  // Typing carries the name too.
  await rest(base, "POST", `/channels/${ch.id}/typing`, mallory);
  await page.locator("#typing").filter({ hasText: `${GLOBAL_NAME} is typing…` }).waitFor();
  await shot(page, "security-hostile");

  // Every string is there, literally, as text.
  assert.equal(await page.locator("#guild-name").textContent(), GUILD);
  assert.equal(await page.locator("#guild-list button").first().getAttribute("title"), GUILD);
  assert.equal(await page.locator("#channel-name").textContent(), `# ${CHANNEL}`);
  assert.equal(await page.locator("#channel-topic").textContent(), TOPIC);
  assert.ok((await page.locator("#channel-list").textContent()).includes(`# ${CHANNEL}`));
  const contents = await page.locator("#messages .content").allTextContents();
  assert.deepEqual(contents, [...MESSAGES, `see ${LINK}. now`]);
  for (const a of await page.locator("#messages .author").allTextContents()) assert.ok(a.includes(GLOBAL_NAME), a);
  assert.equal(await page.locator(`#members .mrow.group[data-group="${role.id}"]`).textContent(), `${ROLE} — 1`);

  // No element was made from any of it: no img, svg, script or b anywhere
  // but the page's one script, in the lists, the header or the messages.
  const made = await page.evaluate(() => ({
    scripts: [...document.scripts].map((s) => s.getAttribute("src")),
    inside: ["#messages", "#guild-list", "#channel-list", "#members", ".chat-head", "#typing", ".sidebar"].map(
      (sel) => document.querySelector(sel).querySelectorAll("img, script, svg, b, iframe, object, embed, style").length,
    ),
    anywhere: document.querySelectorAll("img, svg, iframe, object, embed, style, [onerror], [onload], [onclick]").length,
  }));
  assert.match(made.scripts.join(), /^\/assets\/app\.[0-9a-f]{10}\.js$/);
  assert.deepEqual({ ...made, scripts: [] }, { scripts: [], inside: [0, 0, 0, 0, 0, 0, 0], anywhere: 0 });

  // Only the http(s) address became a link, with exactly its address and
  // no referrer or opener; nothing else in the messages is a link.
  const links = await page.locator("#messages a").evaluateAll((as) => as.map((a) => ({ href: a.getAttribute("href"), rel: a.rel, target: a.target, text: a.textContent })));
  assert.deepEqual(links, [{ href: LINK, rel: "noopener noreferrer nofollow", target: "_blank", text: LINK }]);
  // Clicking through every hostile message (and whatever link it might hold) runs nothing.
  for (let i = 0; i < MESSAGES.length; i++) {
    const m = page.locator("#messages .message").nth(i);
    await m.locator(".content").click();
    for (const a of await m.locator("a").all()) await a.click();
  }
  // Still this page: at most the open channel's route in the address.
  assert.match(page.url(), new RegExp(`^${base}/(#/channels/\\d+/\\d+)?$`));
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  // An inline handler or script that got into the page would also have
  // been refused by the policy, and reported: none was.
  assert.deepEqual(await csp.check(page), { events: [], messages: [] });
  assert.equal(await page.evaluate(() => window.__xss), undefined);
  assert.equal(await mpage.locator("#channel-topic").textContent(), "", "general has no topic");
  await mpage.locator("#channel-list a", { hasText: CHANNEL }).click();
  await mpage.locator("#messages .content", { hasText: "now" }).waitFor();
  assert.deepEqual(await mcsp.check(mpage), { events: [], messages: [] });
  assert.equal(await mpage.evaluate(() => window.__xss), undefined);
  await ctx.close();
  await mctx.close();
});

test("logging out revokes the token on the server", async () => {
  const base = env.server.url;
  const u = await register(base, "leaver");
  const ctx = await env.browser.newContext();
  await ctx.addInitScript((tok) => {
    if (!sessionStorage.getItem("seeded")) {
      localStorage.setItem("throng.token", tok);
      sessionStorage.setItem("seeded", "1");
    }
  }, u.token);
  const page = await ctx.newPage();
  await page.goto(base);
  await page.locator("#me-name").filter({ hasText: "leaver" }).waitFor();
  const me = (tok) => fetch(`${base}/api/v10/users/@me`, { headers: { authorization: tok } }).then((r) => r.status);
  assert.equal(await me(u.token), 200);
  const calls = [];
  page.on("request", (r) => calls.push(`${r.method()} ${new URL(r.url()).pathname} ${r.headers().authorization === u.token}`));
  await page.getByRole("button", { name: "Log out" }).click();
  await page.getByRole("heading", { name: "Welcome to throng" }).waitFor();
  assert.equal(await page.evaluate(() => localStorage.getItem("throng.token")), null);
  assert.ok(calls.includes("POST /api/v10/auth/logout true"), calls.join("\n"));
  assert.equal(await page.locator("#auth-error").textContent(), "", "the server confirmed the log-out");
  // The old token is refused.
  assert.equal(await me(u.token), 401);
  // Logging in again gives a new token that works.
  await page.getByLabel("Username").fill("leaver");
  await page.getByLabel("Password").fill("correct horse");
  await page.getByRole("button", { name: "Log in" }).click();
  await page.locator("#me-name").filter({ hasText: "leaver" }).waitFor();
  const fresh = await page.evaluate(() => localStorage.getItem("throng.token"));
  assert.notEqual(fresh, u.token);
  assert.equal(await me(fresh), 200);
  await ctx.close();
});
