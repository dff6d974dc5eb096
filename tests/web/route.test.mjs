// The open channel is in the address (`#/channels/<server>/<channel>`): a
// reload opens that channel again, not whichever server arrives first; an
// address edited to another channel opens it; an address naming a server
// the person is not in falls back to their first. The client's files come
// gzipped to a browser that takes gzip.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, register, pageAs } from "./harness.mjs";

const env = serverAndBrowser();

test("the address holds the open channel across reloads", async () => {
  const base = env.server.url;
  const alice = await register(base, "alice");
  const mallory = await register(base, "mallory");
  const mk = async (token, name) => {
    const g = await rest(base, "POST", "/guilds", token, { name });
    const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, token);
    return { id: g.id, general: general.id };
  };
  const alpha = await mk(alice.token, "Alpha");
  const beta = await mk(alice.token, "Beta");
  const elsewhere = await mk(mallory.token, "Elsewhere");
  const random = await rest(base, "POST", `/guilds/${alpha.id}/channels`, alice.token, { name: "random", type: 0 });

  const { page } = await pageAs(env.browser, base, alice.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  await page.getByRole("button", { name: "Alpha" }).click();
  await page.locator("#channel-list a", { hasText: "random" }).click();
  await page.locator("#channel-name").filter({ hasText: "# random" }).waitFor();
  assert.ok(page.url().endsWith(`#/channels/${alpha.id}/${random.id}`), page.url());

  // Reloads come back to Alpha's #random every time (two servers race to
  // arrive first after each READY).
  for (let i = 0; i < 3; i++) {
    await page.reload();
    await page.locator("#channel-name").filter({ hasText: "# random" }).waitFor();
    assert.equal(await page.locator("#guild-name").textContent(), "Alpha");
  }
  await shot(page, "route-reload");

  // Following an address to another server's channel.
  await page.evaluate((h) => (location.hash = h), `#/channels/${beta.id}/${beta.general}`);
  await page.locator("#guild-name").filter({ hasText: "Beta" }).waitFor();
  assert.ok(page.url().endsWith(`#/channels/${beta.id}/${beta.general}`));

  // A server this person is not in: followed, the address goes back to
  // the open channel; loaded, their first server opens instead.
  const away = `#/channels/${elsewhere.id}/${elsewhere.general}`;
  await page.evaluate((h) => (location.hash = h), away);
  await page.waitForFunction((id) => location.hash.endsWith(id), beta.general);
  assert.equal(await page.locator("#guild-name").textContent(), "Beta");
  await page.evaluate((h) => {
    history.replaceState(null, "", h);
    location.reload();
  }, away);
  // Wait for a server to open: until then the address still names the
  // other one and the header says "No server".
  await page.waitForFunction(
    (other) => /^#\/channels\/\d+\/\d+$/.test(location.hash) && !location.hash.includes(other) && document.querySelector("#channel-name")?.textContent,
    elsewhere.id,
  );
  const shown = await page.locator("#guild-name").textContent();
  assert.ok(["Alpha", "Beta"].includes(shown), shown);
  assert.ok(!page.url().includes(elsewhere.id), page.url());

  // The page names its files by hash; they travel in Brotli (or gzip) and
  // are kept a year; the page itself is never kept.
  const page0 = await fetch(`${base}/`, { headers: { "accept-encoding": "gzip, br" } });
  assert.equal(page0.headers.get("cache-control"), "no-store");
  assert.equal(page0.headers.get("content-encoding"), "br");
  const html = await page0.text();
  const [jsPath] = html.match(/\/assets\/app\.[0-9a-f]{10}\.js/);
  const [cssPath] = html.match(/\/assets\/app\.[0-9a-f]{10}\.css/);
  const loaded = await page.evaluate(() => performance.getEntriesByType("resource").map((e) => new URL(e.name).pathname));
  assert.ok(loaded.includes(jsPath) && loaded.includes(cssPath), JSON.stringify(loaded));
  const br = await fetch(`${base}${jsPath}`, { headers: { "accept-encoding": "gzip, deflate, br" } });
  assert.equal(br.headers.get("content-encoding"), "br");
  assert.equal(br.headers.get("cache-control"), "public, max-age=31536000, immutable");
  assert.ok((await br.text()).includes("GUILD_MEMBER_LIST_UPDATE"), "decoded by the browser's rules: the bundle");
  const js = await fetch(`${base}${jsPath}`, { headers: { "accept-encoding": "gzip" } });
  assert.equal(js.headers.get("content-encoding"), "gzip");
  const css = await fetch(`${base}${cssPath}`, { headers: { "accept-encoding": "identity" } });
  assert.equal(css.headers.get("content-encoding"), null);
  assert.equal((await fetch(`${base}/assets/app.0000000000.js`)).status, 404);

});

test("the composer and the edit box grow with their text", async () => {
  const base = env.server.url;
  const bob = await register(base, "bob");
  await rest(base, "POST", "/guilds", bob.token, { name: "Lines" });
  const { page } = await pageAs(env.browser, base, bob.token, { viewport: { width: 1000, height: 700 } });
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  const input = page.locator("#input");
  const height = (l) => l.evaluate((el) => el.getBoundingClientRect().height);
  const one = await height(input);
  await input.click();
  for (let i = 1; i <= 5; i++) {
    await page.keyboard.type(`line ${i}`);
    if (i < 5) await page.keyboard.press("Shift+Enter");
  }
  const five = await height(input);
  assert.ok(five > one * 2.5, `5 lines: ${five} px against ${one} px for one`);
  // Past 40% of the window it stops growing and scrolls.
  for (let i = 0; i < 30; i++) await page.keyboard.press("Shift+Enter");
  assert.ok((await height(input)) <= 700 * 0.4 + 1);
  await shot(page, "composer-grown");
  await page.keyboard.press("Enter");
  await page.locator("#messages .content", { hasText: "line 5" }).waitFor();
  assert.ok(Math.abs((await height(input)) - one) < 2, "back to one line once sent");

  // Editing that message: the box holds all five lines, in view.
  await page.locator("#messages .message", { hasText: "line 5" }).hover();
  await page.locator("#messages .message .edit").last().click();
  const box = page.locator(".edit-box");
  await box.waitFor();
  const fits = await box.evaluate((el) => el.scrollHeight <= el.clientHeight + 2);
  assert.ok(fits, "the edit box shows every line");
  const r = await box.evaluate((el) => el.getBoundingClientRect().bottom);
  const list = await page.locator("#messages").evaluate((el) => el.getBoundingClientRect().bottom);
  assert.ok(r <= list + 1, `the edit box ends inside the message list: ${r} > ${list}`);
});
