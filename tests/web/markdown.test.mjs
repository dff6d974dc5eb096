// Messages show Discord-flavoured markdown as elements built from text
// nodes: emphasis, code (inline and blocks, highlighted), quotes, headings,
// lists, spoilers, masked and bare links, mentions; what tries to be markup
// or a script link stays text.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, register, pageAs } from "./harness.mjs";

const env = serverAndBrowser();

test("markdown in messages becomes elements, never markup", async () => {
  const base = env.server.url;
  const alice = await register(base, "alice");
  const bob = await register(base, "bob");
  const g = await rest(base, "POST", "/guilds", alice.token, { name: "Marks" });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, alice.token);
  const inv = await rest(base, "POST", `/channels/${general.id}/invites`, alice.token, {});
  await rest(base, "POST", `/invites/${inv.code}`, bob.token);
  const say = (content) => rest(base, "POST", `/channels/${general.id}/messages`, bob.token, { content });
  await say("**bold** *italic* _also_ __under__ ~~gone~~ `a < b` ||secret|| snake_case_name");
  await say("# Title\n> quoted **line**\n- one\n- two\n3. three\n4. four");
  await say("```rust\nfn main() { let x = 42; // done\n}\n```");
  await say(`hey <@${alice.id}> see <#${general.id}> and [the docs](https://example.com/docs) or https://example.org/x.`);
  await say("<img src=x onerror=alert(1)> [click](javascript:alert(1)) \\*not italic\\*");

  const { page } = await pageAs(env.browser, base, alice.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  page.on("dialog", () => assert.fail("a dialog opened"));
  await page.locator("#messages .content", { hasText: "not italic" }).waitFor();
  const msg = (n) => page.locator("#messages .message .content").nth(n);

  const first = msg(0);
  assert.equal(await first.locator("strong").textContent(), "bold");
  assert.deepEqual(await first.locator("em").allTextContents(), ["italic", "also"]);
  assert.equal(await first.locator("u").textContent(), "under");
  assert.equal(await first.locator("s").textContent(), "gone");
  assert.equal(await first.locator("code").textContent(), "a < b");
  assert.ok((await first.textContent()).includes("snake_case_name"), "underscores inside a word are not italics");
  const spoiler = first.locator(".md-spoiler");
  assert.equal(await spoiler.evaluate((el) => getComputedStyle(el).color), "rgba(0, 0, 0, 0)");
  await spoiler.click();
  assert.notEqual(await spoiler.evaluate((el) => getComputedStyle(el).color), "rgba(0, 0, 0, 0)");

  const second = msg(1);
  assert.equal(await second.locator('[role="heading"]').textContent(), "Title");
  assert.equal(await second.locator('[role="blockquote"] strong').textContent(), "line");
  assert.deepEqual(await second.locator("ul li").allTextContents(), ["one", "two"]);
  assert.deepEqual(await second.locator("ol li").allTextContents(), ["three", "four"]);
  assert.equal(await second.locator("ol").getAttribute("start"), "3");

  const code = msg(2).locator(".md-pre code");
  assert.equal(await code.textContent(), "fn main() { let x = 42; // done\n}");
  assert.deepEqual(await code.locator(".hl-kw").allTextContents(), ["fn", "let"]);
  assert.deepEqual(await code.locator(".hl-num").allTextContents(), ["42"]);
  assert.deepEqual(await code.locator(".hl-com").allTextContents(), ["// done"]);

  const fourth = msg(3);
  assert.equal(await fourth.locator(".mention-me").textContent(), "@alice");
  assert.equal(await fourth.locator('.mention[data-channel]').textContent(), "#general");
  const links = fourth.locator("a");
  assert.deepEqual(await links.allTextContents(), ["the docs", "https://example.org/x"]);
  assert.equal(await links.first().getAttribute("href"), "https://example.com/docs");
  assert.equal(await links.first().getAttribute("rel"), "noopener noreferrer nofollow");

  const fifth = msg(4);
  assert.equal(await fifth.locator("img, a").count(), 0, "no element from markup or a script link");
  assert.equal(await fifth.textContent(), "<img src=x onerror=alert(1)> [click](javascript:alert(1)) *not italic*");
  await shot(page, "markdown");
});

