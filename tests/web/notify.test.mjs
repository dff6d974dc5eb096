// Notifications: with alerts on and the tab hidden, a mention or a DM
// raises a browser notification (mentions read as names), other messages
// do not; a muted channel raises none and shows no unread marker, though
// its mentions still count; a muted server shows no unread marker.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild } from "./harness.mjs";

const env = serverAndBrowser();

test("mentions and DMs notify while the tab is hidden; muted places do not", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Pings");
  const random = await rest(base, "POST", `/guilds/${g.id}/channels`, alice.token, { name: "random", type: 0 });

  const { ctx, page: b } = await pageAs(env.browser, base, bob.token);
  b.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  await ctx.grantPermissions(["notifications"], { origin: base });
  // The real Notification, each one also recorded; and a switch for
  // document.hidden (a headless tab is never hidden by itself).
  await ctx.addInitScript(() => {
    window.__notes = [];
    const Real = window.Notification;
    class Recorded extends Real {
      constructor(title, opts) {
        window.__notes.push({ title, body: opts?.body ?? "", tag: opts?.tag ?? "" });
        super(title, opts);
      }
    }
    Object.defineProperty(Recorded, "permission", { get: () => Real.permission });
    Recorded.requestPermission = (...a) => Real.requestPermission(...a);
    window.Notification = Recorded;
    Object.defineProperty(document, "hidden", { configurable: true, get: () => window.__hidden === true });
  });
  await b.reload();
  await b.locator("#channel-name").filter({ hasText: "# general" }).waitFor();
  const alerts = b.getByRole("button", { name: /^Alerts/ });
  // Permission already given: on; the switch turns them off and on.
  assert.equal(await alerts.textContent(), "Alerts on");
  await alerts.click();
  await b.waitForFunction(() => document.getElementById("notify").textContent === "Alerts off");
  await alerts.click();
  await b.waitForFunction(() => document.getElementById("notify").textContent === "Alerts on");
  const notes = () => b.evaluate(() => window.__notes);
  const post = (c, content, token = alice.token) => rest(base, "POST", `/channels/${c}/messages`, token, { content });
  await b.evaluate(() => (window.__hidden = true));

  await post(general.id, `<@${bob.id}> lunch? see <#${random.id}>`);
  await b.waitForFunction(() => window.__notes.length === 1);
  assert.deepEqual((await notes())[0], { title: "alice in #general (Pings)", body: "@bob lunch? see #random", tag: general.id });
  await post(general.id, "no one in particular");
  const dm = await rest(base, "POST", "/users/@me/channels", alice.token, { recipient_id: bob.id });
  await post(dm.id, "just between us");
  await b.waitForFunction(() => window.__notes.length === 2);
  assert.deepEqual((await notes())[1], { title: "alice", body: "just between us", tag: dm.id });

  // Visible again: nothing notifies.
  await b.evaluate(() => (window.__hidden = false));
  await post(general.id, `<@${bob.id}> you there?`);
  await b.locator("#messages .content", { hasText: "you there?" }).waitFor();

  // #random muted: a mention there counts on its badge but raises nothing,
  // and its other messages leave no unread marker.
  await b.getByRole("link", { name: "random" }).click();
  await b.getByRole("button", { name: "Mute channel" }).click();
  await b.getByRole("button", { name: "Unmute channel" }).waitFor();
  await b.getByRole("link", { name: "general", exact: true }).click();
  await b.evaluate(() => (window.__hidden = true));
  await post(random.id, `<@${bob.id}> in the muted one`);
  await post(random.id, "chatter");
  await b.getByRole("link", { name: "random, muted, 1 mention" }).waitFor();
  // A mention in #general after them: the only new notification.
  await post(general.id, `<@${bob.id}> last one`);
  await b.waitForFunction(() => window.__notes.length === 3);
  assert.equal((await notes())[2].body, "@bob last one");

  // The server muted: its button shows no unread marker for new messages.
  await b.evaluate(() => (window.__hidden = false));
  await b.getByRole("button", { name: "Mute server" }).click();
  await b.getByRole("button", { name: /^Direct messages/ }).click();
  await post(general.id, "while away");
  await b.waitForFunction((id) => document.querySelector(`#guild-list button[title="Pings"]`) && !document.querySelector(`#guild-list button.unread`), g.id);
  await b.locator(`#guild-list button[title="Pings"]`).click();
  await b.getByRole("button", { name: "Unmute server" }).waitFor();
  // The member list is back as it was before the DM view.
  await b.locator(`.mrow.member[data-user-id="${alice.id}"]`).waitFor();
  await shot(b, "muted");
  assert.equal((await notes()).length, 3);
});
