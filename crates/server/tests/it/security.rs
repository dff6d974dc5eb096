//! The security suite (issue 25): one test per way in that was open, each
//! against the server's real defaults where they are what is tested.
//! `scripts/test.sh` runs this module as its own step.
//!
//! - joining: only by invite, by being authorized (bots, with a managed
//!   role), or by a bot holding the user's `guilds.join` token;
//! - logins: budgets keyed on the client's address and the account, a fair
//!   hashing queue, no timing difference between unknown and known names;
//! - tokens: logout, password change and the session list revoke, on every
//!   node of a cluster within a second; expiry;
//! - the account: `PATCH /users/@me` stores what it answers;
//! - the gateway: IDENTIFY within `max_concurrency`, the session start
//!   limit, a per-user session cap.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use protocol::model::permission as p;
use reqwest::Method;
use serde_json::{json, Value};

use crate::common::*;

/// A REST client whose connections come from `ip` (any of 127.0.0.0/8).
fn client_from(ip: [u8; 4]) -> reqwest::Client {
    reqwest::Client::builder().local_address(IpAddr::from(ip)).build().unwrap()
}

async fn send(c: &reqwest::Client, method: Method, url: &str, auth: Option<&str>, body: Option<Value>) -> (u16, Value) {
    let mut r = c.request(method, url);
    if let Some(a) = auth {
        r = r.header("authorization", a);
    }
    if let Some(b) = body {
        r = r.json(&b);
    }
    let resp = r.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The server's defaults for logins and the gateway (the harness relaxes them).
fn real_limits(c: &mut server::Config) {
    let d = server::Config::default();
    c.auth = d.auth.clone();
    c.gateway.identify_window_ms = d.gateway.identify_window_ms;
    // Tests register their users from one address.
    c.auth.register_per_address = 100_000;
}

async fn login(t: &TestServer, name: &str, password: &str) -> (u16, Value) {
    let (s, v, _) = t.req(Method::POST, "/auth/login", None, Some(json!({"login": name, "password": password}))).await;
    (s, v)
}

#[tokio::test]
async fn a_stranger_cannot_join_without_an_invite_and_reads_nothing() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (member, member_id) = t.user("member").await;
    t.join(&w.owner, &w.channel, &member).await;
    t.say(&w.owner, &w.channel, "members only").await;
    let (stranger, stranger_id) = t.user("stranger").await;
    let g = &w.guild;
    for who in ["%40me", stranger_id.as_str()] {
        let (s, v, _) = t.req(Method::PUT, &format!("/guilds/{g}/members/{who}"), Some(&stranger), Some(json!({}))).await;
        assert_eq!((s, v["code"].as_u64()), (403, Some(50001)), "self-join as {who}: {v}");
    }
    // The literal `@me` path has only PATCH (one's nickname).
    assert_eq!(t.req(Method::PUT, &format!("/guilds/{g}/members/@me"), Some(&stranger), Some(json!({}))).await.0, 405);
    let (s, v) = t.get(&format!("/channels/{}/messages", w.channel), &stranger).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50001)), "{v}");
    let (s, v) = t.get(&format!("/guilds/{g}/members?limit=10"), &stranger).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50001)), "{v}");
    // Sharing no guild: no DM with a member.
    let (s, v) = t.post("/users/@me/channels", &stranger, json!({"recipient_id": member_id})).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50007)), "{v}");
    let (s, v) = t.get(&format!("/guilds/{g}/members/{stranger_id}"), &w.owner).await;
    assert_eq!((s, v["code"].as_u64()), (404, Some(10007)), "not a member: {v}");
    // The invite is still the way in.
    t.join(&w.owner, &w.channel, &stranger).await;
    assert_eq!(t.get(&format!("/channels/{}/messages", w.channel), &stranger).await.0, 200);
}

#[tokio::test]
async fn an_owner_cannot_add_a_user_without_their_consent() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (_, victim_id) = t.user("victim").await;
    let (s, v, _) = t.req(Method::PUT, &format!("/guilds/{}/members/{victim_id}", w.guild), Some(&w.owner), Some(json!({}))).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    assert_eq!(t.get(&format!("/guilds/{}/members/{victim_id}", w.guild), &w.owner).await.0, 404);
    // Nor can a bot, without the user's OAuth2 token.
    let (s, v, _) = t
        .req(Method::PUT, &format!("/guilds/{}/members/{victim_id}", w.guild), Some(&w.bot_auth), Some(json!({"access_token": "forged"})))
        .await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50025)), "{v}");
    // Nor is a bot added without being authorized: an owner's PUT is refused.
    let (_, _, other_bot) = t.bot("other").await;
    let (s, _, _) = t.req(Method::PUT, &format!("/guilds/{}/members/{other_bot}", w.guild), Some(&w.owner), Some(json!({}))).await;
    assert_eq!(s, 403);
}

