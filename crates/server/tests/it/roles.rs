//! Roles, a member's roles, channel overwrites, bans and kicks: who may use
//! each route (owner, member with the permission, member without it,
//! non-member), Discord's role hierarchy, the events, who receives them
//! when visibility changes, member lists regrouping, and bans refusing
//! joins.

use std::collections::HashSet;

use protocol::model::permission as p;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;

/// A guild with an owner, a moderator (a role with the moderation
/// permissions, above `low`), a plain member and an outsider.
struct G {
    t: TestServer,
    owner: String,
    owner_id: String,
    guild: String,
    channel: String,
    /// Its role: MANAGE_ROLES, BAN, KICK, MANAGE_NICKNAMES, VIEW_AUDIT_LOG.
    moderator: String,
    moderator_id: String,
    mod_role: String,
    plain: String,
    plain_id: String,
    outsider: String,
    /// A role below the moderator's.
    low: String,
}

/// How markers start (see `G::before_marker`).
const MARKER: &str = "marker: ";

const MOD_PERMS: u64 = p::MANAGE_ROLES | p::BAN_MEMBERS | p::KICK_MEMBERS | p::MANAGE_NICKNAMES | p::VIEW_AUDIT_LOG;

impl G {
    async fn new() -> G {
        let t = TestServer::start_with(|c| c.gateway.heartbeat_interval_ms = 600_000).await;
        let (owner, owner_id) = t.user("owner").await;
        let (guild, channel) = t.guild(&owner).await;
        let (moderator, moderator_id) = t.user("moderator").await;
        let (plain, plain_id) = t.user("plain").await;
        let (outsider, _) = t.user("outsider").await;
        let mut g = G {
            t,
            owner,
            owner_id,
            guild,
            channel,
            moderator,
            moderator_id,
            mod_role: String::new(),
            plain,
            plain_id,
            outsider,
            low: String::new(),
        };
        g.t.join(&g.owner, &g.channel, &g.moderator).await;
        g.t.join(&g.owner, &g.channel, &g.plain).await;
        // Created first, so moved up by the next one: `low` ends below `mod`.
        g.mod_role = g.role(json!({"name": "mod", "permissions": MOD_PERMS.to_string()})).await;
        g.low = g.role(json!({"name": "low", "permissions": "0"})).await;
        g.grant(&g.moderator_id.clone(), &g.mod_role.clone()).await;
        g
    }

    async fn req(&self, m: Method, path: &str, auth: &str, body: Option<Value>) -> (u16, Value) {
        let (s, v, _) = self.t.req(m, path, Some(auth), body).await;
        (s, v)
    }

    /// A new human member (joined by invite): (token, id).
    async fn member(&self, name: &str) -> (String, String) {
        let (tok, id) = self.t.user(name).await;
        self.t.join(&self.owner, &self.channel, &tok).await;
        (tok, id)
    }

    /// The owner creates a role; its id.
    async fn role(&self, body: Value) -> String {
        let (s, v) = self.t.post(&format!("/guilds/{}/roles", self.guild), &self.owner, body).await;
        assert_eq!(s, 200, "{v}");
        v["id"].as_str().unwrap().to_string()
    }

    async fn grant(&self, user: &str, role: &str) {
        let path = format!("/guilds/{}/members/{user}/roles/{role}", self.guild);
        assert_eq!(self.req(Method::PUT, &path, &self.owner, None).await.0, 204);
    }

    async fn roles(&self) -> Vec<Value> {
        self.t.get(&format!("/guilds/{}/roles", self.guild), &self.owner).await.1.as_array().unwrap().clone()
    }

    async fn position(&self, role: &str) -> i64 {
        self.roles().await.iter().find(|r| r["id"] == role).unwrap()["position"].as_i64().unwrap()
    }

    async fn gw(&self, token: &str) -> Gw {
        let mut g = Gw::connect(&self.t.ws).await;
        g.identify(token, ALL_INTENTS).await;
        g.until("GUILD_CREATE").await;
        g
    }

    /// Posts `marker` in the public channel and returns what `g` received
    /// before it (dispatches only; presence, list updates and audit log
    /// entries left out: tests/it/audit.rs checks those).
    /// Other markers (posted for other sessions) are left out too.
    async fn before_marker(&self, g: &mut Gw, marker: &str) -> Vec<Value> {
        let marker = format!("{MARKER}{marker}");
        self.t.say(&self.owner, &self.channel, &marker).await;
        let mut got = Vec::new();
        loop {
            let v = g.recv().await;
            let aside = ["PRESENCE_UPDATE", "GUILD_MEMBER_LIST_UPDATE", "GUILD_AUDIT_LOG_ENTRY_CREATE"];
            if v["op"] != 0 || aside.iter().any(|t| v["t"] == *t) {
                continue;
            }
            let content = v["d"]["content"].as_str().filter(|_| v["t"] == "MESSAGE_CREATE");
            if content == Some(marker.as_str()) {
                return got;
            }
            if !content.is_some_and(|c| c.starts_with(MARKER)) {
                got.push(v);
            }
        }
    }
}

/// `before_marker` for two sessions, one marker each.
async fn both(g: &G, o: &mut Gw, m: &mut Gw, marker: &str) -> (Vec<Value>, Vec<Value>) {
    (g.before_marker(o, marker).await, g.before_marker(m, &format!("{marker} (again)")).await)
}

fn names(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["t"].as_str().unwrap().to_string()).collect()
}

