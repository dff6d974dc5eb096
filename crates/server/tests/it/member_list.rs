//! Lazy member lists end to end: clients subscribe (op 14 / op 37) to ranges
//! of a 100,000-member guild, apply every GUILD_MEMBER_LIST_UPDATE op to a
//! local copy, and after 10,000 random joins, leaves, presence changes and
//! nickname changes their copies equal a fresh SYNC. No client ever gets an
//! op outside its ranges.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use protocol::gateway::Status;
use protocol::{ChannelId, GuildId, RoleId, UserId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use server::guild::{GuildEvent, GuildMsg};
use server::presence::Presence;
use store::{BulkLoad, ChannelRecord, GuildRecord, MemberRecord, NewGuild, RoleRecord, UserRecord};

use crate::common::*;

const MEMBERS: u64 = 100_000;
const STEPS: usize = 10_000;

/// A client's copy of its chunks: chunk start -> items.
#[derive(Default)]
struct Copy {
    chunks: BTreeMap<usize, Vec<Value>>,
    ops: usize,
}

impl Copy {
    fn chunk_of(&mut self, index: usize) -> (usize, &mut Vec<Value>) {
        let start = index / 100 * 100;
        let c = self.chunks.get_mut(&start).unwrap_or_else(|| panic!("op at index {index} outside the subscribed chunks"));
        (start, c)
    }

    fn apply(&mut self, d: &Value) {
        for op in d["ops"].as_array().unwrap() {
            self.ops += 1;
            match op["op"].as_str().unwrap() {
                "SYNC" => {
                    let start = op["range"][0].as_u64().unwrap() as usize;
                    self.chunks.insert(start, op["items"].as_array().unwrap().clone());
                }
                "INVALIDATE" => {
                    self.chunks.remove(&(op["range"][0].as_u64().unwrap() as usize));
                }
                "INSERT" => {
                    let i = op["index"].as_u64().unwrap() as usize;
                    let (start, c) = self.chunk_of(i);
                    assert!(i - start <= c.len(), "insert past the end of the chunk copy");
                    c.insert(i - start, op["item"].clone());
                    c.truncate(100);
                }
                "DELETE" => {
                    let i = op["index"].as_u64().unwrap() as usize;
                    let (start, c) = self.chunk_of(i);
                    assert!(i - start < c.len(), "delete of an item the copy does not have");
                    c.remove(i - start);
                }
                "UPDATE" => {
                    let i = op["index"].as_u64().unwrap() as usize;
                    let (start, c) = self.chunk_of(i);
                    c[i - start] = op["item"].clone();
                }
                other => panic!("unknown op {other}"),
            }
        }
    }
}

fn user(id: u64, name: String) -> UserRecord {
    UserRecord { id: UserId(id), username: name, global_name: None, avatar: None, bot: false, flags: 0, created_at: 1 }
}

/// Reads GUILD_MEMBER_LIST_UPDATE events until the stream is quiet.
async fn drain(g: &mut Gw, copy: &mut Copy, quiet: Duration) {
    use futures_util::StreamExt;
    loop {
        match tokio::time::timeout(quiet, g.ws.next()).await {
            Err(_) => return,
            Ok(Some(Ok(tokio_tungstenite::tungstenite::Message::Text(t)))) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                if v["t"] == "GUILD_MEMBER_LIST_UPDATE" {
                    copy.apply(&v["d"]);
                }
            }
            Ok(Some(Ok(_))) => {}
            Ok(other) => panic!("gateway closed: {other:?}"),
        }
    }
}

