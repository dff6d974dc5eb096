//! REST routes: status codes, bodies, permissions, limits.

use reqwest::Method;
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn json_content_type_is_exact_and_gateway_routes_answer() {
    let t = TestServer::start().await;
    let (bot, _, _) = t.bot("b").await;
    for prefix in ["/api/v10", "/api/v9", "/api"] {
        let r = t.http.get(format!("{}{prefix}/gateway", t.base.trim_end_matches("/api/v10"))).send().await.unwrap();
        assert_eq!(r.headers()["content-type"], "application/json");
        let v: serde_json::Value = r.json().await.unwrap();
        assert!(v["url"].as_str().unwrap().starts_with("ws://"));
    }
    let (s, v) = t.get("/gateway/bot", &bot).await;
    assert_eq!(s, 200);
    for k in ["total", "remaining", "reset_after", "max_concurrency"] {
        assert!(v["session_start_limit"][k].is_number(), "{k}");
    }
    let (s, v) = t.get("/oauth2/applications/@me", &bot).await;
    assert_eq!(s, 200);
    for k in ["id", "name", "description", "icon", "bot_public", "bot_require_code_grant", "verify_key", "owner"] {
        assert!(v.get(k).is_some(), "application.{k}");
    }
    let (s, v) = t.get("/users/@me", &bot).await;
    assert_eq!((s, v["bot"].as_bool()), (200, Some(true)));
    // Discord's body for a missing or wrong token.
    let unauthorized = (401, Some(0), Some("401: Unauthorized"));
    let (s, v, _) = t.req(Method::GET, "/users/@me", None, None).await;
    assert_eq!((s, v["code"].as_u64(), v["message"].as_str()), unauthorized);
    // A bot token without its "Bot " prefix is not accepted.
    let (s, v) = t.get("/users/@me", bot.trim_start_matches("Bot ")).await;
    assert_eq!((s, v["code"].as_u64(), v["message"].as_str()), unauthorized);
    let (s, v) = t.get("/no/such/route", &bot).await;
    assert_eq!((s, v["message"].as_str()), (404, Some("404: Not Found")));
}

#[tokio::test]
async fn accounts_register_login_and_errors() {
    let t = TestServer::start().await;
    let (tok, id) = t.user("alice").await;
    let (s, v) = t.get("/users/@me", &tok).await;
    assert_eq!((s, v["id"].as_str()), (200, Some(id.as_str())));
    let (s, v, _) = t.req(Method::POST, "/auth/register", None, Some(json!({"username": "alice", "password": "another pw"}))).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)));
    assert!(v["errors"]["username"]["_errors"][0]["code"].is_string());
    let (s, v, _) = t.req(Method::POST, "/auth/login", None, Some(json!({"login": "alice", "password": "wrong password"}))).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)));
    let (s, v, _) = t.req(Method::POST, "/auth/login", None, Some(json!({"login": "alice", "password": "correct horse"}))).await;
    assert_eq!(s, 200);
    assert_ne!(v["token"].as_str().unwrap(), tok, "a fresh token per login");
    let r = t.http.post(format!("{}/auth/register", t.base)).header("content-type", "application/json").body("{oops").send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["code"], 50109);
    let (s, v, _) = t.req(Method::POST, "/auth/register", None, Some(json!({"username": "x", "password": "short"}))).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)));
}

