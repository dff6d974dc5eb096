//! Interactions end to end over REST and the gateway: a person invokes a
//! slash command, the bot's session gets INTERACTION_CREATE and answers
//! through the callback; ephemeral answers reach only the invoker; bad
//! data is refused before the bot sees anything; no answer in time is
//! INTERACTION_FAILURE; tokens expire.

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;

async fn app_id(t: &TestServer, auth: &str) -> String {
    let (s, v) = t.get("/applications/@me", auth).await;
    assert_eq!(s, 200, "{v}");
    v["id"].as_str().unwrap().to_string()
}

/// `/echo text:<string, required> times:<1|2> who:<user>` and `/admin` (administrators only).
async fn register(t: &TestServer, w: &World, app: &str) -> (Value, Value) {
    let path = format!("/applications/{app}/guilds/{}/commands", w.guild);
    let echo = json!({"name": "echo", "description": "Echoes", "options": [
        {"type": 3, "name": "text", "description": "What", "required": true, "max_length": 20},
        {"type": 4, "name": "times", "description": "How often", "choices": [{"name": "once", "value": 1}, {"name": "twice", "value": 2}]},
        {"type": 6, "name": "who", "description": "Whom"}
    ]});
    let (s, echo) = t.post(&path, &w.bot_auth, echo).await;
    assert_eq!(s, 201, "{echo}");
    let (s, admin) = t.post(&path, &w.bot_auth, json!({"name": "admin", "description": "Admins", "default_member_permissions": "8"})).await;
    assert_eq!(s, 201, "{admin}");
    (echo, admin)
}

/// A server (`tweak`ed) whose world has the bot's `/echo` and `/admin`
/// (see [`register`]) and a second member in the channel.
struct Hall {
    t: TestServer,
    w: World,
    app: String,
    echo: Value,
    admin: Value,
    member: String,
    member_id: String,
}

async fn hall(tweak: impl FnOnce(&mut server::Config)) -> Hall {
    let t = TestServer::start_with(tweak).await;
    let w = t.world().await;
    let app = app_id(&t, &w.bot_auth).await;
    let (echo, admin) = register(&t, &w, &app).await;
    let (member, member_id) = t.user("member").await;
    t.join(&w.owner, &w.channel, &member).await;
    Hall { t, w, app, echo, admin, member, member_id }
}

/// A session of `token` that has its guild (GUILD_CREATE arrived).
async fn in_guild(ws: &str, token: &str, intents: u64) -> Gw {
    let mut gw = Gw::connect(ws).await;
    gw.identify(token, intents).await;
    gw.until("GUILD_CREATE").await;
    gw
}

fn invoke(app: &str, w: &World, cmd: &Value, options: Value, nonce: &str) -> Value {
    json!({
        "type": 2, "application_id": app, "guild_id": w.guild, "channel_id": w.channel, "nonce": nonce,
        "data": {"id": cmd["id"], "name": cmd["name"], "type": 1, "version": cmd["version"], "options": options}
    })
}

#[tokio::test]
async fn a_slash_command_reaches_the_bot_and_its_answers_reach_the_channel() {
    let Hall { t, w, app, echo, admin, member, member_id } = hall(|_| {}).await;

    // The index shows the member what they may run: not the admin command.
    let (s, idx) = t.get(&format!("/guilds/{}/application-command-index", w.guild), &member).await;
    assert_eq!(s, 200, "{idx}");
    let names: Vec<&str> = idx["application_commands"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo"], "{idx}");
    assert_eq!(idx["applications"][0]["id"], app);
    let (_, owner_idx) = t.get(&format!("/guilds/{}/application-command-index", w.guild), &w.owner).await;
    assert_eq!(owner_idx["application_commands"].as_array().unwrap().len(), 2, "{owner_idx}");

    let mut bot = in_guild(&t.ws, &w.bot_token, BOT_INTENTS).await;
    let mut person = in_guild(&t.ws, &member, ALL_INTENTS).await;
    let mut owner = in_guild(&t.ws, &w.owner, ALL_INTENTS).await;

    // Refused before the bot sees anything: unknown option, wrong type,
    // missing required, not a choice, too long, stale version, no permission.
    let bad = [
        (json!([{"name": "text", "type": 3, "value": "hi"}, {"name": "nope", "type": 3, "value": "x"}]), 400),
        (json!([{"name": "text", "type": 4, "value": 5}]), 400),
        (json!([{"name": "times", "type": 4, "value": 1}]), 400),
        (json!([{"name": "text", "type": 3, "value": "hi"}, {"name": "times", "type": 4, "value": 3}]), 400),
        (json!([{"name": "text", "type": 3, "value": "x".repeat(21)}]), 400),
    ];
    for (opts, status) in bad {
        let (s, v) = t.post("/interactions", &member, invoke(&app, &w, &echo, opts.clone(), "n0")).await;
        assert_eq!((s, &v["code"]), (status, &json!(50035)), "{opts} → {v}");
    }
    let mut stale = invoke(&app, &w, &echo, json!([{"name": "text", "type": 3, "value": "hi"}]), "n0");
    stale["data"]["version"] = json!("1");
    let (s, v) = t.post("/interactions", &member, stale).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    let (s, v) = t.post("/interactions", &member, invoke(&app, &w, &admin, json!([]), "n0")).await;
    assert_eq!((s, &v["code"]), (403, &json!(50013)), "{v}");

    // A good one: the bot gets the whole interaction, the person its id and nonce.
    let opts = json!([{"name": "text", "type": 3, "value": "hello"}, {"name": "times", "type": 4, "value": 2}, {"name": "who", "type": 6, "value": w.owner_id}]);
    let (s, v, _) = t.req(Method::POST, "/interactions", Some(&member), Some(invoke(&app, &w, &echo, opts, "n1"))).await;
    assert_eq!(s, 204, "{v}");
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    assert_eq!(
        (&i["type"], &i["application_id"], &i["guild_id"], &i["channel_id"]),
        (&json!(2), &json!(app), &json!(w.guild), &json!(w.channel))
    );
    assert_eq!(i["member"]["user"]["id"], member_id);
    assert!(i["member"]["permissions"].as_str().is_some(), "{i}");
    assert_eq!(i["data"]["options"][0]["value"], "hello");
    assert_eq!(i["data"]["resolved"]["users"][&w.owner_id]["id"], w.owner_id, "{i}");
    for key in ["token", "version", "app_permissions", "locale", "entitlements", "authorizing_integration_owners", "context", "channel"] {
        assert!(i.get(key).is_some(), "{key} missing: {i}");
    }
    let created = person.until("INTERACTION_CREATE").await["d"].clone();
    assert_eq!((&created["id"], &created["nonce"]), (&i["id"], &json!("n1")));

    // The answer: a message in the channel from the bot, with the interaction on it.
    let (id, token) = (i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    let cb = format!("/interactions/{id}/{token}/callback");
    let (s, v, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "hello hello"}}))).await;
    assert_eq!(s, 204, "{v}");
    let m = owner.until("MESSAGE_CREATE").await["d"].clone();
    assert_eq!((&m["content"], &m["type"], &m["author"]["id"]), (&json!("hello hello"), &json!(20), &json!(w.bot_id)), "{m}");
    assert_eq!((&m["application_id"], &m["webhook_id"]), (&json!(app), &json!(app)));
    assert_eq!((&m["interaction_metadata"]["id"], &m["interaction_metadata"]["user"]["id"]), (&i["id"], &json!(member_id)));
    let ok = person.until("INTERACTION_SUCCESS").await["d"].clone();
    assert_eq!(ok["nonce"], "n1");
    // Once only.
    let (s, v, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "again"}}))).await;
    assert_eq!((s, &v["code"]), (400, &json!(40060)), "{v}");
    // Edited and read back through the token; a followup; history has both.
    let original = format!("/webhooks/{app}/{token}/messages/@original");
    let (s, e, _) = t.req(Method::PATCH, &original, None, Some(json!({"content": "edited"}))).await;
    assert_eq!((s, &e["content"]), (200, &json!("edited")), "{e}");
    assert_eq!(owner.until("MESSAGE_UPDATE").await["d"]["content"], "edited");
    let (s, f, _) = t.req(Method::POST, &format!("/webhooks/{app}/{token}?wait=true"), None, Some(json!({"content": "more"}))).await;
    assert_eq!((s, &f["content"]), (200, &json!("more")), "{f}");
    let (_, hist) = t.get(&format!("/channels/{}/messages", w.channel), &w.owner).await;
    let contents: Vec<&str> = hist.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert!(contents.contains(&"edited") && contents.contains(&"more"), "{contents:?}");
    // A token for another application does not work.
    let (s, _, _) = t.req(Method::GET, &format!("/webhooks/1/{token}/messages/@original"), None, None).await;
    assert_eq!(s, 401);
}

