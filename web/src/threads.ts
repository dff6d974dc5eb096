// Threads: the side panel (in the member list's place) with a channel's
// threads, active and archived, and an open thread's messages with its own
// composer. Threads come from GUILD_CREATE and THREAD_* events; a thread's
// messages from `GET /channels/{thread}/messages` and MESSAGE_CREATE; a
// message goes with `POST /channels/{thread}/messages` (a nonce, so a
// repeat is never stored twice).

import { Api } from "./api";
import { clear, h } from "./dom";

export type Thread = {
  id: string;
  guild_id: string;
  parent_id: string;
  name: string;
  message_count: number;
  archived: boolean;
  locked: boolean;
  last_message_id: string | null;
};

export interface ThreadHost {
  api: Api;
  /** A message as the conversation draws it (`prev` for grouping). */
  messageEl(m: any, prev: any | undefined): HTMLElement;
  /** Shows or hides the panel (it takes the member list's place). */
  show(open: boolean): void;
  /** The channel's name, for the list's heading. */
  channelName(id: string): string;
  /** May the person write in threads of this channel. */
  maySend(parent: string): boolean;
}

export function threadOf(d: any): Thread {
  return {
    id: d.id,
    guild_id: d.guild_id,
    parent_id: d.parent_id,
    name: d.name ?? "thread",
    message_count: d.message_count ?? 0,
    archived: !!d.thread_metadata?.archived,
    locked: !!d.thread_metadata?.locked,
    last_message_id: d.last_message_id ?? null,
  };
}

export class ThreadPanel {
  readonly el: HTMLElement;
  /** The open thread's id, or null (the list, or closed). */
  openId: string | null = null;
  /** The channel whose threads the list shows. */
  listOf: string | null = null;
  private messages: any[] = [];
  private body: HTMLElement;
  private title: HTMLElement;

  constructor(private host: ThreadHost) {
    this.title = h("h2", { id: "thread-title" }, "Threads");
    this.body = h("div", { class: "thread-body" });
    this.el = h(
      "aside",
      { class: "thread-panel", "aria-labelledby": "thread-title" },
      h("div", { class: "search-top" }, this.title, h("button", { type: "button", class: "icon", "aria-label": "Close threads", onclick: () => this.close() }, "×")),
      this.body,
    );
  }

  get isOpen() {
    return this.listOf !== null || this.openId !== null;
  }

  close() {
    this.openId = this.listOf = null;
    this.messages = [];
    clear(this.body);
    this.host.show(false);
  }

  /** The channel's threads: the active ones known here, then the archived
   *  ones the server lists. */
  async showList(channel: string, active: Thread[]) {
    this.openId = null;
    this.listOf = channel;
    this.title.textContent = `Threads in #${this.host.channelName(channel)}`;
    this.host.show(true);
    const row = (t: Thread) =>
      h(
        "li",
        { class: "search-result thread-row", "data-thread-id": t.id },
        h("span", null, h("strong", null, t.name), h("span", { class: "muted" }, ` · ${t.message_count} ${t.message_count === 1 ? "message" : "messages"}${t.archived ? " · archived" : ""}`)),
        h("button", { type: "button", class: "jump", "aria-label": `Open thread ${t.name}`, onclick: () => this.open(t) }, "Open"),
      );
    const live = active.filter((t) => t.parent_id === channel && !t.archived);
    const archived = h("div", null, h("p", { class: "muted" }, "Looking for archived threads…"));
    clear(
      this.body,
      h("h3", { class: "search-head" }, `Active — ${live.length}`),
      live.length ? h("ul", { class: "search-results", "aria-label": "Active threads" }, live.map(row)) : h("p", { class: "muted" }, "No active threads. Start one from a message with “Thread”."),
      archived,
    );
    try {
      const r = await this.host.api.get(`/channels/${channel}/threads/archived/public?limit=25`);
      if (this.listOf !== channel || this.openId) return;
      const old: Thread[] = (r.threads ?? []).map(threadOf);
      clear(
        archived,
        h("h3", { class: "search-head" }, `Archived — ${old.length}`),
        old.length ? h("ul", { class: "search-results", "aria-label": "Archived threads" }, old.map(row)) : h("p", { class: "muted" }, "None archived."),
      );
    } catch {
      clear(archived);
    }
  }

  /** Opens a thread: its messages, oldest first, and a composer. */
  async open(t: Thread) {
    this.openId = t.id;
    this.listOf = null;
    this.messages = [];
    this.title.textContent = `🧵 ${t.name}`;
    this.host.show(true);
    const ol = h("ol", { class: "messages thread-messages", "aria-label": `Messages in ${t.name}`, "aria-live": "polite", "aria-relevant": "additions", tabindex: "0" });
    const input = h("textarea", { id: "thread-input", rows: 1, placeholder: `Message ${t.name}` }) as HTMLTextAreaElement;
    const note = h("p", { class: "error", role: "alert" });
    const send = async (e: Event) => {
      e.preventDefault();
      const content = input.value.trim();
      if (!content) return;
      input.value = "";
      const nonce = String(Date.now()) + String(Math.floor(Math.random() * 1e6));
      try {
        const m = await this.host.api.post(`/channels/${t.id}/messages`, { content, nonce, enforce_nonce: true });
        this.add(m);
        note.textContent = "";
      } catch (err) {
        if (!input.value) input.value = content;
        note.textContent = err instanceof Error ? err.message : String(err);
      }
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) send(e);
    });
    const composer = this.host.maySend(t.parent_id) && !t.locked
      ? h("form", { class: "composer thread-composer", onsubmit: send }, h("label", { for: "thread-input", class: "sr-only" }, `Message in thread ${t.name}`), input, h("button", { type: "submit" }, "Send"))
      : h("p", { class: "no-send" }, "You cannot send messages in this thread.");
    clear(
      this.body,
      h("button", { type: "button", class: "secondary back", onclick: () => this.showList(t.parent_id, []) }, "← All threads"),
      ol,
      note,
      composer,
    );
    try {
      const page: any[] = await this.host.api.get(`/channels/${t.id}/messages?limit=50`);
      if (this.openId !== t.id) return;
      for (const m of page.reverse()) this.add(m);
    } catch (err) {
      note.textContent = err instanceof Error ? err.message : String(err);
    }
    if (composer instanceof HTMLFormElement) input.focus();
  }

  /** A message of the open thread (MESSAGE_CREATE, or this panel's send). */
  add(m: any) {
    if (m.channel_id !== this.openId || this.messages.some((x) => x.id === m.id)) return;
    const ol = this.body.querySelector<HTMLElement>(".thread-messages");
    if (!ol) return;
    // In order by id: a live event can overtake the page being read.
    const i = this.messages.findIndex((x) => BigInt(x.id) > BigInt(m.id));
    const at = i < 0 ? this.messages.length : i;
    this.messages.splice(at, 0, m);
    const el = this.host.messageEl(m, this.messages[at - 1]);
    const next = this.messages[at + 1];
    const nextEl = next ? ol.querySelector(`[data-id="${next.id}"]`) : null;
    ol.insertBefore(el, nextEl);
    ol.scrollTop = ol.scrollHeight;
  }

  /** A message of the open thread deleted. */
  remove(id: string) {
    this.messages = this.messages.filter((x) => x.id !== id);
    this.body.querySelector(`.thread-messages [data-id="${id}"]`)?.remove();
  }
}
