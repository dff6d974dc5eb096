//! Read states: an ack over REST is recorded and reaches every session of
//! the person as MESSAGE_ACK; READY carries each channel's last read
//! message and mention count; mentions count for @user, @role, @everyone
//! and @here, and every DM message, only where the person may look and
//! never for the author; a manual ack marks a message unread.

use std::time::Duration;

use protocol::UserId;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;
use crate::dms::member;

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

/// `user`'s read states in the store: channel id -> (last read, mentions).
async fn states(t: &TestServer, user: &str) -> Vec<(String, String, u32)> {
    let found = t.node().store.read_states_of(&[UserId(user.parse().unwrap())]).await.unwrap();
    found.into_iter().flat_map(|(_, v)| v).map(|r| (r.channel_id.0.to_string(), r.last_message_id.0.to_string(), r.mention_count)).collect()
}

/// Waits (with a deadline) until `user`'s state in `channel` has `mentions`
/// mentions: counts are written after the message commits.
async fn mentions_reach(t: &TestServer, user: &str, channel: &str, mentions: u32) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now = states(t, user).await;
        if now.iter().any(|(c, _, n)| c == channel && *n == mentions) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{channel}: never {mentions} mentions: {now:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// READY's read state entries of a new session of `token`, by channel.
async fn ready_entries(t: &TestServer, token: &str) -> Vec<(String, String, u64)> {
    let mut g = Gw::connect(&t.ws).await;
    let ready = g.identify(token, ALL_INTENTS).await;
    let rs = &ready["d"]["read_state"];
    assert_eq!(rs["partial"], false, "{rs}");
    assert!(rs["version"].as_u64().is_some(), "{rs}");
    let mut out: Vec<(String, String, u64)> = rs["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert!(e["last_pin_timestamp"].is_string(), "{e}");
            (e["id"].as_str().unwrap().into(), e["last_message_id"].as_str().unwrap().into(), e["mention_count"].as_u64().unwrap())
        })
        .collect();
    out.sort();
    out
}

async fn ack(t: &TestServer, auth: &str, channel: &str, message: &str, body: Option<Value>) -> (u16, Value) {
    let (s, v, _) = t.req(Method::POST, &format!("/channels/{channel}/messages/{message}/ack"), Some(auth), body).await;
    (s, v)
}

