// Mentions in the composer: typing `@` or `#` offers people (the server's
// member search), roles, @everyone/@here and channels; the one picked shows
// as `@name` / `#name` in the text and goes as Discord's syntax (`<@id>`,
// `<@&id>`, `<#id>`) when the message is sent. Typing `:` and two letters
// offers emojis by name: a Unicode one goes in as itself, a server's shows
// as `:name:` and goes as `<:name:id>`.

import { Api } from "./api";
import { clear, h } from "./dom";
import { CustomEmoji, emojiFace, searchEmoji } from "./emoji";

export type Pick = { label: string; text: string; syntax: string; kind: "user" | "role" | "channel" | "everyone" | "emoji"; detail?: string; face?: () => Node };

export interface MentionHost {
  api: Api;
  /** The open server, or null (a DM: people only, from `names`). */
  guild(): string | null;
  roles(guild: string): { id: string; name: string }[];
  channels(guild: string): { id: string; name: string }[];
  /** People known here by id (a DM's recipients). */
  people(): { id: string; name: string }[];
  /** The open server's own emojis. */
  emojis(): CustomEmoji[];
}

const SHOWN = 8;

export class MentionPicker {
  /** What was picked, to turn into syntax on send. */
  private picked: Pick[] = [];
  private options: Pick[] = [];
  private active = 0;
  private token: { start: number; end: number } | null = null;
  private asked = 0;

  constructor(private host: MentionHost, private el: HTMLElement, private input: HTMLTextAreaElement) {
    input.addEventListener("input", () => this.update());
    input.addEventListener("click", () => this.update());
    input.addEventListener("blur", () => setTimeout(() => this.close(), 150));
  }

  get open() {
    return !this.el.hidden;
  }

