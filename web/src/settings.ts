// Server settings: the overview (name, leave, delete), the roles editor
// (create, name, colour, hoist, mentionable, permissions, order, delete),
// channels and categories with their overwrites (settings-channels.ts), the
// members (roles, kick, ban with a reason, the bans list), the invites
// (list, revoke) and the audit log, over the same REST routes bots use. What the server answers (and its gateway events)
// is what shows: the panel keeps no state of its own beyond the open tab.

import { Api } from "./api";
import { Child, clear, h } from "./dom";
import { keep, restore } from "./edits";
import { permissionLabel } from "./permissions";
import { ChannelInfo, ChannelsTab } from "./settings-channels";
import { StatusLine } from "./status";

export type RoleInfo = { id: string; name: string; permissions: bigint; position: number; color: number; hoist: boolean; mentionable: boolean };
export type GuildInfo = { id: string; name: string; owner_id: string; icon: string | null; roles: RoleInfo[] };

export interface SettingsHost {
  api: Api;
  guild(id: string): GuildInfo | null;
  channels(guild: string): ChannelInfo[];
  /** A person's name as the client knows it (their id if unknown). */
  name(user: string): string;
  me(): string | undefined;
}

/** The permissions the editor offers (bits), in Discord's order; their
 *  words are Discord's (`permissions.ts`). */
const EDITABLE: number[] = [10, 11, 16, 6, 15, 14, 17, 13, 4, 28, 5, 0, 1, 2, 40, 7, 3];

type Tab = "overview" | "roles" | "channels" | "members" | "invites" | "audit";
const TABS: [Tab, string][] = [
  ["overview", "Overview"],
  ["roles", "Roles"],
  ["channels", "Channels"],
  ["members", "Members"],
  ["invites", "Invites"],
  ["audit", "Audit log"],
];

/** What each audit log action says, Discord's action types. */
const ACTIONS: Record<number, string> = {
  1: "updated the server",
  10: "created the channel",
  11: "updated the channel",
  12: "deleted the channel",
  13: "set permissions in",
  14: "changed permissions in",
  15: "removed permissions in",
  20: "kicked",
  22: "banned",
  23: "lifted the ban of",
  24: "updated the member",
  25: "changed the roles of",
  28: "added the bot",
  30: "created the role",
  31: "updated the role",
  32: "deleted the role",
  40: "created the invite",
  42: "revoked the invite",
  50: "created the webhook",
  51: "updated the webhook",
  52: "deleted the webhook",
  60: "added the emoji",
  61: "renamed the emoji",
  62: "removed the emoji",
  72: "deleted a message of",
  73: "deleted messages in",
  74: "pinned a message in",
  75: "unpinned a message in",
  110: "created the thread",
  111: "updated the thread",
  112: "deleted the thread",
  121: "changed command permissions",
};

/** A timeout's lengths offered in the members tab (Discord's), in ms. */
const TIMEOUTS: [number, string][] = [
  [0, "Time out…"],
  [60_000, "60 seconds"],
  [5 * 60_000, "5 minutes"],
  [10 * 60_000, "10 minutes"],
  [3_600_000, "1 hour"],
  [86_400_000, "1 day"],
  [7 * 86_400_000, "1 week"],
];

export class SettingsPanel {
  private el: HTMLElement | null = null;
  private guildId = "";
  private tab: Tab = "overview";
  private role = "";
  private body!: HTMLElement;
  private status = new StatusLine();
  private channelsTab: ChannelsTab;

  constructor(private host: SettingsHost) {
    this.channelsTab = new ChannelsTab({
      api: host.api,
      act: (what, done) => this.act(what, done),
      redraw: () => this.show("channels", false),
      name: (u) => host.name(u),
    });
  }

  get isOpen() {
    return !!this.el;
  }

