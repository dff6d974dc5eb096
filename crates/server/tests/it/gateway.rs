//! The gateway: HELLO/IDENTIFY/READY/GUILD_CREATE, every close code, resume,
//! intents, compression, op 8, presence, ordering, shutdown.

use std::time::Duration;

use protocol::compress::Transport;
use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn heartbeat_before_identify_is_acked() {
    let t = TestServer::start().await;
    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 1, "d": null})).await;
    let ack = g.recv().await;
    assert_eq!(ack["op"], 11);
}

#[tokio::test]
async fn ready_and_guild_create_carry_what_libraries_need() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    let ready = g.identify(&w.bot_token, BOT_INTENTS).await;
    assert_eq!(ready["s"], 1);
    let d = &ready["d"];
    assert_eq!(d["v"], 10);
    assert_eq!(d["user"]["id"], w.bot_id.as_str());
    for k in ["username", "discriminator", "avatar"] {
        assert!(d["user"].get(k).is_some(), "user.{k} missing");
    }
    assert_eq!(d["guilds"], json!([{"id": w.guild, "unavailable": true}]));
    assert!(d["session_id"].as_str().unwrap().len() >= 16);
    let url = d["resume_gateway_url"].as_str().unwrap();
    assert!(url.starts_with("ws://") && !url.contains('?'), "{url}");
    assert_eq!(d["application"]["id"], w.bot_id.as_str());
    assert!(d["application"]["flags"].is_number());

    let gc = g.recv().await;
    assert_eq!(gc["t"], "GUILD_CREATE");
    assert_eq!(gc["s"], 2);
    let d = &gc["d"];
    assert_eq!(d["id"], w.guild.as_str());
    assert_eq!(d["unavailable"], false);
    assert_eq!(d["member_count"], 2);
    let ch = &d["channels"][0];
    for k in ["id", "type", "name", "position", "permission_overwrites"] {
        assert!(ch.get(k).is_some(), "channel.{k} missing");
    }
    assert_eq!(d["roles"][0]["name"], "@everyone");
    let members = d["members"].as_array().unwrap();
    assert_eq!(members.len(), 2);
    let me = members.iter().find(|m| m["user"]["id"] == w.bot_id.as_str()).expect("the bot itself is in members");
    assert!(me["flags"].is_number() && me["roles"].is_array());
    assert!(d["joined_at"].is_string());
}

#[tokio::test]
async fn message_create_reaches_bot_and_human_sessions() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS).await;
    bot.until("GUILD_CREATE").await;
    let mut human = Gw::connect(&t.ws).await;
    human.identify(&w.owner, 1 | 512 | 32768).await;
    human.until("GUILD_CREATE").await;

    t.say(&w.owner, &w.channel, "ping").await;
    let m = bot.until("MESSAGE_CREATE").await;
    assert_eq!(m["d"]["content"], "ping");
    assert_eq!(m["d"]["author"]["id"], w.owner_id.as_str());
    assert_eq!(m["d"]["guild_id"], w.guild.as_str());
    assert!(m["d"]["member"].is_object() && m["d"]["mentions"].is_array());
    let reply = t
        .post(
            &format!("/channels/{}/messages", w.channel),
            &w.bot_auth,
            json!({"content": "pong", "message_reference": {"message_id": m["d"]["id"]}}),
        )
        .await;
    assert_eq!(reply.0, 200, "{}", reply.1);
    assert_eq!(reply.1["type"], 19);
    let h1 = human.until("MESSAGE_CREATE").await;
    assert_eq!(h1["d"]["content"], "ping");
    let h2 = human.until("MESSAGE_CREATE").await;
    assert_eq!(h2["d"]["content"], "pong");
    assert_eq!(h2["d"]["message_reference"]["message_id"], m["d"]["id"]);
}

#[tokio::test]
async fn intents_filter_events_and_redact_content() {
    let t = TestServer::start().await;
    let w = t.world().await;
    // No MESSAGE_CONTENT: content is redacted, except in messages that mention the bot.
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, 1 | 512).await;
    g.until("GUILD_CREATE").await;
    t.say(&w.owner, &w.channel, "secret").await;
    let m = g.until("MESSAGE_CREATE").await;
    assert_eq!(m["d"]["content"], "");
    t.say(&w.owner, &w.channel, &format!("hi <@{}>", w.bot_id)).await;
    let m = g.until("MESSAGE_CREATE").await;
    assert_eq!(m["d"]["content"], format!("hi <@{}>", w.bot_id));
    // The mentioned user carries its partial member, as on Discord.
    let mention = &m["d"]["mentions"][0];
    assert_eq!(mention["id"], w.bot_id.as_str());
    assert!(mention["member"]["joined_at"].is_string() && mention["member"]["roles"].is_array(), "{mention}");
    assert!(mention["member"].get("user").is_none(), "a partial member: {mention}");

    // No GUILD_MESSAGES: no message events, but typing (with its intent) arrives.
    let mut g2 = Gw::connect(&t.ws).await;
    g2.identify(&w.bot_token, 1 | 2048).await;
    g2.until("GUILD_CREATE").await;
    t.say(&w.owner, &w.channel, "unseen").await;
    let (s, _) = t.post(&format!("/channels/{}/typing", w.channel), &w.owner, json!({})).await;
    assert_eq!(s, 204);
    let next = g2.recv().await;
    assert_eq!(next["t"], "TYPING_START", "the message before it was filtered out: {next}");
}