#[tokio::test]
async fn guild_permissions() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (stranger, _) = t.user("stranger").await;
    let g = format!("/guilds/{}", w.guild);
    assert_eq!(t.get(&g, &w.owner).await.0, 200);
    let (s, v) = t.get(&format!("{g}?with_counts=true"), &w.owner).await;
    assert_eq!((s, v["approximate_member_count"].as_u64()), (200, Some(2)), "owner and bot: {v}");
    assert_eq!(v["approximate_presence_count"].as_u64(), Some(0), "nobody is connected: {v}");
    // Every form of a boolean Discord reads in a query (nextcord, disnake
    // and py-cord send `with_counts=1`).
    for yes in ["1", "True", "true"] {
        let (s, v) = t.get(&format!("{g}?with_counts={yes}"), &w.owner).await;
        assert_eq!((s, v["approximate_member_count"].as_u64()), (200, Some(2)), "with_counts={yes}: {v}");
    }
    for no in ["0", "False", "false"] {
        let (s, v) = t.get(&format!("{g}?with_counts={no}"), &w.owner).await;
        assert_eq!(s, 200);
        assert!(v.get("approximate_member_count").is_none(), "with_counts={no}: {v}");
    }
    let (s, v) = t.get(&format!("{g}?with_counts=yes"), &w.owner).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
    assert!(v["errors"]["with_counts"]["_errors"][0]["code"].is_string(), "names the field: {v}");
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (_, v) = t.get(&format!("{g}?with_counts=true"), &w.owner).await;
        if v["approximate_presence_count"].as_u64() == Some(1) {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the connected bot never counted as present: {v}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (s, v) = t.get(&g, &stranger).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50001)));
    let (s, v) = t.get("/guilds/123", &w.owner).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10004)));
    let (s, v) = t.get(&format!("/channels/{}/messages", w.channel), &stranger).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50001)));
    // A member that is not the owner cannot manage the guild.
    let (s, v, _) = t.req(Method::PATCH, &g, Some(&w.bot_auth), Some(json!({"name": "mine now"}))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)));
    let (s, v, _) = t.req(Method::PATCH, &g, Some(&w.owner), Some(json!({"name": "renamed"}))).await;
    assert_eq!((s, v["name"].as_str()), (200, Some("renamed")));
    let (s, _) = t.post(&format!("{g}/channels"), &w.bot_auth, json!({"name": "nope"})).await;
    assert_eq!(s, 403);
    let (s, c) = t.post(&format!("{g}/channels"), &w.owner, json!({"name": "second", "type": 0})).await;
    assert_eq!((s, c["name"].as_str()), (201, Some("second")));
    let (s, v) = t.get(&format!("{g}/channels"), &w.bot_auth).await;
    assert_eq!((s, v.as_array().unwrap().len()), (200, 2));
    let (s, v) = t.get("/channels/1", &w.owner).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10003)));
    // Members.
    let (s, v) = t.get(&format!("{g}/members?limit=10"), &w.bot_auth).await;
    assert_eq!((s, v.as_array().unwrap().len()), (200, 2));
    let (s, v) = t.get(&format!("{g}/members/{}", w.bot_id), &w.owner).await;
    assert_eq!((s, v["user"]["id"].as_str()), (200, Some(w.bot_id.as_str())));
    let (s, v, _) = t.req(Method::PUT, &format!("{g}/members/{}", w.owner_id), Some(&w.bot_auth), Some(json!({}))).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "a bot adds a user only with their OAuth2 token: {v}");
    let (s, v, _) = t.req(Method::PUT, &format!("{g}/members/{}", w.bot_id), Some(&w.owner), Some(json!({}))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "people add nobody, owners included: {v}");
    let (s, v) = t.get("/users/@me/guilds", &w.bot_auth).await;
    assert_eq!((s, v[0]["id"].as_str(), v[0]["owner"].as_bool()), (200, Some(w.guild.as_str()), Some(false)));
    // Only the owner deletes.
    assert_eq!(t.req(Method::DELETE, &g, Some(&w.bot_auth), None).await.0, 403);
    assert_eq!(t.req(Method::DELETE, &g, Some(&w.owner), None).await.0, 204);
    assert_eq!(t.get(&g, &w.owner).await.0, 404);
}