#[tokio::test]
async fn ephemeral_answers_reach_only_the_invoker_and_silence_fails() {
    let Hall { t, w, app, echo, member, .. } = hall(|c| c.interactions.response_timeout_ms = 300).await;
    let mut bot = in_guild(&t.ws, &w.bot_token, BOT_INTENTS).await;
    let mut person = in_guild(&t.ws, &member, ALL_INTENTS).await;
    let mut owner = in_guild(&t.ws, &w.owner, ALL_INTENTS).await;

    let opts = json!([{"name": "text", "type": 3, "value": "psst"}]);
    let (s, _, _) = t.req(Method::POST, "/interactions", Some(&member), Some(invoke(&app, &w, &echo, opts.clone(), "e1"))).await;
    assert_eq!(s, 204);
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    let (id, token) = (i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    // Deferred, ephemeral: a "thinking" message only the invoker sees, replaced by the first followup.
    let (s, r, _) = t
        .req(
            Method::POST,
            &format!("/interactions/{id}/{token}/callback?with_response=true"),
            None,
            Some(json!({"type": 5, "data": {"flags": 64}})),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        (&r["interaction"]["response_message_loading"], &r["interaction"]["response_message_ephemeral"]),
        (&json!(true), &json!(true)),
        "{r}"
    );
    let thinking = person.until("MESSAGE_CREATE").await["d"].clone();
    assert_eq!(thinking["flags"].as_u64().unwrap() & (64 | 128), 64 | 128, "{thinking}");
    let (s, f, _) = t.req(Method::POST, &format!("/webhooks/{app}/{token}"), None, Some(json!({"content": "only you"}))).await;
    assert!(s == 200 || s == 204, "{f}");
    let shown = person.until("MESSAGE_UPDATE").await["d"].clone();
    assert_eq!((&shown["content"], &shown["id"]), (&json!("only you"), &thinking["id"]));
    assert_eq!(shown["flags"].as_u64().unwrap() & 128, 0, "no longer loading");
    // Nobody else saw it, and it is in nobody's history.
    t.say(&w.owner, &w.channel, "marker").await;
    let next = owner.until_not(&["PRESENCE_UPDATE", "TYPING_START", "GUILD_MEMBER_UPDATE"]).await;
    assert_eq!((&next["t"], &next["d"]["content"]), (&json!("MESSAGE_CREATE"), &json!("marker")), "{next}");
    let (_, hist) = t.get(&format!("/channels/{}/messages", w.channel), &member).await;
    assert!(hist.as_array().unwrap().iter().all(|m| m["content"] != "only you"), "{hist}");

    // No answer in time: the invoker hears of the failure, the late answer is refused.
    let (s, _, _) = t.req(Method::POST, "/interactions", Some(&member), Some(invoke(&app, &w, &echo, opts, "e2"))).await;
    assert_eq!(s, 204);
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    let failed = person.until("INTERACTION_FAILURE").await["d"].clone();
    assert_eq!((&failed["id"], &failed["nonce"]), (&i["id"], &json!("e2")));
    let cb = format!("/interactions/{}/{}/callback", i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    let (s, v, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "late"}}))).await;
    assert_eq!((s, &v["code"]), (404, &json!(10062)), "{v}");
    // A made-up token is unknown.
    let (s, v, _) = t
        .req(Method::POST, &format!("/interactions/{}/1.2.nope/callback", i["id"].as_str().unwrap()), None, Some(json!({"type": 4})))
        .await;
    assert_eq!(s, 404, "{v}");
}

