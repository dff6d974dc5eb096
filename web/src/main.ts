// throng's browser client: accounts, guilds, channels, chat, and the lazy
// member list, over the public REST API and Gateway v10.

import { AccountPanel } from "./account";
import { Api, ApiError } from "./api";
import { isAuthorizePage, showAuthorize } from "./authorize";
import { Commands, interactionNotes } from "./commands";
import { Child, clear, h } from "./dom";
import { Gateway, LinkState } from "./gateway";
import { MemberList, displayName } from "./memberlist";
import { markdown, Names } from "./markdown";
import { MentionPicker } from "./mentions";
import { SearchPanel } from "./search";
import { RoleInfo, SettingsPanel } from "./settings";
import { channelOrder } from "./settings-channels";
import { Chunks } from "./chunks";
import { CustomEmoji, emojiText, openEmojiPicker } from "./emoji";
import { embedsEl, shownInEmbeds } from "./embeds";
import { Thread, threadOf, ThreadPanel } from "./threads";
import { attachmentsEl, loadLimits, postWithFiles, Tray } from "./uploads";

type Channel = {
  id: string;
  guild_id: string;
  name: string;
  topic: string | null;
  type: number;
  position: number;
  last_message_id: string | null;
  overwrites?: { id: string; type: number; allow: string; deny: string }[];
  parent_id?: string | null;
  rate_limit_per_user?: number;
};
type Guild = { id: string; name: string; owner_id: string; icon: string | null; roles: Map<string, string>; perms: Map<string, RoleInfo>; channels: string[]; emojis: CustomEmoji[] };
type Message = {
  id: string;
  channel_id: string;
  embeds?: any[];
  author: any;
  content: string;
  timestamp: string;
  edited_timestamp: string | null;
  flags?: number;
  components?: any[];
  interaction_metadata?: any;
  application_id?: string;
  mentions?: any[];
  reactions?: Reaction[];
  attachments?: any[];
  mention_everyone?: boolean;
  type?: number;
  pinned?: boolean;
  message_reference?: { message_id?: string; channel_id?: string };
  referenced_message?: Message | null;
  mention_roles?: string[];
  guild_id?: string;
};
type Reaction = { emoji: { id: string | null; name: string | null; animated?: boolean }; count: number; me: boolean };
type History = { items: Message[]; hasMore: boolean; loaded: boolean; loading: boolean };

const PAGE = 50;
const KEEP = 300; // messages kept per channel while reading the newest ones
const TOKEN_KEY = "throng.token";

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

export function cmpId(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

const api = new Api();
/** The open channel's drawn messages (web/src/chunks.ts). */
const list = new Chunks($("messages"));
let gw: Gateway | null = null;
let me: any = null;
const guilds = new Map<string, Guild>();
const channels = new Map<string, Channel>();
const histories = new Map<string, History>();
const presence = new Map<string, string>();
const names = new Map<string, string>();
const typing = new Map<string, Map<string, number>>(); // channel -> user -> expiry
/** Each channel's read mark: the newest message this user has read
 *  (READY's `read_state`, then MESSAGE_ACK and this client's own acks). */
let read: Record<string, string> = {};
/** Where the "New messages" line goes in each channel: the read mark
 *  when the channel was opened unread, until another channel is opened. */
const newSince = new Map<string, string>();
/** Acks waiting to go, per channel (sent at most every ACK_EVERY ms). */
const ackWanted = new Map<string, string>();
let ackTimer = 0;
const ACK_EVERY = 1000;
let guildId: string | null = null;
let channelId: string | null = null;
let pendingGuild: string | null = null;
/** The server and channel the address names (`#/channels/<guild>/<channel>`),
 *  opened when that server arrives instead of whichever arrives first. */
let wanted: { guild: string; channel: string | null; message: string | null } | null = null;
/** The "server" of direct messages in `guildId`, routes and `Channel.guild_id`. */
const HOME = "@me";
/** DM channel ids (their `Channel`s are in `channels`, `guild_id` HOME). */
const dms: string[] = [];
/** Messages arrived in each DM since it was last read (the badges). */
const dmCounts = new Map<string, number>();
/** Messages mentioning this user since each channel was last read. */
const mentionCounts = new Map<string, number>();
/** This user's roles in each server (for role mentions). */
const myRoles = new Map<string, Set<string>>();
/** Members' roles as last seen (`guild:user`): from messages, the member
 *  list, GUILD_CREATE and GUILD_MEMBER_UPDATE; for the colour of names. */
const memberRoles = new Map<string, string[]>();

/** The colour of a member's name: their highest role with a colour, 0 for none. */
function roleColor(guild: string, roles: string[]): number {
  const g = guilds.get(guild);
  let best: RoleInfo | null = null;
  for (const id of roles) {
    const r = g?.perms.get(id);
    if (r && r.color && (!best || r.position > best.position)) best = r;
  }
  return best?.color ?? 0;
}

/** The colour of `user`'s name in channel `cid`'s server, as CSS, or null. */
function nameColor(cid: string, user: string, member?: any): string | null {
  const g = channels.get(cid)?.guild_id;
  if (!g || g === HOME) return null;
  if (member?.roles) memberRoles.set(`${g}:${user}`, member.roles);
  const roles = memberRoles.get(`${g}:${user}`);
  const c = roles ? roleColor(g, roles) : 0;
  return c ? `#${c.toString(16).padStart(6, "0")}` : null;
}
let mentionPicker: MentionPicker | null = null;
/** The message the next send answers (the reply bar), if any. */
let replyTo: Message | null = null;
/** Muted channels and servers, kept per user in localStorage. */
let muted = new Set<string>();
let lastTypingSent = 0;
let readyCount = 0;
let interactiveMarked = false;
let commands: Commands | null = null;

const members = new MemberList(
  {
    subscribe(g, c, ranges) {
      gw?.send(14, { guild_id: g, typing: true, activities: true, threads: false, channels: { [c]: ranges } });
    },
    roleName(g, r) {
      return guilds.get(g)?.roles.get(r);
    },
    roleColor,
    seen(g, m) {
      if (!m.user?.id) return;
      const key = `${g}:${m.user.id}`;
      const roles: string[] = m.roles ?? [];
      const before = memberRoles.get(key);
      if (before && before.length === roles.length && before.every((r, i) => r === roles[i])) return;
      memberRoles.set(key, roles);
      // Names already drawn in this server take the colour now known.
      if (g !== guildId) return;
      const c = roleColor(g, roles);
      for (const el of document.querySelectorAll<HTMLElement>(`#messages .author[data-uid="${CSS.escape(m.user.id)}"]`))
        el.style.color = c ? `#${c.toString(16).padStart(6, "0")}` : "";
    },
    onActivate(uid) {
      const row = document.querySelector(`.mrow.member[data-user-id="${CSS.escape(uid)}"]`);
      const r = row?.getBoundingClientRect();
      openProfile(uid, { x: r ? r.left : 100, y: r ? r.top : 100 });
    },
  },
  $("members-head"),
);
$("members").appendChild(members.el);
const settings = new SettingsPanel({
  api,
  guild: (id) => {
    const g = guilds.get(id);
    return g ? { id: g.id, name: g.name, owner_id: g.owner_id, icon: g.icon, roles: [...g.perms.values()] } : null;
  },
  channels: (id) =>
    (guilds.get(id)?.channels ?? []).map((cid) => {
      const c = channels.get(cid)!;
      return { id: c.id, name: c.name, type: c.type, position: c.position, parent_id: c.parent_id ?? null, topic: c.topic, rate_limit_per_user: c.rate_limit_per_user ?? 0, overwrites: c.overwrites ?? [] };
    }),
  name: (u) => names.get(u) ?? u,
  me: () => me?.id,
});
const account = new AccountPanel({ api, me: () => me, updated: (u) => userUpdated(u) });

/** The account changed (its own PATCH, or USER_UPDATE from another tab). */
function userUpdated(u: any) {
  if (!me || u?.id !== me.id) return;
  me = { ...me, ...u };
  names.set(me.id, me.global_name || me.username);
  $("me-name").textContent = me.global_name || me.username;
}

const search = new SearchPanel({
  api,
  channels: guildTextChannels,
  names: {
    user: (id) => names.get(id) ?? null,
    channel: (id) => channels.get(id)?.name ?? null,
    role: () => null,
  },
  me: () => me?.id,
  jump: (c, m) => {
    // At phone width the panel covers the conversation.
    if (window.matchMedia("(max-width: 800px)").matches) search.close();
    jumpTo(c, m);
  },
  show: (open) => {
    if (open && threadPanel.isOpen) threadPanel.close();
    document.body.classList.toggle("searching", open);
  },
});
$("app").appendChild(search.el);
/** Threads of every server this client is in, by id (the id of the
 *  message a thread was started from, when it was). */
const threads = new Map<string, Thread>();
const CREATE_PUBLIC_THREADS = 1n << 35n;
const SEND_MESSAGES_IN_THREADS = 1n << 38n;
const threadPanel = new ThreadPanel({
  api,
  messageEl: (m, prev) => messageEl(m, prev),
  show: (open) => {
    if (open && document.body.classList.contains("searching")) search.close();
    document.body.classList.toggle("threading", open);
  },
  channelName: (id) => channels.get(id)?.name ?? "",
  maySend: (parent) => {
    const c = channels.get(parent);
    return !!c && (permissionsIn(c) & SEND_MESSAGES_IN_THREADS) !== 0n;
  },
});
$("app").appendChild(threadPanel.el);
const tray = new Tray($("uploads"));

// ---------- accounts ----------

function showAuth() {
  $("app").hidden = true;
  $("consent").hidden = true;
  $("auth").hidden = false;
  $("auth-user").focus();
  mark();
}

async function authSubmit(e: SubmitEvent) {
  e.preventDefault();
  const mode = (e.submitter as HTMLButtonElement | null)?.value ?? "login";
  const username = $<HTMLInputElement>("auth-user").value.trim();
  const password = $<HTMLInputElement>("auth-pass").value;
  $("auth-error").textContent = "";
  try {
    const r = await api.post(mode === "register" ? "/auth/register" : "/auth/login", mode === "register" ? { username, password } : { login: username, password });
    localStorage.setItem(TOKEN_KEY, r.token);
    await start(r.token);
  } catch (err) {
    $("auth-error").textContent = err instanceof Error ? err.message : String(err);
  }
}

let loggingOut = false;

/// Logs out for real: the server revokes the token first (so a copy of it,
/// wherever it went, stops working), then the client forgets it. A 401
/// means it was revoked already; any other failure still logs out here,
/// but says so.
async function logout() {
  if (loggingOut) return;
  loggingOut = true;
  gw?.stop();
  gw = null;
  let note = "";
  if (api.token) {
    try {
      await api.post("/auth/logout");
    } catch (err) {
      if (!(err instanceof ApiError && err.status === 401)) note = `The server did not confirm the log-out (${err instanceof Error ? err.message : String(err)}).`;
    }
  }
  loggingOut = false;
  localStorage.removeItem(TOKEN_KEY);
  api.token = null;
  me = null;
  guilds.clear();
  channels.clear();
  histories.clear();
  presence.clear();
  names.clear();
  typing.clear();
  pending = [];
  read = {};
  newSince.clear();
  ackWanted.clear();
  clearTimeout(ackTimer);
  readyCount = 0;
  guildId = channelId = null;
  wanted = null;
  // What the next person to log in on this page must not inherit.
  dms.length = 0;
  dmCounts.clear();
  mentionCounts.clear();
  myRoles.clear();
  muted = new Set();
  replyTo = null;
  renderReplyBar();
  tray.take();
  search.close();
  threads.clear();
  threadPanel.close();
  settings.close();
  account.close();
  closeProfile();
  clear($("home"));
  document.body.classList.remove("in-dm");
  document.title = "throng";
  members.close();
  clear($("guild-list"));
  clear($("channel-list"));
  list.reset();
  $<HTMLInputElement>("auth-pass").value = "";
  showAuth();
  $("auth-error").textContent = note;
}

async function start(token: string) {
  api.token = token;
  try {
    me = await api.get("/users/@me");
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) {
      localStorage.removeItem(TOKEN_KEY);
      showAuth();
      return;
    }
    throw err;
  }
  if (isAuthorizePage()) {
    // The add-a-bot page instead of the chat: no gateway session needed.
    $("auth").hidden = true;
    $("app").hidden = true;
    $("consent").hidden = false;
    await showAuthorize(api, $("consent-card"), me, logout);
    return;
  }
  read = {};
  muted = new Set(JSON.parse(localStorage.getItem(`throng.muted.${me.id}`) || "[]"));
  renderNotify();
  wanted = routeOf(location.hash);
  names.set(me.id, me.global_name || me.username);
  $("me-name").textContent = me.global_name || me.username;
  $("auth").hidden = true;
  $("app").hidden = false;
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  gw = new Gateway(`${proto}//${location.host}/?v=10&encoding=json`, token);
  gw.onDispatch = dispatch;
  gw.onState = linkState;
  gw.onFatal = () => logout();
  gw.start();
  document.dispatchEvent(new Event("throng-started"));
}

function linkState(s: LinkState) {
  const el = $("link-state");
  el.textContent = s === "reconnecting" ? "Reconnecting…" : s === "connecting" ? "Connecting…" : "";
  el.dataset.state = s;
  document.body.dataset.link = s;
}