#[tokio::test]
async fn messages_crud_and_listing() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let path = format!("/channels/{}/messages", w.channel);
    let mut ids = Vec::new();
    for i in 0..5 {
        let m = t.say(&w.owner, &w.channel, &format!("m{i}")).await;
        assert_eq!(m["author"]["id"], w.owner_id.as_str());
        assert!(m["timestamp"].as_str().unwrap().ends_with("+00:00"));
        ids.push(m["id"].as_str().unwrap().to_string());
    }
    let contents =
        |v: &serde_json::Value| v.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    let (_, v) = t.get(&format!("{path}?limit=3"), &w.bot_auth).await;
    assert_eq!(contents(&v), ["m4", "m3", "m2"]);
    let (_, v) = t.get(&format!("{path}?before={}", ids[2]), &w.bot_auth).await;
    assert_eq!(contents(&v), ["m1", "m0"]);
    let (_, v) = t.get(&format!("{path}?after={}&limit=2", ids[1]), &w.bot_auth).await;
    assert_eq!(contents(&v), ["m3", "m2"]);
    let (_, v) = t.get(&format!("{path}?around={}&limit=3", ids[2]), &w.bot_auth).await;
    assert_eq!(contents(&v), ["m3", "m2", "m1"]);
    let (s, _) = t.get(&format!("{path}?limit=101"), &w.bot_auth).await;
    assert_eq!(s, 400);

    let (s, v) = t.post(&path, &w.owner, json!({"content": ""})).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50006)));
    let (s, v) = t.post(&path, &w.owner, json!({"content": "x".repeat(2001)})).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)));
    // Ids as integers are accepted (discord.py sends them so).
    let (s, v) = t
        .post(&path, &w.bot_auth, json!({"content": "reply", "nonce": "123", "enforce_nonce": true, "tts": false, "message_reference": {"message_id": ids[0].parse::<u64>().unwrap(), "channel_id": w.channel.parse::<u64>().unwrap()}}))
        .await;
    assert_eq!((s, v["type"].as_u64()), (200, Some(19)), "{v}");

    let one = format!("{path}/{}", ids[0]);
    let (s, v, _) = t.req(Method::PATCH, &one, Some(&w.bot_auth), Some(json!({"content": "hijack"}))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50005)));
    let (s, v, _) = t.req(Method::PATCH, &one, Some(&w.owner), Some(json!({"content": "edited"}))).await;
    assert_eq!((s, v["content"].as_str()), (200, Some("edited")));
    assert!(v["edited_timestamp"].is_string());
    assert_eq!(t.get(&one, &w.bot_auth).await.1["content"], "edited");
    assert_eq!(t.req(Method::DELETE, &one, Some(&w.bot_auth), None).await.0, 403, "not the author, no MANAGE_MESSAGES");
    assert_eq!(t.req(Method::DELETE, &one, Some(&w.owner), None).await.0, 204);
    let (s, v) = t.get(&one, &w.owner).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10008)));
}

#[tokio::test]
async fn multipart_payload_json_and_body_limit() {
    let t = TestServer::start_with(|c| c.limits.max_body_bytes = 64 * 1024).await;
    let w = t.world().await;
    let url = format!("{}/channels/{}/messages", t.base, w.channel);
    let form = reqwest::multipart::Form::new()
        .text("payload_json", json!({"content": "with file"}).to_string())
        .part("files[0]", reqwest::multipart::Part::bytes(b"hello".to_vec()).file_name("a.txt"));
    let r = t.http.post(&url).header("authorization", &w.owner).multipart(form).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["content"], "with file");
    assert_eq!(v["attachments"][0]["filename"], "a.txt");
    assert_eq!(v["attachments"][0]["size"], 5);
    let big = json!({"content": "x".repeat(100 * 1024)}).to_string();
    let r = t.http.post(&url).header("authorization", &w.owner).header("content-type", "application/json").body(big).send().await.unwrap();
    assert_eq!(r.status(), 413);
    assert_eq!(r.json::<serde_json::Value>().await.unwrap()["code"], 40005);
}

#[tokio::test]
async fn rate_limits_answer_429_with_discord_headers() {
    let t = TestServer::start_with(|c| {
        c.limits.rest_requests_per_window = 3;
        c.limits.rest_window_ms = 60_000;
    })
    .await;
    let (bot, _, _) = t.bot("limited").await;
    for left in ["2", "1", "0"] {
        let (s, _, h) = t.req(Method::GET, "/users/@me", Some(&bot), None).await;
        assert_eq!(s, 200);
        assert_eq!(h["x-ratelimit-remaining"], left);
        for k in ["x-ratelimit-limit", "x-ratelimit-reset", "x-ratelimit-reset-after", "x-ratelimit-bucket"] {
            assert!(h.contains_key(k), "{k}");
        }
    }
    let (s, v, h) = t.req(Method::GET, "/users/@me", Some(&bot), None).await;
    assert_eq!(s, 429);
    assert!(h.contains_key("retry-after") && h.contains_key("via"));
    assert!(v["retry_after"].as_f64().unwrap() > 0.0);
    assert_eq!(v["global"], false);
}

