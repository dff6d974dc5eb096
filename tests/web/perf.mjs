// Measures the web client in Chromium with the Performance API (run by
// `scripts/web.sh perf`, against a release build): the JavaScript a first
// load transfers (and its gzip size), time to interactive, and long tasks
// (> 50 ms) while scrolling a 100,000-member list, while 50 messages/s
// arrive in the open channel, and while scrolling back through 5,000
// messages, one in ten with an image. Prints a Markdown table and writes
// .artifacts/web/perf.json.
import { readFileSync, writeFileSync, rmSync } from "node:fs";
import { gzipSync, brotliCompressSync } from "node:zlib";
import { join } from "node:path";
import { ROOT, ARTIFACTS, startServer, launch, rest, register, seed, tempDir, png } from "./harness.mjs";

const N = Number(process.env.PERF_MEMBERS || 100_000);
const results = {};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// Long tasks are collected from the first paint on (buffered observer).
// Long animation frames (> 50 ms, rendering included) are collected too.
const OBSERVE = () => {
  window.__long = [];
  window.__loaf = [];
  const keep = (into) => (l) => into.push(...l.getEntries().map((e) => ({ start: e.startTime, duration: e.duration })));
  new PerformanceObserver(keep(window.__long)).observe({ type: "longtask", buffered: true });
  // A long frame with where its time went: scripts (by entry point), the
  // layout they forced, and rendering (style, layout, paint) at its end.
  new PerformanceObserver((l) =>
    window.__loaf.push(
      ...l.getEntries().map((e) => ({
        start: e.startTime,
        duration: e.duration,
        render: e.renderStart ? Math.round(e.startTime + e.duration - e.renderStart) : 0,
        style_layout: e.styleAndLayoutStart ? Math.round(e.startTime + e.duration - e.styleAndLayoutStart) : 0,
        scripts: e.scripts.map((s) => ({ invoker: s.invoker, ms: Math.round(s.duration), forced_layout_ms: Math.round(s.forcedStyleAndLayoutDuration) })),
      })),
    ),
  ).observe({ type: "long-animation-frame", buffered: true });
};
const longSince = (page, t0) => page.evaluate((t) => window.__long.filter((e) => e.start >= t), t0);
const loafSince = (page, t0) => page.evaluate((t) => window.__loaf.filter((e) => e.start >= t), t0);

const js = readFileSync(join(ROOT, "web/dist/app.js"));
results.js_bytes = js.length;
results.js_gzip_bytes = gzipSync(js, { level: 9 }).length;
results.js_brotli_bytes = brotliCompressSync(js).length;

