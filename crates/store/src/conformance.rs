//! The conformance suite: behaviour every [`Store`] backend must show.
//! Backends call [`run_all`] from their integration tests on an empty store.

use protocol::{ChannelId, GuildId, MessageId, RoleId, UserId};

use crate::*;

mod accounts;
mod attachments;
mod audit;
mod commands;
mod dms;
mod emojis;
mod pins;
mod reactions;
mod read_states;
mod roles;
mod search;
pub use search::{one_commit_each, rebuild_sample, rebuilt_index_finds};
mod threads;

fn user(id: u64, name: &str, bot: bool) -> UserRecord {
    UserRecord { id: UserId(id), username: name.into(), global_name: None, avatar: None, bot, flags: 0, created_at: 1 }
}

fn channel(id: u64, guild: Option<u64>, kind: u8, parent: Option<u64>) -> ChannelRecord {
    ChannelRecord {
        id: ChannelId(id),
        guild_id: guild.map(GuildId),
        kind,
        name: format!("c{id}"),
        position: 0,
        topic: None,
        nsfw: false,
        parent_id: parent.map(ChannelId),
        rate_limit_per_user: 0,
        overwrites: vec![],
        last_message_id: None,
    }
}

/// A message of guild 100 (also the other crates' tests' fixture).
pub fn message(id: u64, channel: u64, author: u64, content: &str) -> MessageRecord {
    MessageRecord {
        id: MessageId(id),
        channel_id: ChannelId(channel),
        guild_id: Some(GuildId(100)),
        author_id: UserId(author),
        content: content.into(),
        edited_at: None,
        kind: 0,
        flags: 0,
        tts: false,
        mention_everyone: false,
        mentions: vec![UserId(2)],
        reference: Some(serde_json::json!({"message_id": "5"})),
        extra: serde_json::json!({"embeds": []}),
    }
}

/// One guild through `load_guilds`.
async fn load_one(s: &dyn Store, id: u64) -> Option<GuildSnapshot> {
    let mut found = s.load_guilds(&[GuildId(id)]).await.unwrap();
    assert!(found.len() <= 1, "one id, at most one guild");
    found.pop()
}

/// Runs every check; panics with a message naming the failed behaviour.
pub async fn run_all(s: &dyn Store) {
    users_and_tokens(s).await;
    guilds_channels_members(s).await;
    messages(s).await;
    group_commit_and_fencing(s).await;
    fenced_changes(s).await;
    // Roles, overwrites, bans:
    roles::roles_bans(s).await;

    // Reactions, emojis, pins, bulk delete, in this order (pins and bulk
    // deletes use the messages `reactions::run` makes):
    reactions::run(s).await;
    emojis::emojis(s).await;
    pins::pins(s).await;
    reactions::bulk_delete(s).await;

    // Attachments, webhooks:
    attachments::attachments_and_webhooks(s).await;

    // DMs, threads, application commands (threads use the users `dms::run` makes):
    dms::run(s).await;
    threads::threads(s).await;
    commands::commands(s).await;
    audit::audit_log(s).await;
    search::search(s).await;
    read_states::read_states(s).await;
    invites(s).await;
    // Tokens, passwords, OAuth2, managed roles, session starts:
    accounts::run(s).await;
    bulk(s).await;
    batched_guild_loads(s).await;
    large_guild_loads(s).await;
}