#[tokio::test]
async fn acks_reach_every_session_and_ready_and_mentions_count_where_they_should() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (alice, alice_id) = member(&t, &w, "alice").await;
    let c = &w.channel;
    // Alice on two sessions; nothing read yet.
    let mut s1 = Gw::connect(&t.ws).await;
    let ready = s1.identify(&alice, ALL_INTENTS).await;
    assert_eq!(ready["d"]["read_state"]["entries"], json!([]), "{}", ready["d"]["read_state"]);
    let mut s2 = Gw::connect(&t.ws).await;
    s2.identify(&alice, ALL_INTENTS).await;
    // A bot's READY has none.
    let mut bot = Gw::connect(&t.ws).await;
    let ready = bot.identify(&w.bot_token, BOT_INTENTS).await;
    assert!(ready["d"].get("read_state").is_none(), "{}", ready["d"]);

    // @user, then @everyone from the owner (who may), then a role.
    t.say(&w.owner, c, "plain words").await;
    t.say(&w.owner, c, &format!("hey <@{alice_id}>")).await;
    mentions_reach(&t, &alice_id, c, 1).await;
    let everyone = t.say(&w.owner, c, "@everyone meeting").await;
    assert_eq!(everyone["mention_everyone"], true);
    mentions_reach(&t, &alice_id, c, 2).await;
    let (s, role) = t.post(&format!("/guilds/{}/roles", w.guild), &w.owner, json!({"name": "crew", "permissions": "0"})).await;
    assert_eq!(s, 200, "{role}");
    let role = id(&role);
    let (s, _, _) = t.req(Method::PUT, &format!("/guilds/{}/members/{alice_id}/roles/{role}", w.guild), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    let by_role = t.say(&w.owner, c, &format!("<@&{role}> deploy")).await;
    assert_eq!(by_role["mention_roles"], json!([role]), "the owner may mention any role");
    mentions_reach(&t, &alice_id, c, 3).await;
    // Without MENTION_EVERYONE, alice's @everyone is plain text and a role
    // that is not mentionable stays plain too; her mention of herself
    // counts for nobody.
    let (_, roles) = t.get(&format!("/guilds/{}/roles", w.guild), &w.owner).await;
    let everyone_role = roles.as_array().unwrap().iter().find(|r| r["id"] == w.guild.as_str()).unwrap();
    let bits: u64 = everyone_role["permissions"].as_str().unwrap().parse().unwrap();
    let cut = json!({"permissions": (bits & !protocol::model::permission::MENTION_EVERYONE).to_string()});
    let (s, v, _) = t.req(Method::PATCH, &format!("/guilds/{}/roles/{}", w.guild, w.guild), Some(&w.owner), Some(cut)).await;
    assert_eq!(s, 200, "{v}");
    let plain = t.say(&alice, c, &format!("@everyone <@&{role}> <@{alice_id}>")).await;
    assert_eq!((plain["mention_everyone"].as_bool(), plain["mention_roles"].clone()), (Some(false), json!([])), "{plain}");
    // A mention in a channel alice cannot see is not counted.
    let (s, secret) = t.post(&format!("/guilds/{}/channels", w.guild), &w.owner, json!({"name": "secret"})).await;
    assert_eq!(s, 201);
    let secret = id(&secret);
    let deny = json!({"type": 0, "allow": "0", "deny": "1024"});
    assert_eq!(t.req(Method::PUT, &format!("/channels/{secret}/permissions/{}", w.guild), Some(&w.owner), Some(deny)).await.0, 204);
    t.say(&w.owner, &secret, &format!("<@{alice_id}> you cannot read this")).await;
    // Counts are written in order: once the next one lands, the hidden one
    // would have too.
    let last = t.say(&w.owner, c, &format!("<@{alice_id}> last")).await;
    mentions_reach(&t, &alice_id, c, 4).await;
    assert!(!states(&t, &alice_id).await.iter().any(|(ch, _, _)| *ch == secret), "nothing counted where she cannot look");
    assert!(!states(&t, &w.owner_id).await.iter().any(|(ch, _, n)| ch == c && *n > 0), "the owner's own messages count for nobody");

    // The ack: 200 {"token": null}; both sessions get MESSAGE_ACK.
    assert_eq!(ack(&t, &alice, c, &id(&last), Some(json!({"token": null}))).await, (200, json!({"token": null})));
    for s in [&mut s1, &mut s2] {
        let ev = s.until("MESSAGE_ACK").await;
        assert_eq!((ev["d"]["channel_id"].as_str(), ev["d"]["message_id"].as_str()), (Some(c.as_str()), Some(id(&last).as_str())), "{ev}");
        assert!(ev["d"]["version"].as_u64().is_some(), "{ev}");
    }
    assert_eq!(ready_entries(&t, &alice).await, vec![(c.clone(), id(&last), 0)]);
    // An older plain ack does not move the mark back; a manual one does,
    // with the mentions it says are left.
    assert_eq!(ack(&t, &alice, c, &id(&everyone), None).await.0, 200);
    assert_eq!(ready_entries(&t, &alice).await, vec![(c.clone(), id(&last), 0)]);
    let (s, _) = ack(&t, &alice, c, &id(&everyone), Some(json!({"manual": true, "mention_count": 2}))).await;
    assert_eq!(s, 200);
    // The plain ack's event first (it is still announced), then the manual one.
    let ev = s1.until("MESSAGE_ACK").await;
    assert_eq!(ev["d"]["manual"], Value::Null, "{ev}");
    let ev = s1.until("MESSAGE_ACK").await;
    assert_eq!((ev["d"]["manual"].as_bool(), ev["d"]["mention_count"].as_u64()), (Some(true), Some(2)), "{ev}");
    assert_eq!(ready_entries(&t, &alice).await, vec![(c.clone(), id(&everyone), 2)]);

    // @here counts only for those online: alice is (two sessions), bob is not.
    let (bob, bob_id) = member(&t, &w, "bob").await;
    t.say(&w.owner, c, "@here standup").await;
    let marker = t.say(&w.owner, c, &format!("<@{bob_id}> marker")).await;
    mentions_reach(&t, &bob_id, c, 1).await;
    mentions_reach(&t, &alice_id, c, 3).await;
    assert_eq!(ack(&t, &bob, c, &id(&marker), None).await.0, 200);

    // Every DM message counts for the other side.
    let (s, dm) = t.post("/users/@me/channels", &w.owner, json!({"recipient_id": alice_id})).await;
    assert_eq!(s, 200, "{dm}");
    let dm = id(&dm);
    t.say(&w.owner, &dm, "psst").await;
    t.say(&w.owner, &dm, "psst again").await;
    mentions_reach(&t, &alice_id, &dm, 2).await;
    let read = t.say(&alice, &dm, "read you").await;
    assert_eq!(ack(&t, &alice, &dm, &id(&read), None).await.0, 200);
    let entries = ready_entries(&t, &alice).await;
    assert!(entries.contains(&(dm.clone(), id(&read), 0)), "{entries:?}");
}

