// Interactions in the web client: the "/" command picker over the
// composer (commands from the guild's application-command-index), option
// entry as `name:value`, autocomplete choices, buttons and selects on
// messages, modals, ephemeral messages, and the "thinking" / "did not
// respond" states. Everything is built with h(): text stays text.

import { Api, ApiError } from "./api";
import { Child, clear, h } from "./dom";

type Option = {
  type: number;
  name: string;
  description?: string;
  required?: boolean;
  autocomplete?: boolean;
  choices?: { name: string; value: string | number }[];
  options?: Option[];
};
type Command = {
  id: string;
  application_id: string;
  name: string;
  description: string;
  type: number;
  version: string;
  options?: Option[];
};
type App = { id: string; name: string; bot_id: string };
/// Slash commands (type 1), and the user (2) and message (3) context menus.
type Index = { commands: Command[]; user: Command[]; message: Command[]; apps: Map<string, App> };
/// What a user, role, mentionable or channel select offers, from the host's state.
export type Choice = { value: string; label: string };

const STRING = 3, INTEGER = 4, BOOLEAN = 5, USER = 6, CHANNEL = 7, ROLE = 8, MENTIONABLE = 9, NUMBER = 10, ATTACHMENT = 11;
const SUB_COMMAND = 1, SUB_COMMAND_GROUP = 2;
const EPHEMERAL = 1 << 6, LOADING = 1 << 7;

/// What the client needs from its host page.
export type Host = {
  api: Api;
  sessionId: () => string | null;
  where: () => { guild: string | null; channel: string | null };
  status: (text: string, kind: "info" | "error" | "") => void;
  /// The guild's members (those the client knows), roles or channels (of
  /// `types` if given), for the selects of those kinds.
  choices: (kind: "users" | "roles" | "channels", types?: number[]) => Choice[];
};

export class Commands {
  private index = new Map<string, Promise<Index>>();
  /// Indexes that have arrived (a context menu must decide at once).
  private loaded = new Map<string, Index>();
  private menu: HTMLElement;
  /// Interactions this client started, by nonce: what to say while waiting.
  private waiting = new Map<string, { label: string; timer: number }>();
  private picked: Command | null = null;
  private choices: { name: string; value: string | number }[] = [];
  private acTimer = 0;
  private acNonce = "";
  /// The text autocomplete was last asked for (asked again only when it changes).
  private acText = "";
  /// Files chosen for the picked command's attachment options, by option name.
  private files = new Map<string, File>();

