// Message search: the box in the header, Discord's filters in it
// (from:, mentions:, in:, has:, before:, after:, during:, pinned:), and the
// results panel, each result with its channel, author, time and text and a
// way to jump to it (`GET /guilds/{id}/messages/search`).

import { Api } from "./api";
import { Child, clear, h } from "./dom";
import { markdown, Names } from "./markdown";

const DISCORD_EPOCH = 1420070400000n;
const HAS = new Set(["link", "embed", "file", "image", "video", "sound", "sticker", "poll", "snapshot"]);
const PAGE = 25;

export interface SearchHost {
  api: Api;
  /** The open server's text channels. */
  channels(guild: string): { id: string; name: string }[];
  names: Names;
  me(): string | undefined;
  jump(channel: string, message: string): void;
  /** Shows or hides the panel (it takes the member list's place). */
  show(open: boolean): void;
}

/** A snowflake for the start of `ms` (milliseconds since 1970). */
function snowflakeAt(ms: number): string {
  return ((BigInt(Math.max(0, Math.floor(ms))) - DISCORD_EPOCH) << 22n).toString();
}

/** Local midnight of a `YYYY-MM-DD` (or anything `Date` reads), or null. */
function dayStart(s: string): number | null {
  const m = s.match(/^(\d{4})-(\d{1,2})-(\d{1,2})$/);
  const d = m ? new Date(Number(m[1]), Number(m[2]) - 1, Number(m[3])) : new Date(s);
  return isNaN(d.getTime()) ? null : d.getTime();
}

/** The query string of a search typed in the box, or an error to show. */
export async function parseSearch(text: string, guild: string, host: SearchHost): Promise<URLSearchParams | string> {
  const p = new URLSearchParams();
  const words: string[] = [];
  // `key:value` or `key:"a value"`; quoted phrases and other words stay text.
  for (const m of text.matchAll(/(\w+):(?:"([^"]*)"|(\S+))|("[^"]*"|\S+)/g)) {
    if (m[4] !== undefined) {
      words.push(m[4]);
      continue;
    }
    const key = m[1].toLowerCase();
    const value = (m[2] ?? m[3]).trim();
    switch (key) {
      case "from":
      case "mentions": {
        const id = await member(host, guild, value.replace(/^@/, ""));
        if (!id) return `No member named ${value}.`;
        p.append(key === "from" ? "author_id" : "mentions", id);
        break;
      }
      case "in": {
        const name = value.replace(/^#/, "").toLowerCase();
        const c = host.channels(guild).find((c) => c.name.toLowerCase() === name);
        if (!c) return `No channel named #${name}.`;
        p.append("channel_id", c.id);
        break;
      }
      case "has":
        if (!HAS.has(value.toLowerCase())) return `has: takes ${[...HAS].join(", ")}.`;
        p.append("has", value.toLowerCase());
        break;
      case "before":
      case "after":
      case "during": {
        const start = dayStart(value);
        if (start === null) return `${key}: takes a date like 2026-11-28.`;
        const end = start + 86_400_000;
        if (key === "before" || key === "during") p.set("max_id", snowflakeAt(key === "before" ? start : end));
        if (key === "after" || key === "during") p.set("min_id", snowflakeAt(key === "after" ? end : start));
        break;
      }
      case "pinned":
        p.set("pinned", String(value === "true" || value === "yes"));
        break;
      default:
        words.push(m[0]);
    }
  }
  const content = words.join(" ").trim();
  if (content) p.set("content", content);
  if (![...p.keys()].length) return "Type something to search for.";
  return p;
}

/** The id of the member whose name is `name` (exactly, else the first found). */
async function member(host: SearchHost, guild: string, name: string): Promise<string | null> {
  if (!name) return null;
  const found: any[] = await host.api.get(`/guilds/${guild}/members/search?query=${encodeURIComponent(name)}&limit=10`);
  const lower = name.toLowerCase();
  const exact = found.find((m) => [m.user?.username, m.user?.global_name, m.nick].some((n) => n?.toLowerCase() === lower));
  return (exact ?? found[0])?.user?.id ?? null;
}

/** The results panel. */
export class SearchPanel {
  readonly el: HTMLElement;
  private list: HTMLElement;
  private head: HTMLElement;
  private more: HTMLButtonElement;
  private title: HTMLElement;
  /** The channel whose pins show, if the panel shows pins. */
  pinsOf: string | null = null;
  private query: { guild: string; params: URLSearchParams; offset: number; total: number } | null = null;