async fn bulk(s: &dyn Store) {
    let users: Vec<UserRecord> = (0..5000u64).map(|n| user(10_000 + n, &format!("bulk{n}"), false)).collect();
    let tokens = users.iter().map(|u| ([(u.id.0 % 251) as u8; 32], u.id)).take(2).collect();
    let g = GuildRecord {
        id: GuildId(9_000),
        name: "bulk".into(),
        icon: None,
        description: None,
        owner_id: UserId(10_000),
        system_channel_id: None,
        created_at: 1,
    };
    let members = users.iter().map(|u| MemberRecord::joined(GuildId(9_000), u.id, 1)).collect();
    s.bulk_load(&BulkLoad {
        users: users.clone(),
        tokens,
        guilds: vec![NewGuild { guild: g, roles: vec![], channels: vec![], members }],
        messages: vec![],
    })
    .await
    .unwrap();
    assert_eq!(load_one(s, 9_000).await.unwrap().members.len(), 5000);
    assert_eq!(s.user_by_token(&[(10_000u64 % 251) as u8; 32]).await.unwrap().unwrap().id, UserId(10_000));
    assert_eq!(s.guilds_of_user(UserId(14_999)).await.unwrap(), vec![GuildId(9_000)]);
    // A batch: two known tokens (in any order) and an unknown one.
    let (a, b) = ([(10_000u64 % 251) as u8; 32], [(10_001u64 % 251) as u8; 32]);
    let mut found = s.identify_lookup(&[b, [250u8; 32], a]).await.unwrap();
    found.sort_by_key(|(_, w)| w.user.id);
    let got: Vec<_> = found.into_iter().map(|(h, w)| (h, w.user.id, w.guilds, w.application)).collect();
    assert_eq!(got, vec![(a, UserId(10_000), vec![GuildId(9_000)], None), (b, UserId(10_001), vec![GuildId(9_000)], None)]);
}

/// A guild read range by range (more members than one statement of the
/// load reads; exactly two ranges' worth, so the last range is empty)
/// loads whole and in order, beside a small guild in the same batch.
async fn large_guild_loads(s: &dyn Store) {
    const N: u64 = 2 * crate::sql::MEMBER_RANGE as u64;
    let g = GuildId(9_001);
    let users: Vec<UserRecord> = (0..N)
        .map(|n| UserRecord {
            global_name: (n % 7 == 0).then(|| format!("Größe {n}")),
            ..user(100_000 + n, &format!("big{n}"), n % 1000 == 1)
        })
        .collect();
    let members: Vec<MemberRecord> = users
        .iter()
        .enumerate()
        .map(|(n, u)| MemberRecord {
            nick: (n % 1000 == 3).then(|| format!("nick {n}")),
            roles: if n % 500 == 0 { vec![RoleId(90_011), RoleId(90_012)] } else { vec![] },
            communication_disabled_until: (n % 999 == 0).then_some(1_900_000_000_000 + n as u64),
            ..MemberRecord::joined(g, u.id, 1_000 + n as u64)
        })
        .collect();
    let guild = GuildRecord {
        id: g,
        name: "large".into(),
        icon: None,
        description: None,
        owner_id: users[0].id,
        system_channel_id: None,
        created_at: 1,
    };
    s.bulk_load(&BulkLoad {
        users: users.clone(),
        tokens: vec![],
        // Inserted last user first: the load orders them.
        guilds: vec![NewGuild { guild, roles: vec![], channels: vec![], members: members.iter().rev().cloned().collect() }],
        messages: vec![],
    })
    .await
    .unwrap();
    let want: Vec<(MemberRecord, UserRecord)> = members.into_iter().zip(users).collect();
    let mut got = s.load_guilds(&[GuildId(9_000), g]).await.unwrap();
    got.sort_by_key(|s| s.guild.id);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].members.len(), 5000, "the small guild of the batch loads whole");
    assert_eq!(got[1].members.len(), want.len(), "every member of the large guild loads");
    assert!(got[1].members == want, "the large guild's members load as stored, in user id order");
}

