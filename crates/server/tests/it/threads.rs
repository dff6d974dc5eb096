//! Threads: the lifecycle and its events, who may do what (from the parent
//! channel's permissions), private threads' audience, and archiving after
//! inactivity.

use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;
use crate::dms::member;

const GUILD_MEMBERS: u64 = 1 << 1;
const MESSAGE_CONTENT: u64 = 1 << 15;
const MANAGE_THREADS: u64 = 1 << 34;
const CREATE_PUBLIC_THREADS: u64 = 1 << 35;
const CREATE_PRIVATE_THREADS: u64 = 1 << 36;
const SEND_MESSAGES_IN_THREADS: u64 = 1 << 38;
const VIEW_CHANNEL: u64 = 1 << 10;
const READ_MESSAGE_HISTORY: u64 = 1 << 16;

async fn start_thread(t: &TestServer, auth: &str, channel: &str, name: &str, kind: u8) -> (u16, Value) {
    t.post(&format!("/channels/{channel}/threads"), auth, json!({"name": name, "type": kind})).await
}

/// Sets member overwrites on `channel` (as the owner): `(user id, allow, deny)`.
async fn overwrite(t: &TestServer, w: &World, channel: &str, rules: &[(&str, u64, u64)]) {
    let ow: Vec<Value> =
        rules.iter().map(|(id, allow, deny)| json!({"id": id, "type": 1, "allow": allow.to_string(), "deny": deny.to_string()})).collect();
    let (s, v, _) = t.req(Method::PATCH, &format!("/channels/{channel}"), Some(&w.owner), Some(json!({"permission_overwrites": ow}))).await;
    assert_eq!(s, 200, "{v}");
}