#[tokio::test]
async fn a_bot_authorized_through_oauth2_gets_its_managed_role_and_permissions() {
    let t = TestServer::start().await;
    let (owner, _) = t.user("owner").await;
    let (guild, channel) = t.guild(&owner).await;
    let (member, _) = t.user("member").await;
    t.join(&owner, &channel, &member).await;
    let (bot_auth, bot_token, bot_id) = t.bot("helper").await;
    let mut watch = Gw::connect(&t.ws).await;
    watch.identify(&owner, ALL_INTENTS).await;
    watch.until("GUILD_CREATE").await;

    // The consent page's data: the application, its bot, the guilds where the caller may add it.
    let info_path = format!("/oauth2/authorize?client_id={bot_id}&scope=bot+applications.commands&permissions=16");
    let (s, info) = t.get(&info_path, &owner).await;
    assert_eq!(s, 200, "{info}");
    assert_eq!((info["application"]["id"].as_str(), info["bot"]["id"].as_str()), (Some(bot_id.as_str()), Some(bot_id.as_str())));
    assert_eq!(info["guilds"].as_array().unwrap().iter().map(|g| g["id"].clone()).collect::<Vec<_>>(), vec![json!(guild)]);
    let (s, info) = t.get(&info_path, &member).await;
    assert_eq!((s, info["guilds"].as_array().unwrap().len()), (200, 0), "no MANAGE_GUILD, no guild to pick");
    assert_eq!(t.get("/oauth2/authorize?client_id=1&scope=bot", &owner).await.1["code"], 10002);
    assert_eq!(t.get(&format!("/oauth2/authorize?client_id={bot_id}&scope=bot+admin"), &owner).await.1["code"], 50035);

    // Someone without MANAGE_GUILD cannot add it; a permission they lack cannot be given.
    let consent = json!({"guild_id": guild, "permissions": p::MANAGE_CHANNELS.to_string(), "authorize": true});
    let (s, v) = t.post(&format!("/oauth2/authorize?client_id={bot_id}&scope=bot"), &member, consent.clone()).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    let (s, v) = t.post(&format!("/oauth2/authorize?client_id={bot_id}&scope=bot"), &bot_auth, consent.clone()).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(20001)), "a bot authorizes nothing: {v}");
    assert_eq!(t.get(&format!("/guilds/{guild}/members/{bot_id}"), &owner).await.0, 404);

    // The owner adds it: the bot joins with a managed role of those permissions.
    let (s, v) = t.post(&format!("/oauth2/authorize?client_id={bot_id}&scope=bot"), &owner, consent).await;
    assert_eq!(s, 200, "{v}");
    assert!(v["location"].as_str().unwrap().contains(&format!("guild_id={guild}")), "{v}");
    let (_, roles) = t.get(&format!("/guilds/{guild}/roles"), &owner).await;
    let managed: Vec<&Value> = roles.as_array().unwrap().iter().filter(|r| r["managed"] == true).collect();
    assert_eq!(managed.len(), 1, "{roles}");
    let role = managed[0].clone();
    assert_eq!((role["tags"]["bot_id"].as_str(), role["permissions"].as_str()), (Some(bot_id.as_str()), Some("16")), "{role}");
    assert_eq!(role["name"], "helper");
    let (_, m) = t.get(&format!("/guilds/{guild}/members/{bot_id}"), &owner).await;
    assert_eq!(m["roles"], json!([role["id"]]), "{m}");
    // Its events: the role first, then the member holding it.
    let created = watch.until("GUILD_ROLE_CREATE").await;
    assert_eq!(created["d"]["role"]["tags"]["bot_id"], bot_id.as_str());
    let added = watch.until("GUILD_MEMBER_ADD").await;
    assert_eq!((added["d"]["user"]["id"].as_str(), &added["d"]["roles"]), (Some(bot_id.as_str()), &json!([role["id"]])));
    // The permission works: it may create a channel (MANAGE_CHANNELS).
    let (s, v) = t.post(&format!("/guilds/{guild}/channels"), &bot_auth, json!({"name": "bots"})).await;
    assert_eq!(s, 201, "{v}");
    // And its READY lists the guild.
    let mut g = Gw::connect(&t.ws).await;
    let ready = g.identify(&bot_token, BOT_INTENTS).await;
    assert_eq!(ready["d"]["guilds"][0]["id"], guild.as_str());

    // A managed role is never given, taken or deleted by hand.
    let rid = role["id"].as_str().unwrap();
    let member_id = t.get("/users/@me", &member).await.1["id"].as_str().unwrap().to_string();
    let (s, v, _) = t.req(Method::PUT, &format!("/guilds/{guild}/members/{member_id}/roles/{rid}"), Some(&owner), None).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50028)), "{v}");
    let (s, v, _) = t.req(Method::DELETE, &format!("/guilds/{guild}/roles/{rid}"), Some(&owner), None).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50028)), "{v}");
    // Editing the bot's other roles keeps it.
    let (s, v, _) = t.req(Method::PATCH, &format!("/guilds/{guild}/members/{bot_id}"), Some(&owner), Some(json!({"roles": []}))).await;
    assert_eq!((s, &v["roles"]), (200, &json!([rid])), "{v}");
    // Authorized again with other permissions: the same role, new bits.
    let again = json!({"guild_id": guild, "permissions": "2048", "authorize": true});
    assert_eq!(t.post(&format!("/oauth2/authorize?client_id={bot_id}&scope=bot"), &owner, again).await.0, 200);
    let (_, r) = t.get(&format!("/guilds/{guild}/roles/{rid}"), &owner).await;
    assert_eq!(r["permissions"], "2048");
    // Kicked: its role goes with it.
    assert_eq!(t.req(Method::DELETE, &format!("/guilds/{guild}/members/{bot_id}"), Some(&owner), None).await.0, 204);
    let (_, roles) = t.get(&format!("/guilds/{guild}/roles"), &owner).await;
    assert!(roles.as_array().unwrap().iter().all(|r| r["managed"] == false), "{roles}");
    watch.until("GUILD_ROLE_DELETE").await;
}

