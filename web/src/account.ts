// The user's own settings: display name, picture, password, and the
// account's logged-in sessions ("log out everywhere else"), over
// `PATCH /users/@me` and `/auth/sessions`.

import { Api } from "./api";
import { clear, h } from "./dom";
import { StatusLine } from "./status";

export interface AccountHost {
  api: Api;
  me(): any;
  /** The server answered with the account as it is now. */
  updated(user: any): void;
}

/** Largest picture the page sends (the server has its own limit too). */
const AVATAR_MAX = 8 << 20;

export class AccountPanel {
  private el: HTMLElement | null = null;
  private status = new StatusLine();

  constructor(private host: AccountHost) {}

  close() {
    this.el?.remove();
    this.el = null;
  }

  private say(text: string, error = false) {
    this.status.say(text, error);
  }

  private act(what: () => Promise<any>, done: string): Promise<any> {
    return this.status.act(what, done);
  }

  open() {
    this.close();
    const api = this.host.api;
    const me = this.host.me();
    this.status = new StatusLine();
    const display = h("input", { id: "acct-display", value: me?.global_name ?? "", placeholder: me?.username ?? "", autocomplete: "nickname" });
    const picture = h("input", { id: "acct-avatar", type: "file" });
    (picture as HTMLInputElement).accept = "image/png,image/jpeg,image/gif,image/webp";
    const current = h("input", { id: "acct-current", type: "password", autocomplete: "current-password" });
    const next = h("input", { id: "acct-new", type: "password", autocomplete: "new-password" });
    const sessions = h("ul", { class: "member-admin", "aria-label": "Sessions" });
    const saveProfile = async (body: any, done: string) => {
      const user = await this.act(() => api.patch("/users/@me", body), done);
      if (user && user !== true) this.host.updated(user);
    };
    picture.addEventListener("change", () => {
      const f = (picture as HTMLInputElement).files?.[0];
      if (!f) return;
      if (f.size > AVATAR_MAX) return this.say(`${f.name} is too large for a picture.`, true);
      const r = new FileReader();
      r.onload = () => saveProfile({ avatar: String(r.result) }, "Picture saved.");
      r.readAsDataURL(f);
    });
    const loadSessions = async () => {
      try {
        const r = await api.get("/auth/sessions");
        const list: any[] = r?.user_sessions ?? [];
        clear(
          sessions,
          list.map((s) =>
            h(
              "li",
              { class: "member-row" },
              h("span", null, s.current ? "This browser" : `Another session, since ${new Date(s.created_at).toLocaleString()}`),
            ),
          ),
        );
        return list;
      } catch (e) {
        this.say(e instanceof Error ? e.message : String(e), true);
        return [];
      }
    };
    this.el = h(
      "div",
      { class: "settings", role: "dialog", "aria-modal": "true", "aria-label": "Your account" },
      h(
        "div",
        { class: "settings-card" },
        h("header", { class: "settings-top" }, h("h2", null, "Your account"), h("button", { type: "button", class: "icon", "aria-label": "Close account settings", onclick: () => this.close() }, "×")),
        this.status.el,
        h(
          "div",
          { class: "settings-body" },
          h("label", { for: "acct-display" }, `Display name (others see it instead of @${me?.username ?? ""})`),
          h(
            "div",
            { class: "row" },
            display,
            h("button", { type: "button", onclick: () => saveProfile({ global_name: (display as HTMLInputElement).value.trim() || null }, "Display name saved.") }, "Save name"),
          ),
          h("label", { for: "acct-avatar" }, "Picture (PNG, JPEG, GIF or WebP)"),
          h("div", { class: "row" }, picture, h("button", { type: "button", class: "secondary", onclick: () => saveProfile({ avatar: null }, "Picture removed.") }, "Remove picture")),
          h("h3", null, "Password"),
          h("label", { for: "acct-current" }, "Current password"),
          current,
          h("label", { for: "acct-new" }, "New password (8 characters or more; other sessions are logged out)"),
          next,
          h(
            "div",
            { class: "row" },
            h(
              "button",
              {
                type: "button",
                onclick: async () => {
                  await saveProfile({ password: (current as HTMLInputElement).value, new_password: (next as HTMLInputElement).value }, "Password changed; other sessions are logged out.");
                  (current as HTMLInputElement).value = (next as HTMLInputElement).value = "";
                  loadSessions();
                },
              },
              "Change password",
            ),
          ),
          h("h3", null, "Sessions"),
          sessions,
          h(
            "div",
            { class: "row" },
            h(
              "button",
              {
                type: "button",
                class: "danger",
                onclick: async () => {
                  const list = await loadSessions();
                  const others = list.filter((s) => !s.current).map((s) => s.id_hash);
                  if (!others.length) return this.say("No other session is logged in.");
                  await this.act(() => api.post("/auth/sessions/logout", { session_id_hashes: others }), `Logged out ${others.length} other session${others.length === 1 ? "" : "s"}.`);
                  loadSessions();
                },
              },
              "Log out everywhere else",
            ),
          ),
        ),
      ),
    );
    document.body.appendChild(this.el);
    loadSessions();
  }
}