#[tokio::test]
async fn tokens_expire_and_autocomplete_and_modals_reach_the_invoker() {
    let t = TestServer::start_with(|c| c.interactions.token_ttl_ms = 1_500).await;
    let w = t.world().await;
    let app = app_id(&t, &w.bot_auth).await;
    let path = format!("/applications/{app}/guilds/{}/commands", w.guild);
    let cmd = json!({"name": "find", "description": "Finds", "options": [{"type": 3, "name": "q", "description": "What", "required": true, "autocomplete": true}]});
    let (_, cmd) = t.post(&path, &w.bot_auth, cmd).await;
    let mut bot = in_guild(&t.ws, &w.bot_token, BOT_INTENTS).await;
    let mut owner = in_guild(&t.ws, &w.owner, ALL_INTENTS).await;

    // Autocomplete: a partial value, focused; choices come back to the invoker.
    let mut ac = invoke(&app, &w, &cmd, json!([{"name": "q", "type": 3, "value": "ap", "focused": true}]), "a1");
    ac["type"] = json!(4);
    let (s, _, _) = t.req(Method::POST, "/interactions", Some(&w.owner), Some(ac)).await;
    assert_eq!(s, 204);
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    assert_eq!((&i["type"], &i["data"]["options"][0]["focused"]), (&json!(4), &json!(true)));
    let cb = format!("/interactions/{}/{}/callback", i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    let (s, _, _) =
        t.req(Method::POST, &cb, None, Some(json!({"type": 8, "data": {"choices": [{"name": "apple", "value": "apple"}]}}))).await;
    assert_eq!(s, 204);
    let r = owner.until("APPLICATION_COMMAND_AUTOCOMPLETE_RESPONSE").await["d"].clone();
    assert_eq!((&r["choices"][0]["value"], &r["nonce"]), (&json!("apple"), &json!("a1")));

    // A modal answer opens a modal for the invoker.
    let (s, _, _) = t
        .req(
            Method::POST,
            "/interactions",
            Some(&w.owner),
            Some(invoke(&app, &w, &cmd, json!([{"name": "q", "type": 3, "value": "x"}]), "m1")),
        )
        .await;
    assert_eq!(s, 204);
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    let (id, token) = (i["id"].as_str().unwrap().to_string(), i["token"].as_str().unwrap().to_string());
    let modal = json!({"type": 9, "data": {"custom_id": "form", "title": "Tell me", "components": [{"type": 1, "components": [{"type": 4, "custom_id": "name", "label": "Name", "style": 1}]}]}});
    let (s, _, _) = t.req(Method::POST, &format!("/interactions/{id}/{token}/callback"), None, Some(modal)).await;
    assert_eq!(s, 204);
    let m = owner.until("INTERACTION_MODAL_CREATE").await["d"].clone();
    assert_eq!((&m["custom_id"], &m["nonce"], &m["application"]["id"]), (&json!("form"), &json!("m1"), &json!(app)));

    // The token ends with its lifetime (1.5 s here, 15 minutes by default).
    let original = format!("/webhooks/{app}/{token}/messages/@original");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        // A modal has no message: 404 10008 while the token lives, then 401 50027.
        let (s, v, _) = t.req(Method::GET, &original, None, None).await;
        if s == 401 {
            assert_eq!(v["code"], 50027, "{v}");
            break;
        }
        assert_eq!((s, &v["code"]), (404, &json!(10008)), "{v}");
        assert!(std::time::Instant::now() < deadline, "the token never expired");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (s, _, _) = t.req(Method::POST, &format!("/webhooks/{app}/{token}"), None, Some(json!({"content": "late"}))).await;
    assert_eq!(s, 401);
}

/// A cluster: the person invokes through one node, the bot's session is on
/// a second, the guild's actor on the third; the bot's callback and
/// followup go through yet another node than the one it is connected to.
#[tokio::test]
async fn an_interaction_crosses_three_nodes() {
    let c = crate::cluster::Cluster::<3>::start().await;
    let w = &c.w;
    let (o, a, b) = c.by_role();
    let app = app_id(a, &w.bot_auth).await;
    let path = format!("/applications/{app}/guilds/{}/commands", w.guild);
    let (s, cmd) = a.post(&path, &w.bot_auth, json!({"name": "ping", "description": "Pong"})).await;
    assert_eq!(s, 201, "{cmd}");
    let mut bot = in_guild(&a.ws, &w.bot_token, BOT_INTENTS).await;
    let mut person = in_guild(&b.ws, &w.owner, ALL_INTENTS).await;

    // Invoked through node b (where the person is connected too).
    let (s, v, _) = b.req(Method::POST, "/interactions", Some(&w.owner), Some(invoke(&app, w, &cmd, json!([]), "c1"))).await;
    assert_eq!(s, 204, "{v}");
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    assert_eq!(person.until("INTERACTION_CREATE").await["d"]["nonce"], "c1");
    // Answered through the owner node, followed up through node b.
    let cb = format!("/interactions/{}/{}/callback", i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    let (s, v, _) = o.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "pong"}}))).await;
    assert_eq!(s, 204, "{v}");
    let m = person.until("MESSAGE_CREATE").await["d"].clone();
    assert_eq!((&m["content"], &m["type"]), (&json!("pong"), &json!(20)));
    assert_eq!(person.until("INTERACTION_SUCCESS").await["d"]["nonce"], "c1");
    let token = i["token"].as_str().unwrap();
    let (s, f, _) = b.req(Method::POST, &format!("/webhooks/{app}/{token}"), None, Some(json!({"content": "and more", "flags": 64}))).await;
    assert_eq!((s, &f["content"]), (200, &json!("and more")), "{f}");
    let m = person.until("MESSAGE_CREATE").await["d"].clone();
    assert_eq!((&m["content"], m["flags"].as_u64().unwrap() & 64), (&json!("and more"), 64));
    // The interaction lives only with the guild's actor, on its owner.
    assert_eq!((a.node().guilds.local_actors(), b.node().guilds.local_actors()), (0, 0));
}