async fn expect_close(t: &TestServer, setup: impl AsyncFnOnce(&mut Gw), code: u16) {
    let mut g = Gw::connect(&t.ws).await;
    setup(&mut g).await;
    assert_eq!(g.closed().await, Closed::Code(code));
}

#[tokio::test]
async fn close_codes() {
    let t = TestServer::start_with(|c| {
        c.gateway.client_events_per_window = 20;
        c.gateway.identify_timeout_ms = 600;
    })
    .await;
    let w = t.world().await;
    let tok = w.bot_token.clone();
    let identify = |tok: String, intents: u64| json!({"op": 2, "d": {"token": tok, "intents": intents, "properties": {}}});

    expect_close(&t, async |g| g.send(json!({"op": 99, "d": null})).await, 4001).await;
    expect_close(&t, async |g| g.send_raw("{not json").await, 4002).await;
    let big = format!("{{\"op\":1,\"d\":\"{}\"}}", "x".repeat(5000));
    expect_close(&t, async |g| g.send_raw(&big).await, 4002).await;
    expect_close(
        &t,
        async |g| g.send(json!({"op": 3, "d": {"status": "online", "since": null, "activities": [], "afk": false}})).await,
        4003,
    )
    .await;
    // No IDENTIFY in time.
    expect_close(&t, async |_| {}, 4003).await;
    expect_close(&t, async |g| g.send(identify("nope".into(), 513)).await, 4004).await;
    let t2 = tok.clone();
    expect_close(
        &t,
        async move |g| {
            g.identify(&t2, 513).await;
            g.send(identify(t2.clone(), 513)).await;
        },
        4005,
    )
    .await;
    expect_close(
        &t,
        async |g| {
            for _ in 0..25 {
                g.send(json!({"op": 1, "d": null})).await;
            }
        },
        4008,
    )
    .await;
    let t3 = tok.clone();
    expect_close(&t, async move |g| g.send(json!({"op": 2, "d": {"token": t3, "intents": 513, "shard": [2, 2]}})).await, 4010).await;
    expect_close(&t, async |g| g.send(identify(tok.clone(), 1 << 40)).await, 4013).await;
    let t4 = tok.clone();
    expect_close(&t, async move |g| g.send(json!({"op": 2, "d": {"token": t4}})).await, 4013).await;

    // Bad API version: closed right after the upgrade.
    let url = t.ws.replace("v=10", "v=3");
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    use futures_util::StreamExt;
    match ws.next().await {
        Some(Ok(tokio_tungstenite::tungstenite::Message::Close(Some(f)))) => assert_eq!(u16::from(f.code), 4012),
        other => panic!("expected close 4012, got {other:?}"),
    }
}

#[tokio::test]
async fn missed_heartbeats_close_with_4009() {
    let t = TestServer::start_with(|c| c.gateway.heartbeat_interval_ms = 300).await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, BOT_INTENTS).await;
    assert_eq!(g.closed().await, Closed::Code(4009));
}

#[tokio::test]
async fn resume_replays_missed_dispatches_then_resumed() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    let ready = g.identify(&w.bot_token, BOT_INTENTS).await;
    let session = ready["d"]["session_id"].as_str().unwrap().to_string();
    g.until("GUILD_CREATE").await;
    t.say(&w.owner, &w.channel, "one").await;
    g.until("MESSAGE_CREATE").await;
    let seen = g.seq.unwrap();
    g.close_abruptly().await;
    t.say(&w.owner, &w.channel, "two").await;
    t.say(&w.owner, &w.channel, "three").await;

    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 6, "d": {"token": w.bot_auth, "session_id": session, "seq": seen}})).await;
    // Both messages were committed before RESUME; a delivery still on its
    // way when the RESUME lands comes live right after RESUMED instead of in
    // the replay. Either way: no gap in sequence, the messages in order.
    let evs = [g.recv().await, g.recv().await, g.recv().await];
    let seqs: Vec<_> = evs.iter().map(|e| e["s"].as_u64()).collect();
    assert_eq!(seqs, [Some(seen + 1), Some(seen + 2), Some(seen + 3)], "{evs:?}");
    let said: Vec<_> = evs.iter().filter(|e| e["t"] == "MESSAGE_CREATE").map(|e| e["d"]["content"].as_str()).collect();
    assert_eq!(said, [Some("two"), Some("three")]);
    assert_eq!(evs.iter().filter(|e| e["t"] == "RESUMED").count(), 1);
    // The resumed session is live.
    t.say(&w.owner, &w.channel, "four").await;
    assert_eq!(g.until("MESSAGE_CREATE").await["d"]["content"], "four");

    // A seq from the future, or an unknown session, gets op 9 d:false.
    let mut g2 = Gw::connect(&t.ws).await;
    g2.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": 10_000}})).await;
    let inv = g2.recv().await;
    assert_eq!((inv["op"].as_u64(), inv["d"].as_bool()), (Some(9), Some(false)));
    let mut g3 = Gw::connect(&t.ws).await;
    g3.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": "nope", "seq": 1}})).await;
    let inv = g3.recv().await;
    assert_eq!((inv["op"].as_u64(), inv["d"].as_bool()), (Some(9), Some(false)));
}

