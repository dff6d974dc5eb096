// The Channels tab of server settings: channels and categories (create,
// rename, topic, slow mode, category, order, delete) and each channel's
// permission overwrites (allow / inherit / deny per permission, for
// @everyone, a role or a member), over the routes bots use
// (`POST /guilds/{id}/channels`, `PATCH`/`DELETE /channels/{id}`,
// `PUT`/`DELETE /channels/{id}/permissions/{overwrite}`).

import { Api } from "./api";
import { Child, h } from "./dom";
import { permissionLabel } from "./permissions";

export type Overwrite = { id: string; type: number; allow: string; deny: string };
export type ChannelInfo = {
  id: string;
  name: string;
  type: number;
  position: number;
  parent_id: string | null;
  topic: string | null;
  rate_limit_per_user: number;
  overwrites: Overwrite[];
};

export interface ChannelsTabHost {
  api: Api;
  act(what: () => Promise<unknown>, done: string): Promise<any>;
  /** Redraws the tab (another channel picked, an overwrite added). */
  redraw(): void;
  name(user: string): string;
}

/** What an overwrite may set in a channel (bits, Discord's order). */
const CHANNEL_PERMS: number[] = [10, 11, 38, 6, 15, 14, 17, 13, 16, 51, 0, 4, 28];
/** Discord's slow-mode choices, in seconds. */
const SLOWMODE: [number, string][] = [
  [0, "Off"],
  [5, "5 seconds"],
  [10, "10 seconds"],
  [30, "30 seconds"],
  [60, "1 minute"],
  [300, "5 minutes"],
  [600, "10 minutes"],
  [3600, "1 hour"],
  [21600, "6 hours"],
];
const CATEGORY = 4;

/** Channels as the sidebar shows them: those without a category first,
 *  then each category followed by its channels, each run by position. */
export function channelOrder(list: ChannelInfo[]): ChannelInfo[] {
  const byPos = (a: ChannelInfo, b: ChannelInfo) => a.position - b.position || (BigInt(a.id) < BigInt(b.id) ? -1 : 1);
  const cats = list.filter((c) => c.type === CATEGORY).sort(byPos);
  const inCat = (p: string | null) => list.filter((c) => c.type !== CATEGORY && c.parent_id === p).sort(byPos);
  const loose = list.filter((c) => c.type !== CATEGORY && (!c.parent_id || !cats.some((k) => k.id === c.parent_id))).sort(byPos);
  return [...loose, ...cats.flatMap((k) => [k, ...inCat(k.id)])];
}

/** The editor's state between redraws: the channel picked, the overwrite
 *  picked, and overwrites added here but not saved yet. */
export class ChannelsTab {
  channel = "";
  target = "";
  private added = new Map<string, Overwrite>();

  constructor(private host: ChannelsTabHost) {}

  render(guild: { id: string; roles: { id: string; name: string; position: number }[] }, list: ChannelInfo[]): Child {
    const api = this.host.api;
    const ordered = channelOrder(list);
    // The channel asked for; one just made may not be here yet (its
    // CHANNEL_CREATE redraws this), so the choice is kept.
    const c = ordered.find((x) => x.id === this.channel) ?? ordered[0];
    const make = (type: number) => async () => {
      const made = await this.host.act(() => api.post(`/guilds/${guild.id}/channels`, { name: type === CATEGORY ? "new category" : "new-channel", type }), type === CATEGORY ? "Category created." : "Channel created.");
      if (made?.id) {
        this.channel = made.id;
        this.target = "";
        this.host.redraw();
      }
    };
    const side = h(
      "div",
      { class: "role-side" },
      h(
        "div",
        { class: "role-list", role: "listbox", "aria-label": "Channels" },
        ordered.map((x) =>
          h(
            "button",
            {
              type: "button",
              role: "option",
              class: "secondary" + (x.id === c?.id ? " current" : "") + (x.type === CATEGORY ? " category" : x.parent_id ? " nested" : ""),
              "aria-selected": String(x.id === c?.id),
              onclick: () => {
                this.channel = x.id;
                this.target = "";
                this.host.redraw();
              },
            },
            x.type === CATEGORY ? x.name.toUpperCase() : `# ${x.name}`,
          ),
        ),
      ),
      h("button", { type: "button", onclick: make(0) }, "Create channel"),
      h("button", { type: "button", class: "secondary", onclick: make(CATEGORY) }, "Create category"),
    );
    if (!c) return h("div", { class: "roles-editor" }, side, h("p", { class: "muted" }, "No channels yet."));
    return h("div", { class: "roles-editor" }, side, h("div", { class: "role-form" }, this.form(guild.id, c, list), this.overwrites(guild, c)));
  }

