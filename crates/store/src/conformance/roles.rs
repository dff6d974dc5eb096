//! Conformance of roles, bans and a ban's purge (issue #14): what the
//! guild actor commits for them and what their routes read back.

use protocol::{ChannelId, GuildId, MessageId, RoleId, UserId};

use super::load_one;
use crate::*;

const G: u64 = 7_000;
const CHAN: u64 = 7_001;
const OTHER_GUILD: u64 = 7_100;

fn role(id: u64, position: i32) -> RoleRecord {
    RoleRecord {
        id: RoleId(id),
        guild_id: GuildId(G),
        name: format!("r{id}"),
        color: 0x00ff00,
        hoist: false,
        position,
        permissions: 1 << 28,
        mentionable: false,
        bot_id: None,
    }
}

fn member(user: u64, roles: &[u64]) -> MemberRecord {
    MemberRecord { roles: roles.iter().map(|&r| RoleId(r)).collect(), ..MemberRecord::joined(GuildId(G), UserId(user), 1) }
}

async fn apply(s: &dyn Store, changes: &[Change]) -> Vec<u64> {
    s.apply_changes(0, ActorKey::from(GuildId(G)), changes).await.unwrap().expect("not fenced")
}

/// Runs the checks of this slice on a store that `run_all` has filled so far.
pub(super) async fn roles_bans(s: &dyn Store) {
    for u in 7_001..=7_012u64 {
        let user =
            UserRecord { id: UserId(u), username: format!("rb{u}"), global_name: None, avatar: None, bot: false, flags: 0, created_at: 1 };
        s.create_user(&user, None).await.unwrap();
    }
    let guild = |id: u64| GuildRecord {
        id: GuildId(id),
        name: "roles".into(),
        icon: None,
        description: None,
        owner_id: UserId(7_001),
        system_channel_id: None,
        created_at: 1,
    };
    let channel = |id: u64, guild: u64| ChannelRecord {
        id: ChannelId(id),
        guild_id: Some(GuildId(guild)),
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
    let (a, b, big) = (7_010u64, 7_011u64, (1u64 << 62) + 7);
    s.create_guild(&NewGuild {
        guild: guild(G),
        roles: vec![role(G, 0), role(a, 1), role(b, 2), role(big, 3)],
        channels: vec![channel(CHAN, G)],
        members: vec![member(7_001, &[]), member(7_002, &[a, b, big]), member(7_003, &[b]), member(7_004, &[a])],
    })
    .await
    .unwrap();
    roles(s, a, b, big).await;
    bans(s).await;
    s.create_guild(&NewGuild { guild: guild(OTHER_GUILD), roles: vec![], channels: vec![channel(7_101, OTHER_GUILD)], members: vec![] })
        .await
        .unwrap();
    purge(s).await;
}

/// Create, update and delete; a deleted role leaves every member's roles,
/// keeping the order of the others, and only its own guild's.
async fn roles(s: &dyn Store, a: u64, b: u64, big: u64) {
    let mut c = role(7_012, 1);
    c.hoist = true;
    assert_eq!(apply(s, &[Change::CreateRole(c.clone())]).await, vec![1]);
    c.name = "renamed \"quoted\"".into();
    c.position = 4;
    c.permissions = (1 << 40) | 8;
    assert_eq!(apply(s, &[Change::UpdateRole(c.clone())]).await, vec![1]);
    let stored = s.roles_of_guild(GuildId(G)).await.unwrap();
    assert_eq!(stored.last(), Some(&c), "updated role round-trips and sorts by position");
    assert_eq!(apply(s, &[Change::UpdateRole(role(999_999, 1))]).await, vec![0], "unknown role: no row");

    assert_eq!(apply(s, &[Change::DeleteRole { guild: GuildId(G), role: RoleId(b) }]).await, vec![1]);
    assert_eq!(apply(s, &[Change::DeleteRole { guild: GuildId(G), role: RoleId(b) }]).await, vec![0], "already gone");
    assert_eq!(apply(s, &[Change::DeleteRole { guild: GuildId(OTHER_GUILD), role: RoleId(a) }]).await, vec![0], "another guild's id");
    let roles_of = |snap: &GuildSnapshot, u: u64| snap.members.iter().find(|(m, _)| m.user_id == UserId(u)).map(|(m, _)| m.roles.clone());
    let snap = load_one(s, G).await.unwrap();
    assert!(!snap.roles.iter().any(|r| r.id == RoleId(b)));
    assert_eq!(roles_of(&snap, 7_002), Some(vec![RoleId(a), RoleId(big)]), "order of the others kept");
    assert_eq!(roles_of(&snap, 7_003), Some(vec![]));
    assert_eq!(roles_of(&snap, 7_004), Some(vec![RoleId(a)]), "members without it untouched");
    assert_eq!(s.get_member(GuildId(G), UserId(7_002)).await.unwrap().unwrap().roles, vec![RoleId(a), RoleId(big)]);
    // Ids past 2^53 match exactly.
    assert_eq!(apply(s, &[Change::DeleteRole { guild: GuildId(G), role: RoleId(big) }]).await, vec![1]);
    assert_eq!(s.get_member(GuildId(G), UserId(7_002)).await.unwrap().unwrap().roles, vec![RoleId(a)]);
}

/// Add (idempotent), read, page in ascending user id both ways, remove;
/// the actor's load carries the banned ids.
async fn bans(s: &dyn Store) {
    let ban = |u: u64, reason: Option<&str>| BanRecord {
        guild_id: GuildId(G),
        user_id: UserId(u),
        reason: reason.map(Into::into),
        created_at: 5,
    };
    assert_eq!(apply(s, &[Change::AddBan(ban(7_005, Some("spam \u{1F980}")))]).await, vec![1]);
    assert_eq!(apply(s, &[Change::AddBan(ban(7_005, None))]).await, vec![0], "already banned: nothing changes");
    assert_eq!(s.get_ban(GuildId(G), UserId(7_005)).await.unwrap(), Some(ban(7_005, Some("spam \u{1F980}"))));
    assert!(s.get_ban(GuildId(G), UserId(7_006)).await.unwrap().is_none());
    // Users need not exist (a ban by id), and bans follow no member rows.
    let changes: Vec<Change> = [9_003u64, 9_001, 9_002, 9_004].iter().map(|&u| Change::AddBan(ban(u, None))).collect();
    assert_eq!(apply(s, &changes).await, vec![1, 1, 1, 1]);
    let ids = |v: Vec<BanRecord>| v.into_iter().map(|b| b.user_id.0).collect::<Vec<_>>();
    assert_eq!(ids(s.bans_of_guild(GuildId(G), None, UserId(0), 1000).await.unwrap()), vec![7_005, 9_001, 9_002, 9_003, 9_004]);
    assert_eq!(ids(s.bans_of_guild(GuildId(G), None, UserId(9_001), 2).await.unwrap()), vec![9_002, 9_003]);
    assert_eq!(ids(s.bans_of_guild(GuildId(G), Some(UserId(9_003)), UserId(0), 2).await.unwrap()), vec![9_001, 9_002]);
    assert!(s.bans_of_guild(GuildId(OTHER_GUILD), None, UserId(0), 10).await.unwrap().is_empty());
    assert_eq!(load_one(s, G).await.unwrap().bans, vec![UserId(7_005), UserId(9_001), UserId(9_002), UserId(9_003), UserId(9_004)]);
    // A banned user's join writes nothing; once unbanned it does.
    let join = |u: u64| Change::AddMemberUnlessBanned(member(u, &[]));
    assert_eq!(apply(s, &[join(7_005), join(7_006), join(7_006)]).await, vec![0, 1, 0], "banned; joined; already a member");
    assert!(s.get_member(GuildId(G), UserId(7_005)).await.unwrap().is_none());
    assert_eq!(apply(s, &[Change::RemoveBan { guild: GuildId(G), user: UserId(7_005) }, join(7_005)]).await, vec![1, 1]);
    assert_eq!(apply(s, &[Change::AddBan(ban(7_005, None))]).await, vec![1]);
    assert!(s.remove_member(GuildId(G), UserId(7_005)).await.unwrap());
    let remove = |u: u64| Change::RemoveBan { guild: GuildId(G), user: UserId(u) };
    assert_eq!(apply(s, &[remove(9_002), remove(9_002)]).await, vec![1, 0]);
    assert!(s.get_ban(GuildId(G), UserId(9_002)).await.unwrap().is_none());
    assert_eq!(load_one(s, G).await.unwrap().bans.len(), 4);
}

/// A ban's purge: the author's messages of the guild from a time on,
/// newest first; deleting by id touches only that author's, in that guild.
async fn purge(s: &dyn Store) {
    let msg = |id: u64, channel: u64, guild: u64, author: u64| MessageRecord {
        id: MessageId(id),
        channel_id: ChannelId(channel),
        guild_id: Some(GuildId(guild)),
        author_id: UserId(author),
        content: "x".into(),
        edited_at: None,
        kind: 0,
        flags: 0,
        tts: false,
        mention_everyone: false,
        mentions: vec![],
        reference: None,
        extra: serde_json::json!({}),
    };
    let mut second = s.get_channel(ChannelId(CHAN)).await.unwrap().unwrap();
    second.id = ChannelId(7_002);
    s.create_channel(&second).await.unwrap();
    for m in
        [msg(70_001, CHAN, G, 7_004), msg(70_002, CHAN, G, 7_003), msg(70_003, 7_002, G, 7_004), msg(70_004, 7_101, OTHER_GUILD, 7_004)]
    {
        s.create_message(&m).await.unwrap();
    }
    let found = s.messages_of_author(GuildId(G), UserId(7_004), MessageId(70_001), 10).await.unwrap();
    assert_eq!(found, vec![(ChannelId(7_002), MessageId(70_003)), (ChannelId(CHAN), MessageId(70_001))], "newest first, this guild only");
    assert_eq!(s.messages_of_author(GuildId(G), UserId(7_004), MessageId(70_002), 10).await.unwrap().len(), 1, "from `since` on");
    assert_eq!(s.messages_of_author(GuildId(G), UserId(7_004), MessageId(0), 1).await.unwrap().len(), 1, "limit");
    // Another author's and another guild's ids in the list are left alone.
    let ids = vec![MessageId(70_001), MessageId(70_002), MessageId(70_003), MessageId(70_004)];
    assert_eq!(apply(s, &[Change::PurgeMessages { guild: GuildId(G), author: UserId(7_004), ids }]).await, vec![2]);
    assert!(s.get_message(ChannelId(CHAN), MessageId(70_001)).await.unwrap().is_none());
    assert!(s.get_message(ChannelId(CHAN), MessageId(70_002)).await.unwrap().is_some());
    assert!(s.get_message(ChannelId(7_101), MessageId(70_004)).await.unwrap().is_some());
}
