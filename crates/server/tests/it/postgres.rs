//! The server on PostgreSQL (`database = postgres://…`): a user registers,
//! creates a guild and posts; history and the gateway's MESSAGE_CREATE show
//! the message; a restarted server on the same database still has it;
//! `kill -9` under a stream loses no acknowledged message; `throng bot
//! create` and `throng seed` write to PostgreSQL too; three cluster nodes
//! share one database; the upload quota and the URL-signing key live there
//! too.
//!
//! Needs `THRONG_TEST_POSTGRES_URL` (`scripts/test.sh` starts a private
//! server); each test gets a database of its own, dropped at the end.
//! Without the URL each test fails, unless `THRONG_SKIP_POSTGRES=1` (then
//! not run, said on stderr).

use serde_json::json;

use crate::common::*;

#[path = "../../../store/tests/support/scratch.rs"]
pub(crate) mod scratch;
use scratch::with_scratch;

#[tokio::test]
async fn server_runs_on_postgres() {
    with_scratch("server_runs_on_postgres", |url| async move {
        let pg = url.clone();
        let mut t = TestServer::start_with(move |c| c.database = Some(pg)).await;
        let (owner, owner_id) = t.user("pg_owner").await;
        let (guild, channel) = t.guild(&owner).await;

        let mut gw = Gw::connect(&t.ws).await;
        gw.identify(&owner, 1 | 512 | 32768).await;
        let created = gw.until("GUILD_CREATE").await;
        assert_eq!(created["d"]["id"], guild.as_str());

        let sent = t.say(&owner, &channel, "stored in postgres").await;
        let m = gw.until("MESSAGE_CREATE").await;
        assert_eq!(m["d"]["id"], sent["id"]);
        assert_eq!(m["d"]["content"], "stored in postgres");
        assert_eq!(m["d"]["author"]["id"], owner_id.as_str());

        let (s, history) = t.get(&format!("/channels/{channel}/messages"), &owner).await;
        assert_eq!(s, 200, "{history}");
        assert_eq!(history.as_array().map(Vec::len), Some(1), "{history}");
        assert_eq!(history[0]["id"], sent["id"]);
        assert_eq!(history[0]["content"], "stored in postgres");

        // A second message in a group commit with others, then a restart on
        // the same database: everything is still there, the token works.
        let path = format!("/channels/{channel}/messages");
        let posts: Vec<_> = (0..20).map(|n| t.post(&path, &owner, json!({"content": format!("burst {n}")}))).collect();
        for (s, v) in futures_util::future::join_all(posts).await {
            assert_eq!(s, 200, "{v}");
        }
        t.shutdown().await;
        drop(gw);
        let pg = url.clone();
        let t = TestServer::start_with(move |c| c.database = Some(pg)).await;
        let (s, history) = t.get(&format!("/channels/{channel}/messages?limit=100"), &owner).await;
        assert_eq!(s, 200, "{history}");
        assert_eq!(history.as_array().map(Vec::len), Some(21), "every acknowledged message survives a restart: {history}");
        assert_eq!(history[20]["id"], sent["id"], "oldest last");
    })
    .await;
}

/// Issue #25 on PostgreSQL: uploads count against their uploader's quota
/// from the database's rows, and the URL-signing key is the database's, so
/// a server started later on it (another node) honours the URLs the first
/// signed.
#[tokio::test]
async fn quota_and_url_key_on_postgres() {
    with_scratch("quota_and_url_key_on_postgres", |url| async move {
        let pg = url.clone();
        let t = TestServer::start_with(move |c| {
            c.database = Some(pg);
            c.attachments.user_quota_bytes = 10_000;
        })
        .await;
        let (owner, _) = t.user("pg_files").await;
        let (_, channel) = t.guild(&owner).await;
        let path = format!("/channels/{channel}/messages");
        let (s, m) = crate::attachments::upload(&t, &path, Some(&owner), json!({}), &[("a.bin", &[1u8; 6_000])]).await;
        assert_eq!(s, 200, "{m}");
        let (s, v) = crate::attachments::upload(&t, &path, Some(&owner), json!({}), &[("b.bin", &[2u8; 6_000])]).await;
        assert_eq!((s, v["code"].as_u64()), (413, Some(40005)), "{v}");
        let signed = m["attachments"][0]["url"].as_str().unwrap().to_string();
        assert_eq!(t.http.get(&signed).send().await.unwrap().status(), 200);

        let pg = url.clone();
        let other = TestServer::start_with(move |c| c.database = Some(pg)).await;
        assert_eq!(other.node().config.attachments.url_signing_key, t.node().config.attachments.url_signing_key);
        let (file, query) = signed.split_once("/attachments/").unwrap().1.split_once('?').unwrap();
        let now = server::attachments::now_s();
        assert!(other.node().blobs.signer.verify(&format!("/attachments/{file}"), Some(query), now), "signed by one node, good on another");
    })
    .await;
}

