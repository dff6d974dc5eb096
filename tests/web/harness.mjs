// Shared helpers for the browser tests: a throng server on a free loopback
// port with a fresh data directory, Debian's chromium through Playwright,
// a small REST client, and artifact paths.
import { spawn, execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import { mkdtempSync, mkdirSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import net from "node:net";
import { deflateSync } from "node:zlib";
import { before, after } from "node:test";

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const require = createRequire(join(ROOT, "web/package.json"));
export const { chromium } = require("playwright-core");

export const BIN = process.env.THRONG_BIN || join(ROOT, "target/debug/throng");
export const ARTIFACTS = join(ROOT, ".artifacts/web");
mkdirSync(ARTIFACTS, { recursive: true });
export const ADMIN = "web-test-admin";

/// A screenshot of a page, or of one element of it (a locator).
export function shot(target, name) {
  return target.screenshot({ path: join(ARTIFACTS, `${name}.png`) });
}

async function freePort() {
  return new Promise((res, rej) => {
    const s = net.createServer();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

export function tempDir(prefix) {
  return mkdtempSync(join(tmpdir(), `throng-web-${prefix}-`));
}

/// `throng seed` into `dir`; returns the fixture.
export function seed(dir, args) {
  const out = join(dir, "fixture.json");
  execFileSync(BIN, ["seed", "--data-dir", dir, ...args, "--out", out], { stdio: ["ignore", "ignore", "inherit"] });
  return JSON.parse(readFileSync(out, "utf8"));
}

/// Starts `throng serve`; resolves once /health says ok.
export async function startServer({ dataDir, env = {} } = {}) {
  const dir = dataDir ?? tempDir("data");
  const port = await freePort();
  const proc = spawn(BIN, ["serve", "--listen", `127.0.0.1:${port}`, "--data-dir", dir], {
    env: {
      ...process.env,
      THRONG_ADMIN_TOKEN: ADMIN,
      THRONG_REST_REQUESTS_PER_WINDOW: "100000",
      RUST_LOG: process.env.RUST_LOG ?? "warn",
      ...env,
    },
    stdio: ["ignore", "inherit", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`throng exited with ${proc.exitCode}`);
    try {
      const r = await fetch(`${url}/health`);
      if (r.ok) break;
    } catch {}
    if (Date.now() > deadline) throw new Error("throng did not start");
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    dir,
    async stop() {
      proc.kill("SIGTERM");
      await new Promise((r) => (proc.exitCode !== null ? r() : proc.once("exit", r)));
      if (!dataDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The usual setup of a test file: one server and one browser, started
 *  before its tests and stopped after them (`env.server`, `env.browser`). */
export function serverAndBrowser() {
  const env = {};
  before(async () => {
    env.server = await startServer();
    env.browser = await launch();
  });
  after(async () => {
    await env.browser?.close();
    await env.server?.stop();
  });
  return env;
}

export async function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM_PATH || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-dev-shm-usage"],
  });
}

/// REST against `base` as `token`; throws on an error status.
export async function rest(base, method, path, token, body) {
  const headers = {};
  if (token) headers.authorization = token;
  if (body !== undefined) headers["content-type"] = "application/json";
  const r = await fetch(`${base}/api/v10${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

export async function register(base, username, password = "correct horse") {
  const r = await rest(base, "POST", "/auth/register", null, { username, password });
  return { token: r.token, id: r.user_id, username };
}

/// The usual cast: Alice makes a server named `name`, Bob joins it by an
/// invite. `{ alice, bob, g, general }` (its first text channel). Other
/// names for the two may be given (one server holds each name once).
export async function twoInAGuild(base, name, [first, second] = ["alice", "bob"]) {
  const alice = await register(base, first);
  const bob = await register(base, second);
  const g = await rest(base, "POST", "/guilds", alice.token, { name });
  const [general] = await rest(base, "GET", `/guilds/${g.id}/channels`, alice.token);
  const inv = await rest(base, "POST", `/channels/${general.id}/invites`, alice.token, {});
  await rest(base, "POST", `/invites/${inv.code}`, bob.token);
  return { alice, bob, g, general };
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function pngChunk(type, data) {
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  let c = 0xffffffff;
  for (const b of body) c = CRC_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(data.length);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE((c ^ 0xffffffff) >>> 0);
  return Buffer.concat([head, body, crc]);
}

/// A real PNG, `w`×`h`, a colour gradient (8-bit RGB).
export function png(w, h) {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0);
  ihdr.writeUInt32BE(h, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  const raw = Buffer.alloc(h * (1 + 3 * w));
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) raw.set([(x * 255) / w, (y * 255) / h, 160], y * (1 + 3 * w) + 1 + 3 * x);
  const sig = Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]);
  return Buffer.concat([sig, pngChunk("IHDR", ihdr), pngChunk("IDAT", deflateSync(raw)), pngChunk("IEND", Buffer.alloc(0))]);
}

/// A page already logged in as `token` (stored where the client keeps it).
export async function pageAs(browser, base, token, opts = {}) {
  const ctx = await browser.newContext(opts);
  await ctx.addInitScript((t) => {
    if (!sessionStorage.getItem("throng.test.seeded")) {
      localStorage.setItem("throng.token", t);
      sessionStorage.setItem("throng.test.seeded", "1");
    }
  }, token);
  const page = await ctx.newPage();
  page.on("pageerror", (e) => console.error("page error:", e));
  await page.goto(base);
  return { ctx, page };
}

export const stats = (page) => page.evaluate(() => window.__throng.stats());

/// Records the Content-Security-Policy violations of every page of `ctx`:
/// `securitypolicyviolation` events, gathered by an init script (the
/// browser injects it, the page's policy does not apply to it), and console
/// messages about the policy. `check(page)` proves the watch works before
/// it answers: it adds an inline <style> (which the policy refuses) and
/// waits, up to a deadline, for that violation to be reported both ways;
/// events are delivered in order, so any earlier one is in by then. It
/// answers what was reported besides that control.
export async function watchCsp(ctx) {
  await ctx.addInitScript(() => {
    window.__csp = [];
    window.addEventListener("securitypolicyviolation", (e) =>
      window.__csp.push({ directive: e.effectiveDirective, blocked: e.blockedURI, source: `${e.sourceFile}:${e.lineNumber}` }),
    );
  });
  const messages = [];
  ctx.on("console", (m) => {
    if (m.text().includes("Content Security Policy")) messages.push(m.text());
  });
  return {
    messages,
    async check(page) {
      await page.evaluate(() => {
        const s = document.createElement("style");
        s.textContent = "#csp-control { color: red }";
        document.head.append(s);
      });
      const isControl = (v) => v.directive === "style-src-elem" && v.blocked === "inline";
      await page.waitForFunction(() => window.__csp.some((v) => v.directive === "style-src-elem" && v.blocked === "inline"), null, { timeout: 10_000 });
      const deadline = Date.now() + 10_000;
      while (!messages.some((m) => m.includes("inline style"))) {
        if (Date.now() > deadline) throw new Error("the control's console message never came: is the policy applied?");
        await new Promise((r) => setTimeout(r, 20));
      }
      const events = await page.evaluate(() => window.__csp);
      const first = events.findIndex(isControl);
      const others = events.filter((_, i) => i !== first);
      const control = messages.findIndex((m) => m.includes("inline style"));
      const otherMessages = messages.filter((_, i) => i !== control);
      messages.splice(0, messages.length);
      await page.evaluate(() => window.__csp.splice(0));
      return { events: others, messages: otherMessages };
    },
  };
}
