//! Webhooks: who may create, list, read, change and delete them (owner,
//! member with MANAGE_WEBHOOKS, member without, non-member; the token in
//! place of a user), executing one (JSON and multipart, `wait`), the
//! messages it sends and WEBHOOKS_UPDATE.

use reqwest::Method;
use serde_json::{json, Value};

use crate::attachments::{role_world, upload, RoleWorld};
use crate::common::*;

async fn create(t: &TestServer, r: &RoleWorld, who: &str, name: &str) -> (u16, Value) {
    t.post(&format!("/channels/{}/webhooks", r.channel), who, json!({"name": name})).await
}

/// Every route that needs a user, by who asks: (status, code).
#[tokio::test]
async fn webhook_routes_need_manage_webhooks() {
    use protocol::model::permission::MANAGE_WEBHOOKS;
    let t = TestServer::start().await;
    let r = role_world(&t, MANAGE_WEBHOOKS, 0).await;
    let (s, hook) = create(&t, &r, &r.owner, "first").await;
    assert_eq!(s, 200, "{hook}");
    let id = hook["id"].as_str().unwrap().to_string();
    let who = [
        ("owner", &r.owner, 200, None),
        ("granted", &r.with, 200, None),
        ("plain", &r.without, 403, Some(50013)),
        ("stranger", &r.stranger, 403, Some(50001)),
    ];
    for (name, auth, status, code) in who {
        let (s, v) = create(&t, &r, auth, &format!("by {name}")).await;
        assert_eq!((s, v["code"].as_u64()), (status, code), "create by {name}: {v}");
        for path in [format!("/channels/{}/webhooks", r.channel), format!("/guilds/{}/webhooks", r.guild), format!("/webhooks/{id}")] {
            let (s, v) = t.get(&path, auth).await;
            assert_eq!((s, v["code"].as_u64()), (status, code), "GET {path} by {name}: {v}");
        }
        let (s, v, _) =
            t.req(Method::PATCH, &format!("/webhooks/{id}"), Some(auth), Some(json!({"name": format!("renamed by {name}")}))).await;
        assert_eq!((s, v["code"].as_u64()), (status, code), "PATCH by {name}: {v}");
        if s == 200 {
            assert_eq!(v["name"], format!("renamed by {name}"));
        }
    }
    let (_, list) = t.get(&format!("/guilds/{}/webhooks", r.guild), &r.owner).await;
    assert_eq!(list.as_array().unwrap().len(), 3, "first, by owner, by granted: {list}");
    assert!(list[0]["user"]["id"].as_str().is_some(), "creator shown to users");
    for (name, auth, status, code) in [("plain", &r.without, 403, Some(50013)), ("stranger", &r.stranger, 403, Some(50001))] {
        let (s, v, _) = t.req(Method::DELETE, &format!("/webhooks/{id}"), Some(auth), None).await;
        assert_eq!((s, v["code"].as_u64()), (status, code), "DELETE by {name}: {v}");
    }
    let (s, _, _) = t.req(Method::DELETE, &format!("/webhooks/{id}"), Some(&r.with), None).await;
    assert_eq!(s, 204);
    let (s, v) = t.get(&format!("/webhooks/{id}"), &r.owner).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10015)));
    // Without a token at all.
    let (s, _, _) = t.req(Method::GET, &format!("/channels/{}/webhooks", r.channel), None, None).await;
    assert_eq!(s, 401);
}

