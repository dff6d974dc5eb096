//! The audit log: entries for what members do (with their
//! `X-Audit-Log-Reason`), read back with Discord's filters and pages, and
//! announced as GUILD_AUDIT_LOG_ENTRY_CREATE only to those who may read
//! the log.

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;

/// A request with an `X-Audit-Log-Reason` (percent-encoded, as clients send it).
async fn with_reason(t: &TestServer, method: Method, path: &str, auth: &str, body: Option<Value>, reason: &str) -> (u16, Value) {
    let mut r = t.http.request(method, format!("{}{path}", t.base)).header("authorization", auth).header("x-audit-log-reason", reason);
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let s = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (s, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).unwrap() })
}

fn changes(e: &Value) -> Vec<(String, Value, Value)> {
    e["changes"]
        .as_array()
        .map(|cs| cs.iter().map(|c| (c["key"].as_str().unwrap().to_string(), c["old_value"].clone(), c["new_value"].clone())).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn changes_are_logged_with_reasons_filtered_paged_and_announced() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let g = w.guild.clone();
    let (alice, alice_id) = t.user("alice").await;
    let (bob, bob_id) = t.user("bob").await;
    t.join(&w.owner, &w.channel, &alice).await;
    t.join(&w.owner, &w.channel, &bob).await;

    // The owner (who may read the log) and the bot (who may not) listen.
    let mut owner = Gw::connect(&t.ws).await;
    owner.identify(&w.owner, ALL_INTENTS).await;
    owner.until("GUILD_CREATE").await;
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS | 4).await;
    bot.until("GUILD_CREATE").await;

    let (s, v) = with_reason(&t, Method::PATCH, &format!("/guilds/{g}"), &w.owner, Some(json!({"name": "renamed"})), "tidy%20up").await;
    assert_eq!(s, 200, "{v}");
    let seen = owner.until("GUILD_AUDIT_LOG_ENTRY_CREATE").await;
    assert_eq!((seen["d"]["action_type"].as_u64(), seen["d"]["guild_id"].as_str()), (Some(1), Some(g.as_str())), "{seen}");
    assert_eq!(seen["d"]["reason"], "tidy up");

    let (s, role) = t.post(&format!("/guilds/{g}/roles"), &w.owner, json!({"name": "mods", "color": 255})).await;
    assert_eq!(s, 200, "{role}");
    let role_id = role["id"].as_str().unwrap().to_string();
    let (s, _, _) =
        t.req(Method::PATCH, &format!("/guilds/{g}/roles/{role_id}"), Some(&w.owner), Some(json!({"name": "moderators"}))).await;
    assert_eq!(s, 200);
    let ow = json!({"type": 0, "allow": "1024", "deny": "0"});
    let (s, _, _) = t.req(Method::PUT, &format!("/channels/{}/permissions/{role_id}", w.channel), Some(&w.owner), Some(ow)).await;
    assert_eq!(s, 204);
    let (s, _, _) = t
        .req(Method::PATCH, &format!("/guilds/{g}/members/{alice_id}"), Some(&w.owner), Some(json!({"nick": "Al", "roles": [role_id]})))
        .await;
    assert_eq!(s, 200);
    let m = t.say(&alice, &w.channel, "to be removed").await;
    let (s, _, _) = t.req(Method::PUT, &format!("/channels/{}/pins/{}", w.channel, m["id"].as_str().unwrap()), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    let (s, _, _) =
        t.req(Method::DELETE, &format!("/channels/{}/messages/{}", w.channel, m["id"].as_str().unwrap()), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    let (s, invite) = t.post(&format!("/channels/{}/invites", w.channel), &w.owner, json!({"max_uses": 3})).await;
    assert_eq!(s, 200, "{invite}");
    let (s, _) = with_reason(&t, Method::DELETE, &format!("/guilds/{g}/members/{bob_id}"), &w.owner, None, "rude").await;
    assert_eq!(s, 204);
    let (s, _) = with_reason(&t, Method::PUT, &format!("/guilds/{g}/bans/{alice_id}"), &w.owner, Some(json!({})), "spam").await;
    assert_eq!(s, 204);

    let (s, log) = t.get(&format!("/guilds/{g}/audit-logs"), &w.owner).await;
    assert_eq!(s, 200, "{log}");
    let entries = log["audit_log_entries"].as_array().unwrap();
    let kinds: Vec<u64> = entries.iter().map(|e| e["action_type"].as_u64().unwrap()).collect();
    // Newest first: ban, kick, invite, delete, pin, role given + nickname,
    // overwrite, role update, role create, guild update; then the setup's
    // two invites, and the bot's authorization (its role, then BOT_ADD).
    assert_eq!(kinds, vec![22, 20, 40, 72, 74, 25, 24, 13, 31, 30, 1, 40, 40, 30, 28], "{log}");
    assert_eq!(entries[14]["target_id"], w.bot_id.as_str());
    let by = |k: u64| entries.iter().find(|e| e["action_type"] == k).unwrap();
    assert_eq!((by(22)["target_id"].as_str(), by(22)["reason"].as_str()), (Some(alice_id.as_str()), Some("spam")));
    assert_eq!((by(20)["target_id"].as_str(), by(20)["reason"].as_str()), (Some(bob_id.as_str()), Some("rude")));
    assert_eq!(by(72)["target_id"], alice_id.as_str(), "the deleted message's author");
    assert_eq!(by(72)["options"], json!({"channel_id": w.channel, "count": "1"}));
    assert_eq!(by(74)["options"]["message_id"], m["id"]);
    assert_eq!(changes(by(1)), vec![("name".into(), json!("test guild"), json!("renamed"))]);
    assert_eq!(changes(by(31)), vec![("name".into(), json!("mods"), json!("moderators"))]);
    assert_eq!(changes(by(24)), vec![("nick".into(), Value::Null, json!("Al"))]);
    assert_eq!(changes(by(25)), vec![("$add".into(), Value::Null, json!([{"id": role_id, "name": "moderators"}]))]);
    assert_eq!(by(13)["options"], json!({"id": role_id, "type": "0", "role_name": "moderators"}));
    assert!(changes(by(40)).contains(&("max_uses".into(), Value::Null, json!(3))), "{}", by(40));
    assert!(entries.iter().all(|e| e["user_id"] == w.owner_id.as_str()));
    let users: Vec<&str> = log["users"].as_array().unwrap().iter().map(|u| u["id"].as_str().unwrap()).collect();
    for u in [&w.owner_id, &alice_id, &bob_id] {
        assert!(users.contains(&u.as_str()), "users names {u}: {users:?}");
    }
    for k in ["webhooks", "integrations", "threads", "application_commands", "auto_moderation_rules", "guild_scheduled_events"] {
        assert!(log[k].is_array(), "{k}");
    }

    // Filters and pages.
    let page = |q: String| {
        let t = &t;
        let owner = w.owner.clone();
        let g = g.clone();
        async move {
            let (s, v) = t.get(&format!("/guilds/{g}/audit-logs?{q}"), &owner).await;
            assert_eq!(s, 200, "{q}: {v}");
            v["audit_log_entries"].as_array().unwrap().iter().map(|e| e["action_type"].as_u64().unwrap()).collect::<Vec<_>>()
        }
    };
    assert_eq!(page("action_type=20".into()).await, vec![20]);
    assert_eq!(page(format!("user_id={}", w.owner_id)).await.len(), 15);
    assert!(page(format!("user_id={alice_id}")).await.is_empty());
    assert_eq!(page("limit=2".into()).await, vec![22, 20]);
    let id_of = |k: u64| by(k)["id"].as_str().unwrap().to_string();
    assert_eq!(page(format!("before={}&limit=2", id_of(40))).await, vec![72, 74]);
    assert_eq!(page(format!("after={}&limit=3", id_of(30))).await, vec![31, 13, 24], "after: oldest first");
    let (s, v) = t.get(&format!("/guilds/{g}/audit-logs?limit=101"), &w.owner).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)));

    // Reading needs VIEW_AUDIT_LOG.
    let (s, v) = t.get(&format!("/guilds/{g}/audit-logs"), &w.bot_auth).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");

    // The bot saw none of the entries: everything it was sent up to a
    // message it does get.
    t.say(&w.owner, &w.channel, "marker").await;
    loop {
        let f = bot.until_not(&[]).await;
        assert_ne!(f["t"], "GUILD_AUDIT_LOG_ENTRY_CREATE", "{f}");
        if f["t"] == "MESSAGE_CREATE" && f["d"]["content"] == "marker" {
            break;
        }
    }
}
