//! Application commands: global and guild CRUD and bulk overwrite, who may
//! touch them, and Discord's validation with 50035 field errors.

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;

async fn app_id(t: &TestServer, auth: &str) -> String {
    let (s, v) = t.get("/applications/@me", auth).await;
    assert_eq!(s, 200, "{v}");
    v["id"].as_str().unwrap().to_string()
}

fn ping() -> Value {
    json!({"name": "ping", "description": "Replies with pong", "options": [
        {"type": 3, "name": "text", "description": "What to say", "required": true},
        {"type": 4, "name": "times", "description": "How often", "choices": [{"name": "once", "value": 1}, {"name": "twice", "value": 2}]}
    ]})
}

#[tokio::test]
async fn commands_are_created_listed_changed_overwritten_and_deleted() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let app = app_id(&t, &w.bot_auth).await;
    let global = format!("/applications/{app}/commands");
    let (s, list) = t.get(&global, &w.bot_auth).await;
    assert_eq!((s, list), (200, json!([])));

    let (s, c) = t.post(&global, &w.bot_auth, ping()).await;
    assert_eq!(s, 201, "{c}");
    for key in ["id", "application_id", "version", "name", "description", "default_member_permissions", "integration_types", "nsfw"] {
        assert!(c.get(key).is_some(), "{key} missing: {c}");
    }
    assert_eq!((&c["type"], &c["application_id"], &c["dm_permission"]), (&json!(1), &json!(app), &json!(true)));
    assert!(c.get("guild_id").is_none());
    assert_eq!(c["options"][1]["choices"][1]["value"], 2);
    let id = c["id"].as_str().unwrap().to_string();
    // POST of an existing name overwrites it (same id, 200).
    let (s, again) = t.post(&global, &w.bot_auth, json!({"name": "ping", "description": "Pong!"})).await;
    assert_eq!((s, &again["id"], &again["description"]), (200, &json!(id), &json!("Pong!")), "{again}");
    let (s, one) = t.get(&format!("{global}/{id}"), &w.bot_auth).await;
    assert_eq!((s, &one["description"]), (200, &json!("Pong!")));
    let (s, patched, _) = t.req(Method::PATCH, &format!("{global}/{id}"), Some(&w.bot_auth), Some(json!({"description": "Patched"}))).await;
    assert_eq!((s, &patched["description"], &patched["name"]), (200, &json!("Patched"), &json!("ping")), "{patched}");

    // Bulk overwrite: ping keeps its id, echo is new, anything else goes.
    let (_, extra) = t.post(&global, &w.bot_auth, json!({"name": "old", "description": "Goes away"})).await;
    let body = json!([ping(), {"name": "echo", "description": "Echoes"}, {"type": 2, "name": "High Five", "description": ""}]);
    let (s, set, _) = t.req(Method::PUT, &global, Some(&w.bot_auth), Some(body)).await;
    assert_eq!(s, 200, "{set}");
    assert_eq!(set.as_array().unwrap().len(), 3);
    assert_eq!(set[0]["id"], id, "kept by name");
    let (_, list) = t.get(&global, &w.bot_auth).await;
    let names: Vec<&str> = list.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(list.as_array().unwrap().len(), 3, "{names:?}");
    assert!(!names.contains(&"old"));
    assert_eq!(t.get(&format!("{global}/{}", extra["id"].as_str().unwrap()), &w.bot_auth).await.0, 404);

    // Guild commands are apart from global ones.
    let guild = format!("/applications/{app}/guilds/{}/commands", w.guild);
    let (s, set, _) = t.req(Method::PUT, &guild, Some(&w.bot_auth), Some(json!([{"name": "local", "description": "Here only"}]))).await;
    assert_eq!(s, 200, "{set}");
    assert_eq!(set[0]["guild_id"], w.guild);
    assert!(set[0].get("dm_permission").is_none());
    let (_, list) = t.get(&guild, &w.bot_auth).await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let gid = list[0]["id"].as_str().unwrap();
    assert_eq!(t.get(&format!("{global}/{gid}"), &w.bot_auth).await.0, 404, "not a global command");
    let (s, _, _) = t.req(Method::DELETE, &format!("{guild}/{gid}"), Some(&w.bot_auth), None).await;
    assert_eq!(s, 204);
    let (s, v, _) = t.req(Method::DELETE, &format!("{guild}/{gid}"), Some(&w.bot_auth), None).await;
    assert_eq!((s, &v["code"]), (404, &json!(10063)));
    let (s, _, _) = t.req(Method::DELETE, &format!("{global}/{id}"), Some(&w.bot_auth), None).await;
    assert_eq!(s, 204);
    // Permissions of guild commands stay an empty list.
    let (s, v) = t.get(&format!("{guild}/permissions"), &w.bot_auth).await;
    assert_eq!((s, v), (200, json!([])));
}

