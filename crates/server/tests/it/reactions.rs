//! Reactions, custom emojis, pins and bulk delete: who may use each route
//! (owner, a member whose role grants the permission, a member without it,
//! a non-member), the limits (20 emojis per message, 250 pins per channel,
//! 2-100 fresh ids per bulk delete), `me` per requester in history, and the
//! events each change sends.

use std::collections::HashMap;

use base64::Engine;
use protocol::model::permission;
use protocol::{ChannelId, GuildId, RoleId, UserId};
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;

/// A guild made in the store: @everyone may view, send and read history but
/// not add reactions; each named member holds one role with the given bits;
/// `plain` holds none; `stranger` is no member.
struct Guild {
    gid: GuildId,
    cid: ChannelId,
    owner: String,
    owner_id: UserId,
    members: HashMap<&'static str, (String, UserId)>,
    stranger: String,
}

impl Guild {
    fn token(&self, name: &str) -> &str {
        &self.members[name].0
    }

    fn id(&self, name: &str) -> UserId {
        self.members[name].1
    }
}

async fn guild(t: &TestServer, roles: &[(&'static str, u64)]) -> Guild {
    let node = t.node();
    let (owner, owner_id) = t.user("owner").await;
    let owner_id = UserId(owner_id.parse().unwrap());
    let (stranger, _) = t.user("stranger").await;
    let gid: GuildId = node.ids.next().into();
    let cid: ChannelId = node.ids.next().into();
    let mut everyone = server::guild::everyone_role(gid);
    everyone.permissions &= !permission::ADD_REACTIONS;
    let mut role_records = vec![everyone];
    let member = |u: UserId, roles: Vec<RoleId>| store::MemberRecord { roles, ..store::MemberRecord::joined(gid, u, 1) };
    let mut members = HashMap::new();
    let mut records = vec![member(owner_id, vec![])];
    for (n, (name, bits)) in roles.iter().chain(&[("plain", 0)]).enumerate() {
        let (token, id) = t.user(name).await;
        let id = UserId(id.parse().unwrap());
        let mut held = Vec::new();
        if *bits != 0 {
            let rid: RoleId = node.ids.next().into();
            role_records.push(store::RoleRecord {
                id: rid,
                guild_id: gid,
                name: name.to_string(),
                color: 0,
                hoist: false,
                position: n as i32 + 1,
                permissions: *bits,
                mentionable: false,
                bot_id: None,
            });
            held.push(rid);
        }
        records.push(member(id, held));
        members.insert(*name, (token, id));
    }
    let g = store::GuildRecord {
        id: gid,
        name: "expressions".into(),
        icon: None,
        description: None,
        owner_id,
        system_channel_id: Some(cid),
        created_at: 1,
    };
    let channels = vec![server::guild::text_channel(cid, gid, "general".into(), 0)];
    node.store.create_guild(&store::NewGuild { guild: g, roles: role_records, channels, members: records }).await.unwrap();
    Guild { gid, cid, owner, owner_id, members, stranger }
}

fn code(v: &Value) -> Option<u64> {
    v["code"].as_u64()
}

/// A 1x1 PNG as a data URI (what both libraries send for an upload).
fn png_uri() -> String {
    const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    format!("data:image/png;base64,{PNG}")
}

/// Every new route, for the owner, a member whose role grants what it
/// needs, a member without it and a non-member. Each call gets a target of
/// its own (a fresh message, reaction, pin or emoji).
#[tokio::test]
async fn every_route_is_authorized_for_owner_holder_member_and_stranger() {
    let t = TestServer::start().await;
    let g = guild(
        &t,
        &[
            ("reactor", permission::ADD_REACTIONS),
            ("moderator", permission::MANAGE_MESSAGES),
            ("pinner", permission::PIN_MESSAGES),
            ("artist", permission::MANAGE_GUILD_EXPRESSIONS),
            ("creator", permission::CREATE_GUILD_EXPRESSIONS),
        ],
    )
    .await;
    let c = g.cid;
    #[derive(Clone, Copy, Debug)]
    enum Route {
        React,
        UnreactOwn,
        UnreactOther,
        ListReactors,
        ClearAll,
        ClearEmoji,
        Pin,
        PinOld,
        Unpin,
        UnpinOld,
        ListPins,
        ListPinsOld,
        BulkDelete,
        ListEmojis,
        GetEmoji,
        CreateEmoji,
        ModifyEmoji,
        DeleteEmoji,
    }
    use Route::*;
    // (route, member with the permission, expected status for owner, holder, plain, stranger)
    let table: &[(Route, &str, [u16; 4])] = &[
        (React, "reactor", [204, 204, 403, 403]),
        (UnreactOwn, "plain", [204, 204, 204, 403]),
        (UnreactOther, "moderator", [204, 204, 403, 403]),
        (ListReactors, "plain", [200, 200, 200, 403]),
        (ClearAll, "moderator", [204, 204, 403, 403]),
        (ClearEmoji, "moderator", [204, 204, 403, 403]),
        (Pin, "pinner", [204, 204, 403, 403]),
        (Pin, "moderator", [204, 204, 403, 403]),
        (PinOld, "pinner", [204, 204, 403, 403]),
        (Unpin, "pinner", [204, 204, 403, 403]),
        (Unpin, "moderator", [204, 204, 403, 403]),
        (UnpinOld, "pinner", [204, 204, 403, 403]),
        (ListPins, "plain", [200, 200, 200, 403]),
        (ListPinsOld, "plain", [200, 200, 200, 403]),
        (BulkDelete, "moderator", [204, 204, 403, 403]),
        (ListEmojis, "plain", [200, 200, 200, 403]),
        (GetEmoji, "plain", [200, 200, 200, 403]),
        (CreateEmoji, "artist", [201, 201, 403, 403]),
        (CreateEmoji, "creator", [201, 201, 403, 403]),
        (ModifyEmoji, "artist", [200, 200, 403, 403]),
        (DeleteEmoji, "artist", [204, 204, 403, 403]),
    ];
    let reactor = g.token("reactor").to_string();
    for &(route, holder, expected) in table {
        let callers = [g.owner.clone(), g.token(holder).to_string(), g.token("plain").to_string(), g.stranger.clone()];
        for (who, (auth, want)) in callers.iter().zip(expected).enumerate() {
            // A target of this call's own, made by the owner (and reacted to by `reactor`).
            let m = t.say(&g.owner, &c.to_string(), "target").await["id"].as_str().unwrap().to_string();
            let msg = format!("/channels/{c}/messages/{m}");
            let react = |auth: String| {
                let (t, msg) = (&t, msg.clone());
                async move { t.req(Method::PUT, &format!("{msg}/reactions/%F0%9F%91%8D/@me"), Some(&auth), None).await.0 }
            };
            let emoji = || async {
                let (s, e) = t.post(&format!("/guilds/{}/emojis", g.gid), &g.owner, json!({"name": "blob", "image": png_uri()})).await;
                assert_eq!(s, 201, "{e}");
                e["id"].as_str().unwrap().to_string()
            };
            let (method, path, body) = match route {
                React => (Method::PUT, format!("{msg}/reactions/%F0%9F%91%8D/@me"), None),
                UnreactOwn => {
                    // The caller's own reaction to take off (members may add an emoji already there).
                    assert_eq!(react(reactor.clone()).await, 204);
                    if who < 3 {
                        assert_eq!(react(auth.clone()).await, 204);
                    }
                    (Method::DELETE, format!("{msg}/reactions/%F0%9F%91%8D/@me"), None)
                }
                UnreactOther => {
                    assert_eq!(react(reactor.clone()).await, 204);
                    (Method::DELETE, format!("{msg}/reactions/%F0%9F%91%8D/{}", g.id("reactor")), None)
                }
                ListReactors => (Method::GET, format!("{msg}/reactions/%F0%9F%91%8D"), None),
                ClearAll | ClearEmoji => {
                    assert_eq!(react(reactor.clone()).await, 204);
                    let path = if matches!(route, ClearAll) { format!("{msg}/reactions") } else { format!("{msg}/reactions/%F0%9F%91%8D") };
                    (Method::DELETE, path, None)
                }
                Pin => (Method::PUT, format!("/channels/{c}/messages/pins/{m}"), None),
                PinOld => (Method::PUT, format!("/channels/{c}/pins/{m}"), None),
                Unpin | UnpinOld => {
                    assert_eq!(t.req(Method::PUT, &format!("/channels/{c}/messages/pins/{m}"), Some(&g.owner), None).await.0, 204);
                    let path =
                        if matches!(route, Unpin) { format!("/channels/{c}/messages/pins/{m}") } else { format!("/channels/{c}/pins/{m}") };
                    (Method::DELETE, path, None)
                }
                ListPins => (Method::GET, format!("/channels/{c}/messages/pins"), None),
                ListPinsOld => (Method::GET, format!("/channels/{c}/pins"), None),
                BulkDelete => {
                    let m2 = t.say(&g.owner, &c.to_string(), "target 2").await["id"].as_str().unwrap().to_string();
                    (Method::POST, format!("/channels/{c}/messages/bulk-delete"), Some(json!({"messages": [m, m2]})))
                }
                ListEmojis => (Method::GET, format!("/guilds/{}/emojis", g.gid), None),
                GetEmoji => (Method::GET, format!("/guilds/{}/emojis/{}", g.gid, emoji().await), None),
                CreateEmoji => (Method::POST, format!("/guilds/{}/emojis", g.gid), Some(json!({"name": "new_one", "image": png_uri()}))),
                ModifyEmoji => (Method::PATCH, format!("/guilds/{}/emojis/{}", g.gid, emoji().await), Some(json!({"name": "renamed"}))),
                DeleteEmoji => (Method::DELETE, format!("/guilds/{}/emojis/{}", g.gid, emoji().await), None),
            };
            let (s, v, _) = t.req(method, &path, Some(auth), body).await;
            assert_eq!(s, want, "{route:?} by {} ({holder}): {v}", ["owner", "holder", "plain", "stranger"][who]);
            if s == 403 {
                assert_eq!(code(&v), Some(if who == 3 { 50001 } else { 50013 }), "{route:?}: {v}");
            }
        }
    }
    // CREATE_GUILD_EXPRESSIONS: one's own emojis only.
    let emojis = format!("/guilds/{}/emojis", g.gid);
    let creator = g.token("creator");
    let (s, own) = t.post(&emojis, creator, json!({"name": "mine", "image": png_uri()})).await;
    assert_eq!(s, 201, "{own}");
    let own = format!("{emojis}/{}", own["id"].as_str().unwrap());
    assert_eq!(t.req(Method::PATCH, &own, Some(creator), Some(json!({"name": "still_mine"}))).await.0, 200);
    let (_, theirs) = t.post(&emojis, &g.owner, json!({"name": "theirs", "image": png_uri()})).await;
    let theirs = format!("{emojis}/{}", theirs["id"].as_str().unwrap());
    let (s, v, _) = t.req(Method::PATCH, &theirs, Some(creator), Some(json!({"name": "taken"}))).await;
    assert_eq!((s, code(&v)), (403, Some(50013)));
    assert_eq!(t.req(Method::DELETE, &theirs, Some(creator), None).await.0, 403);
    assert_eq!(t.req(Method::DELETE, &own, Some(creator), None).await.0, 204);
}

#[tokio::test]
async fn reactions_carry_me_per_requester_and_send_their_events() {
    let t = TestServer::start().await;
    let g = guild(&t, &[("reactor", permission::ADD_REACTIONS), ("moderator", permission::MANAGE_MESSAGES)]).await;
    let (c, gid) = (g.cid.to_string(), g.gid.to_string());
    // The owner's session, and a bot-like one without GUILD_MESSAGE_REACTIONS.
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&g.owner, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    let mut deaf = Gw::connect(&t.ws).await;
    deaf.identify(g.token("plain"), ALL_INTENTS & !(1 << 10)).await;
    deaf.until("GUILD_CREATE").await;
    let m = t.say(&g.owner, &c, "react to me").await["id"].as_str().unwrap().to_string();
    let r = format!("/channels/{c}/messages/{m}/reactions");
    let put = |e: &str, auth: &str| {
        let (t, path, auth) = (&t, format!("{r}/{e}/@me"), auth.to_string());
        async move { t.req(Method::PUT, &path, Some(&auth), None).await }
    };
    // discord.js encodes only Unicode emojis; discord.py encodes everything.
    assert_eq!(put("%F0%9F%91%8D", &g.owner).await.0, 204);
    let ev = gw.until("MESSAGE_REACTION_ADD").await["d"].clone();
    assert_eq!(ev["user_id"], g.owner_id.to_string());
    assert_eq!(
        (ev["message_id"].as_str(), ev["channel_id"].as_str(), ev["guild_id"].as_str()),
        (Some(m.as_str()), Some(c.as_str()), Some(gid.as_str()))
    );
    assert_eq!(ev["emoji"], json!({"id": null, "name": "👍"}));
    assert_eq!(ev["message_author_id"], g.owner_id.to_string());
    assert_eq!((ev["burst"].as_bool(), ev["type"].as_u64()), (Some(false), Some(0)));
    assert_eq!(ev["member"]["user"]["id"], g.owner_id.to_string(), "{ev}");
    assert_eq!(put("%F0%9F%91%8D", &g.owner).await.0, 204, "again: nothing changes");
    assert_eq!(put("%F0%9F%91%8D", g.token("plain")).await.0, 204, "an emoji already there needs no ADD_REACTIONS");
    assert_eq!(put("%E2%9D%A4%EF%B8%8F", g.token("reactor")).await.0, 204);
    let (s, v, _) = put("thumbsup", &g.owner).await;
    assert_eq!((s, code(&v)), (400, Some(10014)), "not an emoji");
    let (s, v, _) = put("blob%3A123", &g.owner).await;
    assert_eq!((s, code(&v)), (400, Some(10014)), "no such custom emoji");
    // `me` is the requester's, in GET message and in history.
    let seen = |auth: &str| {
        let (t, path, auth) = (&t, format!("/channels/{c}/messages/{m}"), auth.to_string());
        async move { t.get(&path, &auth).await.1["reactions"].clone() }
    };
    let mine = seen(&g.owner).await;
    assert_eq!(mine[0]["emoji"]["name"], "👍");
    assert_eq!((mine[0]["count"].as_u64(), mine[0]["me"].as_bool()), (Some(2), Some(true)));
    assert_eq!(mine[0]["count_details"], json!({"burst": 0, "normal": 2}));
    assert_eq!((mine[0]["me_burst"].as_bool(), mine[0]["burst_colors"].clone()), (Some(false), json!([])));
    assert_eq!((mine[1]["emoji"]["name"].as_str(), mine[1]["me"].as_bool()), (Some("❤️"), Some(false)));
    let theirs = seen(g.token("reactor")).await;
    assert_eq!((theirs[0]["me"].as_bool(), theirs[1]["me"].as_bool()), (Some(false), Some(true)));
    let (_, history) = t.get(&format!("/channels/{c}/messages?limit=5"), g.token("reactor")).await;
    let in_history = history.as_array().unwrap().iter().find(|x| x["id"] == m.as_str()).unwrap();
    assert_eq!(in_history["reactions"], theirs, "history renders reactions per requester too");
    let other = t.say(&g.owner, &c, "no reactions").await;
    assert!(other.get("reactions").is_none(), "a new message has none: {other}");
    // Who reacted, by user id, with after and limit.
    let (s, users) = t.get(&format!("{r}/%F0%9F%91%8D"), g.token("plain")).await;
    let mut want = vec![g.owner_id.to_string(), g.id("plain").to_string()];
    want.sort_by_key(|u| u.parse::<u64>().unwrap());
    assert_eq!(s, 200);
    assert_eq!(users.as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap()).collect::<Vec<_>>(), want);
    let (_, page) = t.get(&format!("{r}/%F0%9F%91%8D?limit=1&after={}", want[0]), &g.owner).await;
    assert_eq!(page.as_array().unwrap().len(), 1);
    assert_eq!(page[0]["id"], want[1].as_str());
    assert_eq!(t.get(&format!("{r}/%F0%9F%91%8D?type=1"), &g.owner).await.1, json!([]), "no super reactions");
    assert_eq!(t.get(&format!("{r}/%F0%9F%91%8D?limit=0"), &g.owner).await.0, 400);
    // Removals: one's own, someone else's, one emoji, all.
    assert_eq!(t.req(Method::DELETE, &format!("{r}/%F0%9F%91%8D/@me"), Some(g.token("plain")), None).await.0, 204);
    let ev = gw.until("MESSAGE_REACTION_REMOVE").await["d"].clone();
    assert_eq!((ev["user_id"].as_str(), ev["emoji"]["name"].as_str()), (Some(g.id("plain").to_string().as_str()), Some("👍")));
    assert_eq!(
        t.req(Method::DELETE, &format!("{r}/%E2%9D%A4%EF%B8%8F/{}", g.id("reactor")), Some(g.token("moderator")), None).await.0,
        204
    );
    assert_eq!(gw.until("MESSAGE_REACTION_REMOVE").await["d"]["user_id"], g.id("reactor").to_string());
    assert_eq!(put("%E2%9D%A4%EF%B8%8F", g.token("reactor")).await.0, 204);
    assert_eq!(t.req(Method::DELETE, &format!("{r}/%E2%9D%A4%EF%B8%8F"), Some(g.token("moderator")), None).await.0, 204);
    let ev = gw.until("MESSAGE_REACTION_REMOVE_EMOJI").await["d"].clone();
    assert_eq!((ev["emoji"]["name"].as_str(), ev["message_id"].as_str()), (Some("❤️"), Some(m.as_str())));
    assert_eq!(t.req(Method::DELETE, &r, Some(g.token("moderator")), None).await.0, 204);
    let ev = gw.until("MESSAGE_REACTION_REMOVE_ALL").await["d"].clone();
    assert_eq!(ev, json!({"channel_id": c, "message_id": m, "guild_id": gid}));
    assert!(seen(&g.owner).await.is_null(), "no reactions left");
    // The session without GUILD_MESSAGE_REACTIONS saw none of it.
    t.say(&g.owner, &c, "marker").await;
    let next = deaf.until_not(&["PRESENCE_UPDATE", "GUILD_MEMBER_UPDATE"]).await;
    assert_eq!((next["t"].as_str(), next["d"]["content"].as_str()), (Some("MESSAGE_CREATE"), Some("react to me")), "{next}");
    let next = deaf.until_not(&["PRESENCE_UPDATE"]).await;
    assert_eq!(next["d"]["content"], "no reactions");
    assert_eq!(deaf.until_not(&["PRESENCE_UPDATE"]).await["d"]["content"], "marker", "no reaction event before it");
}

/// Reaction events of a channel reach only those who may see it.
#[tokio::test]
async fn reaction_events_follow_the_channel_audience() {
    let t = TestServer::start().await;
    let g = guild(&t, &[]).await;
    let (s, ch) = t.post(&format!("/guilds/{}/channels", g.gid), &g.owner, json!({"name": "staff", "permission_overwrites": [{"id": g.gid.to_string(), "type": 0, "allow": "0", "deny": permission::VIEW_CHANNEL.to_string()}]})).await;
    assert_eq!(s, 201, "{ch}");
    let staff = ch["id"].as_str().unwrap().to_string();
    let mut outsider = Gw::connect(&t.ws).await;
    outsider.identify(g.token("plain"), ALL_INTENTS).await;
    outsider.until("GUILD_CREATE").await;
    let m = t.say(&g.owner, &staff, "secret").await["id"].as_str().unwrap().to_string();
    let (s, _, _) = t.req(Method::PUT, &format!("/channels/{staff}/messages/{m}/reactions/%F0%9F%91%8D/@me"), Some(&g.owner), None).await;
    assert_eq!(s, 204);
    let (s, v, _) =
        t.req(Method::PUT, &format!("/channels/{staff}/messages/{m}/reactions/%F0%9F%91%8D/@me"), Some(g.token("plain")), None).await;
    assert_eq!((s, code(&v)), (403, Some(50001)), "may not see the channel");
    t.say(&g.owner, &g.cid.to_string(), "public").await;
    let next = outsider.until_not(&["PRESENCE_UPDATE"]).await;
    assert_eq!((next["t"].as_str(), next["d"]["content"].as_str()), (Some("MESSAGE_CREATE"), Some("public")), "{next}");
}

#[tokio::test]
async fn a_message_takes_at_most_20_emojis() {
    let t = TestServer::start().await;
    let g = guild(&t, &[]).await;
    let c = g.cid.to_string();
    let m = t.say(&g.owner, &c, "many").await["id"].as_str().unwrap().to_string();
    let put = |e: char, auth: String| {
        let (t, path) = (&t, format!("/channels/{c}/messages/{m}/reactions/{}/@me", urlencode(e)));
        async move { t.req(Method::PUT, &path, Some(&auth), None).await }
    };
    // 20 distinct emojis: 😀 to 😓.
    let emojis: Vec<char> = (0x1F600..0x1F615).filter_map(char::from_u32).collect();
    for &e in &emojis[..20] {
        assert_eq!(put(e, g.owner.clone()).await.0, 204, "{e}");
    }
    let (s, v, _) = put(emojis[20], g.owner.clone()).await;
    assert_eq!((s, code(&v)), (400, Some(30010)), "{v}");
    // Another reaction with one of the 20 is fine (and needs no ADD_REACTIONS).
    assert_eq!(put(emojis[3], g.token("plain").to_string()).await.0, 204);
    let (_, msg) = t.get(&format!("/channels/{c}/messages/{m}"), &g.owner).await;
    assert_eq!(msg["reactions"].as_array().unwrap().len(), 20);
    assert_eq!(msg["reactions"][3]["count"], 2, "in order of first use");
    // Once one emoji is cleared, there is room again.
    assert_eq!(
        t.req(Method::DELETE, &format!("/channels/{c}/messages/{m}/reactions/{}", urlencode(emojis[0])), Some(&g.owner), None).await.0,
        204
    );
    assert_eq!(put(emojis[20], g.owner.clone()).await.0, 204);
}

fn urlencode(c: char) -> String {
    c.to_string().bytes().map(|b| format!("%{b:02X}")).collect()
}

#[tokio::test]
async fn custom_emojis_are_created_served_reacted_with_and_listed() {
    let t = TestServer::start().await;
    let g = guild(&t, &[("artist", permission::MANAGE_GUILD_EXPRESSIONS)]).await;
    let (gid, c) = (g.gid.to_string(), g.cid.to_string());
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&g.owner, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    let path = format!("/guilds/{gid}/emojis");
    let (s, e) = t.post(&path, g.token("artist"), json!({"name": "blob_1", "image": png_uri(), "roles": null})).await;
    assert_eq!(s, 201, "{e}");
    let id = e["id"].as_str().unwrap().to_string();
    assert_eq!((e["name"].as_str(), e["animated"].as_bool(), e["require_colons"].as_bool()), (Some("blob_1"), Some(false), Some(true)));
    assert_eq!((e["managed"].as_bool(), e["available"].as_bool(), e["roles"].clone()), (Some(false), Some(true), json!([])));
    assert_eq!(e["user"]["id"], g.id("artist").to_string(), "the creator, for one who manages emojis");
    let ev = gw.until("GUILD_EMOJIS_UPDATE").await["d"].clone();
    assert_eq!((ev["guild_id"].as_str(), ev["emojis"][0]["id"].as_str()), (Some(gid.as_str()), Some(id.as_str())));
    // The image, at Discord's CDN path on this server.
    let r = t.http.get(format!("{}/emojis/{id}.webp", t.base.trim_end_matches("/api/v10"))).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["content-type"].to_str().unwrap()), (200, "image/png"));
    assert!(r.bytes().await.unwrap().starts_with(b"\x89PNG"));
    // Listed for members (the creator only for those who manage emojis), in GET guild and GUILD_CREATE.
    let (_, list) = t.get(&path, g.token("plain")).await;
    assert_eq!((list[0]["id"].as_str(), list[0].get("user")), (Some(id.as_str()), None));
    assert_eq!(t.get(&format!("/guilds/{gid}"), &g.owner).await.1["emojis"][0]["id"], id.as_str());
    let mut late = Gw::connect(&t.ws).await;
    late.identify(g.token("plain"), ALL_INTENTS).await;
    assert_eq!(late.until("GUILD_CREATE").await["d"]["emojis"][0]["name"], "blob_1");
    // Reacting with it: name:id as discord.js sends it, name%3Aid as discord.py does.
    let m = t.say(&g.owner, &c, "custom").await["id"].as_str().unwrap().to_string();
    let (s, v, _) = t.req(Method::PUT, &format!("/channels/{c}/messages/{m}/reactions/blob_1:{id}/@me"), Some(&g.owner), None).await;
    assert_eq!(s, 204, "{v}");
    let ev = gw.until("MESSAGE_REACTION_ADD").await["d"].clone();
    assert_eq!(ev["emoji"], json!({"id": id, "name": "blob_1", "animated": false}));
    // Already on the message: no ADD_REACTIONS needed; the name in the path does not matter.
    let (s, _, _) =
        t.req(Method::PUT, &format!("/channels/{c}/messages/{m}/reactions/whatever%3A{id}/@me"), Some(g.token("artist")), None).await;
    assert_eq!(s, 204);
    assert_eq!(gw.until("MESSAGE_REACTION_ADD").await["d"]["emoji"]["name"], "blob_1");
    let (_, users) = t.get(&format!("/channels/{c}/messages/{m}/reactions/blob_1%3A{id}"), &g.owner).await;
    assert_eq!(users[0]["id"], g.owner_id.to_string());
    // Rename, limit to a role that does not exist, delete.
    let one = format!("{path}/{id}");
    let (s, v, _) = t.req(Method::PATCH, &one, Some(&g.owner), Some(json!({"name": "blob_2"}))).await;
    assert_eq!((s, v["name"].as_str()), (200, Some("blob_2")));
    assert_eq!(gw.until("GUILD_EMOJIS_UPDATE").await["d"]["emojis"][0]["name"], "blob_2");
    let (s, v, _) = t.req(Method::PATCH, &one, Some(&g.owner), Some(json!({"roles": ["123"]}))).await;
    assert_eq!((s, code(&v)), (400, Some(50035)), "{v}");
    assert_eq!(t.req(Method::DELETE, &one, Some(&g.owner), None).await.0, 204);
    assert_eq!(gw.until("GUILD_EMOJIS_UPDATE").await["d"]["emojis"], json!([]));
    let (s, v) = t.get(&one, &g.owner).await;
    assert_eq!((s, code(&v)), (404, Some(10014)));
    let r = t.http.get(format!("{}/emojis/{id}.png", t.base.trim_end_matches("/api/v10"))).send().await.unwrap();
    assert_eq!(r.status(), 404, "the image went with it");
    // The reaction stays, under the name it was made with.
    assert_eq!(t.get(&format!("/channels/{c}/messages/{m}"), &g.owner).await.1["reactions"][0]["emoji"]["name"], "blob_1");
}