#[tokio::test]
async fn a_user_is_added_by_a_bot_only_with_their_guilds_join_token() {
    use protocol::model::permission as p;
    let t = TestServer::start().await;
    let (owner, _) = t.user("owner").await;
    let (guild, _) = t.guild(&owner).await;
    // `@everyone` may invite by default: not here, so a bot must be given it.
    let everyone = (p::DEFAULT_EVERYONE & !p::CREATE_INSTANT_INVITE).to_string();
    let (s, v, _) =
        t.req(Method::PATCH, &format!("/guilds/{guild}/roles/{guild}"), Some(&owner), Some(json!({"permissions": everyone}))).await;
    assert_eq!(s, 200, "{v}");
    let (bot_auth, _, bot_id) = t.bot("joiner").await;
    let (other_auth, _, other_id) = t.bot("otherapp").await;
    // The bot may invite: CREATE_INSTANT_INVITE on its managed role.
    t.add_bot(&owner, &guild, &bot_id, p::CREATE_INSTANT_INVITE).await;
    let (user, user_id) = t.user("consenting").await;
    let token = t.join_token(&user, &bot_auth, &bot_id).await;
    // What the token may read: the user (identify), not their guilds (no `guilds` scope).
    let bearer = format!("Bearer {token}");
    let (s, me) = t.get("/users/@me", &bearer).await;
    assert_eq!((s, me["id"].as_str()), (200, Some(user_id.as_str())), "{me}");
    assert_eq!(t.get("/users/@me/guilds", &bearer).await.0, 401);
    assert_eq!(t.get(&format!("/guilds/{guild}"), &bearer).await.0, 401, "a bearer token is no login");
    // Another application's token, another user's, one without guilds.join: 50025.
    let (bystander, bystander_id) = t.user("bystander").await;
    let theirs = t.join_token(&bystander, &other_auth, &other_id).await;
    let add = |who: String, tok: String| {
        let (t, bot_auth, guild) = (&t, &bot_auth, &guild);
        async move {
            let (s, v, _) =
                t.req(Method::PUT, &format!("/guilds/{guild}/members/{who}"), Some(bot_auth), Some(json!({"access_token": tok}))).await;
            (s, v)
        }
    };
    assert_eq!(add(bystander_id.clone(), theirs).await.1["code"], 50025, "issued to another application");
    assert_eq!(add(bystander_id.clone(), token.clone()).await.1["code"], 50025, "issued by another user");
    // A bot without CREATE_INSTANT_INVITE cannot use even a valid token.
    let other_token = t.join_token(&user, &other_auth, &other_id).await;
    t.add_bot(&owner, &guild, &other_id, 0).await;
    let (s, v, _) = t
        .req(Method::PUT, &format!("/guilds/{guild}/members/{user_id}"), Some(&other_auth), Some(json!({"access_token": other_token})))
        .await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    // The right one: 201 with the member, then 204.
    let (s, v) = add(user_id.clone(), token.clone()).await;
    assert_eq!((s, v["user"]["id"].as_str()), (201, Some(user_id.as_str())), "{v}");
    assert_eq!(add(user_id.clone(), token.clone()).await.0, 204);
    assert_eq!(t.get(&format!("/guilds/{guild}"), &user).await.0, 200);
    // A code works once; a wrong secret is refused.
    let form = |code: &str, secret: &str| format!("grant_type=authorization_code&code={code}&client_id={bot_id}&client_secret={secret}");
    let r = t
        .http
        .post(format!("{}/oauth2/token", t.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form("nope", "wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.json::<Value>().await.unwrap()["error"], "invalid_client");
    // An unregistered redirect URI gets no code.
    let (s, v) = t
        .post(
            &format!(
                "/oauth2/authorize?client_id={bot_id}&scope=identify+guilds.join&response_type=code&redirect_uri=http://evil.example/"
            ),
            &user,
            json!({"authorize": true}),
        )
        .await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
}

#[tokio::test]
async fn made_up_authorization_headers_still_meet_the_login_budget() {
    let t = TestServer::start_with(real_limits).await;
    let (_, _) = t.user("target").await;
    let mut limited = 0;
    let mut answered = Vec::new();
    for n in 0..60 {
        let header = format!("{n:x}.{:032x}", rand::random::<u128>());
        let (s, v, h) = t
            .req(Method::POST, "/auth/login", Some(&header), Some(json!({"login": format!("nobody{n}"), "password": "wrong password"})))
            .await;
        answered.push(s);
        if s == 429 {
            limited += 1;
            assert!(h.contains_key("retry-after") && v["retry_after"].as_f64().is_some(), "{v}");
        } else {
            assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
        }
    }
    let budget = server::Config::default().auth.login_per_address as usize;
    assert_eq!(answered.iter().filter(|s| **s == 400).count(), budget, "{answered:?}");
    assert_eq!(limited, 60 - budget);
    // One account guessed from many addresses meets the account's budget.
    let per_account = server::Config::default().auth.login_per_account as usize;
    let mut statuses = Vec::new();
    for n in 0..(per_account + 3) {
        let c = client_from([127, 0, 1, 10 + n as u8]);
        let (s, _) =
            send(&c, Method::POST, &format!("{}/auth/login", t.base), None, Some(json!({"login": "target", "password": "guess{n}"}))).await;
        statuses.push(s);
    }
    assert_eq!(statuses.iter().filter(|s| **s == 429).count(), 3, "{statuses:?}");
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::test]
async fn a_login_takes_as_long_for_an_unknown_name_as_for_a_wrong_password() {
    let t = TestServer::start_with(|c| {
        real_limits(c);
        c.auth.login_per_address = 1_000;
        c.auth.login_per_account = 1_000;
    })
    .await;
    t.user("known").await;
    // Once each first: the dummy hash is made on first use.
    login(&t, "unknown0", "wrong password").await;
    login(&t, "known", "wrong password").await;
    let (mut unknown, mut known) = (Vec::new(), Vec::new());
    for n in 0..10 {
        let at = Instant::now();
        assert_eq!(login(&t, &format!("unknown{n}"), "wrong password").await.0, 400);
        unknown.push(at.elapsed());
        let at = Instant::now();
        assert_eq!(login(&t, "known", "wrong password").await.0, 400);
        known.push(at.elapsed());
    }
    let (u, k) = (median(unknown), median(known));
    let ratio = u.max(k).as_secs_f64() / u.min(k).as_secs_f64();
    eprintln!("login medians of 10: unknown name {u:?}, known name with a wrong password {k:?}, ratio {ratio:.2}");
    assert!(ratio <= 2.0, "unknown {u:?} vs known {k:?}: {ratio:.2}x");
}

#[tokio::test]
async fn one_address_flooding_logins_does_not_lock_out_the_others() {
    let t = TestServer::start_with(real_limits).await;
    let mut people = Vec::new();
    for n in 0..20 {
        t.user(&format!("person{n}")).await;
        people.push(format!("person{n}"));
    }
    t.user("victim").await;
    let url = format!("{}/auth/login", t.base);
    // The flood: 40 at once, from one address, with wrong passwords.
    let flooder = client_from([127, 0, 2, 1]);
    let flood: Vec<_> = (0..40)
        .map(|n| {
            let (c, url) = (flooder.clone(), url.clone());
            tokio::spawn(async move {
                send(&c, Method::POST, &url, None, Some(json!({"login": format!("victim{}", n % 3), "password": "flood"}))).await.0
            })
        })
        .collect();
    // Meanwhile 20 people log in, each from an address of their own.
    let start = Instant::now();
    let logins: Vec<_> = people
        .iter()
        .enumerate()
        .map(|(n, name)| {
            let (c, url, name) = (client_from([127, 0, 3, 1 + n as u8]), url.clone(), name.clone());
            tokio::spawn(async move { send(&c, Method::POST, &url, None, Some(json!({"login": name, "password": "correct horse"}))).await })
        })
        .collect();
    for l in logins {
        let (s, v) = l.await.unwrap();
        assert_eq!(s, 200, "a person from another address was refused: {v}");
        assert!(v["token"].is_string());
    }
    let took = start.elapsed();
    let mut flood_statuses = Vec::new();
    for f in flood {
        flood_statuses.push(f.await.unwrap());
    }
    eprintln!("20 logins from 20 addresses during a 40-request flood: all 200 in {took:?}; flood answered {flood_statuses:?}");
    assert!(flood_statuses.contains(&429), "the flood met its address's limits: {flood_statuses:?}");
}

#[tokio::test]
async fn logout_revokes_the_token_on_every_node_within_a_second() {
    let c = crate::cluster::Cluster::<3>::start().await;
    let [n1, n2, n3] = &c.nodes;
    n1.user("leaver").await;
    let (s, v) = login(n1, "leaver", "correct horse").await;
    assert_eq!(s, 200, "{v}");
    let token = v["token"].as_str().unwrap().to_string();
    // Every node has it cached.
    for n in [n1, n2, n3] {
        assert_eq!(n.get("/users/@me", &token).await.0, 200);
    }
    let at = Instant::now();
    let (s, _, _) = n1.req(Method::POST, "/auth/logout", Some(&token), Some(json!({"provider": null}))).await;
    assert_eq!(s, 204);
    for n in [n1, n2, n3] {
        loop {
            let s = n.get("/users/@me", &token).await.0;
            if s == 401 {
                break;
            }
            assert!(at.elapsed() < Duration::from_secs(1), "still {s} after {:?}", at.elapsed());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    eprintln!("logout: 401 on all 3 nodes {:?} after the answer", at.elapsed());
    // The gateway refuses it too.
    let mut g = Gw::connect(&n3.ws).await;
    g.send(json!({"op": 2, "d": {"token": token, "intents": 1, "properties": {}}})).await;
    assert_eq!(g.closed().await, Closed::Code(4004));
}

/// A node whose bus connection drops may have missed a revocation notice:
/// when the connection comes back it empties its token cache (the next
/// request reads the store again), so `auth.token_cache_ms` is only a
/// backstop.
#[tokio::test]
async fn a_node_whose_bus_connection_comes_back_forgets_its_cached_tokens() {
    let mut c = crate::cluster::Cluster::<2>::start().await;
    let token = c.w.owner.clone();
    for n in &c.nodes {
        assert_eq!(n.get("/users/@me", &token).await.0, 200);
        assert!(n.node().auth.cached() >= 1, "the token is cached");
    }
    // The bus goes down and comes back.
    c.nats.restart();
    let deadline = Instant::now() + Duration::from_secs(20);
    for n in &c.nodes {
        while n.node().auth.cached() > 0 {
            assert!(Instant::now() < deadline, "node kept {} cached tokens after its bus came back", n.node().auth.cached());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // The token still works: read from the store again, and cached again.
    for n in &c.nodes {
        assert_eq!(n.get("/users/@me", &token).await.0, 200);
        assert!(n.node().auth.cached() >= 1, "cached again");
    }
}

#[tokio::test]
async fn a_password_change_revokes_every_other_token_and_the_session_list_revokes_one() {
    let t = TestServer::start().await;
    let (first, _) = t.user("changer").await;
    let (s, v) = login(&t, "changer", "correct horse").await;
    assert_eq!(s, 200);
    let second = v["token"].as_str().unwrap().to_string();
    let (s, v) = login(&t, "changer", "correct horse").await;
    assert_eq!(s, 200);
    let third = v["token"].as_str().unwrap().to_string();
    // The session list: three, the caller's marked.
    let (s, list) = t.get("/auth/sessions", &first).await;
    assert_eq!(s, 200);
    let sessions = list["user_sessions"].as_array().unwrap();
    assert_eq!(sessions.len(), 3, "{list}");
    assert_eq!(sessions.iter().filter(|s| s["current"] == true).count(), 1);
    // Revoking the third from the list.
    let (_, from_third) = t.get("/auth/sessions", &third).await;
    let third_id = from_third["user_sessions"].as_array().unwrap().iter().find(|s| s["current"] == true).unwrap()["id_hash"].clone();
    assert_eq!(t.post("/auth/sessions/logout", &first, json!({"session_id_hashes": [third_id]})).await.0, 204);
    assert_eq!(t.get("/users/@me", &third).await.0, 401);
    assert_eq!(t.get("/users/@me", &second).await.0, 200);
    // A wrong current password changes nothing.
    let (s, v, _) = t
        .req(Method::PATCH, "/users/@me", Some(&first), Some(json!({"password": "not it at all", "new_password": "battery staple"})))
        .await;
    assert_eq!((s, v["errors"]["password"]["_errors"][0]["code"].as_str()), (400, Some("PASSWORD_DOES_NOT_MATCH")), "{v}");
    assert_eq!(t.get("/users/@me", &second).await.0, 200);
    // The right one: every other token is revoked, this one stays.
    let (s, v, _) = t
        .req(Method::PATCH, "/users/@me", Some(&first), Some(json!({"password": "correct horse", "new_password": "battery staple"})))
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(t.get("/users/@me", &second).await.0, 401);
    assert_eq!(t.get("/users/@me", &first).await.0, 200);
    assert_eq!(login(&t, "changer", "correct horse").await.0, 400);
    assert_eq!(login(&t, "changer", "battery staple").await.0, 200);
}

/// A 1x1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63,
    0x60, 0x00, 0x00, 0x00, 0x02, 0x00, 0x01, 0xe2, 0x21, 0xbc, 0x33, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60,
    0x82,
];

#[tokio::test]
async fn patch_users_me_stores_names_and_avatar_and_tells_sessions_and_guilds() {
    use base64::Engine;
    let t = TestServer::start().await;
    let w = t.world().await;
    let (me, me_id) = t.user("profiled").await;
    t.join(&w.owner, &w.channel, &me).await;
    t.user("taken").await;
    let mut own = Gw::connect(&t.ws).await;
    own.identify(&me, ALL_INTENTS).await;
    let mut peer = Gw::connect(&t.ws).await;
    peer.identify(&w.owner, ALL_INTENTS).await;
    peer.until("GUILD_CREATE").await;

    let uri = format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(PNG));
    let (s, v, _) = t.req(Method::PATCH, "/users/@me", Some(&me), Some(json!({"global_name": "Pro Filed", "avatar": uri}))).await;
    assert_eq!(s, 200, "{v}");
    let avatar = v["avatar"].as_str().unwrap().to_string();
    assert_eq!(avatar.len(), 32);
    let (_, got) = t.get("/users/@me", &me).await;
    assert_eq!((got["global_name"].as_str(), got["avatar"].as_str()), (Some("Pro Filed"), Some(avatar.as_str())), "{got}");
    let (_, other_view) = t.get(&format!("/users/{me_id}"), &w.owner).await;
    assert_eq!(other_view["global_name"], "Pro Filed");
    // The image is served under its hash.
    let url = format!("{}/avatars/{me_id}/{avatar}.png", t.base.trim_end_matches("/api/v10"));
    let r = t.http.get(&url).send().await.unwrap();
    assert_eq!((r.status().as_u16(), r.headers()["content-type"].to_str().unwrap().to_string()), (200, "image/png".to_string()));
    assert_eq!(&r.bytes().await.unwrap()[..], PNG);
    assert_eq!(t.http.get(url.replace(&avatar, "../../../etc/passwd")).send().await.unwrap().status(), 404);
    // Its own sessions get USER_UPDATE; the guild's members GUILD_MEMBER_UPDATE.
    let up = own.until("USER_UPDATE").await;
    assert_eq!((up["d"]["global_name"].as_str(), up["d"]["avatar"].as_str()), (Some("Pro Filed"), Some(avatar.as_str())));
    let mu = peer.until("GUILD_MEMBER_UPDATE").await;
    assert_eq!((mu["d"]["user"]["id"].as_str(), mu["d"]["user"]["global_name"].as_str()), (Some(me_id.as_str()), Some("Pro Filed")));
    // A username needs the password, and must be free.
    let (s, v, _) = t.req(Method::PATCH, "/users/@me", Some(&me), Some(json!({"username": "renamed"}))).await;
    assert_eq!((s, v["code"].as_u64()), (400, Some(50035)), "{v}");
    let (s, v, _) = t.req(Method::PATCH, "/users/@me", Some(&me), Some(json!({"username": "taken", "password": "correct horse"}))).await;
    assert_eq!((s, v["errors"]["username"]["_errors"][0]["code"].as_str()), (400, Some("USERNAME_ALREADY_TAKEN")), "{v}");
    let (s, v, _) = t.req(Method::PATCH, "/users/@me", Some(&me), Some(json!({"username": "renamed", "password": "correct horse"}))).await;
    assert_eq!((s, v["username"].as_str()), (200, Some("renamed")), "{v}");
    assert_eq!(t.get("/users/@me", &me).await.1["username"], "renamed");
    assert_eq!(login(&t, "renamed", "correct horse").await.0, 200);
    // Removing the avatar; a bad image is refused with the field named.
    let (s, v, _) = t.req(Method::PATCH, "/users/@me", Some(&me), Some(json!({"avatar": null}))).await;
    assert_eq!((s, &v["avatar"]), (200, &Value::Null));
    let (s, v, _) = t.req(Method::PATCH, "/users/@me", Some(&me), Some(json!({"avatar": "data:image/png;base64,AAAA"}))).await;
    assert_eq!((s, v["errors"]["avatar"]["_errors"][0]["code"].as_str()), (400, Some("IMAGE_INVALID")), "{v}");
}

#[tokio::test]
async fn an_expired_token_is_refused_by_rest_and_the_gateway() {
    let t = TestServer::start_with(|c| c.auth.token_ttl_ms = Some(1_500)).await;
    let (token, _) = t.user("shortlived").await;
    assert_eq!(t.get("/users/@me", &token).await.0, 200);
    let (_, list) = t.get("/auth/sessions", &token).await;
    assert!(list["user_sessions"][0]["expires_at"].is_string(), "{list}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while t.get("/users/@me", &token).await.0 != 401 {
        assert!(Instant::now() < deadline, "the token never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut g = Gw::connect(&t.ws).await;
    g.send(json!({"op": 2, "d": {"token": token, "intents": 1, "properties": {}}})).await;
    assert_eq!(g.closed().await, Closed::Code(4004));
}

/// IDENTIFYs of one bot token, all at once: READY or op 9.
async fn identify_burst(t: &TestServer, token: &str, n: usize) -> (usize, usize) {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (ws, token) = (t.ws.clone(), token.to_string());
            tokio::spawn(async move {
                let mut g = Gw::connect(&ws).await;
                g.send(json!({"op": 2, "d": {"token": token, "intents": BOT_INTENTS, "properties": {}}})).await;
                loop {
                    match g.next().await {
                        Ok(v) if v["t"] == "READY" => return true,
                        Ok(v) if v["op"] == 9 => {
                            assert_eq!(v["d"], false, "beyond max_concurrency: not resumable");
                            return false;
                        }
                        Ok(_) => continue,
                        Err(c) => panic!("closed: {c:?}"),
                    }
                }
            })
        })
        .collect();
    let (mut ready, mut refused) = (0, 0);
    for task in tasks {
        if task.await.unwrap() {
            ready += 1;
        } else {
            refused += 1;
        }
    }
    (ready, refused)
}

#[tokio::test]
async fn identify_bursts_beyond_max_concurrency_are_refused_and_the_start_limit_is_real() {
    let t = TestServer::start_with(|c| {
        real_limits(c);
        c.gateway.session_start_limit = 4;
        c.gateway.max_sessions_per_user = 1_000;
    })
    .await;
    let (bot_auth, token, _) = t.bot("burst").await;
    let (s, v) = t.get("/gateway/bot", &bot_auth).await;
    assert_eq!(s, 200);
    assert_eq!(v["session_start_limit"], json!({"total": 4, "remaining": 4, "reset_after": 86_400_000u64, "max_concurrency": 1}));
    let (ready, refused) = identify_burst(&t, &token, 50).await;
    assert_eq!((ready, refused), (1, 49), "one IDENTIFY per 5 s with max_concurrency 1");
    let (_, v) = t.get("/gateway/bot", &bot_auth).await;
    assert_eq!(v["session_start_limit"]["remaining"], 3, "refused IDENTIFYs start nothing: {v}");
    // Shards in other buckets go at once when max_concurrency allows them.
    let t2 = TestServer::start_with(|c| {
        real_limits(c);
        c.gateway.identify_max_concurrency = 2;
    })
    .await;
    let (_, token2, _) = t2.bot("sharded").await;
    for shard in 0..2 {
        let mut g = Gw::connect(&t2.ws).await;
        g.send(json!({"op": 2, "d": {"token": token2, "intents": BOT_INTENTS, "properties": {}, "shard": [shard, 2]}})).await;
        assert_eq!(g.until("READY").await["d"]["shard"], json!([shard, 2]));
    }
    // The period's total: 4 in all, then 4004 (the library stops; Discord
    // would reset the token). Each start waits out the 5 s window.
    let mut closes = Vec::new();
    for _ in 0..4 {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let mut g = Gw::connect(&t.ws).await;
            g.send(json!({"op": 2, "d": {"token": token, "intents": BOT_INTENTS, "properties": {}}})).await;
            match g.next().await {
                Ok(v) if v["t"] == "READY" => {
                    closes.push("ready".to_string());
                    break;
                }
                Ok(v) if v["op"] == 9 => {
                    assert!(Instant::now() < deadline, "the window never reopened");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                }
                Ok(v) => panic!("{v}"),
                Err(Closed::Code(c)) => {
                    closes.push(c.to_string());
                    break;
                }
                Err(c) => panic!("{c:?}"),
            }
        }
    }
    assert_eq!(closes, vec!["ready", "ready", "ready", "4004"], "three more starts, then the limit");
    let (_, v) = t.get("/gateway/bot", &bot_auth).await;
    assert_eq!(v["session_start_limit"]["remaining"], 0);
}

#[tokio::test]
async fn one_user_may_hold_only_so_many_sessions() {
    let t = TestServer::start_with(|c| c.gateway.max_sessions_per_user = 2).await;
    let (token, _) = t.user("many").await;
    let mut kept = Vec::new();
    for _ in 0..2 {
        let mut g = Gw::connect(&t.ws).await;
        g.identify(&token, ALL_INTENTS).await;
        kept.push(g);
    }
    let mut third = Gw::connect(&t.ws).await;
    third.send(json!({"op": 2, "d": {"token": token, "properties": {}}})).await;
    assert_eq!(third.closed().await, Closed::Code(4008));
    // One ends: room for another.
    drop(kept.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let mut g = Gw::connect(&t.ws).await;
        g.send(json!({"op": 2, "d": {"token": token, "properties": {}}})).await;
        match g.next().await {
            Ok(v) if v["t"] == "READY" => break,
            _ => {
                assert!(Instant::now() < deadline, "no room after a session ended");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    }
}

/// A revoked token ends the gateway sessions opened with it (4004, not
/// resumable) on the spot; a profile change, which only refreshes the token
/// caches, ends none.
#[tokio::test]
async fn a_revoked_token_closes_its_open_sessions_and_a_profile_change_does_not() {
    let t = TestServer::start().await;
    let (first, _) = t.user("closer").await;
    let (s, v) = login(&t, "closer", "correct horse").await;
    assert_eq!(s, 200);
    let second = v["token"].as_str().unwrap().to_string();
    let mut a = Gw::connect(&t.ws).await;
    a.identify(&first, 1).await;
    let mut b = Gw::connect(&t.ws).await;
    b.identify(&second, 1).await;
    // A new display name: both sessions hear it and stay.
    let (s, v, _) = t.req(Method::PATCH, "/users/@me", Some(&first), Some(json!({"global_name": "Closer"}))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(a.until("USER_UPDATE").await["d"]["global_name"], "Closer");
    assert_eq!(b.until("USER_UPDATE").await["d"]["global_name"], "Closer");
    // The second token revoked from the session list: its session is closed.
    let (_, mine) = t.get("/auth/sessions", &second).await;
    let id = mine["user_sessions"].as_array().unwrap().iter().find(|s| s["current"] == true).unwrap()["id_hash"].clone();
    assert_eq!(t.post("/auth/sessions/logout", &first, json!({"session_id_hashes": [id]})).await.0, 204);
    assert_eq!(b.closed().await, Closed::Code(4004));
    // The first still gets its events.
    let (s, v, _) = t.req(Method::PATCH, "/users/@me", Some(&first), Some(json!({"global_name": "Still here"}))).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(a.until("USER_UPDATE").await["d"]["global_name"], "Still here");
}

/// A message post's body is read only after the caller is known to be
/// allowed there: a stranger's post is refused with its body unsent, and a
/// member who loses Send Messages has at most one more body read (the post
/// the actor refuses) before the check comes first again.
#[tokio::test]
async fn a_post_is_refused_before_its_body_once_the_right_is_gone() {
    let t = TestServer::start().await;
    let w = t.world().await;
    let (member, _) = t.user("member").await;
    t.join(&w.owner, &w.channel, &member).await;
    let url = format!("{}/channels/{}/messages", t.base, w.channel);
    let (stranger, _) = t.user("stranger").await;
    let code = |r: Option<(u16, Value)>| r.map(|(s, v)| (s, v["code"].as_u64()));
    assert_eq!(code(stalled_request("POST", &url, Some(&stranger)).await), Some((403, Some(50001))), "a stranger, at once");
    // Allowed: the member's posts go through (and the check is remembered).
    t.say(&member, &w.channel, "hello").await;
    assert_eq!(code(stalled_request("POST", &url, Some(&member)).await), None, "an allowed poster's body is waited for");
    // @everyone loses Send Messages.
    let everyone = json!({"permissions": (p::VIEW_CHANNEL | p::READ_MESSAGE_HISTORY).to_string()});
    let (s, v, _) = t.req(Method::PATCH, &format!("/guilds/{0}/roles/{0}", w.guild), Some(&w.owner), Some(everyone)).await;
    assert_eq!(s, 200, "{v}");
    // The remembered check lets one body through; the actor refuses it.
    let (s, v) = t.post(&format!("/channels/{}/messages", w.channel), &member, json!({"content": "still?"})).await;
    assert_eq!((s, v["code"].as_u64()), (403, Some(50013)), "{v}");
    // From then on the store is asked first: refused with the body unsent.
    assert_eq!(code(stalled_request("POST", &url, Some(&member)).await), Some((403, Some(50013))), "refused at once");
    let (_, h) = t.get(&format!("/channels/{}/messages?limit=5", w.channel), &w.owner).await;
    assert_eq!(h.as_array().map(|a| a.iter().filter(|m| m["content"] == "still?").count()), Some(0), "nothing committed: {h}");
}