#[tokio::test]
async fn session_expires_after_resume_window_and_client_1000_ends_it() {
    let t = TestServer::start_with(|c| c.gateway.resume_window_ms = 200).await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    let session = g.identify(&w.bot_token, BOT_INTENTS).await["d"]["session_id"].as_str().unwrap().to_string();
    g.close_abruptly().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": 1}})).await;
    assert_eq!(g.recv().await["d"], false);

    let mut g = Gw::connect(&t.ws).await;
    let session = g.identify(&w.bot_token, BOT_INTENTS).await["d"]["session_id"].as_str().unwrap().to_string();
    g.close_with(1000).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": 1}})).await;
    assert_eq!(g.recv().await["d"], false, "a client close with 1000 invalidates the session");
}

#[tokio::test]
async fn admin_drop_closes_with_4000_and_session_resumes() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    let session = g.identify(&w.bot_token, BOT_INTENTS).await["d"]["session_id"].as_str().unwrap().to_string();
    g.until("GUILD_CREATE").await;
    let seen = g.seq.unwrap();
    let (s, v, _) = t.req(reqwest::Method::POST, "/_throng/admin/drop-sessions", None, Some(json!({"user_id": w.bot_id}))).await;
    assert_eq!(s, 401, "admin hook needs its token: {v}");
    let resp = t
        .http
        .post(format!("{}/_throng/admin/drop-sessions", t.base))
        .header("x-throng-admin-token", "admin")
        .json(&json!({"user_id": w.bot_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.json::<serde_json::Value>().await.unwrap()["dropped"], 1);
    assert_eq!(g.closed().await, Closed::Code(4000));
    t.say(&w.owner, &w.channel, "while away").await;
    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": seen}})).await;
    // The message was committed before RESUME, but its delivery may still be
    // on its way: it comes either in the replay or live right after RESUMED.
    let (a, b) = (g.recv().await, g.recv().await);
    let (m, resumed) = if a["t"] == "RESUMED" { (b, a) } else { (a, b) };
    assert_eq!((m["t"].as_str(), m["d"]["content"].as_str()), (Some("MESSAGE_CREATE"), Some("while away")), "{m}");
    assert_eq!(resumed["t"], "RESUMED");
}

#[tokio::test]
async fn compression_streams_and_frame_types() {
    let t = TestServer::start().await;
    let w = t.world().await;
    for tr in [Transport::ZlibStream, Transport::ZstdStream, Transport::None] {
        let mut g = Gw::connect_with(&t.ws, tr).await;
        g.identify(&w.bot_token, BOT_INTENTS).await;
        g.until("GUILD_CREATE").await;
        t.say(&w.owner, &w.channel, "compressed?").await;
        assert_eq!(g.until("MESSAGE_CREATE").await["d"]["content"], "compressed?");
        if tr == Transport::None {
            assert_eq!(g.binary_frames, 0, "uncompressed sessions get text frames");
        } else {
            assert_eq!(g.text_frames, 0, "compressed sessions get binary frames only ({tr:?})");
        }
    }
}

#[tokio::test]
async fn request_guild_members_answers_with_chunks() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, BOT_INTENTS).await;
    g.until("GUILD_CREATE").await;
    g.send(json!({"op": 8, "d": {"guild_id": w.guild.parse::<u64>().unwrap(), "query": "", "limit": 0, "nonce": "n1"}})).await;
    let c = g.until("GUILD_MEMBERS_CHUNK").await;
    assert_eq!(c["d"]["chunk_index"], 0);
    assert_eq!(c["d"]["chunk_count"], 1);
    assert_eq!(c["d"]["nonce"], "n1");
    assert_eq!(c["d"]["members"].as_array().unwrap().len(), 2);
    g.send(json!({"op": 8, "d": {"guild_id": w.guild, "user_ids": [w.owner_id, "1"], "limit": 0}})).await;
    let c = g.until("GUILD_MEMBERS_CHUNK").await;
    assert_eq!(c["d"]["members"].as_array().unwrap().len(), 1);
    assert_eq!(c["d"]["not_found"], json!(["1"]));
}

