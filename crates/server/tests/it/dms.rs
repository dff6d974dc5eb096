//! DMs: opening one, talking both ways, who may read and write it,
//! READY's `private_channels`, the DIRECT_MESSAGES intent and content
//! rules, and a DM across two cluster nodes.

use reqwest::Method;
use serde_json::{json, Value};

use crate::cluster::{Cluster, VNODES};
use crate::common::*;

const DIRECT_MESSAGES: u64 = 1 << 12;
const DIRECT_MESSAGE_TYPING: u64 = 1 << 14;
const MESSAGE_CONTENT: u64 = 1 << 15;

/// Registers `name` and makes them a member of `w`'s guild: (token, id).
pub async fn member(t: &TestServer, w: &World, name: &str) -> (String, String) {
    let (token, id) = t.user(name).await;
    t.join(&w.owner, &w.channel, &token).await;
    (token, id)
}

async fn open(t: &TestServer, auth: &str, to: &str) -> (u16, Value) {
    t.post("/users/@me/channels", auth, json!({"recipient_id": to})).await
}

/// Opens (or finds) the DM of `auth` with `to`: its channel id.
async fn dm_id(t: &TestServer, auth: &str, to: &str) -> String {
    let (s, dm) = open(t, auth, to).await;
    assert_eq!(s, 200, "{dm}");
    dm["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_dm_opens_once_and_carries_messages_both_ways() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut human = Gw::connect(&t.ws).await;
    human.identify(&w.owner, ALL_INTENTS).await;
    human.until("GUILD_CREATE").await;
    // The bot has DIRECT_MESSAGES but not MESSAGE_CONTENT.
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS & !MESSAGE_CONTENT | DIRECT_MESSAGES | DIRECT_MESSAGE_TYPING).await;
    bot.until("GUILD_CREATE").await;

    let (s, dm) = open(&t, &w.bot_auth, &w.owner_id).await;
    assert_eq!(s, 200, "{dm}");
    assert_eq!(dm["type"], 1);
    assert_eq!(dm["recipients"].as_array().unwrap().len(), 1, "the others only: {dm}");
    assert_eq!(dm["recipients"][0]["id"], w.owner_id);
    assert!(dm["last_message_id"].is_null());
    assert!(dm.get("guild_id").is_none());
    let id = dm["id"].as_str().unwrap().to_string();
    // Opening again, from either side, finds the same DM.
    let (_, again) = open(&t, &w.bot_auth, &w.owner_id).await;
    assert_eq!(again["id"], id);
    let (_, theirs) = open(&t, &w.owner, &w.bot_id).await;
    assert_eq!(theirs["id"], id);
    assert_eq!(theirs["recipients"][0]["id"], w.bot_id);

    // The first message: the human learns of the DM, then gets the message.
    let m = t.say(&w.bot_auth, &id, "hello human").await;
    assert!(m.get("guild_id").is_none(), "{m}");
    let created = human.until_not(&["PRESENCE_UPDATE", "TYPING_START"]).await;
    assert_eq!(created["t"], "CHANNEL_CREATE", "{created}");
    assert_eq!(created["d"]["id"], id);
    assert_eq!(created["d"]["recipients"][0]["id"], w.bot_id);
    let got = human.until("MESSAGE_CREATE").await;
    assert_eq!(got["d"]["content"], "hello human");
    assert!(got["d"].get("guild_id").is_none(), "{got}");
    assert!(got["d"].get("member").is_none(), "{got}");
    let own = bot.until("MESSAGE_CREATE").await;
    assert_eq!(own["d"]["id"], m["id"]);

    // The answer reaches the bot with its content, without MESSAGE_CONTENT.
    let (s, v, _) = t.req(Method::POST, &format!("/channels/{id}/typing"), Some(&w.owner), None).await;
    assert_eq!(s, 204, "{v}");
    let typing = bot.until("TYPING_START").await;
    assert_eq!(typing["d"]["channel_id"], id);
    assert!(typing["d"].get("guild_id").is_none());
    let answer = t.say(&w.owner, &id, "hello bot").await;
    let got = bot.until("MESSAGE_CREATE").await;
    assert_eq!(got["d"]["content"], "hello bot", "DMs carry content whatever MESSAGE_CONTENT says: {got}");

    // History, the channel, edits and deletes.
    let (s, h) = t.get(&format!("/channels/{id}/messages"), &w.owner).await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h.as_array().unwrap().len(), 2);
    let (s, c) = t.get(&format!("/channels/{id}"), &w.owner).await;
    assert_eq!((s, &c["last_message_id"]), (200, &answer["id"]), "{c}");
    let (s, one) = t.get(&format!("/channels/{id}/messages/{}", m["id"].as_str().unwrap()), &w.owner).await;
    assert_eq!((s, &one["content"]), (200, &json!("hello human")));
    let mid = answer["id"].as_str().unwrap();
    let path = format!("/channels/{id}/messages/{mid}");
    let (s, v, _) = t.req(Method::PATCH, &path, Some(&w.bot_auth), Some(json!({"content": "not mine"}))).await;
    assert_eq!((s, &v["code"]), (403, &json!(50005)), "{v}");
    let (s, v, _) = t.req(Method::PATCH, &path, Some(&w.owner), Some(json!({"content": "edited"}))).await;
    assert_eq!((s, &v["content"]), (200, &json!("edited")), "{v}");
    assert_eq!(bot.until("MESSAGE_UPDATE").await["d"]["content"], "edited");
    let (s, _, _) = t.req(Method::DELETE, &path, Some(&w.bot_auth), None).await;
    assert_eq!(s, 403, "the other side may not delete");
    let (s, _, _) = t.req(Method::DELETE, &path, Some(&w.owner), None).await;
    assert_eq!(s, 204);
    let del = bot.until("MESSAGE_DELETE").await;
    assert_eq!(del["d"]["id"], mid);
    assert!(del["d"].get("guild_id").is_none());
    // Guild-only things are refused on a DM.
    let (s, v, _) = t.req(Method::PATCH, &format!("/channels/{id}"), Some(&w.owner), Some(json!({"name": "x"}))).await;
    assert_eq!((s, &v["code"]), (403, &json!(50003)), "{v}");
}