#[tokio::test]
async fn bot_create_tool_writes_to_postgres() {
    with_scratch("bot_create_tool_writes_to_postgres", |url| async move {
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_throng"))
            .args(["bot", "create", "pgbot", "--database", &url])
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let stdout = String::from_utf8(out.stdout).unwrap();
        let token = stdout.lines().last().unwrap().to_string();
        let pg = url.clone();
        let t = TestServer::start_with(move |c| c.database = Some(pg)).await;
        let mut gw = Gw::connect(&t.ws).await;
        let ready = gw.identify(&token, BOT_INTENTS).await;
        assert_eq!(ready["d"]["user"]["username"], "pgbot");
        assert_eq!(ready["d"]["user"]["bot"], true);
    })
    .await;
}

/// `throng seed --database`: seeded users IDENTIFY on a server on that
/// database and get their seeded guilds.
#[tokio::test]
async fn seed_tool_writes_to_postgres() {
    with_scratch("seed_tool_writes_to_postgres", |url| async move {
        let dir = tempfile::tempdir().unwrap();
        let fixture = dir.path().join("fixture.json");
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_throng"))
            .args(["seed", "--database", &url, "--users", "50", "--guilds", "3", "--memberships-per-user", "2", "--out"])
            .arg(&fixture)
            .output()
            .await
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let f: serde_json::Value = serde_json::from_slice(&std::fs::read(&fixture).unwrap()).unwrap();
        let user = &f["users"][0];
        let expected: Vec<&str> = f["guilds"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["member_ids"].as_array().unwrap().contains(&user["id"]))
            .map(|g| g["id"].as_str().unwrap())
            .collect();
        assert!(!expected.is_empty(), "the first seeded user is in a guild");
        let pg = url.clone();
        let t = TestServer::start_with(move |c| c.database = Some(pg)).await;
        let mut gw = Gw::connect(&t.ws).await;
        let ready = gw.identify(user["token"].as_str().unwrap(), 1).await;
        let mut got: Vec<&str> = ready["d"]["guilds"].as_array().unwrap().iter().map(|g| g["id"].as_str().unwrap()).collect();
        got.sort_unstable();
        let mut expected = expected;
        expected.sort_unstable();
        assert_eq!(got, expected, "READY lists the seeded guilds");
    })
    .await;
}

/// A server process, killed (SIGKILL) when dropped, so a failing test leaves none behind.
struct Throng(std::process::Child);

impl Throng {
    fn kill_9(&mut self) {
        self.0.kill().unwrap();
        self.0.wait().unwrap();
    }
}