/// `load_guilds` returns, for each guild that exists, exactly what was
/// stored: text that needs escaping, ids past 2^53, roles and channels of
/// the right guild in position order, members ordered by user id.
async fn batched_guild_loads(s: &dyn Store) {
    const BIG: u64 = (1 << 62) + 12_345;
    let odd = UserRecord {
        id: UserId(20_002),
        username: "quo\"te\\slash\u{1F980}\ttab".into(),
        global_name: Some("Ünïcødé [1,2]".into()),
        avatar: Some("a_0123".into()),
        bot: true,
        flags: BIG,
        created_at: BIG,
    };
    let plain = user(20_001, "plain", false);
    let snapshot = |gid: u64, members: Vec<(MemberRecord, UserRecord)>| {
        let guild = GuildRecord {
            id: GuildId(gid),
            name: format!("batch {gid}"),
            icon: Some("i".into()),
            description: None,
            owner_id: UserId(20_001),
            system_channel_id: Some(ChannelId(gid * 10)),
            created_at: 7,
        };
        let role = |n: u64, position: i32| RoleRecord {
            id: RoleId(gid * 10 + n),
            guild_id: GuildId(gid),
            name: format!("r{n}"),
            color: 0xff00ff,
            hoist: n == 2,
            position,
            permissions: BIG,
            mentionable: true,
            bot_id: None,
        };
        let channel = |n: u64, position: i32| ChannelRecord {
            id: ChannelId(gid * 10 + n),
            guild_id: Some(GuildId(gid)),
            kind: 0,
            name: format!("c{n}"),
            position,
            topic: Some("it's \"quoted\"".into()),
            nsfw: false,
            parent_id: None,
            rate_limit_per_user: 5,
            overwrites: vec![],
            last_message_id: None,
        };
        GuildSnapshot {
            guild,
            roles: vec![role(2, 0), role(1, 3)],
            channels: vec![channel(1, 0), channel(2, 1)],
            members,
            emojis: vec![],
            bans: vec![],
            threads: Vec::new(),
        }
    };
    let member = |gid: u64, u: &UserRecord, nick: Option<&str>, roles: Vec<RoleId>| MemberRecord {
        guild_id: GuildId(gid),
        user_id: u.id,
        nick: nick.map(Into::into),
        roles,
        joined_at: 9,
        flags: 2,
        // A timeout on the member with a nickname: written and read back.
        communication_disabled_until: nick.map(|_| 1_900_000_000_123),
    };
    let a = snapshot(
        300,
        vec![
            (member(300, &plain, None, vec![]), plain.clone()),
            (member(300, &odd, Some("n\"ick\\"), vec![RoleId(3001), RoleId(BIG)]), odd.clone()),
        ],
    );
    let b = snapshot(301, vec![(member(301, &odd, None, vec![RoleId(3012)]), odd.clone())]);
    let empty = snapshot(302, vec![]);
    let new_guild = |g: &GuildSnapshot| NewGuild {
        guild: g.guild.clone(),
        // Inserted out of position order: loads sort them.
        roles: g.roles.iter().rev().cloned().collect(),
        channels: g.channels.iter().rev().cloned().collect(),
        members: g.members.iter().rev().map(|(m, _)| m.clone()).collect(),
    };
    s.bulk_load(&BulkLoad {
        users: vec![odd.clone(), plain.clone()],
        tokens: vec![],
        guilds: vec![new_guild(&a), new_guild(&b), new_guild(&empty)],
        messages: vec![],
    })
    .await
    .unwrap();
    let mut got = s.load_guilds(&[GuildId(301), GuildId(999_999), GuildId(302), GuildId(300)]).await.unwrap();
    got.sort_by_key(|g| g.guild.id);
    assert_eq!(got, vec![a.clone(), b, empty], "a batch returns every existing guild whole and skips a missing one");
    assert_eq!(load_one(s, 300).await, Some(a), "one guild loads the same alone");
    assert!(s.load_guilds(&[]).await.unwrap().is_empty());
    assert!(s.load_guilds(&[GuildId(999_999)]).await.unwrap().is_empty());
}