#[tokio::test]
async fn emoji_uploads_are_checked_and_limited() {
    let t = TestServer::start().await;
    let g = guild(&t, &[]).await;
    let path = format!("/guilds/{}/emojis", g.gid);
    let post = |body: Value| {
        let (t, path, owner) = (&t, path.clone(), g.owner.clone());
        async move { t.post(&path, &owner, body).await }
    };
    let (s, v) = post(json!({"name": "x", "image": png_uri()})).await;
    assert_eq!((s, code(&v), v["errors"]["name"]["_errors"][0]["code"].as_str()), (400, Some(50035), Some("BASE_TYPE_BAD_LENGTH")));
    let (s, v) = post(json!({"name": "bad-name", "image": png_uri()})).await;
    assert_eq!((s, code(&v)), (400, Some(50035)));
    let (s, v) = post(json!({"name": "noimage"})).await;
    assert_eq!((s, v["errors"]["image"]["_errors"][0]["code"].as_str()), (400, Some("BASE_TYPE_REQUIRED")));
    let (s, v) = post(json!({"name": "notimage", "image": "data:image/png;base64,aGVsbG8="})).await;
    assert_eq!((s, v["errors"]["image"]["_errors"][0]["code"].as_str()), (400, Some("IMAGE_INVALID")));
    let big = [b"GIF89a".as_slice(), &vec![0u8; 300 * 1024]].concat();
    let uri = format!("data:image/gif;base64,{}", base64::engine::general_purpose::STANDARD.encode(big));
    let (s, v) = post(json!({"name": "toobig", "image": uri})).await;
    assert_eq!((s, code(&v)), (400, Some(50138)), "{v}");
    let gif = format!("data:image/gif;base64,{}", base64::engine::general_purpose::STANDARD.encode(b"GIF89a-tiny"));
    let (s, v) = post(json!({"name": "moving", "image": gif})).await;
    assert_eq!((s, v["animated"].as_bool()), (201, Some(true)), "a GIF is animated");
    // 50 static emojis; the 51st is refused, an animated one still fits.
    for n in 0..50 {
        let (s, v) = post(json!({"name": format!("e{n}"), "image": png_uri()})).await;
        assert_eq!(s, 201, "{n}: {v}");
    }
    let (s, v) = post(json!({"name": "one_more", "image": png_uri()})).await;
    assert_eq!((s, code(&v)), (400, Some(30008)));
    let (s, _) = post(json!({"name": "moving_2", "image": gif})).await;
    assert_eq!(s, 201);
    let (_, list) = t.get(&path, &g.owner).await;
    assert_eq!(list.as_array().unwrap().len(), 52);
    // Refused uploads left no files behind: one image per emoji.
    let dir = t.server.as_ref().unwrap().node.config.data_dir.join("emojis");
    assert_eq!(std::fs::read_dir(dir).unwrap().count(), 52);
}