/// Who may call what. Each route runs once per caller on fresh targets;
/// expected: the owner and the moderator succeed, the plain member gets
/// 403 50013, the outsider 403 50001 (and routes any member may use say so).
#[tokio::test]
async fn every_route_is_authorized_owner_permitted_member_plain_member_outsider() {
    let g = G::new().await;
    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Who {
        Owner,
        Moderator,
        Plain,
        Outsider,
    }
    let callers = [Who::Owner, Who::Moderator, Who::Plain, Who::Outsider];
    let token = |w: Who| match w {
        Who::Owner => g.owner.clone(),
        Who::Moderator => g.moderator.clone(),
        Who::Plain => g.plain.clone(),
        Who::Outsider => g.outsider.clone(),
    };
    let gid = g.guild.clone();
    let mut n = 0;
    // (route, any member may call it, what to call: fresh targets each time)
    let routes: &[(&str, bool)] = &[
        ("POST roles", false),
        ("GET role", true),
        ("PATCH role", false),
        ("DELETE role", false),
        ("PATCH roles (positions)", false),
        ("PUT member role", false),
        ("DELETE member role", false),
        ("PATCH member roles", false),
        ("PATCH member nick (another's)", false),
        ("PUT overwrite", false),
        ("DELETE overwrite", false),
        ("GET bans", false),
        ("GET ban", false),
        ("PUT ban", false),
        ("DELETE ban", false),
        ("DELETE member (kick)", false),
    ];
    for &(route, any_member) in routes {
        for who in callers {
            n += 1;
            let auth = token(who);
            // Fresh targets: a role below the moderator's, a member, a banned user, a channel.
            let target_role = g.role(json!({"name": format!("t{n}")})).await;
            // Bots: no password to hash, so the table stays quick.
            let (_, _, victim) = g.t.bot(&format!("victim{n}")).await;
            g.t.add_bot(&g.owner, &gid, &victim, 0).await;
            let (_, _, banned) = g.t.bot(&format!("banned{n}")).await;
            let (s, v) = g.req(Method::PUT, &format!("/guilds/{gid}/bans/{banned}"), &g.owner, None).await;
            assert_eq!(s, 204, "{v}");
            let (s, c) = g.t.post(&format!("/guilds/{gid}/channels"), &g.owner, json!({"name": format!("c{n}")})).await;
            assert_eq!(s, 201, "{c}");
            let chan = c["id"].as_str().unwrap().to_string();
            let ow = json!({"type": 0, "allow": "0", "deny": (p::SEND_MESSAGES).to_string()});
            assert_eq!(g.req(Method::PUT, &format!("/channels/{chan}/permissions/{target_role}"), &g.owner, Some(ow.clone())).await.0, 204);
            g.grant(&victim, &g.low).await;
            let (s, v) = match route {
                "POST roles" => g.req(Method::POST, &format!("/guilds/{gid}/roles"), &auth, Some(json!({"name": "new"}))).await,
                "GET role" => g.req(Method::GET, &format!("/guilds/{gid}/roles/{target_role}"), &auth, None).await,
                "PATCH role" => {
                    g.req(Method::PATCH, &format!("/guilds/{gid}/roles/{target_role}"), &auth, Some(json!({"name": "x"}))).await
                }
                "DELETE role" => g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{target_role}"), &auth, None).await,
                "PATCH roles (positions)" => {
                    g.req(Method::PATCH, &format!("/guilds/{gid}/roles"), &auth, Some(json!([{"id": target_role, "position": 2}]))).await
                }
                "PUT member role" => g.req(Method::PUT, &format!("/guilds/{gid}/members/{victim}/roles/{target_role}"), &auth, None).await,
                "DELETE member role" => {
                    g.req(Method::DELETE, &format!("/guilds/{gid}/members/{victim}/roles/{}", g.low), &auth, None).await
                }
                "PATCH member roles" => {
                    g.req(Method::PATCH, &format!("/guilds/{gid}/members/{victim}"), &auth, Some(json!({"roles": [target_role]}))).await
                }
                "PATCH member nick (another's)" => {
                    g.req(Method::PATCH, &format!("/guilds/{gid}/members/{victim}"), &auth, Some(json!({"nick": "renamed"}))).await
                }
                "PUT overwrite" => {
                    g.req(Method::PUT, &format!("/channels/{chan}/permissions/{victim}"), &auth, Some(json!({"type": 1, "deny": "2048"})))
                        .await
                }
                "DELETE overwrite" => g.req(Method::DELETE, &format!("/channels/{chan}/permissions/{target_role}"), &auth, None).await,
                "GET bans" => g.req(Method::GET, &format!("/guilds/{gid}/bans"), &auth, None).await,
                "GET ban" => g.req(Method::GET, &format!("/guilds/{gid}/bans/{banned}"), &auth, None).await,
                "PUT ban" => g.req(Method::PUT, &format!("/guilds/{gid}/bans/{victim}"), &auth, Some(json!({}))).await,
                "DELETE ban" => g.req(Method::DELETE, &format!("/guilds/{gid}/bans/{banned}"), &auth, None).await,
                "DELETE member (kick)" => g.req(Method::DELETE, &format!("/guilds/{gid}/members/{victim}"), &auth, None).await,
                other => unreachable!("{other}"),
            };
            let code = v["code"].as_u64();
            match who {
                Who::Owner | Who::Moderator => assert!((200..=204).contains(&s), "{route} by {who:?}: {s} {v}"),
                Who::Plain if any_member => assert!((200..=204).contains(&s), "{route} by {who:?}: {s} {v}"),
                Who::Plain => assert_eq!((s, code), (403, Some(50013)), "{route} by {who:?}: {v}"),
                Who::Outsider => assert_eq!((s, code), (403, Some(50001)), "{route} by {who:?}: {v}"),
            }
        }
    }
}