/// Components: a button on the bot's answer; a click the message does not
/// have is refused before the bot sees it; UPDATE_MESSAGE edits the
/// message the button is on, for everyone, and later edits of `@original`
/// change that message too.
#[tokio::test]
async fn a_button_click_updates_its_message() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let app = app_id(&t, &w.bot_auth).await;
    let (echo, _) = register(&t, &w, &app).await;
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS).await;
    bot.until("GUILD_CREATE").await;
    let mut owner = Gw::connect(&t.ws).await;
    owner.identify(&w.owner, ALL_INTENTS).await;
    owner.until("GUILD_CREATE").await;

    let opts = json!([{"name": "text", "type": 3, "value": "vote"}]);
    let (s, _, _) = t.req(Method::POST, "/interactions", Some(&w.owner), Some(invoke(&app, &w, &echo, opts, "b1"))).await;
    assert_eq!(s, 204);
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    let cb = format!("/interactions/{}/{}/callback", i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    let row = json!([{"type": 1, "components": [
        {"type": 2, "style": 1, "label": "Yes", "custom_id": "yes"},
        {"type": 2, "style": 4, "label": "Off", "custom_id": "off", "disabled": true}
    ]}]);
    // Limits are checked on answers too.
    let too_long = json!([{"type": 1, "components": [{"type": 2, "style": 1, "label": "x", "custom_id": "y".repeat(101)}]}]);
    let (s, v, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "vote?", "components": too_long}}))).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    assert!(v["errors"]["data"]["components"]["0"]["components"]["0"]["custom_id"]["_errors"].is_array(), "{v}");
    let (s, _, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "vote?", "components": row}}))).await;
    assert_eq!(s, 204);
    let m = owner.until("MESSAGE_CREATE").await["d"].clone();
    let mid = m["id"].as_str().unwrap().to_string();

    let click = |custom_id: &str, message: &str| {
        json!({"type": 3, "application_id": app, "guild_id": w.guild, "channel_id": w.channel, "message_id": message,
               "nonce": "c", "data": {"custom_id": custom_id, "component_type": 2}})
    };
    // Not on the message, disabled, or on someone else's message: refused.
    let (s, v) = t.post("/interactions", &w.owner, click("nope", &mid)).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    let (s, v) = t.post("/interactions", &w.owner, click("off", &mid)).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    let theirs = t.say(&w.owner, &w.channel, "mine").await;
    let (s, v) = t.post("/interactions", &w.owner, click("yes", theirs["id"].as_str().unwrap())).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");

    // A click the message has: the bot gets it with the message, and updates it.
    let (s, _, _) = t.req(Method::POST, "/interactions", Some(&w.owner), Some(click("yes", &mid))).await;
    assert_eq!(s, 204);
    let c = bot.until("INTERACTION_CREATE").await["d"].clone();
    assert_eq!((&c["type"], &c["data"]["custom_id"], &c["message"]["id"]), (&json!(3), &json!("yes"), &json!(mid)), "{c}");
    let token = c["token"].as_str().unwrap();
    let cb = format!("/interactions/{}/{token}/callback", c["id"].as_str().unwrap());
    let (s, v, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 7, "data": {"content": "1 vote", "components": []}}))).await;
    assert_eq!(s, 204, "{v}");
    let u = owner.until("MESSAGE_UPDATE").await["d"].clone();
    assert_eq!((&u["id"], &u["content"], &u["components"]), (&json!(mid), &json!("1 vote"), &json!([])));
    // `@original` of the click is that message.
    let (s, e, _) =
        t.req(Method::PATCH, &format!("/webhooks/{app}/{token}/messages/@original"), None, Some(json!({"content": "2 votes"}))).await;
    assert_eq!((s, &e["id"], &e["content"]), (200, &json!(mid), &json!("2 votes")), "{e}");
    let (_, hist) = t.get(&format!("/channels/{}/messages", w.channel), &w.owner).await;
    assert!(hist.as_array().unwrap().iter().any(|m| m["id"] == mid && m["content"] == "2 votes"), "{hist}");
    // A followup's metadata names the message whose component was used.
    let (s, f, _) = t.req(Method::POST, &format!("/webhooks/{app}/{token}?wait=true"), None, Some(json!({"content": "counted"}))).await;
    assert_eq!(s, 200, "{f}");
    let meta = &f["interaction_metadata"];
    assert_eq!((&meta["id"], &meta["type"], &meta["interacted_message_id"]), (&c["id"], &json!(3), &json!(mid)), "{f}");
}

/// What a test's HTTP interactions endpoint got, and how it answers.
struct Endpoint {
    url: String,
    got: tokio::sync::mpsc::UnboundedReceiver<(bool, Value)>,
}

/// An application's HTTP endpoint: checks each request's Ed25519 signature
/// against `verify_key` as Discord's documentation asks (401 when it does
/// not verify, unless `lax`), answers PING with PONG and a command with a
/// message, and reports every request with whether its signature verified.
async fn endpoint(verify_key: &str, lax: bool) -> Endpoint {
    use axum::http::{HeaderMap, StatusCode};
    let key = hex::decode(verify_key).expect("verify_key is hex");
    assert_eq!(key.len(), 32, "an Ed25519 public key");
    let (tx, got) = tokio::sync::mpsc::unbounded_channel();
    let handler = move |headers: HeaderMap, body: axum::body::Bytes| {
        let (key, tx) = (key.clone(), tx.clone());
        async move {
            let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
            let (sig, ts) = (hex::decode(h("x-signature-ed25519")).unwrap_or_default(), h("x-signature-timestamp"));
            let mut signed = ts.into_bytes();
            signed.extend_from_slice(&body);
            let good = ring::signature::UnparsedPublicKey::new(&ring::signature::ED25519, &key).verify(&signed, &sig).is_ok();
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let _ = tx.send((good, v.clone()));
            if !good && !lax {
                return (StatusCode::UNAUTHORIZED, "invalid request signature".to_string());
            }
            let answer = match v["type"].as_u64() {
                Some(1) => json!({"type": 1}),
                _ => {
                    json!({"type": 4, "data": {"content": format!("http says {}", v["data"]["options"][0]["value"].as_str().unwrap_or("?"))}})
                }
            };
            (StatusCode::OK, answer.to_string())
        }
    };
    let app = axum::Router::new().route("/i", axum::routing::post(handler));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://127.0.0.1:{}/i", l.local_addr().unwrap().port());
    tokio::spawn(async move { axum::serve(l, app).await });
    Endpoint { url, got }
}

async fn set_endpoint(t: &TestServer, w: &World, url: Value) -> (u16, Value) {
    let (s, v, _) = t.req(Method::PATCH, "/applications/@me", Some(&w.bot_auth), Some(json!({"interactions_endpoint_url": url}))).await;
    (s, v)
}

fn refused_url(s: u16, v: &Value) {
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    assert_eq!(v["errors"]["interactions_endpoint_url"]["_errors"][0]["code"], "APPLICATION_INTERACTIONS_ENDPOINT_URL_INVALID", "{v}");
}