test("a run of one person's messages shows their name once, under a date line", async () => {
  const base = env.server.url;
  const carol = await register(base, "carol");
  const dave = await register(base, "dave");
  const g = await rest(base, "POST", "/guilds", carol.token, { name: "Runs" });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, carol.token);
  const inv = await rest(base, "POST", `/channels/${general.id}/invites`, carol.token, {});
  await rest(base, "POST", `/invites/${inv.code}`, dave.token);
  const say = (who, content) => rest(base, "POST", `/channels/${general.id}/messages`, who.token, { content });
  for (const [who, text] of [[dave, "one"], [dave, "two"], [dave, "three"], [carol, "four"], [dave, "five"]]) await say(who, text);

  const { page } = await pageAs(env.browser, base, carol.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#messages .content", { hasText: "five" }).waitFor();
  const rows = await page.locator("#messages .message").evaluateAll((els) =>
    els.map((el) => [el.querySelector(".content").firstChild.textContent, el.classList.contains("grouped"), el.querySelector(".author")?.textContent ?? null]),
  );
  assert.deepEqual(rows, [
    ["one", false, "dave"],
    ["two", true, null],
    ["three", true, null],
    ["four", false, "carol"],
    ["five", false, "dave"],
  ]);
  assert.equal(await page.locator("#messages .day").count(), 1, "one date line: all today");
  assert.equal(await page.locator("#messages .avatar").count(), 3, "a picture per run");
  // A grouped message tells its time on hover, in full in its title.
  const two = page.locator("#messages .message.grouped").first();
  await two.hover();
  assert.ok(await two.locator(".hover-time").isVisible());
  assert.match(await two.locator(".hover-time").getAttribute("title"), /\d/);
  // Deleting the head of a run: the next message heads it.
  const one = await page.locator("#messages .message", { hasText: "one" }).getAttribute("data-id");
  await rest(base, "DELETE", `/channels/${general.id}/messages/${one}`, dave.token);
  await page.locator(`#m-${one}`).waitFor({ state: "detached" });
  assert.equal(await page.locator("#messages .message", { hasText: "two" }).evaluate((el) => el.classList.contains("grouped")), false);
  await shot(page, "grouping");
});

test("when old messages leave a busy channel, the first one left heads its run under a date line", async () => {
  const base = env.server.url;
  const erin = await register(base, "erin");
  const g = await rest(base, "POST", "/guilds", erin.token, { name: "Busy" });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, erin.token);
  const { page } = await pageAs(env.browser, base, erin.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  // More than the 300 the client keeps while at the bottom, all one run.
  for (let i = 0; i < 320; i += 20) {
    await Promise.all(Array.from({ length: 20 }, (_, k) => rest(base, "POST", `/channels/${general.id}/messages`, erin.token, { content: `n${i + k}` })));
  }
  // Every one of them arrived (the last batch's too), and the oldest 20 left.
  await page.waitForFunction(() => {
    const texts = [...document.querySelectorAll("#messages .message .content")].map((c) => c.textContent);
    return texts.length === 300 && ["n300", "n319"].every((t) => texts.includes(t)) && !texts.includes("n0");
  });
  const shape = await page.evaluate(() => {
    const lis = [...document.querySelectorAll("#messages li")];
    return { first: lis[0].className, second: lis[1].className, days: lis.filter((l) => l.classList.contains("day")).length };
  });
  assert.deepEqual(shape, { first: "day", second: "message", days: 1 });
});