// ---------- gateway events ----------

/** Dispatches received, by name (for the browser tests). */
const received = new Map<string, number>();

function dispatch(t: string, d: any) {
  received.set(t, (received.get(t) ?? 0) + 1);
  if (commands?.dispatch(t, d)) return;
  switch (t) {
    case "READY":
      readyCount++;
      me = d.user;
      if (readyCount > 1) {
        // A fresh session after a failed RESUME: history may have gaps.
        for (const hist of histories.values()) hist.loaded = false;
        members.resubscribe();
        if (channelId) loadHistory(channelId, true);
      }
      readStates(d.read_state);
      for (const c of d.private_channels ?? []) addDm(c);
      // A server in the address that this user is not in: forget it.
      if (wanted && wanted.guild !== HOME && !d.guilds.some((g: any) => g.id === wanted!.guild)) wanted = null;
      if (wanted?.guild === HOME) {
        const want = wanted;
        wanted = null;
        selectGuild(HOME, want.channel);
        if (want.channel && want.message) jumpTo(want.channel, want.message);
      } else if (!d.guilds.length) {
        renderGuilds();
        selectGuild(null);
      }
      renderGuilds();
      break;
    case "GUILD_CREATE":
      guildCreate(d);
      break;
    case "GUILD_UPDATE": {
      const g = guilds.get(d.id);
      if (g) {
        g.name = d.name;
        g.owner_id = d.owner_id ?? g.owner_id;
        if ("icon" in d) g.icon = d.icon ?? null;
        settings.changed(d.id);
        renderGuilds();
        if (guildId === d.id) $("guild-name").textContent = d.name;
      }
      break;
    }
    case "THREAD_CREATE":
    case "THREAD_UPDATE":
      threadChanged(threadOf(d));
      break;
    case "THREAD_DELETE":
      threads.delete(d.id);
      if (threadPanel.openId === d.id) threadPanel.close();
      if (d.parent_id) withMessage(d.parent_id, d.id, () => undefined);
      break;
    case "THREAD_LIST_SYNC":
      for (const t of d.threads ?? []) threadChanged(threadOf({ ...t, guild_id: d.guild_id }));
      break;
    case "GUILD_EMOJIS_UPDATE": {
      const g = guilds.get(d.guild_id);
      if (g) g.emojis = customEmojis(d.emojis);
      break;
    }
    case "GUILD_DELETE":
      dropGuild(d.id);
      break;
    case "GUILD_MEMBER_UPDATE":
      if (d.user?.id) memberRoles.set(`${d.guild_id}:${d.user.id}`, d.roles ?? []);
      if (d.user?.id === me?.id) {
        myRoles.set(d.guild_id, new Set(d.roles ?? []));
        setMyTimeout(d.guild_id, d.communication_disabled_until);
        if (d.guild_id === guildId) refreshComposer();
      }
      if (d.guild_id === guildId && d.user?.id) recolourNames(d.user.id);
      break;
    case "GUILD_ROLE_CREATE":
    case "GUILD_ROLE_UPDATE": {
      const g = guilds.get(d.guild_id);
      if (g && d.role) {
        g.roles.set(d.role.id, d.role.name);
        g.perms.set(d.role.id, roleInfo(d.role));
        if (d.guild_id === guildId) {
          refreshComposer();
          recolourNames();
        }
        settings.changed(d.guild_id);
      }
      break;
    }
    case "GUILD_ROLE_DELETE": {
      const g = guilds.get(d.guild_id);
      if (g) {
        g.roles.delete(d.role_id);
        g.perms.delete(d.role_id);
        myRoles.get(d.guild_id)?.delete(d.role_id);
        if (d.guild_id === guildId) {
          refreshComposer();
          recolourNames();
        }
        settings.changed(d.guild_id);
      }
      break;
    }
    case "GUILD_MEMBER_REMOVE":
      if (d.user?.id === me?.id) dropGuild(d.guild_id);
      break;
    case "CHANNEL_CREATE":
    case "CHANNEL_UPDATE":
      if (d.guild_id) {
        addChannel(d);
        if (d.guild_id === guildId) renderChannels();
        if (d.id === channelId) {
          refreshComposer();
          $("channel-name").textContent = `# ${d.name}`;
          $("channel-topic").textContent = d.topic ?? "";
        }
        settings.changed(d.guild_id);
      } else if (d.type === 1 || d.type === 3) {
        addDm(d);
        renderGuilds();
        if (guildId === HOME) renderChannels();
      }
      break;
    case "CHANNEL_DELETE": {
      channels.delete(d.id);
      const g = guilds.get(d.guild_id);
      if (g) g.channels = g.channels.filter((c) => c !== d.id);
      if (channelId === d.id) selectChannel(g ? (textChannels(g)[0] ?? null) : null);
      else if (d.guild_id === guildId) renderChannels();
      if (d.guild_id) settings.changed(d.guild_id);
      break;
    }
    case "MESSAGE_CREATE":
      messageCreate(d);
      break;
    case "PASSIVE_UPDATE_V1":
      passiveUpdate(d);
      break;
    case "MESSAGE_UPDATE":
      messageUpdate(d);
      break;
    case "MESSAGE_DELETE":
      messageDelete(d.channel_id, d.id);
      break;
    case "MESSAGE_REACTION_ADD":
    case "MESSAGE_REACTION_REMOVE":
      reacted(d, t === "MESSAGE_REACTION_ADD");
      break;
    case "MESSAGE_REACTION_REMOVE_ALL":
    case "MESSAGE_REACTION_REMOVE_EMOJI":
      withMessage(d.channel_id, d.message_id, (m) => {
        m.reactions = d.emoji ? (m.reactions ?? []).filter((r) => emojiKey(r.emoji) !== emojiKey(d.emoji)) : [];
      });
      break;
    case "USER_UPDATE":
      userUpdated(d);
      break;
    case "MESSAGE_ACK":
      acked(d);
      break;
    case "CHANNEL_PINS_UPDATE":
      pinsChanged(d.channel_id);
      break;
    case "TYPING_START":
      typingStart(d);
      break;
    case "PRESENCE_UPDATE":
      setPresence(d.user.id, d.status);
      break;
    case "GUILD_MEMBER_LIST_UPDATE":
      members.apply(d);
      // The list carries presences too (joining a guild sends no PRESENCE_UPDATE).
      for (const op of d.ops ?? []) {
        for (const it of op.items ?? (op.item ? [op.item] : [])) {
          const m = it.member;
          if (m?.presence && presence.get(m.user.id) !== m.presence.status) setPresence(m.user.id, m.presence.status);
        }
      }
      break;
  }
}

function customEmojis(list: any[] | undefined): CustomEmoji[] {
  return (list ?? []).filter((e) => e?.id && e.name).map((e) => ({ id: e.id, name: e.name, animated: !!e.animated }));
}

/** The open server's own emojis (none in a DM). */
function openEmojis(): CustomEmoji[] {
  return (guildId && guildId !== HOME && guilds.get(guildId)?.emojis) || [];
}

function guildCreate(d: any) {
  const roles = new Map<string, string>();
  const perms = new Map<string, RoleInfo>();
  for (const r of d.roles ?? []) {
    roles.set(r.id, r.name);
    perms.set(r.id, roleInfo(r));
  }
  const g: Guild = { id: d.id, name: d.name, owner_id: d.owner_id, icon: d.icon ?? null, roles, perms, channels: [], emojis: customEmojis(d.emojis) };
  guilds.set(d.id, g);
  for (const c of d.channels ?? []) addChannel({ ...c, guild_id: d.id });
  for (const t of d.threads ?? []) threads.set(t.id, threadOf({ ...t, guild_id: d.id }));
  for (const m of d.members ?? []) {
    if (m.user) names.set(m.user.id, displayName(m));
    if (m.user) memberRoles.set(`${d.id}:${m.user.id}`, m.roles ?? []);
    if (m.user?.id === me?.id) {
      myRoles.set(d.id, new Set(m.roles ?? []));
      setMyTimeout(d.id, m.communication_disabled_until);
    }
  }
  for (const p of d.presences ?? []) presence.set(p.user.id, p.status);
  renderGuilds();
  const want = wanted;
  if (want && want.guild === d.id) {
    const c = want.channel;
    wanted = pendingGuild = null;
    selectGuild(d.id, c);
    if (c && want.message) jumpTo(c, want.message);
  } else if (pendingGuild === d.id || (guildId === null && !wanted) || guildId === d.id) {
    pendingGuild = null;
    selectGuild(d.id, guildId === d.id ? channelId : null);
  }
}

/** The server, channel and message of an address's
 *  `#/channels/<guild>/<channel>/<message>` (the last two optional). */