#[tokio::test]
async fn an_http_endpoint_application_gets_signed_interactions_and_a_careless_endpoint_is_refused() {
    let t = TestServer::start_with(|c| c.interactions.endpoint_hosts = vec!["127.0.0.1".into()]).await;
    let w = t.world().await;
    let app = app_id(&t, &w.bot_auth).await;
    let (echo, _) = register(&t, &w, &app).await;
    let (_, me) = t.get("/applications/@me", &w.bot_auth).await;
    assert_eq!(me["interactions_endpoint_url"], Value::Null, "{me}");
    let verify_key = me["verify_key"].as_str().unwrap().to_string();

    // An endpoint that answers without checking signatures is refused, as
    // are hosts the deployment did not allow and URLs that are not URLs.
    let mut lax = endpoint(&verify_key, true).await;
    let (s, v) = set_endpoint(&t, &w, json!(lax.url)).await;
    refused_url(s, &v);
    let (good, ping) = lax.got.recv().await.unwrap();
    assert!(good && ping["type"] == 1, "a signed PING first: {ping}");
    let (good, _) = lax.got.recv().await.unwrap();
    assert!(!good, "then one whose signature does not verify");
    let port = lax.url.rsplit(':').next().unwrap().to_string();
    for url in [format!("http://localhost:{port}"), "ftp://127.0.0.1/i".into(), "not a url".into()] {
        let (s, v) = set_endpoint(&t, &w, json!(url)).await;
        refused_url(s, &v);
    }
    let (_, me) = t.get("/applications/@me", &w.bot_auth).await;
    assert_eq!(me["interactions_endpoint_url"], Value::Null, "nothing stored: {me}");

    // A careful endpoint is taken, and gets the interactions from then on.
    let mut ep = endpoint(&verify_key, false).await;
    let (s, v) = set_endpoint(&t, &w, json!(ep.url)).await;
    assert_eq!((s, &v["interactions_endpoint_url"]), (200, &json!(ep.url)), "{v}");
    assert!(ep.got.recv().await.unwrap().0 && !ep.got.recv().await.unwrap().0, "a good PING, then a bad one");
    let (member, member_id) = t.user("member").await;
    t.join(&w.owner, &w.channel, &member).await;
    let mut person = in_guild(&t.ws, &member, ALL_INTENTS).await;
    let mut owner = in_guild(&t.ws, &w.owner, ALL_INTENTS).await;
    let opts = json!([{"name": "text", "type": 3, "value": "over http"}]);
    let (s, v, _) = t.req(Method::POST, "/interactions", Some(&member), Some(invoke(&app, &w, &echo, opts, "h1"))).await;
    assert_eq!(s, 204, "{v}");
    let (good, i) = ep.got.recv().await.unwrap();
    assert!(good, "signed: {i}");
    assert_eq!((&i["type"], &i["application_id"], &i["member"]["user"]["id"]), (&json!(2), &json!(app), &json!(member_id)), "{i}");
    assert!(i["token"].as_str().is_some_and(|t| !t.is_empty()), "{i}");
    // The endpoint's answer is the initial response: a message in the channel.
    let m = owner.until("MESSAGE_CREATE").await["d"].clone();
    assert_eq!((&m["content"], &m["type"], &m["author"]["id"]), (&json!("http says over http"), &json!(20), &json!(w.bot_id)), "{m}");
    assert_eq!(m["interaction_metadata"]["id"], i["id"]);
    let ok = person.until("INTERACTION_SUCCESS").await["d"].clone();
    assert_eq!(ok["nonce"], "h1");
    // The token works for followups as over the gateway.
    let token = i["token"].as_str().unwrap();
    let (s, f, _) = t.req(Method::POST, &format!("/webhooks/{app}/{token}?wait=true"), None, Some(json!({"content": "later"}))).await;
    assert_eq!((s, &f["content"]), (200, &json!("later")), "{f}");

    // Cleared: back to the gateway.
    let (s, v) = set_endpoint(&t, &w, Value::Null).await;
    assert_eq!((s, &v["interactions_endpoint_url"]), (200, &Value::Null), "{v}");
}

#[tokio::test]
async fn http_endpoints_are_off_unless_the_deployment_names_their_hosts() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (_, me) = t.get("/applications/@me", &w.bot_auth).await;
    let mut ep = endpoint(me["verify_key"].as_str().unwrap(), false).await;
    let (s, v) = set_endpoint(&t, &w, json!(ep.url)).await;
    refused_url(s, &v);
    assert!(ep.got.try_recv().is_err(), "the server never called it");
}

