// Accessibility: axe-core (WCAG 2.1 A and AA rules) over each view of the
// client, with people and content in it: 0 serious or critical violations.
// The views: log in, a conversation (markdown, reactions, a picture, a
// file, a mention), the upload tray, a profile card, search results,
// direct messages, server settings (each tab), account settings, the pins
// panel, the phone layout.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { serverAndBrowser, rest, pageAs, ROOT, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();
const AXE = readFileSync(join(ROOT, "web/node_modules/axe-core/axe.min.js"), "utf8");

/** Serious and critical violations on `page` now, as readable lines. */
async function scan(page, view) {
  await page.evaluate(AXE);
  const result = await page.evaluate(() =>
    window.axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] }, resultTypes: ["violations"] }),
  );
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${view}: ${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map((n) => `${n.target.join(" ")} [${(n.any[0] ?? n.all[0] ?? n.none[0])?.message ?? ""}]`).join(" | ")}`);
}

test("every view passes an axe-core scan with no serious violations", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Access");
  const m = await rest(base, "POST", `/channels/${general.id}/messages`, bob.token, {
    content: `**hello** <@${alice.id}> see https://example.com and \`code\`\n> a quote\n- a list`,
  });
  await rest(base, "PUT", `/channels/${general.id}/messages/${m.id}/reactions/${encodeURIComponent("👍")}/@me`, bob.token);
  const dm = await rest(base, "POST", "/users/@me/channels", bob.token, { recipient_id: alice.id });
  await rest(base, "POST", `/channels/${dm.id}/messages`, bob.token, { content: "a private word" });

  const problems = [];
  // Logged out.
  const login = await (await env.browser.newContext({ bypassCSP: true })).newPage();
  await login.goto(base);
  await login.getByRole("button", { name: "Log in" }).waitFor();
  problems.push(...(await scan(login, "login")));

  const { page: a } = await pageAs(env.browser, base, alice.token, { bypassCSP: true });
  a.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await a.locator(`#m-${m.id} .reaction`).waitFor();
  problems.push(...(await scan(a, "conversation")));
  await a.getByRole("button", { name: "Emoji", exact: true }).click();
  await a.getByRole("dialog", { name: "Pick an emoji" }).getByRole("gridcell", { name: ":thumbsup:" }).waitFor();
  problems.push(...(await scan(a, "emoji picker")));
  await a.keyboard.press("Escape");
  await a.getByRole("dialog", { name: "Pick an emoji" }).waitFor({ state: "detached" });

  await a.locator("#file").setInputFiles({ name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("hi") });
  await a.getByRole("group", { name: "notes.txt" }).waitFor();
  problems.push(...(await scan(a, "upload tray")));
  await a.getByRole("button", { name: "Remove notes.txt" }).click();

  await a.locator(`.mrow.member[data-user-id="${bob.id}"]`).click();
  await a.getByRole("dialog", { name: "Profile of bob" }).getByText(/since/).waitFor();
  problems.push(...(await scan(a, "profile card")));
  await a.keyboard.press("Escape");

  await a.getByRole("searchbox", { name: "Search messages" }).fill("hello");
  await a.getByRole("searchbox", { name: "Search messages" }).press("Enter");
  await a.getByRole("complementary", { name: "Search" }).getByRole("status").filter({ hasText: "1 result" }).waitFor();
  problems.push(...(await scan(a, "search")));
  await a.getByRole("button", { name: "Close search" }).click();

  await a.getByRole("button", { name: "Server settings" }).click();
  const dlg = a.getByRole("dialog", { name: "Server settings" });
  await dlg.getByLabel("Server name").waitFor();
  problems.push(...(await scan(a, "settings: overview")));
  await dlg.getByRole("tab", { name: "Roles" }).click();
  await dlg.getByRole("form").waitFor();
  problems.push(...(await scan(a, "settings: roles")));
  await dlg.getByRole("tab", { name: "Members" }).click();
  await dlg.getByRole("list", { name: "Members" }).waitFor();
  problems.push(...(await scan(a, "settings: members")));
  await dlg.getByRole("tab", { name: "Channels" }).click();
  await dlg.getByLabel("Add a role to this channel's permissions").selectOption({ label: "@everyone" });
  await dlg.getByRole("radio", { name: "Send Messages: Deny" }).waitFor();
  problems.push(...(await scan(a, "settings: channels")));
  await dlg.getByRole("tab", { name: "Invites" }).click();
  await dlg.getByRole("list", { name: "Invites" }).waitFor();
  problems.push(...(await scan(a, "settings: invites")));
  await dlg.getByRole("tab", { name: "Audit log" }).click();
  await dlg.getByRole("list", { name: "Audit log" }).waitFor();
  problems.push(...(await scan(a, "settings: audit log")));
  await dlg.getByRole("button", { name: "Close settings" }).click();

  await a.getByRole("button", { name: "Your account" }).click();
  await a.getByRole("dialog", { name: "Your account" }).getByRole("list", { name: "Sessions" }).locator("li").first().waitFor();
  problems.push(...(await scan(a, "account")));
  await a.getByRole("button", { name: "Close account settings" }).click();

  await a.getByRole("button", { name: "Pins", exact: true }).click();
  await a.getByRole("complementary", { name: "Pinned messages" }).getByRole("status").waitFor();
  problems.push(...(await scan(a, "pins")));
  await a.getByRole("button", { name: "Close search" }).click();

  await a.getByRole("button", { name: "Threads", exact: true }).click();
  await a.getByRole("complementary", { name: /^Threads in/ }).getByText(/^Archived|^None archived/).first().waitFor();
  problems.push(...(await scan(a, "threads")));
  await a.getByRole("button", { name: "Close threads" }).click();

  await a.getByRole("button", { name: /^Direct messages/ }).click();
  await a.getByRole("link", { name: /^bob/ }).click();
  await a.locator("#messages .content", { hasText: "a private word" }).waitFor();
  problems.push(...(await scan(a, "direct messages")));

  const { page: phone } = await pageAs(env.browser, base, alice.token, { bypassCSP: true, viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  await phone.locator(`#m-${m.id}`).waitFor();
  problems.push(...(await scan(phone, "phone")));

  assert.deepEqual(problems, []);
});