/// Discord's hierarchy: only roles below one's highest may be edited,
/// deleted, moved, given or taken; only members ranked below may be
/// kicked, banned or renamed; only permissions one has may be granted.
/// ADMINISTRATOR gives every permission, not rank; the owner is above all.
#[tokio::test]
async fn the_role_hierarchy_bounds_what_managers_may_do() {
    let g = G::new().await;
    let gid = g.guild.clone();
    // Created last: at position 1, below `low` and `mod`; then moved to the top.
    let high = g.role(json!({"name": "high", "permissions": "0"})).await;
    let top = g.roles().await.iter().map(|r| r["position"].as_i64().unwrap()).max().unwrap();
    let (s, v) = g.req(Method::PATCH, &format!("/guilds/{gid}/roles"), &g.owner, Some(json!([{"id": high, "position": top + 1}]))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v.as_array().unwrap().last().unwrap()["id"], high.as_str(), "roles come back in position order");
    let (_, senior) = g.member("senior").await;
    g.grant(&senior, &high).await;
    let (_, peer) = g.member("peer").await;
    g.grant(&peer, &g.mod_role).await;
    let m = &g.moderator;
    let denied = |r: (u16, Value)| assert_eq!((r.0, r.1["code"].as_u64()), (403, Some(50013)), "{}", r.1);

    // Roles above or equal to one's own: nothing.
    for role in [&high, &g.mod_role] {
        denied(g.req(Method::PATCH, &format!("/guilds/{gid}/roles/{role}"), m, Some(json!({"name": "mine now"}))).await);
        denied(g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{role}"), m, None).await);
        denied(g.req(Method::PUT, &format!("/guilds/{gid}/members/{}/roles/{role}", g.plain_id), m, None).await);
        denied(g.req(Method::PATCH, &format!("/guilds/{gid}/members/{}", g.plain_id), m, Some(json!({"roles": [role]}))).await);
    }
    denied(g.req(Method::DELETE, &format!("/guilds/{gid}/members/{senior}/roles/{high}"), m, None).await);
    // Moving a lower role to or above one's own, or moving one's own: no.
    let mod_pos = g.position(&g.mod_role).await;
    denied(g.req(Method::PATCH, &format!("/guilds/{gid}/roles"), m, Some(json!([{"id": g.low, "position": mod_pos + 1}]))).await);
    denied(g.req(Method::PATCH, &format!("/guilds/{gid}/roles"), m, Some(json!([{"id": g.mod_role, "position": 1}]))).await);
    // Members ranked equal or above: no kick, ban or nickname; nor the owner.
    for target in [&senior, &peer, &g.owner_id] {
        denied(g.req(Method::DELETE, &format!("/guilds/{gid}/members/{target}"), m, None).await);
        denied(g.req(Method::PUT, &format!("/guilds/{gid}/bans/{target}"), m, None).await);
        denied(g.req(Method::PATCH, &format!("/guilds/{gid}/members/{target}"), m, Some(json!({"nick": "x"}))).await);
    }
    denied(g.req(Method::PUT, &format!("/guilds/{gid}/bans/{}", g.moderator_id), m, None).await);
    // Permissions one lacks cannot be granted, in a role or an overwrite.
    denied(g.req(Method::POST, &format!("/guilds/{gid}/roles"), m, Some(json!({"permissions": (p::MANAGE_GUILD).to_string()}))).await);
    denied(g.req(Method::PATCH, &format!("/guilds/{gid}/roles/{}", g.low), m, Some(json!({"permissions": "8"}))).await);
    let ow = |allow: u64| Some(json!({"type": 0, "allow": allow.to_string(), "deny": "0"}));
    denied(g.req(Method::PUT, &format!("/channels/{}/permissions/{}", g.channel, g.low), m, ow(p::MANAGE_GUILD)).await);
    let chan_patch = json!({"permission_overwrites": [{"id": g.low, "type": 0, "allow": (p::MANAGE_GUILD).to_string()}]});
    // (MANAGE_CHANNELS is lacking here too; the owner gives it, then the bits rule alone refuses.)
    let (s, _) = g
        .req(
            Method::PATCH,
            &format!("/guilds/{gid}/roles/{}", g.mod_role),
            &g.owner,
            Some(json!({"permissions": (MOD_PERMS | p::MANAGE_CHANNELS).to_string()})),
        )
        .await;
    assert_eq!(s, 200);
    denied(g.req(Method::PATCH, &format!("/channels/{}", g.channel), m, Some(chan_patch)).await);

    // Below: all of it, with permissions one has.
    assert_eq!(
        g.req(Method::PUT, &format!("/channels/{}/permissions/{}", g.channel, g.low), m, ow(p::SEND_MESSAGES | p::KICK_MEMBERS)).await.0,
        204
    );
    let (s, v) = g
        .req(
            Method::PATCH,
            &format!("/guilds/{gid}/roles/{}", g.low),
            m,
            Some(json!({"permissions": (p::KICK_MEMBERS).to_string(), "hoist": true})),
        )
        .await;
    assert_eq!((s, v["permissions"].as_str(), v["hoist"].as_bool()), (200, Some("2"), Some(true)), "{v}");
    assert_eq!(g.req(Method::PUT, &format!("/guilds/{gid}/members/{}/roles/{}", g.plain_id, g.low), m, None).await.0, 204);
    let (s, v) =
        g.req(Method::PATCH, &format!("/guilds/{gid}/members/{}", g.plain_id), m, Some(json!({"nick": "renamed", "roles": []}))).await;
    assert_eq!((s, v["nick"].as_str(), v["roles"].as_array().map(Vec::len)), (200, Some("renamed"), Some(0)), "{v}");
    let (s, v) = g.req(Method::POST, &format!("/guilds/{gid}/roles"), m, Some(json!({"name": "made by mod"}))).await;
    assert_eq!((s, v["position"].as_i64()), (200, Some(1)), "new roles start at the bottom: {v}");
    let made = v["id"].as_str().unwrap().to_string();
    assert_eq!(g.req(Method::PATCH, &format!("/guilds/{gid}/roles"), m, Some(json!([{"id": made, "position": 2}]))).await.0, 200);
    assert_eq!(g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{made}"), m, None).await.0, 204);

    // ADMINISTRATOR without rank: every permission, still bound by the hierarchy.
    let admin_role = g.role(json!({"name": "admin", "permissions": (p::ADMINISTRATOR).to_string()})).await;
    let (admin, admin_id) = g.member("admin").await;
    g.grant(&admin_id, &admin_role).await;
    denied(g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{high}"), &admin, None).await);
    denied(g.req(Method::DELETE, &format!("/guilds/{gid}/members/{senior}"), &admin, None).await);
    assert_eq!(g.req(Method::GET, &format!("/guilds/{gid}/bans"), &admin, None).await.0, 200);
    // `@everyone` cannot be deleted, even by the owner.
    let (s, v) = g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{gid}"), &g.owner, None).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50028)), "{v}");
    // The owner: anything.
    assert_eq!(g.req(Method::DELETE, &format!("/guilds/{gid}/members/{senior}"), &g.owner, None).await.0, 204);
    assert_eq!(g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{high}"), &g.owner, None).await.0, 204);
}

/// Nicknames: one's own with CHANGE_NICKNAME (which `@everyone` has by
/// default), anyone else's with MANAGE_NICKNAMES.
#[tokio::test]
async fn nicknames_need_change_nickname_for_oneself_and_manage_nicknames_for_others() {
    let g = G::new().await;
    let gid = g.guild.clone();
    let own = format!("/guilds/{gid}/members/@me");
    assert_eq!(g.req(Method::PATCH, &own, &g.plain, Some(json!({"nick": "me"}))).await.0, 200);
    let (s, v) = g.req(Method::PATCH, &format!("/guilds/{gid}/members/{}", g.moderator_id), &g.plain, Some(json!({"nick": "you"}))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)));
    let everyone = p::DEFAULT_EVERYONE & !p::CHANGE_NICKNAME;
    assert_eq!(
        g.req(Method::PATCH, &format!("/guilds/{gid}/roles/{gid}"), &g.owner, Some(json!({"permissions": everyone.to_string()}))).await.0,
        200
    );
    let (s, v) = g.req(Method::PATCH, &own, &g.plain, Some(json!({"nick": "me again"}))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    // MANAGE_NICKNAMES covers one's own too; the owner needs nothing.
    assert_eq!(g.req(Method::PATCH, &own, &g.moderator, Some(json!({"nick": "mod"}))).await.0, 200);
    assert_eq!(g.req(Method::PATCH, &own, &g.owner, Some(json!({"nick": "boss"}))).await.0, 200);
    let (s, v) = g.req(Method::PATCH, &format!("/guilds/{gid}/members/{}", g.plain_id), &g.moderator, Some(json!({"nick": "given"}))).await;
    assert_eq!((s, v["nick"].as_str()), (200, Some("given")));
}

/// Role objects as Discord documents them, the events each change sends,
/// and bad input answered with Discord's errors.
#[tokio::test]
async fn role_objects_events_and_errors() {
    let g = G::new().await;
    let gid = g.guild.clone();
    let mut owner = g.gw(&g.owner).await;
    // Defaults: "new role", @everyone's permissions, colour 0, at position 1.
    let (s, r) =
        g.t.post(&format!("/guilds/{gid}/roles"), &g.owner, json!({"colors": {"primary_color": 0x3498db, "secondary_color": null}})).await;
    assert_eq!(s, 200, "{r}");
    for k in
        ["id", "name", "color", "colors", "hoist", "icon", "unicode_emoji", "position", "permissions", "managed", "mentionable", "flags"]
    {
        assert!(r.get(k).is_some(), "role.{k}: {r}");
    }
    assert_eq!((r["name"].as_str(), r["color"].as_u64(), r["position"].as_i64()), (Some("new role"), Some(0x3498db), Some(1)));
    assert_eq!(r["colors"], json!({"primary_color": 0x3498db, "secondary_color": null, "tertiary_color": null}));
    assert_eq!(r["permissions"].as_str(), Some(p::DEFAULT_EVERYONE.to_string().as_str()));
    let id = r["id"].as_str().unwrap().to_string();
    let ev = owner.until("GUILD_ROLE_CREATE").await;
    assert_eq!((ev["d"]["guild_id"].as_str(), ev["d"]["role"]["id"].as_str()), (Some(gid.as_str()), Some(id.as_str())));
    // The others moved up one, each announced.
    let updates: Vec<Value> = g.before_marker(&mut owner, "after create").await;
    assert_eq!(names(&updates), ["GUILD_ROLE_UPDATE", "GUILD_ROLE_UPDATE"], "{updates:?}");
    let positions: HashSet<i64> = g.roles().await.iter().map(|r| r["position"].as_i64().unwrap()).collect();
    assert_eq!(positions.len(), 4, "positions stay distinct");

    // Modify: permissions as an integer or string; null reads as absent.
    let (s, v) = g
        .req(
            Method::PATCH,
            &format!("/guilds/{gid}/roles/{id}"),
            &g.owner,
            Some(json!({"name": "blue", "permissions": 3072, "hoist": null, "color": 255})),
        )
        .await;
    assert_eq!(
        (s, v["name"].as_str(), v["permissions"].as_str(), v["color"].as_u64()),
        (200, Some("blue"), Some("3072"), Some(255)),
        "{v}"
    );
    let ev = owner.until("GUILD_ROLE_UPDATE").await;
    assert_eq!(ev["d"]["role"]["name"], "blue");
    // Reorder: events for the roles that moved.
    let (s, _) = g
        .req(
            Method::PATCH,
            &format!("/guilds/{gid}/roles"),
            &g.owner,
            Some(json!([{"id": id, "position": 7}, {"id": g.low, "position": null}])),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(owner.until("GUILD_ROLE_UPDATE").await["d"]["role"]["position"], 7);
    // Delete: GUILD_ROLE_DELETE {guild_id, role_id}; gone from the guild.
    assert_eq!(g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{id}"), &g.owner, None).await.0, 204);
    let ev = owner.until("GUILD_ROLE_DELETE").await;
    assert_eq!(ev["d"], json!({"guild_id": gid, "role_id": id}));
    let (s, v) = g.t.get(&format!("/guilds/{gid}/roles/{id}"), &g.owner).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10011)));

    // Errors: field errors, unknown role / member / overwrite, bad type.
    let form = |r: (u16, Value), field: &str| {
        assert_eq!((r.0, r.1["code"].as_u64()), (400, Some(50035)), "{}", r.1);
        assert!(r.1["errors"][field]["_errors"][0]["code"].is_string(), "{field}: {}", r.1);
    };
    form(g.req(Method::POST, &format!("/guilds/{gid}/roles"), &g.owner, Some(json!({"name": "x".repeat(101)}))).await, "name");
    form(g.req(Method::POST, &format!("/guilds/{gid}/roles"), &g.owner, Some(json!({"permissions": "lots"}))).await, "permissions");
    form(g.req(Method::POST, &format!("/guilds/{gid}/roles"), &g.owner, Some(json!({"color": 0x1000000}))).await, "color");
    form(
        g.req(Method::PUT, &format!("/channels/{}/permissions/{}", g.channel, g.low), &g.owner, Some(json!({"allow": "1"}))).await,
        "type",
    );
    form(g.req(Method::PUT, &format!("/channels/{}/permissions/{}", g.channel, g.low), &g.owner, Some(json!({"type": 2}))).await, "type");
    form(g.req(Method::PATCH, &format!("/guilds/{gid}/roles"), &g.owner, Some(json!([{"id": g.low, "position": 0}]))).await, "position");
    let code = |r: (u16, Value)| (r.0, r.1["code"].as_u64());
    assert_eq!(code(g.req(Method::PATCH, &format!("/guilds/{gid}/roles/123"), &g.owner, Some(json!({}))).await), (404, Some(10011)));
    assert_eq!(
        code(g.req(Method::PUT, &format!("/guilds/{gid}/members/{}/roles/123", g.plain_id), &g.owner, None).await),
        (404, Some(10011))
    );
    assert_eq!(code(g.req(Method::PUT, &format!("/guilds/{gid}/members/123/roles/{}", g.low), &g.owner, None).await), (404, Some(10007)));
    assert_eq!(code(g.req(Method::DELETE, &format!("/channels/{}/permissions/123", g.channel), &g.owner, None).await), (404, Some(10009)));
    assert_eq!(
        code(g.req(Method::PUT, &format!("/channels/{}/permissions/123", g.channel), &g.owner, Some(json!({"type": 1}))).await),
        (404, Some(10007))
    );
    assert_eq!(
        code(g.req(Method::PUT, &format!("/channels/{}/permissions/123", g.channel), &g.owner, Some(json!({"type": 0}))).await),
        (404, Some(10011))
    );
    assert_eq!(code(g.req(Method::DELETE, &format!("/guilds/{gid}/bans/{}", g.plain_id), &g.owner, None).await), (404, Some(10026)));
    assert_eq!(code(g.req(Method::GET, &format!("/guilds/{gid}/bans/{}", g.plain_id), &g.owner, None).await), (404, Some(10026)));
    assert_eq!(code(g.req(Method::PUT, &format!("/guilds/{gid}/bans/123"), &g.owner, None).await), (404, Some(10013)));
    // Giving a role twice, or taking one never given: 204, nothing sent.
    let path = format!("/guilds/{gid}/members/{}/roles/{}", g.moderator_id, g.mod_role);
    assert_eq!(g.req(Method::PUT, &path, &g.owner, None).await.0, 204);
    assert_eq!(g.req(Method::DELETE, &format!("/guilds/{gid}/members/{}/roles/{}", g.plain_id, g.low), &g.owner, None).await.0, 204);
    assert!(g.before_marker(&mut owner, "nothing changed").await.is_empty());
}

/// Overwrites (PUT/DELETE) and role changes that show or hide a channel:
/// CHANNEL_CREATE to whoever gains it, CHANNEL_DELETE to whoever loses it,
/// CHANNEL_UPDATE to those who see it before and after, nothing to others.
#[tokio::test]
async fn visibility_changes_send_channel_create_and_delete_to_those_concerned() {
    let g = G::new().await;
    let gid = g.guild.clone();
    let (s, c) = g.t.post(&format!("/guilds/{gid}/channels"), &g.owner, json!({"name": "vault"})).await;
    assert_eq!(s, 201);
    let vault = c["id"].as_str().unwrap().to_string();
    let mut owner = g.gw(&g.owner).await;
    let mut plain = g.gw(&g.plain).await;
    let seer = g.role(json!({"name": "seer"})).await;
    let ow_path = |id: &str| format!("/channels/{vault}/permissions/{id}");
    let _ = both(&g, &mut owner, &mut plain, "settle").await;

    // Hide it from @everyone: the member loses it, the owner sees the update.
    let deny = json!({"type": 0, "allow": "0", "deny": (p::VIEW_CHANNEL).to_string()});
    assert_eq!(g.req(Method::PUT, &ow_path(&gid), &g.owner, Some(deny)).await.0, 204);
    let (o, m) = both(&g, &mut owner, &mut plain, "hidden").await;
    assert_eq!(names(&o), ["CHANNEL_UPDATE"]);
    assert_eq!(o[0]["d"]["permission_overwrites"][0]["deny"], "1024");
    assert_eq!(names(&m), ["CHANNEL_DELETE"]);
    assert_eq!(m[0]["d"]["id"], vault.as_str());
    // An overwrite for a role the member lacks: they hear nothing.
    let allow = json!({"type": 0, "allow": (p::VIEW_CHANNEL).to_string(), "deny": "0"});
    assert_eq!(g.req(Method::PUT, &ow_path(&seer), &g.owner, Some(allow)).await.0, 204);
    let (o, m) = both(&g, &mut owner, &mut plain, "seer allowed").await;
    assert_eq!((names(&o), names(&m)), (vec!["CHANNEL_UPDATE".to_string()], vec![]));
    // The role given: GUILD_MEMBER_UPDATE, then the channel appears.
    g.grant(&g.plain_id, &seer).await;
    let (_, m) = both(&g, &mut owner, &mut plain, "granted").await;
    assert_eq!(names(&m), ["GUILD_MEMBER_UPDATE", "CHANNEL_CREATE"]);
    assert_eq!(m[1]["d"]["id"], vault.as_str());
    // Taken away: gone again.
    let revoke = format!("/guilds/{gid}/members/{}/roles/{seer}", g.plain_id);
    assert_eq!(g.req(Method::DELETE, &revoke, &g.owner, None).await.0, 204);
    let (_, m) = both(&g, &mut owner, &mut plain, "revoked").await;
    assert_eq!(names(&m), ["GUILD_MEMBER_UPDATE", "CHANNEL_DELETE"]);
    // A member overwrite allowing it, then deleting the @everyone deny: the
    // member keeps it (UPDATE), after having gained it (CREATE).
    let member_allow = json!({"type": 1, "allow": "1024"});
    assert_eq!(g.req(Method::PUT, &ow_path(&g.plain_id), &g.owner, Some(member_allow)).await.0, 204);
    let (_, m) = both(&g, &mut owner, &mut plain, "member allowed").await;
    assert_eq!(names(&m), ["CHANNEL_CREATE"]);
    assert_eq!(g.req(Method::DELETE, &ow_path(&gid), &g.owner, None).await.0, 204);
    let (o, m) = both(&g, &mut owner, &mut plain, "public again").await;
    assert_eq!((names(&o), names(&m)), (vec!["CHANNEL_UPDATE".to_string()], vec!["CHANNEL_UPDATE".to_string()]));
    assert_eq!(g.req(Method::DELETE, &ow_path(&g.plain_id), &g.owner, None).await.0, 204);
    let _ = both(&g, &mut owner, &mut plain, "settle 2").await;

    // A role's permissions: @everyone without VIEW_CHANNEL hides every
    // channel from the member (a CHANNEL_DELETE each); back, a CHANNEL_CREATE each.
    let everyone = |bits: u64| Some(json!({"permissions": bits.to_string()}));
    let channels = g.t.get(&format!("/guilds/{gid}/channels"), &g.owner).await.1.as_array().unwrap().len();
    assert_eq!(
        g.req(Method::PATCH, &format!("/guilds/{gid}/roles/{gid}"), &g.owner, everyone(p::DEFAULT_EVERYONE & !p::VIEW_CHANNEL)).await.0,
        200
    );
    let o = g.before_marker(&mut owner, "everyone blind").await;
    assert_eq!(names(&o), ["GUILD_ROLE_UPDATE"], "the owner sees everything anyway");
    let mut m = Vec::new();
    while m.len() < channels + 1 {
        let v = plain.until_not(&["PRESENCE_UPDATE", "GUILD_MEMBER_LIST_UPDATE"]).await;
        m.push(v["t"].as_str().unwrap().to_string());
    }
    assert_eq!(m[0], "GUILD_ROLE_UPDATE");
    assert!(m[1..].iter().all(|t| t == "CHANNEL_DELETE"), "{m:?}");
    assert_eq!(g.req(Method::PATCH, &format!("/guilds/{gid}/roles/{gid}"), &g.owner, everyone(p::DEFAULT_EVERYONE)).await.0, 200);
    let m = g.before_marker(&mut plain, "everyone sees").await;
    assert_eq!(m.len(), channels + 1, "{m:?}");
    assert!(names(&m[1..]).iter().all(|t| t == "CHANNEL_CREATE"), "{m:?}");

    // Deleting a role that was the member's way in: its overwrite goes
    // (CHANNEL_UPDATE to the owner), the member loses the channel.
    let deny = json!({"type": 0, "allow": "0", "deny": (p::VIEW_CHANNEL).to_string()});
    assert_eq!(g.req(Method::PUT, &ow_path(&gid), &g.owner, Some(deny)).await.0, 204);
    g.grant(&g.plain_id, &seer).await;
    let _ = both(&g, &mut owner, &mut plain, "settle 3").await;
    assert_eq!(g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{seer}"), &g.owner, None).await.0, 204);
    let (o, m) = both(&g, &mut owner, &mut plain, "role deleted").await;
    assert_eq!(names(&o), ["GUILD_ROLE_DELETE", "CHANNEL_UPDATE"]);
    assert_eq!(o[1]["d"]["permission_overwrites"].as_array().unwrap().len(), 1, "the role's overwrite went with it");
    assert_eq!(names(&m), ["GUILD_ROLE_DELETE", "CHANNEL_DELETE"]);
    let (_, member) = g.t.get(&format!("/guilds/{gid}/members/{}", g.plain_id), &g.owner).await;
    assert_eq!(member["roles"], json!([]), "the deleted role left the member");
}

/// Fan-out follows every change at once: a message in a channel hidden by
/// an overwrite reaches only those who may see it; a role allowing it makes
/// the very next message reach the member, and taking it away stops them.
#[tokio::test]
async fn fan_out_follows_role_and_overwrite_changes_at_once() {
    let g = G::new().await;
    let gid = g.guild.clone();
    let (_, c) = g.t.post(&format!("/guilds/{gid}/channels"), &g.owner, json!({"name": "hideout"})).await;
    let hideout = c["id"].as_str().unwrap().to_string();
    let pass = g.role(json!({"name": "pass"})).await;
    let mut plain = g.gw(&g.plain).await;
    let mut moderator = g.gw(&g.moderator).await;
    // What each of the two received in the hideout before a marker.
    async fn step(g: &G, hideout: &str, plain: &mut Gw, moderator: &mut Gw, marker: &str) -> (Vec<String>, Vec<String>) {
        let (a, b) = both(g, plain, moderator, marker).await;
        let texts = |events: Vec<Value>| -> Vec<String> {
            events
                .iter()
                .filter(|e| e["t"] == "MESSAGE_CREATE" && e["d"]["channel_id"] == hideout)
                .map(|e| e["d"]["content"].as_str().unwrap().to_string())
                .collect()
        };
        (texts(a), texts(b))
    }
    let none: Vec<String> = Vec::new();
    let just = |s: &str| vec![s.to_string()];
    // Public: both get it (and the actor builds its audience caches).
    g.t.say(&g.owner, &hideout, "one").await;
    assert_eq!(step(&g, &hideout, &mut plain, &mut moderator, "m1").await, (just("one"), just("one")));
    // Hidden from @everyone, allowed to `pass`: nobody else gets the next message.
    let deny = json!({"type": 0, "deny": (p::VIEW_CHANNEL).to_string()});
    assert_eq!(g.req(Method::PUT, &format!("/channels/{hideout}/permissions/{gid}"), &g.owner, Some(deny)).await.0, 204);
    let allow = json!({"type": 0, "allow": (p::VIEW_CHANNEL).to_string()});
    assert_eq!(g.req(Method::PUT, &format!("/channels/{hideout}/permissions/{pass}"), &g.owner, Some(allow)).await.0, 204);
    g.t.say(&g.owner, &hideout, "two").await;
    assert_eq!(step(&g, &hideout, &mut plain, &mut moderator, "m2").await, (none.clone(), none.clone()));
    // The role given: the very next message reaches the member, not the moderator.
    g.grant(&g.plain_id, &pass).await;
    g.t.say(&g.owner, &hideout, "three").await;
    assert_eq!(step(&g, &hideout, &mut plain, &mut moderator, "m3").await, (just("three"), none.clone()));
    // The member may send there at once too.
    assert_eq!(g.t.post(&format!("/channels/{hideout}/messages"), &g.plain, json!({"content": "mine"})).await.0, 200);
    // A member overwrite denying it: stops at once.
    let member_deny = json!({"type": 1, "deny": (p::VIEW_CHANNEL).to_string()});
    assert_eq!(g.req(Method::PUT, &format!("/channels/{hideout}/permissions/{}", g.plain_id), &g.owner, Some(member_deny)).await.0, 204);
    g.t.say(&g.owner, &hideout, "four").await;
    assert_eq!(step(&g, &hideout, &mut plain, &mut moderator, "m4").await, (just("mine"), none.clone()));
    // That overwrite gone and the role deleted: still nothing; @everyone's overwrite gone: everyone.
    assert_eq!(g.req(Method::DELETE, &format!("/channels/{hideout}/permissions/{}", g.plain_id), &g.owner, None).await.0, 204);
    assert_eq!(g.req(Method::DELETE, &format!("/guilds/{gid}/roles/{pass}"), &g.owner, None).await.0, 204);
    g.t.say(&g.owner, &hideout, "five").await;
    assert_eq!(step(&g, &hideout, &mut plain, &mut moderator, "m5").await, (none.clone(), none.clone()));
    assert_eq!(g.req(Method::DELETE, &format!("/channels/{hideout}/permissions/{gid}"), &g.owner, None).await.0, 204);
    g.t.say(&g.owner, &hideout, "six").await;
    assert_eq!(step(&g, &hideout, &mut plain, &mut moderator, "m6").await, (just("six"), just("six")));
}

/// A client's copy of chunk `[0, 99]` of the list it watches, kept by
/// applying every op in order, as the member-list README says.
#[derive(Default)]
struct ListCopy {
    id: String,
    items: Vec<Value>,
}

impl ListCopy {
    /// The next GUILD_MEMBER_LIST_UPDATE, applied.
    async fn next(&mut self, gw: &mut Gw) -> Value {
        let v = gw.until("GUILD_MEMBER_LIST_UPDATE").await;
        self.id = v["d"]["id"].as_str().unwrap().to_string();
        for op in v["d"]["ops"].as_array().unwrap() {
            let at = || op["index"].as_u64().unwrap() as usize;
            match op["op"].as_str().unwrap() {
                "SYNC" => self.items = op["items"].as_array().unwrap().clone(),
                "INVALIDATE" => self.items.clear(),
                "INSERT" => {
                    self.items.insert(at(), op["item"].clone());
                    self.items.truncate(100);
                }
                "DELETE" => drop(self.items.remove(at())),
                "UPDATE" => self.items[at()] = op["item"].clone(),
                other => panic!("unknown op {other}"),
            }
        }
        v
    }
}

/// The member list (op 14) regroups when a hoisted role changes: hoist
/// toggled, positions changed, a member's roles changed; and a channel
/// whose overwrites change moves its watchers to its new list.
#[tokio::test]
async fn member_lists_regroup_on_hoist_changes_and_follow_overwrites() {
    let g = G::new().await;
    let gid = g.guild.clone();
    let mut owner = g.gw(&g.owner).await;
    // The members are online (connected), so hoisted groups show.
    let _plain = g.gw(&g.plain).await;
    let mut moderator = g.gw(&g.moderator).await;
    let mut copy = ListCopy::default();
    owner.send(json!({"op": 14, "d": {"guild_id": gid, "channels": {g.channel.clone(): [[0, 99]]}}})).await;
    let list = |v: &Value| -> (String, Vec<String>, String) {
        let groups = v["d"]["groups"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap().to_string()).collect();
        let ops = v["d"]["ops"].as_array().unwrap().iter().map(|o| o["op"].as_str().unwrap().to_string()).collect::<Vec<_>>().join(",");
        (v["d"]["id"].as_str().unwrap().to_string(), groups, ops)
    };
    // Until a list update whose groups satisfy `want`, each applied to the copy.
    async fn until_groups(gw: &mut Gw, copy: &mut ListCopy, want: impl Fn(&[String]) -> bool) -> Value {
        loop {
            let v = copy.next(gw).await;
            let groups: Vec<String> = v["d"]["groups"].as_array().unwrap().iter().map(|x| x["id"].as_str().unwrap().to_string()).collect();
            if want(&groups) {
                return v;
            }
        }
    }
    until_groups(&mut owner, &mut copy, |gr| gr.contains(&"online".to_string())).await;

    // Hoisting the moderator's role: a SYNC with its group first.
    let path = format!("/guilds/{gid}/roles/{}", g.mod_role);
    assert_eq!(g.req(Method::PATCH, &path, &g.owner, Some(json!({"hoist": true}))).await.0, 200);
    let v = until_groups(&mut owner, &mut copy, |gr| gr.first() == Some(&g.mod_role)).await;
    assert_eq!(list(&v).2, "SYNC", "{v}");
    // A second hoisted role, moved above: its group comes first.
    assert_eq!(g.req(Method::PATCH, &format!("/guilds/{gid}/roles/{}", g.low), &g.owner, Some(json!({"hoist": true}))).await.0, 200);
    g.grant(&g.plain_id, &g.low).await;
    let v = until_groups(&mut owner, &mut copy, |gr| gr.len() >= 2 && gr[0] == g.mod_role && gr[1] == g.low).await;
    assert!(!list(&v).2.contains("SYNC"), "a member's role change is range ops: {v}");
    let top = g.position(&g.mod_role).await;
    assert_eq!(
        g.req(Method::PATCH, &format!("/guilds/{gid}/roles"), &g.owner, Some(json!([{"id": g.low, "position": top + 1}]))).await.0,
        200
    );
    let v = until_groups(&mut owner, &mut copy, |gr| gr.len() >= 2 && gr[0] == g.low && gr[1] == g.mod_role).await;
    assert_eq!(list(&v).2, "SYNC");
    // The member's hoisted role taken away: moved by range ops to "online".
    let revoke = format!("/guilds/{gid}/members/{}/roles/{}", g.plain_id, g.low);
    assert_eq!(g.req(Method::DELETE, &revoke, &g.owner, None).await.0, 204);
    let v = until_groups(&mut owner, &mut copy, |gr| !gr.contains(&g.low)).await;
    assert!(list(&v).2.contains("DELETE") && list(&v).2.contains("INSERT"), "{v}");
    // Unhoisted: SYNC without the group.
    assert_eq!(g.req(Method::PATCH, &path, &g.owner, Some(json!({"hoist": false}))).await.0, 200);
    let v = until_groups(&mut owner, &mut copy, |gr| !gr.contains(&g.mod_role)).await;
    assert_eq!(list(&v).2, "SYNC");

    // Overwrites hiding the watched channel from @everyone, allowing the moderator's role:
    // INVALIDATE of `everyone`, then a SYNC of the channel's own list, without asking again.
    let deny = json!({"type": 0, "deny": (p::VIEW_CHANNEL).to_string()});
    let allow = json!({"type": 0, "allow": (p::VIEW_CHANNEL).to_string()});
    assert_eq!(g.req(Method::PUT, &format!("/channels/{}/permissions/{}", g.channel, g.mod_role), &g.owner, Some(allow)).await.0, 204);
    let v = copy.next(&mut owner).await;
    assert_eq!((list(&v).0.as_str(), list(&v).2.as_str()), ("everyone", "SYNC"), "no VIEW_CHANNEL denied yet: the same list, re-synced");
    assert_eq!(g.req(Method::PUT, &format!("/channels/{}/permissions/{gid}", g.channel), &g.owner, Some(deny)).await.0, 204);
    let v = copy.next(&mut owner).await;
    assert_eq!((list(&v).0.as_str(), list(&v).2.as_str()), ("everyone", "INVALIDATE"), "{v}");
    let v = copy.next(&mut owner).await;
    assert_ne!(list(&v).0, "everyone");
    assert_eq!(list(&v).2, "SYNC");
    assert_eq!(v["d"]["member_count"], 2, "owner and moderator only: {v}");
    // The plain member given the role: inserted into that list.
    g.grant(&g.plain_id, &g.mod_role).await;
    let v = copy.next(&mut owner).await;
    assert_eq!(v["d"]["member_count"], 3, "{v}");
    assert!(list(&v).2.contains("INSERT"), "{v}");
    // Every op applied in order, the copy equals what a fresh subscriber gets.
    moderator.send(json!({"op": 14, "d": {"guild_id": gid, "channels": {g.channel.clone(): [[0, 99]]}}})).await;
    let fresh = moderator.until("GUILD_MEMBER_LIST_UPDATE").await;
    assert_eq!(fresh["d"]["id"].as_str(), Some(copy.id.as_str()));
    assert_eq!(fresh["d"]["ops"][0]["items"].as_array().unwrap(), &copy.items, "copy kept by ops == fresh SYNC");
}

/// Bans: the member is removed (GUILD_MEMBER_REMOVE), the moderators hear
/// GUILD_BAN_ADD, their recent messages go (MESSAGE_DELETE_BULK), the ban
/// is listed, and they cannot come back by invite or be added until unbanned.
#[tokio::test]
async fn a_ban_removes_purges_and_keeps_the_user_out_until_unbanned() {
    let g = G::new().await;
    let gid = g.guild.clone();
    let (spammer, spammer_id) = g.member("spammer").await;
    let (s, inv) = g.t.post(&format!("/channels/{}/invites", g.channel), &g.owner, json!({"max_uses": 0})).await;
    assert_eq!(s, 200);
    let code = inv["code"].as_str().unwrap().to_string();
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(g.t.say(&spammer, &g.channel, &format!("spam {n}")).await["id"].as_str().unwrap().to_string());
    }
    let kept = g.t.say(&g.plain, &g.channel, "not spam").await["id"].as_str().unwrap().to_string();
    let mut owner = g.gw(&g.owner).await;
    let mut moderator = g.gw(&g.moderator).await;
    let mut plain = g.gw(&g.plain).await;
    let mut victim = g.gw(&spammer).await;

    let headers_reason =
        g.t.http
            .put(format!("{}/guilds/{gid}/bans/{spammer_id}", g.t.base))
            .header("authorization", &g.moderator)
            .header("x-audit-log-reason", "too%20much%20spam")
            .json(&json!({"delete_message_seconds": 3600}))
            .send()
            .await
            .unwrap();
    assert_eq!(headers_reason.status(), 204);
    let o = g.before_marker(&mut owner, "banned").await;
    assert_eq!(names(&o), ["GUILD_BAN_ADD", "GUILD_MEMBER_REMOVE", "MESSAGE_DELETE_BULK"]);
    assert_eq!(o[0]["d"]["user"]["id"], spammer_id.as_str());
    let mut bulk: Vec<String> = o[2]["d"]["ids"].as_array().unwrap().iter().map(|i| i.as_str().unwrap().to_string()).collect();
    bulk.sort();
    ids.sort();
    assert_eq!((bulk, o[2]["d"]["channel_id"].as_str()), (ids.clone(), Some(g.channel.as_str())));
    assert_eq!(
        names(&g.before_marker(&mut moderator, "banned (mod)").await),
        ["GUILD_BAN_ADD", "GUILD_MEMBER_REMOVE", "MESSAGE_DELETE_BULK"]
    );
    // Without BAN_MEMBERS or VIEW_AUDIT_LOG: no ban event.
    assert_eq!(names(&g.before_marker(&mut plain, "banned (plain)").await), ["GUILD_MEMBER_REMOVE", "MESSAGE_DELETE_BULK"]);
    assert_eq!(victim.until("GUILD_DELETE").await["d"]["id"], gid.as_str());
    let (_, history) = g.t.get(&format!("/channels/{}/messages?limit=50", g.channel), &g.owner).await;
    let left: Vec<&str> = history.as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert!(left.contains(&kept.as_str()) && ids.iter().all(|i| !left.contains(&i.as_str())), "{left:?}");

    // Listed, with the reason from the header.
    let (s, bans) = g.t.get(&format!("/guilds/{gid}/bans"), &g.moderator).await;
    assert_eq!(s, 200);
    assert_eq!(bans, json!([{"reason": "too much spam", "user": bans[0]["user"]}]));
    assert_eq!(bans[0]["user"]["id"], spammer_id.as_str());
    let (s, ban) = g.t.get(&format!("/guilds/{gid}/bans/{spammer_id}"), &g.moderator).await;
    assert_eq!((s, ban["reason"].as_str()), (200, Some("too much spam")));
    // Out: an invite refuses them (and keeps its uses).
    let (s, v) = g.t.post(&format!("/invites/{code}"), &spammer, json!({})).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(40007)), "{v}");
    assert_eq!(g.t.get(&format!("/invites/{code}"), &spammer).await.1["uses"], 0);
    // Banning again: 204, nothing new.
    assert_eq!(g.req(Method::PUT, &format!("/guilds/{gid}/bans/{spammer_id}"), &g.owner, None).await.0, 204);
    assert!(g.before_marker(&mut owner, "again").await.is_empty());

    // Unbanned: GUILD_BAN_REMOVE, and the invite works again.
    assert_eq!(g.req(Method::DELETE, &format!("/guilds/{gid}/bans/{spammer_id}"), &g.moderator, None).await.0, 204);
    let o = g.before_marker(&mut owner, "unbanned").await;
    assert_eq!(names(&o), ["GUILD_BAN_REMOVE"]);
    assert_eq!(o[0]["d"]["user"]["id"], spammer_id.as_str());
    assert_eq!(g.t.post(&format!("/invites/{code}"), &spammer, json!({})).await.0, 200);
    let (s, v) = g.t.get(&format!("/guilds/{gid}/bans"), &g.owner).await;
    assert_eq!((s, v), (200, json!([])));

    // Bans of users who never joined, paged in ascending id both ways.
    let mut banned = Vec::new();
    for n in 0..4 {
        let (_, id) = g.t.user(&format!("ghost{n}")).await;
        assert_eq!(g.req(Method::PUT, &format!("/guilds/{gid}/bans/{id}"), &g.owner, Some(json!({"delete_message_days": 7}))).await.0, 204);
        banned.push(id);
    }
    banned.sort_by_key(|id| id.parse::<u64>().unwrap());
    let page = |q: String| {
        let (g, gid) = (&g, &gid);
        async move {
            let (s, v) = g.t.get(&format!("/guilds/{gid}/bans{q}"), &g.owner).await;
            assert_eq!(s, 200, "{v}");
            v.as_array().unwrap().iter().map(|b| b["user"]["id"].as_str().unwrap().to_string()).collect::<Vec<_>>()
        }
    };
    assert_eq!(page(format!("?limit=2&after={}", banned[0])).await, banned[1..3].to_vec());
    assert_eq!(page(format!("?limit=2&before={}", banned[3])).await, banned[1..3].to_vec());
    let (s, v) = g.t.get(&format!("/guilds/{gid}/bans?limit=1001"), &g.owner).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)));
    let (s, v) =
        g.req(Method::PUT, &format!("/guilds/{gid}/bans/{}", g.plain_id), &g.owner, Some(json!({"delete_message_seconds": 604_801}))).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
}