#[tokio::test]
async fn only_recipients_reach_a_dm_and_only_users_who_share_a_guild_open_one() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (stranger, stranger_id) = member(&t, &w, "stranger").await;
    let (loner, loner_id) = t.user("loner").await;
    let id: &str = &dm_id(&t, &w.bot_auth, &w.owner_id).await;
    let m = t.say(&w.owner, id, "private").await;
    let mid = m["id"].as_str().unwrap();

    // (who, expected status) for every DM route: recipients yes, a guild member who is not one no.
    for (who, ok) in [(&w.owner, true), (&w.bot_auth, true), (&stranger, false)] {
        let expect = |s: u16, good: u16| if ok { assert_eq!(s, good) } else { assert_eq!(s, 403) };
        expect(t.get(&format!("/channels/{id}"), who).await.0, 200);
        expect(t.get(&format!("/channels/{id}/messages"), who).await.0, 200);
        expect(t.get(&format!("/channels/{id}/messages/{mid}"), who).await.0, 200);
        expect(t.post(&format!("/channels/{id}/messages"), who, json!({"content": "hi"})).await.0, 200);
        expect(t.req(Method::POST, &format!("/channels/{id}/typing"), Some(who), None).await.0, 204);
    }
    let (s, v) = t.post(&format!("/channels/{id}/messages"), &stranger, json!({"content": "hi"})).await;
    assert_eq!(v["code"], 50001, "{s} {v}");
    let path = format!("/channels/{id}/messages/{mid}");
    let (s, v, _) = t.req(Method::PATCH, &path, Some(&stranger), Some(json!({"content": "mine now"}))).await;
    assert_eq!((s, &v["code"]), (403, &json!(50001)), "{v}");
    let (s, v, _) = t.req(Method::DELETE, &path, Some(&stranger), None).await;
    assert_eq!((s, &v["code"]), (403, &json!(50001)), "{v}");
    // A thread cannot start in a DM.
    let (s, v) = t.post(&format!("/channels/{id}/threads"), &w.owner, json!({"name": "no"})).await;
    assert_eq!((s, &v["code"]), (400, &json!(50003)), "{v}");

    // Opening: sharing no guild, oneself, nobody.
    let (s, v) = open(&t, &loner, &w.owner_id).await;
    assert_eq!((s, &v["code"]), (403, &json!(50007)), "{v}");
    let (s, v) = open(&t, &w.owner, &loner_id).await;
    assert_eq!((s, &v["code"]), (403, &json!(50007)), "{v}");
    let (s, v) = open(&t, &stranger, &stranger_id).await;
    assert_eq!((s, &v["code"]), (400, &json!(50007)), "{v}");
    let (s, v) = open(&t, &stranger, "12345").await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    assert!(v["errors"]["recipient_id"]["_errors"][0]["code"].is_string(), "{v}");
    let (s, v) = t.post("/users/@me/channels", &stranger, json!({})).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
}