  constructor(private host: Host, private picker: HTMLElement, private input: HTMLTextAreaElement, private modal: HTMLDialogElement) {
    input.addEventListener("input", () => this.onInput());
    input.addEventListener("keydown", (e) => this.onKey(e));
    this.menu = h("div", { class: "ctx-menu", role: "menu", "aria-label": "Apps", hidden: true });
    document.body.appendChild(this.menu);
    document.addEventListener("click", (e) => {
      if (!this.menu.contains(e.target as Node)) this.closeMenu();
    });
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape") this.closeMenu();
    });
  }

  private load(guild: string): Promise<Index> {
    let p = this.index.get(guild);
    if (!p) {
      p = this.host.api.get(`/guilds/${guild}/application-command-index`).then((v: any) => {
        const all = v.application_commands as Command[];
        const idx: Index = {
          commands: all.filter((c) => c.type === 1),
          user: all.filter((c) => c.type === 2),
          message: all.filter((c) => c.type === 3),
          apps: new Map((v.applications as App[]).map((a) => [a.id, a])),
        };
        this.loaded.set(guild, idx);
        return idx;
      });
      p.catch(() => this.index.delete(guild));
      this.index.set(guild, p);
    }
    return p;
  }

  /// Fetches a guild's index ahead of its first use (context menus).
  prefetch(guild: string) {
    this.load(guild).catch(() => {});
  }

  /// Forget a guild's index (a stale command version makes the server say so).
  invalidate(guild: string) {
    this.index.delete(guild);
    this.loaded.delete(guild);
  }

  /// A right click on a user (`kind` 2) or a message (3): the "Apps" menu of
  /// the guild's context-menu commands of that kind, if it has any (true:
  /// the menu is shown, the browser's own is not wanted).
  contextMenu(kind: 2 | 3, target: string, x: number, y: number): boolean {
    const { guild, channel } = this.host.where();
    const idx = guild ? this.loaded.get(guild) : undefined;
    const list = kind === 2 ? idx?.user : idx?.message;
    if (!guild || !channel || !idx || !list?.length) return false;
    clear(
      this.menu,
      h("div", { class: "picker-head" }, "Apps"),
      list.map((c) =>
        h(
          "button",
          {
            type: "button",
            role: "menuitem",
            class: "ctx-item",
            onclick: () => {
              this.closeMenu();
              const body = this.body(2, c, guild, channel, [], nonce());
              (body.data as any).target_id = target;
              void this.send(body, idx.apps.get(c.application_id)?.name ?? "The application", guild);
            },
          },
          c.name,
          h("span", { class: "app" }, idx.apps.get(c.application_id)?.name ?? ""),
        ),
      ),
    );
    this.menu.style.left = `${Math.min(x, window.innerWidth - 220)}px`;
    this.menu.style.top = `${Math.min(y, window.innerHeight - 40 - 36 * list.length)}px`;
    this.menu.hidden = false;
    this.menu.querySelector<HTMLButtonElement>("button")?.focus();
    return true;
  }

  private closeMenu() {
    if (this.menu.hidden) return;
    this.menu.hidden = true;
    clear(this.menu);
  }

  private async onInput() {
    const { guild } = this.host.where();
    const text = this.input.value;
    if (!guild || !text.startsWith("/")) return this.hide();
    const idx = await this.load(guild).catch(() => null);
    if (!idx) return this.hide();
    const space = text.indexOf(" ");
    if (space < 0) {
      const q = text.slice(1).toLowerCase();
      this.picked = null;
      this.show(idx, idx.commands.filter((c) => c.name.startsWith(q)).slice(0, 25));
      return;
    }
    const picked = idx.commands.find((c) => c.name === text.slice(1, space)) ?? null;
    if (picked !== this.picked) this.files.clear();
    this.picked = picked;
    if (!this.picked) return this.hide();
    this.showHelp(idx, this.picked, text.slice(space + 1));
  }

  private onKey(e: KeyboardEvent) {
    if (this.picker.hidden) return;
    const first = this.picker.querySelector<HTMLButtonElement>("button.cmd");
    // Enter on a whole command name sends it; on a partial one it completes, as Tab does.
    const whole = first?.dataset.name !== undefined && this.input.value === `/${first.dataset.name}`;
    if ((e.key === "Tab" || (e.key === "Enter" && !whole)) && first && !this.picked) {
      e.preventDefault();
      first.click();
    } else if (e.key === "Escape") {
      this.hide();
    }
  }

  private hide() {
    this.picker.hidden = true;
    clear(this.picker);
  }

  private show(idx: Index, list: Command[]) {
    if (!list.length) return this.hide();
    clear(
      this.picker,
      h("div", { class: "picker-head" }, "Commands"),
      list.map((c) =>
        h(
          "button",
          {
            type: "button",
            class: "cmd",
            "data-name": c.name,
            onclick: () => {
              this.input.value = `/${c.name} `;
              this.input.focus();
              this.onInput();
            },
          },
          h("strong", null, `/${c.name}`),
          " ",
          h("span", { class: "desc" }, c.description),
          h("span", { class: "app" }, idx.apps.get(c.application_id)?.name ?? ""),
        ),
      ),
    );
    this.picker.hidden = false;
  }

  /// The options of the picked command, and autocomplete choices if any.
  private showHelp(idx: Index, c: Command, rest: string) {
    const opts = flatOptions(c.options ?? [], rest);
    const given = parseArgs(rest);
    const focusedName = lastKey(rest);
    const focused = opts.find((o) => o.name === focusedName);
    const rows: Child[] = opts.map((o) => {
      const file = o.type === ATTACHMENT ? this.files.get(o.name) : undefined;
      return h(
        "div",
        { class: `opt${given.has(o.name) || file ? " given" : ""}${o.required ? " required" : ""}`, "data-opt": o.name },
        h("code", null, o.type === ATTACHMENT ? o.name : `${o.name}:`),
        " ",
        o.description ?? "",
        o.required ? h("span", { class: "req" }, " (required)") : null,
        o.type === ATTACHMENT ? this.filePicker(o.name, file) : null,
      );
    });
    const choices = focused?.choices?.length ? focused.choices : focused?.autocomplete ? this.choices : [];
    clear(
      this.picker,
      h("div", { class: "picker-head" }, `/${c.name}`, " ", h("span", { class: "app" }, idx.apps.get(c.application_id)?.name ?? "")),
      rows,
      choices.length
        ? h(
            "div",
            { class: "choices", role: "listbox", "aria-label": "Choices" },
            choices.map((ch) =>
              h(
                "button",
                { type: "button", class: "choice", onclick: () => this.choose(String(ch.value)) },
                ch.name,
              ),
            ),
          )
        : null,
    );
    this.picker.hidden = false;
    if (focused?.autocomplete) this.autocomplete(c, rest);
  }

  /// An attachment option's file input, and the file chosen.
  private filePicker(name: string, file: File | undefined): Child {
    const input = h("input", { type: "file", class: "opt-file", "aria-label": `File for ${name}` });
    input.addEventListener("change", () => {
      const f = input.files?.[0];
      if (f) this.files.set(name, f);
      else this.files.delete(name);
      this.host.status("", "");
      this.input.focus();
      this.onInput();
    });
    return h(
      "label",
      { class: "opt-file-row" },
      input,
      h("span", { class: "file-button" }, file ? "Change file" : "Choose file"),
      file ? h("span", { class: "file-name" }, file.name) : null,
    );
  }

  private choose(value: string) {
    const text = this.input.value;
    const at = text.lastIndexOf(":");
    this.input.value = text.slice(0, at + 1) + value + " ";
    this.input.focus();
    this.onInput();
  }

  private autocomplete(c: Command, rest: string) {
    if (rest === this.acText) return;
    this.acText = rest;
    clearTimeout(this.acTimer);
    this.acTimer = window.setTimeout(async () => {
      const { guild, channel } = this.host.where();
      if (!guild || !channel) return;
      const options = buildOptions(c.options ?? [], rest, true);
      if (typeof options === "string") return;
      this.acNonce = nonce();
      try {
        await this.host.api.post("/interactions", this.body(4, c, guild, channel, options, this.acNonce));
      } catch {
        // Autocomplete is a hint: a refused one shows nothing.
      }
    }, 250);
  }

  private body(type: number, c: Command, guild: string, channel: string, options: any[], n: string) {
    return {
      type,
      application_id: c.application_id,
      guild_id: guild,
      channel_id: channel,
      session_id: this.host.sessionId(),
      nonce: n,
      data: { id: c.id, name: c.name, type: c.type, version: c.version, options },
    };
  }

  /// The composer's text, if it names a command: "sent" as an interaction,
  /// or "invalid" (why is shown; the draft stays). Otherwise "message".
  async submit(text: string): Promise<"sent" | "invalid" | "message"> {
    const { guild, channel } = this.host.where();
    if (!text.startsWith("/") || !guild || !channel) return "message";
    const idx = await this.load(guild).catch(() => null);
    const space = text.indexOf(" ");
    const name = text.slice(1, space < 0 ? undefined : space);
    const c = idx?.commands.find((x) => x.name === name);
    if (!c || !idx) return "message";
    const files: File[] = [];
    const options = buildOptions(c.options ?? [], space < 0 ? "" : text.slice(space + 1), false, this.files, files);
    if (typeof options === "string") {
      this.host.status(options, "error");
      return "invalid";
    }
    this.hide();
    this.picked = null;
    this.files.clear();
    const app = idx.apps.get(c.application_id)?.name ?? "The application";
    const body = this.body(2, c, guild, channel, options, nonce());
    if (files.length) (body.data as any).attachments = files.map((f, i) => ({ id: String(i), filename: f.name }));
    void this.send(body, app, guild, files);
    return "sent";
  }

  private async send(body: any, app: string, guild: string, files: File[] = []) {
    this.waiting.set(body.nonce, {
      label: app,
      // The server says INTERACTION_FAILURE after its timeout; this is only
      // a backstop for a lost event.
      timer: window.setTimeout(() => this.failed(body.nonce), 15000),
    });
    this.host.status(`Sending command…`, "info");
    try {
      if (files.length) {
        // As Discord's client sends files: payload_json first, then files[n].
        const form = new FormData();
        form.append("payload_json", JSON.stringify(body));
        files.forEach((f, i) => form.append(`files[${i}]`, f, f.name));
        await this.host.api.post("/interactions", form);
      } else {
        await this.host.api.post("/interactions", body);
      }
    } catch (err) {
      this.done(body.nonce);
      if (err instanceof ApiError && err.body?.errors?.data?.version) this.invalidate(guild);
      const msg = err instanceof ApiError ? err.body?.message ?? `Error ${err.status}` : String(err);
      this.host.status(`Command refused: ${msg}`, "error");
    }
  }

  private done(n: string) {
    const w = this.waiting.get(n);
    if (w) clearTimeout(w.timer);
    this.waiting.delete(n);
  }

  private failed(n: string) {
    if (!this.waiting.has(n)) return;
    this.done(n);
    this.host.status("The application did not respond", "error");
  }

  /// Gateway events for this client's interactions; true if handled.
  dispatch(t: string, d: any): boolean {
    switch (t) {
      case "INTERACTION_CREATE": {
        const w = this.waiting.get(d.nonce);
        if (w) this.host.status(`${w.label} is thinking…`, "info");
        return true;
      }
      case "INTERACTION_SUCCESS":
        if (this.waiting.has(d.nonce)) {
          this.done(d.nonce);
          this.host.status("", "");
        }
        return true;
      case "INTERACTION_FAILURE":
        this.failed(d.nonce);
        return true;
      case "APPLICATION_COMMAND_AUTOCOMPLETE_RESPONSE":
        if (d.nonce === this.acNonce) {
          this.choices = d.choices ?? [];
          this.onInputChoices();
        }
        return true;
      case "INTERACTION_MODAL_CREATE":
        this.done(d.nonce);
        this.host.status("", "");
        this.openModal(d);
        return true;
    }
    return false;
  }

  private async onInputChoices() {
    const { guild } = this.host.where();
    if (!guild || !this.picked) return;
    const idx = await this.load(guild);
    const text = this.input.value;
    // Choices that arrive after the command was sent (or the text changed
    // to another command) are not shown.
    if (!this.picked || !text.startsWith(`/${this.picked.name} `)) return;
    this.showHelp(idx, this.picked, text.slice(text.indexOf(" ") + 1));
  }

  /// A modal the bot asked for: its text inputs in a dialog; submitted as
  /// MODAL_SUBMIT in the form it came in (rows of inputs, or labels).
  private openModal(d: any) {
    const form = this.modal.querySelector("form")!;
    const inputs: { id: string; el: HTMLInputElement | HTMLTextAreaElement; labeled: boolean }[] = [];
    const field = (c: any, label: string, labeled: boolean) => {
      const el =
        c.style === 2
          ? h("textarea", { id: `modal-${c.custom_id}`, required: c.required !== false, placeholder: c.placeholder ?? "" })
          : h("input", { id: `modal-${c.custom_id}`, required: c.required !== false, placeholder: c.placeholder ?? "", autocomplete: "off" });
      if (c.value) el.value = String(c.value);
      inputs.push({ id: String(c.custom_id), el, labeled });
      return h("div", { class: "field" }, h("label", { for: `modal-${c.custom_id}` }, label || c.custom_id), el);
    };
    const rows: Child[] = (d.components ?? []).map((row: any) => {
      if (row.type === 10) return h("p", { class: "modal-text" }, String(row.content ?? ""));
      if (row.type === 18 && row.component?.type === 4) return field(row.component, row.label ?? "", true);
      return (row.components ?? []).filter((c: any) => c.type === 4).map((c: any) => field(c, c.label ?? "", false));
    });
    const cancel = h("button", { type: "button", class: "secondary", onclick: () => this.modal.close() }, "Cancel");
    clear(
      form,
      h("h2", null, d.title ?? ""),
      h("p", { class: "from" }, d.application?.name ?? ""),
      rows,
      h("div", { class: "row" }, cancel, h("button", { type: "submit" }, "Submit")),
    );
    form.onsubmit = async (e) => {
      e.preventDefault();
      const { guild, channel } = this.host.where();
      this.modal.close();
      if (!guild || !channel) return;
      const body = {
        type: 5,
        application_id: d.application?.id,
        guild_id: guild,
        channel_id: d.channel_id ?? channel,
        session_id: this.host.sessionId(),
        nonce: nonce(),
        data: {
          custom_id: d.custom_id,
          components: inputs.map((i) =>
            i.labeled
              ? { type: 18, component: { type: 4, custom_id: i.id, value: i.el.value } }
              : { type: 1, components: [{ type: 4, custom_id: i.id, value: i.el.value }] },
          ),
        },
      };
      await this.send(body, d.application?.name ?? "The application", guild);
    };
    this.modal.showModal();
  }

  /// A select of any kind: a string select's own options, or the guild's
  /// users, roles, both, or channels (of its `channel_types`). One value is
  /// sent when chosen; a select taking several has a Send button.
  private select(c: any, use: (data: any) => void): Child {
    let options: Choice[];
    switch (c.type) {
      case USER_SELECT:
        options = this.host.choices("users");
        break;
      case ROLE_SELECT:
        options = this.host.choices("roles");
        break;
      case MENTIONABLE_SELECT:
        options = [...this.host.choices("users"), ...this.host.choices("roles")];
        break;
      case CHANNEL_SELECT:
        options = this.host.choices("channels", c.channel_types);
        break;
      default:
        options = (c.options ?? []).map((o: any) => ({ value: String(o.value), label: String(o.label) }));
    }
    const max = Math.max(1, Math.min(Number(c.max_values ?? 1), options.length || 1));
    const label = c.placeholder ?? "Choose";
    const sel = h(
      "select",
      { "aria-label": label, "data-custom-id": c.custom_id, disabled: !!c.disabled, multiple: max > 1 },
      max > 1 ? null : h("option", { value: "" }, c.placeholder ?? "Choose…"),
      options.map((o) => h("option", { value: o.value }, o.label)),
    );
    const send = () => {
      const values = [...sel.selectedOptions].map((o) => o.value).filter(Boolean);
      if (values.length) use({ custom_id: c.custom_id, component_type: c.type, values });
    };
    if (max === 1) {
      sel.addEventListener("change", send);
      return sel;
    }
    return h("span", { class: "multi-select" }, sel, h("button", { type: "button", class: "secondary", onclick: send, disabled: !!c.disabled }, "Send"));
  }

  /// Buttons and string selects of a message, live: using one sends a component interaction.
  components(m: any): Child {
    const rows: any[] = m.components ?? [];
    if (!rows.length) return null;
    const app = m.application_id ?? m.author?.id;
    const use = async (data: any) => {
      const { guild } = this.host.where();
      if (!guild) return;
      await this.send(
        {
          type: 3,
          application_id: app,
          guild_id: guild,
          channel_id: m.channel_id,
          message_id: m.id,
          // An ephemeral message is the server's to find among the invoker's.
          message_flags: m.flags ?? 0,
          session_id: this.host.sessionId(),
          nonce: nonce(),
          data,
        },
        m.author?.username ?? "The application",
        guild,
      );
    };
    return h(
      "div",
      { class: "components" },
      rows.map((row) =>
        h(
          "div",
          { class: "component-row" },
          (row.components ?? []).map((c: any) => {
            if (c.type === 2) {
              const label = [c.emoji?.name ?? "", c.label ?? ""].filter(Boolean).join(" ");
              if (c.style === 5 && c.url) return h("a", { class: "button link", href: c.url, target: "_blank", rel: "noopener" }, label);
              return h(
                "button",
                {
                  type: "button",
                  class: `button style-${c.style ?? 1}`,
                  disabled: !!c.disabled,
                  "data-custom-id": c.custom_id,
                  onclick: () => use({ custom_id: c.custom_id, component_type: 2 }),
                },
                label,
              );
            }
            if (c.type >= 3 && c.type <= 8) return this.select(c, use);
            return null;
          }),
        ),
      ),
    );
  }
}