#[tokio::test]
async fn acks_are_refused_to_those_who_cannot_see_the_channel() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (alice, alice_id) = member(&t, &w, "alice").await;
    let (stranger, _) = t.user("stranger").await;
    let m = t.say(&w.owner, &w.channel, "hello").await;
    let m = id(&m);
    let (s, secret) = t.post(&format!("/guilds/{}/channels", w.guild), &w.owner, json!({"name": "secret"})).await;
    assert_eq!(s, 201);
    let secret = id(&secret);
    let deny = json!({"type": 0, "allow": "0", "deny": "1024"});
    assert_eq!(t.req(Method::PUT, &format!("/channels/{secret}/permissions/{}", w.guild), Some(&w.owner), Some(deny)).await.0, 204);

    let code = |v: &Value| v["code"].as_u64();
    let (s, v) = ack(&t, &stranger, &w.channel, &m, None).await;
    assert_eq!((s, code(&v)), (403, Some(50001)), "not a member: {v}");
    let (s, v) = ack(&t, &alice, &secret, &m, None).await;
    assert_eq!((s, code(&v)), (403, Some(50001)), "a hidden channel: {v}");
    let (s, v) = ack(&t, &alice, "1234567890123", &m, None).await;
    assert_eq!((s, code(&v)), (404, Some(10003)), "no such channel: {v}");
    // A DM of others.
    let (s, dm) = t.post("/users/@me/channels", &w.owner, json!({"recipient_id": w.bot_id})).await;
    assert_eq!(s, 200, "{dm}");
    let (s, v) = ack(&t, &alice, &id(&dm), &m, None).await;
    assert_eq!((s, code(&v)), (403, Some(50001)), "someone else's DM: {v}");
    // A body that is not JSON: Discord's 50109, nothing recorded.
    let r = t
        .http
        .post(format!("{}/channels/{}/messages/{m}/ack", t.base, w.channel))
        .header("authorization", &alice)
        .header("content-type", "application/json")
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let v: Value = r.json().await.unwrap();
    assert_eq!(code(&v), Some(50109), "{v}");
    assert!(states(&t, &alice_id).await.is_empty(), "refused acks leave nothing");
}

/// A client's unread mark compares the channel's `last_message_id` with its
/// read state: GUILD_CREATE and `GET /channels/{id}` must carry the newest
/// message, a member's and a webhook's alike, without a restart.
#[tokio::test]
async fn guild_create_and_the_channel_route_carry_the_newest_message() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (alice, _) = member(&t, &w, "alice").await;
    let c = &w.channel;
    let first = t.say(&w.owner, c, "one").await;
    let (_, ch) = t.get(&format!("/channels/{c}"), &alice).await;
    assert_eq!(ch["last_message_id"], first["id"], "{ch}");
    let (s, hook) = t.post(&format!("/channels/{c}/webhooks"), &w.owner, json!({"name": "hook"})).await;
    assert_eq!(s, 200, "{hook}");
    let url = format!("/webhooks/{}/{}?wait=true", id(&hook), hook["token"].as_str().unwrap());
    let (s, by_hook, _) = t.req(Method::POST, &url, None, Some(json!({"content": "from the hook"}))).await;
    assert_eq!(s, 200, "{by_hook}");
    let (_, ch) = t.get(&format!("/channels/{c}"), &alice).await;
    assert_eq!(ch["last_message_id"], by_hook["id"], "{ch}");
    let second = t.say(&w.owner, c, "two").await;
    let mut g = Gw::connect(&t.ws).await;
    g.identify(&alice, ALL_INTENTS).await;
    let gc = g.until("GUILD_CREATE").await;
    let listed = gc["d"]["channels"].as_array().unwrap().iter().find(|x| x["id"] == c.as_str()).cloned().unwrap();
    assert_eq!(listed["last_message_id"], second["id"], "{listed}");
}