  open(guild: string, tab: Tab = "overview") {
    this.close();
    this.guildId = guild;
    this.tab = tab;
    this.body = h("div", { class: "settings-body" });
    const tabs = TABS.map(([t, label]) => h("button", { type: "button", role: "tab", class: "secondary", "data-tab": t, onclick: () => this.show(t) }, label));
    this.el = h(
      "div",
      { class: "settings", role: "dialog", "aria-modal": "true", "aria-label": "Server settings" },
      h(
        "div",
        { class: "settings-card" },
        h("header", { class: "settings-top" }, h("h2", null, "Server settings"), h("button", { type: "button", class: "icon", "aria-label": "Close settings", onclick: () => this.close() }, "×")),
        h("div", { class: "settings-tabs", role: "tablist" }, tabs),
        this.status.el,
        this.body,
      ),
    );
    document.body.appendChild(this.el);
    this.show(tab);
  }

  close() {
    this.el?.remove();
    this.el = null;
  }

  /** A role, a member or the server changed: redraw what shows it,
   *  keeping what the person has edited there and not saved (edits.ts). */
  changed(guild: string) {
    if (!this.el || guild !== this.guildId || !["overview", "roles", "channels"].includes(this.tab)) return;
    const kept = keep(this.body);
    this.show(this.tab, false);
    restore(this.body, kept);
  }

  private say(text: string, error = false) {
    this.status.say(text, error);
  }

  private act(what: () => Promise<unknown>, done: string): Promise<any> {
    return this.status.act(what, done);
  }

  private show(tab: Tab, clearStatus = true) {
    if (!this.el) return;
    this.tab = tab;
    if (clearStatus) this.say("");
    for (const b of this.el.querySelectorAll<HTMLElement>("[role=tab]")) b.setAttribute("aria-selected", String(b.dataset.tab === tab));
    const g = this.host.guild(this.guildId);
    if (!g) return this.close();
    if (tab === "overview") clear(this.body, this.overview(g));
    else if (tab === "roles") clear(this.body, this.roles(g));
    else if (tab === "channels") clear(this.body, this.channelsTab.render(g, this.host.channels(g.id)));
    else if (tab === "invites") this.invites(g);
    else if (tab === "audit") this.audit(g);
    else this.members(g);
  }

  private overview(g: GuildInfo): Child {
    const api = this.host.api;
    const owner = g.owner_id === this.host.me();
    const name = h("input", { id: "set-name", value: g.name });
    const confirm = h("input", { id: "set-confirm", autocomplete: "off" });
    const app = h("input", { id: "set-bot", inputmode: "numeric", autocomplete: "off", placeholder: "Application id" });
    const picker = h("input", { id: "set-icon", type: "file" }) as HTMLInputElement;
    picker.accept = "image/png,image/jpeg,image/gif,image/webp";
    picker.onchange = () => {
      const f = picker.files?.[0];
      if (!f) return;
      const r = new FileReader();
      r.onload = () => this.act(() => api.patch(`/guilds/${g.id}`, { icon: String(r.result) }), "Icon saved.");
      r.readAsDataURL(f);
    };
    return [
      h("label", { for: "set-name" }, "Server name"),
      h("div", { class: "row" }, name, h("button", { type: "button", onclick: () => this.act(() => api.patch(`/guilds/${g.id}`, { name: (name as HTMLInputElement).value.trim() }), "Saved.") }, "Save")),
      h("label", { for: "set-icon" }, "Server icon (PNG, JPEG, GIF or WebP)"),
      h(
        "div",
        { class: "row" },
        g.icon ? h("img", { class: "guild-icon preview", src: `/icons/${g.id}/${g.icon}.png`, alt: "The current icon", width: 48, height: 48 }) : null,
        picker,
        g.icon ? h("button", { type: "button", class: "secondary", onclick: () => this.act(() => api.patch(`/guilds/${g.id}`, { icon: null }), "Icon removed.") }, "Remove icon") : null,
      ),
      h("h3", null, "Add a bot"),
      h("label", { for: "set-bot" }, "The bot's application id (its author gives it, or its invitation link)"),
      h(
        "div",
        { class: "row" },
        app,
        h(
          "button",
          {
            type: "button",
            onclick: () => {
              // An id, or a whole invitation link: its client_id.
              const v = (app as HTMLInputElement).value.trim();
              const id = v.match(/client_id=(\d+)/)?.[1] ?? (/^\d+$/.test(v) ? v : null);
              if (!id) return this.say("Paste the bot's application id or its invitation link.", true);
              // The consent page (the same as the bot's own link): what it asks for, where it goes.
              location.assign(`/oauth2/authorize?client_id=${id}&scope=bot+applications.commands&permissions=0`);
            },
          },
          "Continue",
        ),
      ),
      owner
        ? [
            h("h3", null, "Delete server"),
            h("label", { for: "set-confirm" }, `Type ${g.name} to delete it, with every channel and message`),
            h(
              "div",
              { class: "row" },
              confirm,
              h(
                "button",
                {
                  type: "button",
                  class: "danger",
                  onclick: () => {
                    if ((confirm as HTMLInputElement).value !== g.name) return this.say("Type the server's name exactly to delete it.", true);
                    this.act(() => api.del(`/guilds/${g.id}`), "Deleted.").then((ok) => ok && this.close());
                  },
                },
                "Delete server",
              ),
            ),
          ]
        : [
            h("h3", null, "Leave server"),
            h(
              "button",
              { type: "button", class: "danger", onclick: () => this.act(() => api.del(`/users/@me/guilds/${g.id}`), "Left.").then((ok) => ok && this.close()) },
              "Leave server",
            ),
          ],
    ];
  }