/// The token routes: no user, the token decides (401 50027 when wrong,
/// 404 10015 for an unknown webhook).
#[tokio::test]
async fn token_routes_take_the_token_instead_of_a_user() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (s, hook) = t.post(&format!("/channels/{}/webhooks", w.channel), &w.owner, json!({"name": "hook"})).await;
    assert_eq!(s, 200, "{hook}");
    let (id, token) = (hook["id"].as_str().unwrap(), hook["token"].as_str().unwrap());
    assert_eq!(hook["type"], 1);
    assert_eq!(hook["guild_id"].as_str(), Some(w.guild.as_str()));
    assert!(hook["url"].as_str().unwrap().ends_with(&format!("/api/webhooks/{id}/{token}")), "{hook}");
    let good = format!("/webhooks/{id}/{token}");
    let bad = format!("/webhooks/{id}/{}x", &token[..token.len() - 1]);
    let unknown = format!("/webhooks/1/{token}");

    let (s, v, _) = t.req(Method::GET, &good, None, None).await;
    assert_eq!((s, v["name"].as_str(), v.get("user")), (200, Some("hook"), None), "{v}");
    for (path, status, code) in [(&bad, 401, 50027), (&unknown, 404, 10015)] {
        let (s, v, _) = t.req(Method::GET, path, None, None).await;
        assert_eq!((s, v["code"].as_u64()), (status, Some(code)), "GET {path}");
        let (s, v, _) = t.req(Method::POST, path, None, Some(json!({"content": "x"}))).await;
        assert_eq!((s, v["code"].as_u64()), (status, Some(code)), "execute {path}");
        let (s, v, _) = t.req(Method::PATCH, path, None, Some(json!({"name": "x"}))).await;
        assert_eq!((s, v["code"].as_u64()), (status, Some(code)), "PATCH {path}");
        let (s, v, _) = t.req(Method::DELETE, path, None, None).await;
        assert_eq!((s, v["code"].as_u64()), (status, Some(code)), "DELETE {path}");
    }
    let (s, v, _) = t.req(Method::PATCH, &good, None, Some(json!({"name": "renamed", "channel_id": "1"}))).await;
    assert_eq!((s, v["name"].as_str(), v["channel_id"].as_str()), (200, Some("renamed"), Some(w.channel.as_str())), "{v}");
    let (s, v, _) = t.req(Method::PATCH, &good, None, Some(json!({"name": "my discord hook"}))).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
    let (s, _, _) = t.req(Method::DELETE, &good, None, None).await;
    assert_eq!(s, 204);
    let (s, v, _) = t.req(Method::POST, &good, None, Some(json!({"content": "x"}))).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10015)), "deleted");
}

/// Executing: `wait=true` answers with the message (webhook_id, an author
/// built from the webhook, `username` overriding its name); without it,
/// 204. Members see MESSAGE_CREATE with webhook_id; history shows the same
/// author. Files come along as attachments. WEBHOOKS_UPDATE on changes.
#[tokio::test]
async fn executing_sends_messages_as_the_webhook() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&w.owner, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    let (s, hook) = t.post(&format!("/channels/{}/webhooks", w.channel), &w.owner, json!({"name": "hook"})).await;
    assert_eq!(s, 200, "{hook}");
    let ev = gw.until("WEBHOOKS_UPDATE").await;
    assert_eq!(ev["d"], json!({"guild_id": w.guild, "channel_id": w.channel}));
    let (id, token) = (hook["id"].as_str().unwrap(), hook["token"].as_str().unwrap());
    let exec = format!("/webhooks/{id}/{token}");

    let (s, m, _) =
        t.req(Method::POST, &format!("{exec}?wait=true"), None, Some(json!({"content": "hello <@{}>", "username": "Alias"}))).await;
    assert_eq!(s, 200, "{m}");
    assert_eq!(m["webhook_id"].as_str(), Some(id));
    assert_eq!(m["author"]["id"].as_str(), Some(id));
    assert_eq!(m["author"]["username"], "Alias");
    assert_eq!(m["author"]["bot"], true);
    let ev = gw.until("MESSAGE_CREATE").await;
    assert_eq!(ev["d"]["webhook_id"].as_str(), Some(id));
    assert_eq!(ev["d"]["id"], m["id"]);

    let (s, v, _) = t.req(Method::POST, &exec, None, Some(json!({"content": "no wait"}))).await;
    assert_eq!((s, v), (204, Value::Null));
    let (s, v, _) = t.req(Method::POST, &format!("{exec}?wait=1"), None, Some(json!({}))).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50006)), "empty");

    let data = b"webhook file contents".to_vec();
    let (s, m2) = upload(&t, &format!("{exec}?wait=true"), None, json!({"content": "with a file"}), &[("note.txt", &data)]).await;
    assert_eq!(s, 200, "{m2}");
    let url = m2["attachments"][0]["url"].as_str().unwrap();
    assert_eq!(t.http.get(url).send().await.unwrap().bytes().await.unwrap().as_ref(), &data[..]);

    let (_, h) = t.get(&format!("/channels/{}/messages?limit=3", w.channel), &w.owner).await;
    let got: Vec<(&str, &str)> =
        h.as_array().unwrap().iter().map(|m| (m["content"].as_str().unwrap(), m["author"]["username"].as_str().unwrap())).collect();
    assert_eq!(got, [("with a file", "hook"), ("no wait", "hook"), ("hello <@{}>", "Alias")]);
    assert!(h.as_array().unwrap().iter().all(|m| m["webhook_id"].as_str() == Some(id)));

    // Gone with its channel's webhooks: deleting the webhook, then executing.
    let (s, _, _) = t.req(Method::DELETE, &format!("/webhooks/{id}"), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    let ev = gw.until("WEBHOOKS_UPDATE").await;
    assert_eq!(ev["d"]["channel_id"].as_str(), Some(w.channel.as_str()));
}
