// A send whose answer is lost (a node failing over answers 503 after it
// committed, or the connection drops): the client sends the same message
// again with its nonce and `enforce_nonce`, the server answers with the
// first one, and the message is in the channel once. Sends keep the order
// they were typed in, and a failed send never overwrites a new draft.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, register, pageAs } from "./harness.mjs";

const env = serverAndBrowser();

test("a send retried after a lost answer appears once, in order", async () => {
  const alice = await register(env.server.url, "alice");
  const g = await rest(env.server.url, "POST", "/guilds", alice.token, { name: "Failover" });
  const [general] = await rest(env.server.url, "GET", `/guilds/${g.id}/channels`, alice.token);
  const { page } = await pageAs(env.browser, env.server.url, alice.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();

  // The first POST of "first" reaches the server, which commits it, but the
  // page is told 503; the first POST of "second" never reaches it.
  const posts = [];
  await page.route(`**/api/v10/channels/${general.id}/messages`, async (route) => {
    const req = route.request();
    if (req.method() !== "POST") return route.continue();
    const body = req.postDataJSON();
    posts.push(body);
    const seen = posts.filter((p) => p.content === body.content).length;
    if (body.content === "first" && seen === 1) {
      await route.fetch();
      return route.fulfill({ status: 503, contentType: "application/json", body: '{"message":"busy","code":0}' });
    }
    if (body.content === "second" && seen === 1) return route.abort("connectionreset");
    return route.continue();
  });
  const input = page.locator("#input");
  await input.fill("first");
  await input.press("Enter");
  await input.fill("second");
  await input.press("Enter");
  await page.locator("#messages .content", { hasText: "second" }).waitFor();
  await shot(page, "send-retry");

  // Each was sent twice with one nonce and enforce_nonce ...
  for (const c of ["first", "second"]) {
    const mine = posts.filter((p) => p.content === c);
    assert.equal(mine.length, 2, `${c} sent twice: ${JSON.stringify(posts)}`);
    assert.equal(mine[0].nonce, mine[1].nonce);
    assert.equal(mine[0].enforce_nonce, true);
    assert.ok(mine[0].nonce.length <= 25);
  }
  assert.notEqual(posts[0].nonce, posts.find((p) => p.content === "second").nonce);
  // ... and is in the channel once, in the order typed, on the page too.
  const history = await rest(env.server.url, "GET", `/channels/${general.id}/messages?limit=10`, alice.token);
  assert.deepEqual(history.map((m) => m.content).reverse(), ["first", "second"]);
  const shown = await page.locator("#messages .message .content").allTextContents();
  assert.deepEqual(shown.filter((t) => t === "first" || t === "second"), ["first", "second"]);
  assert.equal(await input.inputValue(), "", "nothing came back into the composer");
});
