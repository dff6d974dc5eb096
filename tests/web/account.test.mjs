// The user's own settings: display name (live in their other tab),
// picture, password (the wrong current one refused; the new one works, the
// old one not), and "log out everywhere else" ending another session
// (its tab is logged out at once: the server closes its gateway with 4004).
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, register, pageAs, png } from "./harness.mjs";

const env = serverAndBrowser();

test("display name, picture, password and sessions from the account settings", async () => {
  const base = env.server.url;
  const alice = await register(base, "alice");
  const other = await rest(base, "POST", "/auth/login", null, { login: "alice", password: "correct horse" });
  await rest(base, "POST", "/guilds", alice.token, { name: "Home base" });

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: a2 } = await pageAs(env.browser, base, other.token);
  for (const p of [a, a2]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, a2]) await p.locator("#me-name").filter({ hasText: "alice" }).waitFor();

  await a.getByRole("button", { name: "Your account" }).click();
  const dlg = a.getByRole("dialog", { name: "Your account" });
  const status = dlg.getByRole("status");
  await dlg.getByLabel(/^Display name/).fill("Alice Liddell");
  await dlg.getByRole("button", { name: "Save name" }).click();
  await status.filter({ hasText: "Display name saved." }).waitFor();
  await a.locator("#me-name").filter({ hasText: "Alice Liddell" }).waitFor();
  // Her other tab follows (USER_UPDATE).
  await a2.locator("#me-name").filter({ hasText: "Alice Liddell" }).waitFor();

  await dlg.getByLabel(/^Picture/).setInputFiles({ name: "me.png", mimeType: "image/png", buffer: png(1, 1) });
  await status.filter({ hasText: "Picture saved." }).waitFor();
  const meNow = await rest(base, "GET", "/users/@me", alice.token);
  assert.equal(meNow.global_name, "Alice Liddell");
  assert.match(meNow.avatar ?? "", /^[0-9a-f]{32}$/);

  // Sessions: this one and the other tab; log out everywhere else ends it.
  await dlg.getByRole("list", { name: "Sessions" }).getByText("This browser").waitFor();
  assert.equal(await dlg.getByRole("list", { name: "Sessions" }).locator("li").count(), 2);
  await shot(a, "account");
  await dlg.getByRole("button", { name: "Log out everywhere else" }).click();
  await status.filter({ hasText: "Logged out 1 other session." }).waitFor();
  // The other session's token is revoked: the API refuses it, and its open
  // gateway connection is closed with 4004, so that tab is logged out.
  await assert.rejects(rest(base, "GET", "/users/@me", other.token), /401/);
  await a2.getByRole("button", { name: "Log in" }).waitFor();

  // Password: a wrong current one is refused in the dialog; the right one
  // changes it.
  await dlg.getByLabel("Current password").fill("not my password");
  await dlg.getByLabel(/^New password/).fill("a much better one");
  await dlg.getByRole("button", { name: "Change password" }).click();
  await status.and(a.locator(".error")).waitFor();
  await dlg.getByLabel("Current password").fill("correct horse");
  await dlg.getByLabel(/^New password/).fill("a much better one");
  await dlg.getByRole("button", { name: "Change password" }).click();
  await status.filter({ hasText: "Password changed" }).waitFor();
  await rest(base, "POST", "/auth/login", null, { login: "alice", password: "a much better one" });
  await assert.rejects(rest(base, "POST", "/auth/login", null, { login: "alice", password: "correct horse" }));
  // This tab still works.
  await rest(base, "GET", "/users/@me", alice.token).catch(() => assert.fail("the changing session was logged out"));
});