/// The ban check is the actor's: bans and joins racing each other never
/// leave a banned user a member.
#[tokio::test]
async fn bans_and_joins_racing_never_leave_a_banned_member() {
    let g = G::new().await;
    let gid = g.guild.clone();
    let (_, inv) = g.t.post(&format!("/channels/{}/invites", g.channel), &g.owner, json!({"max_uses": 0})).await;
    let code = inv["code"].as_str().unwrap().to_string();
    let mut users = Vec::new();
    for n in 0..12 {
        users.push(g.t.user(&format!("racer{n}")).await);
    }
    let mut tasks = Vec::new();
    for (tok, id) in &users {
        let join = g.t.http.post(format!("{}/invites/{code}", g.t.base)).header("authorization", tok).json(&json!({})).send();
        let ban = g.t.http.put(format!("{}/guilds/{gid}/bans/{id}", g.t.base)).header("authorization", &g.owner).json(&json!({})).send();
        tasks.push(async move { tokio::join!(join, ban) });
    }
    for (join, ban) in futures_util::future::join_all(tasks).await {
        let (join, ban) = (join.unwrap(), ban.unwrap());
        assert!(join.status() == 200 || join.status() == 403, "{}", join.status());
        assert_eq!(ban.status(), 204);
    }
    for (_, id) in &users {
        let (s, _) = g.t.get(&format!("/guilds/{gid}/members/{id}"), &g.owner).await;
        assert_eq!(s, 404, "banned user {id} is a member");
    }
}