/// Select kinds: string (3), user (5), role (6), mentionable (7), channel (8).
const USER_SELECT = 5, ROLE_SELECT = 6, MENTIONABLE_SELECT = 7, CHANNEL_SELECT = 8;
/// "Only you can see this" and "/command used by" lines of a message.
export function interactionNotes(m: any, dismiss: () => void): { before: Child; after: Child; loading: boolean } {
  const meta = m.interaction_metadata;
  const before = meta?.name
    ? h("div", { class: "used" }, h("span", { class: "who" }, meta.user?.global_name || meta.user?.username || ""), " used ", h("code", null, meta.command_type && meta.command_type !== 1 ? String(meta.name) : `/${meta.name}`))
    : null;
  const eph = (m.flags ?? 0) & EPHEMERAL;
  const after = eph
    ? h(
        "div",
        { class: "ephemeral" },
        "Only you can see this · ",
        h("button", { type: "button", class: "link", onclick: dismiss }, "Dismiss message"),
      )
    : null;
  return { before, after, loading: ((m.flags ?? 0) & LOADING) !== 0 };
}

function nonce(): string {
  return String(Date.now()) + String(Math.floor(Math.random() * 1000)).padStart(3, "0");
}

/// The value options of a command (subcommands: those of the one named first in `rest`).
function flatOptions(opts: Option[], rest: string): Option[] {
  const sub = opts.find((o) => (o.type === SUB_COMMAND || o.type === SUB_COMMAND_GROUP) && rest.split(" ")[0] === o.name);
  if (sub) return flatOptions(sub.options ?? [], rest.slice(sub.name.length + 1));
  return opts.filter((o) => o.type !== SUB_COMMAND && o.type !== SUB_COMMAND_GROUP);
}

