//! The authorization matrix: every route the server registers and every
//! gateway path that hands out a guild's data, called by each kind of
//! caller, with the answer each must get. One table; a route added to the
//! router without its row fails `every_route_has_a_row`.
//!
//! Columns (callers):
//! - **owner** of the guild;
//! - **holder**: a member whose role grants exactly the row's permission;
//! - **member** without it (`@everyone` is cut down to viewing, reading
//!   history and sending, minus the row's permission);
//! - **outsider**: a user in no guild of the fixture;
//! - **bot**: a bot member without the permission; on REST its
//!   application's own routes are the difference (intents do not apply to
//!   REST), on the gateway it identifies without the intent the row needs;
//! - **no token**, **forged token** (a well-formed token with a wrong HMAC).
//!
//! Cells: `ok` (2xx; on the gateway: the dispatch arrives), `none` (gateway:
//! no such dispatch), an HTTP status (`401`, `404`, ...), a Discord JSON
//! error code (`50013`: 403 with that code; `10003`: 404 ...), or a gateway
//! close code (`4004`). Every cell runs against a fresh guild, so a
//! destructive call in one cell cannot change another.

use std::collections::{BTreeMap, BTreeSet};

use protocol::model::permission as p;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Who {
    Owner,
    Holder,
    Member,
    Outsider,
    Bot,
    NoToken,
    Forged,
}

const COLUMNS: [Who; 7] = [Who::Owner, Who::Holder, Who::Member, Who::Outsider, Who::Bot, Who::NoToken, Who::Forged];

/// One route (or gateway path): the permission its holder column gets and
/// the seven expected answers, in `COLUMNS` order.
struct Row {
    method: &'static str,
    path: &'static str,
    perm: u64,
    expect: &'static str,
    /// A page of the web client, at the server's root: its path may also
    /// be an API route's (`/oauth2/authorize`), which has a row of its own.
    page: bool,
}

const fn row(method: &'static str, path: &'static str, perm: u64, expect: &'static str) -> Row {
    Row { method, path, perm, expect, page: false }
}

/// A file of the web client: the same to everyone.
const fn page(path: &'static str) -> Row {
    Row { method: "GET", path, perm: ANY, expect: PUBLIC, page: true }
}

/// What `@everyone` keeps in every fixture guild (minus the row's
/// permission): enough to see and talk in the channel.
const EVERYONE_BASE: u64 = p::VIEW_CHANNEL | p::READ_MESSAGE_HISTORY | p::SEND_MESSAGES | p::SEND_MESSAGES_IN_THREADS;

const ANY: u64 = 0;

/// Public routes: every caller gets the same answer.
const PUBLIC: &str = "ok ok ok ok ok ok ok";
/// Routes of the caller's own account: any valid token.
const ANY_USER: &str = "ok ok ok ok ok 401 401";
/// A guild route any member may use.
const ANY_MEMBER: &str = "ok ok ok 50001 ok 401 401";
/// A guild route that needs the row's permission.
const NEEDS_PERM: &str = "ok ok 50013 50001 50013 401 401";
/// A route of the application whose bot is the bot column.
const APP_OWN: &str = "50001 50001 50001 50001 ok 401 401";
/// An application's own data: only a bot has one.
const BOT_ONLY: &str = "10002 10002 10002 10002 ok 401 401";
/// A person's own account (sessions, logout, consent): not a bot's.
const PEOPLE: &str = "ok ok ok ok 20001 401 401";