#[tokio::test]
async fn permission_overrides_decide_who_may_run_a_command_and_where() {
    let Hall { t, w, app, echo, member, member_id, .. } = hall(|_| {}).await;
    let (s, muted) = t.post(&format!("/guilds/{}/roles", w.guild), &w.owner, json!({"name": "muted"})).await;
    assert_eq!(s, 200, "{muted}");
    let muted = muted["id"].as_str().unwrap().to_string();
    let (s, _, _) = t.req(Method::PUT, &format!("/guilds/{}/members/{member_id}/roles/{muted}", w.guild), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    let mut bot = in_guild(&t.ws, &w.bot_token, BOT_INTENTS).await;
    let path = |cmd: &str| format!("/applications/{app}/guilds/{}/commands/{cmd}/permissions", w.guild);
    let put = |who: String, cmd: String, perms: Value| {
        let t = &t;
        let path = path(&cmd);
        async move { t.req(Method::PUT, &path, Some(&who), Some(json!({"permissions": perms}))).await }
    };
    let echo_id = echo["id"].as_str().unwrap().to_string();
    let index = |who: String| {
        let t = &t;
        let g = w.guild.clone();
        async move {
            let (_, idx) = t.get(&format!("/guilds/{g}/application-command-index"), &who).await;
            idx["application_commands"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
        }
    };
    let run = |who: String, nonce: &'static str| {
        let t = &t;
        let body = invoke(&app, &w, &echo, json!([{"name": "text", "type": 3, "value": nonce}]), nonce);
        async move {
            let (s, v, _) = t.req(Method::POST, "/interactions", Some(&who), Some(body)).await;
            (s, v["code"].clone())
        }
    };
    assert_eq!(run(member.clone(), "p0").await, (204, Value::Null));
    assert_eq!(bot.until("INTERACTION_CREATE").await["d"]["data"]["options"][0]["value"], "p0");

    // Bots cannot set them; a body that is not one is refused.
    let (s, v, _) = put(w.bot_auth.clone(), echo_id.clone(), json!([])).await;
    assert_eq!((s, &v["code"]), (403, &json!(20001)), "{v}");
    let (s, v, _) = put(w.owner.clone(), echo_id.clone(), json!([{"id": muted, "type": 9, "permission": false}])).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    let (s, v, _) = put(w.owner.clone(), "1234".into(), json!([])).await;
    assert_eq!((s, &v["code"]), (404, &json!(10063)), "{v}");

    // The muted role may not: gone from the member's index, refused, never at the bot.
    let (s, v, _) = put(w.owner.clone(), echo_id.clone(), json!([{"id": muted, "type": 1, "permission": false}])).await;
    assert_eq!((s, &v["id"], &v["permissions"][0]["id"]), (200, &json!(echo_id), &json!(muted)), "{v}");
    let ev = bot.until("APPLICATION_COMMAND_PERMISSIONS_UPDATE").await["d"].clone();
    assert_eq!(
        (&ev["id"], &ev["application_id"], &ev["guild_id"], &ev["permissions"]),
        (&v["id"], &json!(app), &json!(w.guild), &v["permissions"]),
        "{ev}"
    );
    assert_eq!(index(member.clone()).await, Vec::<String>::new());
    assert_eq!(run(member.clone(), "p1").await, (403, json!(50013)));
    let (s, listed) = t.get(&format!("/applications/{app}/guilds/{}/commands/permissions", w.guild), &w.bot_auth).await;
    assert_eq!((s, listed.as_array().unwrap().len()), (200, 1), "{listed}");
    // A user override decides over the role.
    let (s, _, _) = put(
        w.owner.clone(),
        echo_id.clone(),
        json!([{"id": muted, "type": 1, "permission": false}, {"id": member_id, "type": 2, "permission": true}]),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(index(member.clone()).await, ["echo"]);
    assert_eq!(run(member.clone(), "p2").await, (204, Value::Null));
    assert_eq!(bot.until("INTERACTION_CREATE").await["d"]["data"]["options"][0]["value"], "p2", "p1 never reached the bot");

    // Application-wide, in every channel but this one: refused everywhere
    // else, even for the owner; then allowed here again.
    let all_channels = (w.guild.parse::<u64>().unwrap() - 1).to_string();
    let (s, _, _) = put(w.owner.clone(), app.clone(), json!([{"id": all_channels, "type": 3, "permission": false}])).await;
    assert_eq!(s, 200);
    assert_eq!(run(w.owner.clone(), "p3").await, (403, json!(50013)));
    assert_eq!(index(w.owner.clone()).await, Vec::<String>::new(), "denied in every channel: not offered");
    let (s, _, _) = put(
        w.owner.clone(),
        app.clone(),
        json!([{"id": all_channels, "type": 3, "permission": false}, {"id": w.channel, "type": 3, "permission": true}]),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(run(w.owner.clone(), "p4").await, (204, Value::Null));
    let (s, one) = t.get(&path(&app), &w.owner).await;
    assert_eq!((s, one["permissions"].as_array().unwrap().len()), (200, 2), "{one}");
    // Cleared: an empty list removes them (404 10066 after).
    let (s, _, _) = put(w.owner.clone(), app.clone(), json!([])).await;
    assert_eq!(s, 200);
    let (s, v) = t.get(&path(&app), &w.owner).await;
    assert_eq!((s, &v["code"]), (404, &json!(10066)), "{v}");
}

#[tokio::test]
async fn a_modal_submission_must_fit_the_modal_that_was_shown() {
    let Hall { t, w, app, echo, member, .. } = hall(|_| {}).await;
    let mut bot = in_guild(&t.ws, &w.bot_token, BOT_INTENTS).await;
    let mut owner = in_guild(&t.ws, &w.owner, ALL_INTENTS).await;
    let opts = json!([{"name": "text", "type": 3, "value": "form"}]);
    let (s, _, _) = t.req(Method::POST, "/interactions", Some(&w.owner), Some(invoke(&app, &w, &echo, opts, "f1"))).await;
    assert_eq!(s, 204);
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    let cb = format!("/interactions/{}/{}/callback", i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    let modal = json!({"type": 9, "data": {"custom_id": "form", "title": "Tell me", "components": [
        {"type": 1, "components": [{"type": 4, "custom_id": "name", "label": "Name", "style": 1, "max_length": 10}]},
        {"type": 18, "label": "Why", "component": {"type": 4, "custom_id": "why", "style": 2, "required": false}}
    ]}});
    let (s, _, _) = t.req(Method::POST, &cb, None, Some(modal)).await;
    assert_eq!(s, 204);
    owner.until("INTERACTION_MODAL_CREATE").await;

    let submit = |custom_id: &str, fields: Value| {
        json!({"type": 5, "application_id": app, "guild_id": w.guild, "channel_id": w.channel, "nonce": "s",
               "data": {"custom_id": custom_id, "components": fields}})
    };
    let name = |v: &str| json!({"type": 1, "components": [{"type": 4, "custom_id": "name", "value": v}]});
    let bad = [
        (&w.owner, submit("other", json!([name("Ada")])), "data.custom_id"),
        (&member, submit("form", json!([name("Ada")])), "data.custom_id"),
        (
            &w.owner,
            submit("form", json!([name("Ada"), {"type": 1, "components": [{"type": 4, "custom_id": "extra", "value": "x"}]}])),
            "data.components",
        ),
        (&w.owner, submit("form", json!([name("much too long a name")])), "data.components"),
        (&w.owner, submit("form", json!([name("")])), "data.components"),
        (&w.owner, submit("form", json!([])), "data.components"),
    ];
    for (who, body, field) in bad {
        let (s, v, _) = t.req(Method::POST, "/interactions", Some(who), Some(body.clone())).await;
        let path: Vec<&str> = field.split('.').collect();
        assert_eq!((s, &v["code"]), (400, &json!(50035)), "{body} → {v}");
        assert!(v["errors"][path[0]][path[1]]["_errors"].is_array(), "{field}: {v}");
    }
    // The modal as shown: the optional field may be left out. Once only.
    let good = submit("form", json!([name("Ada")]));
    let (s, v, _) = t.req(Method::POST, "/interactions", Some(&w.owner), Some(good.clone())).await;
    assert_eq!(s, 204, "{v}");
    let sub = bot.until("INTERACTION_CREATE").await["d"].clone();
    assert_eq!(
        (&sub["type"], &sub["data"]["custom_id"], &sub["data"]["components"][0]["components"][0]["value"]),
        (&json!(5), &json!("form"), &json!("Ada")),
        "{sub}"
    );
    let (s, v, _) = t.req(Method::POST, "/interactions", Some(&w.owner), Some(good)).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "submitted already: {v}");
    // The answer's metadata names the interaction that showed the modal.
    let cb = format!("/interactions/{}/{}/callback", sub["id"].as_str().unwrap(), sub["token"].as_str().unwrap());
    let (s, _, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "thanks Ada"}}))).await;
    assert_eq!(s, 204);
    let m = owner.until("MESSAGE_CREATE").await["d"].clone();
    let meta = &m["interaction_metadata"];
    assert_eq!((&meta["id"], &meta["type"], &meta["triggering_interaction_metadata"]["id"]), (&sub["id"], &json!(5), &i["id"]), "{m}");
    assert_eq!(meta["triggering_interaction_metadata"]["name"], "echo", "{m}");
}