/// DMs arrive on shard 0, as on Discord: a bot's shards identifying
/// together (one batched read, one token asked with and without DMs) get
/// them on shard 0 only, and no `read_state` (bots have none), while a
/// person identifying in the same moment gets both.
#[tokio::test]
async fn only_shard_zero_lists_a_bots_dms() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let id = dm_id(&t, &w.bot_auth, &w.owner_id).await;
    let mut shards = Vec::new();
    for shard in 0..2 {
        shards.push(Gw::connect(&t.ws).await);
        let g = shards.last_mut().unwrap();
        g.send(json!({"op": 2, "d": {"token": w.bot_token, "intents": BOT_INTENTS, "properties": {}, "shard": [shard, 2]}})).await;
    }
    let mut human = Gw::connect(&t.ws).await;
    let person = human.identify(&w.owner, ALL_INTENTS).await;
    assert_eq!(person["d"]["private_channels"][0]["id"], id.as_str(), "{person}");
    assert!(person["d"]["read_state"]["entries"].is_array(), "{person}");
    for (shard, g) in shards.iter_mut().enumerate() {
        let ready = g.until("READY").await;
        assert_eq!(ready["d"]["shard"], json!([shard, 2]));
        assert!(ready["d"].get("read_state").is_none(), "{ready}");
        let pcs = ready["d"]["private_channels"].as_array().unwrap();
        if shard == 0 {
            assert_eq!(pcs.len(), 1, "{ready}");
            assert_eq!(pcs[0]["id"], id.as_str());
        } else {
            assert!(pcs.is_empty(), "{ready}");
        }
    }
}

#[tokio::test]
async fn ready_lists_the_users_dms() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let id: &str = &dm_id(&t, &w.bot_auth, &w.owner_id).await;
    t.say(&w.bot_auth, id, "first").await;
    let mut human = Gw::connect(&t.ws).await;
    let ready = human.identify(&w.owner, ALL_INTENTS).await;
    let pcs = ready["d"]["private_channels"].as_array().unwrap();
    assert_eq!(pcs.len(), 1, "{ready}");
    assert_eq!(pcs[0]["id"], id);
    assert_eq!(pcs[0]["type"], 1);
    assert_eq!(pcs[0]["recipients"][0]["id"], w.bot_id);
    assert!(pcs[0]["last_message_id"].is_string());
    // Subscribed at IDENTIFY: the next message arrives without CHANNEL_CREATE.
    human.until("GUILD_CREATE").await;
    t.say(&w.bot_auth, id, "second").await;
    let next = human.until_not(&["PRESENCE_UPDATE"]).await;
    assert_eq!((&next["t"], &next["d"]["content"]), (&json!("MESSAGE_CREATE"), &json!("second")), "{next}");
    let (s, list) = t.get("/users/@me/channels", &w.owner).await;
    assert_eq!(s, 200);
    assert_eq!(list[0]["id"], id);
    // A user without DMs has none.
    let (bot2, _, _) = t.bot("other").await;
    let (_, none) = t.get("/users/@me/channels", &bot2).await;
    assert_eq!(none, json!([]));
}

#[tokio::test]
async fn dm_messages_need_the_direct_messages_intent() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let id = dm_id(&t, &w.owner, &w.bot_id).await;
    let mut with = Gw::connect(&t.ws).await;
    with.identify(&w.bot_token, BOT_INTENTS | DIRECT_MESSAGES).await;
    with.until("GUILD_CREATE").await;
    let mut without = Gw::connect(&t.ws).await;
    without.identify(&w.bot_token, BOT_INTENTS & !DIRECT_MESSAGES).await;
    without.until("GUILD_CREATE").await;

    t.say(&w.owner, &id, "for the bot").await;
    let created = with.until_not(&["PRESENCE_UPDATE"]).await;
    assert_eq!(created["t"], "CHANNEL_CREATE", "{created}");
    assert_eq!(with.until("MESSAGE_CREATE").await["d"]["content"], "for the bot");
    // The session without the intent gets neither: its next event is the
    // guild message sent after.
    t.say(&w.owner, &w.channel, "in the guild").await;
    let next = without.until_not(&["PRESENCE_UPDATE"]).await;
    assert_eq!((&next["t"], &next["d"]["content"]), (&json!("MESSAGE_CREATE"), &json!("in the guild")), "{next}");
}