async fn users_and_tokens(s: &dyn Store) {
    s.create_user(&user(1, "alice", false), Some("hash-a")).await.unwrap();
    s.create_user(&user(2, "bob", false), Some("hash-b")).await.unwrap();
    s.create_user(&user(3, "robot", true), None).await.unwrap();
    // Bots may share usernames with humans; humans may not share.
    s.create_user(&user(4, "alice", true), None).await.unwrap();
    assert!(matches!(s.create_user(&user(5, "alice", false), Some("x")).await, Err(StoreError::Conflict)), "duplicate human username");
    assert_eq!(s.get_user(UserId(1)).await.unwrap().unwrap().username, "alice");
    assert!(s.get_user(UserId(999)).await.unwrap().is_none());
    let mut both = s.get_users(&[UserId(1), UserId(2), UserId(999)]).await.unwrap();
    both.sort_by_key(|u| u.id);
    assert_eq!(both.iter().map(|u| u.id.0).collect::<Vec<_>>(), vec![1, 2]);
    let (u, h) = s.user_by_username("alice").await.unwrap().expect("login lookup");
    assert_eq!((u.id, h.as_str()), (UserId(1), "hash-a"));
    assert!(s.user_by_username("robot").await.unwrap().is_none(), "bots cannot log in by password");
    let tok = [7u8; 32];
    s.add_token(&tok, UserId(3), 5).await.unwrap();
    assert_eq!(s.user_by_token(&tok).await.unwrap().unwrap().id, UserId(3));
    assert!(s.user_by_token(&[8u8; 32]).await.unwrap().is_none());
    let app = ApplicationRecord {
        id: protocol::ApplicationId(3),
        name: "robot".into(),
        owner_id: Some(UserId(1)),
        bot_user_id: UserId(3),
        flags: 0,
        verify_key: "k".into(),
        interactions_endpoint_url: None,
    };
    s.create_application(&app).await.unwrap();
    assert_eq!(s.application_of_bot(UserId(3)).await.unwrap(), Some(app));
    assert!(s.application_of_bot(UserId(1)).await.unwrap().is_none());
    let bot = s.identify_lookup(&[tok]).await.unwrap().pop().expect("identify lookup").1;
    assert_eq!((bot.user.username.as_str(), bot.guilds.len(), bot.application), ("robot", 0, Some((protocol::ApplicationId(3), 0))));
    assert!(s.identify_lookup(&[[8u8; 32]]).await.unwrap().is_empty());
}