/// Member search by name prefix, over REST and op 8: username, global name
/// and nickname, any case; it follows nickname changes and departures.
#[tokio::test]
async fn members_are_found_by_name_prefix_over_rest_and_op_8() {
    use reqwest::Method;
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut ids = Vec::new();
    let mut tokens = Vec::new();
    for name in ["alice", "alfred", "bob"] {
        let (tok, id) = t.user(name).await;
        t.join(&w.owner, &w.channel, &tok).await;
        ids.push(id);
        tokens.push(tok);
    }
    let g = &w.guild;
    let (s, v, _) = t.req(Method::PATCH, &format!("/guilds/{g}/members/@me"), Some(&tokens[2]), Some(json!({"nick": "Alpha"}))).await;
    assert_eq!(s, 200, "{v}");
    let found = |v: &Value| -> Vec<String> {
        let mut out: Vec<String> = v.as_array().unwrap().iter().map(|m| m["user"]["id"].as_str().unwrap().to_string()).collect();
        out.sort();
        out
    };
    let mut al = ids.clone();
    al.sort();
    let (s, v) = t.get(&format!("/guilds/{g}/members/search?query=AL&limit=10"), &w.owner).await;
    assert_eq!((s, found(&v)), (200, al.clone()), "usernames and a nickname, any case: {v}");
    let (s, v) = t.get(&format!("/guilds/{g}/members/search?query=al"), &w.bot_auth).await;
    assert_eq!((s, v.as_array().map(Vec::len)), (200, Some(1)), "limit 1 by default: {v}");
    let (s, v) = t.get(&format!("/guilds/{g}/members/search?limit=5"), &w.owner).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
    assert!(v["errors"]["query"].is_object(), "{v}");
    let (s, v) = t.get(&format!("/guilds/{g}/members/search?query=a&limit=1001"), &w.owner).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
    let (stranger, _) = t.user("alien").await;
    let (s, v) = t.get(&format!("/guilds/{g}/members/search?query=al"), &stranger).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50001)), "{v}");

    // op 8 with a query.
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS).await;
    bot.until("GUILD_CREATE").await;
    bot.send(json!({"op": 8, "d": {"guild_id": g, "query": "Al", "limit": 0, "nonce": "q"}})).await;
    let c = bot.until("GUILD_MEMBERS_CHUNK").await;
    assert_eq!((c["d"]["nonce"].as_str(), found(&c["d"]["members"])), (Some("q"), al.clone()), "{c}");

    // A new nickname: found by it, not by the old one; a departure: gone.
    let (s, _, _) = t.req(Method::PATCH, &format!("/guilds/{g}/members/@me"), Some(&tokens[2]), Some(json!({"nick": "Zed"}))).await;
    assert_eq!(s, 200);
    let (_, v) = t.get(&format!("/guilds/{g}/members/search?query=al&limit=10"), &w.owner).await;
    assert_eq!(found(&v).len(), 2, "{v}");
    let (_, v) = t.get(&format!("/guilds/{g}/members/search?query=zE&limit=10"), &w.owner).await;
    assert_eq!(found(&v), vec![ids[2].clone()]);
    let (s, _, _) = t.req(Method::DELETE, &format!("/users/@me/guilds/{g}"), Some(&tokens[2]), None).await;
    assert_eq!(s, 204);
    let (_, v) = t.get(&format!("/guilds/{g}/members/search?query=ze&limit=10"), &w.owner).await;
    assert_eq!(found(&v), Vec::<String>::new(), "{v}");
}

#[tokio::test]
async fn presence_online_and_offline_reach_presence_intent_only() {
    let t = TestServer::start_with(|c| c.gateway.resume_window_ms = 100).await;
    let w = t.world().await;
    let mut watcher = Gw::connect(&t.ws).await;
    watcher.identify(&w.bot_token, BOT_INTENTS).await;
    watcher.until("GUILD_CREATE").await;
    let mut blind = Gw::connect(&t.ws).await;
    blind.identify(&w.bot_token, 1 | 512).await;
    blind.until("GUILD_CREATE").await;

    let mut human = Gw::connect(&t.ws).await;
    human.identify(&w.owner, ALL_INTENTS).await;
    let p = watcher.until("PRESENCE_UPDATE").await;
    assert_eq!((p["d"]["user"]["id"].as_str(), p["d"]["status"].as_str()), (Some(w.owner_id.as_str()), Some("online")));
    human.send(json!({"op": 3, "d": {"since": null, "activities": [], "status": "dnd", "afk": false}})).await;
    assert_eq!(watcher.until("PRESENCE_UPDATE").await["d"]["status"], "dnd");
    human.close_abruptly().await;
    assert_eq!(watcher.until("PRESENCE_UPDATE").await["d"]["status"], "offline");
    t.say(&w.owner, &w.channel, "marker").await;
    assert_eq!(blind.recv().await["t"], "MESSAGE_CREATE", "no PRESENCE_UPDATE without GUILD_PRESENCES");
}

