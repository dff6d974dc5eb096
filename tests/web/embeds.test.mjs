// Embeds from a webhook: colour bar, author, linked title, markdown
// description, fields (inline side by side), an image attached to the
// message (`attachment://`), footer and time. Hostile text stays text, a
// script link is not a link, and an image elsewhere is a link, never
// loaded (the page's policy allows only this server).
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild, png } from "./harness.mjs";

const env = serverAndBrowser();

test("a webhook's embed renders as Discord draws it, and nothing in it runs or loads from elsewhere", async () => {
  const base = env.server.url;
  const { alice, general } = await twoInAGuild(base, "Feeds");
  const hook = await rest(base, "POST", `/channels/${general.id}/webhooks`, alice.token, { name: "Deploy bot" });
  const embed = {
    title: "Release 1.4 shipped",
    url: "https://example.com/releases/1.4",
    description: "**All green.** See `CHANGELOG.md`.\n<img src=x onerror=alert(1)>",
    color: 0x57f287,
    author: { name: "CI", url: "javascript:alert(1)" },
    fields: [
      { name: "Build", value: "#812", inline: true },
      { name: "Time", value: "4m 12s", inline: true },
      { name: "Notes", value: "Faster *search*." },
    ],
    image: { url: "attachment://chart.png" },
    thumbnail: { url: "https://example.com/logo.png" },
    footer: { text: "deploys" },
    timestamp: "2026-11-28T12:00:00.000Z",
  };
  const form = new FormData();
  form.append("payload_json", JSON.stringify({ embeds: [embed] }));
  form.append("files[0]", new Blob([png(120, 60)], { type: "image/png" }), "chart.png");
  const r = await fetch(`${base}/api/v10/webhooks/${hook.id}/${hook.token}?wait=true`, { method: "POST", body: form });
  assert.equal(r.status, 200, await r.clone().text());
  const msg = await r.json();

  const { page: a } = await pageAs(env.browser, base, alice.token);
  a.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  const requests = [];
  a.on("request", (q) => requests.push(q.url()));
  a.on("dialog", () => assert.fail("a dialog opened"));
  const card = a.locator(`#m-${msg.id} article.embed`);
  await card.waitFor();
  await card.locator(".embed-image img").evaluate((img) => img.complete || new Promise((r) => (img.onload = r)));

  const title = card.getByRole("link", { name: "Release 1.4 shipped" });
  assert.equal(await title.getAttribute("href"), "https://example.com/releases/1.4");
  assert.equal(await card.locator(".embed-description strong").textContent(), "All green.");
  assert.equal(await card.locator(".embed-description code").textContent(), "CHANGELOG.md");
  assert.match(await card.locator(".embed-description").textContent(), /<img src=x onerror=alert\(1\)>/);
  assert.equal(await card.locator(".embed-description img").count(), 0);
  // The author's script link is only text.
  assert.equal(await card.locator(".embed-author a").count(), 0);
  assert.equal(await card.locator(".embed-author").textContent(), "CI");
  // Fields: two inline side by side, one on its own line.
  const boxes = await card.locator(".embed-field").evaluateAll((els) => els.map((e) => e.getBoundingClientRect().top));
  assert.equal(boxes[0], boxes[1]);
  assert.ok(boxes[2] > boxes[0]);
  assert.match(await card.locator(".embed-footer").textContent(), /^deploys • /);
  // The colour bar.
  assert.equal(await card.evaluate((el) => getComputedStyle(el).borderLeftColor), "rgb(87, 242, 135)");
  // The attached image shows (from this server); the thumbnail elsewhere is a link, not loaded.
  const src = await card.locator(".embed-image img").getAttribute("src");
  assert.ok(src.startsWith("/attachments/"), src);
  assert.ok(await card.locator(".embed-image img").evaluate((img) => img.naturalWidth === 120));
  assert.equal(await card.locator(".embed-thumb").getAttribute("href"), "https://example.com/logo.png");
  // Shown in the embed, the attachment is not drawn again under the message.
  assert.equal(await a.locator(`#m-${msg.id} .attachments img`).count(), 0);
  assert.equal(requests.filter((u) => !u.startsWith(base)).length, 0, JSON.stringify(requests.filter((u) => !u.startsWith(base))));
  await shot(a, "embed");
});
