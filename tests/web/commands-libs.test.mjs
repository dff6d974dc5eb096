// Interactions in the web client against unmodified bots of the two
// libraries, each through its own API: discord.js (djs-bot.cjs) and
// discord.py (dpy-bot.py). For each, a person runs its slash commands from
// the picker (options, autocomplete), presses its button (an ephemeral
// answer only they see) and uses its select, fills its modal, waits through
// its deferred answer, and uses its user and message context menus, all in
// Chromium. A library warning or error fails the test. The libraries come
// from tests/compat (tests/compat/setup.sh installs them; CI runs that
// before these tests).
import { describe, test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { BIN, ROOT, startServer, launch, shot, rest, register, tempDir, pageAs } from "./harness.mjs";

const LIBS = [
  {
    prefix: "djs",
    needs: join(ROOT, "tests/compat/js/node_modules/discord.js/package.json"),
    command: (url, token, guild) => [process.execPath, [join(ROOT, "tests/web/djs-bot.cjs"), url, token, guild, join(ROOT, "tests/compat/js")]],
  },
  {
    prefix: "dpy",
    needs: join(ROOT, "tests/compat/.venv-zstd/bin/python"),
    command: (url, token, guild) => [join(ROOT, "tests/compat/.venv-zstd/bin/python"), [join(ROOT, "tests/web/dpy-bot.py"), url, token, guild]],
  },
];

/// A server with an owner, a member and the library's bot in one guild.
async function world(lib, t) {
  assert.ok(existsSync(lib.needs), `${lib.needs} is missing: run tests/compat/setup.sh`);
  t.dir = tempDir(`commands-${lib.prefix}`);
  const out = execFileSync(BIN, ["bot", "create", `${lib.prefix}bot`, "--data-dir", t.dir], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  const token = out.trim().split("\n").pop();
  t.server = await startServer({ dataDir: t.dir, env: { THRONG_INTERACTIONS__RESPONSE_TIMEOUT_MS: "3000" } });
  t.browser = await launch();
  t.owner = await register(t.server.url, "owner");
  t.member = await register(t.server.url, "member");
  const g = await rest(t.server.url, "POST", "/guilds", t.owner.token, { name: "Library Hall" });
  const channel = g.channels[0].id;
  const inv = await rest(t.server.url, "POST", `/channels/${channel}/invites`, t.owner.token, { max_uses: 0 });
  await rest(t.server.url, "POST", `/invites/${inv.code}`, t.member.token, {});
  const me = await rest(t.server.url, "GET", "/users/@me", `Bot ${token}`);
  await rest(t.server.url, "POST", `/oauth2/authorize?client_id=${me.id}&scope=bot+applications.commands`, t.owner.token, {
    guild_id: g.id,
    permissions: "0",
    authorize: true,
  });
  const [cmd, args] = lib.command(t.server.url, token, g.id);
  t.errors = "";
  t.bot = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
  t.bot.stderr.on("data", (b) => {
    t.errors += String(b);
  });
  await new Promise((res, rej) => {
    const timer = setTimeout(() => rej(new Error(`the ${lib.prefix} bot did not get ready: ${t.errors}`)), 60_000);
    t.bot.stdout.on("data", (b) => {
      if (String(b).includes("ready")) {
        clearTimeout(timer);
        res();
      }
    });
    t.bot.once("exit", (c) => rej(new Error(`the ${lib.prefix} bot exited with ${c}: ${t.errors}`)));
  });
}

async function open(t, user) {
  const { ctx, page } = await pageAs(t.browser, t.server.url, user.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  return { ctx, page };
}

for (const lib of LIBS) {
  describe(`an unmodified ${lib.prefix} bot`, () => {
    const t = {};
    before(() => world(lib, t));
    after(async () => {
      t.bot?.kill();
      await t.browser?.close();
      await t.server?.stop();
      if (t.dir) rmSync(t.dir, { recursive: true, force: true });
    });
    test("a person uses its commands, components, modal and context menus", async () => {
      try {
        await scenario(lib, t);
      } catch (e) {
        // What the bot said (its library's log) belongs with the failure.
        e.message += `\n--- the ${lib.prefix} bot's stderr ---\n${t.errors.slice(-12000)}`;
        throw e;
      }
    });
  });
}

async function scenario(lib, t) {
  const p = lib.prefix;
  const { page: a } = await open(t, t.owner);
  const { page: b } = await open(t, t.member);
  const input = a.getByLabel("Message", { exact: true });
  const picker = a.locator("#cmd-picker");
  const said = (text) => a.locator(".message .content", { hasText: text });

  // The picker lists what the library registered.
  await input.pressSequentially("/");
  await picker.locator("button.cmd").first().waitFor();
  const names = await picker.locator("button.cmd").evaluateAll((bs) => bs.map((x) => x.dataset.name).sort());
  assert.deepEqual(names, ["form", "fruit", "greet", "panel", "slow"]);

  // Options, as typed; the integer arrives as one.
  await input.fill("/greet ");
  await input.pressSequentially("name:Ada times:2");
  await input.press("Enter");
  await said(`${p} greets Ada x2`).waitFor();
  await b.locator(".message .content", { hasText: `${p} greets Ada x2` }).waitFor();

  // A button (awaitMessageComponent): the answer is only the presser's.
  await input.fill("/panel");
  await input.press("Enter");
  const panel = a.locator(".message", { hasText: `${p} panel` });
  await panel.getByRole("button", { name: "Press" }).click();
  const secret = a.locator(".message", { hasText: `${p}: only you pressed it` });
  await secret.locator(".ephemeral", { hasText: "Only you can see this" }).waitFor();
  // The select, on the same message: a public answer.
  await panel.getByLabel("A fruit").selectOption("pear");
  await said(`${p} picked pear`).waitFor();
  await b.locator(".message .content", { hasText: `${p} picked pear` }).waitFor();
  assert.equal(await b.locator(".message", { hasText: "only you pressed it" }).count(), 0, "the other member never saw it");
  await shot(a, `commands-${p}-01-panel`);

  // The modal (labels, as discord.js builds them), then its answer.
  await input.fill("/form");
  await input.press("Enter");
  const modal = a.locator("dialog#modal");
  await modal.getByRole("heading", { name: "Your details" }).waitFor();
  await modal.getByLabel("Your name").fill("Grace");
  await modal.getByRole("button", { name: "Submit" }).click();
  await said(`${p} thanks Grace`).waitFor();

  // deferReply, editReply, followUp.
  await input.fill("/slow");
  await input.press("Enter");
  await said(`${p} done thinking`).waitFor();
  await said(`${p} one more thing`).waitFor();
  assert.equal(await a.locator(".message .thinking").count(), 0, "the thinking message was replaced");

  // Autocomplete (respond).
  await input.fill("/fruit ");
  await input.pressSequentially("name:ap");
  await picker.locator("button.choice", { hasText: "apricot" }).waitFor();
  assert.deepEqual(await picker.locator("button.choice").allTextContents(), ["apple", "apricot"]);
  await picker.locator("button.choice", { hasText: "apricot" }).click();
  await input.press("Enter");
  await said(`${p} fruit: apricot`).waitFor();
  assert.equal(await picker.isHidden(), true, "the picker closed with the command sent");

  // Context menus: a message (targetMessage) and its author (targetUser).
  const greeting = a.locator(`#m-${await a.locator(".message", { hasText: `${p} greets Ada x2` }).getAttribute("data-id")}`);
  await greeting.locator(".content").click({ button: "right" });
  const menu = a.getByRole("menu", { name: "Apps" });
  await menu.getByRole("menuitem", { name: /Quote/ }).click();
  await said(`${p} quotes: ${p} greets Ada x2`).waitFor();
  await greeting.locator(".author").click({ button: "right" });
  await menu.getByRole("menuitem", { name: /Wave/ }).click();
  await said(`${p} waves at ${p}bot`).waitFor();
  await shot(a, `commands-${p}-02-menus`);

  assert.equal(t.bot.exitCode, null, `the bot is still running: ${t.errors}`);
  assert.ok(!t.errors.includes("LIBRARY PROBLEM"), t.errors);
}
