//! The conformance suite against a real PostgreSQL, plus PostgreSQL specifics
//! (several stores sharing one database, as nodes of a cluster do).
//!
//! Needs `THRONG_TEST_POSTGRES_URL` (`scripts/test.sh` starts a private
//! server and sets it). Each test creates a database of its own on that
//! server and drops it at the end. Without the URL the tests fail, unless
//! `THRONG_SKIP_POSTGRES=1` (never in CI): then they say they did not run.

use std::sync::Arc;

use protocol::{ActorKey, ChannelId, GuildId, MessageId, UserId};
use store::postgres::{PostgresOptions, PostgresStore};
use store::Store;

#[path = "support/scratch.rs"]
mod scratch;
use scratch::with_scratch;

#[tokio::test]
async fn postgres_passes_conformance() {
    with_scratch("postgres_passes_conformance", |url| async move {
        let s = PostgresStore::open(&url, &PostgresOptions::default()).await.unwrap();
        store::conformance::run_all(&s).await;
        s.close().await;
    })
    .await;
}

async fn guild_with_channel(s: &dyn Store) {
    s.create_user(
        &store::UserRecord { id: UserId(1), username: "a".into(), global_name: None, avatar: None, bot: false, flags: 0, created_at: 0 },
        Some("h"),
    )
    .await
    .unwrap();
    let guild = store::GuildRecord {
        id: GuildId(100),
        name: "g".into(),
        icon: None,
        description: None,
        owner_id: UserId(1),
        system_channel_id: None,
        created_at: 0,
    };
    let channel = store::ChannelRecord {
        id: ChannelId(101),
        guild_id: Some(GuildId(100)),
        kind: 0,
        name: "c".into(),
        position: 0,
        topic: None,
        nsfw: false,
        parent_id: None,
        rate_limit_per_user: 0,
        overwrites: vec![],
        last_message_id: None,
    };
    s.create_guild(&store::NewGuild { guild, roles: vec![], channels: vec![channel], members: vec![] }).await.unwrap();
}

fn message(id: u64) -> store::MessageRecord {
    store::MessageRecord {
        id: MessageId(id),
        channel_id: ChannelId(101),
        guild_id: Some(GuildId(100)),
        author_id: UserId(1),
        content: format!("m{id}"),
        edited_at: None,
        kind: 0,
        flags: 0,
        tts: false,
        mention_everyone: false,
        mentions: vec![],
        reference: None,
        extra: serde_json::json!({}),
    }
}

/// Two stores on one database (two nodes): a reopened database applies no
/// migration twice, and claims and fenced writes from both interleave
/// correctly: each write is accepted exactly when its epoch is current.
#[tokio::test]
async fn two_nodes_share_one_database() {
    with_scratch("two_nodes_share_one_database", |url| async move {
        let opts = PostgresOptions::default();
        let (a, b) = tokio::join!(PostgresStore::open(&url, &opts), PostgresStore::open(&url, &opts));
        let (a, b) = (Arc::new(a.unwrap()), Arc::new(b.unwrap()));
        guild_with_channel(&*a).await;
        let g = GuildId(100);
        let ea = a.claim_guild(ActorKey::from(g), 1).await.unwrap();
        assert_eq!(a.create_messages(&[(ea, message(1))]).await.unwrap(), vec![true]);
        let eb = b.claim_guild(ActorKey::from(g), 2).await.unwrap();
        assert_eq!(eb, ea + 1);
        assert_eq!(a.create_messages(&[(ea, message(2))]).await.unwrap(), vec![false], "the old owner is fenced off");
        assert_eq!(b.create_messages(&[(eb, message(3))]).await.unwrap(), vec![true]);
        assert_eq!(a.guild_owner(ActorKey::from(g)).await.unwrap(), Some((2, eb)), "both nodes see one owner");
        assert!(a.get_message(ChannelId(101), MessageId(2)).await.unwrap().is_none());

        // Concurrent claims from both nodes: every claim gets its own epoch.
        let mut claims = Vec::new();
        for n in 0..20u64 {
            let s = if n % 2 == 0 { a.clone() } else { b.clone() };
            claims.push(tokio::spawn(async move { s.claim_guild(ActorKey::from(GuildId(100)), n % 2 + 1).await.unwrap() }));
        }
        let mut epochs = Vec::new();
        for c in claims {
            epochs.push(c.await.unwrap());
        }
        epochs.sort_unstable();
        assert_eq!(epochs, ((eb + 1)..=(eb + 20)).collect::<Vec<_>>(), "no claim lost to a race");

        // Batch claims of overlapping sets, given in opposite orders by the
        // two nodes: no deadlock, and every guild's epoch counts every claim.
        let set: Vec<ActorKey> = (500..540).map(|g| ActorKey::guild(GuildId(g))).collect();
        let mut claims = Vec::new();
        for n in 0..10u64 {
            let s = if n % 2 == 0 { a.clone() } else { b.clone() };
            let mut mine = set.clone();
            if n % 2 == 1 {
                mine.reverse();
            }
            claims.push(tokio::spawn(async move { s.claim_guilds(&mine, n % 2 + 1).await.unwrap() }));
        }
        for c in claims {
            assert_eq!(c.await.unwrap().len(), set.len(), "one epoch per guild claimed");
        }
        for &g in &set {
            assert_eq!(a.guild_owner(g).await.unwrap().map(|(_, e)| e), Some(10), "ten claims of {g:?}");
        }
        a.close().await;
        b.close().await;
    })
    .await;
}