#[tokio::test]
async fn pins_list_announce_and_stop_at_250() {
    let t = TestServer::start_with(|c| c.limits.rest_requests_per_window = 100_000).await;
    let g = guild(&t, &[]).await;
    let (c, gid) = (g.cid.to_string(), g.gid.to_string());
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&g.owner, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    let first = t.say(&g.owner, &c, "pin me").await["id"].as_str().unwrap().to_string();
    assert_eq!(t.req(Method::PUT, &format!("/channels/{c}/messages/pins/{first}"), Some(&g.owner), None).await.0, 204);
    // The system message (type 6) pointing at it, then CHANNEL_PINS_UPDATE.
    let notice = loop {
        let m = gw.until("MESSAGE_CREATE").await["d"].clone();
        if m["type"] == 6 {
            break m;
        }
    };
    assert_eq!((notice["type"].as_u64(), notice["author"]["id"].as_str()), (Some(6), Some(g.owner_id.to_string().as_str())));
    assert_eq!(notice["message_reference"]["message_id"], first.as_str());
    let ev = gw.until("CHANNEL_PINS_UPDATE").await["d"].clone();
    assert_eq!((ev["guild_id"].as_str(), ev["channel_id"].as_str()), (Some(gid.as_str()), Some(c.as_str())));
    let pinned_at = ev["last_pin_timestamp"].as_str().unwrap().to_string();
    assert!(pinned_at.ends_with("+00:00"));
    assert_eq!(t.req(Method::PUT, &format!("/channels/{c}/pins/{first}"), Some(&g.owner), None).await.0, 204, "pinned already");
    // `pinned` in GET message and history; a system message cannot be pinned.
    assert_eq!(t.get(&format!("/channels/{c}/messages/{first}"), g.token("plain")).await.1["pinned"], true);
    let (_, history) = t.get(&format!("/channels/{c}/messages?limit=2"), &g.owner).await;
    assert_eq!((history[0]["type"].as_u64(), history[1]["pinned"].as_bool()), (Some(6), Some(true)));
    let (s, v, _) =
        t.req(Method::PUT, &format!("/channels/{c}/messages/pins/{}", notice["id"].as_str().unwrap()), Some(&g.owner), None).await;
    assert_eq!((s, code(&v)), (400, Some(50021)));
    // Both listings.
    let (_, page) = t.get(&format!("/channels/{c}/messages/pins"), g.token("plain")).await;
    assert_eq!((page["has_more"].as_bool(), page["items"][0]["pinned_at"].as_str()), (Some(false), Some(pinned_at.as_str())));
    assert_eq!(
        (page["items"][0]["message"]["id"].as_str(), page["items"][0]["message"]["pinned"].as_bool()),
        (Some(first.as_str()), Some(true))
    );
    assert_eq!(t.get(&format!("/channels/{c}/pins"), &g.owner).await.1[0]["id"], first.as_str());
    // 249 more: the channel is full. (The session would fall behind meanwhile.)
    drop(gw);
    let mut ids = vec![first.clone()];
    for n in 1..250 {
        let m = t.say(&g.owner, &c, &format!("p{n}")).await["id"].as_str().unwrap().to_string();
        let (s, v, _) = t.req(Method::PUT, &format!("/channels/{c}/messages/pins/{m}"), Some(&g.owner), None).await;
        assert_eq!(s, 204, "{n}: {v}");
        ids.push(m);
    }
    let m = t.say(&g.owner, &c, "one too many").await["id"].as_str().unwrap().to_string();
    let (s, v, _) = t.req(Method::PUT, &format!("/channels/{c}/messages/pins/{m}"), Some(&g.owner), None).await;
    assert_eq!((s, code(&v)), (400, Some(30003)), "{v}");
    // Pages of 50, latest first, following pinned_at as discord.py does.
    let mut seen = Vec::new();
    let mut before = String::new();
    loop {
        let q = if before.is_empty() { String::new() } else { format!("&before={}", before.replace('+', "%2B")) };
        let (s, page) = t.get(&format!("/channels/{c}/messages/pins?limit=50{q}"), &g.owner).await;
        assert_eq!(s, 200, "{page}");
        let items = page["items"].as_array().unwrap();
        seen.extend(items.iter().map(|i| i["message"]["id"].as_str().unwrap().to_string()));
        if !page["has_more"].as_bool().unwrap() {
            break;
        }
        before = items.last().unwrap()["pinned_at"].as_str().unwrap().to_string();
    }
    let unique: std::collections::HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len());
    // Pins made within one millisecond share a pinned_at; a page boundary
    // inside such a run skips the rest of it, as on Discord.
    assert!(seen.len() >= 240 && seen.iter().all(|s| ids.contains(s)), "{} pins paged", seen.len());
    assert_eq!(t.get(&format!("/channels/{c}/pins"), &g.owner).await.1.as_array().unwrap().len(), 50);
    // Unpin: CHANNEL_PINS_UPDATE with the latest remaining pin; then there is room.
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&g.owner, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    assert_eq!(t.req(Method::DELETE, &format!("/channels/{c}/messages/pins/{first}"), Some(&g.owner), None).await.0, 204);
    let ev = gw.until("CHANNEL_PINS_UPDATE").await["d"].clone();
    let (_, latest) = t.get(&format!("/channels/{c}/messages/pins?limit=1"), &g.owner).await;
    assert_eq!(ev["last_pin_timestamp"], latest["items"][0]["pinned_at"]);
    assert_eq!(t.get(&format!("/channels/{c}/messages/{first}"), &g.owner).await.1["pinned"], false);
    assert_eq!(
        t.req(Method::DELETE, &format!("/channels/{c}/pins/{first}"), Some(&g.owner), None).await.0,
        204,
        "not pinned: nothing to do"
    );
    assert_eq!(t.req(Method::PUT, &format!("/channels/{c}/messages/pins/{m}"), Some(&g.owner), None).await.0, 204);
}

