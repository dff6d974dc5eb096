//! Defects that broke real client libraries, each pinned by a test: role
//! `colors`, lenient IDENTIFY presence, start-up routes, explicit nulls in
//! optional fields, the client's own close code, replies' referenced message.

use reqwest::Method;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn roles_carry_colors_in_rest_and_guild_create() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (s, roles) = t.get(&format!("/guilds/{}/roles", w.guild), &w.owner).await;
    assert_eq!(s, 200);
    let everyone = &roles[0];
    assert_eq!(everyone["colors"], json!({"primary_color": 0, "secondary_color": null, "tertiary_color": null}), "{everyone}");
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, BOT_INTENTS).await;
    let gc = g.until("GUILD_CREATE").await;
    for r in gc["d"]["roles"].as_array().unwrap() {
        assert_eq!(r["colors"]["primary_color"], r["color"], "{r}");
        assert!(r["colors"]["secondary_color"].is_null() && r["colors"].get("tertiary_color").is_some(), "{r}");
    }
}

#[tokio::test]
async fn identify_presence_is_as_lenient_as_discord() {
    let t = TestServer::start().await;
    let w = t.world().await;
    for presence in [
        json!({"status": "", "since": "soon", "activities": null, "afk": "no"}),
        json!({"status": null, "since": 1.5e12}),
        json!({"since": 0, "activities": [{"name": "x", "type": 0}], "afk": false}),
        json!({"status": "dnd", "activities": {"not": "a list"}}),
    ] {
        let mut g = Gw::connect(&t.ws).await;
        g.send(json!({"op": 2, "d": {"token": w.bot_token, "intents": BOT_INTENTS, "properties": {}, "presence": presence}})).await;
        let ready = g.recv().await;
        assert_eq!(ready["t"], "READY", "presence {presence} was refused: {ready}");
        // op 3 takes the same shapes.
        g.send(json!({"op": 3, "d": presence})).await;
        g.send(json!({"op": 1, "d": g.seq})).await;
        loop {
            match g.next().await {
                Ok(v) if v["op"] == 11 => break,
                Ok(_) => continue,
                Err(c) => panic!("op 3 {presence} closed the session: {c:?}"),
            }
        }
    }
}

#[tokio::test]
async fn routes_libraries_call_at_start_up_answer_empty() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let g = &w.guild;
    let app = &w.bot_id;
    for (path, want) in [
        (format!("/applications/{app}/commands"), json!([])),
        (format!("/applications/{app}/guilds/{g}/commands"), json!([])),
        (format!("/applications/{app}/guilds/{g}/commands/permissions"), json!([])),
        (format!("/applications/{app}/entitlements"), json!([])),
        (format!("/applications/{app}/emojis"), json!({"items": []})),
        ("/soundboard-default-sounds".to_string(), json!([])),
        (format!("/guilds/{g}/soundboard-sounds"), json!({"items": []})),
        (format!("/guilds/{g}/emojis"), json!([])),
        (format!("/guilds/{g}/stickers"), json!([])),
        ("/sticker-packs".to_string(), json!({"sticker_packs": []})),
        ("/voice/regions".to_string(), json!([])),
    ] {
        let (s, v) = t.get(&path, &w.bot_auth).await;
        assert_eq!((s, &v), (200, &want), "{path}");
        let (s, _, _) = t.req(Method::GET, &path, None, None).await;
        assert_eq!(s, 401, "{path} without a token");
    }
}

#[tokio::test]
async fn explicit_null_in_optional_fields_reads_as_absent() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let first = t.say(&w.owner, &w.channel, "first").await;
    let path = format!("/channels/{}/messages", w.channel);
    let (s, v) = t
        .post(
            &path,
            &w.owner,
            json!({"content": "reply", "tts": null, "nonce": null, "embeds": null, "components": null, "flags": null,
                   "message_reference": {"type": null, "message_id": first["id"], "channel_id": null, "guild_id": null,
                                         "fail_if_not_exists": null}}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["tts"], false);
    assert_eq!(v["type"], 19);
    // A required field that is null is still a form error.
    let (s, v) = t.post("/guilds", &w.owner, json!({"name": null})).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
}