function routeOf(hash: string): { guild: string; channel: string | null; message: string | null } | null {
  const m = hash.match(/^#\/channels\/(\d+|@me)(?:\/(\d+)(?:\/(\d+))?)?$/);
  return m ? { guild: m[1], channel: m[2] ?? null, message: (m[2] && m[3]) || null } : null;
}

/** Puts the open channel in the address (replacing it: no history entry per
 *  click), unless the address carries an invite still to be offered. */
function showRoute(c: Channel | null | undefined) {
  if (location.hash.startsWith("#/invite/")) return;
  const want = c?.guild_id ? `#/channels/${c.guild_id}` + (c.id ? `/${c.id}` : "") : "";
  if (location.hash !== want) window.history.replaceState(null, "", location.pathname + location.search + want);
}

function addChannel(c: any) {
  const prev = channels.get(c.id);
  channels.set(c.id, {
    id: c.id,
    guild_id: c.guild_id,
    name: c.name,
    topic: c.topic ?? null,
    type: c.type,
    position: c.position ?? 0,
    last_message_id: c.last_message_id ?? prev?.last_message_id ?? null,
    overwrites: c.permission_overwrites ?? prev?.overwrites ?? [],
    parent_id: c.parent_id ?? null,
    rate_limit_per_user: c.rate_limit_per_user ?? 0,
  });
  const g = guilds.get(c.guild_id);
  if (g && !g.channels.includes(c.id)) g.channels.push(c.id);
  if (g) g.channels.sort((a, b) => channels.get(a)!.position - channels.get(b)!.position || cmpId(a, b));
}

/** A DM channel (READY's `private_channels`, CHANNEL_CREATE, or opened). */
function addDm(d: any) {
  const others = (d.recipients ?? []).filter((u: any) => u.id !== me?.id);
  for (const u of others) names.set(u.id, u.global_name || u.username);
  const prev = channels.get(d.id);
  channels.set(d.id, {
    id: d.id,
    guild_id: HOME,
    name: others.map((u: any) => u.global_name || u.username).join(", ") || "Direct message",
    topic: null,
    type: d.type ?? 1,
    position: 0,
    last_message_id: d.last_message_id ?? prev?.last_message_id ?? null,
  });
  if (!dms.includes(d.id)) dms.push(d.id);
}

/** DMs, the latest message first. */
function sortedDms(): string[] {
  const last = (id: string) => channels.get(id)?.last_message_id ?? id;
  return [...dms].sort((a, b) => cmpId(last(b), last(a)));
}

/** What a DM's badge says: messages since it was read (at least one when
 *  its newest message is unread). */
function unreadCount(c: Channel): number {
  return unread(c) ? Math.max(1, dmCounts.get(c.id) ?? 0) : 0;
}

function roleInfo(r: any): RoleInfo {
  let permissions = 0n;
  try {
    permissions = BigInt(r.permissions ?? "0");
  } catch {
    permissions = 0n;
  }
  return { id: r.id, name: r.name, permissions, position: r.position ?? 0, color: r.color ?? 0, hoist: !!r.hoist, mentionable: !!r.mentionable };
}

const ADMINISTRATOR = 1n << 3n;
const SEND_MESSAGES = 1n << 11n;
const ALL = (1n << 53n) - 1n;
/** What a member keeps during a timeout: seeing channels and reading them. */
const TIMED_OUT_KEEPS = (1n << 10n) | (1n << 16n);

/** When this user's timeout ends, per server (ms since the epoch). */
const myTimeout = new Map<string, number>();
let timeoutTimer: ReturnType<typeof setTimeout> | undefined;

/** Records this user's timeout in `guild` from a member object's
 *  `communication_disabled_until`, and redraws the composer when it ends. */
function setMyTimeout(guild: string, until: string | null | undefined) {
  const t = until ? Date.parse(until) : NaN;
  if (t > Date.now()) myTimeout.set(guild, t);
  else myTimeout.delete(guild);
  clearTimeout(timeoutTimer);
  const next = Math.min(...myTimeout.values());
  if (Number.isFinite(next)) timeoutTimer = setTimeout(refreshComposer, Math.min(next - Date.now() + 50, 2 ** 31 - 1));
}

/** The end of this user's timeout in `guild`, if one lasts now. */
function timedOutUntil(guild: string | undefined): number | null {
  const t = guild ? myTimeout.get(guild) : undefined;
  return t && t > Date.now() ? t : null;
}

/** This user's permissions in channel `c`, as Discord computes them: the
 *  owner has all; @everyone's and their roles' bits, all with
 *  Administrator; then the channel's overwrites for @everyone, for their
 *  roles together, and for them. */
function permissionsIn(c: Channel): bigint {
  const g = guilds.get(c.guild_id);
  if (!g || !me) return ALL;
  if (g.owner_id === me.id) return ALL;
  const mine = myRoles.get(g.id) ?? new Set<string>();
  let p = g.perms.get(g.id)?.permissions ?? 0n;
  for (const r of mine) p |= g.perms.get(r)?.permissions ?? 0n;
  if (p & ADMINISTRATOR) return ALL;
  const muted = timedOutUntil(g.id) ? TIMED_OUT_KEEPS : ALL;
  const ow = c.overwrites ?? [];
  const bits = (o: { allow: string; deny: string }) => [BigInt(o.allow || "0"), BigInt(o.deny || "0")];
  const everyone = ow.find((o) => o.id === g.id);
  if (everyone) {
    const [allow, deny] = bits(everyone);
    p = (p & ~deny) | allow;
  }
  let allow = 0n,
    deny = 0n;
  for (const o of ow) {
    if (o.type === 0 && o.id !== g.id && mine.has(o.id)) {
      const [a, d] = bits(o);
      allow |= a;
      deny |= d;
    }
  }
  p = (p & ~deny) | allow;
  const own = ow.find((o) => o.type === 1 && o.id === me.id);
  if (own) {
    const [a, d] = bits(own);
    p = (p & ~d) | a;
  }
  return p & muted;
}

/** The composer, or a note where it would be when this user may not send
 *  in the open channel (it follows role and overwrite changes live). */
function refreshComposer() {
  const c = channelId ? channels.get(channelId) : null;
  const may = !c || c.guild_id === HOME || (permissionsIn(c) & SEND_MESSAGES) !== 0n;
  $("composer").hidden = !may;
  $("no-send").hidden = may;
  const until = c ? timedOutUntil(c.guild_id) : null;
  $("no-send").textContent = until
    ? `You are timed out until ${new Date(until).toLocaleString()}. You can read, but not send or react.`
    : "You do not have permission to send messages in this channel.";
  ($("guild-settings") as HTMLButtonElement).hidden = !guildId || guildId === HOME;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** Whether `m` mentions this user: by name, by one of their roles, or
 *  @everyone / @here (never their own message). */
function mentionsMe(m: Message): boolean {
  if (!me || m.author.id === me.id) return false;
  if (m.mentions?.some((u) => u.id === me.id) || m.mention_everyone) return true;
  const g = channels.get(m.channel_id)?.guild_id;
  const mine = g ? myRoles.get(g) : undefined;
  return !!mine && (m.mention_roles ?? []).some((r) => mine.has(r));
}

/** The page title: "(N) throng" while N DM messages are unread. */
function titleWithUnread(): string {
  const n = dmUnreadTotal();
  return n ? `(${n}) throng` : "throng";
}

// ---------- profiles ----------

let profileEl: HTMLElement | null = null;

function closeProfile() {
  profileEl?.remove();
  profileEl = null;
}

/** A person's card near `at`: picture, names, roles in the open server and
 *  when they joined it, and buttons to message or mention them. */
async function openProfile(uid: string, at: { x: number; y: number }) {
  closeProfile();
  const name = names.get(uid) ?? "someone";
  const g = guildId && guildId !== HOME ? guilds.get(guildId) : null;
  const handle = h("p", { class: "muted handle" });
  let username = name;
  const roles = h("ul", { class: "profile-roles", "aria-label": "Roles" });
  const since = h("p", { class: "muted since" });
  const el = h(
    "div",
    { class: "profile", role: "dialog", "aria-label": `Profile of ${name}`, tabindex: "-1" },
    h("div", { class: "profile-top" }, avatar({ id: uid, username: name }), h("h3", null, name)),
    handle,
    roles,
    since,
    h(
      "div",
      { class: "row" },
      uid !== me?.id ? h("button", { type: "button", onclick: () => openDm(uid) }, "Message") : null,
      g
        ? h(
            "button",
            {
              type: "button",
              class: "secondary",
              onclick: () => {
                const input = $<HTMLTextAreaElement>("input");
                closeProfile();
                input.focus();
                mentionPicker?.insert({ label: name, text: `@${username}`, syntax: `<@${uid}>`, kind: "user" });
              },
            },
            "Mention",
          )
        : null,
    ),
  );
  const w = 280;
  el.style.left = `${Math.max(8, Math.min(at.x > innerWidth / 2 ? at.x - w - 12 : at.x + 12, innerWidth - w - 8))}px`;
  el.style.top = `${Math.max(8, Math.min(at.y, innerHeight - 280))}px`;
  document.body.appendChild(el);
  profileEl = el;
  el.focus();
  if (!g) return;
  try {
    const m = await api.get(`/guilds/${g.id}/members/${uid}`);
    if (profileEl !== el) return;
    username = m.user?.username ?? name;
    handle.textContent = `@${username}`;
    clear(roles, (m.roles ?? []).map((r: string) => g.roles.get(r)).filter(Boolean).map((r: string) => h("li", { class: "role" }, r)));
    const joined = new Date(m.joined_at);
    if (!isNaN(joined.getTime())) since.textContent = `Member of ${g.name} since ${joined.toLocaleDateString([], { dateStyle: "medium" })}`;
  } catch {
    // The card keeps what it knew.
  }
}

/** Opens the DM with `uid` (made if need be). */
async function openDm(uid: string) {
  try {
    const d = await api.post("/users/@me/channels", { recipient_id: uid });
    addDm(d);
    selectGuild(HOME, d.id);
    closeProfile();
  } catch (err) {
    flashError(err);
  }
}

function dropGuild(id: string) {
  const g = guilds.get(id);
  if (!g) return;
  for (const c of g.channels) channels.delete(c);
  guilds.delete(id);
  renderGuilds();
  if (guildId === id) selectGuild(guilds.keys().next().value ?? null);
}

function setPresence(uid: string, status: string) {
  presence.set(uid, status);
  for (const el of document.querySelectorAll<HTMLElement>(`.author[data-uid="${CSS.escape(uid)}"] .dot`)) el.className = `dot ${status}`;
}

// ---------- guilds and channels ----------

/** A server's text channels in the sidebar's order (categories apart). */
function textChannels(g: Guild): string[] {
  return sidebarOrder(g).filter((c) => [0, 5].includes(c.type)).map((c) => c.id);
}

/** The sidebar: loose channels, then each category and its channels. */
function sidebarOrder(g: Guild): Channel[] {
  const list = g.channels.map((id) => channels.get(id)!).filter((c) => c && [0, 4, 5].includes(c.type));
  const info = channelOrder(list.map((c) => ({ id: c.id, name: c.name, type: c.type, position: c.position, parent_id: c.parent_id ?? null, topic: c.topic, rate_limit_per_user: 0, overwrites: [] })));
  return info.map((c) => channels.get(c.id)!);
}

/** A server's text channels (for search's in: and the # list). */
function guildTextChannels(id: string): Channel[] {
  const g = guilds.get(id);
  return g ? textChannels(g).map((c) => channels.get(c)!) : [];
}

/** Unread DM messages in all, for the DM button and the page title. */
function dmUnreadTotal(): number {
  return dms.reduce((n, id) => n + unreadCount(channels.get(id)!), 0);
}

function unread(c: Channel): boolean {
  return !!c.last_message_id && (!read[c.id] || cmpId(c.last_message_id, read[c.id]) > 0);
}

/** A muted channel, or a channel of a muted server: no unread marker and
 *  no browser notification (mention badges still count). */
function isMuted(c: Channel): boolean {
  return muted.has(c.id) || muted.has(c.guild_id);
}

function setMuted(id: string, on: boolean) {
  if (on) muted.add(id);
  else muted.delete(id);
  if (me) localStorage.setItem(`throng.muted.${me.id}`, JSON.stringify([...muted]));
  renderGuilds();
  renderChannels();
  renderMute();
}

/** The mute buttons of the open channel and server. */
function renderMute() {
  const c = channelId ? channels.get(channelId) : null;
  $("show-pins").hidden = !c;
  $("show-threads").hidden = !c || c.guild_id === HOME;
  const ch = $<HTMLButtonElement>("mute-channel");
  ch.hidden = !c || c.guild_id === HOME;
  if (c) {
    const on = muted.has(c.id);
    clear(ch, h("span", { class: "wide-only" }, on ? "Unmute" : "Mute"), h("span", { class: "phone-only", "aria-hidden": "true" }, on ? "🔔" : "🔕"));
    ch.setAttribute("aria-pressed", String(on));
    ch.setAttribute("aria-label", `${on ? "Unmute" : "Mute"} channel`);
  }
  const gb = $<HTMLButtonElement>("mute-guild");
  const g = guildId && guildId !== HOME ? guilds.get(guildId) : null;
  gb.hidden = !g;
  if (g) {
    const on = muted.has(g.id);
    gb.textContent = on ? "Unmute" : "Mute";
    gb.setAttribute("aria-pressed", String(on));
    gb.setAttribute("aria-label", `${on ? "Unmute" : "Mute"} server`);
  }
}

/** The footer's switch for browser notifications. */
function renderNotify() {
  const b = $<HTMLButtonElement>("notify");
  const supported = "Notification" in window;
  const on = supported && Notification.permission === "granted" && localStorage.getItem("throng.notify") !== "off";
  b.hidden = !supported;
  b.textContent = on ? "Alerts on" : "Alerts off";
  b.setAttribute("aria-pressed", String(on));
}

/** A browser notification for `m` when this tab is hidden and `m` is a DM
 *  or mentions this user, outside muted places; a click opens it. */
function notify(m: Message, c: Channel) {
  // The cheap tests first: the permission and storage reads cost about a
  // millisecond each, too much for every message of a busy channel.
  if (!document.hidden || m.author.id === me?.id || isMuted(c)) return;
  if (!("Notification" in window) || Notification.permission !== "granted" || localStorage.getItem("throng.notify") === "off") return;
  const dm = c.guild_id === HOME;
  if (!dm && !mentionsMe(m)) return;
  const who = m.author.global_name || m.author.username;
  const where = dm ? who : `${who} in #${c.name} (${guilds.get(c.guild_id)?.name ?? ""})`;
  // Mentions as they read: @name, @role, #channel.
  const text = (m.content || (m.attachments?.length ? `${m.attachments.length} file(s)` : ""))
    .replace(/<@!?(\d+)>/g, (_s, id) => `@${names.get(id) ?? "someone"}`)
    .replace(/<@&(\d+)>/g, (_s, id) => `@${mentionNames.role(id) ?? "role"}`)
    .replace(/<#(\d+)>/g, (_s, id) => `#${channels.get(id)?.name ?? "channel"}`);
  try {
    const n = new Notification(where, { body: text.length > 200 ? `${text.slice(0, 199)}…` : text, tag: c.id });
    n.onclick = () => {
      window.focus();
      if (c.guild_id === HOME) selectGuild(HOME, c.id);
      else selectGuild(c.guild_id, c.id);
      n.close();
    };
  } catch {
    // Some browsers allow notifications only from a service worker.
  }
}

function renderGuilds() {
  const homeUnread = dmUnreadTotal();
  const home = h(
    "button",
      {
        class: "round home" + (guildId === HOME ? " current" : "") + (homeUnread ? " unread" : ""),
        title: "Direct messages",
        "aria-current": guildId === HOME ? "true" : null,
        onclick: () => selectGuild(HOME),
      },
    // Named by its hidden text, not a label: "DM" shows, "Direct messages" is read.
    h("span", { "aria-hidden": "true" }, "DM"),
    h("span", { class: "sr-only" }, "Direct messages" + (homeUnread ? `, ${homeUnread} unread` : "")),
    homeUnread ? h("span", { class: "badge", "aria-hidden": "true" }, String(homeUnread)) : null,
  );
  const items = [...guilds.values()].map((g) => {
    const hasUnread = !muted.has(g.id) && textChannels(g).some((c) => unread(channels.get(c)!) && !isMuted(channels.get(c)!));
    const current = g.id === guildId;
    const mentions = g.channels.reduce((n, c) => n + (mentionCounts.get(c) ?? 0), 0);
    const b = h(
      "button",
      {
        class: "round guild" + (current ? " current" : "") + (hasUnread ? " unread" : ""),
        title: g.name,
        "aria-current": current ? "true" : null,
        onclick: () => selectGuild(g.id),
      },
      // Named by hidden text, as the DM button: the icon or the initials show, the name is read.
      g.icon
        ? h("img", { class: "guild-icon", src: `/icons/${g.id}/${g.icon}.png`, alt: "", width: 48, height: 48, "aria-hidden": "true" })
        : h("span", { "aria-hidden": "true" }, g.name.split(/\s+/).map((w) => w[0] ?? "").join("").slice(0, 3) || "?"),
      h("span", { class: "sr-only" }, g.name + (hasUnread ? ", unread messages" : "") + (mentions ? `, ${plural(mentions, "mention")}` : "")),
      mentions ? h("span", { class: "badge", "aria-hidden": "true" }, String(mentions)) : null,
    );
    return h("li", null, b);
  });
  clear($("home"), home);
  clear($("guild-list"), items);
}

function renderChannels() {
  const ul = $("channel-list");
  if (guildId === HOME) return renderDms(ul);
  const g = guildId ? guilds.get(guildId) : null;
  if (!g) return clear(ul);
  const items = sidebarOrder(g).map((c) => {
    if (c.type === 4) return h("li", { class: "category" }, h("h3", { class: "category-name" }, c.name));
    const a = h(
      "a",
      {
        href: `#/channels/${g.id}/${c.id}`,
        class: "channel" + (c.id === channelId ? " current" : "") + (unread(c) && !isMuted(c) ? " unread" : "") + (isMuted(c) ? " muted" : ""),
        "data-channel-id": c.id,
        "aria-current": c.id === channelId ? "page" : null,
        onclick: (e: MouseEvent) => {
          e.preventDefault();
          selectChannel(c.id);
          closeNav();
        },
      },
      // Read without its "#", with what the marks say.
      h("span", { "aria-hidden": "true" }, `# ${c.name}`),
      h("span", { class: "sr-only" }, `${c.name}${isMuted(c) ? ", muted" : unread(c) ? ", unread messages" : ""}${mentionCounts.get(c.id) ? `, ${plural(mentionCounts.get(c.id)!, "mention")}` : ""}`),
      mentionCounts.get(c.id) ? h("span", { class: "badge", "aria-hidden": "true" }, String(mentionCounts.get(c.id))) : null,
    );
    return h("li", null, a);
  });
  clear(ul, items);
}

function renderDms(ul: HTMLElement) {
  const list = sortedDms();
  const make = h("li", null, h("button", { type: "button", class: "secondary new-group", onclick: newGroupDm }, "New group DM"));
  if (!list.length) return clear(ul, make, h("li", { class: "muted empty" }, "No direct messages yet. Open someone's profile and choose Message."));
  clear(
    ul,
    make,
    list.map((id) => {
      const c = channels.get(id)!;
      const n = unreadCount(c);
      return h(
        "li",
        null,
        h(
          "a",
          {
            href: `#/channels/${HOME}/${c.id}`,
            class: "channel dm" + (c.id === channelId ? " current" : "") + (n ? " unread" : ""),
            "data-channel-id": c.id,
            "aria-current": c.id === channelId ? "page" : null,
            onclick: (e: MouseEvent) => {
              e.preventDefault();
              selectChannel(c.id);
              closeNav();
            },
          },
          h("span", { "aria-hidden": "true" }, `${dmSigil(c)} ${c.name}`),
          h("span", { class: "sr-only" }, `${c.name}${n ? `, ${n} unread` : ""}`),
          n ? h("span", { class: "badge", "aria-hidden": "true" }, String(n)) : null,
        ),
      );
    }),
  );
}

/** What stands before a DM's name: @ for one person, 👥 for a group. */
function dmSigil(c: Channel): string {
  return c.type === 3 ? "👥" : "@";
}

/** "New group DM": people named by username (each found by the member
 *  search of a server shared with them), then `POST /users/@me/channels`
 *  with `recipients`; the group opens. */
function newGroupDm() {
  ask("New group DM", "Usernames, separated by commas", "", async (v) => {
    const wanted = [...new Set(v.split(/[,\s]+/).map((s) => s.replace(/^@/, "").trim().toLowerCase()).filter(Boolean))];
    if (wanted.length < 2) return "Name two people or more (for one, open their profile and choose Message).";
    const ids: string[] = [];
    for (const name of wanted) {
      const id = await findUser(name);
      if (!id) return `No one named ${name} shares a server with you.`;
      ids.push(id);
    }
    const d = await api.post("/users/@me/channels", { recipients: ids });
    addDm(d);
    selectGuild(HOME, d.id);
  });
}

/** The id of the user named `name` (their username) in a server shared with them. */
async function findUser(name: string): Promise<string | null> {
  for (const g of guilds.values()) {
    const found: any[] = await api.get(`/guilds/${g.id}/members/search?query=${encodeURIComponent(name)}&limit=10`);
    const m = found.find((x) => x.user?.username?.toLowerCase() === name);
    if (m) return m.user.id;
  }
  return null;
}

function selectGuild(id: string | null, channel: string | null = null) {
  document.body.classList.toggle("in-dm", id === HOME);
  if (id === HOME) {
    guildId = HOME;
    $("guild-name").textContent = "Direct messages";
    renderGuilds();
    for (const b of ["add-channel", "invite"]) ($(b) as HTMLButtonElement).disabled = true;
    // The member list stays subscribed, hidden (body.in-dm): back in the
    // server it shows at once, as the server sends nothing new for the
    // same subscription.
    // Without one asked for, the list alone: opening one would read it.
    selectChannel(channel && dms.includes(channel) ? channel : null);
    return;
  }
  guildId = id;
  const g = id ? guilds.get(id) : null;
  $("guild-name").textContent = g ? g.name : "No server";
  renderGuilds();
  for (const b of ["add-channel", "invite"]) ($(b) as HTMLButtonElement).disabled = !g;
  if (!g) {
    members.close();
    selectChannel(null);
    return;
  }
  const list = textChannels(g);
  selectChannel(channel && list.includes(channel) ? channel : list[0] ?? null);
}

function selectChannel(id: string | null) {
  channelId = id;
  const c = id ? channels.get(id) : null;
  showRoute(c);
  refreshComposer();
  renderMute();
  renderReplyBar();
  const dm = c?.guild_id === HOME;
  $("channel-name").textContent = c ? (dm ? `${dmSigil(c)} ${c.name}` : `# ${c.name}`) : "";
  $("channel-topic").textContent = c?.topic ?? "";
  const input = $<HTMLTextAreaElement>("input");
  input.disabled = ($("send") as HTMLButtonElement).disabled = ($("attach") as HTMLButtonElement).disabled = ($("emoji") as HTMLButtonElement).disabled = !c;
  input.placeholder = c ? (dm ? `Message @${c.name}` : `Message #${c.name}`) : "Message";
  renderChannels();
  renderTyping();
  if (c?.guild_id && !dm) commands?.prefetch(c.guild_id);
  list.reset();
  view.top = view.height = view.client = 0;
  // The "New messages" line: where this channel was read up to, if it was
  // read before and something came since.
  newSince.clear();
  arrivedAbove = 0;
  if (c && read[c.id] && unread(c)) newSince.set(c.id, read[c.id]);
  if (!c) {
    if (guildId === HOME) {
      $("channel-name").textContent = "Direct messages";
      showRoute({ id: "", guild_id: HOME } as Channel);
      list.reset(h("li", { class: "empty muted" }, dms.length ? "Pick a conversation on the left." : "No direct messages yet."));
    }
    mark();
    return;
  }
  if (!dm) members.open(c.guild_id, c.id);
  const hist = history(c.id);
  if (hist.loaded) {
    renderHistory();
    mark();
  } else {
    loadHistory(c.id, true).then(mark);
  }
}

function history(id: string): History {
  let hist = histories.get(id);
  if (!hist) histories.set(id, (hist = { items: [], hasMore: true, loaded: false, loading: false }));
  return hist;
}

/// Marks the moment the client became usable (for time-to-interactive).
function mark() {
  if (interactiveMarked) return;
  interactiveMarked = true;
  performance.mark("throng-interactive");
}

// ---------- messages ----------

async function loadHistory(id: string, fresh: boolean) {
  const hist = history(id);
  if (hist.loading || (!fresh && !hist.hasMore)) return;
  hist.loading = true;
  try {
    const oldest = fresh ? null : hist.items[0]?.id;
    const page: Message[] = await api.get(`/channels/${id}/messages?limit=${PAGE}` + (oldest ? `&before=${oldest}` : ""));
    page.reverse();
    let older: Message[] = [];
    const oldFirst = hist.items[0];
    if (fresh) {
      // Keep what arrived over the gateway meanwhile.
      const newer = hist.items.filter((m) => !page.length || cmpId(m.id, page[page.length - 1].id) > 0);
      hist.items = page.concat(newer);
    } else {
      older = page.filter((m) => !oldFirst || cmpId(m.id, oldFirst.id) < 0);
      // The open channel takes them as they are drawn (below).
      if (channelId !== id) hist.items = older.concat(hist.items);
    }
    hist.hasMore = page.length === PAGE;
    hist.loaded = true;
    for (const m of page) names.set(m.author.id, m.author.global_name || m.author.username);
    if (channelId !== id) return;
    if (fresh) {
      renderHistory();
      return;
    }
    // Older messages above, a few per frame, nearest first: drawing and
    // laying out a whole page at once was a long task.
    for (let end = older.length; end > 0; end -= OLDER_PER_FRAME) {
      const chunk = older.slice(Math.max(0, end - OLDER_PER_FRAME), end);
      await new Promise((r) => requestAnimationFrame(r));
      if (channelId !== id) {
        // Left meanwhile: the rest is kept, to be drawn on return.
        hist.items = older.slice(0, end).concat(hist.items);
        return;
      }
      prependOlder(hist, chunk);
    }
  } catch (err) {
    console.error("history", err);
  } finally {
    hist.loading = false;
  }
}

/** Older messages drawn per frame when a page arrives. */
const OLDER_PER_FRAME = 5;

/** `older` (just before the oldest drawn) drawn above, keeping the
 *  reader's place: only they are drawn, and the message that headed the
 *  list again under them (its grouping and date line depend on what now
 *  precedes it). The place is kept by hand, not left to scroll anchoring:
 *  the reader is near the top, where the browser may anchor to the head
 *  drawn again (and at the very top anchors nothing). The message after
 *  the head stays where it was on the screen: one layout is read, after
 *  every change of the frame. */
function prependOlder(hist: History, older: Message[]) {
  const ol = $("messages");
  const oldFirst = hist.items[0];
  const ref = hist.items[1] ?? oldFirst;
  const refEl = ref && document.getElementById(`m-${ref.id}`);
  const was = refEl ? refEl.getBoundingClientRect().top : 0;
  const entries: Node[][] = [];
  let prev: Message | undefined;
  for (const m of older) {
    entries.push(entry(m, prev));
    prev = m;
  }
  const head = oldFirst && document.getElementById(`m-${oldFirst.id}`);
  if (head) list.replace(head, entry(oldFirst, prev));
  list.prepend(entries);
  hist.items = older.concat(hist.items);
  shownTo += older.length;
  undrawNewest(hist);
  const now = ref && document.getElementById(`m-${ref.id}`);
  if (refEl && now) ol.scrollTop += now.getBoundingClientRect().top - was;
  renderJump();
}

/** Messages drawn at most. Scrolling back past it undraws the newest ones
 *  (kept in memory, drawn again on the way down): the cost of laying out
 *  the list stays bounded however far back one reads. */
const DOM_MAX = 400;
/** The open channel's drawn messages are `items[0 .. shownTo)`; fewer than
 *  all means the newest are not on the page ("detached" from the present). */
let shownTo = 0;

function detached(): boolean {
  const hist = channelId ? histories.get(channelId) : undefined;
  return !!hist && shownTo < hist.items.length;
}

/** The `n` oldest messages leave the page and memory (scrolling up reads
 *  them again); the new first message is drawn again as the head of its
 *  run, under a date line. The browser keeps the reader's place. */
function dropOldest(hist: History, n: number) {
  if (n <= 0) return;
  const gone = hist.items.splice(0, n);
  hist.hasMore = true;
  shownTo = Math.max(0, shownTo - n);
  const first = hist.items[0];
  const el = first && document.getElementById(`m-${first.id}`);
  if (el) {
    list.removeBefore(el);
    list.replace(el, entry(first, undefined));
  } else for (const m of gone) {
    const li = document.getElementById(`m-${m.id}`);
    if (li) list.remove(li);
  }
}

/** The drawn messages past `DOM_MAX`, newest first, leave the page (not memory). */
function undrawNewest(hist: History) {
  const extra = shownTo - DOM_MAX;
  if (extra <= 0) return;
  const first = hist.items[shownTo - extra];
  const el = first && document.getElementById(`m-${first.id}`);
  if (el) list.removeFrom(el);
  shownTo -= extra;
}

/** Detached and near the bottom: the next page of newer messages from
 *  memory is drawn, and as many of the oldest leave. */
function drawNewer() {
  const hist = history(channelId!);
  const next = hist.items.slice(shownTo, shownTo + PAGE);
  if (!next.length) return;
  const entries: Node[][] = [];
  let prev = hist.items[shownTo - 1];
  for (const m of next) {
    entries.push(entry(m, prev));
    prev = m;
  }
  list.append(entries);
  shownTo += next.length;
  // Taller below by a page: not at the bottom, until measured again.
  view.height = Infinity;
  dropOldest(hist, shownTo - DOM_MAX);
  renderJump();
}

function renderHistory(toBottom = true) {
  const hist = history(channelId!);
  // The newest DOM_MAX only: older ones are read again on scrolling up.
  if (hist.items.length > DOM_MAX) {
    hist.items.splice(0, hist.items.length - DOM_MAX);
    hist.hasMore = true;
  }
  shownTo = hist.items.length;
  list.reset();
  const entries: Node[][] = [];
  let prev: Message | undefined;
  for (const m of hist.items) {
    entries.push(entry(m, prev));
    prev = m;
  }
  list.append(entries);
  if (toBottom) scrollToEnd();
  markRead();
  renderJump();
}

/** `m` after `prev`, as drawn: a date line first when the day changes,
 *  and the "New messages" line before the first one past the read mark. */
function entry(m: Message, prev: Message | undefined): Node[] {
  const out: Node[] = [];
  if (!prev || day(prev.timestamp) !== day(m.timestamp)) {
    const d = new Date(m.timestamp);
    const label = isNaN(d.getTime()) ? "" : DAY_FORMAT.format(d);
    out.push(h("li", { class: "day" }, h("span", null, label)));
  }
  const since = newSince.get(m.channel_id);
  if (since && cmpId(m.id, since) > 0 && (!prev || cmpId(prev.id, since) <= 0)) {
    out.push(h("li", { class: "new-line", id: "new-line", role: "separator" }, h("span", null, "New messages")));
  }
  out.push(messageEl(m, prev));
  return out;
}

/** Messages that arrived in the open channel while the reader was further up. */
let arrivedAbove = 0;

/** "Jump to present": shown while the reader is more than a screen above
 *  the newest message, or new ones came while they were up there. */
function renderJump() {
  const bar = $("jump-present");
  const far = view.height - view.top - view.client > view.client;
  if (atBottom()) arrivedAbove = 0;
  const show = !!channelId && (far || arrivedAbove > 0 || detached());
  if (bar.hidden === !show && bar.dataset.n === String(arrivedAbove)) return;
  bar.hidden = !show;
  bar.dataset.n = String(arrivedAbove);
  $("jump-note").textContent = arrivedAbove ? `${plural(arrivedAbove, "new message")} below` : "You are viewing older messages";
}

function jumpToPresent() {
  if (detached()) renderHistory();
  scrollToEnd();
  arrivedAbove = 0;
  renderJump();
  markRead();
  $("messages").focus();
}

function day(ts: string): string {
  return new Date(ts).toDateString();
}

/** The message before `m` in its channel's history. */
function prevOf(m: Message): Message | undefined {
  const items = histories.get(m.channel_id)?.items ?? [];
  const i = items.findIndex((x) => x.id === m.id);
  return i > 0 ? items[i - 1] : undefined;
}

/** A message that continues its author's run: same author, same day,
 *  within 7 minutes of the one before, neither a reply nor an app's answer. */
function continues(m: Message, prev: Message | undefined): boolean {
  if (!prev || prev.author.id !== m.author.id || m.interaction_metadata || prev.interaction_metadata) return false;
  const gap = Date.parse(m.timestamp) - Date.parse(prev.timestamp);
  return gap >= 0 && gap < 7 * 60_000 && day(prev.timestamp) === day(m.timestamp);
}

/** The author's picture, or their initial on a colour of their own. */
function avatar(u: any): HTMLElement {
  if (u.avatar) {
    return h("img", { class: "avatar", src: `/avatars/${u.id}/${u.avatar}.png`, alt: "", width: 40, height: 40, "aria-hidden": "true" });
  }
  const hue = Number(BigInt(u.id) % 5n);
  const name = u.global_name || u.username || "?";
  return h("span", { class: `avatar initial c${hue}`, "aria-hidden": "true" }, name.slice(0, 1).toUpperCase());
}

// The formats every message uses, made once: `toLocale…String` builds a
// formatter on each call, which was most of the time spent drawing a page
// of history.
const TIME_FORMAT = new Intl.DateTimeFormat([], { hour: "2-digit", minute: "2-digit" });
const FULL_FORMAT = new Intl.DateTimeFormat([], { dateStyle: "full", timeStyle: "short" });
const DAY_FORMAT = new Intl.DateTimeFormat([], { year: "numeric", month: "long", day: "numeric" });

function time(ts: string): string {
  const d = new Date(ts);
  return isNaN(d.getTime()) ? "" : TIME_FORMAT.format(d);
}

/** Names for the mentions in messages: people, channels and roles known here. */
const mentionNames: Names = {
  user: (id) => names.get(id) ?? null,
  channel: (id) => channels.get(id)?.name ?? null,
  role: (id) => {
    for (const g of guilds.values()) {
      const r = g.roles.get(id);
      if (r) return r;
    }
    return null;
  },
};

function messageEl(m: Message, prev: Message | undefined = prevOf(m)): HTMLLIElement {
  const name = m.author.global_name || m.author.username;
  for (const u of m.mentions ?? []) if (!names.has(u.id)) names.set(u.id, u.global_name || u.username);
  const notes = interactionNotes(m, () => messageDelete(m.channel_id, m.id));
  const status = presence.get(m.author.id) ?? "offline";
  const mine = m.author.id === me?.id;
  const grouped = continues(m, prev);
  const full = new Date(m.timestamp);
  const title = isNaN(full.getTime()) ? "" : FULL_FORMAT.format(full);
  // Attachments an embed shows (`attachment://name`) are not drawn again below.
  const inEmbeds = m.embeds?.length ? shownInEmbeds(m) : new Set<string>();
  const edited = m.edited_timestamp ? h("span", { class: "edited", title: new Date(m.edited_timestamp).toLocaleString() }, "(edited)") : null;
  return h(
    "li",
    { class: (grouped ? "message grouped" : "message") + (mentionsMe(m) ? " mentioned" : ""), id: `m-${m.id}`, "data-id": m.id, "aria-label": grouped ? `${name}, ${title}` : null },
    grouped
      ? h("time", { class: "hover-time", datetime: m.timestamp, title }, time(m.timestamp))
      : [
          avatar(m.author),
          h(
            "div",
            { class: "meta" },
            authorName(m, status, name),
            " ",
            h("time", { datetime: m.timestamp, title }, time(m.timestamp)),
            edited ? [" ", edited] : null,
          ),
        ],
    notes.before,
    replyLine(m),
    m.pinned ? h("div", { class: "pinned-note" }, "📌 Pinned") : null,
    notes.loading
      ? h("div", { class: "content thinking" }, `${name} is thinking…`)
      : h("div", { class: "content" }, markdown(m.content, mentionNames, me?.id)),
    attachmentsEl(m.embeds?.length ? m.attachments?.filter((a) => !inEmbeds.has(a.filename)) : m.attachments),
    embedsEl(m, mentionNames, me?.id),
    grouped && edited ? h("div", { class: "edited-line" }, edited) : null,
    commands?.components(m) ?? null,
    m.reactions?.length ? h("div", { class: "reactions", role: "group", "aria-label": "Reactions" }, m.reactions.map((r) => reactionChip(m, r))) : null,
    threadLine(m),
    notes.after,
    h(
      "div",
      { class: "actions" },
      h("button", { type: "button", class: "reply", title: "Reply to this message" }, "Reply"),
      h("button", { type: "button", class: "react", title: "Add a reaction", "aria-haspopup": "menu" }, "React"),
      mayStartThread(m) ? h("button", { type: "button", class: "thread", title: "Start a thread from this message" }, "Thread") : null,
      mayPin(m) ? h("button", { type: "button", class: m.pinned ? "unpin" : "pin" }, m.pinned ? "Unpin" : "Pin") : null,
      mine ? h("button", { type: "button", class: "edit", "aria-label": "Edit message" }, "Edit") : null,
      mine ? h("button", { type: "button", class: "delete", "aria-label": "Delete message" }, "Delete") : null,
    ),
  );
}

/** Under a message a thread was started from: its name and count, a
 *  click away. */
function threadLine(m: Message): Child {
  const t = threads.get(m.id);
  if (!t || t.parent_id !== m.channel_id) return null;
  return h(
    "button",
    { type: "button", class: "thread-link", "aria-label": `Thread ${t.name}, ${plural(t.message_count, "message")}. Open it` },
    h("span", { "aria-hidden": "true" }, "🧵 "),
    h("strong", null, t.name),
    h("span", { class: "muted" }, ` ${plural(t.message_count, "message")}${t.archived ? " · archived" : ""}`),
  );
}

/** "Thread" on a message: a server channel's, none started from it yet,
 *  and Create Public Threads there. */
function mayStartThread(m: Message): boolean {
  const c = channels.get(m.channel_id);
  if (!c || c.guild_id === HOME || threads.has(m.id)) return false;
  return (permissionsIn(c) & CREATE_PUBLIC_THREADS) !== 0n;
}

/** Names already drawn take their roles' colours again (a role was
 *  created, changed or deleted, or someone's roles changed). */
function recolourNames(user?: string) {
  if (!channelId) return;
  const sel = user ? `#messages .author[data-uid="${CSS.escape(user)}"]` : "#messages .author[data-uid]";
  for (const el of document.querySelectorAll<HTMLElement>(sel)) {
    el.style.color = nameColor(channelId, el.dataset.uid!) ?? "";
  }
  // The member list's rows carry roles of their own (list updates).
  if (!user) members.redraw();
}

/** The author's name over a run, in their role's colour. */
function authorName(m: Message, status: string, name: string): HTMLElement {
  const el = h("span", { class: "author", "data-uid": m.author.id }, h("span", { class: `dot ${status}`, "aria-hidden": "true" }), name);
  const color = nameColor(m.channel_id, m.author.id, (m as any).member);
  if (color) el.style.color = color;
  return el;
}

/** Opens `cid` at message `mid`: loads older pages until it is there (at
 *  most 40, 2,000 messages back), centres and highlights it, and puts it in
 *  the address. */
async function jumpTo(cid: string, mid: string) {
  const c = channels.get(cid);
  if (!c) return;
  if (guildId !== c.guild_id || channelId !== cid) selectGuild(c.guild_id, cid);
  if (channelId !== cid) return;
  const hist = history(cid);
  const deadline = Date.now() + 30_000;
  for (let pages = 0; pages < 40 && Date.now() < deadline; ) {
    if (channelId !== cid) return;
    if (hist.items.some((m) => m.id === mid) || (hist.loaded && !hist.hasMore)) break;
    if (hist.loading) {
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    await loadHistory(cid, !hist.loaded);
    pages++;
  }
  // In memory but below what is drawn (read far back): drawn down to it.
  while (detached() && hist.items.findIndex((m) => m.id === mid) >= shownTo) drawNewer();
  const li = document.getElementById(`m-${mid}`);
  if (!li) {
    flashError(new Error("That message is no longer there."));
    return;
  }
  li.scrollIntoView({ block: "center" });
  li.classList.add("flash");
  setTimeout(() => li.classList.remove("flash"), 2500);
  const at = `#/channels/${c.guild_id}/${cid}/${mid}`;
  if (location.hash !== at) window.history.replaceState(null, "", location.pathname + location.search + at);
}

// ---------- pins ----------

const PIN_MESSAGES = 1n << 51n;
const MANAGE_MESSAGES = 1n << 13n;

/** Whether this user may pin in `m`'s channel: anyone in a DM; Pin
 *  Messages or Manage Messages in a server. */
function mayPin(m: Message): boolean {
  const c = channels.get(m.channel_id);
  if (!c) return false;
  return c.guild_id === HOME || (permissionsIn(c) & (PIN_MESSAGES | MANAGE_MESSAGES)) !== 0n;
}

async function setPinned(id: string, on: boolean) {
  const cid = channelId;
  if (!cid) return;
  try {
    if (on) await api.put(`/channels/${cid}/pins/${id}`);
    else await api.del(`/channels/${cid}/pins/${id}`);
    withMessage(cid, id, (m) => (m.pinned = on));
  } catch (err) {
    flashError(err);
  }
}

/** CHANNEL_PINS_UPDATE: the pins again, marked on the messages held (and
 *  in the panel if it shows them), so everyone sees a pin come and go. */
async function pinsChanged(cid: string) {
  const hist = histories.get(cid);
  if (!hist?.loaded && search.pinsOf !== cid) return;
  let list: any[];
  try {
    list = await api.get(`/channels/${cid}/pins`);
  } catch {
    return;
  }
  const ids = new Set(list.map((m) => m.id));
  for (const m of hist?.items ?? []) if (!!m.pinned !== ids.has(m.id)) withMessage(cid, m.id, (x) => (x.pinned = ids.has(x.id)));
  if (search.pinsOf === cid && channelId === cid) search.showPins(cid, list);
}

async function openPins(cid: string) {
  try {
    const list: any[] = await api.get(`/channels/${cid}/pins`);
    if (channelId === cid) search.showPins(cid, list);
  } catch (err) {
    flashError(err);
  }
}

// ---------- replies ----------

/** Above a reply: who and what it answers, a click away (or that the
 *  original is gone). */
function replyLine(m: Message): Child {
  const ref = m.message_reference?.message_id;
  if (!ref || (m.type !== 19 && m.referenced_message === undefined)) return null;
  const r = m.referenced_message;
  if (!r) return h("div", { class: "reply-ref gone" }, "Original message was deleted");
  const who = r.author?.global_name || r.author?.username || "someone";
  const text = (r.content || (r.attachments?.length ? "a file" : "")).replace(/\s+/g, " ");
  const snippet = text.length > 100 ? `${text.slice(0, 99)}…` : text;
  return h(
    "button",
    { type: "button", class: "reply-ref", "aria-label": `Replying to ${who}: ${snippet}. Jump to it`, onclick: () => jumpTo(m.channel_id, ref) },
    h("span", { class: "reply-author" }, `@${who}`),
    " ",
    h("span", { class: "reply-text" }, snippet),
  );
}

function startReply(id: string) {
  const m = channelId ? history(channelId).items.find((x) => x.id === id) : undefined;
  if (!m) return;
  replyTo = m;
  renderReplyBar();
  $<HTMLTextAreaElement>("input").focus();
}

function renderReplyBar() {
  const bar = $("reply-bar");
  if (!replyTo || replyTo.channel_id !== channelId) {
    replyTo = null;
    bar.hidden = true;
    return clear(bar);
  }
  bar.hidden = false;
  clear(
    bar,
    "Replying to ",
    h("strong", null, replyTo.author.global_name || replyTo.author.username),
    h("button", { type: "button", class: "icon", "aria-label": "Cancel reply", onclick: () => ((replyTo = null), renderReplyBar()) }, "×"),
  );
}

// ---------- reactions ----------

/** The emojis the picker offers (custom ones come from the server's list). */
const QUICK_EMOJIS = ["👍", "❤️", "😂", "🎉", "😮", "😢", "🙏", "👀"];

/** `name:id` for a custom emoji, the character itself otherwise (the REST path's form). */
function emojiKey(e: { id?: string | null; name?: string | null }): string {
  return e.id ? `${e.name ?? "_"}:${e.id}` : e.name ?? "";
}

function emojiFace(e: Reaction["emoji"]): Child {
  return e.id
    ? h("img", { class: "md-emoji", src: `/emojis/${e.id}.${e.animated ? "gif" : "png"}`, alt: `:${e.name}:`, width: 18, height: 18 })
    : e.name ?? "?";
}

/** One reaction under a message: its emoji and count, pressed when it is
 *  yours; a click adds or takes back yours; who reacted in its tooltip. */
function reactionChip(m: Message, r: Reaction): HTMLElement {
  const label = `${r.emoji.name}: ${r.count}`;
  const chip: HTMLButtonElement = h(
    "button",
    {
      type: "button",
      class: r.me ? "reaction mine" : "reaction",
      "aria-pressed": r.me ? "true" : "false",
      "aria-label": label,
      "data-emoji": emojiKey(r.emoji),
      onclick: () => toggleReaction(m, r.emoji, !r.me),
      onmouseenter: () => whoReacted(m, r, chip),
      onfocus: () => whoReacted(m, r, chip),
    },
    emojiFace(r.emoji),
    h("span", { class: "count" }, r.count),
  );
  return chip;
}

async function whoReacted(m: Message, r: Reaction, chip: HTMLElement) {
  if (chip.dataset.who) return;
  chip.dataset.who = "1";
  try {
    const users: any[] = await api.get(`/channels/${m.channel_id}/messages/${m.id}/reactions/${encodeURIComponent(emojiKey(r.emoji))}?limit=25`);
    const who = users.map((u) => u.global_name || u.username);
    chip.title = `${who.join(", ")}${r.count > who.length ? ` and ${r.count - who.length} more` : ""} reacted with ${r.emoji.id ? `:${r.emoji.name}:` : r.emoji.name}`;
  } catch {
    delete chip.dataset.who;
  }
}

async function toggleReaction(m: Message, emoji: Reaction["emoji"], add: boolean) {
  const path = `/channels/${m.channel_id}/messages/${m.id}/reactions/${encodeURIComponent(emojiKey(emoji))}/@me`;
  try {
    if (add) await api.req("PUT", path);
    else await api.del(path);
  } catch (err) {
    flashError(err);
  }
}

/** A reaction added or taken back, by anyone: the message is drawn again. */
function reacted(d: any, added: boolean) {
  withMessage(d.channel_id, d.message_id, (m) => {
    const list = (m.reactions ??= []);
    const key = emojiKey(d.emoji);
    let r = list.find((x) => emojiKey(x.emoji) === key);
    const mine = d.user_id === me?.id;
    if (added) {
      if (!r) list.push((r = { emoji: d.emoji, count: 0, me: false }));
      if (mine && r.me) return;
      r.count++;
      if (mine) r.me = true;
    } else if (r) {
      if (mine && !r.me) return;
      r.count--;
      if (mine) r.me = false;
      if (r.count <= 0) list.splice(list.indexOf(r), 1);
    }
  });
}

/** Changes a message the client holds and draws it again in place. */
function withMessage(cid: string, id: string, change: (m: Message) => void) {
  const m = histories.get(cid)?.items.find((x) => x.id === id) ?? pending.find((x) => x.id === id);
  if (!m) return;
  change(m);
  const el = document.getElementById(`m-${id}`);
  if (el && !el.classList.contains("editing")) el.replaceWith(messageEl(m));
}

/** The quick picker under a message's React button. */
function openPicker(li: HTMLElement, button: HTMLElement) {
  document.querySelector(".emoji-picker")?.remove();
  document.querySelector(".chunk.raised")?.classList.remove("raised");
  const m = history(channelId!).items.find((x) => x.id === li.dataset.id);
  if (!m) return;
  // Its chunk above the next ones, which would paint over the picker.
  const chunk = li.closest(".chunk");
  const close = () => {
    picker.remove();
    chunk?.classList.remove("raised");
    document.removeEventListener("keydown", onKey);
  };
  const onKey = (e: KeyboardEvent) => {
    if (e.key === "Escape") {
      close();
      button.focus();
    }
  };
  const picker = h(
    "div",
    { class: "emoji-picker", role: "menu", "aria-label": "Pick a reaction" },
    QUICK_EMOJIS.map((e) =>
      h(
        "button",
        {
          type: "button",
          role: "menuitem",
          "aria-label": `React with ${e}`,
          onclick: () => {
            close();
            const has = m.reactions?.find((r) => !r.emoji.id && r.emoji.name === e);
            if (!has?.me) toggleReaction(m, { id: null, name: e }, true);
          },
        },
        e,
      ),
    ),
    h(
      "button",
      {
        type: "button",
        role: "menuitem",
        class: "more",
        "aria-label": "More emojis",
        title: "More emojis",
        onclick: () => {
          close();
          openEmojiPicker(button, "Pick a reaction", openEmojis(), (e) => {
            const emoji = e.custom ? { id: e.custom.id, name: e.custom.name, animated: e.custom.animated } : { id: null, name: e.unicode! };
            const has = m.reactions?.find((r) => emojiKey(r.emoji) === emojiKey(emoji));
            if (!has?.me) toggleReaction(m, emoji, true);
          });
        },
      },
      "+",
    ),
  );
  document.addEventListener("keydown", onKey);
  chunk?.classList.add("raised");
  li.appendChild(picker);
  (picker.querySelector("button") as HTMLButtonElement | null)?.focus();
}

let pending: Message[] = [];
let flushFrame = 0;

/** Where the message list is scrolled, as of its last scroll event (read
 *  there, before anything is drawn in that frame) or the client's own last
 *  scroll. What draws messages decides from this and never reads the
 *  layout it has just changed: a read after a write is a layout forced in
 *  the middle of the frame. */
const view = { top: 0, height: 0, client: 0 };

function measure() {
  const ol = $("messages");
  view.top = ol.scrollTop;
  view.height = ol.scrollHeight;
  view.client = ol.clientHeight;
  // Reading at the newest, the list follows new messages by itself: the
  // chunks stop being anchors and the end marker is one (app.css).
  ol.classList.toggle("pinned", atBottom() && !detached());
}

/** The reader is at the bottom of what is drawn (within 40 px). */
function atBottom(): boolean {
  return view.height - view.top - view.client < 40;
}

/** To the newest drawn, now (a layout is read: for a channel opened, a
 *  jump, or a list too short to scroll, not for every frame). */
function scrollToEnd() {
  const ol = $("messages");
  ol.scrollTop = ol.scrollHeight;
  measure();
}

/** A thread made or changed: kept, and its starter message and the open
 *  list drawn again. */
function threadChanged(t: Thread) {
  const known = threads.get(t.id);
  // Counts kept here from MESSAGE_CREATE may be ahead of the event's: the
  // pair (count, newest id) that has seen more wins.
  if (known?.last_message_id && (!t.last_message_id || cmpId(known.last_message_id, t.last_message_id) > 0)) {
    t.message_count = known.message_count;
    t.last_message_id = known.last_message_id;
  }
  threads.set(t.id, t);
  withMessage(t.parent_id, t.id, () => undefined);
  if (threadPanel.listOf === t.parent_id) threadPanel.showList(t.parent_id, [...threads.values()]);
}

/** Starts a thread from message `id` of the open channel, named by the person. */
function startThread(id: string) {
  const cid = channelId!;
  const m = history(cid).items.find((x) => x.id === id);
  const suggested = (m?.content ?? "").replace(/\s+/g, " ").slice(0, 40).trim() || "thread";
  ask("Start a thread", "Thread name", suggested, async (name) => {
    if (!name) return "Give it a name.";
    const t = threadOf({ ...(await api.post(`/channels/${cid}/messages/${id}/threads`, { name })), guild_id: guildId });
    threadChanged(t);
    threadPanel.open(t);
  });
}

function messageCreate(m: Message) {
  const t = threads.get(m.channel_id);
  if (t) {
    // The thread's count and newest id go together (the server moves both
    // when it takes a message): only a newer message adds one.
    if (!t.last_message_id || cmpId(m.id, t.last_message_id) > 0) {
      t.message_count++;
      t.last_message_id = m.id;
    }
    threadPanel.add(m);
    withMessage(t.parent_id, t.id, () => undefined);
    return;
  }
  const c = channels.get(m.channel_id);
  if (!c) {
    // A DM this client has not seen yet: its channel first.
    if (!(m as any).guild_id)
      api
        .get(`/channels/${m.channel_id}`)
        .then((d) => {
          // A thread this client did not know (archived, say): kept, then the message.
          if (d?.guild_id && [10, 11, 12].includes(d.type)) {
            threads.set(d.id, threadOf(d));
            return messageCreate(m);
          }
          if (d?.guild_id) return;
          addDm(d);
          messageCreate(m);
        })
        .catch(() => undefined);
    return;
  }
  if (!c.last_message_id || cmpId(m.id, c.last_message_id) > 0) c.last_message_id = m.id;
  names.set(m.author.id, m.author.global_name || m.author.username);
  typing.get(m.channel_id)?.delete(m.author.id);
  const hist = history(m.channel_id);
  if (hist.items.some((x) => x.id === m.id) || pending.some((x) => x.id === m.id)) return;
  if (m.author.id === me?.id) read[m.channel_id] = m.id;
  else if (m.channel_id !== channelId || !atBottom()) {
    if (c.guild_id === HOME) dmCounts.set(c.id, (dmCounts.get(c.id) ?? 0) + 1);
    else if (mentionsMe(m)) mentionCounts.set(c.id, (mentionCounts.get(c.id) ?? 0) + 1);
  }
  notify(m, c);
  if (!hist.loaded) {
    if (m.channel_id !== channelId) {
      renderUnread(c);
      return;
    }
  }
  if (m.channel_id === channelId) {
    pending.push(m);
    if (!flushFrame) flushFrame = requestAnimationFrame(flush);
  } else {
    hist.items.push(m);
    if (hist.items.length > KEEP) {
      hist.items.splice(0, hist.items.length - KEEP);
      hist.hasMore = true;
    }
    renderUnread(c);
  }
  renderTyping();
}

/** A large server this client does not have open (the server keeps the
 *  session passive there) names its channels with new messages: they show
 *  unread, and a history kept from before is read again when opened. */
function passiveUpdate(d: any) {
  for (const u of d.channels ?? []) {
    const c = channels.get(u.id);
    if (!c || !u.last_message_id || (c.last_message_id && cmpId(u.last_message_id, c.last_message_id) <= 0)) continue;
    c.last_message_id = u.last_message_id;
    histories.delete(c.id);
    // The open channel itself (its server opened here, the op 14 saying so
    // not yet taken): read again from the server now, not only when opened.
    if (c.id === channelId) loadHistory(c.id, true);
    renderUnread(c);
  }
}

/// Appends the messages of one frame at once (50 messages/s stay one layout per frame).
function flush() {
  flushFrame = 0;
  const batch = pending;
  pending = [];
  const stick = atBottom();
  const entries: Node[][] = [];
  for (const m of batch) {
    if (m.channel_id !== channelId) continue;
    const hist = history(m.channel_id);
    if (hist.items.some((x) => x.id === m.id)) continue;
    const prev = hist.items[hist.items.length - 1];
    if ((!stick || shownTo < hist.items.length) && m.author.id !== me?.id) {
      arrivedAbove++;
      // Read up to here: the line goes before the first one not seen.
      if (!newSince.has(m.channel_id) && prev) newSince.set(m.channel_id, prev.id);
    }
    // Drawn only when the newest are on the page; otherwise kept for later.
    const drawn = shownTo === hist.items.length;
    hist.items.push(m);
    if (drawn) {
      entries.push(entry(m, prev));
      shownTo = hist.items.length;
    }
  }
  list.append(entries);
  const hist = channelId ? history(channelId) : null;
  // Reading at the bottom, the channel keeps its newest KEEP: the new
  // first message heads its run under a date line (only it is drawn again).
  if (hist && stick && !detached() && hist.items.length > KEEP) dropOldest(hist, hist.items.length - KEEP);
  // At the bottom the list stays there by itself (scroll anchoring), unless
  // it was too short to scroll, not quite at the end, or not yet pinned there.
  if (stick && !detached() && (view.top === 0 || view.height - view.top - view.client > 1 || !$("messages").classList.contains("pinned"))) scrollToEnd();
  markRead();
  // At the bottom with the newest drawn the bar has nothing to say.
  if (stick && !detached()) {
    arrivedAbove = 0;
    if (!$("jump-present").hidden) renderJump();
  } else renderJump();
}

function renderUnread(c: Channel) {
  if (c.guild_id === guildId) renderChannels();
  if (c.guild_id === HOME) document.title = titleWithUnread();
  renderGuilds();
}

/** READY's read states: each channel's mark, and the mentions (and, in
 *  DMs, messages) that arrived since. A new READY replaces them all. */
function readStates(rs: any) {
  if (!rs?.entries) return;
  read = {};
  mentionCounts.clear();
  dmCounts.clear();
  for (const e of rs.entries) {
    if (e.last_message_id && e.last_message_id !== "0") read[e.id] = e.last_message_id;
    // The server counts a DM's every message from the other side as a
    // mention: that is the DM's badge; elsewhere it is the mention badge.
    if (e.mention_count > 0) {
      mentionCounts.set(e.id, e.mention_count);
      dmCounts.set(e.id, e.mention_count);
    }
  }
  // The channels arrive after READY, so which map is meant is not known
  // yet: both get it, and each is only read for its own kind of channel.
}

/** MESSAGE_ACK: this user read a channel (here, or in another tab). */
function acked(d: any) {
  const c = channels.get(d.channel_id);
  if (d.manual) {
    read[d.channel_id] = d.message_id;
    if (c?.guild_id === HOME) dmCounts.set(d.channel_id, d.mention_count ?? 0);
    else mentionCounts.set(d.channel_id, d.mention_count ?? 0);
  } else {
    if (read[d.channel_id] && cmpId(d.message_id, read[d.channel_id]) <= 0) return;
    read[d.channel_id] = d.message_id;
    // Mentions up to the mark are read; any newer keep their count (the
    // server's count starts again from the ack).
    if (!c?.last_message_id || cmpId(c.last_message_id, d.message_id) <= 0) {
      mentionCounts.delete(d.channel_id);
      dmCounts.delete(d.channel_id);
    }
  }
  if (c) renderUnread(c);
}

function markRead() {
  if (!channelId || !me || detached()) return;
  const c = channels.get(channelId);
  if (!c?.last_message_id || !atBottom()) return;
  // Both maps may hold it (READY's counts go to both).
  const hadDm = dmCounts.delete(c.id);
  const hadCounts = mentionCounts.delete(c.id) || hadDm;
  if (read[c.id] && cmpId(read[c.id], c.last_message_id) >= 0) {
    if (hadCounts) renderUnread(c);
    return;
  }
  read[c.id] = c.last_message_id;
  ackWanted.set(c.id, c.last_message_id);
  if (!ackTimer) ackTimer = window.setTimeout(sendAcks, ACK_EVERY);
  // Read as it arrives (every frame of a busy channel): the sidebar and the
  // rail are drawn again only if they showed it unread.
  if (hadCounts || showsUnread(c)) renderUnread(c);
}

/** Whether the sidebar or the rail shows `c` as unread: its link, or its
 *  server's (or the DMs') button. */
function showsUnread(c: Channel): boolean {
  const link = $("channel-list").querySelector(`[data-channel-id="${CSS.escape(c.id)}"]`);
  if (!link || link.classList.contains("unread") || link.querySelector(".badge")) return true;
  const button = c.guild_id === HOME ? $("home").querySelector(".round") : $("guild-list").querySelector(".round.current");
  return !button || button.classList.contains("unread") || !!button.querySelector(".badge");
}

/** Sends the waiting acks (`POST /channels/{c}/messages/{m}/ack`): the
 *  server keeps the mark for every session of this user. */
function sendAcks() {
  ackTimer = 0;
  const batch = [...ackWanted];
  ackWanted.clear();
  for (const [cid, mid] of batch) {
    api.post(`/channels/${cid}/messages/${mid}/ack`, { token: null }).catch((err) => {
      // Kept for the next round unless the channel is gone or newer is waiting.
      if (err instanceof ApiError && err.status < 500) return;
      if (!ackWanted.has(cid)) ackWanted.set(cid, mid);
      if (!ackTimer) ackTimer = window.setTimeout(sendAcks, 5 * ACK_EVERY);
    });
  }
}

function messageUpdate(d: any) {
  const hist = histories.get(d.channel_id);
  // A message still waiting for its frame (`pending`) is updated there: it
  // is drawn from that object when the frame comes.
  const m = hist?.items.find((x) => x.id === d.id) ?? pending.find((x) => x.id === d.id);
  if (!m) return;
  if (d.content !== undefined) m.content = d.content;
  m.edited_timestamp = d.edited_timestamp ?? m.edited_timestamp;
  if (d.flags !== undefined) m.flags = d.flags;
  if (d.components !== undefined) m.components = d.components;
  const el = document.getElementById(`m-${d.id}`);
  if (el && !el.classList.contains("editing")) el.replaceWith(messageEl(m));
}

function messageDelete(cid: string, id: string) {
  const hist = histories.get(cid);
  const at = hist ? hist.items.findIndex((m) => m.id === id) : -1;
  if (hist && at >= 0) hist.items.splice(at, 1);
  pending = pending.filter((m) => m.id !== id);
  const el = document.getElementById(`m-${id}`);
  if (cid === channelId && hist && at >= 0 && at < shownTo) shownTo--;
  if (!el) return;
  list.remove(el);
  // The one after it may head its run (or join the one before) now, and
  // takes the date line or "New messages" line it had: drawn again in place.
  const next = hist && at >= 0 && cid === channelId ? hist.items[at] : undefined;
  const nextEl = next && document.getElementById(`m-${next.id}`);
  if (nextEl) list.replace(nextEl, entry(next, hist!.items[at - 1]));
}

async function send(e: Event) {
  e.preventDefault();
  const input = $<HTMLTextAreaElement>("input");
  const content = input.value.trim();
  if ((!content && !tray.count) || !channelId) return;
  if (content.startsWith("/") && commands && !tray.count) {
    const r = await commands.submit(content);
    if (r === "invalid") return;
    if (r === "sent") {
      input.value = "";
      autosize(input);
      return;
    }
  }
  const files = tray.take();
  const text = mentionPicker ? mentionPicker.encode(content) : content;
  mentionPicker?.reset();
  input.value = "";
  autosize(input);
  lastTypingSent = 0;
  const path = `/channels/${channelId}/messages`;
  // Sends leave one after another, in the order typed, each with its own
  // nonce and `enforce_nonce`: a send that meets a lost connection or a 5xx
  // (a node failing over) goes again as the same message, never twice.
  const body: any = { content: text, nonce: newNonce(), enforce_nonce: true };
  if (replyTo && replyTo.channel_id === channelId) body.message_reference = { message_id: replyTo.id };
  replyTo = null;
  renderReplyBar();
  const post = files.length
    ? () => postWithFiles(api.token, path, body, files, (p) => tray.setProgress(p))
    : () => api.post(path, body);
  const sent = sendQueue.then(() => withRetry(post));
  sendQueue = sent.catch(() => undefined);
  try {
    messageCreate(await sent);
  } catch (err) {
    // Back into the composer only if it is empty: never over a new draft.
    if (!input.value && !tray.count) {
      input.value = content;
      autosize(input);
      if (files.length) tray.add(files);
    }
    flashError(err);
  } finally {
    if (files.length) tray.setProgress(null);
  }
}

/** The tail of the sends in flight (see `send`). */
let sendQueue: Promise<unknown> = Promise.resolve();

/** A nonce Discord accepts (at most 25 characters), unique per send. */
function newNonce(): string {
  return `${Date.now()}${Math.floor(Math.random() * 1e6)}`;
}

/** Runs `post`, again on a lost connection or a 5xx (for up to 30 s, backing off). */
async function withRetry(post: () => Promise<any>): Promise<any> {
  const deadline = Date.now() + 30_000;
  for (let wait = 250; ; wait = Math.min(wait * 2, 4_000)) {
    try {
      return await post();
    } catch (err) {
      const again = !(err instanceof ApiError) || err.status >= 500;
      if (!again || Date.now() + wait > deadline) throw err;
      await new Promise((r) => setTimeout(r, wait));
    }
  }
}

function flashError(err: unknown) {
  const el = $("link-state");
  el.textContent = err instanceof Error ? err.message : String(err);
  setTimeout(() => linkState(gw?.state ?? "closed"), 4000);
}

function startEdit(li: HTMLElement) {
  const id = li.dataset.id!;
  const m = history(channelId!).items.find((x) => x.id === id);
  if (!m || li.classList.contains("editing")) return;
  li.classList.add("editing");
  const box = li.querySelector(".content") as HTMLElement;
  const ta = h("textarea", { class: "edit-box", "aria-label": "Edit message (Enter saves, Escape cancels)" });
  ta.value = m.content;
  clear(box, ta);
  // As tall as the text (up to 40% of the window), and in view.
  autosize(ta);
  ta.addEventListener("input", () => autosize(ta));
  ta.scrollIntoView({ block: "nearest" });
  ta.focus();
  const done = () => li.replaceWith(messageEl(m));
  ta.onkeydown = async (e) => {
    if (e.key === "Escape") {
      e.preventDefault();
      done();
    } else if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      const content = ta.value.trim();
      if (!content || content === m.content) return done();
      try {
        const r = await api.patch(`/channels/${m.channel_id}/messages/${m.id}`, { content });
        m.content = r.content;
        m.edited_timestamp = r.edited_timestamp;
        done();
      } catch (err) {
        flashError(err);
      }
    }
  };
}

// ---------- typing ----------

function typingStart(d: any) {
  if (d.user_id === me?.id) return;
  if (d.member?.user) names.set(d.user_id, displayName(d.member));
  let t = typing.get(d.channel_id);
  if (!t) typing.set(d.channel_id, (t = new Map()));
  t.set(d.user_id, Date.now() + 10_000);
  renderTyping();
  setTimeout(renderTyping, 10_100);
}

function renderTyping() {
  const el = $("typing");
  const t = channelId ? typing.get(channelId) : null;
  const now = Date.now();
  const who: string[] = [];
  for (const [u, until] of t ?? []) {
    if (until < now) t!.delete(u);
    else who.push(names.get(u) ?? "Someone");
  }
  el.textContent = !who.length ? "" : who.length === 1 ? `${who[0]} is typing…` : who.length < 4 ? `${who.join(", ")} are typing…` : "Several people are typing…";
}

/** Grows a textarea with its text, up to 40% of the window (then it
 *  scrolls); set through the CSSOM, which the page's policy allows. */
function autosize(ta: HTMLTextAreaElement) {
  ta.style.height = "auto";
  ta.style.height = `${Math.min(ta.scrollHeight + 2, Math.round(window.innerHeight * 0.4))}px`;
}

function typed() {
  if (!channelId) return;
  const now = Date.now();
  if (now - lastTypingSent < 8000) return;
  lastTypingSent = now;
  api.post(`/channels/${channelId}/typing`).catch(() => {});
}

// ---------- dialogs ----------

function ask(title: string, label: string, value = "", action: (v: string) => Promise<string | void>, readonly = false): void {
  const dlg = $<HTMLDialogElement>("dlg");
  $("dlg-title").textContent = title;
  $("dlg-label").textContent = label;
  const input = $<HTMLInputElement>("dlg-input");
  input.value = value;
  input.readOnly = readonly;
  $("dlg-error").textContent = "";
  $("dlg-ok").textContent = readonly ? "Copy" : "OK";
  $("dlg-cancel").textContent = readonly ? "Close" : "Cancel";
  $("dlg-form").onsubmit = async (e) => {
    e.preventDefault();
    try {
      const err = await action(input.value.trim());
      if (err) $("dlg-error").textContent = err;
      else if (!readonly) dlg.close();
    } catch (x) {
      $("dlg-error").textContent = x instanceof Error ? x.message : String(x);
    }
  };
  $("dlg-cancel").onclick = () => dlg.close();
  dlg.showModal();
  input.select();
}

function inviteCode(v: string): string {
  const m = v.match(/invite\/([A-Za-z0-9-]+)/);
  return m ? m[1] : v.trim();
}

async function joinInvite(code: string) {
  const inv = await api.post(`/invites/${encodeURIComponent(code)}`);
  const gid = inv?.guild?.id ?? inv?.guild_id;
  if (gid) {
    if (guilds.has(gid)) selectGuild(gid);
    else pendingGuild = gid;
  }
}

function openNav() {
  document.body.classList.add("nav-open");
  $("show-nav").setAttribute("aria-expanded", "true");
}
function closeNav() {
  document.body.classList.remove("nav-open");
  $("show-nav").setAttribute("aria-expanded", "false");
}

function interactionState(text: string, kind: "info" | "error" | "") {
  const el = $("interaction-state");
  el.textContent = text;
  el.className = `interaction-state ${kind}`;
}

function wire() {
  // Before the composer's own key handler: the picker takes Enter first.
  commands = new Commands(
    {
      api,
      sessionId: () => gw?.sessionId ?? null,
      where: () => ({ guild: guildId === HOME ? null : guildId, channel: channelId }),
      status: interactionState,
      choices: (kind, types) => {
        const g = guildId ? guilds.get(guildId) : undefined;
        if (!g) return [];
        if (kind === "roles") return [...g.roles].filter(([id]) => id !== g.id).map(([value, label]) => ({ value, label }));
        if (kind === "channels")
          return g.channels
            .map((id) => channels.get(id)!)
            .filter((c) => c && (!types?.length || types.includes(c.type)))
            .map((c) => ({ value: c.id, label: `#${c.name}` }));
        return [...names].map(([value, label]) => ({ value, label }));
      },
    },
    $("cmd-picker"),
    $<HTMLTextAreaElement>("input"),
    $<HTMLDialogElement>("modal"),
  );
  mentionPicker = new MentionPicker(
    {
      api,
      guild: () => (guildId && guildId !== HOME ? guildId : null),
      roles: (g) => [...(guilds.get(g)?.roles ?? [])].map(([id, name]) => ({ id, name })),
      channels: guildTextChannels,
      people: () => [],
      emojis: openEmojis,
    },
    $("mention-picker"),
    $<HTMLTextAreaElement>("input"),
  );
  // Before the composer's own keys: the open list takes Enter first;
  // Escape then drops a reply.
  $<HTMLTextAreaElement>("input").addEventListener("keydown", (e) => {
    if (mentionPicker?.key(e)) return;
    if (e.key === "Escape" && replyTo) {
      replyTo = null;
      renderReplyBar();
    }
  });
  $<HTMLFormElement>("auth-form").addEventListener("submit", authSubmit);
  $("logout").onclick = () => logout();
  $<HTMLFormElement>("composer").addEventListener("submit", send);
  const input = $<HTMLTextAreaElement>("input");
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.defaultPrevented) send(e);
    else if (e.key === "ArrowUp" && !input.value) {
      const mine = [...$("messages").querySelectorAll<HTMLElement>(".message")].reverse().find((li) => li.querySelector(".edit"));
      if (mine) {
        e.preventDefault();
        startEdit(mine);
      }
    }
  });
  input.addEventListener("input", typed);
  input.addEventListener("input", () => autosize(input));
  // Files: the button, a drop anywhere on the conversation, a paste.
  const picker = $<HTMLInputElement>("file");
  $("attach").onclick = () => picker.click();
  $("emoji").onclick = () =>
    openEmojiPicker($("emoji"), "Pick an emoji", openEmojis(), (e) => {
      const input = $<HTMLTextAreaElement>("input");
      if (e.custom) mentionPicker?.insert({ label: `:${e.name}:`, text: `:${e.name}:`, syntax: emojiText(e), kind: "emoji" });
      else {
        const at = input.selectionStart ?? input.value.length;
        input.value = input.value.slice(0, at) + e.unicode + input.value.slice(input.selectionEnd ?? at);
        input.setSelectionRange(at + e.unicode!.length, at + e.unicode!.length);
        input.dispatchEvent(new Event("input"));
      }
      input.focus();
    });
  picker.addEventListener("change", () => {
    if (picker.files?.length) tray.add(picker.files);
    picker.value = "";
  });
  const chat = document.querySelector<HTMLElement>("main.chat")!;
  const carriesFiles = (e: DragEvent) => !!channelId && !!e.dataTransfer?.types.includes("Files");
  chat.addEventListener("dragover", (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    chat.classList.add("drop-target");
  });
  chat.addEventListener("dragleave", (e) => {
    if (!chat.contains(e.relatedTarget as Node | null)) chat.classList.remove("drop-target");
  });
  chat.addEventListener("drop", (e) => {
    chat.classList.remove("drop-target");
    if (!carriesFiles(e)) return;
    e.preventDefault();
    tray.add(e.dataTransfer!.files);
    input.focus();
  });
  input.addEventListener("paste", (e) => {
    const files = e.clipboardData?.files;
    if (!files?.length) return;
    e.preventDefault();
    tray.add(files);
  });
  // A click on a name (an author, a member): their profile; elsewhere closes it.
  document.addEventListener("click", (e) => {
    const t = e.target as HTMLElement;
    const who = t.closest<HTMLElement>(".author[data-uid], .mrow.member[data-user-id]");
    if (who) openProfile(who.dataset.uid ?? who.dataset.userId!, { x: e.clientX, y: e.clientY });
    else if (profileEl && !profileEl.contains(t)) closeProfile();
  });
  // Right click: the "Apps" menu of a user (an author, a member) or a message.
  document.addEventListener("contextmenu", (e) => {
    const t = e.target as HTMLElement;
    const user = t.closest<HTMLElement>(".author[data-uid], [data-user-id]");
    const msg = t.closest<HTMLElement>(".message");
    const shown = user
      ? commands?.contextMenu(2, user.dataset.uid ?? user.dataset.userId!, e.clientX, e.clientY)
      : msg?.dataset.id && commands?.contextMenu(3, msg.dataset.id, e.clientX, e.clientY);
    if (shown) e.preventDefault();
  });
  const ol = $("messages");
  // The one place the list's layout is read as one scrolls: first thing
  // in the frame, before anything is drawn in it.
  ol.addEventListener("scroll", () => {
    measure();
    if (view.top < 200 && channelId && history(channelId).loaded) loadHistory(channelId, false);
    else if (channelId && detached() && view.height - view.top - view.client < 600) drawNewer();
    markRead();
    renderJump();
  });
  // The list made shorter or taller (the window, the composer growing):
  // reading at the newest, it stays there.
  new ResizeObserver(() => {
    if (channelId && $("messages").classList.contains("pinned")) scrollToEnd();
  }).observe(ol);
  $("jump").addEventListener("click", jumpToPresent);
  // A reload or a closed tab right after reading: the waiting acks go now.
  window.addEventListener("pagehide", () => {
    clearTimeout(ackTimer);
    ackTimer = 0;
    for (const [cid, mid] of ackWanted) api.beacon("POST", `/channels/${cid}/messages/${mid}/ack`, { token: null });
    ackWanted.clear();
  });
  ol.addEventListener("click", async (e) => {
    const b = (e.target as HTMLElement).closest("button");
    const li = b?.closest<HTMLElement>(".message");
    if (!b || !li) return;
    if (b.classList.contains("react")) openPicker(li, b);
    else if (b.classList.contains("reply")) startReply(li.dataset.id!);
    else if (b.classList.contains("thread")) startThread(li.dataset.id!);
    else if (b.classList.contains("thread-link")) {
      const t = threads.get(li.dataset.id!);
      if (t) threadPanel.open(t);
    }
    else if (b.classList.contains("pin") || b.classList.contains("unpin")) setPinned(li.dataset.id!, b.classList.contains("pin"));
    else if (b.classList.contains("edit")) startEdit(li);
    else if (b.classList.contains("delete")) {
      try {
        await api.del(`/channels/${channelId}/messages/${li.dataset.id}`);
        messageDelete(channelId!, li.dataset.id!);
      } catch (err) {
        flashError(err);
      }
    }
  });
  $("add-guild").onclick = () =>
    ask("Create a server", "Server name", "", async (name) => {
      if (!name) return "Give it a name.";
      const g = await api.post("/guilds", { name });
      if (guilds.has(g.id)) selectGuild(g.id);
      else pendingGuild = g.id;
      closeNav();
    });
  $("join-guild").onclick = () =>
    ask("Join a server", "Invite link or code", "", async (v) => {
      if (!v) return "Paste an invite.";
      await joinInvite(inviteCode(v));
      closeNav();
    });
  $("add-channel").onclick = () =>
    ask("Create a channel", "Channel name", "", async (name) => {
      if (!name || !guildId) return "Give it a name.";
      const c = await api.post(`/guilds/${guildId}/channels`, { name: name.toLowerCase().replace(/\s+/g, "-"), type: 0 });
      addChannel(c);
      selectChannel(c.id);
      closeNav();
    });
  $("invite").onclick = async () => {
    if (!channelId) return;
    try {
      const inv = await api.post(`/channels/${channelId}/invites`, { max_age: 604800 });
      const link = `${location.origin}/#/invite/${inv.code}`;
      ask("Invite people", "Share this link", link, async (v) => {
        await navigator.clipboard?.writeText(v).catch(() => {});
        $("dlg-error").textContent = "Copied.";
      }, true);
    } catch (err) {
      flashError(err);
    }
  };
  $<HTMLFormElement>("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $<HTMLInputElement>("search").value.trim();
    if (guildId && guildId !== HOME && text) search.run(guildId, text);
  });
  $("account").onclick = () => account.open();
  $("show-pins").onclick = () => channelId && openPins(channelId);
  $("show-threads").onclick = () => channelId && threadPanel.showList(channelId, [...threads.values()]);
  $("mute-channel").onclick = () => channelId && setMuted(channelId, !muted.has(channelId));
  $("mute-guild").onclick = () => guildId && guildId !== HOME && setMuted(guildId, !muted.has(guildId));
  $("notify").onclick = async () => {
    if (!("Notification" in window)) return;
    const on = Notification.permission === "granted" && localStorage.getItem("throng.notify") !== "off";
    if (on) localStorage.setItem("throng.notify", "off");
    else {
      localStorage.removeItem("throng.notify");
      if (Notification.permission !== "granted") await Notification.requestPermission();
    }
    renderNotify();
  };
  $("guild-settings").onclick = () => guildId && guildId !== HOME && settings.open(guildId);
  $("show-nav").onclick = () => (document.body.classList.contains("nav-open") ? closeNav() : openNav());
  const showMembers = (show: boolean) => {
    document.body.classList.toggle("members-hidden", !show);
    $("show-members").setAttribute("aria-expanded", String(show));
  };
  $("show-members").onclick = () => showMembers(document.body.classList.contains("members-hidden"));
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      closeNav();
      account.close();
      settings.close();
      closeProfile();
      if (document.body.classList.contains("searching")) search.close();
      // At phone width the member list covers the chat: Escape closes it too.
      if (window.matchMedia("(max-width: 800px)").matches && !document.body.classList.contains("members-hidden")) showMembers(false);
    }
    // Alt+ArrowUp / Alt+ArrowDown: previous / next channel.
    if (e.altKey && (e.key === "ArrowUp" || e.key === "ArrowDown") && guildId) {
      const list = textChannels(guilds.get(guildId)!);
      const i = list.indexOf(channelId ?? "");
      const next = list[(i + (e.key === "ArrowUp" ? -1 : 1) + list.length) % list.length];
      if (next) {
        e.preventDefault();
        selectChannel(next);
      }
    }
  });
  document.addEventListener("visibilitychange", markRead);
  setInterval(renderTyping, 2000);
}

