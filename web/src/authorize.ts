// The "add a bot" page: the link a bot's author shares,
// /oauth2/authorize?client_id=APP&scope=bot+applications.commands&permissions=N,
// as Discord's client has it. The server answers that path with this
// client; seeing it, the client shows this consent page instead of the
// chat. It reads what the link asks for from GET /oauth2/authorize (the
// application, its bot, the servers the caller may add it to), says it in
// words, and on "Authorize" POSTs the choice. The server decides: it adds
// the bot only to a server where the caller has MANAGE_GUILD, with a
// managed role carrying the requested permissions. Everything that comes
// from the server or the link is shown as text.

import { Api } from "./api";
import { clear, h } from "./dom";
import { decodePermissions } from "./permissions";

export const AUTHORIZE_PATH = "/oauth2/authorize";

type Guild = { id: string; name: string };
type Info = {
  application: { id: string; name: string; description?: string | null };
  bot?: { id: string; username: string; global_name?: string | null; avatar?: string | null } | null;
  guilds: Guild[];
};

export function isAuthorizePage(): boolean {
  return location.pathname === AUTHORIZE_PATH;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function initials(name: string): string {
  return name.split(/\s+/).map((w) => w[0] ?? "").join("").slice(0, 2).toUpperCase() || "?";
}

/// The bot's avatar from this server (`/avatars/{id}/{hash}.png`), or its
/// initials; an id or hash of another shape is not put into a path.
function avatar(bot: Info["bot"], name: string) {
  if (bot?.avatar && /^\d{1,20}$/.test(bot.id) && /^(a_)?[0-9a-f]{32}$/.test(bot.avatar)) {
    return h("img", { class: "avatar", id: "consent-avatar", src: `/avatars/${bot.id}/${bot.avatar}.png`, alt: "" });
  }
  return h("div", { class: "avatar", "aria-hidden": "true" }, initials(name));
}

/// Fills `card` with the consent page for the link the page was opened
/// with, as `me`. `logout` is offered to someone signed in as another user.
export async function showAuthorize(api: Api, card: HTMLElement, me: any, logout: () => void) {
  const q = new URLSearchParams(location.search);
  const clientId = q.get("client_id") ?? "";
  const scope = q.get("scope") ?? "";
  const requested = q.get("permissions") ?? "0";
  const title = h("h1", { id: "consent-title" }, "Add a bot");
  const fail = (text: string) =>
    clear(card, title, h("p", { id: "consent-error", class: "error", role: "alert" }, text), h("div", { class: "row" }, h("a", { class: "button secondary", href: "/" }, "Back to throng")));
  clear(card, title, h("p", { class: "muted" }, "Loading…"));

  const perms = decodePermissions(requested);
  if (!clientId || !perms) return fail("This link is not a valid invitation for a bot: it needs a client_id and a numeric permissions value.");
  // Only adding a bot: a sign-in for another application (the code grant,
  // which sends the browser on to that application) is not done here.
  const scopes = scope.split(/[\s+]+/).filter(Boolean);
  if (!scopes.includes("bot") || q.has("response_type") || q.has("redirect_uri")) {
    return fail("This page only adds bots to servers (scope bot, without a redirect); this link asks for something else.");
  }
  const query = new URLSearchParams({ client_id: clientId, scope });
  let info: Info;
  try {
    info = await api.get<Info>(`/oauth2/authorize?${query}&${new URLSearchParams({ permissions: requested })}`);
  } catch (err) {
    return fail(message(err));
  }

  const app = info.application;
  const botName = info.bot ? info.bot.global_name || info.bot.username : app.name;
  title.textContent = `Add ${botName} to a server`;
  const meName = me.global_name || me.username;
  const guilds = info.guilds ?? [];
  const preselect = q.get("guild_id");
  const picker = h(
    "select",
    { id: "consent-guild", name: "guild" },
    h("option", { value: "", disabled: true, selected: !guilds.some((g) => g.id === preselect) }, "Select a server"),
    ...guilds.map((g) => h("option", { value: g.id, selected: g.id === preselect }, g.name)),
  );
  const error = h("p", { id: "consent-error", class: "error", role: "alert" });
  const authorize = h("button", { id: "consent-authorize", type: "submit", disabled: !guilds.length }, "Authorize");
  const cancel = h("button", { id: "consent-cancel", type: "button", class: "secondary" }, "Cancel");

  const form = h(
    "form",
    { id: "consent-form", "aria-labelledby": "consent-title" },
    h(
      "header",
      { class: "consent-head" },
      avatar(info.bot, botName),
      h("div", null, title, h("p", { class: "muted" }, "From the application ", h("strong", { id: "consent-app" }, app.name), scopes.length ? ` (scopes: ${scopes.join(", ")})` : "")),
    ),
    app.description ? h("p", { id: "consent-description" }, app.description) : null,
    h("p", { class: "muted" }, "Signed in as ", h("strong", { id: "consent-me" }, meName), ". ", h("button", { id: "consent-logout", type: "button", class: "link", onclick: logout }, "Not you?")),
    guilds.length
      ? [h("label", { for: "consent-guild" }, "Add to server"), picker]
      : h("p", { id: "consent-no-guild", class: "error" }, "You have no server to add it to: that takes the Manage Server permission in the server."),
    h("h2", null, "It will be allowed to"),
    h(
      "ul",
      { id: "consent-perms", class: "perms" },
      ...(perms.length
        ? perms.map((p) => h("li", { "data-flag": p.name, class: p.name === "ADMINISTRATOR" ? "danger" : null }, p.label, " ", h("code", null, p.name)))
        : [h("li", null, "Nothing beyond what everyone in the server may do")]),
    ),
    error,
    h("div", { class: "row" }, cancel, authorize),
  );
  clear(card, form);

  const done = (headline: string, detail: string) =>
    clear(card, h("h1", { id: "consent-title" }, headline), h("p", { id: "consent-result", role: "status" }, detail), h("div", { class: "row" }, h("a", { class: "button", href: "/" }, "Open throng")));

  cancel.addEventListener("click", () => done("Cancelled", `${botName} was not added to any server.`));
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const guild = guilds.find((g) => g.id === picker.value);
    if (!guild) {
      error.textContent = "Pick a server first.";
      return;
    }
    error.textContent = "";
    authorize.disabled = true;
    try {
      await api.post(`/oauth2/authorize?${query}`, { guild_id: guild.id, permissions: requested, authorize: true });
      // The answer's `location` is not followed: the page never sends
      // anyone to an address a link or a server chose.
      done(`${botName} was added`, `${botName} is now a member of ${guild.name}.`);
    } catch (err) {
      error.textContent = message(err);
      authorize.disabled = false;
    }
  });
}