impl Drop for Throng {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn_throng(url: &str, port: u16) -> Throng {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_throng"))
        .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--database", url])
        .env("THRONG_REST_REQUESTS_PER_WINDOW", "1000000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    Throng(child)
}

/// `kill -9` of a server on PostgreSQL while 8 clients post as fast as it
/// answers: after a restart, every message answered 2xx is in history.
#[tokio::test]
async fn kill_9_under_a_stream_loses_no_acknowledged_message() {
    with_scratch("kill_9_under_a_stream_loses_no_acknowledged_message", |url| async move {
        let port = free_port();
        let base = format!("http://127.0.0.1:{port}/api/v10");
        let http = reqwest::Client::new();
        let mut child = spawn_throng(&url, port);
        wait_up(&http, &base).await;
        let (tok, _, ch) = user_with_guild(&http, &base, "durable_pg").await;

        // Kill once the stream is well under way (a fixed delay is not enough
        // when the whole suite runs at once on a loaded box).
        let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let last_status = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(0));
        let posters: Vec<_> = (0..8)
            .map(|p| {
                let (http, url, tok) = (http.clone(), format!("{base}/channels/{ch}/messages"), tok.clone());
                let (count, last_status) = (count.clone(), last_status.clone());
                tokio::spawn(async move {
                    let mut acked = Vec::new();
                    for n in 0.. {
                        let body = json!({"content": format!("{p}-{n}")});
                        let Ok(r) = http.post(&url).header("authorization", &tok).json(&body).send().await else { break };
                        last_status.store(r.status().as_u16(), std::sync::atomic::Ordering::Relaxed);
                        if r.status() != 200 {
                            continue;
                        }
                        let Ok(v) = r.json::<serde_json::Value>().await else { break };
                        acked.push(v["id"].as_str().unwrap().to_string());
                        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    acked
                })
            })
            .collect();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while count.load(std::sync::atomic::Ordering::Relaxed) < 100 {
            assert!(
                std::time::Instant::now() < deadline,
                "the stream did not get going: {} acknowledged in 30 s, last status {}",
                count.load(std::sync::atomic::Ordering::Relaxed),
                last_status.load(std::sync::atomic::Ordering::Relaxed)
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        // SIGKILL mid-stream: no shutdown path runs.
        child.kill_9();
        let mut acked = Vec::new();
        for p in posters {
            acked.extend(p.await.unwrap());
        }
        assert!(acked.len() >= 100, "{} acknowledged before the kill", acked.len());

        let _child = spawn_throng(&url, port);
        wait_up(&http, &base).await;
        let stored: std::collections::HashSet<String> = history_ids(&http, &base, &ch, &tok).await.iter().map(u64::to_string).collect();
        let lost: Vec<_> = acked.iter().filter(|id| !stored.contains(*id)).collect();
        assert!(lost.is_empty(), "{} of {} acknowledged messages lost: {lost:?}", lost.len(), acked.len());
        eprintln!("kill -9 on PostgreSQL: {} acknowledged, all among {} stored", acked.len(), stored.len());
    })
    .await;
}

/// A cluster whose nodes share one PostgreSQL database (as nodes on
/// several hosts would): three nodes over a real nats-server, the guild's
/// actor on one of them (its writes fenced by the epoch it claimed in
/// PostgreSQL), sessions and REST on the others; every message reaches
/// both sessions in order and history on every node.
#[tokio::test]
async fn three_node_cluster_on_one_postgres_database() {
    with_scratch("three_node_cluster_on_one_postgres_database", |url| async move {
        let nats = crate::cluster::Nats::start();
        let mut nodes = Vec::new();
        for id in 1..=3u64 {
            let (pg, nats_url) = (url.clone(), nats.url.clone());
            nodes.push(
                TestServer::start_with(move |c| {
                    c.database = Some(pg);
                    c.nats = Some(nats_url);
                    c.node_id = id;
                    c.cluster.heartbeat_ms = 100;
                    c.cluster.node_timeout_ms = 1_000;
                })
                .await,
            );
        }
        // Every node sees the three before traffic starts.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        for t in &nodes {
            loop {
                let r = t.http.get(t.base.replace("/api/v10", "/health")).send().await.unwrap();
                let v: serde_json::Value = r.json().await.unwrap();
                if v["cluster_nodes"] == json!([1, 2, 3]) {
                    break;
                }
                assert!(std::time::Instant::now() < deadline, "cluster never converged: {v}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        let w = nodes[0].world().await;
        let mut bot = Gw::connect(&nodes[1].ws).await;
        bot.identify(&w.bot_token, BOT_INTENTS).await;
        assert_eq!(bot.until("GUILD_CREATE").await["d"]["id"], w.guild.as_str());
        let mut human = Gw::connect(&nodes[2].ws).await;
        human.identify(&w.owner, 1 | 512 | 32768).await;
        human.until("GUILD_CREATE").await;

        let mut ids = Vec::new();
        for (i, via) in nodes.iter().enumerate() {
            let sent = via.say(&w.owner, &w.channel, &format!("via node {}", i + 1)).await;
            ids.push(sent["id"].as_str().unwrap().to_string());
        }
        for gw in [&mut bot, &mut human] {
            for (i, id) in ids.iter().enumerate() {
                let m = gw.until("MESSAGE_CREATE").await;
                assert_eq!(
                    (m["d"]["id"].as_str().unwrap(), m["d"]["content"].as_str().unwrap()),
                    (id.as_str(), format!("via node {}", i + 1).as_str())
                );
            }
        }
        let gid: u64 = w.guild.parse().unwrap();
        let (owner, epoch) = nodes[0]
            .node()
            .store
            .guild_owner(protocol::ActorKey::guild(protocol::GuildId(gid)))
            .await
            .unwrap()
            .expect("the guild was claimed");
        assert!((1..=3).contains(&owner) && epoch >= 1, "claimed by a node of the cluster: ({owner}, {epoch})");
        for t in &nodes {
            let (s, history) = t.get(&format!("/channels/{}/messages", w.channel), &w.owner).await;
            assert_eq!(s, 200, "{history}");
            let got: Vec<&str> = history.as_array().unwrap().iter().rev().map(|m| m["id"].as_str().unwrap()).collect();
            assert_eq!(got, ids.iter().map(String::as_str).collect::<Vec<_>>(), "history on every node, oldest first after reversal");
        }
        for mut t in nodes {
            t.shutdown().await;
        }
    })
    .await;
}