async function main() {
  if (window.matchMedia("(max-width: 800px)").matches) {
    document.body.classList.add("members-hidden");
    $("show-members").setAttribute("aria-expanded", "false");
  }
  wire();
  loadLimits().then(() => tray.render());
  const token = localStorage.getItem(TOKEN_KEY);
  const invite = location.hash.match(/^#\/invite\/([A-Za-z0-9-]+)/)?.[1];
  if (!token) {
    showAuth();
    if (invite) $("auth-error").textContent = "Log in or register to accept the invite.";
    // After logging in, start() shows the consent page: the address stays.
    else if (isAuthorizePage()) $("auth-error").textContent = "Log in or register to add the bot.";
  } else {
    await start(token);
  }
  const offerInvite = () => {
    const code = location.hash.match(/^#\/invite\/([A-Za-z0-9-]+)/)?.[1];
    if (!code || !api.token) return;
    history_replace();
    ask("Accept the invite?", "Invite code", code, async (v) => {
      await joinInvite(inviteCode(v));
    });
  };
  window.addEventListener("hashchange", offerInvite);
  // An address edited by hand (or a link followed) to a channel.
  window.addEventListener("hashchange", () => {
    const r = routeOf(location.hash);
    if (!r) return;
    if (guilds.has(r.guild) && r.channel && r.message) jumpTo(r.channel, r.message);
    else if (guilds.has(r.guild) && (r.guild !== guildId || (r.channel && r.channel !== channelId))) selectGuild(r.guild, r.channel);
    // Not a server of theirs (or no such channel): the address shows what is open.
    else showRoute(channelId ? channels.get(channelId) : null);
  });
  if (invite && token) offerInvite();
  else if (invite) {
    const once = () => {
      if (api.token && gw) {
        document.removeEventListener("throng-started", once);
        offerInvite();
      }
    };
    document.addEventListener("throng-started", once);
  }
}

function history_replace() {
  window.history.replaceState(null, "", location.pathname);
}

// Hooks for the browser tests and benchmarks.
(window as any).__throng = {
  stats: () => ({
    state: gw?.state ?? "closed",
    identifies: gw?.identifies ?? 0,
    resumes: gw?.resumes ?? 0,
    heldRows: members.held(),
    maxHeldRows: members.maxHeld,
    listSyncs: members.syncs,
    received: Object.fromEntries(received),
  }),
  rows: () => members.snapshot(),
  drop: () => gw?.drop(),
  guild: () => guildId,
  channel: () => channelId,
};

main();
