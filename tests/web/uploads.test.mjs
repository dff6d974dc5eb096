// Files in messages: picked with the button, dropped on the conversation
// or pasted into the composer; shown in a tray with a preview and the
// server's limits before they go; uploaded with the message; shown to
// everyone in the channel (an image inline, another file as a card to
// download). A file past the limit is refused before any upload.
import { test } from "node:test";
import assert from "node:assert/strict";
import { serverAndBrowser, shot, rest, pageAs, twoInAGuild, png } from "./harness.mjs";

const env = serverAndBrowser();

test("a PNG picked on the page reaches both people as an image; a dropped file as a card; too big is refused", async () => {
  const base = env.server.url;
  const { alice, bob, g, general } = await twoInAGuild(base, "Files");

  const { page: a } = await pageAs(env.browser, base, alice.token);
  const { page: b } = await pageAs(env.browser, base, bob.token);
  for (const p of [a, b]) p.on("pageerror", (e) => assert.fail(`page error: ${e}`));
  for (const p of [a, b]) await p.locator("#input:not([disabled])").waitFor();

  // The button: a PNG waits in the tray with its preview and the limits.
  await a.locator("#file").setInputFiles({ name: "plan.png", mimeType: "image/png", buffer: png(64, 48) });
  const tray = a.getByRole("group", { name: "Files to send" });
  await tray.getByRole("group", { name: "plan.png" }).waitFor();
  await a.waitForFunction(() => document.querySelector("#uploads .staged img.thumb")?.naturalWidth === 64);
  assert.match(await tray.textContent(), /Up to 10 files of 25 MB each/);
  await a.locator("#input").fill("here's the plan");
  await shot(a, "uploads-tray");
  await a.locator("#input").press("Enter");

  // Both see the image, loaded, under the text; the tray is gone.
  const shown = async (p) => {
    await p.waitForFunction(
      () => [...document.querySelectorAll(".message")].some((li) => li.textContent.includes("here's the plan") && li.querySelector(".attachments img")?.naturalWidth === 64),
      null,
      { timeout: 15_000 },
    );
  };
  await shown(a);
  await shown(b);
  assert.equal(await tray.isHidden(), true);
  const [sent] = await rest(base, "GET", `/channels/${general.id}/messages?limit=1`, bob.token);
  assert.equal(sent.content, "here's the plan");
  assert.deepEqual(
    sent.attachments.map((x) => [x.filename, x.content_type, x.width, x.height]),
    [["plan.png", "image/png", 64, 48]],
  );

  // A file dropped on the conversation goes as a card with a download link;
  // one pasted into the composer goes with it.
  await a.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(["minutes of the meeting\n"], "notes.txt", { type: "text/plain" }));
    const target = document.getElementById("messages");
    target.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
    target.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
    const paste = new DataTransfer();
    paste.items.add(new File(["a,b\n1,2\n"], "table.csv", { type: "text/csv" }));
    document.getElementById("input").dispatchEvent(new ClipboardEvent("paste", { clipboardData: paste, bubbles: true, cancelable: true }));
  });
  await tray.getByRole("group", { name: "notes.txt" }).waitFor();
  await tray.getByRole("group", { name: "table.csv" }).waitFor();
  // Taken back out of the tray, the pasted one stays behind.
  await tray.getByRole("button", { name: "Remove table.csv" }).click();
  await tray.getByRole("group", { name: "table.csv" }).waitFor({ state: "detached" });
  await a.locator("#input").press("Enter");
  const card = b.locator(".message .file-card a", { hasText: "notes.txt" });
  await card.waitFor({ timeout: 15_000 });
  assert.equal(await card.getAttribute("download"), "notes.txt");
  await shot(b, "uploads");
  const href = await card.getAttribute("href");
  assert.match(href, /^\/attachments\//);
  const got = await b.evaluate(async (u) => (await fetch(u)).text(), href);
  assert.equal(got, "minutes of the meeting\n");
  const [second] = await rest(base, "GET", `/channels/${general.id}/messages?limit=1`, bob.token);
  assert.deepEqual(second.attachments.map((x) => x.filename), ["notes.txt"], "the removed file did not go");

  // Past the server's limit (25 MiB): refused in the tray, nothing uploaded.
  await a.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File([new Uint8Array(26 << 20)], "huge.bin", { type: "application/octet-stream" }));
    document.getElementById("input").dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
  });
  const alert = tray.getByRole("alert");
  await alert.waitFor();
  assert.match(await alert.textContent(), /huge\.bin is 26 MB: files can be up to 25 MB/);
  assert.equal(await tray.getByRole("group", { name: "huge.bin" }).count(), 0);
});