  private roles(g: GuildInfo): Child {
    const api = this.host.api;
    const list = [...g.roles].sort((a, b) => b.position - a.position);
    // The role asked for; one just made may not be here yet (its
    // GUILD_ROLE_CREATE redraws this), so the choice is kept.
    const r = list.find((x) => x.id === this.role) ?? list.find((x) => x.id !== g.id) ?? list[0];
    const everyone = r.id === g.id;
    const name = h("input", { id: "role-name", value: everyone ? "@everyone" : r.name, disabled: everyone });
    const color = h("input", { id: "role-color", type: "color", value: `#${r.color.toString(16).padStart(6, "0")}`, disabled: everyone });
    const hoist = h("input", { id: "role-hoist", type: "checkbox", checked: r.hoist, disabled: everyone });
    const mentionable = h("input", { id: "role-mentionable", type: "checkbox", checked: r.mentionable, disabled: everyone });
    const boxes = EDITABLE.map((bit) => {
      const label = permissionLabel(bit);
      const id = `perm-${bit}`;
      const box = h("input", { id, type: "checkbox", checked: (r.permissions & (1n << BigInt(bit))) !== 0n, "data-bit": bit });
      return h("label", { class: "perm", for: id }, box, label);
    });
    const save = () => {
      let bits = r.permissions;
      for (const bit of EDITABLE) {
        const box = this.body.querySelector<HTMLInputElement>(`#perm-${bit}`)!;
        bits = box.checked ? bits | (1n << BigInt(bit)) : bits & ~(1n << BigInt(bit));
      }
      const body: any = { permissions: bits.toString() };
      if (!everyone) {
        body.name = (name as HTMLInputElement).value.trim();
        body.color = parseInt((color as HTMLInputElement).value.slice(1), 16) || 0;
        body.hoist = (hoist as HTMLInputElement).checked;
        body.mentionable = (mentionable as HTMLInputElement).checked;
      }
      this.act(() => api.patch(`/guilds/${g.id}/roles/${r.id}`, body), `Saved ${everyone ? "@everyone" : body.name}.`);
    };
    return h(
      "div",
      { class: "roles-editor" },
      h(
        "div",
        { class: "role-side" },
        h(
        "div",
        { class: "role-list", role: "listbox", "aria-label": "Roles" },
        list.map((x) =>
          h(
            "button",
            { type: "button", role: "option", class: "secondary" + (x.id === r.id ? " current" : ""), "aria-selected": String(x.id === r.id), onclick: () => ((this.role = x.id), this.show("roles")) },
            x.id === g.id ? "@everyone" : x.name,
          ),
        ),
        ),
        h(
          "button",
          {
            type: "button",
            onclick: async () => {
              try {
                const made = await api.post(`/guilds/${g.id}/roles`, { name: "new role" });
                this.role = made.id;
                this.show("roles", false);
                this.say("Role created.");
              } catch (e) {
                this.say(e instanceof Error ? e.message : String(e), true);
              }
            },
          },
          "Create role",
        ),
      ),
      h(
        "form",
        { class: "role-form", "aria-label": `Edit ${everyone ? "@everyone" : r.name}`, "data-scope": `role:${r.id}`, onsubmit: (e: Event) => (e.preventDefault(), save()) },
        h("label", { for: "role-name" }, "Role name"),
        name,
        h("label", { for: "role-color" }, "Colour"),
        color,
        h("label", { class: "perm", for: "role-hoist" }, hoist, "Show members separately"),
        h("label", { class: "perm", for: "role-mentionable" }, mentionable, "Allow anyone to @mention this role"),
        h("h3", null, "Permissions"),
        h("div", { class: "perms-grid" }, boxes),
        h(
          "div",
          { class: "row" },
          h("button", { type: "submit" }, "Save changes"),
          everyone
            ? null
            : [
                h("button", { type: "button", class: "secondary", onclick: () => this.moveRole(g, r, 1) }, "Move up"),
                h("button", { type: "button", class: "secondary", onclick: () => this.moveRole(g, r, -1) }, "Move down"),
                h("button", { type: "button", class: "danger", onclick: () => this.act(() => api.del(`/guilds/${g.id}/roles/${r.id}`), "Role deleted.") }, "Delete role"),
              ],
        ),
      ),
    );
  }