#[tokio::test]
async fn only_the_applications_own_bot_touches_its_commands() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let app = app_id(&t, &w.bot_auth).await;
    let (other_bot, _, _) = t.bot("other").await;
    let (stranger_bot, _, _) = t.bot("stranger").await;
    let other_app = app_id(&t, &other_bot).await;
    // The other bot is in the guild, the stranger is not.
    let other_id = t.get("/users/@me", &other_bot).await.1["id"].as_str().unwrap().to_string();
    t.add_bot(&w.owner, &w.guild, &other_id, 0).await;

    let global = format!("/applications/{app}/commands");
    let guild = format!("/applications/{app}/guilds/{}/commands", w.guild);
    for path in [&global, &guild] {
        for (who, status) in [(&w.bot_auth, 200), (&other_bot, 403), (&w.owner, 403)] {
            assert_eq!(t.get(path, who).await.0, status, "GET {path}");
            let (s, _, _) = t.req(Method::PUT, path, Some(who), Some(json!([{"name": "x", "description": "y"}]))).await;
            assert_eq!(s, status, "PUT {path}");
            assert_eq!(t.post(path, who, json!({"name": "z", "description": "y"})).await.0, if status == 200 { 201 } else { 403 });
        }
    }
    // A bot's own guild commands need it in the guild; unknown guilds are 404.
    let stranger_app = app_id(&t, &stranger_bot).await;
    let path = format!("/applications/{stranger_app}/guilds/{}/commands", w.guild);
    assert_eq!(t.get(&path, &stranger_bot).await.1["code"], 50001);
    assert_eq!(t.get(&format!("/applications/{stranger_app}/guilds/42/commands"), &stranger_bot).await.0, 404);
    assert_eq!(t.get(&format!("/applications/{other_app}/commands"), &other_bot).await.0, 200);
    // Unknown ids are Discord's 10063.
    let (s, v) = t.get(&format!("{global}/123"), &w.bot_auth).await;
    assert_eq!((s, &v["code"]), (404, &json!(10063)));
}

#[tokio::test]
async fn commands_are_validated_as_discord_does() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let app = app_id(&t, &w.bot_auth).await;
    let global = format!("/applications/{app}/commands");
    let error = |v: &Value, path: &[&str]| {
        let mut e = &v["errors"];
        for p in path {
            e = &e[p];
        }
        e["_errors"][0]["code"].as_str().unwrap_or_else(|| panic!("no error at {path:?}: {v}")).to_string()
    };
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({"name": "Ping", "description": "upper case"}), vec!["name"]),
        (json!({"name": "has space", "description": "x"}), vec!["name"]),
        (json!({"name": "a".repeat(33), "description": "x"}), vec!["name"]),
        (json!({"name": "ok"}), vec!["description"]),
        (json!({"name": "ok", "description": "d".repeat(101)}), vec!["description"]),
        (json!({"name": "ok", "description": "x", "type": 9}), vec!["type"]),
        (json!({"type": 3, "name": "Msg", "description": "menus have none"}), vec!["description"]),
        (
            json!({"name": "ok", "description": "x", "options": [{"type": 3, "name": "Bad", "description": "x"}]}),
            vec!["options", "0", "name"],
        ),
        (
            json!({"name": "ok", "description": "x", "options": [
                {"type": 3, "name": "a", "description": "x"}, {"type": 3, "name": "b", "description": "x", "required": true}]}),
            vec!["options", "1", "required"],
        ),
        (
            json!({"name": "ok", "description": "x", "options": [{"type": 5, "name": "b", "description": "x", "choices": [{"name": "y", "value": true}]}]}),
            vec!["options", "0", "choices"],
        ),
        (json!({"name": "ok", "description": "x", "default_member_permissions": "lots"}), vec!["default_member_permissions"]),
        (json!({"name": "ok", "description": "x", "name_localizations": {"fr": ""}}), vec!["name_localizations", "fr"]),
    ];
    for (body, path) in cases {
        let (s, v) = t.post(&global, &w.bot_auth, body.clone()).await;
        assert_eq!((s, &v["code"]), (400, &json!(50035)), "{body}: {v}");
        error(&v, &path);
    }
    // Bulk: errors under each command's index; duplicate names.
    let (s, v, _) = t
        .req(Method::PUT, &global, Some(&w.bot_auth), Some(json!([{"name": "a", "description": "x"}, {"name": "a", "description": "y"}])))
        .await;
    assert_eq!(s, 400, "{v}");
    assert_eq!(error(&v, &["1", "name"]), "APPLICATION_COMMANDS_DUPLICATE_NAME");
    let (s, v, _) = t.req(Method::PUT, &global, Some(&w.bot_auth), Some(json!({"name": "not a list"}))).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)));
    // At most 100 slash commands in a scope.
    let many: Vec<Value> = (0..101).map(|i| json!({"name": format!("c{i}"), "description": "x"})).collect();
    let (s, v, _) = t.req(Method::PUT, &global, Some(&w.bot_auth), Some(Value::Array(many[..100].to_vec()))).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = t.post(&global, &w.bot_auth, many[100].clone()).await;
    assert_eq!((s, &v["code"]), (400, &json!(30032)), "{v}");
    let (s, v, _) = t.req(Method::PUT, &global, Some(&w.bot_auth), Some(Value::Array(many))).await;
    assert_eq!((s, &v["code"]), (400, &json!(30032)), "{v}");
    // Explicit nulls read as absent.
    let (s, v) = t
        .post(
            &global,
            &w.bot_auth,
            json!({"name": "c0", "description": "x", "options": null, "contexts": null, "name_localizations": null}),
        )
        .await;
    assert_eq!(s, 200, "{v}");
}
