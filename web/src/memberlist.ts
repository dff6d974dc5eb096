// The lazy member list: a virtualised view over GUILD_MEMBER_LIST_UPDATE.
// It holds only the 100-item chunks it subscribed to (op 14) for the rows
// on screen plus a margin, and applies SYNC/INSERT/UPDATE/DELETE/INVALIDATE.

import { h } from "./dom";

export const ROW = 36;
const CHUNK = 100;
const MARGIN = 40;
const SUBSCRIBE_GAP = 600;

export type Item = { group?: { id: string; count: number }; member?: any };

export interface ListHost {
  subscribe(guildId: string, channelId: string, ranges: [number, number][]): void;
  roleName(guildId: string, roleId: string): string | undefined;
  /** The colour a member's name shows in (their highest coloured role), 0 for none. */
  roleColor(guildId: string, roles: string[]): number;
  /** A member the list showed: what is known of them (their roles). */
  seen?(guildId: string, member: any): void;
  onActivate(userId: string, name: string): void;
}

export function displayName(m: any): string {
  return m.nick || m.user?.global_name || m.user?.username || "?";
}

export class MemberList {
  readonly el: HTMLElement;
  private spacer: HTMLElement;
  private rows: HTMLElement;
  private guildId: string | null = null;
  private channelId: string | null = null;
  private listId: string | null = null;
  private chunks = new Map<number, Item[]>();
  private wanted = "";
  private total = 0;
  private frame = 0;
  private active = -1;
  private lastSent = -Infinity;
  private later: number | undefined;
  /// The most rows held at once since the list was opened (for tests).
  maxHeld = 0;
  syncs = 0;

  constructor(
    private host: ListHost,
    private heading: HTMLElement,
  ) {
    this.rows = h("div", { class: "member-rows" });
    this.spacer = h("div", { class: "member-spacer" }, this.rows);
    this.el = h("div", { class: "member-scroll", tabindex: 0, role: "listbox", "aria-label": "Members" }, this.spacer);
    this.el.addEventListener("scroll", () => this.schedule(), { passive: true });
    this.el.addEventListener("keydown", (e) => this.key(e));
    new ResizeObserver(() => this.schedule()).observe(this.el);
  }

  /// Shows the list of `channelId` in `guildId` (resets when the guild changes).
  open(guildId: string, channelId: string) {
    const other = this.guildId !== guildId;
    if (other) {
      this.chunks.clear();
      this.total = 0;
      this.listId = null;
      this.el.scrollTop = 0;
      this.active = -1;
      this.maxHeld = 0;
    }
    this.guildId = guildId;
    this.channelId = channelId;
    this.wanted = "";
    // Another server opened: its op 14 goes now, not after the gap (until
    // the server has it, a large server sends this session no messages).
    if (other) {
      this.lastSent = -Infinity;
      this.follow();
    }
    this.schedule();
  }

  close() {
    this.guildId = this.channelId = this.listId = null;
    this.chunks.clear();
    this.total = 0;
    this.wanted = "";
    this.render();
  }

  /// After a fresh IDENTIFY the server has no subscription: ask again.
  resubscribe() {
    this.wanted = "";
    this.schedule();
  }

  held(): number {
    let n = 0;
    for (const c of this.chunks.values()) n += c.length;
    return n;
  }

  /// Items held, by index (for tests and debugging).
  snapshot(): [number, Item][] {
    const out: [number, Item][] = [];
    for (const [s, c] of this.chunks) c.forEach((it, i) => out.push([s + i, it]));
    return out.sort((a, b) => a[0] - b[0]);
  }

  apply(d: any) {
    if (d.guild_id !== this.guildId) return;
    if (this.listId !== null && d.id !== this.listId) {
      // Another list (the channel's overwrites differ): start over.
      this.chunks.clear();
    }
    this.listId = d.id;
    for (const op of d.ops as any[]) {
      switch (op.op) {
        case "SYNC":
          this.syncs++;
          this.chunks.set(op.range[0], op.items.slice());
          break;
        case "INVALIDATE":
          this.chunks.delete(op.range[0]);
          break;
        case "INSERT": {
          const c = this.chunkOf(op.index);
          if (!c) break;
          c.items.splice(op.index - c.start, 0, op.item);
          if (c.items.length > CHUNK) c.items.length = CHUNK;
          break;
        }
        case "DELETE": {
          const c = this.chunkOf(op.index);
          if (c) c.items.splice(op.index - c.start, 1);
          break;
        }
        case "UPDATE": {
          const c = this.chunkOf(op.index);
          if (c) c.items[op.index - c.start] = op.item;
          break;
        }
      }
    }
    const groups = (d.groups ?? []) as { id: string; count: number }[];
    this.total = groups.reduce((n, g) => n + g.count + 1, 0);
    this.heading.textContent = `Members — ${d.member_count ?? 0} (${d.online_count ?? 0} online)`;
    this.maxHeld = Math.max(this.maxHeld, this.held());
    this.schedule();
  }

  private chunkOf(index: number) {
    const start = Math.floor(index / CHUNK) * CHUNK;
    const items = this.chunks.get(start);
    return items ? { start, items } : null;
  }