  /** Moves a role one place up (`by` 1) or down among the others
   *  (`PATCH /guilds/{id}/roles` with every role's new position; @everyone
   *  stays at 0). */
  private moveRole(g: GuildInfo, r: RoleInfo, by: number) {
    const order = g.roles.filter((x) => x.id !== g.id).sort((a, b) => a.position - b.position || (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
    const i = order.findIndex((x) => x.id === r.id);
    const j = i + by;
    if (j < 0 || j >= order.length) return this.say(by > 0 ? `${r.name} is already the highest.` : `${r.name} is already the lowest.`);
    [order[i], order[j]] = [order[j], order[i]];
    const body = order.map((x, k) => ({ id: x.id, position: k + 1 }));
    this.act(() => this.host.api.patch(`/guilds/${g.id}/roles`, body), by > 0 ? `Moved ${r.name} up.` : `Moved ${r.name} down.`);
  }

  /** Live invites, newest first, each with its channel, inviter, uses and
   *  expiry, and "Revoke" (`GET /guilds/{id}/invites`, `DELETE /invites/{code}`). */
  private async invites(g: GuildInfo) {
    const api = this.host.api;
    clear(this.body, h("p", { class: "muted" }, "Loading invites…"));
    let list: any[] = [];
    try {
      list = await api.get(`/guilds/${g.id}/invites`);
    } catch (e) {
      clear(this.body);
      return this.say(e instanceof Error ? e.message : String(e), true);
    }
    if (this.tab !== "invites" || !this.el) return;
    const when = (iso: string | null) => (iso ? new Date(iso).toLocaleString([], { dateStyle: "medium", timeStyle: "short" }) : "never");
    clear(
      this.body,
      h("h3", null, `Invites — ${list.length}`),
      list.length
        ? h(
            "ul",
            { class: "member-admin", "aria-label": "Invites" },
            list.map((i) =>
              h(
                "li",
                { class: "member-row invite-row", "data-code": i.code },
                h(
                  "span",
                  { class: "member-name" },
                  h("code", null, i.code),
                  ` #${i.channel?.name ?? "?"}`,
                  h("span", { class: "muted" }, ` by ${i.inviter?.global_name || i.inviter?.username || "someone"} · ${i.uses}${i.max_uses ? `/${i.max_uses}` : ""} uses · expires ${when(i.expires_at)}`),
                ),
                h(
                  "button",
                  { type: "button", class: "secondary", "aria-label": `Revoke invite ${i.code}`, onclick: () => this.act(() => api.del(`/invites/${i.code}`), `Invite ${i.code} revoked.`).then((ok) => ok && this.show("invites", false)) },
                  "Revoke",
                ),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No live invites."),
    );
  }

  /** The newest 50 entries of the audit log: who did what to what, when,
   *  and why (`GET /guilds/{id}/audit-logs`; VIEW_AUDIT_LOG). */
  private async audit(g: GuildInfo) {
    clear(this.body, h("p", { class: "muted" }, "Loading the audit log…"));
    let log: any;
    try {
      log = await this.host.api.get(`/guilds/${g.id}/audit-logs?limit=50`);
    } catch (e) {
      clear(this.body);
      return this.say(e instanceof Error ? e.message : String(e), true);
    }
    if (this.tab !== "audit" || !this.el) return;
    const users = new Map<string, any>((log.users ?? []).map((u: any) => [u.id, u]));
    const person = (id: string | null) => {
      const u = id ? users.get(id) : null;
      return u ? u.global_name || u.username : id ? this.host.name(id) : "someone";
    };
    const channels = this.host.channels(g.id);
    const value = (e: any, key: string) => {
      const c = (e.changes ?? []).find((x: any) => x.key === key);
      return c ? (c.new_value ?? c.old_value) : undefined;
    };
    // A name the log itself knows for a target (a deleted channel's, say).
    const logged = new Map<string, string>();
    for (const e of [...(log.audit_log_entries ?? [])].reverse()) {
      const n = value(e, "name");
      if (e.target_id && typeof n === "string") logged.set(e.target_id, n);
    }
    const target = (e: any): string => {
      const t = e.action_type;
      const id = e.target_id;
      if ((t >= 10 && t <= 15) || t === 73 || t === 74 || t === 75 || (t >= 110 && t <= 112)) {
        const c = channels.find((x) => x.id === (id ?? e.options?.channel_id));
        const name = c?.name ?? value(e, "name") ?? logged.get(id ?? e.options?.channel_id) ?? e.options?.channel_id ?? id;
        return name ? `#${name}` : "";
      }
      if (t >= 30 && t <= 32) return g.roles.find((r) => r.id === id)?.name ?? value(e, "name") ?? id ?? "";
      if (t === 40 || t === 42) return String(value(e, "code") ?? "");
      if ([20, 22, 23, 24, 25, 28, 72].includes(t)) return person(id);
      if (t >= 50 && t <= 62) return String(value(e, "name") ?? id ?? "");
      return "";
    };
    const when = (id: string) => new Date(Number((BigInt(id) >> 22n) + 1420070400000n)).toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
    const entries: any[] = log.audit_log_entries ?? [];
    clear(
      this.body,
      h("h3", null, "Audit log"),
      entries.length
        ? h(
            "ol",
            { class: "member-admin audit-log", "aria-label": "Audit log" },
            entries.map((e) =>
              h(
                "li",
                { class: "member-row audit-entry", "data-action": e.action_type },
                h("span", null, h("strong", null, person(e.user_id)), ` ${ACTIONS[e.action_type] ?? `did action ${e.action_type} on`} `, h("strong", null, target(e))),
                h("span", { class: "muted" }, when(e.id), e.reason ? ` — “${e.reason}”` : ""),
              ),
            ),
          )
        : h("p", { class: "muted" }, "Nothing recorded yet."),
    );
  }

  private async members(g: GuildInfo) {
    const api = this.host.api;
    clear(this.body, h("p", { class: "muted" }, "Loading members…"));
    let people: any[] = [];
    let bans: any[] = [];
    try {
      [people, bans] = await Promise.all([api.get(`/guilds/${g.id}/members?limit=1000`), api.get(`/guilds/${g.id}/bans`).catch(() => [])]);
    } catch (e) {
      return this.say(e instanceof Error ? e.message : String(e), true);
    }
    if (this.tab !== "members" || !this.el) return;
    const roles = [...g.roles].filter((r) => r.id !== g.id).sort((a, b) => b.position - a.position);
    const me = this.host.me();
    const row = (m: any): HTMLElement => {
      const u = m.user;
      const name = m.nick || u.global_name || u.username;
      const reason = h("input", { "aria-label": `Reason to ban ${name}`, placeholder: "Reason (optional)", hidden: true });
      const confirmBan = h("button", { type: "button", class: "danger", hidden: true }, `Confirm ban`);
      const until = Date.parse(m.communication_disabled_until ?? "");
      const timedOut = until > Date.now();
      const timeout = (ms: number | null) =>
        this.act(
          () => api.patch(`/guilds/${g.id}/members/${u.id}`, { communication_disabled_until: ms === null ? null : new Date(Date.now() + ms).toISOString() }),
          ms === null ? `${name}'s timeout removed.` : `${name} timed out.`,
        ).then((ok) => ok && this.show("members", false));
      const li = h(
        "li",
        { class: "member-row", "data-user-id": u.id, "aria-label": name },
        h("span", { class: "member-name" }, name, " ", h("span", { class: "muted" }, `@${u.username}`)),
        h(
          "div",
          { class: "member-roles", role: "group", "aria-label": `Roles of ${name}` },
          roles.map((r) => {
            const id = `mr-${u.id}-${r.id}`;
            return h(
              "label",
              { class: "perm", for: id },
              h("input", {
                id,
                type: "checkbox",
                checked: (m.roles ?? []).includes(r.id),
                onchange: (e: Event) => {
                  const on = (e.target as HTMLInputElement).checked;
                  const path = `/guilds/${g.id}/members/${u.id}/roles/${r.id}`;
                  this.act(() => (on ? api.put(path) : api.del(path)), on ? `${r.name} given to ${name}.` : `${r.name} taken from ${name}.`);
                },
              }),
              r.name,
            );
          }),
        ),
        u.id === me || u.id === g.owner_id
          ? null
          : h(
              "div",
              { class: "row" },
              h("button", { type: "button", class: "secondary", onclick: () => this.act(() => api.del(`/guilds/${g.id}/members/${u.id}`), `${name} kicked.`).then((ok) => ok && li.remove()) }, "Kick"),
              timedOut
                ? [
                    h("span", { class: "muted" }, `Timed out until ${new Date(until).toLocaleString()}`),
                    h("button", { type: "button", class: "secondary", onclick: () => timeout(null) }, "Remove timeout"),
                  ]
                : h(
                    "select",
                    {
                      "aria-label": `Time out ${name}`,
                      onchange: (e: Event) => {
                        const v = Number((e.target as HTMLSelectElement).value);
                        if (v > 0) timeout(v);
                      },
                    },
                    TIMEOUTS.map(([ms, label]) => h("option", { value: String(ms) }, label)),
                  ),
              h(
                "button",
                {
                  type: "button",
                  class: "secondary",
                  onclick: () => {
                    reason.hidden = confirmBan.hidden = false;
                    reason.focus();
                  },
                },
                "Ban",
              ),
              reason,
              confirmBan,
            ),
      );
      confirmBan.onclick = () => {
        const why = (reason as HTMLInputElement).value.trim();
        const headers: Record<string, string> = why ? { "x-audit-log-reason": encodeURIComponent(why) } : {};
        this.act(() => api.put(`/guilds/${g.id}/bans/${u.id}`, { delete_message_seconds: 0 }, headers), `${name} banned.`).then((ok) => {
          if (!ok) return;
          li.remove();
          this.show("members", false);
        });
      };
      return li;
    };
    clear(
      this.body,
      h("h3", null, `Members — ${people.length}`),
      h("ul", { class: "member-admin", "aria-label": "Members" }, people.map(row)),
      h("h3", null, `Bans — ${bans.length}`),
      bans.length
        ? h(
            "ul",
            { class: "member-admin", "aria-label": "Bans" },
            bans.map((b) =>
              h(
                "li",
                { class: "member-row" },
                h("span", { class: "member-name" }, b.user?.username ?? b.user?.id, b.reason ? h("span", { class: "muted" }, ` — ${b.reason}`) : null),
                h("button", { type: "button", class: "secondary", onclick: () => this.act(() => api.del(`/guilds/${g.id}/bans/${b.user.id}`), "Ban revoked.").then((ok) => ok && this.show("members", false)) }, "Revoke ban"),
              ),
            ),
          )
        : h("p", { class: "muted" }, "No one is banned."),
    );
  }
}