const dir = tempDir("perf");
seed(dir, ["--users", String(N), "--guilds", "1", "--memberships-per-user", "0", "--huge-guild-members", String(N)]);
const fixture = JSON.parse(readFileSync(join(dir, "fixture.json"), "utf8"));
const server = await startServer({ dataDir: dir });
const browser = await launch();
try {
  // ---- first load: transferred JavaScript and time to interactive ----
  const alice = await register(server.url, "alice");
  const g = await rest(server.url, "POST", "/guilds", alice.token, { name: "Perf" });
  const [general] = await rest(server.url, "GET", `/guilds/${g.id}/channels`, alice.token);
  for (let i = 0; i < 50; i++) await rest(server.url, "POST", `/channels/${general.id}/messages`, alice.token, { content: `history ${i}` });
  // A new member of Perf, and 1,000 messages from alice at 50/s (seconds taken).
  const member = async (name) => {
    const u = await register(server.url, name);
    const inv = await rest(server.url, "POST", `/channels/${general.id}/invites`, alice.token, {});
    await rest(server.url, "POST", `/invites/${inv.code}`, u.token);
    return u;
  };
  const BURST = 50 * 20;
  const burst = async (prefix) => {
    const started = Date.now();
    const sends = [];
    for (let i = 0; i < BURST; i++) {
      const wait = started + i * 20 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      sends.push(rest(server.url, "POST", `/channels/${general.id}/messages`, alice.token, { content: `${prefix} ${i}` }));
    }
    await Promise.all(sends);
    return (Date.now() - started) / 1000;
  };
  const tti = [];
  const ttiLogin = [];
  for (let run = 0; run < 7; run++) {
    for (const loggedIn of [true, false]) {
      const ctx = await browser.newContext();
      if (loggedIn) await ctx.addInitScript((t) => localStorage.setItem("throng.token", t), alice.token);
      const page = await ctx.newPage();
      await page.goto(server.url);
      await page.waitForFunction(() => performance.getEntriesByName("throng-interactive").length > 0, null, { timeout: 30_000 });
      const m = await page.evaluate(() => ({
        tti: performance.getEntriesByName("throng-interactive")[0].startTime,
        js: performance.getEntriesByType("resource").filter((r) => r.name.endsWith(".js")).reduce((n, r) => n + r.encodedBodySize, 0),
        messages: document.querySelectorAll("#messages .message").length,
      }));
      if (loggedIn && m.messages !== 50) throw new Error(`interactive with ${m.messages} messages shown`);
      (loggedIn ? tti : ttiLogin).push(m.tti);
      results.js_transferred_bytes = m.js;
      await ctx.close();
    }
  }
  results.tti_ms_median = Math.round(median(tti));
  results.tti_ms_max = Math.round(Math.max(...tti));
  results.tti_login_page_ms_median = Math.round(median(ttiLogin));

  // ---- scrolling the 100,000-member list ----
  const huge = fixture.guilds.find((x) => x.huge);
  const owner = fixture.users.find((u) => u.id === huge.member_ids[0]);
  {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await ctx.addInitScript(OBSERVE);
    await ctx.addInitScript((t) => localStorage.setItem("throng.token", t), owner.token);
    const page = await ctx.newPage();
    await page.goto(server.url);
    await page.locator("#members-head").filter({ hasText: `Members — ${N}` }).waitFor({ timeout: 120_000 });
    await page.waitForTimeout(1000);
    const t0 = await page.evaluate(() => performance.now());
    // 10 s of continuous scrolling, top to bottom (about 12,000 px a frame),
    // then 10 s of wheel-like steps of 400 px.
    const frames = await page.evaluate(
      () =>
        new Promise((done) => {
          const el = document.querySelector("#members .member-scroll");
          const start = performance.now();
          let n = 0;
          const step = (now) => {
            n++;
            const f = Math.min(1, (now - start) / 10_000);
            el.scrollTop = f * (el.scrollHeight - el.clientHeight);
            if (f < 1) requestAnimationFrame(step);
            else done(n);
          };
          requestAnimationFrame(step);
        }),
    );
    for (let i = 0; i < 100; i++) {
      await page.mouse.move(1150, 400);
      await page.mouse.wheel(0, i < 50 ? -400 : 400);
      await page.waitForTimeout(100);
    }
    const long = await longSince(page, t0);
    const loaf = await loafSince(page, t0);
    const s = await page.evaluate(() => window.__throng.stats());
    // Control: a 120 ms busy task must show up in both observers, or the zeros mean nothing.
    const t1 = await page.evaluate(() => {
      const t = performance.now();
      setTimeout(() => {
        const s = performance.now();
        while (performance.now() - s < 120) {}
      }, 10);
      return t;
    });
    await page.waitForTimeout(800);
    const control = await longSince(page, t1);
    const controlLoaf = await loafSince(page, t1);
    if (!control.some((e) => e.duration >= 100) || !controlLoaf.some((e) => e.duration >= 100)) {
      throw new Error("the observers did not see a 120 ms busy task");
    }
    results.observer_control_ms = Math.round(control[0].duration);
    results.scroll_long_frames = loaf.length;
    results.scroll_longest_frame_ms = Math.round(Math.max(0, ...loaf.map((e) => e.duration)));
    results.scroll_frames = frames;
    results.scroll_long_tasks = long.length;
    results.scroll_longest_task_ms = Math.round(Math.max(0, ...long.map((e) => e.duration)));
    results.scroll_max_held_rows = s.maxHeldRows;
    await ctx.close();
  }

  // ---- 50 messages/s into the open channel ----
  {
    const bob = await member("bob");
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await ctx.addInitScript(OBSERVE);
    await ctx.addInitScript((t) => localStorage.setItem("throng.token", t), bob.token);
    const page = await ctx.newPage();
    await page.goto(server.url);
    await page.locator("#messages .content", { hasText: "history 49" }).waitFor();
    await page.waitForTimeout(1000);
    const t0 = await page.evaluate(() => performance.now());
    const sendSeconds = await burst("burst");
    await page.locator("#messages .content", { hasText: `burst ${BURST - 1}` }).waitFor({ timeout: 30_000 });
    const long = await longSince(page, t0);
    const loaf = await loafSince(page, t0);
    results.burst_long_frames = loaf.length;
    results.burst_longest_frame_ms = Math.round(Math.max(0, ...loaf.map((e) => e.duration)));
    results.burst_messages = BURST;
    results.burst_rate_per_s = Math.round(BURST / sendSeconds);
    results.burst_long_tasks = long.length;
    results.burst_longest_task_ms = Math.round(Math.max(0, ...long.map((e) => e.duration)));
    results.burst_dom_messages = await page.locator("#messages .message").count();
    results.burst_long_frame_detail = loaf;
    await ctx.close();
  }

  // ---- the floor of the burst: a bare client under the same load ----
  // The least a client can do: one WebSocket, and per frame the new
  // messages appended as text (at most 400 kept) and the view scrolled to
  // the bottom. Its long tasks are what this box gives any page while the
  // server, the sender and the browser share its 2 cores.
  {
    const dave = await member("dave");
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await ctx.addInitScript(OBSERVE);
    const page = await ctx.newPage();
    // A page of this server's origin without the client (an about:blank
    // page may not open sockets to a local address in this Chromium).
    await page.goto(`${server.url}/api/v10/gateway`);
    await page.evaluate(
      ({ ws, token }) =>
        new Promise((ready, fail) => {
          setTimeout(() => fail(new Error("the bare client got no READY in 20 s")), 20_000);
          document.body.innerHTML = "";
          const box = document.createElement("div");
          box.style.cssText = "height:760px;overflow-y:auto;font:15px sans-serif";
          document.body.append(box);
          window.__got = [];
          let pending = [];
          const draw = () => {
            for (const m of pending) {
              const d = document.createElement("div");
              d.textContent = `${m.author.username}: ${m.content}`;
              box.append(d);
              if (box.childElementCount > 400) box.firstElementChild.remove();
            }
            pending = [];
            box.scrollTop = box.scrollHeight;
          };
          const sock = new WebSocket(`${ws}/?v=10&encoding=json`);
          sock.onclose = (ev) => fail(new Error(`the bare client's socket closed: ${ev.code} ${ev.reason}`));
          sock.onmessage = (ev) => {
            const f = JSON.parse(ev.data);
            if (f.op === 10) {
              setInterval(() => sock.send(JSON.stringify({ op: 1, d: null })), f.d.heartbeat_interval);
              // As the web client identifies: a person's session sends no intents.
              sock.send(JSON.stringify({ op: 2, d: { token, properties: { os: "linux", browser: "bare", device: "bare" } } }));
            } else if (f.t === "READY") ready();
            // As the web client opens the server it reads: in a large guild a
            // session that never does is passive and gets no messages.
            else if (f.t === "GUILD_CREATE") sock.send(JSON.stringify({ op: 14, d: { guild_id: f.d.id, typing: true, activities: true, threads: true } }));
            else if (f.t === "MESSAGE_CREATE") {
              window.__got.push(f.d.content);
              if (!pending.length) requestAnimationFrame(draw);
              pending.push(f.d);
            }
          };
        }),
      { ws: server.url.replace(/^http/, "ws"), token: dave.token },
    );
    await page.waitForTimeout(1000);
    const t0 = await page.evaluate(() => performance.now());
    await burst("floor");
    await page.waitForFunction((last) => window.__got.includes(last), `floor ${BURST - 1}`, { timeout: 30_000 });
    const long = await longSince(page, t0);
    const loaf = await loafSince(page, t0);
    results.floor_burst_long_tasks = long.length;
    results.floor_burst_longest_task_ms = Math.round(Math.max(0, ...long.map((e) => e.duration)));
    results.floor_burst_long_frames = loaf.length;
    results.floor_burst_long_frame_detail = loaf;
    await ctx.close();
  }

  // ---- scrolling back through 5,000 messages with images ----
  {
    const BACK = Number(process.env.PERF_BACK_MESSAGES || 5000);
    const carol = await register(server.url, "carol");
    const g2 = await rest(server.url, "POST", "/guilds", carol.token, { name: "Archive" });
    const [archive] = await rest(server.url, "GET", `/guilds/${g2.id}/channels`, carol.token);
    const image = png(400, 300);
    const post = async (i) => {
      if (i % 10) return rest(server.url, "POST", `/channels/${archive.id}/messages`, carol.token, { content: `archive ${i} **with** some *markdown* and a link https://example.com/${i}` });
      const form = new FormData();
      form.append("payload_json", JSON.stringify({ content: `archive ${i}, a picture` }));
      form.append("files[0]", new Blob([image], { type: "image/png" }), `shot-${i}.png`);
      const r = await fetch(`${server.url}/api/v10/channels/${archive.id}/messages`, { method: "POST", headers: { authorization: carol.token }, body: form });
      if (!r.ok) throw new Error(`upload ${i}: ${r.status} ${await r.text()}`);
    };
    // One at a time, in order (ids follow the order posted).
    for (let i = 0; i < BACK; i += 1) await post(i);
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    await ctx.addInitScript(OBSERVE);
    await ctx.addInitScript((t) => localStorage.setItem("throng.token", t), carol.token);
    const page = await ctx.newPage();
    await page.goto(server.url);
    await page.locator("#messages .content", { hasText: `archive ${BACK - 1},` }).or(page.locator("#messages .content", { hasText: `archive ${BACK - 1} ` })).first().waitFor();
    await page.waitForTimeout(1000);
    const t0 = await page.evaluate(() => performance.now());
    const started = Date.now();
    // A reader scrolling up: 600 px a frame, pages of 50 loading as the top comes near.
    const frames = await page.evaluate(
      (want) =>
        new Promise((done) => {
          let n = 0;
          const step = () => {
            n++;
            const el = document.getElementById("messages");
            el.scrollTop = Math.max(0, el.scrollTop - 600);
            const first = el.querySelector(".message .content")?.textContent.startsWith(want);
            if (first || n > 60 * 600) done(n);
            else requestAnimationFrame(step);
          };
          requestAnimationFrame(step);
        }),
      "archive 0,",
    );
    results.back_seconds = Math.round((Date.now() - started) / 100) / 10;
    const long = await longSince(page, t0);
    const loaf = await loafSince(page, t0);
    results.back_messages = BACK;
    results.back_images = Math.ceil(BACK / 10);
    results.back_drawn_at_end = await page.locator("#messages .message").count();
    results.back_reached_first = (await page.locator("#messages .message .content").first().textContent()).startsWith("archive 0,");
    results.back_frames = frames;
    results.back_long_tasks = long.length;
    results.back_longest_task_ms = Math.round(Math.max(0, ...long.map((e) => e.duration)));
    results.back_long_frames = loaf.length;
    results.back_longest_frame_ms = Math.round(Math.max(0, ...loaf.map((e) => e.duration)));
    results.back_long_frame_detail = loaf;
    await ctx.close();
  }
} finally {
  await browser.close();
  await server.stop();
  rmSync(dir, { recursive: true, force: true });
}