/// The mailbox is sized for the whole test, so a send never finds it full.
fn send(node: &Arc<server::Node>, g: GuildId, msg: GuildMsg) {
    node.guilds.send(protocol::ActorKey::from(g), msg).expect("guild mailbox has room");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn member_list_ranges_stay_equal_to_a_fresh_sync() {
    let t = TestServer::start_with(|c| {
        c.limits.guild_mailbox_capacity = 100_000;
        // The readers do not heartbeat.
        c.gateway.heartbeat_interval_ms = 600_000;
    })
    .await;
    let node = t.node().clone();
    let gid = GuildId(1 << 40);
    let cid = ChannelId((1 << 40) + 1);
    let mods = RoleId((1 << 40) + 2);
    // Observers (with tokens) and 100,000 members, a few with a hoisted role.
    let mut load = BulkLoad::default();
    let mut tokens = Vec::new();
    for o in 0..4u64 {
        let u = user(10 + o, format!("observer{o}"));
        let (tok, hash) = server::auth::new_token(u.id);
        tokens.push(tok);
        load.tokens.push((hash, u.id));
        load.users.push(u);
    }
    for n in 0..MEMBERS {
        load.users.push(user(1_000 + n, format!("member{n:06}")));
    }
    let members = load
        .users
        .iter()
        .enumerate()
        .map(|(i, u)| MemberRecord { roles: if i % 97 == 0 { vec![mods] } else { vec![] }, ..MemberRecord::joined(gid, u.id, 1) })
        .collect();
    let role = |id: RoleId, name: &str, hoist: bool, position: i32| RoleRecord {
        id,
        guild_id: gid,
        name: name.into(),
        color: 0,
        hoist,
        position,
        permissions: protocol::model::permission::DEFAULT_EVERYONE,
        mentionable: false,
        bot_id: None,
    };
    load.guilds.push(NewGuild {
        guild: GuildRecord {
            id: gid,
            name: "big".into(),
            icon: None,
            description: None,
            owner_id: UserId(10),
            system_channel_id: None,
            created_at: 1,
        },
        roles: vec![role(RoleId(gid.0), "@everyone", false, 0), role(mods, "Mods", true, 1)],
        channels: vec![ChannelRecord {
            id: cid,
            guild_id: Some(gid),
            kind: 0,
            name: "general".into(),
            position: 0,
            topic: None,
            nsfw: false,
            parent_id: None,
            rate_limit_per_user: 0,
            overwrites: vec![],
            last_message_id: None,
        }],
        members,
    });
    node.store.bulk_load(&load).await.unwrap();

    // Some members are online before anyone subscribes.
    let mut rng = StdRng::seed_from_u64(42);
    let statuses = [Status::Online, Status::Idle, Status::Dnd, Status::Offline];
    // Loading and listing 100,000 members in a debug build, beside the rest
    // of the suite, can take longer than the harness's default wait.
    let slow = Duration::from_secs(60);
    let mut a = Gw::connect(&t.ws).await;
    a.wait = slow;
    a.identify(&tokens[0], 1).await;
    // Above large_threshold, GUILD_CREATE lists only online members and the session's own.
    let gc = a.until("GUILD_CREATE").await;
    assert_eq!(gc["d"]["member_count"], MEMBERS + 4);
    assert_eq!(gc["d"]["large"], true);
    let listed: Vec<_> = gc["d"]["members"].as_array().unwrap().iter().map(|m| m["user"]["id"].as_str().unwrap().to_string()).collect();
    assert_eq!(listed, vec!["10".to_string()]);
    for n in 0..2_000u64 {
        let p = Presence::new(statuses[(n % 3) as usize]);
        send(&node, gid, GuildMsg::Presence { user: UserId(1_000 + n * 37), node: 1, presence: p });
    }
    // Client A: op 14 with two chunks. Client B: op 37 with other chunks, one deep in the list.
    a.send(json!({"op": 14, "d": {"guild_id": gid, "typing": true, "channels": {cid.to_string(): [[0, 99], [100, 199]]}}})).await;
    let mut b = Gw::connect(&t.ws).await;
    b.wait = slow;
    b.identify(&tokens[1], 1).await;
    b.until("GUILD_CREATE").await;
    b.send(json!({"op": 37, "d": {"subscriptions": {gid.to_string(): {"channels": {cid.to_string(): [[250, 399], [50_000, 50_099]]}}}}}))
        .await;
    // The checking client connects now: its own coming online is a list change too.
    let mut fresh = Gw::connect(&t.ws).await;
    fresh.wait = slow;
    fresh.identify(&tokens[2], 1).await;
    fresh.until("GUILD_CREATE").await;
    // With GUILD_PRESENCES, a large guild's GUILD_CREATE lists the online
    // members (each with its presence) and the session's own, nobody else.
    let mut watcher = Gw::connect(&t.ws).await;
    watcher.wait = slow;
    watcher.identify(&tokens[3], 1 | 1 << 8).await;
    let gc = watcher.until("GUILD_CREATE").await;
    let ids = |v: &Value, path: &str| -> std::collections::BTreeSet<u64> {
        v.as_array().unwrap().iter().map(|m| m[path]["id"].as_str().unwrap().parse().unwrap()).collect()
    };
    let listed = ids(&gc["d"]["members"], "user");
    let mut online = ids(&gc["d"]["presences"], "user");
    assert!((0..2_000u64).all(|n| online.contains(&(1_000 + n * 37))), "every member set online is in presences");
    online.insert(13);
    assert_eq!(listed, online, "members are exactly the online ones and the session's own");
    drop(watcher);
    let (mut ca, mut cb) = (Copy::default(), Copy::default());
    ca.apply(&a.until("GUILD_MEMBER_LIST_UPDATE").await["d"]);
    cb.apply(&b.until("GUILD_MEMBER_LIST_UPDATE").await["d"]);
    assert_eq!(ca.chunks.keys().copied().collect::<Vec<_>>(), vec![0, 100]);
    assert_eq!(cb.chunks.keys().copied().collect::<Vec<_>>(), vec![200, 300, 50_000]);

    // 10,000 random joins, leaves, presence changes and nickname changes,
    // while both clients read and apply concurrently.
    let reader_a = tokio::spawn(async move {
        drain(&mut a, &mut ca, Duration::from_secs(5)).await;
        (a, ca)
    });
    let reader_b = tokio::spawn(async move {
        drain(&mut b, &mut cb, Duration::from_secs(5)).await;
        (b, cb)
    });
    let mut present: Vec<u64> = (0..MEMBERS).map(|n| 1_000 + n).collect();
    let mut next_id = 1_000 + MEMBERS;
    for step in 0..STEPS {
        let msg = match rng.gen_range(0..4) {
            0 => {
                let u = user(next_id, format!("joiner{next_id}"));
                present.push(next_id);
                next_id += 1;
                let m = MemberRecord::joined(gid, u.id, 2);
                GuildMsg::from(GuildEvent::MemberAdd { member: m, user: u })
            }
            1 => {
                let uid = present.swap_remove(rng.gen_range(0..present.len()));
                GuildMsg::from(GuildEvent::MemberRemove(UserId(uid)))
            }
            2 => {
                let uid = present[rng.gen_range(0..present.len())];
                GuildMsg::Presence { user: UserId(uid), node: 1, presence: Presence::new(statuses[rng.gen_range(0..4)]) }
            }
            _ => {
                let uid = present[rng.gen_range(0..present.len())];
                let nick = if rng.gen_bool(0.2) {
                    None
                } else {
                    Some(format!("{}nick{}", ["a", "M", "z", "_"][rng.gen_range(0..4)], rng.gen_range(0..1000)))
                };
                let roles = if rng.gen_bool(0.05) { vec![mods] } else { vec![] };
                GuildMsg::from(GuildEvent::MemberUpdate(MemberRecord { nick, roles, ..MemberRecord::joined(gid, UserId(uid), 1) }))
            }
        };
        send(&node, gid, msg);
        if step % 200 == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    let (_a, ca) = reader_a.await.unwrap();
    let (_b, cb) = reader_b.await.unwrap();
    assert!(ca.ops > 1_000 && cb.ops > 100, "the mutations reached the subscribed ranges ({} / {} ops)", ca.ops, cb.ops);

    // A fresh client subscribing to the union of both clients' ranges gets the truth.
    fresh.send(json!({"op": 14, "d": {"guild_id": gid, "channels": {cid.to_string(): [[0, 199], [200, 399], [50_000, 50_099]]}}})).await;
    let mut truth = Copy::default();
    truth.apply(&fresh.until("GUILD_MEMBER_LIST_UPDATE").await["d"]);
    for (name, copy) in [("A", &ca), ("B", &cb)] {
        for (start, items) in &copy.chunks {
            let want = &truth.chunks[start];
            assert_eq!(items.len(), want.len(), "client {name} chunk {start}: length");
            for (i, (got, want)) in items.iter().zip(want).enumerate() {
                assert_eq!(got, want, "client {name} index {}", start + i);
            }
        }
    }
}