#[tokio::test]
async fn invites_create_get_accept() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (s, inv) = t.post(&format!("/channels/{}/invites", w.channel), &w.owner, json!({"max_uses": 1})).await;
    assert_eq!(s, 200);
    let code = inv["code"].as_str().unwrap();
    let (s, v, _) = t.req(Method::GET, &format!("/invites/{code}"), None, None).await;
    assert_eq!((s, v["guild"]["id"].as_str()), (200, Some(w.guild.as_str())));
    let (s, v) = t.post(&format!("/invites/{code}"), &w.bot_auth, json!({})).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(20001)), "bots cannot accept invites");
    let (joiner, _) = t.user("joiner").await;
    assert_eq!(t.post(&format!("/invites/{code}"), &joiner, json!({})).await.0, 200);
    assert_eq!(t.get(&format!("/guilds/{}", w.guild), &joiner).await.0, 200, "joined");
    let (late, _) = t.user("late").await;
    let (s, v) = t.post(&format!("/invites/{code}"), &late, json!({})).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10006)), "max_uses reached");
}

/// The invite lists (the server settings' Invites tab): live invites,
/// newest first, with inviter and uses; a used-up or revoked one is gone;
/// the channel's list holds only its own.
#[tokio::test]
async fn invite_lists_show_live_invites_newest_first() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (s, other) = t.post(&format!("/guilds/{}/channels", w.guild), &w.owner, json!({"name": "other"})).await;
    assert_eq!(s, 201);
    let other = other["id"].as_str().unwrap().to_string();
    let mut codes = Vec::new();
    for (c, body) in [(&w.channel, json!({"max_uses": 1})), (&w.channel, json!({})), (&other, json!({"max_age": 0}))] {
        let (s, inv) = t.post(&format!("/channels/{c}/invites"), &w.owner, body).await;
        assert_eq!(s, 200, "{inv}");
        codes.push(inv["code"].as_str().unwrap().to_string());
    }
    let (t, owner) = (&t, &w.owner);
    let list = |path: String| async move {
        let (s, v) = t.get(&path, owner).await;
        assert_eq!(s, 200, "{v}");
        v.as_array().unwrap().iter().map(|i| i["code"].as_str().unwrap().to_string()).collect::<Vec<_>>()
    };
    let all = list(format!("/guilds/{}/invites", w.guild)).await;
    assert_eq!(all.len(), 3);
    let mut sorted = all.clone();
    sorted.sort_by_key(|c| codes.iter().position(|x| x == c));
    sorted.reverse();
    assert_eq!(all, sorted, "newest first");
    let (_, v) = t.get(&format!("/guilds/{}/invites", w.guild), &w.owner).await;
    assert_eq!((v[0]["inviter"]["id"].as_str(), v[0]["uses"].as_u64()), (Some(w.owner_id.as_str()), Some(0)), "{v}");
    assert_eq!(list(format!("/channels/{other}/invites")).await, [codes[2].clone()]);
    // Used up, then revoked: both leave the lists.
    let (joiner, _) = t.user("joiner").await;
    assert_eq!(t.post(&format!("/invites/{}", codes[0]), &joiner, json!({})).await.0, 200);
    assert_eq!(t.req(Method::DELETE, &format!("/invites/{}", codes[1]), Some(&w.owner), None).await.0, 200);
    assert_eq!(list(format!("/guilds/{}/invites", w.guild)).await, [codes[2].clone()]);
    assert_eq!(list(format!("/channels/{}/invites", w.channel)).await, Vec::<String>::new());
}