async fn guilds_channels_members(s: &dyn Store) {
    let g = GuildRecord {
        id: GuildId(100),
        name: "g".into(),
        icon: None,
        description: None,
        owner_id: UserId(1),
        system_channel_id: Some(ChannelId(101)),
        created_at: 1,
    };
    let everyone = RoleRecord {
        id: RoleId(100),
        guild_id: GuildId(100),
        name: "@everyone".into(),
        color: 0,
        hoist: false,
        position: 0,
        permissions: 1024,
        mentionable: false,
        bot_id: None,
    };
    let chan = ChannelRecord {
        id: ChannelId(101),
        guild_id: Some(GuildId(100)),
        kind: 0,
        name: "general".into(),
        position: 0,
        topic: None,
        nsfw: false,
        parent_id: None,
        rate_limit_per_user: 0,
        overwrites: vec![OverwriteRecord { id: 100, kind: 0, allow: 0, deny: 2048 }],
        last_message_id: None,
    };
    let owner = MemberRecord::joined(GuildId(100), UserId(1), 1);
    s.create_guild(&NewGuild {
        guild: g.clone(),
        roles: vec![everyone.clone()],
        channels: vec![chan.clone()],
        members: vec![owner.clone()],
    })
    .await
    .unwrap();
    assert_eq!(s.get_guild(GuildId(100)).await.unwrap(), Some(g.clone()));
    assert_eq!(s.roles_of_guild(GuildId(100)).await.unwrap(), vec![everyone]);
    assert_eq!(s.channels_of_guild(GuildId(100)).await.unwrap(), vec![chan.clone()]);
    assert_eq!(s.guilds_of_user(UserId(1)).await.unwrap(), vec![GuildId(100)]);

    // Members: add is idempotent and reports whether it added.
    let bot = MemberRecord { nick: Some("r".into()), roles: vec![RoleId(100)], ..MemberRecord::joined(GuildId(100), UserId(3), 2) };
    assert!(s.add_member(&bot).await.unwrap());
    assert!(!s.add_member(&bot).await.unwrap(), "second add reports false");
    assert_eq!(s.get_member(GuildId(100), UserId(3)).await.unwrap(), Some(bot.clone()));
    let mut nicked = bot.clone();
    nicked.nick = None;
    assert!(s.update_member(&nicked).await.unwrap());
    assert_eq!(s.get_member(GuildId(100), UserId(3)).await.unwrap().unwrap().nick, None);
    let page = s.list_members(GuildId(100), UserId(0), 1).await.unwrap();
    assert_eq!(page.iter().map(|m| m.user_id).collect::<Vec<_>>(), vec![UserId(1)]);
    let page = s.list_members(GuildId(100), UserId(1), 10).await.unwrap();
    assert_eq!(page.iter().map(|m| m.user_id).collect::<Vec<_>>(), vec![UserId(3)]);
    let snap = load_one(s, 100).await.unwrap();
    assert_eq!(snap.members.len(), 2);
    assert_eq!(s.count_members(GuildId(100)).await.unwrap(), 2);
    assert_eq!(s.count_members(GuildId(999)).await.unwrap(), 0);
    assert_eq!(snap.members[1].1.username, "robot");
    assert!(load_one(s, 999).await.is_none());

    // Channels: create, update, delete.
    let mut c2 = chan.clone();
    c2.id = ChannelId(102);
    c2.name = "second".into();
    c2.position = 1;
    s.create_channel(&c2).await.unwrap();
    c2.topic = Some("t".into());
    s.update_channel(&c2).await.unwrap();
    assert_eq!(s.get_channel(ChannelId(102)).await.unwrap().unwrap().topic.as_deref(), Some("t"));
    assert!(s.delete_channel(ChannelId(102)).await.unwrap());
    assert!(!s.delete_channel(ChannelId(102)).await.unwrap());
    assert!(s.get_channel(ChannelId(102)).await.unwrap().is_none());

    let mut g2 = g.clone();
    g2.name = "renamed".into();
    s.update_guild(&g2).await.unwrap();
    assert_eq!(s.get_guild(GuildId(100)).await.unwrap().unwrap().name, "renamed");

    // A throwaway guild to delete: everything under it goes.
    let mut g3 = g.clone();
    g3.id = GuildId(200);
    let mut c3 = chan.clone();
    c3.id = ChannelId(201);
    c3.guild_id = Some(GuildId(200));
    let m3 = MemberRecord { guild_id: GuildId(200), ..owner.clone() };
    s.create_guild(&NewGuild { guild: g3, roles: vec![], channels: vec![c3], members: vec![m3] }).await.unwrap();
    assert!(s.delete_guild(GuildId(200)).await.unwrap());
    assert!(s.get_channel(ChannelId(201)).await.unwrap().is_none(), "channels deleted with guild");
    assert_eq!(s.guilds_of_user(UserId(1)).await.unwrap(), vec![GuildId(100)], "memberships deleted with guild");
    assert!(s.remove_member(GuildId(100), UserId(3)).await.unwrap());
    assert!(!s.remove_member(GuildId(100), UserId(3)).await.unwrap());
}

