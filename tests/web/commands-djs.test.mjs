// Interactions in the web client against an unmodified discord.js bot
// (djs-bot.cjs, everything through the library's own API): a person runs
// its slash commands from the picker (options, autocomplete), presses its
// button (an ephemeral answer only they see) and uses its select, fills its
// modal, waits through its deferred answer, and uses its user and message
// context menus, all in Chromium. A library warning or error ends the bot
// and fails the test. discord.js comes from tests/compat/js
// (tests/compat/setup.sh installs it; CI runs that before these tests).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { BIN, ROOT, startServer, launch, shot, rest, register, tempDir, pageAs } from "./harness.mjs";

const DJS_DIR = join(ROOT, "tests/compat/js");
let server, browser, dir, botProc, owner, member, guild, channel;
let botErrors = "";

before(async () => {
  assert.ok(
    existsSync(join(DJS_DIR, "node_modules/discord.js/package.json")),
    "discord.js is not installed in tests/compat/js: run tests/compat/setup.sh",
  );
  dir = tempDir("commands-djs");
  const out = execFileSync(BIN, ["bot", "create", "djsbot", "--data-dir", dir], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  const token = out.trim().split("\n").pop();
  server = await startServer({ dataDir: dir, env: { THRONG_INTERACTIONS__RESPONSE_TIMEOUT_MS: "3000" } });
  browser = await launch();
  owner = await register(server.url, "owner");
  member = await register(server.url, "member");
  const g = await rest(server.url, "POST", "/guilds", owner.token, { name: "Library Hall" });
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
  botProc = spawn(process.execPath, [join(ROOT, "tests/web/djs-bot.cjs"), server.url, token, guild, DJS_DIR], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  botProc.stderr.on("data", (b) => {
    botErrors += String(b);
  });
  await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error(`the discord.js bot did not get ready: ${botErrors}`)), 60_000);
    botProc.stdout.on("data", (b) => {
      if (String(b).includes("ready")) {
        clearTimeout(t);
        res();
      }
    });
    botProc.once("exit", (c) => rej(new Error(`the discord.js bot exited with ${c}: ${botErrors}`)));
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

test("a person uses an unmodified discord.js bot's commands, components, modal and context menus", async () => {
  const { page: a } = await open(owner);
  const { page: b } = await open(member);
  const input = a.getByLabel("Message", { exact: true });
  const picker = a.locator("#cmd-picker");
  const said = (text) => a.locator(".message .content", { hasText: text });

  // The picker lists what the library registered.
  await input.pressSequentially("/");
  await picker.locator("button.cmd").first().waitFor();
  const names = await picker.locator("button.cmd").evaluateAll((bs) => bs.map((x) => x.dataset.name).sort());
  assert.deepEqual(names, ["form", "fruit", "greet", "panel", "slow"]);

  // Options, as typed; the integer arrives as one (the library's getInteger).
  await input.fill("/greet ");
  await input.pressSequentially("name:Ada times:2");
  await input.press("Enter");
  await said("djs greets Ada x2").waitFor();
  await b.locator(".message .content", { hasText: "djs greets Ada x2" }).waitFor();

  // A button (awaitMessageComponent): the answer is only the presser's.
  await input.fill("/panel");
  await input.press("Enter");
  const panel = a.locator(".message", { hasText: "djs panel" });
  await panel.getByRole("button", { name: "Press" }).click();
  const secret = a.locator(".message", { hasText: "djs: only you pressed it" });
  await secret.locator(".ephemeral", { hasText: "Only you can see this" }).waitFor();
  // The select, on the same message: a public answer.
  await panel.getByLabel("A fruit").selectOption("pear");
  await said("djs picked pear").waitFor();
  await b.locator(".message .content", { hasText: "djs picked pear" }).waitFor();
  assert.equal(await b.locator(".message", { hasText: "only you pressed it" }).count(), 0, "the other member never saw it");
  await shot(a, "commands-djs-01-panel");

  // The modal (labels, as discord.js builds them), then its answer.
  await input.fill("/form");
  await input.press("Enter");
  const modal = a.locator("dialog#modal");
  await modal.getByRole("heading", { name: "Your details" }).waitFor();
  await modal.getByLabel("Your name").fill("Grace");
  await modal.getByRole("button", { name: "Submit" }).click();
  await said("djs thanks Grace").waitFor();

  // deferReply, editReply, followUp.
  await input.fill("/slow");
  await input.press("Enter");
  await said("djs done thinking").waitFor();
  await said("djs one more thing").waitFor();
  assert.equal(await a.locator(".message .thinking").count(), 0, "the thinking message was replaced");

  // Autocomplete (respond).
  await input.fill("/fruit ");
  await input.pressSequentially("name:ap");
  await picker.locator("button.choice", { hasText: "apricot" }).waitFor();
  assert.deepEqual(await picker.locator("button.choice").allTextContents(), ["apple", "apricot"]);
  await picker.locator("button.choice", { hasText: "apricot" }).click();
  await input.press("Enter");
  await said("djs fruit: apricot").waitFor();
  assert.equal(await picker.isHidden(), true, "the picker closed with the command sent");

  // Context menus: a message (targetMessage) and its author (targetUser).
  const greeting = a.locator(`#m-${await a.locator(".message", { hasText: "djs greets Ada x2" }).getAttribute("data-id")}`);
  await greeting.locator(".content").click({ button: "right" });
  const menu = a.getByRole("menu", { name: "Apps" });
  await menu.getByRole("menuitem", { name: /Quote/ }).click();
  await said("djs quotes: djs greets Ada x2").waitFor();
  await greeting.locator(".author").click({ button: "right" });
  await menu.getByRole("menuitem", { name: /Wave/ }).click();
  await said("djs waves at djsbot").waitFor();
  await shot(a, "commands-djs-02-menus");

  assert.equal(botProc.exitCode, null, `the bot is still running: ${botErrors}`);
  assert.ok(!botErrors.includes("LIBRARY PROBLEM"), botErrors);
});
