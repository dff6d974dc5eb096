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
  const listsAbove = (n) => page.waitForFunction((n) => (window.__throng.stats().received.GUILD_MEMBER_LIST_UPDATE ?? 0) > n, n);
  // The server shown first has its member list: its op 14 was taken (one
  // still on its way would open it again after the click below).
  await listsAbove(0);
  const first = await page.locator("#guild-name").textContent();
  const lists = await received("GUILD_MEMBER_LIST_UPDATE");
  // Bob looks at his own server: the crowd's is open no longer, once the
  // server has taken his op 14 for it (its list is back; the crowd's actor
  // was told before).
  await page.locator("#guild-list .round.guild", { hasText: "Quiet" }).click();
  await page.locator("#guild-name").filter({ hasText: "Quiet" }).waitFor();
  if (first !== "Quiet") await listsAbove(lists);
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
  await crowdButton.click();
  await page.locator(`#m-${hello.id}`).waitFor();
  const live = await rest(base, "POST", `/channels/${hall.id}/messages`, alice.token, { content: "live now" });
  await page.locator(`#m-${live.id}`).waitFor();
  assert.ok((await received("MESSAGE_CREATE")) > messagesBefore, "live once open");
});
