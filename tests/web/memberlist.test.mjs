// The lazy member list over a guild seeded with 100,000 members: scrolled
// to the middle and to the end, the rows on screen are exactly the members
// GET /guilds/{id}/members lists, put in the list's order (groups, then
// display name, then id); the client never holds more than a few hundred
// rows; a member coming online mid-list is applied in place.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { startServer, launch, shot, rest, pageAs, stats, seed, tempDir } from "./harness.mjs";

const N = 100_000;
const ROW = 36;
let server, browser, fixture, dir;

before(async () => {
  dir = tempDir("seed");
  fixture = seed(dir, ["--users", String(N), "--guilds", "1", "--memberships-per-user", "0", "--huge-guild-members", String(N)]);
  server = await startServer({ dataDir: dir });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const display = (m) => m.nick || m.user.global_name || m.user.username;
const cmpId = (a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0);
const byName = (a, b) => {
  const x = display(a).toLowerCase();
  const y = display(b).toLowerCase();
  return Buffer.compare(Buffer.from(x), Buffer.from(y)) || cmpId(a.user.id, b.user.id);
};

/// Every member through the REST API, in pages of 1,000.
async function allMembers(base, token, gid) {
  const out = [];
  let after = "0";
  for (;;) {
    const page = await rest(base, "GET", `/guilds/${gid}/members?limit=1000&after=${after}`, token);
    out.push(...page);
    if (page.length < 1000) return out;
    after = page[page.length - 1].user.id;
  }
}

/// The list as the server's rules order it: online (no hoisted roles here), then offline.
function expectedList(all, online) {
  const on = all.filter((m) => online.has(m.user.id)).sort(byName);
  const off = all.filter((m) => !online.has(m.user.id)).sort(byName);
  const items = [];
  if (on.length) items.push({ group: "online", count: on.length }, ...on.map((m) => ({ id: m.user.id })));
  if (off.length) items.push({ group: "offline", count: off.length }, ...off.map((m) => ({ id: m.user.id })));
  return items;
}

/// The rows on screen, once none is still loading: [index, group id or user id].
async function screenRows(page) {
  await page.waitForFunction(() => {
    const rows = document.querySelectorAll("#members .mrow");
    return rows.length > 5 && !document.querySelector("#members .mrow.loading");
  }, null, { timeout: 60_000 });
  return page.$$eval("#members .mrow", (rows) => rows.map((r) => [Number(r.dataset.index), r.dataset.group ? `group:${r.dataset.group}` : r.dataset.userId]));
}

function assertRows(rows, want, where) {
  assert.ok(rows.length >= 10, `${where}: rows on screen`);
  for (const [i, got] of rows) {
    const w = want[i];
    assert.ok(w, `${where}: row ${i} exists`);
    assert.equal(got, w.group ? `group:${w.group}` : w.id, `${where}: row ${i}`);
  }
}

/// Every row the client holds (its subscribed chunks) equals the expected list there.
async function assertHeld(page, want, where) {
  const held = await page.evaluate(() => window.__throng.rows().map(([i, it]) => [i, it.group ? `group:${it.group.id}:${it.group.count}` : it.member.user.id]));
  assert.ok(held.length > 0 && held.length <= 300, `${where}: holds ${held.length} rows`);
  for (const [i, got] of held) {
    const w = want[i];
    assert.equal(got, w.group ? `group:${w.group}:${w.count}` : w.id, `${where}: held row ${i}`);
  }
}

async function scrollTo(page, index) {
  await page.locator("#members .member-scroll").evaluate((el, y) => (el.scrollTop = y), index * ROW);
}

test("100,000 members: middle and end match the REST listing, few rows held", async () => {
  const huge = fixture.guilds.find((g) => g.huge);
  const owner = fixture.users.find((u) => u.id === huge.member_ids[0]);
  const all = await allMembers(server.url, owner.token, huge.id);
  assert.equal(all.length, N);

  const { page } = await pageAs(browser, server.url, owner.token, { viewport: { width: 1280, height: 800 } });
  await page.locator("#guild-name").filter({ hasText: "huge guild" }).waitFor({ timeout: 60_000 });
  await page.locator("#members-head").filter({ hasText: `Members — ${N} (1 online)` }).waitFor({ timeout: 60_000 });
  let want = expectedList(all, new Set([owner.id]));
  assert.equal(want.length, N + 2);
  const spacer = await page.locator("#members .member-spacer").evaluate((el) => el.offsetHeight);
  assert.equal(spacer, (N + 2) * ROW, "the scroll height covers every row");

  assertRows(await screenRows(page), want, "top");
  await assertHeld(page, want, "top");

  // The middle.
  const mid = 50_000;
  await scrollTo(page, mid);
  await page.waitForFunction((m) => document.querySelector(`#members .mrow[data-index="${m}"]:not(.loading)`), mid, { timeout: 60_000 });
  const rowsMid = await screenRows(page);
  assert.ok(rowsMid.some(([i]) => i === mid));
  assertRows(rowsMid, want, "middle");
  await assertHeld(page, want, "middle");
  await shot(page, "09-member-list-middle");

  // Someone on screen comes online: the list changes in place (DELETE/INSERT/UPDATE ops).
  const mover = want[mid + 5].id;
  const moverToken = fixture.users.find((u) => u.id === mover).token;
  const other = await pageAs(browser, server.url, moverToken);
  await page.locator("#members-head").filter({ hasText: "(2 online)" }).waitFor({ timeout: 60_000 });
  want = expectedList(all, new Set([owner.id, mover]));
  await page.waitForFunction((id) => !document.querySelector(`#members .mrow[data-user-id="${id}"].offline`), mover);
  assertRows(await screenRows(page), want, "middle after a member came online");
  await assertHeld(page, want, "middle after a member came online");

  // The end.
  await page.locator("#members .member-scroll").evaluate((el) => (el.scrollTop = el.scrollHeight));
  await page.waitForFunction((last) => document.querySelector(`#members .mrow[data-index="${last}"]:not(.loading)`), N + 1, { timeout: 60_000 });
  const rowsEnd = await screenRows(page);
  assert.equal(Math.max(...rowsEnd.map(([i]) => i)), N + 1);
  assertRows(rowsEnd, want, "end");
  await assertHeld(page, want, "end");

  // Back at the top, the mover is listed online.
  await scrollTo(page, 0);
  await page.waitForFunction((id) => document.querySelector(`#members .mrow.online[data-user-id="${id}"]`), mover, { timeout: 60_000 });
  assertRows(await screenRows(page), want, "top again");

  // Keyboard: End and Home move the active row and scroll to it.
  await page.locator("#members .member-scroll").focus();
  await page.keyboard.press("End");
  await page.waitForFunction((last) => document.querySelector(`#members .mrow.active[data-index="${last}"]`), N + 1, { timeout: 60_000 });
  assert.equal(await page.locator("#members .member-scroll").getAttribute("aria-activedescendant"), `mrow-${N + 1}`);
  await page.keyboard.press("Home");
  await page.waitForFunction(() => document.querySelector('#members .mrow.active[data-index="0"]'));

  const s = await stats(page);
  assert.ok(s.maxHeldRows <= 300, `held at most ${s.maxHeldRows} rows`);
  assert.ok(s.listSyncs >= 4, "chunks were synced as the list scrolled");
  await other.ctx.close();
});