#[tokio::test]
async fn bulk_delete_checks_count_duplicates_and_age() {
    let t = TestServer::start().await;
    let g = guild(&t, &[("moderator", permission::MANAGE_MESSAGES)]).await;
    let c = g.cid.to_string();
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&g.owner, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(t.say(g.token("plain"), &c, &format!("b{n}")).await["id"].as_str().unwrap().to_string());
    }
    let path = format!("/channels/{c}/messages/bulk-delete");
    let bulk = |ids: Value| {
        let (t, path, auth) = (&t, path.clone(), g.token("moderator").to_string());
        async move { t.post(&path, &auth, json!({ "messages": ids })).await }
    };
    let (s, v) = bulk(json!([ids[0]])).await;
    assert_eq!((s, v["errors"]["messages"]["_errors"][0]["code"].as_str()), (400, Some("BASE_TYPE_MIN_LENGTH")));
    let many: Vec<String> = (0..101).map(|n| (ids[0].parse::<u64>().unwrap() + n).to_string()).collect();
    let (s, v) = bulk(json!(many)).await;
    assert_eq!((s, v["errors"]["messages"]["_errors"][0]["code"].as_str()), (400, Some("BASE_TYPE_MAX_LENGTH")));
    let (s, v) = bulk(json!([ids[0], ids[0]])).await;
    assert_eq!((s, code(&v)), (400, Some(50035)));
    // A snowflake of 15 days ago.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    let old = ((now - 15 * 24 * 3600 * 1000 - protocol::id::DISCORD_EPOCH_MS) << 22).to_string();
    let (s, v) = bulk(json!([ids[0], old])).await;
    assert_eq!((s, code(&v)), (400, Some(50034)), "{v}");
    assert_eq!(t.get(&format!("/channels/{c}/messages?limit=10"), &g.owner).await.1.as_array().unwrap().len(), 3, "nothing deleted yet");
    // Integers are ids too; one that is no message counts and is skipped.
    let nothing = (ids[2].parse::<u64>().unwrap() + 7).to_string();
    let (s, v) = bulk(json!([ids[0].parse::<u64>().unwrap(), ids[1], nothing])).await;
    assert_eq!(s, 204, "{v}");
    let ev = gw.until("MESSAGE_DELETE_BULK").await["d"].clone();
    assert_eq!(ev, json!({"ids": [ids[0], ids[1]], "channel_id": c, "guild_id": g.gid.to_string()}));
    let (_, left) = t.get(&format!("/channels/{c}/messages?limit=10"), &g.owner).await;
    assert_eq!(left.as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect::<Vec<_>>(), vec![ids[2].as_str()]);
}