/// A claim racing a stream of fenced batches: every batch either committed
/// before the claim (accepted, stored) or after it (refused, not stored);
/// nothing accepted under the old epoch commits after the new one.
#[tokio::test]
async fn claim_is_atomic_against_group_commits() {
    with_scratch("claim_is_atomic_against_group_commits", |url| async move {
        let s = Arc::new(PostgresStore::open(&url, &PostgresOptions::default()).await.unwrap());
        guild_with_channel(&*s).await;
        let g = GuildId(100);
        let e1 = s.claim_guild(ActorKey::from(g), 1).await.unwrap();
        let started = Arc::new(tokio::sync::Notify::new());
        let writer = {
            let (s, started) = (s.clone(), started.clone());
            tokio::spawn(async move {
                let mut results = Vec::new();
                for n in 0..200u64 {
                    let batch: Vec<_> = (0..5).map(|k| (e1, message(1_000 + n * 5 + k))).collect();
                    results.push((n, s.create_messages(&batch).await.unwrap()));
                    if n == 10 {
                        started.notify_one();
                    }
                }
                results
            })
        };
        // The claim lands while batches are streaming.
        started.notified().await;
        let e2 = s.claim_guild(ActorKey::from(g), 2).await.unwrap();
        // After the claim returned, the old epoch is refused.
        assert_eq!(s.create_messages(&[(e1, message(50_000))]).await.unwrap(), vec![false]);
        assert_eq!(s.create_messages(&[(e2, message(50_001))]).await.unwrap(), vec![true]);
        let results = writer.await.unwrap();
        assert!(results.iter().filter(|(_, ok)| ok[0]).count() > 10, "batches before the claim were accepted");
        assert!(results.iter().any(|(_, ok)| !ok[0]), "batches after the claim were refused");
        let mut refused_seen = false;
        for (n, ok) in results {
            assert!(ok.iter().all(|&v| v == ok[0]), "one batch, one guild, one answer");
            refused_seen |= !ok[0];
            assert!(!(refused_seen && ok[0]), "batch {n} accepted after an earlier one was refused");
            for k in 0..5 {
                let stored = s.get_message(ChannelId(101), MessageId(1_000 + n * 5 + k)).await.unwrap().is_some();
                assert_eq!(stored, ok[0], "batch {n}: stored exactly when accepted");
            }
        }
        s.close().await;
    })
    .await;
}

/// An invite with one use left, used by many connections at once: one wins.
#[tokio::test]
async fn last_invite_use_is_won_once() {
    with_scratch("last_invite_use_is_won_once", |url| async move {
        let s = Arc::new(PostgresStore::open(&url, &PostgresOptions::default()).await.unwrap());
        guild_with_channel(&*s).await;
        let inv = store::InviteRecord {
            code: "once".into(),
            guild_id: GuildId(100),
            channel_id: ChannelId(101),
            inviter_id: None,
            max_age: 0,
            max_uses: 3,
            uses: 0,
            created_at: 0,
        };
        s.create_invite(&inv).await.unwrap();
        let tries: Vec<_> = (0..24)
            .map(|_| {
                tokio::spawn({
                    let s = s.clone();
                    async move { s.use_invite("once").await.unwrap() }
                })
            })
            .collect();
        let mut won = 0;
        for t in tries {
            won += usize::from(t.await.unwrap());
        }
        assert_eq!(won, 3, "exactly max_uses uses succeed");
        assert_eq!(s.get_invite("once").await.unwrap().unwrap().uses, 3);
        s.close().await;
    })
    .await;
}