/// Sending is authorized from the guild actor's state: a change of
/// overwrites or membership applies to the very next send (no stale cache).
#[tokio::test]
async fn a_send_right_after_a_permission_change_is_refused() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (s, inv) = t.post(&format!("/channels/{}/invites", w.channel), &w.owner, json!({})).await;
    assert_eq!(s, 200);
    let (joiner, joiner_id) = t.user("joiner").await;
    assert_eq!(t.post(&format!("/invites/{}", inv["code"].as_str().unwrap()), &joiner, json!({})).await.0, 200);
    let path = format!("/channels/{}/messages", w.channel);
    let send = |n: u32| {
        let (t, joiner, path) = (&t, &joiner, &path);
        async move { t.post(path, joiner, json!({"content": format!("try {n}")})).await }
    };
    let (s, m) = send(0).await;
    assert_eq!((s, m["member"]["roles"].as_array().map(Vec::len)), (200, Some(0)), "{m}");
    let overwrite = |allow: u64, deny: u64| json!({"permission_overwrites": [{"id": joiner_id, "type": 1, "allow": allow.to_string(), "deny": deny.to_string()}]});
    let channel = format!("/channels/{}", w.channel);
    // SEND_MESSAGES (1 << 11) denied to the joiner alone.
    assert_eq!(t.req(Method::PATCH, &channel, Some(&w.owner), Some(overwrite(0, 1 << 11))).await.0, 200);
    let (s, v) = send(1).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    assert_eq!(t.post(&path, &w.bot_auth, json!({"content": "others still may"})).await.0, 200);
    // VIEW_CHANNEL (1 << 10) denied: the channel is out of reach.
    assert_eq!(t.req(Method::PATCH, &channel, Some(&w.owner), Some(overwrite(0, 1 << 10))).await.0, 200);
    let (s, v) = send(2).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50001)), "{v}");
    // Lifted: allowed again at once.
    assert_eq!(t.req(Method::PATCH, &channel, Some(&w.owner), Some(json!({"permission_overwrites": []}))).await.0, 200);
    assert_eq!(send(3).await.0, 200);
    // Kicked: not a member any more.
    let kick = format!("/guilds/{}/members/{joiner_id}", w.guild);
    assert_eq!(t.req(Method::DELETE, &kick, Some(&w.owner), None).await.0, 204);
    let (s, v) = send(4).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50001)), "{v}");
    // Only the sends that were allowed are in history.
    let (_, h) = t.get(&format!("{path}?limit=10"), &w.owner).await;
    let got: Vec<&str> = h.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(got, ["try 3", "others still may", "try 0"]);
    let (s, v) = t.post("/channels/123/messages", &w.owner, json!({"content": "x"})).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10003)));
}

/// Typing, edits and deletes are authorized from the guild actor's state
/// too: each change of overwrites or membership applies to the very next
/// request.
#[tokio::test]
async fn typing_edits_and_deletes_right_after_a_permission_change() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (s, inv) = t.post(&format!("/channels/{}/invites", w.channel), &w.owner, json!({})).await;
    assert_eq!(s, 200);
    let (joiner, joiner_id) = t.user("joiner").await;
    assert_eq!(t.post(&format!("/invites/{}", inv["code"].as_str().unwrap()), &joiner, json!({})).await.0, 200);
    let path = format!("/channels/{}/messages", w.channel);
    let (_, own) = t.post(&path, &joiner, json!({"content": "mine"})).await;
    let (_, theirs) = t.post(&path, &w.owner, json!({"content": "theirs"})).await;
    let own = format!("{path}/{}", own["id"].as_str().unwrap());
    let theirs = format!("{path}/{}", theirs["id"].as_str().unwrap());
    let typing = format!("/channels/{}/typing", w.channel);
    let channel = format!("/channels/{}", w.channel);
    let set = |allow: u64, deny: u64| {
        let (t, channel, owner) = (&t, &channel, &w.owner);
        let body = json!({"permission_overwrites": [{"id": joiner_id, "type": 1, "allow": allow.to_string(), "deny": deny.to_string()}]});
        async move { assert_eq!(t.req(Method::PATCH, channel, Some(owner), Some(body)).await.0, 200) }
    };
    let code = |r: (u16, serde_json::Value, reqwest::header::HeaderMap)| (r.0, r.1["code"].as_u64());
    let edit = |n: u32| {
        let (t, own, joiner) = (&t, &own, &joiner);
        async move { code(t.req(Method::PATCH, own, Some(joiner), Some(json!({"content": format!("edit {n}")}))).await) }
    };
    assert_eq!(t.req(Method::POST, &typing, Some(&joiner), None).await.0, 204);
    assert_eq!(edit(0).await, (200, None));
    // SEND_MESSAGES denied: no typing; one's own messages stay editable.
    set(0, 1 << 11).await;
    assert_eq!(code(t.req(Method::POST, &typing, Some(&joiner), None).await), (403, Some(50013)));
    assert_eq!(edit(1).await, (200, None));
    // VIEW_CHANNEL denied: nothing in the channel.
    set(0, 1 << 10).await;
    assert_eq!(code(t.req(Method::POST, &typing, Some(&joiner), None).await), (403, Some(50001)));
    assert_eq!(edit(2).await, (403, Some(50001)));
    assert_eq!(code(t.req(Method::DELETE, &own, Some(&joiner), None).await), (403, Some(50001)));
    // Another's message: only with MANAGE_MESSAGES (1 << 13), given and taken at once.
    set(0, 0).await;
    assert_eq!(code(t.req(Method::DELETE, &theirs, Some(&joiner), None).await), (403, Some(50013)));
    assert_eq!(code(t.req(Method::PATCH, &theirs, Some(&joiner), Some(json!({"content": "no"}))).await), (403, Some(50005)));
    set(1 << 13, 0).await;
    assert_eq!(t.req(Method::DELETE, &theirs, Some(&joiner), None).await.0, 204);
    assert_eq!(code(t.req(Method::DELETE, &theirs, Some(&joiner), None).await), (404, Some(10008)));
    // Kicked: nothing at all, not even one's own message.
    let kick = format!("/guilds/{}/members/{joiner_id}", w.guild);
    assert_eq!(t.req(Method::DELETE, &kick, Some(&w.owner), None).await.0, 204);
    assert_eq!(code(t.req(Method::POST, &typing, Some(&joiner), None).await), (403, Some(50001)));
    assert_eq!(edit(3).await, (403, Some(50001)));
    assert_eq!(code(t.req(Method::DELETE, &own, Some(&joiner), None).await), (403, Some(50001)));
    let (_, h) = t.get(&format!("{path}?limit=10"), &w.owner).await;
    let got: Vec<&str> = h.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(got, ["edit 1"], "the last allowed edit stands; their message is gone");
}

