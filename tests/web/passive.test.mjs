// A large server the client does not have open keeps its session passive
// (issue #31): the server sends which of its channels have new messages
// (PASSIVE_UPDATE_V1), not the messages. The client marks the server and
// the channel unread, and reads the channel from the server when it is
// opened; from then on its messages arrive live. Here a server of more
// than 2 members is large, and a session has one server open at a time.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startServer, launch, rest, pageAs, register, shot, stats } from "./harness.mjs";

const env = {};
before(async () => {
  env.server = await startServer({
    env: {
      THRONG_GATEWAY__PASSIVE_GUILD_MEMBERS: "2",
      THRONG_GATEWAY__PASSIVE_UPDATE_MS: "100",
      THRONG_GATEWAY__OPEN_GUILDS_MAX: "1",
    },
  });
  env.browser = await launch();
});
after(async () => {
  await env.browser?.close();
  await env.server?.stop();
});

test("a large server that is not open turns unread from the passive update, and shows its messages once opened", async () => {
  const base = env.server.url;
  const [alice, bob, carol] = [await register(base, "alice"), await register(base, "bob"), await register(base, "carol")];
  const crowd = await rest(base, "POST", "/guilds", alice.token, { name: "Crowd" });
  const [hall] = await rest(base, "GET", `/guilds/${crowd.id}/channels`, alice.token);
  for (const who of [bob, carol]) {
    const inv = await rest(base, "POST", `/channels/${hall.id}/invites`, alice.token, {});
    await rest(base, "POST", `/invites/${inv.code}`, who.token);
  }
  await rest(base, "POST", "/guilds", bob.token, { name: "Quiet" });

  const { page } = await pageAs(env.browser, base, bob.token);
  page.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await page.locator("#guild-name").waitFor();
  const received = async (t) => (await stats(page)).received[t] ?? 0;
  // Opens a server and waits for its member list (asked for with op 14:
  // the server has then been told which server is open), told apart by
  // whether Carol, a member of the crowd's server only, is in it. The rail
  // is drawn anew on every unread change: a click that lands as its button
  // is replaced is tried again.
  const openServer = async (name, withCarol) => {
    for (let tries = 0; (await page.locator("#guild-name").textContent()) !== name; tries++) {
      assert.ok(tries < 5, `${name} never opened`);
      await page.locator("#guild-list .round.guild", { hasText: name }).click();
      await page.locator("#guild-name").filter({ hasText: name }).waitFor({ timeout: 2000 }).catch(() => {});
    }
    await page.waitForFunction(
      ([bob, carol, want]) => {
        const ids = [...document.querySelectorAll("#members .mrow")].map((r) => r.dataset.userId);
        return ids.includes(bob) && ids.includes(carol) === want;
      },
      [bob.id, carol.id, withCarol],
    );
  };
  // Bob has the crowd's server open, then looks at his own: the crowd's is
  // open no longer (one at a time here).
  await openServer("Crowd", true);
  await openServer("Quiet", false);
  const crowdButton = page.locator("#guild-list .round.guild", { hasText: "Crowd" });
  assert.equal(await crowdButton.locator(".sr-only").textContent(), "Crowd");
  const [messagesBefore, updatesBefore] = [await received("MESSAGE_CREATE"), await received("PASSIVE_UPDATE_V1")];

  const hello = await rest(base, "POST", `/channels/${hall.id}/messages`, alice.token, { content: "hello crowd" });
  await crowdButton.and(page.locator(".unread")).waitFor();
  assert.equal(await crowdButton.locator(".sr-only").textContent(), "Crowd, unread messages");
  assert.ok((await received("PASSIVE_UPDATE_V1")) > updatesBefore, "the passive update came");
  assert.equal(await received("MESSAGE_CREATE"), messagesBefore, "not the message itself");
  await shot(page, "passive-unread");

  // Opened: the message is read from the server, and the next one is live.
  await openServer("Crowd", true);
  await page.locator(`#m-${hello.id}`).waitFor();
  const live = await rest(base, "POST", `/channels/${hall.id}/messages`, alice.token, { content: "live now" });
  await page.locator(`#m-${live.id}`).waitFor();
  assert.ok((await received("MESSAGE_CREATE")) > messagesBefore, "live once open");
});