test("older pages join the run above them: one name, one date line, each message once", async () => {
  const base = env.server.url;
  const erin = await register(base, "pager");
  const g = await rest(base, "POST", "/guilds", erin.token, { name: "Pages" });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, erin.token);
  // 120 messages of one person in a minute: three pages of 50, one run.
  for (let i = 0; i < 120; i++) await rest(base, "POST", `/channels/${general.id}/messages`, erin.token, { content: `line ${i}` });
  const { page } = await pageAs(env.browser, base, erin.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#messages .content", { hasText: "line 119" }).waitFor();
  // Scrolled to the top until the first message is in.
  await page.waitForFunction(() => {
    document.getElementById("messages").scrollTop = 0;
    return [...document.querySelectorAll("#messages .content")].some((c) => c.textContent === "line 0");
  }, null, { polling: 100, timeout: 30_000 });
  const rows = await page.locator("#messages .message").evaluateAll((els) => els.map((el) => [el.querySelector(".content").textContent, el.classList.contains("grouped")]));
  assert.deepEqual(rows.map(([t]) => t), Array.from({ length: 120 }, (_, i) => `line ${i}`), "each once, in order");
  assert.deepEqual(rows.filter(([, grouped]) => !grouped).map(([t]) => t), ["line 0"], "one run across the pages");
  assert.equal(await page.locator("#messages .day").count(), 1);
  assert.equal(await page.locator("#messages .avatar").count(), 1);
});

test("far back, at most 400 messages are drawn; the way down draws the newer ones again, each once and in order", async () => {
  const base = env.server.url;
  const reader = await register(base, "reader");
  const g = await rest(base, "POST", "/guilds", reader.token, { name: "Long" });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, reader.token);
  const N = 520;
  for (let i = 0; i < N; i++) await rest(base, "POST", `/channels/${general.id}/messages`, reader.token, { content: `row ${i}` });
  const { page } = await pageAs(env.browser, base, reader.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#messages .content", { hasText: `row ${N - 1}` }).waitFor();
  const drawn = () => page.locator("#messages .message .content").allTextContents();
  const inOrder = (rows) => rows.every((t, i) => i === 0 || Number(t.slice(4)) === Number(rows[i - 1].slice(4)) + 1);
  // Up to the first message.
  await page.waitForFunction(() => {
    document.getElementById("messages").scrollTop = 0;
    return document.querySelector("#messages .message .content")?.textContent === "row 0";
  }, null, { polling: 100, timeout: 60_000 });
  let rows = await drawn();
  assert.ok(rows.length <= 400 && rows.length >= 300, `${rows.length} drawn`);
  assert.equal(rows[0], "row 0");
  assert.ok(inOrder(rows), "in order");
  assert.ok(!rows.includes(`row ${N - 1}`), "the newest undrawn");
  await page.locator("#jump-present").waitFor();
  // Down again, a screen at a time, to the newest.
  await page.waitForFunction((last) => {
    const ol = document.getElementById("messages");
    ol.scrollTop = ol.scrollTop + ol.clientHeight;
    const all = document.querySelectorAll("#messages .message .content");
    return all[all.length - 1]?.textContent === last && ol.scrollHeight - ol.scrollTop - ol.clientHeight < 40;
  }, `row ${N - 1}`, { polling: 100, timeout: 60_000 });
  rows = await drawn();
  assert.ok(rows.length <= 400, `${rows.length} drawn`);
  assert.ok(inOrder(rows), "in order, each once");
  await page.locator("#jump-present").waitFor({ state: "hidden" });
  // Far back again, then "Jump to present" draws the newest at once.
  await page.waitForFunction(() => {
    document.getElementById("messages").scrollTop = 0;
    return document.querySelector("#messages .message .content")?.textContent === "row 0";
  }, null, { polling: 100, timeout: 60_000 });
  await page.getByRole("button", { name: "Jump to present" }).click();
  await page.locator("#messages .content", { hasText: `row ${N - 1}` }).waitFor();
  await page.locator("#jump-present").waitFor({ state: "hidden" });
  rows = await drawn();
  assert.equal(rows[rows.length - 1], `row ${N - 1}`);
  assert.ok(inOrder(rows));
});