/// Timeouts (Discord's `communication_disabled_until`): they need
/// MODERATE_MEMBERS and a rank above the member's, never reach the owner or
/// an administrator, last at most 28 days; the member may read but not
/// send or react until the timeout ends by itself or is lifted; member
/// objects and GUILD_MEMBER_UPDATE carry it.
#[tokio::test]
async fn timeouts_silence_a_member_until_they_end() {
    let g = G::new().await;
    let gid = g.guild.clone();
    let chan = g.channel.clone();
    let member = |u: &str| format!("/guilds/{gid}/members/{u}");
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let at = |ms: u64| json!({ "communication_disabled_until": protocol::model::iso8601(now() + ms) });
    let hour = 3_600_000;
    let send = |who: &str, text: &str| {
        let (who, text) = (who.to_string(), text.to_string());
        let path = format!("/channels/{chan}/messages");
        let t = &g.t;
        async move { t.post(&path, &who, json!({ "content": text })).await }
    };

    // Without MODERATE_MEMBERS: 403 50013.
    let (s, v) = g.req(Method::PATCH, &member(&g.plain_id), &g.moderator, Some(at(hour))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    let perms = (MOD_PERMS | p::MODERATE_MEMBERS).to_string();
    let path = format!("/guilds/{gid}/roles/{}", g.mod_role);
    assert_eq!(g.req(Method::PATCH, &path, &g.owner, Some(json!({ "permissions": perms }))).await.0, 200);
    // Never the owner, nor an administrator, nor someone ranked as high.
    let (s, v) = g.req(Method::PATCH, &member(&g.owner_id), &g.moderator, Some(at(hour))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    let (admin, admin_id) = g.member("admin").await;
    let admin_role = g.role(json!({"name": "admins", "permissions": p::ADMINISTRATOR.to_string()})).await;
    g.grant(&admin_id, &admin_role).await;
    let (s, v) = g.req(Method::PATCH, &member(&admin_id), &g.owner, Some(at(hour))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    assert_eq!(send(&admin, "admins speak").await.0, 200);
    // More than 28 days, or not a time: 400 50035 on the field.
    for bad in [at(29 * 24 * hour), json!({"communication_disabled_until": "soon"})] {
        let (s, v) = g.req(Method::PATCH, &member(&g.plain_id), &g.moderator, Some(bad)).await;
        assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
        assert!(v["errors"]["communication_disabled_until"].is_object(), "{v}");
    }

    // A timeout for an hour: the member hears of it, may read, may not
    // send or react.
    let mut gw = g.gw(&g.plain).await;
    let said = g.t.say(&g.owner, &chan, "read this").await;
    let (s, v) = g.req(Method::PATCH, &member(&g.plain_id), &g.moderator, Some(at(hour))).await;
    assert_eq!(s, 200, "{v}");
    let until = v["communication_disabled_until"].as_str().expect("the member object carries the timeout").to_string();
    let upd = gw.until("GUILD_MEMBER_UPDATE").await;
    assert_eq!(upd["d"]["communication_disabled_until"], until.as_str());
    let (s, v) = send(&g.plain, "let me speak").await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    let react = format!("/channels/{chan}/messages/{}/reactions/%F0%9F%91%8D/@me", said["id"].as_str().unwrap());
    assert_eq!(g.req(Method::PUT, &react, &g.plain, None).await.0, 403);
    let (s, v) = g.t.get(&format!("/channels/{chan}/messages?limit=5"), &g.plain).await;
    assert_eq!((s, v[0]["content"].as_str()), (200, Some("read this")));
    assert_eq!(g.t.get(&member(&g.plain_id), &g.owner).await.1["communication_disabled_until"], until.as_str());

    // Lifted with null: the member speaks at once.
    let (s, v) = g.req(Method::PATCH, &member(&g.plain_id), &g.moderator, Some(json!({"communication_disabled_until": null}))).await;
    assert_eq!((s, v["communication_disabled_until"].clone()), (200, Value::Null), "{v}");
    assert_eq!(send(&g.plain, "free again").await.0, 200);

    // A short one ends by itself: refused before its end, accepted after.
    let ends = now() + 1_500;
    let body = json!({ "communication_disabled_until": protocol::model::iso8601(ends) });
    assert_eq!(g.req(Method::PATCH, &member(&g.plain_id), &g.moderator, Some(body)).await.0, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (s, v) = send(&g.plain, "is it over?").await;
        let answered = now();
        if s == 200 {
            assert!(answered >= ends, "accepted {} ms before the timeout's end", ends - answered);
            break;
        }
        assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
        assert!(std::time::Instant::now() < deadline, "the timeout never ended");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