  private form(guildId: string, c: ChannelInfo, list: ChannelInfo[]): Child {
    const api = this.host.api;
    const category = c.type === CATEGORY;
    const name = h("input", { id: "ch-name", value: c.name });
    const topic = h("textarea", { id: "ch-topic", rows: 2, maxlength: 1024 }, c.topic ?? "");
    const slow = h(
      "select",
      { id: "ch-slowmode" },
      SLOWMODE.map(([s, label]) => h("option", { value: s, selected: s === c.rate_limit_per_user }, label)),
    );
    const cats = list.filter((x) => x.type === CATEGORY);
    const parent = h(
      "select",
      { id: "ch-parent" },
      h("option", { value: "" }, "No category"),
      cats.map((k) => h("option", { value: k.id, selected: k.id === c.parent_id }, k.name)),
    );
    const save = () => {
      const body: any = { name: (name as HTMLInputElement).value.trim() };
      if (!category) {
        body.topic = (topic as HTMLTextAreaElement).value;
        body.rate_limit_per_user = Number((slow as HTMLSelectElement).value);
        body.parent_id = (parent as HTMLSelectElement).value || null;
      }
      this.host.act(() => api.patch(`/channels/${c.id}`, body), `Saved ${body.name}.`);
    };
    // Moves `c` one place among its siblings: every sibling whose place
    // changes gets its new position.
    const move = (by: number) => {
      const siblings = channelOrder(list).filter((x) => (category ? x.type === CATEGORY : x.type !== CATEGORY && (x.parent_id ?? null) === (c.parent_id ?? null)));
      const i = siblings.findIndex((x) => x.id === c.id);
      const j = i + by;
      if (j < 0 || j >= siblings.length) return;
      [siblings[i], siblings[j]] = [siblings[j], siblings[i]];
      const changed = siblings.map((x, k) => [x, k] as const).filter(([x, k]) => x.position !== k);
      this.host.act(async () => {
        for (const [x, k] of changed) await api.patch(`/channels/${x.id}`, { position: k });
      }, by < 0 ? `Moved ${c.name} up.` : `Moved ${c.name} down.`);
    };
    let armed = false;
    const del = h("button", { type: "button", class: "danger" }, category ? "Delete category" : "Delete channel");
    del.onclick = () => {
      if (!armed) {
        armed = true;
        del.textContent = `Really delete ${category ? "" : "#"}${c.name}?`;
        return;
      }
      this.host.act(() => api.del(`/channels/${c.id}`), `Deleted ${c.name}.`).then((ok) => ok && ((this.channel = ""), this.host.redraw()));
    };
    return h(
      "form",
      { class: "role-form", "aria-label": `Edit ${c.name}`, "data-scope": `channel:${c.id}`, onsubmit: (e: Event) => (e.preventDefault(), save()) },
      h("label", { for: "ch-name" }, category ? "Category name" : "Channel name"),
      name,
      category
        ? null
        : [
            h("label", { for: "ch-topic" }, "Topic"),
            topic,
            h("label", { for: "ch-slowmode" }, "Slow mode"),
            slow,
            h("label", { for: "ch-parent" }, "Category"),
            parent,
          ],
      h(
        "div",
        { class: "row" },
        h("button", { type: "submit" }, "Save changes"),
        h("button", { type: "button", class: "secondary", onclick: () => move(-1) }, "Move up"),
        h("button", { type: "button", class: "secondary", onclick: () => move(1) }, "Move down"),
        del,
      ),
    );
  }