  constructor(private host: SearchHost) {
    this.head = h("p", { class: "search-head", role: "status", "aria-live": "polite" });
    this.list = h("ol", { class: "search-results", "aria-label": "Search results" });
    this.more = h("button", { type: "button", class: "secondary", hidden: true, onclick: () => this.page() }, "More results");
    this.title = h("h2", { id: "search-title" }, "Search");
    this.el = h(
      "aside",
      { id: "search-panel", class: "search-panel", "aria-labelledby": "search-title" },
      h(
        "header",
        { class: "search-top" },
        this.title,
        h("button", { type: "button", class: "icon", "aria-label": "Close search", onclick: () => this.close() }, "×"),
      ),
      this.head,
      this.list,
      this.more,
    );
  }

  close() {
    this.query = null;
    this.pinsOf = null;
    this.host.show(false);
  }

  /** A channel's pinned messages, newest pin first, in the same panel. */
  showPins(channel: string, hits: any[]) {
    this.query = null;
    this.pinsOf = channel;
    this.title.textContent = "Pinned messages";
    this.host.show(true);
    this.more.hidden = true;
    this.head.textContent = hits.length === 0 ? "No pinned messages" : hits.length === 1 ? "1 pinned message" : `${hits.length} pinned messages`;
    clear(this.list, hits.map((m) => this.result(m)));
  }

  async run(guild: string, text: string) {
    this.pinsOf = null;
    this.title.textContent = "Search";
    this.host.show(true);
    clear(this.list);
    this.more.hidden = true;
    this.head.textContent = "Searching…";
    let params: URLSearchParams | string;
    try {
      params = await parseSearch(text, guild, this.host);
    } catch (e) {
      params = e instanceof Error ? e.message : String(e);
    }
    if (typeof params === "string") {
      this.head.textContent = params;
      return;
    }
    this.query = { guild, params, offset: 0, total: 0 };
    await this.page();
  }

  private async page() {
    const q = this.query;
    if (!q) return;
    const params = new URLSearchParams(q.params);
    params.set("limit", String(PAGE));
    if (q.offset) params.set("offset", String(q.offset));
    for (let tries = 0; ; tries++) {
      let r: any;
      try {
        r = await this.host.api.get(`/guilds/${q.guild}/messages/search?${params}`);
      } catch (e) {
        this.head.textContent = e instanceof Error ? e.message : String(e);
        return;
      }
      if (this.query !== q) return;
      // 202: the index is still being built; Discord says when to ask again.
      if (r && r.retry_after !== undefined && !r.messages) {
        if (tries >= 5) {
          this.head.textContent = "Search is still being prepared; try again shortly.";
          return;
        }
        this.head.textContent = "Search is being prepared…";
        await new Promise((res) => setTimeout(res, Math.min(5, Number(r.retry_after) || 1) * 1000));
        continue;
      }
      const hits: any[] = (r?.messages ?? []).map((group: any[]) => group[0]).filter(Boolean);
      q.total = Number(r?.total_results ?? 0);
      q.offset += hits.length;
      this.head.textContent = q.total === 0 ? "No results" : q.total === 1 ? "1 result" : `${q.total.toLocaleString()} results`;
      for (const m of hits) this.list.appendChild(this.result(m));
      this.more.hidden = !(hits.length && q.offset < q.total);
      return;
    }
  }

  private result(m: any): HTMLElement {
    const channel = this.host.names.channel(m.channel_id);
    const author = m.author?.global_name || m.author?.username || "someone";
    const when = new Date(m.timestamp);
    const label = isNaN(when.getTime()) ? "" : when.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
    const body: Child = m.content ? markdown(m.content, this.host.names, this.host.me()) : m.attachments?.length ? `${m.attachments.length} file(s)` : "";
    return h(
      "li",
      { class: "search-result", "data-id": m.id },
      h("div", { class: "meta" }, channel ? h("span", { class: "in" }, `#${channel}`) : null, " ", h("span", { class: "author" }, author), " ", h("time", { datetime: m.timestamp }, label)),
      h("div", { class: "content" }, body),
      h("button", { type: "button", class: "secondary jump", "aria-label": `Jump to ${author}'s message`, onclick: () => this.host.jump(m.channel_id, m.id) }, "Jump"),
    );
  }
}