#[tokio::test]
async fn replies_carry_the_referenced_message() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, BOT_INTENTS | (1 << 15)).await;
    g.until("GUILD_CREATE").await;
    let first = t.say(&w.owner, &w.channel, "question").await;
    g.until("MESSAGE_CREATE").await;
    let path = format!("/channels/{}/messages", w.channel);
    let (s, reply) = t.post(&path, &w.bot_auth, json!({"content": "answer", "message_reference": {"message_id": first["id"]}})).await;
    assert_eq!(s, 200, "{reply}");
    assert_eq!(reply["type"], 19);
    assert_eq!(reply["referenced_message"]["id"], first["id"], "{reply}");
    assert_eq!(reply["referenced_message"]["content"], "question");
    let ev = g.until("MESSAGE_CREATE").await;
    assert_eq!(ev["d"]["referenced_message"]["id"], first["id"], "{ev}");
    // A plain message has no such key; reading history gives it again.
    assert!(first.get("referenced_message").is_none(), "{first}");
    let (_, got) = t.get(&format!("{path}/{}", reply["id"].as_str().unwrap()), &w.owner).await;
    assert_eq!(got["referenced_message"]["content"], "question", "{got}");
    // Once the original is deleted, the reply's reference reads as null.
    let (s, _, _) = t.req(Method::DELETE, &format!("{path}/{}", first["id"].as_str().unwrap()), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    let (_, got) = t.get(&format!("{path}/{}", reply["id"].as_str().unwrap()), &w.owner).await;
    assert!(got.get("referenced_message").is_some_and(|r| r.is_null()), "{got}");
}

#[tokio::test]
async fn a_clients_own_close_code_is_echoed() {
    let t = TestServer::start().await;
    let w = t.world().await;
    for code in [1000u16, 1001, 4321] {
        let mut g = Gw::connect(&t.ws).await;
        g.identify(&w.bot_token, BOT_INTENTS).await;
        g.close_with(code).await;
        assert_eq!(g.closed().await, Closed::Code(code));
    }
    // Before IDENTIFY too.
    let mut g = Gw::connect(&t.ws).await;
    g.close_with(1000).await;
    assert_eq!(g.closed().await, Closed::Code(1000));
}

#[tokio::test]
async fn voice_channels_carry_the_keys_libraries_index() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (s, c) = t.post(&format!("/guilds/{}/channels", w.guild), &w.owner, json!({"name": "talk", "type": 2})).await;
    assert_eq!(s, 201, "{c}");
    assert_eq!((c["bitrate"].as_u64(), c["user_limit"].as_u64()), (Some(64_000), Some(0)), "{c}");
    assert!(c.get("rtc_region").is_some_and(|r| r.is_null()), "{c}");
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&w.bot_token, BOT_INTENTS).await;
    let gc = g.until("GUILD_CREATE").await;
    let voice = gc["d"]["channels"].as_array().unwrap().iter().find(|x| x["type"] == 2).cloned().unwrap();
    assert_eq!(voice["bitrate"], 64_000, "{voice}");
    let text = gc["d"]["channels"].as_array().unwrap().iter().find(|x| x["type"] == 0).cloned().unwrap();
    assert!(text.get("bitrate").is_none(), "{text}");
    assert_eq!(voice["video_quality_mode"], 1, "{voice}");
    assert!(voice.get("default_auto_archive_duration").is_none(), "{voice}");
    assert_eq!(
        (text["default_auto_archive_duration"].as_u64(), text["default_thread_rate_limit_per_user"].as_u64()),
        (Some(1440), Some(0)),
        "{text}"
    );
    // Documented as always present (nullable): the guild's and members'.
    assert!(gc["d"].get("incidents_data").is_some_and(|v| v.is_null()) && gc["d"].get("max_presences").is_some(), "guild keys");
    let member = &gc["d"]["members"][0];
    assert!(member.get("banner").is_some_and(|v| v.is_null()), "{member}");
}