/// `GET /metrics` speaks Prometheus' text format; `promtool check metrics`
/// accepts it (a missing promtool fails the test unless `THRONG_SKIP_PROMTOOL=1`).
#[tokio::test]
async fn metrics_are_prometheus_text_that_promtool_accepts() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS).await;
    t.say(&w.owner, &w.channel, "counted").await;
    bot.until("MESSAGE_CREATE").await;
    let r = t.http.get(t.base.replace("/api/v10", "/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/plain; version=0.0.4; charset=utf-8");
    let text = r.text().await.unwrap();
    let value = |name: &str| -> f64 {
        let line = text.lines().find(|l| l.starts_with(&format!("{name}{{"))).unwrap_or_else(|| panic!("{name} missing:\n{text}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert!(value("throng_identifies_total") >= 1.0);
    assert_eq!(value("throng_sessions"), 1.0);
    assert_eq!(value("throng_writer_rows_total"), 1.0);
    assert!(value("throng_deliveries_total") >= 1.0, "MESSAGE_CREATE went through the delivery workers");
    assert_eq!(value("throng_up"), 1.0);
    assert!(value("throng_store_commit_seconds_count") >= 1.0, "the message's commit was timed");
    let inf = text.lines().find(|l| l.starts_with("throng_store_commit_seconds_bucket{node=\"1\",le=\"+Inf\"}")).expect("+Inf bucket");
    assert_eq!(inf.rsplit(' ').next().unwrap().parse::<f64>().unwrap(), value("throng_store_commit_seconds_count"));
    assert_eq!(value("throng_guild_mailbox_messages"), 0.0, "idle: nothing waits");
    assert_eq!(value("throng_guild_mailbox_max"), 0.0);
    let r = t.http.get(t.base.replace("/api/v10", "/ready")).send().await.unwrap();
    assert_eq!(r.status(), 200, "ready: the store answers");
    assert!(text.contains("throng_gateway_closes_total{node=\"1\",code=\"4004\"}"));
    // Every series the Grafana dashboard in deploy/ queries is one the
    // server exports (the cluster's only with NATS: named in the renderer).
    let dashboard: serde_json::Value = serde_json::from_str(include_str!("../../../../deploy/grafana/throng-dashboard.json")).unwrap();
    let mut queried = 0;
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap();
            for name in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("throng_")) {
                queried += 1;
                let live = text.lines().any(|l| l.starts_with(&format!("{name}{{")));
                let cluster_only = (name.starts_with("throng_nats_") || name.starts_with("throng_cluster_"))
                    && include_str!("../../../api/src/metrics.rs").contains(&format!("\"{name}\""));
                assert!(live || cluster_only, "the dashboard queries {name}, which /metrics does not export");
            }
        }
    }
    assert!(queried >= 25, "{queried} series in the dashboard");
    let promtool = std::process::Command::new("promtool").arg("--version").output().is_ok();
    if !promtool {
        assert!(
            std::env::var("THRONG_SKIP_PROMTOOL").as_deref() == Ok("1"),
            "promtool is not installed: install Debian's `prometheus` package (scripts/test.sh does), or set THRONG_SKIP_PROMTOOL=1 to skip the format check"
        );
        eprintln!("promtool not installed and THRONG_SKIP_PROMTOOL=1: format check NOT RUN");
        return;
    }
    use std::io::Write;
    let mut check = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    check.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(out.status.success(), "promtool: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

/// A role that granted SEND_MESSAGES is taken away (`PATCH` of the member's
/// roles): the very next send is refused, and giving it back allows it
/// again at once.
#[tokio::test]
async fn a_send_right_after_a_role_is_removed_is_refused() {
    use protocol::model::permission;
    let t = TestServer::start().await;
    let (owner, _) = t.user("owner").await;
    let (member, member_id) = t.user("speaker").await;
    let (gid, cid) = t.guild(&owner).await;
    let everyone = (permission::DEFAULT_EVERYONE & !permission::SEND_MESSAGES).to_string();
    assert_eq!(
        t.req(Method::PATCH, &format!("/guilds/{gid}/roles/{gid}"), Some(&owner), Some(json!({"permissions": everyone}))).await.0,
        200
    );
    let (s, role) = t
        .post(&format!("/guilds/{gid}/roles"), &owner, json!({"name": "speaker", "permissions": permission::SEND_MESSAGES.to_string()}))
        .await;
    assert_eq!(s, 200, "{role}");
    let speaker = role["id"].as_str().unwrap().to_string();
    t.join(&owner, &cid, &member).await;
    assert_eq!(t.req(Method::PUT, &format!("/guilds/{gid}/members/{member_id}/roles/{speaker}"), Some(&owner), None).await.0, 204);
    let path = format!("/channels/{cid}/messages");
    let send = |n: u32| {
        let (t, member, path) = (&t, &member, &path);
        async move { t.post(path, member, json!({"content": format!("try {n}")})).await }
    };
    assert_eq!(send(0).await.0, 200, "the role allows sending");
    let roles = format!("/guilds/{gid}/members/{member_id}");
    assert_eq!(t.req(Method::PATCH, &roles, Some(&owner), Some(json!({"roles": []}))).await.0, 200);
    let (s, v) = send(1).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    assert_eq!(t.req(Method::PATCH, &roles, Some(&owner), Some(json!({"roles": [speaker]}))).await.0, 200);
    assert_eq!(send(2).await.0, 200, "given back: allowed at once");
    let (_, h) = t.get(&format!("{path}?limit=10"), &owner).await;
    let got: Vec<&str> = h.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(got, ["try 2", "try 0"]);
}

/// `enforce_nonce`, as Discord: a repeat of an author's post with the same
/// nonce returns the first message and creates none (also after a restart,
/// when a new actor reads the keys back); another author's nonce, or a
/// nonce without `enforce_nonce`, is another message; a nonce over 25
/// characters is 400.
#[tokio::test]
async fn a_post_repeated_with_enforce_nonce_is_created_once() {
    let mut t = TestServer::start().await;
    let w = t.world().await;
    let path = format!("/channels/{}/messages", w.channel);
    let body = |c: &str, nonce: serde_json::Value, enforce: bool| json!({"content": c, "nonce": nonce, "enforce_nonce": enforce});
    let (s, first) = t.post(&path, &w.owner, body("a", json!("n-1"), true)).await;
    assert_eq!((s, &first["nonce"]), (200, &json!("n-1")), "{first}");
    let (s, again) = t.post(&path, &w.owner, body("a, sent again", json!("n-1"), true)).await;
    assert_eq!((s, &again["id"], &again["content"], &again["nonce"]), (200, &first["id"], &json!("a"), &json!("n-1")), "{again}");
    assert!(again.get("dedup").is_none(), "the key is never shown: {again}");
    let (_, other) = t.post(&path, &w.bot_auth, body("b", json!("n-1"), true)).await;
    assert_ne!(other["id"], first["id"], "another author's nonce");
    let (_, int1) = t.post(&path, &w.owner, body("i", json!(42), true)).await;
    let (_, int2) = t.post(&path, &w.owner, body("i", json!(42), true)).await;
    assert_eq!((int1["id"].is_string(), &int1["id"]), (true, &int2["id"]), "an integer nonce");
    let (_, x) = t.post(&path, &w.owner, body("x", json!("n-2"), false)).await;
    let (_, y) = t.post(&path, &w.owner, body("x", json!("n-2"), false)).await;
    assert_ne!(x["id"], y["id"], "without enforce_nonce");
    let (s, v) = t.post(&path, &w.owner, body("z", json!("x".repeat(26)), true)).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
    let (_, listed) = t.get(&format!("{path}?limit=100"), &w.owner).await;
    let contents: Vec<&str> = listed.as_array().unwrap().iter().rev().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["a", "b", "i", "x", "x"]);
    assert!(listed.as_array().unwrap().iter().all(|m| m.get("dedup").is_none()));

    // A restart: the new actor knows the keys committed before it.
    let dir = t.data_dir().to_path_buf();
    t.shutdown().await;
    let t2 = TestServer::start_with(|c| c.data_dir = dir).await;
    let (s, after) = t2.post(&path, &w.owner, body("a, after a restart", json!("n-1"), true)).await;
    assert_eq!((s, &after["id"]), (200, &first["id"]), "{after}");
    let (_, listed) = t2.get(&format!("{path}?limit=100"), &w.owner).await;
    assert_eq!(listed.as_array().unwrap().len(), 5);
}

/// Long API answers go gzipped or in Brotli to a client that takes them
/// (`http.compress_min_bytes`, 1 KiB); short ones and clients that take
/// neither get them as they are.
#[tokio::test]
async fn long_api_answers_go_compressed_to_clients_that_take_it() {
    let t = TestServer::start().await;
    let w = t.world().await;
    for i in 0..20 {
        t.say(&w.owner, &w.channel, &format!("message number {i}, with a few more words to make it longer")).await;
    }
    let get = |path: String, coding: Option<&'static str>| {
        let mut r = t.http.get(format!("{}{path}", t.base)).header("authorization", &w.owner);
        if let Some(c) = coding {
            r = r.header("accept-encoding", c);
        }
        async move {
            let r = r.send().await.unwrap();
            assert_eq!(r.status(), 200);
            let coding = r.headers().get("content-encoding").map(|v| v.to_str().unwrap().to_string());
            (coding, r.bytes().await.unwrap().to_vec())
        }
    };
    let page = format!("/channels/{}/messages?limit=50", w.channel);
    let (none, plain) = get(page.clone(), None).await;
    assert_eq!(none, None);
    assert!(plain.len() > 1024, "{}", plain.len());
    let (gz, packed) = get(page.clone(), Some("gzip")).await;
    assert_eq!(gz.as_deref(), Some("gzip"));
    let mut back = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&packed[..]), &mut back).unwrap();
    assert_eq!(back, plain, "the same answer, gzipped");
    assert!(packed.len() * 3 < plain.len(), "{} of {}", packed.len(), plain.len());
    let (br, packed) = get(page.clone(), Some("gzip, deflate, br")).await;
    assert_eq!(br.as_deref(), Some("br"), "Brotli preferred");
    assert!(packed.len() * 3 < plain.len());
    let (identity, _) = get(page, Some("identity")).await;
    assert_eq!(identity, None);
    // A short answer goes as it is.
    let (short, body) = get("/users/@me".into(), Some("gzip, br")).await;
    assert!(body.len() < 1024);
    assert_eq!(short, None);
}
