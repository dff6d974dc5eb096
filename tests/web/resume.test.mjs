// A dropped WebSocket mid-conversation: the client shows "Reconnecting…",
// RESUMEs the same session (no new IDENTIFY), and every message, including
// those sent while it was away, appears exactly once and in order.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, register, pageAs, stats, ADMIN } from "./harness.mjs";

const env = serverAndBrowser();

async function dropSessions(userId) {
  const r = await fetch(`${env.server.url}/api/v10/_throng/admin/drop-sessions`, {
    method: "POST",
    headers: { "x-throng-admin-token": ADMIN, "content-type": "application/json" },
    body: JSON.stringify({ user_id: userId }),
  });
  assert.equal(r.status, 200);
  return (await r.json()).dropped;
}

test("RESUME after a drop shows every message once", async () => {
  const alice = await register(env.server.url, "alice");
  const bob = await register(env.server.url, "bob");
  const g = await rest(env.server.url, "POST", "/guilds", alice.token, { name: "Resume" });
  const [general] = await rest(env.server.url, "GET", `/guilds/${g.id}/channels`, alice.token);
  const inv = await rest(env.server.url, "POST", `/channels/${general.id}/invites`, alice.token, {});
  await rest(env.server.url, "POST", `/invites/${inv.code}`, bob.token);

  const { page } = await pageAs(env.browser, env.server.url, bob.token);
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  const say = (content) => rest(env.server.url, "POST", `/channels/${general.id}/messages`, alice.token, { content });
  const want = [];
  for (let i = 0; i < 5; i++) want.push((await say(`before ${i}`)).content);
  await page.locator("#messages .content", { hasText: "before 4" }).waitFor();

  // The server drops Bob's socket (as a network failure would), and Alice
  // keeps talking while he is away.
  assert.equal(await dropSessions(bob.id), 1);
  for (let i = 0; i < 10; i++) want.push((await say(`during ${i}`)).content);
  await page.locator('#link-state[data-state="reconnecting"]').filter({ hasText: "Reconnecting…" }).waitFor();
  await shot(page, "08-reconnecting");
  await page.locator('#link-state[data-state="ready"]').waitFor({ state: "attached", timeout: 20_000 });
  for (let i = 0; i < 5; i++) want.push((await say(`after ${i}`)).content);
  await page.locator("#messages .content", { hasText: "after 4" }).waitFor();
  assert.deepEqual(await page.locator("#messages .content").allTextContents(), want);

  // A second drop, this time closed from the client side (the socket dies
  // in the browser), with messages in flight.
  await page.evaluate(() => window.__throng.drop());
  for (let i = 0; i < 5; i++) want.push((await say(`again ${i}`)).content);
  await page.locator("#messages .content", { hasText: "again 4" }).waitFor({ timeout: 20_000 });
  assert.deepEqual(await page.locator("#messages .content").allTextContents(), want);

  const s = await stats(page);
  assert.equal(s.identifies, 1, "one IDENTIFY: both reconnections resumed");
  assert.equal(s.resumes, 2);
  assert.equal(s.state, "ready");
  assert.equal(await page.locator("#link-state").textContent(), "");
});