#[tokio::test]
async fn joining_a_guild_sends_guild_create_and_member_add() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (joiner, joiner_id) = t.user("joiner").await;
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS).await;
    bot.until("GUILD_CREATE").await;
    let mut j = Gw::connect(&t.ws).await;
    let ready = j.identify(&joiner, ALL_INTENTS).await;
    assert_eq!(ready["d"]["guilds"], json!([]));
    let (s, inv) = t.post(&format!("/channels/{}/invites", w.channel), &w.owner, json!({"max_age": 0})).await;
    assert_eq!(s, 200, "{inv}");
    let code = inv["code"].as_str().unwrap();
    let (s, _) = t.post(&format!("/invites/{code}"), &joiner, json!({})).await;
    assert_eq!(s, 200);
    let gc = j.until("GUILD_CREATE").await;
    assert_eq!(gc["d"]["id"], w.guild.as_str());
    let add = bot.until("GUILD_MEMBER_ADD").await;
    assert_eq!(add["d"]["user"]["id"], joiner_id.as_str());
    assert_eq!(add["d"]["guild_id"], w.guild.as_str());
    t.say(&w.owner, &w.channel, "welcome").await;
    assert_eq!(j.until("MESSAGE_CREATE").await["d"]["content"], "welcome");
    // Kicked: GUILD_DELETE to the member, GUILD_MEMBER_REMOVE to others.
    let (s, _, _) = t.req(reqwest::Method::DELETE, &format!("/guilds/{}/members/{joiner_id}", w.guild), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    assert_eq!(j.until("GUILD_DELETE").await["d"]["id"], w.guild.as_str());
    assert_eq!(bot.until("GUILD_MEMBER_REMOVE").await["d"]["user"]["id"], joiner_id.as_str());
}

#[tokio::test]
async fn concurrent_publishers_every_session_sees_one_order() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut sessions = Vec::new();
    for _ in 0..3 {
        let mut g = Gw::connect(&t.ws).await;
        g.identify(&w.bot_token, BOT_INTENTS).await;
        g.until("GUILD_CREATE").await;
        sessions.push(g);
    }
    let mut publishers = Vec::new();
    for p in 0..4 {
        let (http, base, auth, ch) = (t.http.clone(), t.base.clone(), w.owner.clone(), w.channel.clone());
        publishers.push(tokio::spawn(async move {
            for i in 0..25 {
                let r = http
                    .post(format!("{base}/channels/{ch}/messages"))
                    .header("authorization", &auth)
                    .json(&json!({"content": format!("{p}-{i}")}))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
            }
        }));
    }
    for p in publishers {
        p.await.unwrap();
    }
    let mut orders = Vec::new();
    for g in &mut sessions {
        let mut seen = Vec::new();
        let mut last_seq = 0;
        while seen.len() < 100 {
            let m = g.until("MESSAGE_CREATE").await;
            let s = m["s"].as_u64().unwrap();
            assert!(s > last_seq, "sequence increases");
            last_seq = s;
            seen.push(m["d"]["content"].as_str().unwrap().to_string());
        }
        // Per publisher, messages arrive in the order that publisher sent them.
        for p in 0..4 {
            let mine: Vec<_> = seen.iter().filter(|c| c.starts_with(&format!("{p}-"))).cloned().collect();
            assert_eq!(mine, (0..25).map(|i| format!("{p}-{i}")).collect::<Vec<_>>());
        }
        orders.push(seen);
    }
    assert!(orders.windows(2).all(|o| o[0] == o[1]), "every session sees the guild's one order");
}

#[tokio::test]
async fn graceful_shutdown_sends_reconnect_then_resumable_close() {
    let mut t = TestServer::start().await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, BOT_INTENTS).await;
    g.until("GUILD_CREATE").await;
    let shutdown = tokio::spawn(async move {
        t.shutdown().await;
        t
    });
    let v = g.recv().await;
    assert_eq!(v["op"], 7, "RECONNECT first: {v}");
    assert_eq!(g.closed().await, Closed::Code(4000));
    shutdown.await.unwrap();
}

#[tokio::test]
async fn slow_consumer_is_closed_resumably_and_catches_up_on_resume() {
    let t = TestServer::start_with(|c| {
        c.gateway.max_pending_write_bytes = 64 * 1024;
        c.gateway.slow_consumer_grace_ms = 100;
    })
    .await;
    let w = t.world().await;
    let mut slow = Gw::connect(&t.ws).await;
    let session = slow.identify(&w.bot_token, BOT_INTENTS).await["d"]["session_id"].as_str().unwrap().to_string();
    slow.until("GUILD_CREATE").await;
    let seen = slow.seq.unwrap();
    // A reader that keeps up, to show the slow one does not hold it back.
    let mut fast = Gw::connect(&t.ws).await;
    fast.identify(&w.owner, BOT_INTENTS).await;
    fast.until("GUILD_CREATE").await;
    // Stop reading; post enough to overflow the socket buffers and the pending bound.
    let big = "y".repeat(1900);
    let stats = || async {
        let r = t.http.get(format!("{}/_throng/admin/stats", t.base)).header("x-throng-admin-token", "admin").send().await.unwrap();
        r.json::<Value>().await.unwrap()
    };
    let mut posted = 0;
    while posted < 2000 {
        t.say(&w.owner, &w.channel, &big).await;
        posted += 1;
        assert_eq!(fast.until("MESSAGE_CREATE").await["d"]["content"], big.as_str(), "the fast reader gets every message in order");
        if posted % 50 == 0 && stats().await["slow_consumer_closes"] == 1 {
            break;
        }
    }
    let st = stats().await;
    assert_eq!(st["slow_consumer_closes"], 1, "the stalled session was closed: {st}");
    // Memory stayed bounded: the queue never held much more than the bound before the close.
    assert!(st["pending_bytes_max"].as_u64().unwrap() < 1 << 20, "{st}");
    // Reading again, the client gets what was in flight, then the resumable close code.
    let end = loop {
        match slow.next().await {
            Ok(_) => continue,
            Err(c) => break c,
        }
    };
    assert_eq!(end, Closed::Code(4000));
    // The session resumes from `seen` and gets every message exactly once, in order.
    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": seen}})).await;
    let (mut got, mut next) = (0, seen + 1);
    loop {
        let v = g.recv().await;
        if v["t"] == "RESUMED" {
            break;
        }
        assert_eq!(v["s"].as_u64(), Some(next), "replay in sequence order, no gaps");
        next += 1;
        // The fast reader's own presence is in the stream too.
        if v["t"] == "MESSAGE_CREATE" {
            got += 1;
        }
    }
    assert_eq!(got, posted, "every message replayed exactly once");
}