async fn messages(s: &dyn Store) {
    for id in 1..=10u64 {
        s.create_message(&message(id * 10, 101, 1, &format!("m{id}"))).await.unwrap();
    }
    assert_eq!(s.get_channel(ChannelId(101)).await.unwrap().unwrap().last_message_id, Some(MessageId(100)));
    let got = s.get_message(ChannelId(101), MessageId(10)).await.unwrap().unwrap();
    assert_eq!(got, message(10, 101, 1, "m1"), "round trip keeps every field");
    assert!(s.get_message(ChannelId(999), MessageId(10)).await.unwrap().is_none(), "message is scoped to its channel");
    let ids = |v: Vec<MessageRecord>| v.into_iter().map(|m| m.id.0).collect::<Vec<_>>();
    assert_eq!(ids(s.list_messages(ChannelId(101), MessageWindow::Latest, 3).await.unwrap()), vec![100, 90, 80]);
    assert_eq!(ids(s.list_messages(ChannelId(101), MessageWindow::Before(MessageId(40)), 50).await.unwrap()), vec![30, 20, 10]);
    assert_eq!(ids(s.list_messages(ChannelId(101), MessageWindow::After(MessageId(70)), 2).await.unwrap()), vec![90, 80]);
    assert_eq!(ids(s.list_messages(ChannelId(101), MessageWindow::Around(MessageId(50)), 5).await.unwrap()), vec![70, 60, 50, 40, 30]);
    let mut edited = got.clone();
    edited.content = "changed".into();
    edited.edited_at = Some(99);
    s.update_message(&edited).await.unwrap();
    assert_eq!(s.get_message(ChannelId(101), MessageId(10)).await.unwrap().unwrap(), edited);
    assert!(s.delete_message(ChannelId(101), MessageId(10)).await.unwrap());
    assert!(!s.delete_message(ChannelId(101), MessageId(10)).await.unwrap());
    assert!(!s.delete_message(ChannelId(999), MessageId(20)).await.unwrap(), "delete is scoped to the channel");
}

async fn group_commit_and_fencing(s: &dyn Store) {
    let g = GuildId(100);
    let m = |id: u64| MessageRecord { guild_id: Some(g), ..message(id, 101, 1, &format!("g{id}")) };
    assert_eq!(s.guild_owner(ActorKey::from(g)).await.unwrap(), None, "never claimed");
    // Unfenced (epoch 0) writes need no claim.
    assert_eq!(s.create_messages(&[(0, m(1_001)), (0, m(1_002))]).await.unwrap(), vec![true, true]);
    let e1 = s.claim_guild(ActorKey::from(g), 7).await.unwrap();
    assert_eq!(s.guild_owner(ActorKey::from(g)).await.unwrap(), Some((7, e1)));
    assert_eq!(s.create_messages(&[(e1, m(1_003))]).await.unwrap(), vec![true]);
    // Another node takes over: the old owner's writes are refused from now on,
    // in the same batch as the new owner's, which commit.
    let e2 = s.claim_guild(ActorKey::from(g), 8).await.unwrap();
    assert!(e2 > e1, "epochs only go up");
    assert_eq!(s.guild_owner(ActorKey::from(g)).await.unwrap(), Some((8, e2)));
    assert_eq!(s.create_messages(&[(e1, m(1_004)), (e2, m(1_005)), (0, m(1_006))]).await.unwrap(), vec![false, true, true]);
    assert!(s.get_message(ChannelId(101), MessageId(1_004)).await.unwrap().is_none(), "a fenced-off write is not stored");
    assert_eq!(s.get_message(ChannelId(101), MessageId(1_005)).await.unwrap().unwrap(), m(1_005), "round trip keeps every field");
    assert_eq!(s.get_channel(ChannelId(101)).await.unwrap().unwrap().last_message_id, Some(MessageId(1_006)));
    // A batch with a bad row (unknown channel) writes nothing at all.
    let bad = MessageRecord { channel_id: ChannelId(999_999), ..m(1_008) };
    assert!(s.create_messages(&[(e2, m(1_007)), (e2, bad)]).await.is_err());
    assert!(s.get_message(ChannelId(101), MessageId(1_007)).await.unwrap().is_none(), "a failed batch is all or nothing");
    assert!(s.create_messages(&[]).await.unwrap().is_empty());
    // Several at once: each goes up by one, a new one starts at 1.
    let mut many = s.claim_guilds(&[g.into(), GuildId(4_242).into()], 9).await.unwrap();
    many.sort();
    assert_eq!(many, vec![(g.into(), e2 + 1), (GuildId(4_242).into(), 1)]);
    assert_eq!(s.guild_owner(ActorKey::from(GuildId(4_242))).await.unwrap(), Some((9, 1)));
    assert_eq!(s.create_messages(&[(e2, m(1_009))]).await.unwrap(), vec![false], "the batch claim fenced the old epoch");
    recent_message_keys(s, e2 + 1).await;
    for id in 1_001..=1_006 {
        s.delete_message(ChannelId(101), MessageId(id)).await.unwrap();
    }
}