  /** Keys while the list is open: arrows move, Enter or Tab take, Escape closes. */
  key(e: KeyboardEvent): boolean {
    if (!this.open || !this.options.length) return false;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      this.active = (this.active + (e.key === "ArrowDown" ? 1 : this.options.length - 1)) % this.options.length;
      this.render();
    } else if (e.key === "Enter" || e.key === "Tab") {
      this.take(this.options[this.active]);
    } else if (e.key === "Escape") {
      this.close();
    } else {
      return false;
    }
    e.preventDefault();
    return true;
  }

  /** Adds `p` at the caret (the profile card's "Mention"). */
  insert(p: Pick) {
    const at = this.input.selectionStart ?? this.input.value.length;
    const before = this.input.value.slice(0, at);
    const gap = before && !/\s$/.test(before) ? " " : "";
    this.input.value = before + gap + p.text + " " + this.input.value.slice(at);
    this.remember(p);
    const caret = (before + gap + p.text + " ").length;
    this.input.setSelectionRange(caret, caret);
    this.input.dispatchEvent(new Event("input"));
  }

  /** The text to send: each picked `@name` / `#name` as its syntax. */
  encode(text: string): string {
    // Longest first, so `@ann` never eats the start of `@anna`.
    const picks = [...this.picked].sort((a, b) => b.text.length - a.text.length);
    let out = text;
    for (const p of picks) {
      if (p.kind === "everyone" || p.text === p.syntax) continue;
      const re = new RegExp(`(^|[^\\w<])${escape(p.text)}(?![\\w])`, "g");
      out = out.replace(re, (_m, pre) => pre + p.syntax);
    }
    return out;
  }

  /** Forgets the picks (after a send). */
  reset() {
    this.picked = [];
    this.close();
  }

  close() {
    this.el.hidden = true;
    this.token = null;
    clear(this.el);
  }

  private remember(p: Pick) {
    if (!this.picked.some((x) => x.text === p.text && x.syntax === p.syntax)) this.picked.push(p);
  }

  private async update() {
    const at = this.input.selectionStart ?? 0;
    const before = this.input.value.slice(0, at);
    const m = before.match(/(^|\s)([@#])([^\s@#<>]{0,32})$/) ?? before.match(/(^|\s)(:)([\w+-]{2,32})$/);
    if (!m) return this.close();
    const [, , sigil, query] = m;
    this.token = { start: at - query.length - 1, end: at };
    const ask = ++this.asked;
    const options = sigil === "#" ? this.channelOptions(query) : sigil === ":" ? this.emojiOptions(query) : await this.peopleOptions(query);
    if (ask !== this.asked || !this.token) return;
    this.options = options.slice(0, SHOWN);
    this.active = 0;
    if (!this.options.length) return this.close();
    this.render();
  }

  private emojiOptions(query: string): Pick[] {
    return searchEmoji(query, this.host.emojis(), SHOWN).map((e) => ({
      label: `:${e.name}:`,
      text: e.custom ? `:${e.name}:` : e.unicode!,
      syntax: e.custom ? `<${e.custom.animated ? "a" : ""}:${e.name}:${e.custom.id}>` : e.unicode!,
      kind: "emoji" as const,
      detail: e.custom ? "this server" : undefined,
      face: () => emojiFace(e, 20),
    }));
  }

  private channelOptions(query: string): Pick[] {
    const g = this.host.guild();
    if (!g) return [];
    const q = query.toLowerCase();
    return this.host
      .channels(g)
      .filter((c) => c.name.toLowerCase().startsWith(q))
      .map((c) => ({ label: `#${c.name}`, text: `#${c.name}`, syntax: `<#${c.id}>`, kind: "channel" as const }));
  }

  private async peopleOptions(query: string): Promise<Pick[]> {
    const g = this.host.guild();
    const q = query.toLowerCase();
    const people: Pick[] = [];
    if (g) {
      let found: any[] = [];
      try {
        found = await this.host.api.get(`/guilds/${g}/members/search?query=${encodeURIComponent(query)}&limit=${SHOWN}`);
      } catch {
        found = [];
      }
      for (const m of found) {
        const u = m.user;
        if (!u) continue;
        const name = m.nick || u.global_name || u.username;
        people.push({ label: name, detail: `@${u.username}`, text: `@${u.username}`, syntax: `<@${u.id}>`, kind: "user" });
      }
    } else {
      for (const p of this.host.people())
        if (p.name.toLowerCase().startsWith(q)) people.push({ label: p.name, text: `@${p.name}`, syntax: `<@${p.id}>`, kind: "user" });
    }
    const roles: Pick[] = g
      ? this.host
          .roles(g)
          .filter((r) => r.id !== g && r.name.toLowerCase().startsWith(q))
          .map((r) => ({ label: `@${r.name}`, detail: "role", text: `@${r.name}`, syntax: `<@&${r.id}>`, kind: "role" as const }))
      : [];
    const everyone: Pick[] = g
      ? ["everyone", "here"]
          .filter((w) => w.startsWith(q))
          .map((w) => ({ label: `@${w}`, detail: w === "here" ? "everyone online" : "everyone here", text: `@${w}`, syntax: `@${w}`, kind: "everyone" as const }))
      : [];
    return [...people, ...roles, ...everyone];
  }

  private take(p: Pick) {
    if (!this.token) return;
    const v = this.input.value;
    const head = v.slice(0, this.token.start) + p.text + " ";
    this.input.value = head + v.slice(this.token.end).replace(/^ /, "");
    this.input.setSelectionRange(head.length, head.length);
    this.remember(p);
    this.close();
    this.input.dispatchEvent(new Event("input"));
    this.input.focus();
  }

  private render() {
    this.el.hidden = false;
    this.el.setAttribute("aria-activedescendant", `mention-${this.active}`);
    clear(
      this.el,
      h("div", { class: "picker-head" }, { channel: "Channels", emoji: "Emojis" }[this.options[0]?.kind as string] ?? "Members, roles"),
      this.options.map((p, i) =>
        h(
          "button",
          {
            type: "button",
            id: `mention-${i}`,
            class: "choice" + (i === this.active ? " active" : ""),
            role: "option",
            "aria-selected": String(i === this.active),
            tabindex: "-1",
            onmousedown: (e: MouseEvent) => e.preventDefault(),
            onclick: () => this.take(p),
          },
          p.face ? h("span", { class: "face", "aria-hidden": "true" }, p.face()) : null,
          h("span", null, p.label),
          p.detail ? h("span", { class: "desc" }, p.detail) : null,
        ),
      ),
    );
  }
}

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