#[tokio::test]
async fn heartbeat_seq_trims_the_replay_buffer() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    let session = g.identify(&w.bot_token, BOT_INTENTS).await["d"]["session_id"].as_str().unwrap().to_string();
    g.until("GUILD_CREATE").await;
    t.say(&w.owner, &w.channel, "acked").await;
    g.until("MESSAGE_CREATE").await;
    let acked = g.seq.unwrap();
    g.send(json!({"op": 1, "d": acked})).await;
    assert_eq!(g.recv().await["op"], 11);
    g.close_abruptly().await;
    t.say(&w.owner, &w.channel, "after").await;
    // Everything up to the heartbeat's seq is gone: resuming from before it is refused ...
    let mut early = Gw::connect(&t.ws).await;
    early.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": acked - 1}})).await;
    assert_eq!(early.recv().await["d"], false);
    // ... and resuming from it replays only what came after.
    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": acked}})).await;
    // "after" comes in the replay or, if its delivery was still on its way,
    // live right after RESUMED: either way it is the next sequence but one.
    let (a, b) = (g.recv().await, g.recv().await);
    let (m, resumed) = if a["t"] == "RESUMED" { (b, a) } else { (a, b) };
    assert_eq!(m["d"]["content"].as_str(), Some("after"), "{m}");
    assert_eq!(resumed["t"], "RESUMED");
    let mut seqs = [m["s"].as_u64().unwrap(), resumed["s"].as_u64().unwrap()];
    seqs.sort();
    assert_eq!(seqs, [acked + 1, acked + 2], "nothing from before the heartbeat's seq is replayed");
}

#[tokio::test]
async fn gateway_connections_are_capped_per_process() {
    let t = TestServer::start_with(|c| c.limits.max_gateway_connections = 2).await;
    let a = Gw::connect(&t.ws).await;
    let _b = Gw::connect(&t.ws).await;
    match tokio_tungstenite::connect_async(t.ws.clone()).await {
        Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
            assert_eq!(r.status(), 503);
            assert!(r.headers().contains_key("retry-after"));
        }
        other => panic!("expected 503, got {:?}", other.map(|_| ())),
    }
    // A closed socket frees its slot.
    a.close_abruptly().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    Gw::connect(&t.ws).await;
}

#[tokio::test]
async fn identify_admission_is_bounded_and_answers_op9_true() {
    let t = TestServer::start_with(|c| c.gateway.identify_concurrency = 2).await;
    let w = t.world().await;
    // Every admission slot taken, as by IDENTIFYs in flight.
    let held = t.node().identify_permits.try_acquire_many(2).unwrap();
    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 2, "d": {"token": w.bot_token, "intents": BOT_INTENTS, "properties": {}}})).await;
    let busy = g.recv().await;
    assert_eq!(busy["op"], 9);
    assert_eq!(busy["d"], true, "resumable/retryable: the client may identify again");
    // The socket stays open, and once a slot is free the retry succeeds.
    drop(held);
    let ready = g.identify(&w.bot_token, BOT_INTENTS).await;
    assert_eq!(ready["t"], "READY");
    let session = ready["d"]["session_id"].as_str().unwrap().to_string();
    g.until("GUILD_CREATE").await;
    let seq = g.seq.unwrap();
    g.close_abruptly().await;
    // RESUMEs share the bound: busy is op 9 `d:true`, and the session waits.
    let held = t.node().identify_permits.try_acquire_many(2).unwrap();
    let mut r = Gw::connect(&t.ws).await;
    let resume = json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": seq}});
    r.send(resume.clone()).await;
    let busy = r.recv().await;
    assert_eq!((busy["op"].as_u64(), busy["d"].as_bool()), (Some(9), Some(true)), "{busy}");
    drop(held);
    r.send(resume).await;
    assert_eq!(r.until("RESUMED").await["t"], "RESUMED");
}

