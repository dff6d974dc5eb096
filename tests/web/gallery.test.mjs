// The phone-width gallery (390 × 844, touch): the main views as a person
// on a phone sees them, each checked to fit the screen (nothing wider than
// the viewport) and written to .artifacts/web/phone-*.png for
// docs/web-client.md.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();
const PHONE = { viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true };

/** Fails if anything visible reaches past the right edge of the screen. */
async function fits(page, view) {
  const wide = await page.evaluate(() =>
    [...document.querySelectorAll("body *")]
      .filter((el) => {
        const r = el.getBoundingClientRect();
        const s = getComputedStyle(el);
        return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && r.right > window.innerWidth + 1;
      })
      .map((el) => `${el.tagName.toLowerCase()}${el.id ? "#" + el.id : ""}.${[...el.classList].join(".")}`),
  );
  assert.deepEqual(wide.slice(0, 5), [], `${view}: wider than the screen`);
}

test("phone width: conversation, navigation, members, DMs, search, a thread, settings and the emoji picker fit the screen", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Pocket Club");
  const post = (token, content) => rest(base, "POST", `/channels/${general.id}/messages`, token, { content });
  await post(alice.token, "Welcome to **Pocket Club**! Rules: be kind, `no spam`.");
  const q = await post(bob.token, "Anyone up for a walk at 6? https://example.com/map");
  await rest(base, "PUT", `/channels/${general.id}/messages/${q.id}/reactions/${encodeURIComponent("👍")}/@me`, alice.token);
  await post(alice.token, `> a quote\n<@${bob.id}> count me in`);
  await rest(base, "POST", `/channels/${general.id}/messages/${q.id}/threads`, alice.token, { name: "Walk" });
  await rest(base, "POST", `/channels/${q.id}/messages`, bob.token, { content: "meet at the gate" });

  const { page: p } = await pageAs(env.browser, base, alice.token, PHONE);
  p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await p.locator("#messages .content", { hasText: "count me in" }).waitFor();
  await fits(p, "conversation");
  await shot(p, "phone-chat");

  const menu = p.getByRole("button", { name: "Servers and channels" });
  await menu.click();
  await p.waitForFunction(() => document.querySelector(".rail").getBoundingClientRect().x >= 0);
  await shot(p, "phone-nav");
  await p.keyboard.press("Escape");
  await p.waitForFunction(() => document.querySelector("#nav").getBoundingClientRect().right <= 0);

  await p.getByRole("button", { name: "Members", exact: true }).click();
  await p.locator("#members .mrow.member[data-user-id]").first().waitFor();
  await shot(p, "phone-members");
  await p.keyboard.press("Escape");
  await p.locator("#members").waitFor({ state: "hidden" });

  await p.getByRole("searchbox", { name: "Search messages" }).fill("walk");
  await p.getByRole("searchbox", { name: "Search messages" }).press("Enter");
  await p.getByRole("complementary", { name: "Search" }).getByRole("status").filter({ hasText: "1 result" }).waitFor();
  await fits(p, "search");
  await shot(p, "phone-search");
  await p.getByRole("button", { name: "Close search" }).click();

  await p.locator(`#m-${q.id} .thread-link`).click();
  await p.getByRole("complementary", { name: "🧵 Walk" }).locator(".message .content", { hasText: "meet at the gate" }).waitFor();
  await fits(p, "thread");
  await shot(p, "phone-thread");
  await p.getByRole("button", { name: "Close threads" }).click();

  await p.getByRole("button", { name: "Emoji", exact: true }).click();
  await p.getByRole("dialog", { name: "Pick an emoji" }).getByRole("gridcell", { name: ":thumbsup:" }).waitFor();
  await fits(p, "emoji picker");
  await shot(p, "phone-emoji");
  await p.keyboard.press("Escape");

  await menu.click();
  await p.waitForFunction(() => document.querySelector(".rail").getBoundingClientRect().x >= 0);
  await p.getByRole("button", { name: "Server settings" }).click();
  const dlg = p.getByRole("dialog", { name: "Server settings" });
  await dlg.getByRole("tab", { name: "Roles" }).click();
  await dlg.getByRole("form").waitFor();
  await fits(p, "settings");
  await shot(p, "phone-settings");
  await dlg.getByRole("button", { name: "Close settings" }).click();
  await p.keyboard.press("Escape");
  await p.waitForFunction(() => document.querySelector("#nav").getBoundingClientRect().right <= 0);

  const dm = await rest(base, "POST", "/users/@me/channels", bob.token, { recipient_id: alice.id });
  await rest(base, "POST", `/channels/${dm.id}/messages`, bob.token, { content: "see you there" });
  await menu.click();
  await p.waitForFunction(() => document.querySelector(".rail").getBoundingClientRect().x >= 0);
  await p.getByRole("button", { name: /^Direct messages/ }).click();
  await p.getByRole("link", { name: /^bob/ }).click();
  await p.locator("#messages .content", { hasText: "see you there" }).waitFor();
  await fits(p, "DM");
  await shot(p, "phone-dm");
  assert.equal(g.name, "Pocket Club");
});