#[tokio::test]
async fn a_thread_from_a_message_lives_joins_archives_and_dies() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let mut bot = Gw::connect(&t.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS | GUILD_MEMBERS | MESSAGE_CONTENT).await;
    bot.until("GUILD_CREATE").await;

    let m = t.say(&w.owner, &w.channel, "start here").await;
    let mid = m["id"].as_str().unwrap();
    let (s, th) = t.post(&format!("/channels/{}/messages/{mid}/threads", w.channel), &w.owner, json!({"name": "talk"})).await;
    assert_eq!(s, 201, "{th}");
    assert_eq!(th["id"], mid, "a message's thread takes its id");
    assert_eq!(th["type"], 11);
    assert_eq!(th["parent_id"], w.channel);
    assert_eq!(th["owner_id"], w.owner_id);
    assert_eq!(th["guild_id"], w.guild);
    assert_eq!(th["thread_metadata"]["archived"], false);
    assert_eq!(th["thread_metadata"]["auto_archive_duration"], 1440);
    assert_eq!(th["member_count"], 1);
    assert_eq!(th["message_count"], 0);
    assert_eq!(th["member"]["user_id"], w.owner_id);
    let tid = th["id"].as_str().unwrap().to_string();
    let created = bot.until("THREAD_CREATE").await;
    assert_eq!(created["d"]["id"], tid);
    assert_eq!(created["d"]["newly_created"], true);
    // A second thread from the same message is refused.
    let (s, v) = t.post(&format!("/channels/{}/messages/{mid}/threads", w.channel), &w.owner, json!({"name": "again"})).await;
    assert_eq!((s, &v["code"]), (400, &json!(160004)), "{v}");

    // Messages in the thread reach those who see the parent.
    let said = t.say(&w.owner, &tid, "in the thread").await;
    let got = bot.until("MESSAGE_CREATE").await;
    assert_eq!((&got["d"]["channel_id"], &got["d"]["guild_id"]), (&json!(tid), &json!(w.guild)), "{got}");
    // Edits, typing and deletes in a thread, as in its parent.
    let path = format!("/channels/{tid}/messages/{}", said["id"].as_str().unwrap());
    let (s, v, _) = t.req(Method::PATCH, &path, Some(&w.owner), Some(json!({"content": "edited"}))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(bot.until("MESSAGE_UPDATE").await["d"]["channel_id"], tid);
    assert_eq!(t.req(Method::POST, &format!("/channels/{tid}/typing"), Some(&w.owner), None).await.0, 204);
    let extra = t.say(&w.owner, &tid, "to delete").await;
    let (s, _, _) =
        t.req(Method::DELETE, &format!("/channels/{tid}/messages/{}", extra["id"].as_str().unwrap()), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    assert_eq!(bot.until("MESSAGE_DELETE").await["d"]["channel_id"], tid);

    // Join, members, leave.
    let me = format!("/channels/{tid}/thread-members/@me");
    let (s, _, _) = t.req(Method::PUT, &me, Some(&w.bot_auth), None).await;
    assert_eq!(s, 204);
    assert_eq!(bot.until("THREAD_CREATE").await["d"]["member"]["user_id"], w.bot_id);
    let own = bot.until("THREAD_MEMBER_UPDATE").await;
    assert_eq!((&own["d"]["user_id"], &own["d"]["guild_id"]), (&json!(w.bot_id), &json!(w.guild)), "{own}");
    let mu = bot.until("THREAD_MEMBERS_UPDATE").await;
    assert_eq!(mu["d"]["added_members"][0]["user_id"], w.bot_id, "{mu}");
    assert_eq!(mu["d"]["member_count"], 2);
    let (s, list) = t.get(&format!("/channels/{tid}/thread-members?with_member=true"), &w.bot_auth).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert!(list[0]["member"]["joined_at"].is_string(), "{list}");
    let (s, one) = t.get(&format!("/channels/{tid}/thread-members/{}", w.bot_id), &w.owner).await;
    assert_eq!((s, &one["user_id"]), (200, &json!(w.bot_id)));
    let (s, _, _) = t.req(Method::DELETE, &me, Some(&w.bot_auth), None).await;
    assert_eq!(s, 204);
    assert_eq!(bot.until("THREAD_MEMBERS_UPDATE").await["d"]["removed_member_ids"][0], w.bot_id);
    let (s, v) = t.get(&format!("/channels/{tid}/thread-members/{}", w.bot_id), &w.owner).await;
    assert_eq!((s, &v["code"]), (404, &json!(10007)));

    // Active lists, GUILD_CREATE, the thread itself.
    let (s, active) = t.get(&format!("/guilds/{}/threads/active", w.guild), &w.bot_auth).await;
    assert_eq!(s, 200);
    assert_eq!(active["threads"][0]["id"], tid, "{active}");
    assert_eq!(active["threads"][0]["message_count"], 2, "counted when sent, not uncounted on delete");
    let mut late = Gw::connect(&t.ws).await;
    late.identify(&w.owner, ALL_INTENTS).await;
    let gc = late.until("GUILD_CREATE").await;
    assert_eq!(gc["d"]["threads"][0]["id"], tid, "{}", gc["d"]["threads"]);
    assert_eq!(gc["d"]["threads"][0]["member"]["user_id"], w.owner_id);
    assert!(gc["d"]["channels"].as_array().unwrap().iter().all(|c| c["id"] != tid), "threads are not channels");
    let (s, c) = t.get(&format!("/channels/{tid}"), &w.bot_auth).await;
    assert_eq!((s, &c["thread_metadata"]["locked"]), (200, &json!(false)), "{c}");
    let (_, chans) = t.get(&format!("/guilds/{}/channels", w.guild), &w.owner).await;
    assert!(chans.as_array().unwrap().iter().all(|c| c["id"] != tid));
    // A channel's PATCH still reads null as clear (its body also takes a thread's fields).
    let cpath = format!("/channels/{}", w.channel);
    let (s, v, _) = t.req(Method::PATCH, &cpath, Some(&w.owner), Some(json!({"topic": "t", "position": 0}))).await;
    assert_eq!((s, &v["topic"]), (200, &json!("t")), "{v}");
    let (s, v, _) = t.req(Method::PATCH, &cpath, Some(&w.owner), Some(json!({"topic": null}))).await;
    assert_eq!((s, &v["topic"]), (200, &Value::Null), "{v}");

    // Archive: THREAD_UPDATE, the archived list; edits refused; a message unarchives.
    let (s, v, _) = t.req(Method::PATCH, &format!("/channels/{tid}"), Some(&w.owner), Some(json!({"archived": true}))).await;
    assert_eq!((s, &v["thread_metadata"]["archived"]), (200, &json!(true)), "{v}");
    assert_eq!(bot.until("THREAD_UPDATE").await["d"]["thread_metadata"]["archived"], true);
    let (s, arch) = t.get(&format!("/channels/{}/threads/archived/public", w.channel), &w.bot_auth).await;
    assert_eq!(s, 200, "{arch}");
    assert_eq!(arch["threads"][0]["id"], tid);
    assert_eq!(arch["has_more"], false);
    let before = arch["threads"][0]["thread_metadata"]["archive_timestamp"].as_str().unwrap().to_string();
    let (_, older) = t.get(&format!("/channels/{}/threads/archived/public?before={before}", w.channel), &w.bot_auth).await;
    assert_eq!(older["threads"], json!([]), "{older}");
    let (s, v, _) = t.req(Method::PATCH, &format!("/channels/{tid}"), Some(&w.owner), Some(json!({"name": "renamed"}))).await;
    assert_eq!((s, &v["code"]), (400, &json!(50083)), "{v}");
    t.say(&w.owner, &tid, "wake up").await;
    assert_eq!(bot.until("THREAD_UPDATE").await["d"]["thread_metadata"]["archived"], false);
    assert_eq!(bot.until("MESSAGE_CREATE").await["d"]["content"], "wake up");

    // Delete.
    let (s, v, _) = t.req(Method::DELETE, &format!("/channels/{tid}"), Some(&w.owner), None).await;
    assert_eq!(s, 200, "{v}");
    let gone = bot.until("THREAD_DELETE").await;
    assert_eq!((&gone["d"]["id"], &gone["d"]["parent_id"]), (&json!(tid), &json!(w.channel)));
    assert_eq!(t.get(&format!("/channels/{tid}"), &w.owner).await.0, 404);
    // Deleting a channel deletes its threads.
    let (_, orphan) = start_thread(&t, &w.owner, &w.channel, "orphan", 11).await;
    let oid = orphan["id"].as_str().unwrap();
    let (s, _, _) = t.req(Method::DELETE, &format!("/channels/{}", w.channel), Some(&w.owner), None).await;
    assert_eq!(s, 200);
    assert_eq!(t.get(&format!("/channels/{oid}"), &w.owner).await.0, 404);
    let (_, active) = t.get(&format!("/guilds/{}/threads/active", w.guild), &w.owner).await;
    assert_eq!(active["threads"], json!([]));
}

/// Each route as the owner, a member with the permission (the default
/// `@everyone` has the thread permissions), a member denied it by an
/// overwrite on the parent, and a user of no guild.
#[tokio::test]
async fn thread_routes_check_the_parent_channels_permissions() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (with, with_id) = member(&t, &w, "with").await;
    let (without, without_id) = member(&t, &w, "without").await;
    let (outsider, _) = t.user("outsider").await;
    let deny = CREATE_PUBLIC_THREADS | CREATE_PRIVATE_THREADS | SEND_MESSAGES_IN_THREADS | READ_MESSAGE_HISTORY;
    overwrite(&t, &w, &w.channel, &[(&without_id, 0, deny)]).await;
    let (_, th) = start_thread(&t, &w.owner, &w.channel, "base", 11).await;
    let tid = th["id"].as_str().unwrap().to_string();
    // Everyone but the outsider may see the thread; `with` joins it.
    let (s, _, _) = t.req(Method::PUT, &format!("/channels/{tid}/thread-members/@me"), Some(&with), None).await;
    assert_eq!(s, 204);

    type Case = (&'static str, [u16; 4]);
    // [owner, with, without, outsider]
    let cases: [Case; 8] = [
        ("create public", [201, 201, 403, 403]),
        ("create private", [201, 201, 403, 403]),
        ("message in thread", [200, 200, 403, 403]),
        ("list members", [200, 200, 200, 403]),
        ("active", [200, 200, 200, 403]),
        ("archived public", [200, 200, 403, 403]),
        ("archived private", [200, 403, 403, 403]),
        ("add the other member", [204, 204, 403, 403]),
    ];
    let who = [(&w.owner, &w.owner_id), (&with, &with_id), (&without, &without_id), (&outsider, &without_id)];
    for (name, expect) in cases {
        for (i, (auth, _)) in who.iter().enumerate() {
            let (s, v) = match name {
                "create public" => start_thread(&t, auth, &w.channel, "p", 11).await,
                "create private" => start_thread(&t, auth, &w.channel, "q", 12).await,
                "message in thread" => t.post(&format!("/channels/{tid}/messages"), auth, json!({"content": "x"})).await,
                "list members" => t.get(&format!("/channels/{tid}/thread-members"), auth).await,
                "active" => t.get(&format!("/guilds/{}/threads/active", w.guild), auth).await,
                "archived public" => t.get(&format!("/channels/{}/threads/archived/public", w.channel), auth).await,
                "archived private" => t.get(&format!("/channels/{}/threads/archived/private", w.channel), auth).await,
                _ => {
                    let target = if i == 1 { &w.bot_id } else { &with_id };
                    let (s, v, _) = t.req(Method::PUT, &format!("/channels/{tid}/thread-members/{target}"), Some(auth), None).await;
                    (s, v)
                }
            };
            assert_eq!(s, expect[i], "{name} as #{i}: {v}");
        }
    }
    // MANAGE_THREADS: lock, remove another member, delete. A member who
    // has it through an overwrite may; one without may not.
    overwrite(&t, &w, &w.channel, &[(&with_id, MANAGE_THREADS, 0), (&without_id, 0, deny)]).await;
    let lock = |auth: String| {
        let t = &t;
        let tid = tid.clone();
        async move { t.req(Method::PATCH, &format!("/channels/{tid}"), Some(&auth), Some(json!({"locked": true}))).await.0 }
    };
    assert_eq!(lock(outsider.clone()).await, 403);
    assert_eq!(lock(without.clone()).await, 403);
    assert_eq!(lock(with.clone()).await, 200);
    assert_eq!(lock(w.owner.clone()).await, 200);
    let remove = format!("/channels/{tid}/thread-members/{}", w.bot_id);
    assert_eq!(t.req(Method::DELETE, &remove, Some(&without), None).await.0, 403);
    assert_eq!(t.req(Method::DELETE, &remove, Some(&with), None).await.0, 204);
    for (auth, status) in [(&outsider, 403), (&without, 403), (&with, 200)] {
        let (_, th) = start_thread(&t, &w.owner, &w.channel, "doomed", 11).await;
        let id = th["id"].as_str().unwrap();
        assert_eq!(t.req(Method::DELETE, &format!("/channels/{id}"), Some(auth), None).await.0, status);
    }
    // Validation: a name, a known archive duration, a thread type.
    let (s, v) = t.post(&format!("/channels/{}/threads", w.channel), &w.owner, json!({"type": 11})).await;
    assert_eq!((s, &v["errors"]["name"]["_errors"][0]["code"]), (400, &json!("BASE_TYPE_REQUIRED")), "{v}");
    let (s, v) = t.post(&format!("/channels/{}/threads", w.channel), &w.owner, json!({"name": "x", "auto_archive_duration": 5})).await;
    assert_eq!(s, 400, "{v}");
    assert!(v["errors"]["auto_archive_duration"].is_object(), "{v}");
    let (s, v) = t.post(&format!("/channels/{}/threads", w.channel), &w.owner, json!({"name": "x", "type": 0})).await;
    assert_eq!((s, &v["code"]), (400, &json!(50035)), "{v}");
}

#[tokio::test]
async fn thread_messages_follow_the_parents_view_permission() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (m, m_id) = member(&t, &w, "member").await;
    let (_, th) = start_thread(&t, &w.owner, &w.channel, "open", 11).await;
    let tid = th["id"].as_str().unwrap().to_string();
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&m, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    t.say(&w.owner, &tid, "seen").await;
    assert_eq!(gw.until("MESSAGE_CREATE").await["d"]["content"], "seen");
    // The parent hidden from the member: the thread is too.
    overwrite(&t, &w, &w.channel, &[(&m_id, 0, VIEW_CHANNEL)]).await;
    assert_eq!(t.get(&format!("/channels/{tid}"), &m).await.0, 403);
    assert_eq!(t.get(&format!("/channels/{tid}/messages"), &m).await.0, 403);
    assert_eq!(t.post(&format!("/channels/{tid}/messages"), &m, json!({"content": "x"})).await.0, 403);
    t.say(&w.owner, &tid, "hidden").await;
    t.say(&w.owner, &w.channel, "also hidden").await;
    let other = t.post(&format!("/guilds/{}/channels", w.guild), &w.owner, json!({"name": "visible"})).await.1;
    t.say(&w.owner, other["id"].as_str().unwrap(), "visible").await;
    let next = gw.until("MESSAGE_CREATE").await;
    assert_eq!(next["d"]["content"], "visible", "{next}");
    // The parent shown again: its active threads come as THREAD_LIST_SYNC.
    overwrite(&t, &w, &w.channel, &[]).await;
    let sync = gw.until("THREAD_LIST_SYNC").await;
    assert_eq!((&sync["d"]["channel_ids"][0], &sync["d"]["threads"][0]["id"]), (&json!(w.channel), &json!(tid)), "{sync}");
}

