//! A cluster over a real `nats-server` (installed by `scripts/nats.sh
//! install`; `THRONG_NATS_SERVER` names the binary, else PATH or
//! ~/go/bin): three nodes sharing one SQLite store, a guild whose actor
//! runs on one node, sessions and REST on the others.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::*;

/// A `nats-server` on a free loopback port, killed on drop.
pub struct Nats {
    child: Child,
    pub url: String,
}

pub(crate) fn nats_bin() -> PathBuf {
    if let Ok(p) = std::env::var("THRONG_NATS_SERVER") {
        return p.into();
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("nats-server")).find(|p| p.is_file()))
        .unwrap_or_default();
    let in_go = std::env::var_os("HOME").map(|h| PathBuf::from(h).join("go/bin/nats-server")).filter(|p| p.is_file());
    on_path.or(in_go).expect("nats-server not found: run `scripts/nats.sh install` (scripts/test.sh does)")
}

impl Nats {
    pub fn start() -> Nats {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        Self::start_on(port)
    }

    /// Kills this nats-server and starts another on the same port (its
    /// clients see their connection drop and come back).
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let port: u16 = self.url.rsplit(':').next().unwrap().parse().unwrap();
        let fresh = Self::start_on(port);
        *self = fresh;
    }

    fn start_on(port: u16) -> Nats {
        let child = Command::new(nats_bin())
            .args(["-a", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not listen on {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nats { child, url: format!("nats://127.0.0.1:{port}") }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) const VNODES: u32 = 128;

pub(crate) async fn node(nats: &Nats, dir: &std::path::Path, id: u64) -> TestServer {
    node_with(nats, dir, id, |_| {}).await
}

/// [`node`] with `tweak` applied to its configuration last.
pub(crate) async fn node_with(nats: &Nats, dir: &std::path::Path, id: u64, tweak: impl FnOnce(&mut server::Config)) -> TestServer {
    let (url, dir) = (nats.url.clone(), dir.to_path_buf());
    TestServer::start_with(move |c| {
        c.data_dir = dir;
        c.nats = Some(url);
        c.node_id = id;
        c.cluster.heartbeat_ms = 100;
        c.cluster.node_timeout_ms = 1_000;
        c.cluster.vnodes = VNODES;
        // The tests' clients do not heartbeat: a scenario that outlasts the
        // test server's 3 s on a loaded box must not end in 4009.
        c.gateway.heartbeat_timeout_ms = Some(60_000);
        tweak(c);
    })
    .await
}

async fn health(t: &TestServer) -> (u16, serde_json::Value) {
    let r = t.http.get(t.base.replace("/api/v10", "/health")).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

/// Waits until every node sees exactly `ids` as the cluster.
pub(crate) async fn converge(nodes: &[&TestServer], ids: &[u64]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    for t in nodes {
        loop {
            let (s, v) = health(t).await;
            if s == 200 && v["cluster_nodes"] == json!(ids) {
                break;
            }
            assert!(Instant::now() < deadline, "cluster never converged on {ids:?}: {v}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// N cluster nodes (ids 1..=N, one data directory, started in id order)
/// that see each other, and a world made through node 1.
pub(crate) struct Cluster<const N: usize> {
    pub nodes: [TestServer; N],
    pub w: World,
    /// The id of the node that runs the world's guild actor.
    pub owner: u64,
    pub nats: Nats,
    _dir: tempfile::TempDir,
}

impl<const N: usize> Cluster<N> {
    pub async fn start() -> Self {
        let nats = Nats::start();
        let dir = tempfile::tempdir().unwrap();
        let ids: Vec<u64> = (1..=N as u64).collect();
        let mut nodes = Vec::with_capacity(N);
        for &id in &ids {
            nodes.push(node(&nats, dir.path(), id).await);
        }
        let Ok(nodes) = <[TestServer; N]>::try_from(nodes) else { unreachable!("N nodes were started") };
        converge(&nodes.iter().collect::<Vec<_>>(), &ids).await;
        let w = nodes[0].world().await;
        let owner = hashring::Ring::with_vnodes(ids, VNODES).lookup(w.guild.parse().unwrap()).unwrap();
        Cluster { nodes, w, owner, nats, _dir: dir }
    }
}

type Three = Cluster<3>;

impl Cluster<2> {
    /// The owner node, then the other.
    fn by_role(&self) -> (&TestServer, &TestServer) {
        (&self.nodes[self.owner as usize - 1], &self.nodes[2 - self.owner as usize])
    }
}

impl Three {
    /// The owner node, then the two others in id order.
    pub(crate) fn by_role(&self) -> (&TestServer, &TestServer, &TestServer) {
        let mut others = (1..=3u64).filter(|&i| i != self.owner).map(|i| &self.nodes[i as usize - 1]);
        (&self.nodes[self.owner as usize - 1], others.next().unwrap(), others.next().unwrap())
    }
}

#[tokio::test]
async fn three_nodes_share_a_guild_whose_actor_runs_on_another() {
    let c = Three::start().await;
    let w = &c.w;
    let (o, a, b) = c.by_role();

    // The bot on one node, the owner on another; the actor on the third.
    let mut bot = Gw::connect(&a.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS | (1 << 15)).await;
    let gc = bot.until("GUILD_CREATE").await;
    assert_eq!(gc["d"]["id"], w.guild, "GUILD_CREATE from the owner node: {gc}");
    let mut human = Gw::connect(&b.ws).await;
    human.identify(&w.owner, ALL_INTENTS).await;
    human.until("GUILD_CREATE").await;

    // REST on the owner's node and on the bot's node reach everyone, in order.
    for (i, via) in [b, o, a].into_iter().enumerate() {
        let content = format!("hello {i}");
        via.say(&w.owner, &w.channel, &content).await;
        let m = bot.until("MESSAGE_CREATE").await;
        assert_eq!(m["d"]["content"], content, "{m}");
        let m = human.until("MESSAGE_CREATE").await;
        assert_eq!(m["d"]["content"], content, "{m}");
    }
    // The bot answers through its own node; the human sees it.
    let (s, v) = a.post(&format!("/channels/{}/messages", w.channel), &w.bot_auth, json!({"content": "pong"})).await;
    assert_eq!(s, 200, "{v}");
    let m = human.until("MESSAGE_CREATE").await;
    assert_eq!((m["d"]["content"].as_str(), m["d"]["author"]["id"].as_str()), (Some("pong"), Some(w.bot_id.as_str())));
    // Typing crosses nodes too.
    let (s, _) = b.post(&format!("/channels/{}/typing", w.channel), &w.owner, json!({})).await;
    assert_eq!(s, 204);
    let t = bot.until("TYPING_START").await;
    assert_eq!(t["d"]["user_id"], w.owner_id);
    // with_counts asks the actor on the owner node and gets its answer back.
    let (s, v) = b.get(&format!("/guilds/{}?with_counts=true", w.guild), &w.owner).await;
    assert_eq!((s, v["approximate_member_count"].as_u64()), (200, Some(2)), "{v}");
    assert_eq!(v["approximate_presence_count"].as_u64(), Some(2), "both are connected: {v}");
    // op 8 is answered by the owner through the session's node.
    bot.send(json!({"op": 8, "d": {"guild_id": w.guild, "query": "", "limit": 0}})).await;
    let chunk = bot.until("GUILD_MEMBERS_CHUNK").await;
    assert_eq!(chunk["d"]["members"].as_array().unwrap().len(), 2, "{chunk}");
    // The guild's only actor is on its owner.
    assert_eq!(o.node().guilds.local_actors(), 1);
    assert_eq!((a.node().guilds.local_actors(), b.node().guilds.local_actors()), (0, 0));
}

/// A node takes a guild's events only from its newest owner: an event
/// stamped with an older ownership epoch (an owner fenced off since) is
/// dropped, one with the current epoch goes through.
#[tokio::test]
async fn events_of_a_fenced_owner_are_not_taken() {
    let c = Cluster::<2>::start().await;
    let (w, gid, owner) = (&c.w, c.w.guild.parse::<u64>().unwrap(), c.owner);
    let (_, other) = c.by_role();
    let mut human = Gw::connect(&other.ws).await;
    human.identify(&w.owner, ALL_INTENTS).await;
    human.until("GUILD_CREATE").await;
    let (_, epoch) = other.node().store.guild_owner(protocol::ActorKey::guild(protocol::GuildId(gid))).await.unwrap().expect("claimed");
    // What the owner would publish to the other node for a typing event.
    let client = async_nats::connect(&c.nats.url).await.unwrap();
    let fan = |e: u64, user: &str| {
        let body = json!({"channel_id": w.channel, "guild_id": w.guild, "user_id": user, "timestamp": 1});
        json!({"Fan": {"g": gid, "e": e, "name": "TYPING_START", "body": body, "filter": {"Intent": 1 << 11}, "only": null}})
    };
    let subject = format!("throng.n.{}.d", if owner == 1 { 2 } else { 1 });
    client.publish(subject.clone(), serde_json::to_vec(&fan(epoch - 1, "111")).unwrap().into()).await.unwrap();
    client.publish(subject, serde_json::to_vec(&fan(epoch, "222")).unwrap().into()).await.unwrap();
    client.flush().await.unwrap();
    let t = human.until("TYPING_START").await;
    assert_eq!(t["d"]["user_id"], "222", "the stale owner's event was dropped, the current one's delivered: {t}");
    let stats = other.node().cluster().unwrap().stats();
    assert_eq!(stats["stale_dropped"], 1, "{stats}");
}

/// The bus cost of one session into a guild owned by another node: its
/// node sends one message (the subscription, carrying the presence), the
/// owner one (the `Sub`, carrying GUILD_CREATE) and no presence event back
/// to a node whose only subscriber is the user who set it. Its end costs
/// one message each way again. Several messages in one NATS message (a
/// batch, as the publisher sends them) are all delivered, in order.
#[tokio::test]
async fn an_identify_into_a_guild_elsewhere_costs_two_bus_messages_and_batches_arrive_whole() {
    let c = Cluster::<2>::start().await;
    let (w, gid, owner_id) = (&c.w, c.w.guild.parse::<u64>().unwrap(), c.owner);
    let (owner, other) = c.by_role();
    let sent = |t: &TestServer| t.node().cluster().unwrap().stats()["sent"].as_u64().unwrap();
    // Let the world's own traffic settle.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (o0, h0) = (sent(owner), sent(other));
    let mut human = Gw::connect(&other.ws).await;
    human.identify(&w.owner, ALL_INTENTS).await;
    human.until("GUILD_CREATE").await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sent(other) - h0, 1, "the session's node: one subscription with the presence");
    assert_eq!(sent(owner) - o0, 1, "the owner: one Sub with GUILD_CREATE, no presence event to the user's own node");

    // One NATS message holding two deliveries, as a batch leaves the publisher.
    let (_, epoch) = other.node().store.guild_owner(protocol::ActorKey::guild(protocol::GuildId(gid))).await.unwrap().expect("claimed");
    let typing = |user: &str| {
        let body = json!({"channel_id": w.channel, "guild_id": w.guild, "user_id": user, "timestamp": 1});
        serde_json::to_vec(
            &json!({"Fan": {"g": gid, "e": epoch, "name": "TYPING_START", "body": body, "filter": {"Intent": 1 << 11}, "only": null}}),
        )
        .unwrap()
    };
    let mut batch = typing("333");
    batch.push(b'\n');
    batch.extend_from_slice(&typing("444"));
    let client = async_nats::connect(&c.nats.url).await.unwrap();
    client.publish(format!("throng.n.{}.d", if owner_id == 1 { 2 } else { 1 }), batch.into()).await.unwrap();
    client.flush().await.unwrap();
    assert_eq!(human.until("TYPING_START").await["d"]["user_id"], "333");
    assert_eq!(human.until("TYPING_START").await["d"]["user_id"], "444");

    let (o1, h1) = (sent(owner), sent(other));
    human.close_with(1000).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while sent(owner) == o1 {
        assert!(Instant::now() < deadline, "the owner never answered the unsubscription");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(sent(other) - h1, 1, "the session's end: one Unsubscribe with the presence");
    assert_eq!(sent(owner) - o1, 1, "the owner: one Sub off, no presence event to a node without subscribers");
}

#[tokio::test]
async fn a_node_that_loses_nats_refuses_new_sessions_and_says_so() {
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let n1 = node(&nats, dir.path(), 1).await;
    converge(&[&n1], &[1]).await;
    let w = n1.world().await;
    n1.say(&w.owner, &w.channel, "before").await;
    drop(nats);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (s, v) = health(&n1).await;
        if s == 503 {
            assert_eq!(v["status"], "no-cluster", "{v}");
            break;
        }
        assert!(Instant::now() < deadline, "health never reported the lost bus: {v}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Not ready either, and it says why.
    let r = n1.http.get(n1.base.replace("/api/v10", "/ready")).send().await.unwrap();
    assert_eq!(r.status(), 503);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["status"], "not-ready", "{v}");
    // It owns no guild now: writes fail fast (nothing is committed) ...
    let (s, v) = n1.post(&format!("/channels/{}/messages", w.channel), &w.owner, json!({"content": "during"})).await;
    assert_eq!(s, 503, "{v}");
    let (_, history) = n1.get(&format!("/channels/{}/messages", w.channel), &w.owner).await;
    assert!(history.as_array().unwrap().iter().all(|m| m["content"] != "during"), "{history}");
    // ... and IDENTIFY gets a resumable close.
    let mut g = Gw::connect(&n1.ws).await;
    g.send(json!({"op": 2, "d": {"token": w.bot_token, "intents": BOT_INTENTS, "properties": {}}})).await;
    assert_eq!(g.closed().await, Closed::Code(4000));
}

/// A RESUME that reaches another node (as behind a balancer) takes the
/// session over while messages keep coming: every message arrives exactly
/// once, in order, with consecutive sequence numbers.
#[tokio::test]
async fn resume_on_another_node_under_a_message_stream_loses_and_repeats_nothing() {
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let mut n1 = node(&nats, dir.path(), 1).await;
    let n2 = node(&nats, dir.path(), 2).await;
    let n3 = node(&nats, dir.path(), 3).await;
    converge(&[&n1, &n2, &n3], &[1, 2, 3]).await;
    let w = n1.world().await;

    let mut bot = Gw::connect(&n1.ws).await;
    let ready = bot.identify(&w.bot_token, BOT_INTENTS).await;
    let session = ready["d"]["session_id"].as_str().unwrap().to_string();
    assert_eq!(server::gateway::home_node(&session), Some(server::fanout::NodeId(1)), "{session}");
    bot.until("GUILD_CREATE").await;

    // A stream of messages through node 2, one every few milliseconds.
    const N: usize = 150;
    let (http, base, auth, channel) = (n2.http.clone(), n2.base.clone(), w.owner.clone(), w.channel.clone());
    let writer = tokio::spawn(async move {
        for i in 0..N {
            let r = http
                .post(format!("{base}/channels/{channel}/messages"))
                .header("authorization", &auth)
                .json(&json!({"content": format!("m{i}")}))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "message {i}");
            tokio::time::sleep(Duration::from_millis(4)).await;
        }
    });
    let mut got: Vec<(u64, String)> = Vec::new();
    // Every dispatch after GUILD_CREATE: a message as its content, anything
    // else (RESUMED, GUILD_CREATE again after a ring change) as its name.
    fn take(got: &mut Vec<(u64, String)>, v: &serde_json::Value) {
        let Some(s) = v["s"].as_u64() else { return };
        match v["t"].as_str() {
            Some("MESSAGE_CREATE") => got.push((s, v["d"]["content"].as_str().unwrap().to_string())),
            Some(t) => got.push((s, t.to_string())),
            None => {}
        }
    }
    let is_message = |c: &str| c.starts_with('m');
    while got.len() < 40 {
        let v = bot.recv().await;
        take(&mut got, &v);
    }
    // The socket dies; the client comes back on node 3 while the stream goes on.
    let seen = bot.seq.unwrap();
    bot.close_abruptly().await;
    tokio::time::sleep(Duration::from_millis(30)).await;
    let mut g = Gw::connect(&n3.ws).await;
    g.send(json!({"op": 6, "d": {"token": w.bot_auth, "session_id": session, "seq": seen}})).await;
    let mut resumed = false;
    while got.iter().filter(|(_, c)| is_message(c)).count() < N {
        let v = g.recv().await;
        assert_ne!(v["op"], 9, "the session was not taken over: {v}");
        resumed |= v["t"] == "RESUMED";
        take(&mut got, &v);
    }
    writer.await.unwrap();
    assert!(resumed, "no RESUMED");
    let contents: Vec<&str> = got.iter().map(|(_, c)| c.as_str()).filter(|c| is_message(c)).collect();
    let expected: Vec<String> = (0..N).map(|i| format!("m{i}")).collect();
    assert_eq!(contents, expected, "every message once, in order");
    assert!(got.windows(2).all(|p| p[1].0 == p[0].0 + 1), "sequence numbers are consecutive: {got:?}");
    assert_eq!(n3.node().sessions.len(), 1, "the session lives on node 3 now");
    // Later dispatches of the session (op 8 answers) still reach it there.
    g.send(json!({"op": 8, "d": {"guild_id": w.guild, "query": "", "limit": 0}})).await;
    let chunk = g.until("GUILD_MEMBERS_CHUNK").await;
    assert_eq!(chunk["d"]["members"].as_array().unwrap().len(), 2, "{chunk}");
    take(&mut got, &chunk);

    // Taken over again, on node 2 (the RESUME is asked of node 1, where the
    // session started, which sends it on to node 3), under a burst from
    // eight writers at once, so the guild's events are in flight on both
    // paths while its subscription moves: what the session sees must be
    // the guild's own order, which is its history's.
    let post = {
        let (http, base, auth, channel) = (n2.http.clone(), n2.base.clone(), w.owner.clone(), w.channel.clone());
        move |i: usize| {
            let (http, base, auth, channel) = (http.clone(), base.clone(), auth.clone(), channel.clone());
            async move {
                // Retried while the guild's owner changes (503 for a moment).
                loop {
                    let r = http
                        .post(format!("{base}/channels/{channel}/messages"))
                        .header("authorization", &auth)
                        .json(&json!({"content": format!("m{i}")}))
                        .send()
                        .await
                        .unwrap();
                    match r.status().as_u16() {
                        200 => return,
                        503 => tokio::time::sleep(Duration::from_millis(50)).await,
                        s => panic!("message {i}: {s}"),
                    }
                }
            }
        }
    };
    const BURST: usize = 160;
    let writers: Vec<_> = (0..8)
        .map(|k| {
            let post = post.clone();
            tokio::spawn(async move {
                for i in (N + k..N + BURST).step_by(8) {
                    post(i).await;
                }
            })
        })
        .collect();
    while got.iter().filter(|(_, c)| is_message(c)).count() < N + 10 {
        let v = g.recv().await;
        take(&mut got, &v);
    }
    let seen = g.seq.unwrap();
    g.close_abruptly().await;
    let mut g = Gw::connect(&n2.ws).await;
    g.send(json!({"op": 6, "d": {"token": w.bot_auth, "session_id": session, "seq": seen}})).await;
    while got.iter().filter(|(_, c)| is_message(c)).count() < N + BURST {
        let v = g.recv().await;
        assert_ne!(v["op"], 9, "the session was not taken over a second time: {v}");
        take(&mut got, &v);
    }
    for wr in writers {
        wr.await.unwrap();
    }
    // The subscriptions moved with the session: the node it started on
    // goes away, and the session keeps getting the guild where it is now.
    n1.shutdown().await;
    converge(&[&n2, &n3], &[2, 3]).await;
    for i in N + BURST..N + BURST + 20 {
        post(i).await;
    }
    while got.iter().filter(|(_, c)| is_message(c)).count() < N + BURST + 20 {
        let v = g.recv().await;
        assert_ne!(v["op"], 9, "the session ended with its first node: {v}");
        take(&mut got, &v);
    }
    let order: Vec<String> = {
        let mut by_id: Vec<(u64, String)> = Vec::new();
        let mut after = 0u64;
        loop {
            let url = format!("{}/channels/{}/messages?after={after}&limit=100", n2.base, w.channel);
            let page: serde_json::Value = n2.http.get(url).header("authorization", &w.owner).send().await.unwrap().json().await.unwrap();
            let page: Vec<(u64, String)> = page
                .as_array()
                .unwrap()
                .iter()
                .map(|m| (m["id"].as_str().unwrap().parse().unwrap(), m["content"].as_str().unwrap().to_string()))
                .collect();
            let Some(max) = page.iter().map(|(id, _)| *id).max() else { break };
            by_id.extend(page);
            after = max;
        }
        by_id.sort();
        by_id.into_iter().map(|(_, c)| c).collect()
    };
    let contents: Vec<&str> = got.iter().map(|(_, c)| c.as_str()).filter(|c| is_message(c)).collect();
    assert_eq!(order.len(), N + BURST + 20, "every message committed once");
    assert_eq!(contents, order, "every message once, in the guild's order, across two take-overs and a node's exit");
    assert!(got.windows(2).all(|p| p[1].0 == p[0].0 + 1), "sequence numbers are consecutive: {got:?}");
    // Node 3 keeps only a copy that says where the session went.
    let on3 = n3.sessions().get(&session).expect("node 3's copy");
    assert_eq!(on3.handed_to.get().copied(), Some(server::fanout::NodeId(2)));
    assert!(n2.node().sessions.get(&session).is_some(), "the session lives on node 2");
}

/// A TCP relay between one node and NATS that the test can cut (every
/// connection dropped, new ones refused) and restore.
struct Relay {
    url: String,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Relay {
    async fn start(to: &str) -> Relay {
        use std::sync::atomic::Ordering;
        let target = to.trim_start_matches("nats://").to_string();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("nats://{}", listener.local_addr().unwrap());
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let generation = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (c, g) = (cut.clone(), generation.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut client, _)) = listener.accept().await else { return };
                if c.load(Ordering::SeqCst) {
                    continue;
                }
                let (target, g, c) = (target.clone(), g.clone(), c.clone());
                tokio::spawn(async move {
                    let Ok(mut server) = tokio::net::TcpStream::connect(&target).await else { return };
                    let born = g.load(Ordering::SeqCst);
                    let copy = tokio::io::copy_bidirectional(&mut client, &mut server);
                    tokio::pin!(copy);
                    loop {
                        tokio::select! {
                            _ = &mut copy => return,
                            _ = tokio::time::sleep(Duration::from_millis(10)) => {
                                if c.load(Ordering::SeqCst) || g.load(Ordering::SeqCst) != born {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
        });
        Relay { url, cut, generation }
    }

    fn set_cut(&self, on: bool) {
        self.cut.store(on, std::sync::atomic::Ordering::SeqCst);
        self.generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The node that made a snowflake (worker and process bits, as a cluster
/// node derives them from its id).
fn node_of(id: &str) -> u64 {
    (id.parse::<u64>().unwrap() >> 12) & 0x3ff
}

/// The owner of a guild loses its NATS connection while every node keeps
/// writing: it stops accepting writes, another node takes the guild over
/// (a new epoch), the first takes it back when it returns. No two owners
/// accept writes at once: the messages, in id (time) order, change owner no
/// more often than the guild was claimed; every 2xx message is in history.
#[tokio::test]
async fn a_cut_from_nats_never_leaves_two_owners_accepting_writes() {
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let mut relays = Vec::new();
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let relay = Relay::start(&nats.url).await;
        let (url, d) = (relay.url.clone(), dir.path().to_path_buf());
        nodes.push(
            TestServer::start_with(move |c| {
                c.data_dir = d;
                c.nats = Some(url);
                c.node_id = id;
                c.cluster.heartbeat_ms = 100;
                c.cluster.node_timeout_ms = 1_000;
                c.cluster.vnodes = VNODES;
                c.limits.write_timeout_ms = 1_500;
            })
            .await,
        );
        relays.push(relay);
    }
    converge(&nodes.iter().collect::<Vec<_>>(), &[1, 2, 3]).await;
    let w = nodes[0].world().await;
    let gid: u64 = w.guild.parse().unwrap();
    let owner = hashring::Ring::with_vnodes([1, 2, 3], VNODES).lookup(gid).unwrap() as usize;
    let path = format!("/channels/{}/messages", w.channel);
    // The first write makes the owner load (and claim) the guild.
    assert_eq!(nodes[0].post(&path, &w.owner, json!({"content": "first"})).await.0, 200);
    let store = nodes[0].node().store.clone();
    let (_, epoch_before) = store.guild_owner(protocol::ActorKey::guild(protocol::GuildId(gid))).await.unwrap().unwrap();

    // Writers on every node, for ~5 s; the owner is cut off from 1 s to 3 s.
    let started = Instant::now();
    let mut writers = Vec::new();
    for (i, t) in nodes.iter().enumerate() {
        let (http, url, auth) = (t.http.clone(), format!("{}{path}", t.base), w.owner.clone());
        writers.push(tokio::spawn(async move {
            let (mut ok, mut refused) = (Vec::new(), 0u32);
            let mut n = 0;
            while started.elapsed() < Duration::from_secs(5) {
                n += 1;
                let r = http.post(&url).header("authorization", &auth).json(&json!({"content": format!("n{i}-{n}")})).send().await.unwrap();
                match r.status().as_u16() {
                    200 => ok.push(r.json::<serde_json::Value>().await.unwrap()["id"].as_str().unwrap().to_string()),
                    503 => refused += 1,
                    s => panic!("unexpected status {s}"),
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            (ok, refused)
        }));
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    relays[owner - 1].set_cut(true);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (s, v) = health(&nodes[owner - 1]).await;
    assert_eq!((s, v["status"].as_str()), (503, Some("no-cluster")), "the cut owner says so: {v}");
    relays[owner - 1].set_cut(false);
    let mut acked: Vec<String> = Vec::new();
    let mut refused = 0;
    for wr in writers {
        let (ok, r) = wr.await.unwrap();
        acked.extend(ok);
        refused += r;
    }
    converge(&nodes.iter().collect::<Vec<_>>(), &[1, 2, 3]).await;
    let (_, epoch_after) = store.guild_owner(protocol::ActorKey::guild(protocol::GuildId(gid))).await.unwrap().unwrap();
    assert!(refused > 0, "writes were refused while the guild moved");
    assert!(acked.len() > 100, "writes went on: {} acknowledged", acked.len());

    // Every acknowledged message is in history (read it all, oldest first).
    let history: Vec<String> = history_ids(&nodes[0].http, &nodes[0].base, &w.channel, &w.owner).await.iter().map(u64::to_string).collect();
    let stored: std::collections::HashSet<&String> = history.iter().collect();
    let missing: Vec<&String> = acked.iter().filter(|id| !stored.contains(id)).collect();
    assert!(missing.is_empty(), "{} acknowledged messages missing from history", missing.len());
    // One accepting owner at a time: owner runs in time order <= claims.
    let owners: Vec<u64> = history.iter().map(|id| node_of(id)).collect();
    let runs = 1 + owners.windows(2).filter(|p| p[0] != p[1]).count() as u64;
    let claims = epoch_after - epoch_before;
    eprintln!("cut: {} acknowledged, {refused} refused (503), {runs} owner runs, {claims} claims", acked.len());
    assert!(claims >= 2, "the guild moved away and back: epochs {epoch_before} -> {epoch_after}");
    assert!(owners.iter().any(|&o| o != owner as u64), "another node accepted writes during the cut");
    assert!(runs <= claims + 1, "owners interleaved: {runs} runs of one owner for {claims} claims: {owners:?}");
}

/// A `throng serve` process of the cluster (killed on drop).
pub(crate) struct Proc {
    child: Child,
    pub base: String,
    pub ws: String,
    /// The node's log; its tail is printed if the test fails.
    log: PathBuf,
}

impl Proc {
    /// Node `id` with the default cluster timings, NATS at `nats` (one
    /// URL, or several separated by commas).
    pub(crate) fn start(nats: &str, dir: &std::path::Path, id: u64) -> Proc {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = dir.join(format!("node{id}.toml"));
        let log = dir.join(format!("node{id}.log"));
        std::fs::write(&config, "[limits]\nrest_requests_per_window = 100000\n").unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_throng"))
            .args(["serve", "--listen", &format!("127.0.0.1:{port}"), "--nats", nats, "--node-id", &id.to_string()])
            .args(["--admin-token", "adm", "--config"])
            .arg(&config)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("node log"))
            .spawn()
            .expect("throng starts");
        Proc { child, base: format!("http://127.0.0.1:{port}/api/v10"), ws: format!("ws://127.0.0.1:{port}/?v=10&encoding=json"), log }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(40).collect();
            eprintln!("--- {} (last {} lines) ---", self.log.display(), tail.len());
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

pub(crate) async fn wait_for_cluster(http: &reqwest::Client, procs: &[&Proc], ids: &[u64]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    for p in procs {
        loop {
            let v: Option<serde_json::Value> = match http.get(p.base.replace("/api/v10", "/health")).send().await {
                Ok(r) => r.json().await.ok(),
                Err(_) => None,
            };
            if v.as_ref().is_some_and(|v| v["status"] == "ok" && v["cluster_nodes"] == json!(ids)) {
                break;
            }
            assert!(Instant::now() < deadline, "cluster never converged on {ids:?}: {v:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// A user joins a guild (invite) while connected to a node that neither
/// runs the guild nor took the REST call: that session gets GUILD_CREATE
/// and then the guild's messages.
#[tokio::test]
async fn a_new_member_connected_to_another_node_starts_receiving_the_guild() {
    let c = Three::start().await;
    let w = &c.w;
    let (_, a, b) = c.by_role();
    let others = [a, b];
    let (joiner, _) = c.nodes[0].user("joiner").await;
    // Connected (no guilds yet) to a node that does not run the guild.
    let mut g = Gw::connect(&others[0].ws).await;
    let ready = g.identify(&joiner, ALL_INTENTS).await;
    assert_eq!(ready["d"]["guilds"].as_array().unwrap().len(), 0);
    // Joins through REST on the other non-owner node.
    let (s, inv) = others[1].post(&format!("/channels/{}/invites", w.channel), &w.owner, json!({})).await;
    assert_eq!(s, 200, "{inv}");
    let (s, v) = others[1].post(&format!("/invites/{}", inv["code"].as_str().unwrap()), &joiner, json!({})).await;
    assert_eq!(s, 200, "{v}");
    let gc = g.until("GUILD_CREATE").await;
    assert_eq!(gc["d"]["id"], w.guild.as_str());
    others[1].say(&w.owner, &w.channel, "welcome").await;
    let m = g.until("MESSAGE_CREATE").await;
    assert_eq!(m["d"]["content"], "welcome");
}

/// A user with sessions on two nodes shows the presence set last on either,
/// and goes offline only when their last session anywhere ends: the actor
/// keeps each node's report apart (`guild::actor::presence`).
#[tokio::test]
async fn a_user_on_two_nodes_is_offline_only_when_both_are_gone() {
    let c = Three::start().await;
    let w = &c.w;
    let (o, a, b) = c.by_role();

    // The bot watches presences from the actor's own node.
    let mut bot = Gw::connect(&o.ws).await;
    bot.identify(&w.bot_token, BOT_INTENTS).await;
    bot.until("GUILD_CREATE").await;
    let status_seen = async |bot: &mut Gw| -> String {
        loop {
            let v = bot.until("PRESENCE_UPDATE").await;
            if v["d"]["user"]["id"] == w.owner_id {
                return v["d"]["status"].as_str().unwrap().to_string();
            }
        }
    };
    let identify = |status: &str| {
        json!({"op": 2, "d": {"token": w.owner, "intents": ALL_INTENTS, "presence": {"status": status, "since": null, "activities": [], "afk": false},
            "properties": {"os": "linux", "browser": "it", "device": "it"}}})
    };
    let mut on_a = Gw::connect(&a.ws).await;
    on_a.send(identify("online")).await;
    on_a.until("READY").await;
    assert_eq!(status_seen(&mut bot).await, "online");
    let mut on_b = Gw::connect(&b.ws).await;
    on_b.send(identify("idle")).await;
    on_b.until("READY").await;
    assert_eq!(status_seen(&mut bot).await, "idle", "node b reported last");
    // The session on b ends for good: a's still shows.
    on_b.close_with(1000).await;
    assert_eq!(status_seen(&mut bot).await, "online", "a session on node a is still there");
    on_a.close_with(1000).await;
    assert_eq!(status_seen(&mut bot).await, "offline");
    // The member list agrees: nobody but the bot online.
    let (s, v) = a.get(&format!("/guilds/{}?with_counts=true", w.guild), &w.bot_auth).await;
    assert_eq!((s, v["approximate_presence_count"].as_u64()), (200, Some(1)), "{v}");
}

/// Issue #29 from any node: an ack taken on one node reaches the person's
/// sessions on the others (MESSAGE_ACK), a mention counted by the actor's
/// node shows in READY on another; member search, the audit log and
/// message search answer from a node that does not run the guild.
#[tokio::test]
async fn read_states_search_and_the_audit_log_work_from_any_node() {
    let c = Three::start().await;
    let w = &c.w;
    let (o, a, b) = c.by_role();
    let mut on_a = Gw::connect(&a.ws).await;
    on_a.identify(&w.owner, ALL_INTENTS).await;
    let mut on_o = Gw::connect(&o.ws).await;
    on_o.identify(&w.owner, ALL_INTENTS).await;
    let (alice, alice_id) = crate::dms::member(b, w, "alice").await;

    // A mention, posted through a, counted by the owner node's actor.
    let m = a.say(&alice, &w.channel, &format!("<@{}> findable words", w.owner_id)).await;
    let mid = m["id"].as_str().unwrap().to_string();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut g = Gw::connect(&b.ws).await;
        let ready = g.identify(&w.owner, ALL_INTENTS).await;
        let entries = ready["d"]["read_state"]["entries"].as_array().unwrap().clone();
        if entries.iter().any(|e| e["id"] == w.channel.as_str() && e["mention_count"] == 1) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the mention never showed in READY: {entries:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The ack on b: MESSAGE_ACK on a and on the owner node.
    let (s, v, _) = b.req(reqwest::Method::POST, &format!("/channels/{}/messages/{mid}/ack", w.channel), Some(&w.owner), None).await;
    assert_eq!((s, v), (200, json!({"token": null})));
    for g in [&mut on_a, &mut on_o] {
        let ev = g.until("MESSAGE_ACK").await;
        assert_eq!(ev["d"]["message_id"], mid.as_str(), "{ev}");
    }
    // Member search, the audit log and message search from a and b.
    let (s, v) = a.get(&format!("/guilds/{}/members/search?query=ali&limit=5", w.guild), &w.owner).await;
    assert_eq!((s, v[0]["user"]["id"].as_str()), (200, Some(alice_id.as_str())), "{v}");
    let (s, v) = b.get(&format!("/guilds/{}/audit-logs?action_type=28", w.guild), &w.owner).await;
    assert_eq!((s, v["audit_log_entries"][0]["target_id"].as_str()), (200, Some(w.bot_id.as_str())), "the bot's addition: {v}");
    let (s, v) = a.get(&format!("/guilds/{}/messages/search?content=findable", w.guild), &alice).await;
    assert_eq!((s, v["total_results"].as_u64(), v["messages"][0][0]["id"].as_str()), (200, Some(1), Some(mid.as_str())), "{v}");
}

/// A post held for a slow owner is sent again (`cluster.post_resend_ms`,
/// here 10 ms, so most posts go more than once): the owner commits and
/// delivers each message once, whatever number of copies reach it.
#[tokio::test]
async fn posts_sent_again_to_a_slow_owner_are_stored_and_delivered_once() {
    let nats = Nats::start();
    let dir = tempfile::tempdir().unwrap();
    let fast_resend = |c: &mut server::Config| c.cluster.post_resend_ms = 10;
    let n1 = node_with(&nats, dir.path(), 1, fast_resend).await;
    let n2 = node_with(&nats, dir.path(), 2, fast_resend).await;
    converge(&[&n1, &n2], &[1, 2]).await;
    let w = n1.world().await;
    let owner = hashring::Ring::with_vnodes([1, 2], VNODES).lookup(w.guild.parse().unwrap()).unwrap();
    let (at_owner, other) = if owner == 1 { (&n1, &n2) } else { (&n2, &n1) };

    let mut human = Gw::connect(&at_owner.ws).await;
    human.identify(&w.owner, ALL_INTENTS).await;
    human.until("GUILD_CREATE").await;

    // Concurrent posts through the other node, so the owner's writer has
    // a queue and answers take longer than the resend time.
    const N: usize = 120;
    let mut posts = Vec::new();
    for i in 0..N {
        let (http, base, auth, channel) = (other.http.clone(), other.base.clone(), w.owner.clone(), w.channel.clone());
        posts.push(tokio::spawn(async move {
            let r = http
                .post(format!("{base}/channels/{channel}/messages"))
                .header("Authorization", auth)
                .json(&json!({"content": format!("copy {i}")}))
                .send()
                .await
                .unwrap();
            r.status().as_u16()
        }));
    }
    for p in posts {
        assert_eq!(p.await.unwrap(), 200);
    }
    let copies = other.node().posts_resent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(copies > 0, "no post was sent again: the test shows nothing");
    // A last message: everything before it has been delivered by then.
    other.say(&w.owner, &w.channel, "the end").await;
    let mut seen = std::collections::HashMap::<String, usize>::new();
    loop {
        let m = human.until("MESSAGE_CREATE").await;
        let content = m["d"]["content"].as_str().unwrap().to_string();
        if content == "the end" {
            break;
        }
        *seen.entry(content).or_default() += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "delivered more than once: {twice:?}");
    assert_eq!(seen.len(), N, "every post delivered");
    // Stored once each.
    let mut stored = 0;
    let mut before: Option<String> = None;
    loop {
        let q = before.as_ref().map(|b| format!("&before={b}")).unwrap_or_default();
        let (s, v) = at_owner.get(&format!("/channels/{}/messages?limit=100{q}", w.channel), &w.owner).await;
        assert_eq!(s, 200, "{v}");
        let page = v.as_array().unwrap();
        stored += page.iter().filter(|m| m["content"].as_str().is_some_and(|c| c.starts_with("copy "))).count();
        if page.len() < 100 {
            break;
        }
        before = page.last().and_then(|m| m["id"].as_str()).map(str::to_owned);
    }
    assert_eq!(stored, N, "each post stored once");
    eprintln!("{N} posts, {copies} sent again");
}