writeFileSync(join(ARTIFACTS, "perf.json"), JSON.stringify(results, null, 2));
const kb = (n) => `${(n / 1024).toFixed(1)} KB`;
console.log(`| measure | value |
|---|---|
| Observer control (a 120 ms busy task) | seen, ${results.observer_control_ms} ms |
| JavaScript, first load (Resource Timing encodedBodySize) | ${kb(results.js_transferred_bytes)} (as served: Brotli) |
| JavaScript compressed | ${kb(results.js_gzip_bytes)} gzip -9, ${kb(results.js_brotli_bytes)} brotli |
| Time to interactive, logged in (channel with 50 messages shown), median / max of 7 | ${results.tti_ms_median} / ${results.tti_ms_max} ms |
| Time to interactive, login form, median of 7 | ${results.tti_login_page_ms_median} ms |
| Long tasks > 50 ms scrolling ${N.toLocaleString("en")} members (10 s top-to-bottom, ${results.scroll_frames} frames, then 100 wheel steps) | ${results.scroll_long_tasks} (longest ${results.scroll_longest_task_ms} ms); long animation frames: ${results.scroll_long_frames} (longest ${results.scroll_longest_frame_ms} ms); at most ${results.scroll_max_held_rows} rows held |
| Long tasks > 50 ms while ${results.burst_messages} messages arrive at ${results.burst_rate_per_s}/s | ${results.burst_long_tasks} (longest ${results.burst_longest_task_ms} ms); long animation frames: ${results.burst_long_frames} (longest ${results.burst_longest_frame_ms} ms); ${results.burst_dom_messages} messages in the DOM |
| Floor: long tasks > 50 ms in a bare client (one WebSocket, text appended per frame) while ${results.burst_messages} messages arrive the same way | ${results.floor_burst_long_tasks} (longest ${results.floor_burst_longest_task_ms} ms); long animation frames: ${results.floor_burst_long_frames} |
| Long tasks > 50 ms scrolling back through ${results.back_messages} messages (${results.back_images} with an image) to the first${results.back_reached_first ? "" : " (NOT reached)"}, 600 px a frame (${results.back_frames} frames, ${results.back_seconds} s) | ${results.back_long_tasks} (longest ${results.back_longest_task_ms} ms); long animation frames: ${results.back_long_frames} (longest ${results.back_longest_frame_ms} ms); ${results.back_drawn_at_end} messages drawn at the end |`);