  private overwrites(guild: { id: string; roles: { id: string; name: string; position: number }[] }, c: ChannelInfo): Child {
    const api = this.host.api;
    const roleName = (id: string) => (id === guild.id ? "@everyone" : guild.roles.find((r) => r.id === id)?.name ?? id);
    const label = (o: Overwrite) => (o.type === 0 ? roleName(o.id) : `@${this.host.name(o.id)}`);
    for (const [id, o] of this.added) if (c.overwrites.some((x) => x.id === id) || !id.startsWith(c.id + ":")) this.added.delete(id);
    const list: Overwrite[] = [...c.overwrites, ...[...this.added.entries()].filter(([k]) => k.startsWith(c.id + ":")).map(([, o]) => o)];
    const o = list.find((x) => x.id === this.target) ?? list[0];
    if (o) this.target = o.id;
    const missing = [...guild.roles].sort((a, b) => b.position - a.position).filter((r) => !list.some((x) => x.id === r.id));
    const add = h(
      "select",
      {
        id: "ow-add",
        onchange: (e: Event) => {
          const id = (e.target as HTMLSelectElement).value;
          if (!id) return;
          this.added.set(`${c.id}:${id}`, { id, type: 0, allow: "0", deny: "0" });
          this.target = id;
          this.host.redraw();
        },
      },
      h("option", { value: "" }, "Add a role…"),
      missing.map((r) => h("option", { value: r.id }, r.id === guild.id ? "@everyone" : r.name)),
    );
    const head = [
      h("h3", null, "Permissions in this channel"),
      h(
        "div",
        { class: "row overwrite-list", role: "group", "aria-label": "Overwrites" },
        list.map((x) =>
          h(
            "button",
            {
              type: "button",
              class: "secondary" + (x.id === o?.id ? " current" : ""),
              "aria-pressed": String(x.id === o?.id),
              onclick: () => ((this.target = x.id), this.host.redraw()),
            },
            label(x),
          ),
        ),
        missing.length ? [h("label", { for: "ow-add", class: "sr-only" }, "Add a role to this channel's permissions"), add] : null,
      ),
    ];
    if (!o) return [head, h("p", { class: "muted" }, "Everyone has the server's permissions here. Add a role to change them.")];
    const allow = BigInt(o.allow);
    const deny = BigInt(o.deny);
    const rows = CHANNEL_PERMS.map((bit) => {
      const b = 1n << BigInt(bit);
      const now = allow & b ? "allow" : deny & b ? "deny" : "inherit";
      const name = `ow-${bit}`;
      const choice = (v: string, text: string) =>
        h("label", { class: `tri ${v}`, title: text }, h("input", { type: "radio", name, value: v, checked: now === v, "aria-label": `${permissionLabel(bit)}: ${text}` }), h("span", { "aria-hidden": "true" }, text === "Inherit" ? "/" : text === "Allow" ? "✓" : "✗"));
      return h("div", { class: "tri-row", role: "radiogroup", "aria-label": permissionLabel(bit) }, h("span", { class: "tri-name" }, permissionLabel(bit)), choice("deny", "Deny"), choice("inherit", "Inherit"), choice("allow", "Allow"));
    });
    const form = h("form", { class: "role-form", "aria-label": `Permissions of ${label(o)} in ${c.name}`, "data-scope": `overwrite:${c.id}:${o.id}` }, rows);
    const save = () => {
      let a = allow;
      let d = deny;
      for (const bit of CHANNEL_PERMS) {
        const b = 1n << BigInt(bit);
        const v = form.querySelector<HTMLInputElement>(`input[name="ow-${bit}"]:checked`)?.value ?? "inherit";
        a &= ~b;
        d &= ~b;
        if (v === "allow") a |= b;
        if (v === "deny") d |= b;
      }
      this.host.act(() => api.put(`/channels/${c.id}/permissions/${o.id}`, { type: o.type, allow: a.toString(), deny: d.toString() }), `Saved ${label(o)} in ${c.name}.`);
    };
    const saved = c.overwrites.some((x) => x.id === o.id);
    return [
      head,
      form,
      h(
        "div",
        { class: "row" },
        h("button", { type: "button", onclick: save }, "Save permissions"),
        h(
          "button",
          {
            type: "button",
            class: "secondary",
            onclick: () => {
              this.added.delete(`${c.id}:${o.id}`);
              if (!saved) return this.host.redraw();
              this.host.act(() => api.del(`/channels/${c.id}/permissions/${o.id}`), `${label(o)} follows the server's permissions again.`);
            },
          },
          "Remove",
        ),
      ),
    ];
  }
}