#[tokio::test]
async fn an_attachment_option_carries_a_file_the_bot_can_fetch() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let app = app_id(&t, &w.bot_auth).await;
    let path = format!("/applications/{app}/guilds/{}/commands", w.guild);
    let cmd = json!({"name": "look", "description": "Looks at a file", "options": [
        {"type": 11, "name": "file", "description": "The file", "required": true},
        {"type": 3, "name": "note", "description": "A note"}
    ]});
    let (s, cmd) = t.post(&path, &w.bot_auth, cmd).await;
    assert_eq!(s, 201, "{cmd}");
    let mut bot = in_guild(&t.ws, &w.bot_token, BOT_INTENTS).await;
    // As Discord's client sends it: payload_json first, then the files.
    let post = |option_value: &str| {
        let payload = json!({
            "type": 2, "application_id": app, "guild_id": w.guild, "channel_id": w.channel, "nonce": "att",
            "data": {"id": cmd["id"], "name": "look", "type": 1, "version": cmd["version"],
                     "options": [{"name": "file", "type": 11, "value": option_value}],
                     "attachments": [{"id": "0", "filename": "notes.txt"}]}
        });
        let form = reqwest::multipart::Form::new()
            .text("payload_json", payload.to_string())
            .part("files[0]", reqwest::multipart::Part::bytes(b"file body".to_vec()).file_name("notes.txt"));
        t.http.post(format!("{}/interactions", t.base)).header("authorization", &w.owner).multipart(form).send()
    };
    // An option naming a file that was not sent is refused.
    let r = post("1").await.unwrap();
    assert_eq!(r.status(), 400);
    assert_eq!(r.json::<Value>().await.unwrap()["code"], 50035);
    let r = post("0").await.unwrap();
    assert_eq!(r.status(), 204, "{:?}", r.text().await);
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    let id = i["data"]["options"][0]["value"].as_str().unwrap().to_string();
    let a = &i["data"]["resolved"]["attachments"][&id];
    assert_eq!((&a["id"], &a["filename"], &a["size"]), (&json!(id), &json!("notes.txt"), &json!(9)), "{i}");
    let body = t.http.get(a["url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(body.status(), 200);
    assert_eq!(body.bytes().await.unwrap().as_ref(), b"file body");
}

#[tokio::test]
async fn a_button_on_an_ephemeral_message_works_for_its_invoker_only() {
    let Hall { t, w, app, echo, member, .. } = hall(|_| {}).await;
    let mut bot = in_guild(&t.ws, &w.bot_token, BOT_INTENTS).await;
    let mut person = in_guild(&t.ws, &member, ALL_INTENTS).await;

    let opts = json!([{"name": "text", "type": 3, "value": "secret"}]);
    let (s, _, _) = t.req(Method::POST, "/interactions", Some(&member), Some(invoke(&app, &w, &echo, opts, "e1"))).await;
    assert_eq!(s, 204);
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    let cb = format!("/interactions/{}/{}/callback", i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    let row = json!([{"type": 1, "components": [{"type": 2, "style": 1, "label": "More", "custom_id": "more"}]}]);
    let (s, _, _) =
        t.req(Method::POST, &cb, None, Some(json!({"type": 4, "data": {"content": "psst", "flags": 64, "components": row}}))).await;
    assert_eq!(s, 204);
    let m = person.until("MESSAGE_CREATE").await["d"].clone();
    let mid = m["id"].as_str().unwrap().to_string();
    let click = |custom_id: &str, flags: u64| {
        json!({"type": 3, "application_id": app, "guild_id": w.guild, "channel_id": w.channel, "message_id": mid,
               "message_flags": flags, "nonce": "c", "data": {"custom_id": custom_id, "component_type": 2}})
    };
    // Someone else, a button it does not have, or no ephemeral flag: refused.
    let (s, v) = t.post("/interactions", &w.owner, click("more", 64)).await;
    assert_eq!((s, &v["code"]), (404, &json!(10008)), "{v}");
    let (s, v) = t.post("/interactions", &member, click("less", 64)).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    let (s, v) = t.post("/interactions", &member, click("more", 0)).await;
    assert_eq!((s, &v["code"]), (404, &json!(10008)), "{v}");
    // The invoker's click reaches the bot with the message, and UPDATE_MESSAGE edits it for them only.
    let (s, v, _) = t.req(Method::POST, "/interactions", Some(&member), Some(click("more", 64))).await;
    assert_eq!(s, 204, "{v}");
    let c = bot.until("INTERACTION_CREATE").await["d"].clone();
    assert_eq!((&c["data"]["custom_id"], &c["message"]["id"], &c["message"]["flags"]), (&json!("more"), &json!(mid), &json!(64)), "{c}");
    let cb = format!("/interactions/{}/{}/callback", c["id"].as_str().unwrap(), c["token"].as_str().unwrap());
    let (s, v, _) = t.req(Method::POST, &cb, None, Some(json!({"type": 7, "data": {"content": "psst, more", "components": []}}))).await;
    assert_eq!(s, 204, "{v}");
    let u = person.until("MESSAGE_UPDATE").await["d"].clone();
    assert_eq!((&u["id"], &u["content"], &u["flags"]), (&json!(mid), &json!("psst, more"), &json!(64)), "{u}");
    let (_, hist) = t.get(&format!("/channels/{}/messages", w.channel), &member).await;
    assert!(hist.as_array().unwrap().iter().all(|m| m["id"] != mid), "never stored: {hist}");
    // The button is gone from the message now.
    let (s, v) = t.post("/interactions", &member, click("more", 64)).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
}

#[tokio::test]
async fn a_command_runs_in_a_dm_with_its_bot() {
    let Hall { t, w, app, member, member_id, .. } = hall(|_| {}).await;
    let path = format!("/applications/{app}/commands");
    let ping =
        json!({"name": "ping", "description": "Pings", "contexts": [0, 1], "options": [{"type": 6, "name": "who", "description": "Whom"}]});
    let (s, ping) = t.post(&path, &w.bot_auth, ping).await;
    assert_eq!(s, 201, "{ping}");
    let (s, only) = t.post(&path, &w.bot_auth, json!({"name": "guildonly", "description": "Guild only", "contexts": [0]})).await;
    assert_eq!(s, 201, "{only}");
    const DIRECT_MESSAGES: u64 = 1 << 12;
    let mut bot = in_guild(&t.ws, &w.bot_token, BOT_INTENTS | DIRECT_MESSAGES).await;
    let mut person = in_guild(&t.ws, &member, ALL_INTENTS).await;
    let (s, dm) = t.post("/users/@me/channels", &member, json!({"recipient_id": w.bot_id})).await;
    assert_eq!(s, 200, "{dm}");
    let dm_id = dm["id"].as_str().unwrap().to_string();

    // The DM's index (and the person's own): the bot's commands for DMs, not the guild's.
    for path in ["/users/@me/application-command-index".to_string(), format!("/channels/{dm_id}/application-command-index")] {
        let (s, idx) = t.get(&path, &member).await;
        assert_eq!(s, 200, "{path}: {idx}");
        let names: Vec<&str> = idx["application_commands"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["ping"], "{path}: {idx}");
        assert_eq!(idx["applications"][0]["id"], app, "{idx}");
    }
    // A guild channel's index is its guild's.
    let (_, gi) = t.get(&format!("/channels/{}/application-command-index", w.channel), &member).await;
    let mut names: Vec<&str> = gi["application_commands"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    names.sort();
    assert_eq!(names, ["echo", "guildonly", "ping"], "{gi}");
    // Someone else's DM has no index for the caller.
    let (stranger, _) = t.user("stranger").await;
    let (s, _) = t.get(&format!("/channels/{dm_id}/application-command-index"), &stranger).await;
    assert_eq!(s, 404);

    let body = |cmd: &Value, options: Value, nonce: &str| {
        json!({"type": 2, "application_id": app, "channel_id": dm_id, "nonce": nonce,
            "data": {"id": cmd["id"], "name": cmd["name"], "type": 1, "version": cmd["version"], "options": options}})
    };
    // Refused before the bot sees anything: a guild-only command; a stranger in someone else's DM; a guild id that is not the DM's.
    let (s, v) = t.post("/interactions", &member, body(&only, json!([]), "d0")).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
    let (s, v) = t.post("/interactions", &stranger, body(&ping, json!([]), "d0")).await;
    assert_eq!((s, &v["code"]), (403, &json!(50001)), "{v}");
    let mut wrong = body(&ping, json!([]), "d0");
    wrong["guild_id"] = json!(w.guild);
    let (s, v) = t.post("/interactions", &member, wrong).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");

    // The bot gets a DM interaction: `user`, no guild or member, context BOT_DM.
    let (s, v, _) = t
        .req(Method::POST, "/interactions", Some(&member), Some(body(&ping, json!([{"name": "who", "type": 6, "value": member_id}]), "d1")))
        .await;
    assert_eq!(s, 204, "{v}");
    let i = bot.until("INTERACTION_CREATE").await["d"].clone();
    assert_eq!(
        (&i["user"]["id"], &i["channel_id"], &i["channel"]["id"], &i["context"]),
        (&json!(member_id), &json!(dm_id), &json!(dm_id), &json!(1)),
        "{i}"
    );
    assert!(i.get("guild_id").is_none() && i.get("member").is_none(), "{i}");
    assert_eq!(i["authorizing_integration_owners"], json!({"0": "0"}), "{i}");
    assert_eq!(i["data"]["resolved"]["users"][&member_id]["id"], member_id, "{i}");
    assert_eq!(person.until("INTERACTION_CREATE").await["d"]["nonce"], "d1");

    // Its answer is a DM message both sides get, with the interaction on it.
    let (id, token) = (i["id"].as_str().unwrap(), i["token"].as_str().unwrap());
    let (s, v, _) = t
        .req(Method::POST, &format!("/interactions/{id}/{token}/callback"), None, Some(json!({"type": 4, "data": {"content": "pong"}})))
        .await;
    assert_eq!(s, 204, "{v}");
    for gw in [&mut person, &mut bot] {
        let m = gw.until("MESSAGE_CREATE").await["d"].clone();
        assert_eq!(
            (&m["content"], &m["channel_id"], &m["type"], &m["interaction_metadata"]["id"]),
            (&json!("pong"), &json!(dm_id), &json!(20), &i["id"]),
            "{m}"
        );
        assert!(m.get("guild_id").is_none_or(Value::is_null), "{m}");
    }
    assert_eq!(person.until("INTERACTION_SUCCESS").await["d"]["nonce"], "d1");
    // An ephemeral followup reaches the person only; an edit through the token; history has the public ones.
    let followup = format!("/webhooks/{app}/{token}");
    let (s, v) = t.post(&followup, &w.bot_auth, json!({"content": "just you", "flags": 64})).await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = t.post(&followup, &w.bot_auth, json!({"content": "everyone"})).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(person.until("MESSAGE_CREATE").await["d"]["content"], "just you");
    assert_eq!(bot.until("MESSAGE_CREATE").await["d"]["content"], "everyone", "the bot never sees the ephemeral one");
    let (s, v, _) = t.req(Method::PATCH, &format!("{followup}/messages/@original"), None, Some(json!({"content": "pong!"}))).await;
    assert_eq!((s, &v["content"]), (200, &json!("pong!")), "{v}");
    assert_eq!(person.until("MESSAGE_UPDATE").await["d"]["content"], "pong!");
    let (_, hist) = t.get(&format!("/channels/{dm_id}/messages"), &member).await;
    let contents: Vec<&str> = hist.as_array().unwrap().iter().map(|m| m["content"].as_str().unwrap()).collect();
    assert_eq!(contents, ["everyone", "pong!"], "{hist}");
}