  private item(index: number): Item | undefined {
    return this.chunks.get(Math.floor(index / CHUNK) * CHUNK)?.[index % CHUNK];
  }

  /** Draws the visible rows again (a role's colour or name changed). */
  redraw() {
    this.schedule();
  }

  private schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.follow();
      this.render();
    });
  }

  private visible(): [number, number] {
    const top = this.el.scrollTop;
    const h = this.el.clientHeight || 600;
    return [Math.floor(top / ROW), Math.ceil((top + h) / ROW)];
  }

  /// Subscribes to the chunks under the visible rows plus a margin.
  private follow() {
    if (!this.guildId || !this.channelId) return;
    const [first, last] = this.visible();
    const lo = Math.max(0, Math.floor((first - MARGIN) / CHUNK));
    let hi = Math.floor((last + MARGIN) / CHUNK);
    if (this.total > 0) hi = Math.min(hi, Math.floor((this.total - 1) / CHUNK));
    hi = Math.max(lo, Math.min(hi, lo + 2));
    const ranges: [number, number][] = [];
    for (let k = lo; k <= hi; k++) ranges.push([k * CHUNK, k * CHUNK + CHUNK - 1]);
    const key = `${this.guildId}/${this.channelId}/${ranges.join(";")}`;
    if (key === this.wanted) return;
    // The server allows 120 client events a minute: at most one op 14 per
    // SUBSCRIBE_GAP ms, the last wanted ranges sent when the gap is over.
    const wait = this.lastSent + SUBSCRIBE_GAP - performance.now();
    if (wait > 0) {
      clearTimeout(this.later);
      this.later = window.setTimeout(() => this.schedule(), wait + 1);
      return;
    }
    this.lastSent = performance.now();
    this.wanted = key;
    // Forget chunks we stop watching now (the server also sends INVALIDATE).
    for (const s of [...this.chunks.keys()]) if (s < lo * CHUNK || s > hi * CHUNK) this.chunks.delete(s);
    this.host.subscribe(this.guildId, this.channelId, ranges);
  }

  private render() {
    this.spacer.style.height = `${this.total * ROW}px`;
    const [first, last] = this.visible();
    const end = Math.min(last, this.total - 1);
    const rows: HTMLElement[] = [];
    for (let i = Math.max(0, first); i <= end; i++) {
      const it = this.item(i);
      const sel = i === this.active ? " active" : "";
      const common = { id: `mrow-${i}`, role: "option", "aria-selected": "false", "data-index": i };
      let row: HTMLElement | null = null;
      if (!it) {
        row = h("div", { ...common, class: `mrow loading${sel}` }, h("span", { class: "skeleton" }));
      } else if (it.group) {
        row = h("div", { ...common, class: `mrow group${sel}`, "data-group": it.group.id }, `${this.groupName(it.group.id)} — ${it.group.count}`);
      } else if (it.member) {
        const m = it.member;
        const status = m.presence?.status ?? "offline";
        const name = displayName(m);
        const label = h("span", { class: "mname" }, name);
        const color = this.guildId ? this.host.roleColor(this.guildId, m.roles ?? []) : 0;
        if (color) label.style.color = `#${color.toString(16).padStart(6, "0")}`;
        if (this.guildId) this.host.seen?.(this.guildId, m);
        row = h(
          "div",
          { ...common, class: `mrow member ${status}${sel}`, "data-user-id": m.user.id, "aria-label": `${name}, ${status}` },
          h("span", { class: `dot ${status}`, "aria-hidden": "true" }),
          label,
        );
      }
      if (!row) continue;
      // A CSSOM property, not a style attribute: allowed by the page's CSP.
      row.style.top = `${i * ROW}px`;
      rows.push(row);
    }
    this.rows.replaceChildren(...rows);
    if (this.active >= 0) this.el.setAttribute("aria-activedescendant", `mrow-${this.active}`);
  }

  private groupName(id: string): string {
    if (id === "online") return "Online";
    if (id === "offline") return "Offline";
    return (this.guildId && this.host.roleName(this.guildId, id)) || "Role";
  }

  private key(e: KeyboardEvent) {
    if (this.total === 0) return;
    const page = Math.max(1, Math.floor(this.el.clientHeight / ROW) - 1);
    let next = this.active < 0 ? 0 : this.active;
    switch (e.key) {
      case "ArrowDown": next++; break;
      case "ArrowUp": next--; break;
      case "PageDown": next += page; break;
      case "PageUp": next -= page; break;
      case "Home": next = 0; break;
      case "End": next = this.total - 1; break;
      case "Enter": {
        const m = this.item(this.active)?.member;
        if (m) this.host.onActivate(m.user.id, displayName(m));
        return;
      }
      default:
        return;
    }
    e.preventDefault();
    this.active = Math.max(0, Math.min(this.total - 1, next));
    const y = this.active * ROW;
    if (y < this.el.scrollTop) this.el.scrollTop = y;
    else if (y + ROW > this.el.scrollTop + this.el.clientHeight) this.el.scrollTop = y + ROW - this.el.clientHeight;
    this.schedule();
  }
}