#[tokio::test]
async fn a_delivery_backlog_over_its_bound_refuses_messages_with_503_and_commits_nothing() {
    // Workers hold each batch for 1.5 s, so a fanned-out message stays in
    // the backlog long enough to be seen; one message to two sessions is
    // more than the bound.
    let t = TestServer::start_with(|c| {
        c.gateway.delivery_backlog_max = 1;
        c.gateway.delivery_linger_us = 1_500_000;
        // The clients do not heartbeat.
        c.gateway.heartbeat_interval_ms = 600_000;
    })
    .await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, BOT_INTENTS).await;
    g.until("GUILD_CREATE").await;
    let mut owner = Gw::connect(&t.ws).await;
    owner.identify(&w.owner, ALL_INTENTS).await;
    owner.until("GUILD_CREATE").await;
    let path = format!("/channels/{}/messages", w.channel);
    let node = t.node().clone();
    // What the sessions' start queued (the owner's presence to the bot)
    // is written first: the bound is about the message below.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while node.delivery.backlog() > 0 {
        assert!(std::time::Instant::now() < deadline, "the start's deliveries never left the queue");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    t.say(&w.owner, &w.channel, "first").await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while node.delivery.backlog() < 2 {
        assert!(std::time::Instant::now() < deadline, "the first message never reached the delivery queue");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (s, v, h) = t.req(reqwest::Method::POST, &path, Some(&w.owner), Some(json!({"content": "refused"}))).await;
    assert_eq!(s, 503, "{v}");
    assert_eq!(h.get("retry-after").map(|v| v.to_str().unwrap()), Some("1"));
    assert!(v["retry_after"].is_number() && v["message"].is_string(), "Discord's error body: {v}");
    // Once the backlog is written the first message arrives, and a retry goes through.
    assert_eq!(g.until("MESSAGE_CREATE").await["d"]["content"], "first");
    t.say(&w.owner, &w.channel, "retried").await;
    assert_eq!(g.until("MESSAGE_CREATE").await["d"]["content"], "retried");
    // The refused message was never committed.
    let (s, v) = t.get(&format!("{path}?limit=10"), &w.owner).await;
    assert_eq!(s, 200, "{v}");
    let contents: Vec<&str> = v.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents, vec!["retried", "first"]);
}

/// Events of a channel reach only the sessions that may see it: messages,
/// typing and the channel's own create/update follow VIEW_CHANNEL after
/// overwrites, as REST reads already did.
#[tokio::test]
async fn events_of_a_hidden_channel_reach_only_those_who_may_see_it() {
    let t = TestServer::start_with(|c| c.gateway.heartbeat_interval_ms = 600_000).await;
    let w = t.world().await;
    let (s, inv) = t.post(&format!("/channels/{}/invites", w.channel), &w.owner, json!({})).await;
    assert_eq!(s, 200, "{inv}");
    let (member, _) = t.user("member").await;
    assert_eq!(t.post(&format!("/invites/{}", inv["code"].as_str().unwrap()), &member, json!({})).await.0, 200);
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS | 1 << 11).await;
    bot.until("GUILD_CREATE").await;
    let mut m = Gw::connect(&t.ws).await;
    m.identify(&member, ALL_INTENTS).await;
    m.until("GUILD_CREATE").await;

    // @everyone may not view it; the bot may, by a member overwrite.
    let hidden = json!([
        {"id": w.guild, "type": 0, "allow": "0", "deny": "1024"},
        {"id": w.bot_id, "type": 1, "allow": "1024", "deny": "0"},
    ]);
    let (s, c) =
        t.post(&format!("/guilds/{}/channels", w.guild), &w.owner, json!({"name": "secret", "permission_overwrites": hidden})).await;
    assert_eq!(s, 201, "{c}");
    let secret = c["id"].as_str().unwrap().to_string();
    t.say(&w.owner, &secret, "secret words").await;
    assert_eq!(t.post(&format!("/channels/{secret}/typing"), &w.owner, json!({})).await.0, 204);
    t.say(&w.owner, &w.channel, "public words").await;

    // The bot sees all of it, in order.
    assert_eq!(bot.until("CHANNEL_CREATE").await["d"]["id"], secret.as_str());
    assert_eq!(bot.until("MESSAGE_CREATE").await["d"]["content"], "secret words");
    assert_eq!(bot.until("TYPING_START").await["d"]["channel_id"], secret.as_str());
    assert_eq!(bot.until("MESSAGE_CREATE").await["d"]["content"], "public words");
    // The member sees none of it: the next event it gets is the public message.
    let next = m.until_not(&["PRESENCE_UPDATE", "GUILD_MEMBER_LIST_UPDATE"]).await;
    assert_eq!((next["t"].as_str(), next["d"]["content"].as_str()), (Some("MESSAGE_CREATE"), Some("public words")), "{next}");

    // Hidden from the bot too: it gets CHANNEL_DELETE (as on Discord), then nothing more.
    let only_owner = json!([{"id": w.guild, "type": 0, "allow": "0", "deny": "1024"}]);
    let (s, v, _) = t
        .req(reqwest::Method::PATCH, &format!("/channels/{secret}"), Some(&w.owner), Some(json!({"permission_overwrites": only_owner})))
        .await;
    assert_eq!(s, 200, "{v}");
    let gone = bot.until_not(&["PRESENCE_UPDATE", "GUILD_MEMBER_LIST_UPDATE"]).await;
    assert_eq!((gone["t"].as_str(), gone["d"]["id"].as_str()), (Some("CHANNEL_DELETE"), Some(secret.as_str())), "{gone}");
    t.say(&w.owner, &secret, "owner only").await;
    t.say(&w.owner, &w.channel, "public again").await;
    let next = bot.until_not(&["PRESENCE_UPDATE", "GUILD_MEMBER_LIST_UPDATE"]).await;
    assert_eq!(next["d"]["content"], "public again", "{next}");
    let next = m.until_not(&["PRESENCE_UPDATE", "GUILD_MEMBER_LIST_UPDATE"]).await;
    assert_eq!(next["d"]["content"], "public again", "the member never saw the channel change: {next}");

    // Opened to everyone: the member gets CHANNEL_CREATE and what follows.
    let (s, v, _) =
        t.req(reqwest::Method::PATCH, &format!("/channels/{secret}"), Some(&w.owner), Some(json!({"permission_overwrites": []}))).await;
    assert_eq!(s, 200, "{v}");
    let shown = m.until_not(&["PRESENCE_UPDATE", "GUILD_MEMBER_LIST_UPDATE"]).await;
    assert_eq!((shown["t"].as_str(), shown["d"]["id"].as_str()), (Some("CHANNEL_CREATE"), Some(secret.as_str())), "{shown}");
    t.say(&w.owner, &secret, "now public").await;
    let got = m.until("MESSAGE_CREATE").await;
    assert_eq!((got["d"]["channel_id"].as_str(), got["d"]["content"].as_str()), (Some(secret.as_str()), Some("now public")));
}