/// `recent_message_keys`: the keyed messages of the channels asked for,
/// with their channel, from `since` on, newest first, at most `limit`; a
/// key that only looks like one in the text is not one.
async fn recent_message_keys(s: &dyn Store, epoch: u64) {
    let g = GuildId(100);
    let keyed = |id: u64, author: u64, key: &str| MessageRecord {
        guild_id: Some(g),
        author_id: UserId(author),
        extra: serde_json::json!({"nonce": "x", crate::DEDUP_FIELD: key}),
        ..message(id, 101, 1, "k")
    };
    let lookalike = MessageRecord {
        guild_id: Some(g),
        extra: serde_json::json!({"embeds": [{"description": "\"dedup\":\"no\""}]}),
        ..message(1_013, 101, 1, "\"dedup\":")
    };
    let rows = [keyed(1_010, 1, "n1"), keyed(1_011, 2, "r5"), keyed(1_012, 1, "n2"), lookalike, message(1_014, 101, 1, "plain")];
    let batch: Vec<(u64, MessageRecord)> = rows.iter().cloned().map(|m| (epoch, m)).collect();
    assert_eq!(s.create_messages(&batch).await.unwrap(), vec![true; 5]);
    let keys = |since: u64, limit: u32, channels: Vec<ChannelId>| async move {
        s.recent_message_keys(&channels, MessageId(since), limit).await.unwrap()
    };
    let c = ChannelId(101);
    let all = vec![
        (c, MessageId(1_012), UserId(1), "n2".to_string()),
        (c, MessageId(1_011), UserId(2), "r5".into()),
        (c, MessageId(1_010), UserId(1), "n1".into()),
    ];
    assert_eq!(keys(1_000, 10, vec![ChannelId(101), ChannelId(999)]).await, all);
    assert_eq!(keys(1_011, 10, vec![ChannelId(101)]).await, all[..2], "from `since` on");
    assert_eq!(keys(1_000, 1, vec![ChannelId(101)]).await, all[..1], "at most `limit`");
    assert!(keys(1_000, 10, vec![ChannelId(999)]).await.is_empty(), "only the channels asked for");
    assert!(keys(1_000, 10, vec![]).await.is_empty());
    for id in 1_010..=1_014 {
        s.delete_message(ChannelId(101), MessageId(id)).await.unwrap();
    }
}

