//! Conformance of threads (migration 0006): created with their first
//! members, loaded with their guild, joined and left once, archived and
//! listed, and gone with their channel. Uses the users `dms::run` made.

use protocol::{ChannelId, GuildId};

use super::dms::{A, B};
use super::{channel, load_one, message};
use crate::*;

pub(super) async fn threads(s: &dyn Store) {
    let g = GuildRecord {
        id: GuildId(70_200),
        name: "t".into(),
        icon: None,
        description: None,
        owner_id: A,
        system_channel_id: None,
        created_at: 1,
    };
    s.create_guild(&NewGuild { guild: g, roles: vec![], channels: vec![channel(70_201, Some(70_200), 0, None)], members: vec![] })
        .await
        .unwrap();
    let t = channel(70_202, Some(70_200), PUBLIC_THREAD, Some(70_201));
    let meta = ThreadRecord {
        channel_id: t.id,
        guild_id: GuildId(70_200),
        owner_id: A,
        archived: false,
        archive_timestamp: 1_000,
        auto_archive_duration: 60,
        locked: false,
        invitable: true,
        created_at: 1_000,
    };
    let member = |u: UserId| ThreadMemberRecord { thread_id: t.id, user_id: u, join_timestamp: 5, flags: 0 };
    let create = Change::CreateThread { channel: t.clone(), thread: meta.clone(), members: vec![member(A)] };
    assert_eq!(s.apply_changes(0, ActorKey::from(GuildId(70_200)), &[create]).await.unwrap(), Some(vec![1]));
    s.create_message(&message(70_210, 70_202, A.0, "in thread")).await.unwrap();
    let snap = load_one(s, 70_200).await.unwrap();
    assert_eq!(snap.threads.len(), 1);
    assert_eq!((snap.threads[0].message_count, snap.threads[0].members.len()), (1, 1));
    assert_eq!(snap.threads[0].thread, meta);
    assert!(snap.channels.iter().any(|c| c.id == t.id), "a thread is a channel row too");

    let rows = s
        .apply_changes(0, ActorKey::from(GuildId(70_200)), &[Change::AddThreadMember(member(B)), Change::AddThreadMember(member(B))])
        .await
        .unwrap();
    assert_eq!(rows, Some(vec![1, 0]), "a second join touches nothing");
    assert_eq!(s.thread_members(t.id).await.unwrap().iter().map(|m| m.user_id).collect::<Vec<_>>(), vec![A, B]);
    let rows = s.apply_changes(0, ActorKey::from(GuildId(70_200)), &[Change::RemoveThreadMember { thread: t.id, user: B }]).await.unwrap();
    assert_eq!(rows, Some(vec![1]));

    let mut archived = meta.clone();
    archived.archived = true;
    archived.archive_timestamp = 2_000;
    archived.locked = true;
    let mut renamed = t.clone();
    renamed.name = "renamed".into();
    let rows = s
        .apply_changes(0, ActorKey::from(GuildId(70_200)), &[Change::UpdateThread { channel: renamed, thread: archived.clone() }])
        .await
        .unwrap();
    assert_eq!(rows, Some(vec![1]));
    let (c, got) = s.get_thread(t.id).await.unwrap().unwrap();
    assert_eq!((c.name.as_str(), got), ("renamed", archived.clone()));
    let list = s.archived_threads(ChannelId(70_201), false, u64::MAX, 10).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].message_count, list[0].members.len()), (1, 1));
    assert!(s.archived_threads(ChannelId(70_201), true, u64::MAX, 10).await.unwrap().is_empty(), "no private ones");
    assert!(s.archived_threads(ChannelId(70_201), false, 2_000, 10).await.unwrap().is_empty(), "archived before 2000: none");

    assert_eq!(s.apply_changes(0, ActorKey::from(GuildId(70_200)), &[Change::DeleteChannel(t.id)]).await.unwrap(), Some(vec![1]));
    assert!(s.get_thread(t.id).await.unwrap().is_none());
    assert!(s.thread_members(t.id).await.unwrap().is_empty());
    assert!(load_one(s, 70_200).await.unwrap().threads.is_empty());
}
