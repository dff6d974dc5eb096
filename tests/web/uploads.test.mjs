// Files in messages: picked with the button, dropped on the conversation
// or pasted into the composer; shown in a tray with a preview and the
// server's limits before they go; uploaded with the message; shown to
// everyone in the channel (an image inline, another file as a card to
// download). A file past the limit is refused before any upload.
import { test } from "node:test";
import assert from "node:assert/strict";
import { deflateSync } from "node:zlib";
import { serverAndBrowser, shot, rest, register, pageAs } from "./harness.mjs";

const env = serverAndBrowser();

const CRC = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(buf) {
  let c = 0xffffffff;
  for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
function chunk(type, data) {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body));
  return Buffer.concat([len, body, crc]);
}
/** A real PNG, `w`×`h`, a colour gradient (8-bit RGB). */
function png(w, h) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const raw = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) raw.set([(x * 255) / w, (y * 255) / h, 160], y * (1 + 3 * w) + 1 + 3 * x);
  const sig = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([sig, chunk("IHDR", ihdr), chunk("IDAT", deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

test("a PNG picked on the page reaches both people as an image; a dropped file as a card; too big is refused", async () => {
  const base = env.server.url;
  const alice = await register(base, "alice");
  const bob = await register(base, "bob");
  const g = await rest(base, "POST", "/guilds", alice.token, { name: "Files" });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, alice.token);
  const inv = await rest(base, "POST", `/channels/${general.id}/invites`, alice.token, {});
  await rest(base, "POST", `/invites/${inv.code}`, bob.token);

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