#[tokio::test]
async fn private_threads_reach_only_their_members_and_managers() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (m, m_id) = member(&t, &w, "member").await;
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&m, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    let (s, th) = start_thread(&t, &w.owner, &w.channel, "secret", 12).await;
    assert_eq!((s, &th["type"]), (201, &json!(12)), "{th}");
    assert_eq!(th["thread_metadata"]["invitable"], true);
    let tid = th["id"].as_str().unwrap().to_string();
    t.say(&w.owner, &tid, "not for you").await;
    assert_eq!(t.get(&format!("/channels/{tid}"), &m).await.0, 403);
    assert_eq!(t.get(&format!("/channels/{tid}/messages"), &m).await.0, 403);
    assert_eq!(t.req(Method::PUT, &format!("/channels/{tid}/thread-members/@me"), Some(&m), None).await.0, 403);
    // Added by a member of the thread: now they see it.
    let (s, _, _) = t.req(Method::PUT, &format!("/channels/{tid}/thread-members/{m_id}"), Some(&w.owner), None).await;
    assert_eq!(s, 204);
    let next = gw.until_not(&["PRESENCE_UPDATE"]).await;
    assert_eq!((&next["t"], &next["d"]["id"]), (&json!("THREAD_CREATE"), &json!(tid)), "the first thing they get: {next}");
    t.say(&w.owner, &tid, "now for you").await;
    assert_eq!(gw.until("MESSAGE_CREATE").await["d"]["content"], "now for you");
    assert_eq!(t.get(&format!("/channels/{tid}/messages"), &m).await.1.as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn threads_archive_after_their_inactivity_and_wake_on_a_message() {
    // One "minute" of auto_archive_duration lasts 20 ms: 60 minutes, 1.2 s.
    let t = TestServer::start_with(|c| {
        c.threads.archive_minute_ms = 20;
        c.threads.archive_sweep_ms = 100;
    })
    .await;
    let w = t.world().await;
    let mut gw = Gw::connect(&t.ws).await;
    gw.identify(&w.owner, ALL_INTENTS).await;
    gw.until("GUILD_CREATE").await;
    let (_, short) = t
        .post(&format!("/channels/{}/threads", w.channel), &w.owner, json!({"name": "short", "type": 11, "auto_archive_duration": 60}))
        .await;
    let (_, long) = t
        .post(&format!("/channels/{}/threads", w.channel), &w.owner, json!({"name": "long", "type": 11, "auto_archive_duration": 10080}))
        .await;
    let sid = short["id"].as_str().unwrap().to_string();
    let started = std::time::Instant::now();
    gw.wait = std::time::Duration::from_secs(10);
    let up = gw.until("THREAD_UPDATE").await;
    assert_eq!((&up["d"]["id"], &up["d"]["thread_metadata"]["archived"]), (&json!(sid), &json!(true)), "{up}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(1_100), "archived too early: {:?}", started.elapsed());
    let (_, active) = t.get(&format!("/guilds/{}/threads/active", w.guild), &w.owner).await;
    assert_eq!(active["threads"].as_array().unwrap().len(), 1);
    assert_eq!(active["threads"][0]["id"], long["id"]);
    // A message in the archived (unlocked) thread unarchives it.
    t.say(&w.owner, &sid, "back").await;
    let up = gw.until("THREAD_UPDATE").await;
    assert_eq!(up["d"]["thread_metadata"]["archived"], false);
    // Locked and archived: only managers may post.
    let (m, _) = member(&t, &w, "member").await;
    let p = format!("/channels/{sid}");
    t.req(Method::PATCH, &p, Some(&w.owner), Some(json!({"locked": true, "archived": true}))).await;
    assert_eq!(t.post(&format!("{p}/messages"), &m, json!({"content": "x"})).await.0, 403);
    assert_eq!(t.post(&format!("{p}/messages"), &w.owner, json!({"content": "x"})).await.0, 200);
}
