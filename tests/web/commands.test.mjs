// Interactions in the web client, with a real bot on the gateway
// (interactions-bot.mjs): a person types "/", picks a command from the
// picker, fills its option and sends; the bot's answer appears with its
// button and select; the button's answer is ephemeral ("Only you can see
// this", dismissable) and another member never sees it; the select, a
// modal, a deferred answer ("is thinking…"), autocomplete choices, and a
// bot that does not answer ("The application did not respond"); then the
// user and message context menus (right click → Apps) and user and
// channel selects.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { BIN, ROOT, startServer, launch, shot, rest, register, tempDir, pageAs } from "./harness.mjs";

let server, browser, dir, botProc, owner, member, guild, channel;

before(async () => {
  dir = tempDir("commands");
  const out = execFileSync(BIN, ["bot", "create", "helper", "--data-dir", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const token = out.trim().split("\n").pop();
  // A short response timeout, so the silent command fails quickly.
  server = await startServer({ dataDir: dir, env: { THRONG_INTERACTIONS__RESPONSE_TIMEOUT_MS: "1500" } });
  browser = await launch();
  owner = await register(server.url, "owner");
  member = await register(server.url, "member");
  const g = await rest(server.url, "POST", "/guilds", owner.token, { name: "Command Hall" });
  guild = g.id;
  channel = g.channels[0].id;
  const inv = await rest(server.url, "POST", `/channels/${channel}/invites`, owner.token, { max_uses: 0 });
  await rest(server.url, "POST", `/invites/${inv.code}`, member.token, {});
  const me = await rest(server.url, "GET", "/users/@me", `Bot ${token}`);
  await rest(server.url, "POST", `/oauth2/authorize?client_id=${me.id}&scope=bot+applications.commands`, owner.token, {
    guild_id: guild,
    permissions: "0",
    authorize: true,
  });
  botProc = spawn(process.execPath, ["--experimental-websocket", "--no-warnings", join(ROOT, "tests/web/interactions-bot.mjs"), server.url, token, guild], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error("the bot did not get ready")), 30_000);
    botProc.stdout.on("data", (b) => {
      if (String(b).includes("ready")) {
        clearTimeout(t);
        res();
      }
    });
    botProc.once("exit", (c) => rej(new Error(`the bot exited with ${c}`)));
  });
});