#[rustfmt::skip]
const ROWS: &[Row] = &[
    // Outside the API: the web client, health, metrics, files (a file by
    // the URL the API signed: `{filename}` keeps its query).
    page("/"),
    page("/app.js"),
    page("/app.css"),
    // The same files by the hashed names the page loads them by.
    page("/assets/{name}"),
    // The upload limits the client shows.
    page("/client.json"),
    // The page of a bot's invitation link (the client's; the API route of that path, under /api, is another row).
    page("/oauth2/authorize"),
    row("GET", "/health", ANY, PUBLIC),
    row("GET", "/ready", ANY, PUBLIC),
    row("GET", "/metrics", ANY, PUBLIC),
    row("GET", "/emojis/{file}", ANY, PUBLIC),
    row("GET", "/avatars/{user_id}/{file}", ANY, PUBLIC),
    row("GET", "/icons/{guild_id}/{file}", ANY, PUBLIC),
    row("GET", "/attachments/{channel_id}/{attachment_id}/{filename}", ANY, PUBLIC),
    // Pending uploads of interactions (tests/it/interactions.rs fetches one):
    // a message's file, even by its signed URL, is never served there.
    row("GET", "/ephemeral-attachments/{channel_id}/{attachment_id}/{filename}", ANY, "404 404 404 404 404 404 404"),
    // Accounts and the gateway's address.
    row("GET", "/gateway", ANY, PUBLIC),
    row("GET", "/openapi.json", ANY, PUBLIC),
    row("GET", "/docs", ANY, PUBLIC),
    row("GET", "/docs.js", ANY, PUBLIC),
    row("GET", "/docs.css", ANY, PUBLIC),
    row("GET", "/gateway/bot", ANY, ANY_USER),
    row("POST", "/auth/register", ANY, PUBLIC),
    row("POST", "/auth/login", ANY, PUBLIC),
    row("POST", "/auth/logout", ANY, PEOPLE),
    row("GET", "/auth/sessions", ANY, PEOPLE),
    row("POST", "/auth/sessions/logout", ANY, PEOPLE),
    // The ways into a guild: an invite (below), a bot authorized by a
    // person with MANAGE_GUILD, a bot adding a user who gave it a
    // `guilds.join` token (CREATE_INSTANT_INVITE; people add nobody).
    row("GET", "/oauth2/authorize", ANY, PEOPLE),
    row("POST", "/oauth2/authorize", p::MANAGE_GUILD, "ok ok 50013 50001 20001 401 401"),
    row("PUT", "/guilds/{guild_id}/members/{user_id}", p::CREATE_INSTANT_INVITE, "50013 50013 50013 50001 50013 401 401"),
    // The token endpoint takes client credentials, never a caller's token.
    row("POST", "/oauth2/token", ANY, "401 401 401 401 401 401 401"),
    row("PATCH", "/applications/@me", ANY, BOT_ONLY),
    row("POST", "/applications/@me/secret", ANY, BOT_ONLY),
    row("GET", "/users/@me", ANY, ANY_USER),
    row("PATCH", "/users/@me", ANY, ANY_USER),
    row("GET", "/users/@me/guilds", ANY, ANY_USER),
    // The owner cannot leave (transfer or delete instead).
    // Leaving a guild one is not in: Discord's Unknown Guild.
    row("DELETE", "/users/@me/guilds/{guild_id}", ANY, "50035 ok ok 10004 ok 401 401"),
    row("GET", "/users/{user_id}", ANY, ANY_USER),
    row("GET", "/oauth2/applications/@me", ANY, BOT_ONLY),
    row("GET", "/applications/@me", ANY, BOT_ONLY),
    row("GET", "/users/@me/channels", ANY, ANY_USER),
    row("POST", "/users/@me/channels", ANY, "ok ok ok 50007 ok 401 401"),
    // Guilds.
    row("POST", "/guilds", ANY, ANY_USER),
    row("GET", "/guilds/{guild_id}", ANY, ANY_MEMBER),
    row("PATCH", "/guilds/{guild_id}", p::MANAGE_GUILD, NEEDS_PERM),
    row("DELETE", "/guilds/{guild_id}", ANY, "ok 50013 50013 50001 50013 401 401"),
    row("GET", "/guilds/{guild_id}/channels", ANY, ANY_MEMBER),
    row("POST", "/guilds/{guild_id}/channels", p::MANAGE_CHANNELS, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/roles", ANY, ANY_MEMBER),
    row("POST", "/guilds/{guild_id}/roles", p::MANAGE_ROLES, NEEDS_PERM),
    row("PATCH", "/guilds/{guild_id}/roles", p::MANAGE_ROLES, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/roles/{role_id}", ANY, ANY_MEMBER),
    row("PATCH", "/guilds/{guild_id}/roles/{role_id}", p::MANAGE_ROLES, NEEDS_PERM),
    row("DELETE", "/guilds/{guild_id}/roles/{role_id}", p::MANAGE_ROLES, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/members", ANY, ANY_MEMBER),
    row("GET", "/guilds/{guild_id}/members/search", ANY, ANY_MEMBER),
    row("GET", "/guilds/{guild_id}/audit-logs", p::VIEW_AUDIT_LOG, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/messages/search", ANY, ANY_MEMBER),
    row("PATCH", "/guilds/{guild_id}/members/@me", p::CHANGE_NICKNAME, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/members/{user_id}", ANY, ANY_MEMBER),
    row("PATCH", "/guilds/{guild_id}/members/{user_id}", p::MANAGE_NICKNAMES, NEEDS_PERM),
    row("DELETE", "/guilds/{guild_id}/members/{user_id}", p::KICK_MEMBERS, NEEDS_PERM),
    row("PUT", "/guilds/{guild_id}/members/{user_id}/roles/{role_id}", p::MANAGE_ROLES, NEEDS_PERM),
    row("DELETE", "/guilds/{guild_id}/members/{user_id}/roles/{role_id}", p::MANAGE_ROLES, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/bans", p::BAN_MEMBERS, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/bans/{user_id}", p::BAN_MEMBERS, NEEDS_PERM),
    row("PUT", "/guilds/{guild_id}/bans/{user_id}", p::BAN_MEMBERS, NEEDS_PERM),
    row("DELETE", "/guilds/{guild_id}/bans/{user_id}", p::BAN_MEMBERS, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/emojis", ANY, ANY_MEMBER),
    row("POST", "/guilds/{guild_id}/emojis", p::MANAGE_GUILD_EXPRESSIONS, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/emojis/{emoji_id}", ANY, ANY_MEMBER),
    row("PATCH", "/guilds/{guild_id}/emojis/{emoji_id}", p::MANAGE_GUILD_EXPRESSIONS, NEEDS_PERM),
    row("DELETE", "/guilds/{guild_id}/emojis/{emoji_id}", p::MANAGE_GUILD_EXPRESSIONS, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/webhooks", p::MANAGE_WEBHOOKS, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/threads/active", ANY, ANY_MEMBER),
    // Features throng lacks: an empty list, to members, as any guild read.
    row("GET", "/guilds/{guild_id}/stickers", ANY, ANY_MEMBER),
    row("GET", "/guilds/{guild_id}/soundboard-sounds", ANY, ANY_MEMBER),
    // Channels, messages, invites.
    row("GET", "/channels/{channel_id}", ANY, ANY_MEMBER),
    row("PATCH", "/channels/{channel_id}", p::MANAGE_CHANNELS, NEEDS_PERM),
    row("DELETE", "/channels/{channel_id}", p::MANAGE_CHANNELS, NEEDS_PERM),
    row("GET", "/channels/{channel_id}/messages", ANY, ANY_MEMBER),
    row("GET", "/channels/{channel_id}/messages/search", ANY, ANY_MEMBER),
    row("POST", "/channels/{channel_id}/messages", p::SEND_MESSAGES, NEEDS_PERM),
    row("GET", "/channels/{channel_id}/messages/{message_id}", ANY, ANY_MEMBER),
    row("PATCH", "/channels/{channel_id}/messages/{message_id}", ANY, "ok 50005 50005 50001 50005 401 401"),
    row("DELETE", "/channels/{channel_id}/messages/{message_id}", p::MANAGE_MESSAGES, NEEDS_PERM),
    row("POST", "/channels/{channel_id}/typing", p::SEND_MESSAGES, NEEDS_PERM),
    // Read states: anyone who sees the channel marks it read.
    row("POST", "/channels/{channel_id}/messages/{message_id}/ack", ANY, ANY_MEMBER),
    row("POST", "/channels/{channel_id}/invites", p::CREATE_INSTANT_INVITE, NEEDS_PERM),
    row("GET", "/channels/{channel_id}/invites", p::MANAGE_CHANNELS, NEEDS_PERM),
    row("GET", "/guilds/{guild_id}/invites", p::MANAGE_GUILD, NEEDS_PERM),
    row("GET", "/invites/{code}", ANY, PUBLIC),
    row("POST", "/invites/{code}", ANY, "ok ok ok ok 20001 401 401"),
    row("DELETE", "/invites/{code}", p::MANAGE_CHANNELS, NEEDS_PERM),
    row("PUT", "/channels/{channel_id}/permissions/{overwrite_id}", p::MANAGE_ROLES, NEEDS_PERM),
    row("DELETE", "/channels/{channel_id}/permissions/{overwrite_id}", p::MANAGE_ROLES, NEEDS_PERM),
    // Reactions, pins, bulk delete.
    row("PUT", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/{user_id}", p::ADD_REACTIONS, NEEDS_PERM),
    row("DELETE", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/{user_id}", p::MANAGE_MESSAGES, NEEDS_PERM),
    row("GET", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}", ANY, ANY_MEMBER),
    row("DELETE", "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}", p::MANAGE_MESSAGES, NEEDS_PERM),
    row("DELETE", "/channels/{channel_id}/messages/{message_id}/reactions", p::MANAGE_MESSAGES, NEEDS_PERM),
    row("GET", "/channels/{channel_id}/messages/pins", ANY, ANY_MEMBER),
    row("PUT", "/channels/{channel_id}/messages/pins/{message_id}", p::PIN_MESSAGES, NEEDS_PERM),
    row("DELETE", "/channels/{channel_id}/messages/pins/{message_id}", p::PIN_MESSAGES, NEEDS_PERM),
    row("GET", "/channels/{channel_id}/pins", ANY, ANY_MEMBER),
    row("PUT", "/channels/{channel_id}/pins/{message_id}", p::PIN_MESSAGES, NEEDS_PERM),
    row("DELETE", "/channels/{channel_id}/pins/{message_id}", p::PIN_MESSAGES, NEEDS_PERM),
    row("POST", "/channels/{channel_id}/messages/bulk-delete", p::MANAGE_MESSAGES, NEEDS_PERM),
    // Webhooks.
    row("GET", "/channels/{channel_id}/webhooks", p::MANAGE_WEBHOOKS, NEEDS_PERM),
    row("POST", "/channels/{channel_id}/webhooks", p::MANAGE_WEBHOOKS, NEEDS_PERM),
    row("GET", "/webhooks/{webhook_id}", p::MANAGE_WEBHOOKS, NEEDS_PERM),
    row("PATCH", "/webhooks/{webhook_id}", p::MANAGE_WEBHOOKS, NEEDS_PERM),
    row("DELETE", "/webhooks/{webhook_id}", p::MANAGE_WEBHOOKS, NEEDS_PERM),
    row("GET", "/webhooks/{webhook_id}/{token}", ANY, PUBLIC),
    row("PATCH", "/webhooks/{webhook_id}/{token}", ANY, PUBLIC),
    row("DELETE", "/webhooks/{webhook_id}/{token}", ANY, PUBLIC),
    row("POST", "/webhooks/{webhook_id}/{token}", ANY, PUBLIC),
    // Threads.
    row("POST", "/channels/{channel_id}/messages/{message_id}/threads", p::CREATE_PUBLIC_THREADS, NEEDS_PERM),
    row("POST", "/channels/{channel_id}/threads", p::CREATE_PUBLIC_THREADS, NEEDS_PERM),
    row("GET", "/channels/{channel_id}/threads/archived/public", ANY, ANY_MEMBER),
    row("GET", "/channels/{channel_id}/threads/archived/private", p::MANAGE_THREADS, NEEDS_PERM),
    row("GET", "/channels/{thread_id}/thread-members", ANY, ANY_MEMBER),
    row("GET", "/channels/{thread_id}/thread-members/{user_id}", ANY, ANY_MEMBER),
    row("PUT", "/channels/{thread_id}/thread-members/{user_id}", ANY, ANY_MEMBER),
    row("DELETE", "/channels/{thread_id}/thread-members/{user_id}", p::MANAGE_THREADS, NEEDS_PERM),
    // Application commands: only the application's own bot.
    row("GET", "/applications/{app_id}/commands", ANY, APP_OWN),
    row("POST", "/applications/{app_id}/commands", ANY, APP_OWN),
    row("PUT", "/applications/{app_id}/commands", ANY, APP_OWN),
    row("GET", "/applications/{app_id}/commands/{command_id}", ANY, APP_OWN),
    row("PATCH", "/applications/{app_id}/commands/{command_id}", ANY, APP_OWN),
    row("DELETE", "/applications/{app_id}/commands/{command_id}", ANY, APP_OWN),
    row("GET", "/applications/{app_id}/guilds/{guild_id}/commands", ANY, APP_OWN),
    row("POST", "/applications/{app_id}/guilds/{guild_id}/commands", ANY, APP_OWN),
    row("PUT", "/applications/{app_id}/guilds/{guild_id}/commands", ANY, APP_OWN),
    row("GET", "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}", ANY, APP_OWN),
    row("PATCH", "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}", ANY, APP_OWN),
    row("DELETE", "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}", ANY, APP_OWN),
    // Interactions: people who may use commands in the channel invoke; an
    // interaction's token is the bot's credential for its answers.
    row("GET", "/guilds/{guild_id}/application-command-index", ANY, ANY_MEMBER),
    row("GET", "/channels/{channel_id}/application-command-index", ANY, ANY_MEMBER),
    row("GET", "/users/@me/application-command-index", ANY, ANY_USER),
    row("POST", "/interactions", p::USE_APPLICATION_COMMANDS, NEEDS_PERM),
    row("POST", "/interactions/{interaction_id}/{token}/callback", ANY, PUBLIC),
    row("GET", "/webhooks/{webhook_id}/{token}/messages/{message_id}", ANY, PUBLIC),
    row("PATCH", "/webhooks/{webhook_id}/{token}/messages/{message_id}", ANY, PUBLIC),
    row("DELETE", "/webhooks/{webhook_id}/{token}/messages/{message_id}", ANY, PUBLIC),
    // Command permission overrides: the bot and those who manage the guild
    // read them (none set on the fixture's command: 10066); people who
    // manage the guild and its roles set them, never a bot.
    row("GET", "/applications/{app_id}/guilds/{guild_id}/commands/permissions", p::MANAGE_GUILD, "ok ok 50013 50001 ok 401 401"),
    row("GET", "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}/permissions", p::MANAGE_GUILD, "10066 10066 50013 50001 10066 401 401"),
    row("PUT", "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}/permissions", p::MANAGE_GUILD | p::MANAGE_ROLES, "ok ok 50013 50001 20001 401 401"),
    // Features throng lacks: empty answers libraries call at start-up.
    row("GET", "/applications/{app_id}/entitlements", ANY, ANY_USER),
    row("GET", "/applications/{app_id}/emojis", ANY, ANY_USER),
    row("GET", "/soundboard-default-sounds", ANY, ANY_USER),
    row("GET", "/sticker-packs", ANY, ANY_USER),
    row("GET", "/voice/regions", ANY, ANY_USER),
    // Operators' routes: the admin token only, never a user's.
    row("POST", "/_throng/admin/drop-sessions", ANY, "401 401 401 401 401 401 401"),
    row("GET", "/_throng/admin/stats", ANY, "401 401 401 401 401 401 401"),
    row("GET", "/_throng/admin/guilds/{guild_id}/owner", ANY, "401 401 401 401 401 401 401"),
    // The gateway: what hands out a guild's data.
    row("GW", "GUILD_CREATE", ANY, "ok ok ok none ok 4004 4004"),
    row("GW", "op 8 REQUEST_GUILD_MEMBERS", ANY, "ok ok ok none none 4004 4004"),
    row("GW", "op 14 GUILD_SUBSCRIPTIONS (member list)", ANY, "ok ok ok none ok 4004 4004"),
    row("GW", "MESSAGE_CREATE in a channel hidden from @everyone, shown to the holder", ANY, "ok ok none none none 4004 4004"),
];

/// Files whose `.route(...)` calls make the routes outside the API table
/// (whose routes are the OpenAPI document's operations).
const ROUTE_SOURCES: [&str; 3] =
    [include_str!("../../../api/src/lib.rs"), include_str!("../../../api/src/attachments.rs"), include_str!("../../../api/src/web.rs")];

/// (method, path) of every `.route("path", get(..).post(..))` in the
/// sources, with `{thread_id}` for thread-member routes as in `ROWS`.
fn routes_in_code() -> BTreeSet<(String, String)> {
    let mut out: BTreeSet<(String, String)> = crate::openapi::operations()
        .into_iter()
        .map(|(m, p)| (m, if p.contains("thread-members") { p.replace("{channel_id}", "{thread_id}") } else { p }))
        .collect();
    for src in ROUTE_SOURCES {
        let mut rest = src;
        while let Some(i) = rest.find(".route(") {
            rest = &rest[i + ".route(".len()..];
            let open = rest.find('"').expect("a path literal");
            let close = open + 1 + rest[open + 1..].find('"').expect("its end");
            let path = &rest[open + 1..close];
            // The method calls up to the `.route(` call's closing parenthesis.
            let (mut depth, mut end) = (1, close);
            for (k, ch) in rest[close..].char_indices() {
                match ch {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                if depth == 0 {
                    end = close + k;
                    break;
                }
            }
            let calls = &rest[close..end];
            let path = if path.contains("thread-members") { path.replace("{channel_id}", "{thread_id}") } else { path.to_string() };
            for m in ["get", "post", "put", "patch", "delete"] {
                let called = calls.match_indices(&format!("{m}(")).any(|(k, _)| {
                    let before = calls[..k].chars().last();
                    !matches!(before, Some(c) if c.is_ascii_alphanumeric() || c == '_')
                });
                if called {
                    out.insert((m.to_uppercase(), path.clone()));
                }
            }
        }
    }
    out
}

#[test]
fn every_route_has_a_row() {
    let code = routes_in_code();
    assert!(code.len() > 100, "{} routes parsed", code.len());
    let rows: BTreeSet<(String, String)> =
        ROWS.iter().filter(|r| r.method != "GW").map(|r| (r.method.to_string(), r.path.to_string())).collect();
    let missing: Vec<_> = code.difference(&rows).collect();
    assert!(missing.is_empty(), "routes without a row in the authorization matrix: {missing:?}");
    let stale: Vec<_> = rows.difference(&code).collect();
    assert!(stale.is_empty(), "rows for routes the server does not register: {stale:?}");
    for r in ROWS {
        assert_eq!(r.expect.split_whitespace().count(), COLUMNS.len(), "{} {}", r.method, r.path);
    }
}

/// The callers, made once per server (passwords are slow to hash).
struct Cast {
    owner: (String, String),
    holder: (String, String),
    member: (String, String),
    outsider: (String, String),
    /// (auth, raw token, id); its application's id.
    bot: (String, String, String),
    app: String,
    /// Bots the fixtures act on: a member, a banned user.
    victim: (String, String),
    banned: String,
    /// A person in no fixture guild who gave the bot column's application
    /// a `guilds.join` token: (id, access token).
    newcomer: (String, String),
    /// A bot in no fixture guild, to authorize into one.
    guest: String,
    /// The owner's avatar, `{hash}.png`.
    avatar: String,
    forged: String,
}

impl Cast {
    async fn new(t: &TestServer) -> Cast {
        let owner = t.user("owner").await;
        let holder = t.user("holder").await;
        let member = t.user("member").await;
        let outsider = t.user("outsider").await;
        let bot = t.bot("robot").await;
        let app = t.get("/applications/@me", &bot.0).await.1["id"].as_str().unwrap().to_string();
        let (victim_auth, _, victim_id) = t.bot("victim").await;
        let banned = t.bot("banned").await.2;
        let (newcomer_token, newcomer_id) = t.user("newcomer").await;
        let newcomer = (newcomer_id, t.join_token(&newcomer_token, &bot.0, &bot.2).await);
        let guest = t.bot("guest").await.2;
        ok(t, Method::PATCH, "/users/@me", &owner.0, Some(json!({"avatar": PNG_URI}))).await;
        let avatar = format!("{}.png", t.get("/users/@me", &owner.0).await.1["avatar"].as_str().unwrap());
        // The owner's token with its last character changed: the right
        // shape, the wrong signature.
        let mut forged = owner.0.clone();
        let last = forged.pop().unwrap();
        forged.push(if last == 'A' { 'B' } else { 'A' });
        Cast { owner, holder, member, outsider, bot, app, victim: (victim_auth, victim_id), banned, newcomer, guest, avatar, forged }
    }

    fn auth(&self, who: Who) -> Option<&str> {
        Some(match who {
            Who::Owner => &self.owner.0,
            Who::Holder => &self.holder.0,
            Who::Member => &self.member.0,
            Who::Outsider => &self.outsider.0,
            Who::Bot => &self.bot.0,
            Who::NoToken => return None,
            Who::Forged => &self.forged,
        })
    }

    /// A person's username (`Cast::new` registers them by these names).
    fn username(&self, who: Who) -> &'static str {
        match who {
            Who::Owner => "owner",
            Who::Holder => "holder",
            Who::Member => "member",
            _ => "outsider",
        }
    }

    /// The raw token IDENTIFY sends.
    fn token(&self, who: Who) -> String {
        match who {
            Who::Bot => self.bot.1.clone(),
            Who::NoToken => String::new(),
            other => self.auth(other).unwrap().to_string(),
        }
    }
}

/// A fresh guild for one cell, with what the row's path names.
struct Fixture {
    vars: BTreeMap<&'static str, String>,
    guild: String,
    channel: String,
}

async fn ok(t: &TestServer, m: Method, path: &str, auth: &str, body: Option<Value>) -> Value {
    let (s, v, _) = t.req(m.clone(), path, Some(auth), body).await;
    assert!((200..300).contains(&s), "fixture {m} {path}: {s} {v}");
    v
}

/// A fresh token of `username` (password "correct horse").
async fn login(t: &TestServer, username: &str) -> String {
    let v = t.req(Method::POST, "/auth/login", None, Some(json!({"username": username, "password": "correct horse"}))).await.1;
    v["token"].as_str().unwrap_or_else(|| panic!("login {username}: {v}")).to_string()
}

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id in {v}")).to_string()
}

impl Fixture {
    async fn new(t: &TestServer, c: &Cast, r: &Row, n: usize) -> Fixture {
        let owner = c.owner.0.as_str();
        let (guild, channel) = t.guild(owner).await;
        let mut vars = BTreeMap::new();
        vars.insert("{guild_id}", guild.clone());
        vars.insert("{channel_id}", channel.clone());
        vars.insert("{app_id}", c.app.clone());
        vars.insert("{join_token}", c.newcomer.1.clone());
        // People join by invite; bots are authorized in (below, after the
        // roles, so their managed roles end below the holder's).
        let invite = ok(t, Method::POST, &format!("/channels/{channel}/invites"), owner, Some(json!({}))).await;
        for u in [&c.holder.0, &c.member.0] {
            ok(t, Method::POST, &format!("/invites/{}", invite["code"].as_str().unwrap()), u, Some(json!({}))).await;
        }
        // The holder's role first: a new role starts at the bottom and moves
        // the others up, so the target role, created next, ends below it.
        if r.perm != ANY {
            let role = ok(
                t,
                Method::POST,
                &format!("/guilds/{guild}/roles"),
                owner,
                Some(json!({"name": "holder", "permissions": r.perm.to_string()})),
            )
            .await;
            ok(t, Method::PUT, &format!("/guilds/{guild}/members/{}/roles/{}", c.holder.1, id(&role)), owner, None).await;
        }
        let target = id(&ok(t, Method::POST, &format!("/guilds/{guild}/roles"), owner, Some(json!({"name": "target"}))).await);
        for b in [&c.bot.2, &c.victim.1] {
            t.add_bot(owner, &guild, b, 0).await;
        }
        vars.insert("{role_id}", target.clone());
        vars.insert("{overwrite_id}", target.clone());
        let path = r.path;
        let victim = c.victim.1.clone();
        let needs = |k: &str| path.contains(k);
        let mut message = String::new();
        if needs("{message_id}") || needs("{emoji}") || needs("bulk-delete") || needs("{thread_id}") {
            message = id(&t.say(owner, &channel, &format!("cell {n}")).await);
            vars.insert("{message_id}", message.clone());
        }
        if needs("{emoji}") {
            // The victim has reacted with 👍. Adding a reaction that is
            // already there needs no ADD_REACTIONS (as on Discord), so a
            // PUT adds a new one (🔥).
            let thumbs = "%F0%9F%91%8D";
            ok(t, Method::PUT, &format!("/channels/{channel}/messages/{message}/reactions/{thumbs}/@me"), &c.victim.0, None).await;
            vars.insert("{emoji}", if r.method == "PUT" { "%F0%9F%94%A5".into() } else { thumbs.into() });
        }
        if needs("bulk-delete") {
            vars.insert("{second_message}", id(&t.say(owner, &channel, "second").await));
        }
        if needs("{emoji_id}") || needs("{file}") {
            let e =
                ok(t, Method::POST, &format!("/guilds/{guild}/emojis"), owner, Some(json!({"name": format!("e{n}"), "image": PNG_URI})))
                    .await;
            vars.insert("{file}", format!("{}.png", id(&e)));
            vars.insert("{emoji_id}", id(&e));
        }
        if needs("{name}") {
            // The bundle's hashed name, as the page names it.
            let page = t.http.get(t.base.replace("/api/v10", "/")).send().await.unwrap().text().await.unwrap();
            let at = page.find("/assets/app.").expect("the page names its bundle");
            let name: String = page[at + "/assets/".len()..].chars().take_while(|c| *c != '"').collect();
            vars.insert("{name}", name);
        }
        if r.path.starts_with("/icons/") {
            let g = ok(t, Method::PATCH, &format!("/guilds/{guild}"), owner, Some(json!({"icon": PNG_URI}))).await;
            vars.insert("{file}", format!("{}.png", g["icon"].as_str().unwrap()));
        }
        if needs("{code}") {
            let inv = ok(t, Method::POST, &format!("/channels/{channel}/invites"), owner, Some(json!({}))).await;
            vars.insert("{code}", inv["code"].as_str().unwrap().to_string());
        }
        if needs("{webhook_id}") {
            let w = ok(t, Method::POST, &format!("/channels/{channel}/webhooks"), owner, Some(json!({"name": "hook"}))).await;
            vars.insert("{webhook_id}", id(&w));
            vars.insert("{token}", w["token"].as_str().unwrap().to_string());
        }
        if needs("{thread_id}") {
            let th = ok(t, Method::POST, &format!("/channels/{channel}/threads"), owner, Some(json!({"name": "thread", "type": 11}))).await;
            let th = id(&th);
            ok(t, Method::PUT, &format!("/channels/{th}/thread-members/@me"), &c.victim.0, None).await;
            vars.insert("{thread_id}", th);
        }
        if needs("{command_id}") {
            let base = if needs("{guild_id}") {
                format!("/applications/{}/guilds/{guild}/commands", c.app)
            } else {
                format!("/applications/{}/commands", c.app)
            };
            let cmd = ok(t, Method::POST, &base, &c.bot.0, Some(json!({"name": "ping", "description": "pong"}))).await;
            vars.insert("{command_id}", id(&cmd));
        }
        if path == "/interactions" || needs("{interaction_id}") || needs("{token}/messages") {
            // A guild command of the bot column's application; for the
            // callback and message routes an interaction the bot got (and,
            // for the message routes, answered).
            let base = format!("/applications/{}/guilds/{guild}/commands", c.app);
            let cmd = ok(t, Method::POST, &base, &c.bot.0, Some(json!({"name": "ping", "description": "pong"}))).await;
            vars.insert("{command}", id(&cmd));
            if path != "/interactions" {
                let mut bot = Gw::connect(&t.ws).await;
                bot.identify(&c.bot.1, BOT_INTENTS).await;
                while bot.until("GUILD_CREATE").await["d"]["id"] != guild.as_str() {}
                let invoke = json!({"type": 2, "application_id": c.app, "guild_id": guild, "channel_id": channel,
                    "data": {"id": id(&cmd), "name": "ping", "type": 1}});
                ok(t, Method::POST, "/interactions", owner, Some(invoke)).await;
                let i = bot.until("INTERACTION_CREATE").await["d"].clone();
                let token = i["token"].as_str().unwrap().to_string();
                vars.insert("{interaction_id}", id(&i));
                if needs("{token}/messages") {
                    let cb = format!("/interactions/{}/{token}/callback", id(&i));
                    let (s, v, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "answer"}}))).await;
                    assert_eq!(s, 204, "fixture callback: {v}");
                    vars.insert("{webhook_id}", c.app.clone());
                    vars.insert("{message_id}", "@original".into());
                }
                vars.insert("{token}", token);
            }
        }
        if needs("{attachment_id}") {
            let form = reqwest::multipart::Form::new()
                .text("payload_json", json!({"content": "file"}).to_string())
                .part("files[0]", reqwest::multipart::Part::bytes(b"hello".to_vec()).file_name("a.txt"));
            let r = t
                .http
                .post(format!("{}/channels/{channel}/messages", t.base))
                .header("authorization", owner)
                .multipart(form)
                .send()
                .await
                .unwrap();
            let m: Value = r.json().await.unwrap();
            let url = m["attachments"][0]["url"].as_str().unwrap_or_else(|| panic!("{m}"));
            let parts: Vec<&str> = url.rsplit('/').take(2).collect();
            vars.insert("{attachment_id}", parts[1].to_string());
            vars.insert("{filename}", parts[0].to_string());
        }
        if needs("{overwrite_id}") {
            ok(
                t,
                Method::PUT,
                &format!("/channels/{channel}/permissions/{target}"),
                owner,
                Some(json!({"type": 0, "allow": "0", "deny": "0"})),
            )
            .await;
        }
        // Who `{user_id}` is: the acting user for reactions (`@me`), a
        // pre-banned user for reading or lifting a ban, a user not yet in
        // the guild for adding one, the victim member otherwise.
        let user = match (r.method, path) {
            ("PUT", p) if p.contains("/reactions/") => "@me".to_string(),
            ("GET" | "DELETE", p) if p.contains("/bans/") => {
                ok(t, Method::PUT, &format!("/guilds/{guild}/bans/{}", c.banned), owner, Some(json!({}))).await;
                c.banned.clone()
            }
            ("PUT", "/guilds/{guild_id}/members/{user_id}") => c.newcomer.0.clone(),
            ("GET", "/avatars/{user_id}/{file}") => {
                vars.insert("{file}", c.avatar.clone());
                c.owner.1.clone()
            }
            _ => victim.clone(),
        };
        if needs("/roles/{role_id}") && r.method == "DELETE" && needs("/members/") {
            ok(t, Method::PUT, &format!("/guilds/{guild}/members/{victim}/roles/{target}"), owner, None).await;
        }
        vars.insert("{user_id}", user);
        // Last: `@everyone` keeps the base minus the row's permission.
        ok(
            t,
            Method::PATCH,
            &format!("/guilds/{guild}/roles/{guild}"),
            owner,
            Some(json!({"permissions": (EVERYONE_BASE & !r.perm).to_string()})),
        )
        .await;
        Fixture { vars, guild, channel }
    }

    /// Deletes the cell's guild (unless the call did), so members' guild
    /// lists stay short.
    async fn remove(&self, t: &TestServer, c: &Cast) {
        let _ = t.req(Method::DELETE, &format!("/guilds/{}", self.guild), Some(&c.owner.0), None).await;
    }

    fn path(&self, template: &str) -> String {
        let mut s = template.to_string();
        for (k, v) in &self.vars {
            s = s.replace(k, v);
        }
        assert!(!s.contains('{'), "unfilled placeholder in {s}");
        s
    }
}

/// A 1x1 PNG as a data URI.
const PNG_URI: &str =
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// A valid body for the row's request (successful callers must succeed).
fn body(r: &Row, f: &Fixture, n: usize) -> Option<Value> {
    let b = match (r.method, r.path) {
        ("POST", "/auth/register") => json!({"username": format!("reg{n}"), "password": "correct horse"}),
        ("POST", "/auth/login") => json!({"username": "owner", "password": "correct horse"}),
        ("PATCH", "/users/@me") => json!({"global_name": "renamed"}),
        ("POST", "/users/@me/channels") => json!({"recipient_id": f.vars["{user_id}"]}),
        ("POST", "/guilds") => json!({"name": "another"}),
        ("PATCH", "/guilds/{guild_id}") => json!({"name": "renamed"}),
        ("POST", "/guilds/{guild_id}/channels") => json!({"name": "new"}),
        ("POST", "/guilds/{guild_id}/roles") => json!({"name": "new"}),
        ("PATCH", "/guilds/{guild_id}/roles") => json!([{"id": f.vars["{role_id}"], "position": 1}]),
        ("PATCH", "/guilds/{guild_id}/roles/{role_id}") => json!({"name": "renamed"}),
        ("PATCH", "/guilds/{guild_id}/members/@me") => json!({"nick": "me"}),
        ("PUT", "/guilds/{guild_id}/members/{user_id}") => json!({"access_token": f.vars["{join_token}"]}),
        ("POST", "/oauth2/authorize") => json!({"guild_id": f.guild, "permissions": "0", "authorize": true}),
        ("POST", "/auth/sessions/logout") => json!({"session_id_hashes": []}),
        ("PATCH", "/applications/@me") => json!({"redirect_uris": ["http://localhost/cb"]}),
        ("PUT", "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}/permissions") => json!({"permissions": []}),
        ("PATCH", "/guilds/{guild_id}/members/{user_id}") => json!({"nick": "renamed"}),
        ("PUT", "/guilds/{guild_id}/bans/{user_id}") => json!({}),
        ("POST", "/guilds/{guild_id}/emojis") => json!({"name": "new", "image": PNG_URI}),
        ("PATCH", "/guilds/{guild_id}/emojis/{emoji_id}") => json!({"name": "renamed"}),
        ("PATCH", "/channels/{channel_id}") => json!({"name": "renamed"}),
        ("POST", "/channels/{channel_id}/messages") => json!({"content": "hello"}),
        ("PATCH", "/channels/{channel_id}/messages/{message_id}") => json!({"content": "edited"}),
        ("POST", "/channels/{channel_id}/invites") => json!({}),
        ("POST", "/invites/{code}") => json!({}),
        ("PUT", "/channels/{channel_id}/permissions/{overwrite_id}") => json!({"type": 0, "allow": "0", "deny": "2048"}),
        ("POST", "/channels/{channel_id}/messages/bulk-delete") => {
            json!({"messages": [f.vars["{message_id}"], f.vars["{second_message}"]]})
        }
        ("POST", "/channels/{channel_id}/webhooks") => json!({"name": "new"}),
        ("PATCH", "/webhooks/{webhook_id}") | ("PATCH", "/webhooks/{webhook_id}/{token}") => json!({"name": "renamed"}),
        ("POST", "/webhooks/{webhook_id}/{token}") => json!({"content": "hooked"}),
        ("PATCH", "/webhooks/{webhook_id}/{token}/messages/{message_id}") => json!({"content": "edited"}),
        ("POST", "/interactions") => json!({"type": 2, "application_id": f.vars["{app_id}"], "guild_id": f.guild,
            "channel_id": f.channel, "data": {"id": f.vars["{command}"], "name": "ping", "type": 1}}),
        ("POST", "/interactions/{interaction_id}/{token}/callback") => json!({"type": 4, "data": {"content": "answer"}}),
        ("POST", "/channels/{channel_id}/messages/{message_id}/threads") => json!({"name": "from message"}),
        ("POST", "/channels/{channel_id}/threads") => json!({"name": "standalone", "type": 11}),
        ("POST", p) if p.ends_with("/commands") => json!({"name": "other", "description": "another"}),
        ("PUT", p) if p.ends_with("/commands") => json!([{"name": "ping", "description": "pong"}]),
        ("PATCH", p) if p.contains("/commands/") => json!({"description": "changed"}),
        ("POST", "/_throng/admin/drop-sessions") => json!({}),
        _ => return None,
    };
    Some(b)
}

/// The answer's cell: `ok`, the Discord code for 4xx with one, the status otherwise.
fn cell(status: u16, v: &Value) -> String {
    if (200..300).contains(&status) {
        return "ok".into();
    }
    match v["code"].as_u64() {
        Some(c) if c > 0 && (400..500).contains(&status) => c.to_string(),
        _ => status.to_string(),
    }
}

/// Routes whose body names what the caller acts on, so that who may call
/// them is known only once it is read (as on Discord): the guild of a
/// consent, the recipient of a DM, the guild, channel and command of an
/// interaction, the client credentials of the token endpoint.
const DECIDED_BY_BODY: [(&str, &str); 4] =
    [("POST", "/oauth2/authorize"), ("POST", "/users/@me/channels"), ("POST", "/interactions"), ("POST", "/oauth2/token")];

/// Whether a refused call to `r` is refused before its body is read: the
/// routes that take one, but for [`DECIDED_BY_BODY`].
fn refused_unread(r: &Row) -> bool {
    matches!(r.method, "POST" | "PUT" | "PATCH") && !DECIDED_BY_BODY.contains(&(r.method, r.path))
}

/// The cell of a call whose body never arrives ([`stalled_request`]): a
/// route that checks who may call it before it reads its body answers
/// anyway; one that reads first waits for the rest ("unanswered").
async fn stalled_cell(method: &str, url: &str, auth: Option<&str>) -> String {
    match stalled_request(method, url, auth).await {
        Some((status, v)) => cell(status, &v),
        None => "unanswered".into(),
    }
}

/// The route's cell for `who`, against a fresh fixture.
/// Also what differs from the OpenAPI document, if anything; and, when
/// `stall` (a refusal expected of a route with a body), the cell of the
/// same call with a body that never arrives, made first.
async fn rest_cell(t: &TestServer, c: &Cast, r: &Row, who: Who, n: usize, stall: bool) -> (String, Option<String>, Option<String>) {
    let f = Fixture::new(t, c, r, n).await;
    let path = f.path(r.path);
    let method = Method::from_bytes(r.method.as_bytes()).unwrap();
    let api = !r.page
        && !matches!(r.path, "/health" | "/ready" | "/metrics")
        && !r.path.starts_with("/emojis/")
        && !r.path.starts_with("/avatars/")
        && !r.path.starts_with("/icons/")
        && !r.path.starts_with("/attachments/")
        && !r.path.starts_with("/ephemeral-attachments/");
    let query = match r.path {
        "/oauth2/authorize" => format!("?client_id={}&scope=bot", c.guest),
        "/guilds/{guild_id}/members/search" => "?query=a".to_string(),
        _ => String::new(),
    };
    let url = if api { format!("{}{path}{query}", t.base) } else { format!("{}{path}", t.base.trim_end_matches("/api/v10")) };
    let mut auth = c.auth(who).map(str::to_owned);
    if r.path == "/auth/logout" && matches!(who, Who::Owner | Who::Holder | Who::Member | Who::Outsider) {
        // Logging out revokes the token: a fresh one of the same person.
        auth = Some(login(t, c.username(who)).await);
    }
    let stalled = match stall {
        true => Some(stalled_cell(r.method, &url, auth.as_deref()).await),
        false => None,
    };
    let mut req = t.http.request(method, url);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    if r.path == "/oauth2/token" {
        let form = format!("grant_type=authorization_code&code=nope&client_id={}&client_secret=wrong", c.app);
        req = req.header("content-type", "application/x-www-form-urlencoded").body(form);
    } else if let Some(b) = body(r, &f, n) {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let kind = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_string);
    let text = resp.text().await.unwrap_or_default();
    f.remove(t, c).await;
    // The answer is what the OpenAPI document says of it.
    let unlike_doc = match api && !matches!(r.path, "/openapi.json" | "/docs" | "/docs.js" | "/docs.css") {
        true => crate::openapi::conforms(r.method, &doc_path(r.path), status, kind.as_deref(), &text).err(),
        false => None,
    };
    (cell(status, &serde_json::from_str(&text).unwrap_or(Value::Null)), unlike_doc, stalled)
}

/// A row's path as the OpenAPI document writes it.
fn doc_path(p: &str) -> String {
    p.replace("{thread_id}", "{channel_id}")
}

/// What a session of `who` gets on the gateway path `r` in a fresh fixture.
async fn gateway_cell(t: &TestServer, c: &Cast, r: &Row, who: Who, n: usize) -> String {
    let f = Fixture::new(t, c, r, n).await;
    // Without the row's intent: GUILD_MEMBERS for op 8, GUILD_MESSAGES for
    // messages; the other rows need none beyond GUILDS.
    let intents = match (who, r.path) {
        (Who::Bot, p) if p.starts_with("op 8") => ALL_INTENTS & !2,
        (Who::Bot, p) if p.starts_with("MESSAGE_CREATE") => ALL_INTENTS & !512,
        _ => ALL_INTENTS,
    };
    let mut g = Gw::connect(&t.ws).await;
    g.send(
        json!({"op": 2, "d": {"token": c.token(who), "intents": intents, "properties": {"os": "linux", "browser": "t", "device": "t"}}}),
    )
    .await;
    // READY, or the close code.
    loop {
        match g.next().await {
            Ok(v) if v["t"] == "READY" => break,
            Ok(_) => continue,
            Err(Closed::Code(code)) => return code.to_string(),
            Err(Closed::Abrupt) => return "abrupt".into(),
        }
    }
    let guild = f.guild.clone();
    let wanted: &str = match r.path {
        "GUILD_CREATE" => "GUILD_CREATE",
        p if p.starts_with("op 8") => {
            g.send(json!({"op": 8, "d": {"guild_id": guild, "query": "", "limit": 0}})).await;
            "GUILD_MEMBERS_CHUNK"
        }
        p if p.starts_with("op 14") => {
            g.send(json!({"op": 14, "d": {"guild_id": guild, "channels": {f.channel.clone(): [[0, 99]]}}})).await;
            "GUILD_MEMBER_LIST_UPDATE"
        }
        _ => {
            // A channel hidden from @everyone, shown to the holder alone.
            let (s, ch) = t.post(&format!("/guilds/{guild}/channels"), &c.owner.0, json!({"name": "hidden"})).await;
            assert_eq!(s, 201, "{ch}");
            let hidden = id(&ch);
            let everyone = json!({"type": 0, "allow": "0", "deny": p::VIEW_CHANNEL.to_string()});
            ok(t, Method::PUT, &format!("/channels/{hidden}/permissions/{guild}"), &c.owner.0, Some(everyone)).await;
            let holder = json!({"type": 1, "allow": p::VIEW_CHANNEL.to_string(), "deny": "0"});
            ok(t, Method::PUT, &format!("/channels/{hidden}/permissions/{}", c.holder.1), &c.owner.0, Some(holder)).await;
            t.say(&c.owner.0, &hidden, "secret").await;
            "MESSAGE_CREATE"
        }
    };
    // What arrives within a second (a dispatch of the fixture's guild).
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(1);
    let got = loop {
        match tokio::time::timeout_at(deadline, g.next()).await {
            Ok(Ok(v)) if v["t"] == wanted && (v["d"]["guild_id"] == guild.as_str() || v["d"]["id"] == guild.as_str()) => break "ok",
            Ok(Ok(_)) => continue,
            Ok(Err(_)) | Err(_) => break "none",
        }
    };
    f.remove(t, c).await;
    got.into()
}

/// Every cell of the matrix. Mismatches are gathered and reported together.
#[tokio::test]
async fn authorization_matrix() {
    let t = TestServer::start_with(|c| {
        c.gateway.heartbeat_interval_ms = 600_000;
        c.limits.rest_requests_per_window = 1_000_000;
        c.limits.max_guilds_per_user = 1_000_000;
        // A cell answers its fixture's interaction after the fixture is
        // built: give a loaded box more than Discord's 3 s for it.
        c.interactions.response_timeout_ms = 60_000;
    })
    .await;
    let c = Cast::new(&t).await;
    let mut wrong = Vec::new();
    let mut n = 0;
    for r in ROWS {
        let expected: Vec<&str> = r.expect.split_whitespace().collect();
        for (who, want) in COLUMNS.iter().zip(&expected) {
            n += 1;
            let got = if r.method == "GW" {
                gateway_cell(&t, &c, r, *who, n).await
            } else {
                let stall = *want != "ok" && refused_unread(r);
                let (got, unlike_doc, stalled) = rest_cell(&t, &c, r, *who, n, stall).await;
                if let Some(e) = unlike_doc {
                    wrong.push(format!("{} {} as {who:?}: unlike the OpenAPI document: {e}", r.method, r.path));
                }
                if let Some(s) = stalled.filter(|s| s != want) {
                    wrong.push(format!("{} {} as {who:?}: with its body unsent, expected {want} at once, got {s}", r.method, r.path));
                }
                got
            };
            if got != *want {
                wrong.push(format!("{} {} as {who:?}: expected {want}, got {got}", r.method, r.path));
            }
        }
    }
    eprintln!("authorization matrix: {} rows, {n} cells, {} wrong", ROWS.len(), wrong.len());
    assert!(wrong.is_empty(), "{} of {n} cells differ:\n{}", wrong.len(), wrong.join("\n"));
}