#[tokio::test]
async fn a_dm_between_sessions_on_two_cluster_nodes() {
    let c = Cluster::<2>::start().await;
    let ([n1, n2], w) = (&c.nodes, &c.w);

    // The sender (bot) on node 1, the recipient (human) on node 2.
    let mut bot = Gw::connect(&n1.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS | DIRECT_MESSAGES).await;
    bot.until("GUILD_CREATE").await;
    let mut human = Gw::connect(&n2.ws).await;
    human.identify(&w.owner, ALL_INTENTS).await;
    human.until("GUILD_CREATE").await;

    let (s, dm) = open(n1, &w.bot_auth, &w.owner_id).await;
    assert_eq!(s, 200, "{dm}");
    let id = dm["id"].as_str().unwrap().to_string();
    let key = id.parse::<u64>().unwrap() | 1 << 63;
    let owner = hashring::Ring::with_vnodes([1, 2], VNODES).lookup(key).unwrap();
    eprintln!("DM actor on node {owner}");

    // Messages sent right after the open reach the other node, in order.
    for i in 0..5 {
        n1.say(&w.bot_auth, &id, &format!("to human {i}")).await;
    }
    assert_eq!(human.until_not(&["PRESENCE_UPDATE"]).await["t"], "CHANNEL_CREATE");
    for i in 0..5 {
        let m = human.until("MESSAGE_CREATE").await;
        assert_eq!(m["d"]["content"], format!("to human {i}"), "{m}");
    }
    // The answer through node 2 reaches the bot on node 1.
    n2.say(&w.owner, &id, "to bot").await;
    loop {
        let m = bot.until("MESSAGE_CREATE").await;
        if m["d"]["content"] == "to bot" {
            break;
        }
    }
    // A session that identifies later on node 1 is subscribed from READY.
    let mut later = Gw::connect(&n1.ws).await;
    let ready = later.identify(&w.owner, ALL_INTENTS).await;
    assert_eq!(ready["d"]["private_channels"][0]["id"], id);
    later.until("GUILD_CREATE").await;
    n2.say(&w.bot_auth, &id, "to both").await;
    assert_eq!(later.until("MESSAGE_CREATE").await["d"]["content"], "to both");
    // The human's own answer came back to them first.
    assert_eq!(human.until("MESSAGE_CREATE").await["d"]["content"], "to bot");
    assert_eq!(human.until("MESSAGE_CREATE").await["d"]["content"], "to both");

    // Both placements: the DM's actor on the sender's node and on the
    // recipient's. New recipients (sessions on node 2) until both were seen.
    let mut seen = [owner == 1, owner == 2];
    for i in 0.. {
        if seen == [true, true] {
            break;
        }
        assert!(i < 30, "placements seen: {seen:?}");
        let (token, uid) = crate::dms::member(n1, w, &format!("r{i}")).await;
        let mut gw = Gw::connect(&n2.ws).await;
        gw.identify(&token, ALL_INTENTS).await;
        gw.until("GUILD_CREATE").await;
        let (s, dm) = open(n1, &w.bot_auth, &uid).await;
        assert_eq!(s, 200, "{dm}");
        let id = dm["id"].as_str().unwrap().to_string();
        let at = hashring::Ring::with_vnodes([1, 2], VNODES).lookup(id.parse::<u64>().unwrap() | 1 << 63).unwrap();
        seen[at as usize - 1] = true;
        n1.say(&w.bot_auth, &id, "first").await;
        assert_eq!(gw.until("CHANNEL_CREATE").await["d"]["id"], id, "actor on node {at}");
        assert_eq!(gw.until("MESSAGE_CREATE").await["d"]["content"], "first", "actor on node {at}");
    }
}