/// READY and GUILD_CREATE are built for one session: once written they
/// leave its replay buffer instead of waiting for a heartbeat. Resuming
/// from after them still works (and replays what followed); resuming from
/// before them is refused, and the client identifies again.
#[tokio::test]
async fn own_dispatches_leave_the_replay_buffer_once_written() {
    let t = TestServer::start_with(|c| c.gateway.heartbeat_interval_ms = 600_000).await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    let ready = g.identify(&w.bot_token, BOT_INTENTS).await;
    let (session, ready_seq) = (ready["d"]["session_id"].as_str().unwrap().to_string(), ready["s"].as_u64().unwrap());
    g.until("GUILD_CREATE").await;
    let created = g.seq.unwrap();
    let handle = t.sessions().get(&session).expect("session is registered");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while handle.replay_size() != (0, 0) {
        assert!(std::time::Instant::now() < deadline, "READY and GUILD_CREATE still held: {:?}", handle.replay_size());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.say(&w.owner, &w.channel, "kept").await;
    g.until("MESSAGE_CREATE").await;
    assert_eq!(handle.replay_size().0, 1, "a shared event stays until acknowledged");
    g.close_abruptly().await;
    // From before GUILD_CREATE: refused, not resumable.
    let mut early = Gw::connect(&t.ws).await;
    early.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": ready_seq}})).await;
    let refused = early.recv().await;
    assert_eq!((refused["op"].as_u64(), refused["d"].as_bool()), (Some(9), Some(false)), "{refused}");
    // From after it: the message is replayed, then RESUMED.
    let mut r = Gw::connect(&t.ws).await;
    r.send(json!({"op": 6, "d": {"token": w.bot_token, "session_id": session, "seq": created}})).await;
    let m = r.until("MESSAGE_CREATE").await;
    assert_eq!(m["d"]["content"], "kept");
    r.until("RESUMED").await;
}

/// A new session's READY waits for its guilds' GUILD_CREATEs
/// (`gateway.ready_hold_ms`) and leaves with them in one socket write, as
/// soon as the last one is there (the hold here is a minute: the test's
/// reads would time out long before it); a session that gets no
/// GUILD_CREATE (no GUILDS intent) is not held at all.
#[tokio::test]
async fn ready_leaves_with_the_sessions_guild_creates_in_one_write() {
    let t = TestServer::start_with(|c| c.gateway.ready_hold_ms = 60_000).await;
    let w = t.world().await;
    let writes = || async {
        let r = t.http.get(format!("{}/_throng/admin/stats", t.base)).header("x-throng-admin-token", "admin").send().await.unwrap();
        r.json::<Value>().await.unwrap()["writes"].as_u64().unwrap()
    };
    let before = writes().await;
    let mut g = Gw::connect(&t.ws).await;
    let ready = g.identify(&w.bot_token, BOT_INTENTS).await;
    assert_eq!(ready["d"]["guilds"].as_array().unwrap().len(), 1, "{ready}");
    let created = g.until("GUILD_CREATE").await;
    assert_eq!(created["d"]["id"], w.guild.as_str());
    assert_eq!(writes().await - before, 1, "READY and GUILD_CREATE in one write");

    // Without GUILDS no GUILD_CREATE comes, so READY does not wait for one.
    let mut m = Gw::connect(&t.ws).await;
    let ready = m.identify(&w.owner, 1 << 9).await;
    assert_eq!(ready["d"]["guilds"].as_array().unwrap().len(), 1, "{ready}");
    // The session works: it gets the guild's messages.
    t.say(&w.bot_auth, &w.channel, "after READY").await;
    assert_eq!(m.until("MESSAGE_CREATE").await["d"]["content"], "after READY");
}
