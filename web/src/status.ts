// The status line of a panel (server settings, account): what the last
// action did, or the server's error, in a polite live region.

import { ApiError } from "./api";
import { h } from "./dom";

export class StatusLine {
  readonly el = h("p", { class: "settings-status", role: "status", "aria-live": "polite" });

  say(text: string, error = false) {
    this.el.textContent = text;
    this.el.classList.toggle("error", error);
  }

  /** Runs `what`; says `done`, or the error. Its result (true if none),
   *  or null when it failed. */
  async act(what: () => Promise<any>, done: string): Promise<any> {
    try {
      const r = await what();
      this.say(done);
      return r ?? true;
    } catch (e) {
      this.say(e instanceof ApiError || e instanceof Error ? e.message : String(e), true);
      return null;
    }
  }
}