/// A DM is routed by its own actor key, never as a guild: guild-only
/// routes such as webhooks answer 50003 there, as Discord does.
#[tokio::test]
async fn a_dm_has_no_webhooks() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (s, dm) = open(&t, &w.bot_auth, &w.owner_id).await;
    assert_eq!(s, 200, "{dm}");
    let id = dm["id"].as_str().unwrap();
    let (s, v) = t.post(&format!("/channels/{id}/webhooks"), &w.owner, json!({"name": "hook"})).await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(v["code"], 50003, "{v}");
    // The guild's own channel still takes one from its owner.
    let (s, v) = t.post(&format!("/channels/{}/webhooks", w.channel), &w.owner, json!({"name": "hook"})).await;
    assert_eq!(s, 200, "{v}");
}

/// A group DM (`recipients` of two or more): every recipient learns of it
/// at once (CHANNEL_CREATE, type 3, the others as recipients), all of them
/// get its messages, an outsider may not read it, a stranger may not be
/// added, and it is in READY's `private_channels`; each call makes a new one.
#[tokio::test]
async fn a_group_dm_reaches_every_recipient_and_no_one_else() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (ann, ann_id) = member(&t, &w, "ann").await;
    let (ben, ben_id) = member(&t, &w, "ben").await;
    let (eve, _) = member(&t, &w, "eve").await;
    let (_stranger, stranger_id) = t.user("stranger").await;
    let mut gw_ann = Gw::connect(&t.ws).await;
    gw_ann.identify(&ann, ALL_INTENTS).await;
    let mut gw_ben = Gw::connect(&t.ws).await;
    gw_ben.identify(&ben, ALL_INTENTS).await;

    let body = json!({"recipients": [ann_id, ben_id, w.owner_id]});
    let (s, g) = t.post("/users/@me/channels", &w.owner, body).await;
    assert_eq!(s, 200, "{g}");
    assert_eq!(g["type"], 3);
    let mut others: Vec<&str> = g["recipients"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap()).collect();
    others.sort_unstable();
    let mut want = vec![ann_id.as_str(), ben_id.as_str()];
    want.sort_unstable();
    assert_eq!(others, want, "the caller is not among their own recipients: {g}");
    let id = g["id"].as_str().unwrap().to_string();
    for (gw, me) in [(&mut gw_ann, &ann_id), (&mut gw_ben, &ben_id)] {
        let c = gw.until("CHANNEL_CREATE").await;
        assert_eq!((c["d"]["id"].as_str(), c["d"]["type"].as_u64()), (Some(id.as_str()), Some(3)), "{c}");
        let rs: Vec<&str> = c["d"]["recipients"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap()).collect();
        assert!(rs.contains(&w.owner_id.as_str()) && !rs.contains(&me.as_str()) && rs.len() == 2, "{c}");
    }
    // A message reaches both others.
    let m = t.say(&ann, &id, "hi all").await;
    for gw in [&mut gw_ann, &mut gw_ben] {
        let got = gw.until("MESSAGE_CREATE").await;
        assert_eq!(got["d"]["id"], m["id"]);
    }
    // Everyone inside reads it; an outsider may not.
    assert_eq!(t.get(&format!("/channels/{id}/messages"), &ben).await.0, 200);
    assert_eq!(t.get(&format!("/channels/{id}/messages"), &eve).await.0, 403);
    let (s, _) = t.post(&format!("/channels/{id}/messages"), &eve, json!({"content": "let me in"})).await;
    assert_eq!(s, 403);
    // Someone who shares no guild cannot be put in one.
    let (s, v) = t.post("/users/@me/channels", &w.owner, json!({"recipients": [ann_id, stranger_id]})).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50007)), "{v}");
    // Too many people: 30011.
    let many: Vec<String> = (0..10).map(|i| i.to_string()).collect();
    let (s, v) = t.post("/users/@me/channels", &w.owner, json!({"recipients": many})).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(30011)), "{v}");
    // A new call makes a new group; READY lists it.
    let (_, again) = t.post("/users/@me/channels", &w.owner, json!({"recipients": [ann_id, ben_id]})).await;
    assert_ne!(again["id"], g["id"]);
    let mut fresh = Gw::connect(&t.ws).await;
    let ready = fresh.identify(&ben, ALL_INTENTS).await;
    let listed = ready["d"]["private_channels"].as_array().unwrap();
    assert!(listed.iter().any(|c| c["id"] == id.as_str() && c["type"] == 3), "{listed:?}");
    // One recipient in `recipients` is the 1:1 DM.
    let (s, one) = t.post("/users/@me/channels", &w.owner, json!({"recipients": [ann_id]})).await;
    assert_eq!((s, one["type"].as_u64()), (200, Some(1)), "{one}");
}
