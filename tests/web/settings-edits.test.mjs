// Server settings are drawn again whenever a gateway event changes what
// they show (another admin makes a role, renames a channel). What the
// person was editing and had not saved stays: typed text with its caret
// and focus, ticked boxes, a picked option; what they left alone shows the
// server's new value; and an edit stays with its own role or channel.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, rest, pageAs, register } from "./harness.mjs";

const env = serverAndBrowser();

test("unsaved edits in server settings survive a redraw from the gateway", async () => {
  const base = env.server.url;
  const alice = await register(base, "editor");
  const g = await rest(base, "POST", "/guilds", alice.token, { name: "Drafts" });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, alice.token);
  const { page: a } = await pageAs(env.browser, base, alice.token);
  a.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await a.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  await a.getByRole("button", { name: "Server settings" }).click();
  const dlg = a.getByRole("dialog", { name: "Server settings" });

  // Roles: a new role, its name being typed, a permission ticked, the caret mid-word.
  await dlg.getByRole("tab", { name: "Roles" }).click();
  await dlg.getByRole("button", { name: "Create role" }).click();
  const roles = dlg.getByRole("listbox", { name: "Roles" });
  await roles.getByRole("option", { name: "new role" }).and(a.locator("[aria-selected=true]")).waitFor();
  const made = (await rest(base, "GET", `/guilds/${g.id}/roles`, alice.token)).find((r) => r.name === "new role");
  const name = dlg.getByLabel("Role name");
  await name.fill("Moderators");
  const manage = dlg.locator("#perm-13");
  const wasTicked = await manage.isChecked();
  await manage.setChecked(!wasTicked);
  await name.focus();
  await name.evaluate((el) => el.setSelectionRange(5, 5));

  // Meanwhile, through the API: another role (GUILD_ROLE_CREATE), and this
  // role's colour changed (GUILD_ROLE_UPDATE): each draws the tab again.
  await rest(base, "POST", `/guilds/${g.id}/roles`, alice.token, { name: "Other" });
  await roles.getByRole("option", { name: "Other" }).waitFor();
  await rest(base, "PATCH", `/guilds/${g.id}/roles/${made.id}`, alice.token, { color: 0x3366ff });
  await a.waitForFunction(() => document.getElementById("role-color")?.value === "#3366ff");
  assert.equal(await name.inputValue(), "Moderators", "the name typed stays");
  assert.equal(await manage.isChecked(), !wasTicked, "the box ticked stays");
  const caret = await a.evaluate(() => [document.activeElement?.id, document.activeElement?.selectionStart]);
  assert.deepEqual(caret, ["role-name", 5], "focus and caret stay");
  // Typing goes on where it was.
  await a.keyboard.type("X");
  assert.equal(await name.inputValue(), "ModerXators");

  // Another role's form shows that role, not this edit.
  await roles.getByRole("option", { name: "Other" }).click();
  await dlg.getByRole("form", { name: "Edit Other" }).waitFor();
  assert.equal(await name.inputValue(), "Other");

  // Channels: a topic being written in #general while a channel is made elsewhere.
  await dlg.getByRole("tab", { name: "Channels" }).click();
  const channels = dlg.getByRole("listbox", { name: "Channels" });
  await channels.getByRole("option", { name: "# general" }).click();
  await dlg.getByRole("form", { name: "Edit general" }).waitFor();
  await dlg.getByLabel("Topic").fill("half a thought");
  await dlg.getByLabel("Slow mode").selectOption({ label: "30 seconds" });
  const other = await rest(base, "POST", `/guilds/${g.id}/channels`, alice.token, { name: "elsewhere", type: 0 });
  await channels.getByRole("option", { name: "# elsewhere" }).waitFor();
  assert.equal(await dlg.getByLabel("Topic").inputValue(), "half a thought");
  assert.equal(await dlg.getByLabel("Slow mode").inputValue(), "30");
  // Saved, it is what the server has.
  await dlg.getByRole("button", { name: "Save changes" }).click();
  await dlg.getByRole("status").filter({ hasText: "Saved general." }).waitFor();
  const saved = await rest(base, "GET", `/channels/${general.id}`, alice.token);
  assert.equal(saved.topic, "half a thought");
  assert.equal(saved.rate_limit_per_user, 30);
  // The other channel's form is its own.
  await channels.getByRole("option", { name: "# elsewhere" }).click();
  await dlg.getByRole("form", { name: "Edit elsewhere" }).waitFor();
  assert.equal(await dlg.getByLabel("Topic").inputValue(), other.topic ?? "");
});