after(async () => {
  botProc?.kill();
  await browser?.close();
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function open(user) {
  const { ctx, page } = await pageAs(browser, server.url, user.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  return { ctx, page };
}

test("a person runs slash commands, uses buttons, selects and modals, and sees what only they may see", async () => {
  const { page: a } = await open(owner);
  const { page: b } = await open(member);
  const input = a.getByLabel("Message", { exact: true });

  // The picker: every command of the guild's bots, as the person types.
  await input.pressSequentially("/");
  const picker = a.locator("#cmd-picker");
  await picker.locator("button.cmd").first().waitFor();
  const names = await picker.locator("button.cmd").evaluateAll((bs) => bs.map((b) => b.dataset.name).sort());
  assert.deepEqual(names, ["echo", "form", "fruit", "look", "slow", "think", "who"]);
  await shot(a, "commands-01-picker");
  await input.pressSequentially("ec");
  assert.deepEqual(await picker.locator("button.cmd").evaluateAll((bs) => bs.map((b) => b.dataset.name)), ["echo"]);
  await picker.locator('button.cmd[data-name="echo"]').click();
  assert.equal(await input.inputValue(), "/echo ");
  await picker.locator('.opt.required[data-opt="text"]').waitFor();

  // A required option missing: said, nothing sent, the draft stays.
  await input.press("Enter");
  await a.locator("#interaction-state").filter({ hasText: 'Missing required option "text"' }).waitFor();
  assert.equal(await input.inputValue(), "/echo ");

  // Sent: the bot's answer, with who used which command, its button and select.
  await input.pressSequentially("text:hello there");
  await input.press("Enter");
  const answer = a.locator(".message", { hasText: "echo: hello there" });
  await answer.waitFor();
  assert.equal(await answer.locator(".used").textContent(), "owner used /echo");
  await answer.getByRole("button", { name: "Again" }).waitFor();
  await b.locator(".message", { hasText: "echo: hello there" }).waitFor();
  await shot(a, "commands-02-answer");

  // The button: an ephemeral answer, for the presser only.
  await answer.getByRole("button", { name: "Again" }).click();
  const secret = a.locator(".message", { hasText: "pressed" });
  await secret.locator(".ephemeral", { hasText: "Only you can see this" }).waitFor();
  await shot(a, "commands-03-ephemeral");
  // The select: a public answer.
  await answer.getByLabel("Pick one").selectOption("b");
  await a.locator(".message .content", { hasText: "picked: b" }).waitFor();
  await b.locator(".message .content", { hasText: "picked: b" }).waitFor();
  assert.equal(await b.locator(".message", { hasText: "pressed" }).count(), 0, "the other member never saw the ephemeral answer");
  // A button on the ephemeral answer updates it, still for the presser only.
  await secret.getByRole("button", { name: "Once more" }).click();
  const twice = a.locator(".message", { hasText: "pressed twice" });
  await twice.locator(".ephemeral", { hasText: "Only you can see this" }).waitFor();
  assert.equal(await twice.getByRole("button", { name: "Once more" }).count(), 0, "its button is gone");
  assert.equal(await b.locator(".message", { hasText: "pressed" }).count(), 0, "the other member never saw either");
  await twice.getByRole("button", { name: "Dismiss message" }).click();
  await twice.waitFor({ state: "detached" });

  // A modal: a dialog with the bot's fields; its submission is answered.
  await input.fill("/form");
  await input.press("Enter");
  const modal = a.locator("dialog#modal");
  await modal.getByRole("heading", { name: "Who are you?" }).waitFor();
  await modal.getByLabel("Your name").fill("Ada");
  await shot(a, "commands-04-modal");
  await modal.getByRole("button", { name: "Submit" }).click();
  await a.locator(".message .content", { hasText: "hello Ada" }).waitFor();

  // Deferred: "thinking" first, then the followup in its place.
  await input.fill("/think");
  await input.press("Enter");
  await a.locator(".message .content", { hasText: "done thinking" }).waitFor();
  assert.equal(await a.locator(".message .thinking").count(), 0, "the thinking message was replaced");

  // Autocomplete: choices from the bot as the person types.
  await input.fill("/fruit ");
  await input.pressSequentially("q:ap");
  await picker.locator("button.choice", { hasText: "apricot" }).waitFor();
  assert.deepEqual(await picker.locator("button.choice").allTextContents(), ["apple", "apricot"]);
  await shot(a, "commands-05-autocomplete");
  await picker.locator("button.choice", { hasText: "apricot" }).click();
  await input.press("Enter");
  await a.locator(".message .content", { hasText: "fruit: apricot" }).waitFor();

  // No answer: the person is told.
  await input.fill("/slow");
  await input.press("Enter");
  await a.locator("#interaction-state").filter({ hasText: "The application did not respond" }).waitFor();
  await shot(a, "commands-06-no-answer");
});

test("a person uses the Apps menu of a user and of a message, and user and channel selects", async () => {
  const { page: a } = await open(owner);
  const { page: b } = await open(member);
  // The member says something: the owner's client knows them now.
  await b.getByLabel("Message", { exact: true }).fill("hi from the member");
  await b.getByLabel("Message", { exact: true }).press("Enter");
  await a.locator(".message", { hasText: "hi from the member" }).waitFor();
  const said = a.locator(`#m-${await a.locator(".message", { hasText: "hi from the member" }).getAttribute("data-id")}`);

  // Right click on a message: its Apps menu; the bot gets the message resolved.
  await said.locator(".content").click({ button: "right" });
  const menu = a.getByRole("menu", { name: "Apps" });
  await menu.getByRole("menuitem", { name: /Quote/ }).waitFor();
  assert.deepEqual(await menu.locator(".ctx-item").evaluateAll((bs) => bs.map((b) => b.firstChild.textContent)), ["Quote"]);
  await shot(a, "commands-07-message-menu");
  await menu.getByRole("menuitem", { name: /Quote/ }).click();
  const quoted = a.locator(".message", { hasText: "quoted: hi from the member" });
  await quoted.waitFor();
  assert.equal(await quoted.locator(".used").textContent(), "owner used Quote");
  await b.locator(".message .content", { hasText: "quoted: hi from the member" }).waitFor();

  // Right click on an author: the user's Apps menu.
  await said.locator(".author").click({ button: "right" });
  await menu.getByRole("menuitem", { name: /Wave/ }).click();
  await a.locator(".message .content", { hasText: "waved at member" }).waitFor();
  assert.equal(await menu.isHidden(), true, "the menu closed");

  // Selects of users and channels offer what the client knows of the guild.
  const input = a.getByLabel("Message", { exact: true });
  await input.fill("/who");
  await input.press("Enter");
  const ask = a.locator(".message", { hasText: "whom and where?" });
  await ask.getByLabel("Pick a user").waitFor();
  await shot(a, "commands-08-selects");
  await ask.getByLabel("Pick a user").selectOption({ label: "member" });
  await a.locator(".message .content", { hasText: "chose user: member" }).waitFor();
  await ask.getByLabel("Pick a channel").selectOption({ label: "#general" });
  await a.locator(".message .content", { hasText: "chose channel: #general" }).waitFor();

  // An attachment option: a file chosen in the picker goes with the command.
  await input.fill("/look ");
  await input.press("End");
  await input.pressSequentially(" ");
  const picker = a.locator("#cmd-picker");
  await picker.locator('.opt.required[data-opt="file"]').waitFor();
  await input.press("Enter");
  await a.locator("#interaction-state").filter({ hasText: 'Missing required file "file"' }).waitFor();
  await picker.getByLabel("File for file").setInputFiles({ name: "hello.txt", mimeType: "text/plain", buffer: Buffer.from("hi from a file") });
  await picker.locator(".file-name", { hasText: "hello.txt" }).waitFor();
  await shot(a, "commands-09-attachment");
  await input.press("Enter");
  await a.locator(".message .content", { hasText: "looked at hello.txt: hi from a file" }).waitFor();
});