/// `apply_changes`: fenced by the claimed epoch like new messages, rows
/// touched per change, all or nothing.
async fn fenced_changes(s: &dyn Store) {
    let g = GuildId(100);
    let (_, epoch) = s.guild_owner(ActorKey::from(g)).await.unwrap().expect("claimed by group_commit_and_fencing");
    let mut c = s.get_channel(ChannelId(101)).await.unwrap().unwrap();
    c.topic = Some("fenced".into());
    assert_eq!(
        s.apply_changes(epoch - 1, ActorKey::from(g), &[Change::UpdateChannel(c.clone())]).await.unwrap(),
        None,
        "a stale epoch writes nothing"
    );
    assert_ne!(s.get_channel(ChannelId(101)).await.unwrap().unwrap().topic.as_deref(), Some("fenced"));
    let m = MemberRecord { nick: Some("n".into()), ..MemberRecord::joined(g, UserId(3), 5) };
    let rows = s
        .apply_changes(
            epoch,
            ActorKey::from(g),
            &[
                Change::UpdateChannel(c.clone()),
                Change::AddMember(m.clone()),
                Change::AddMember(m.clone()),
                Change::RemoveMember { guild: g, user: UserId(77) },
            ],
        )
        .await
        .unwrap();
    assert_eq!(rows, Some(vec![1, 1, 0, 0]), "rows touched by each change, in order");
    assert_eq!(s.get_channel(ChannelId(101)).await.unwrap().unwrap().topic.as_deref(), Some("fenced"));
    assert_eq!(s.get_member(g, UserId(3)).await.unwrap(), Some(m.clone()));
    // Nickname, roles and timeout change together; null ends the timeout.
    let timed = MemberRecord { nick: Some("quiet".into()), communication_disabled_until: Some(1_900_000_000_123), ..m.clone() };
    for want in [timed.clone(), MemberRecord { communication_disabled_until: None, ..timed }] {
        let rows = s.apply_changes(epoch, ActorKey::from(g), &[Change::UpdateMember(want.clone())]).await.unwrap();
        assert_eq!(rows, Some(vec![1]));
        assert_eq!(s.get_member(g, UserId(3)).await.unwrap(), Some(want));
    }
    // A failing change (a channel in no known guild) undoes the whole call.
    let orphan = ChannelRecord { id: ChannelId(4_343), guild_id: Some(GuildId(987_654)), ..c.clone() };
    let r = s
        .apply_changes(epoch, ActorKey::from(g), &[Change::RemoveMember { guild: g, user: UserId(3) }, Change::CreateChannel(orphan)])
        .await;
    assert!(r.is_err(), "a channel of an unknown guild is refused");
    assert!(s.get_member(g, UserId(3)).await.unwrap().is_some(), "nothing of a failed call is written");
    assert!(s.remove_member(g, UserId(3)).await.unwrap());
}

async fn invites(s: &dyn Store) {
    let inv = InviteRecord {
        code: "abc".into(),
        guild_id: GuildId(100),
        channel_id: ChannelId(101),
        inviter_id: Some(UserId(1)),
        max_age: 0,
        max_uses: 2,
        uses: 0,
        created_at: 1,
    };
    s.create_invite(&inv).await.unwrap();
    assert!(matches!(s.create_invite(&inv).await, Err(StoreError::Conflict)));
    assert_eq!(s.get_invite("abc").await.unwrap(), Some(inv.clone()));
    assert!(s.use_invite("abc").await.unwrap());
    assert!(s.use_invite("abc").await.unwrap());
    assert!(!s.use_invite("abc").await.unwrap(), "max_uses enforced");
    assert!(!s.use_invite("nope").await.unwrap());
    assert_eq!(s.get_invite("abc").await.unwrap().unwrap().uses, 2);
    let newer = InviteRecord { code: "def".into(), created_at: 5, uses: 0, ..inv.clone() };
    s.create_invite(&newer).await.unwrap();
    let listed = s.invites_of_guild(GuildId(100), 10).await.unwrap();
    assert_eq!(listed.iter().map(|i| i.code.as_str()).collect::<Vec<_>>(), ["def", "abc"], "newest first, used-up ones too");
    assert_eq!(s.invites_of_guild(GuildId(100), 1).await.unwrap().len(), 1);
    assert!(s.invites_of_guild(GuildId(999), 10).await.unwrap().is_empty());
    assert!(s.delete_invite("def").await.unwrap());
    assert!(s.delete_invite("abc").await.unwrap());
    assert!(!s.delete_invite("abc").await.unwrap());
    assert!(s.get_invite("abc").await.unwrap().is_none());
}