/// `a:1 b:two words c:x` → {a: "1", b: "two words", c: "x"}.
function parseArgs(rest: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /(?:^|\s)([\w-]+):/g;
  const marks: { name: string; start: number; end: number }[] = [];
  for (let m; (m = re.exec(rest)); ) marks.push({ name: m[1], start: m.index, end: re.lastIndex });
  marks.forEach((mk, i) => out.set(mk.name, rest.slice(mk.end, i + 1 < marks.length ? marks[i + 1].start : undefined).trim()));
  return out;
}

function lastKey(rest: string): string | null {
  const keys = [...parseArgs(rest).keys()];
  return keys.length ? keys[keys.length - 1] : null;
}

/// The interaction's `options` from the typed text, or why they are wrong.
/// Attachment options take the files chosen for them (`chosen`, by option
/// name): the option's value is the file's index in `files`, the request's
/// `files[n]`.
function buildOptions(
  opts: Option[],
  rest: string,
  autocomplete: boolean,
  chosen: Map<string, File> = new Map(),
  files: File[] = [],
): any[] | string {
  const sub = opts.find((o) => (o.type === SUB_COMMAND || o.type === SUB_COMMAND_GROUP) && rest.split(" ")[0] === o.name);
  if (sub) {
    const inner = buildOptions(sub.options ?? [], rest.slice(sub.name.length + 1), autocomplete, chosen, files);
    return typeof inner === "string" ? inner : [{ name: sub.name, type: sub.type, options: inner }];
  }
  if (opts.some((o) => o.type === SUB_COMMAND || o.type === SUB_COMMAND_GROUP)) return "Choose a subcommand";
  const args = parseArgs(rest);
  const focused = autocomplete ? lastKey(rest) : null;
  const out: any[] = [];
  for (const o of opts) {
    if (o.type === ATTACHMENT) {
      const f = chosen.get(o.name);
      if (f && !autocomplete) {
        out.push({ name: o.name, type: o.type, value: String(files.length) });
        files.push(f);
      } else if (o.required && !autocomplete) {
        return `Missing required file "${o.name}"`;
      }
      continue;
    }
    const raw = args.get(o.name);
    if (raw === undefined || raw === "") {
      if (o.required && !autocomplete) return `Missing required option "${o.name}"`;
      if (o.name !== focused) continue;
    }
    if (o.name === focused) {
      out.push({ name: o.name, type: o.type, value: raw ?? "", focused: true });
      continue;
    }
    const v = convert(o, raw!);
    if (v === undefined) return `"${o.name}" is not a valid value`;
    out.push({ name: o.name, type: o.type, value: v });
  }
  for (const k of args.keys()) if (!opts.some((o) => o.name === k)) return `Unknown option "${k}"`;
  return out;
}

function convert(o: Option, raw: string): string | number | boolean | undefined {
  const choice = o.choices?.find((c) => c.name === raw || String(c.value) === raw);
  if (choice) return choice.value;
  switch (o.type) {
    case STRING:
      return raw;
    case INTEGER:
      return /^-?\d+$/.test(raw) ? Number(raw) : undefined;
    case NUMBER:
      return Number.isFinite(Number(raw)) ? Number(raw) : undefined;
    case BOOLEAN:
      return raw === "true" ? true : raw === "false" ? false : undefined;
    case USER:
    case CHANNEL:
    case ROLE:
    case MENTIONABLE: {
      const id = raw.match(/^<[@#]&?!?(\d+)>$/)?.[1] ?? raw.match(/^\d+$/)?.[0];
      return id ?? undefined;
    }
  }
  return undefined;
}
