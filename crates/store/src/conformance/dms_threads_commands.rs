//! Conformance of DMs, threads and application commands (migration 0006).

use protocol::{ApplicationId, ChannelId, GuildId, MessageId, UserId};

use super::{load_one, message, user};
use crate::*;

const A: UserId = UserId(70_001);
const B: UserId = UserId(70_002);
const C: UserId = UserId(70_003);

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

pub(super) async fn run(s: &dyn Store) {
    for (u, n) in [(A, "dm_a"), (B, "dm_b"), (C, "dm_c")] {
        s.create_user(&user(u.0, n, false), None).await.unwrap();
    }
    dms(s).await;
    threads(s).await;
    commands(s).await;
}

async fn dms(s: &dyn Store) {
    let first = channel(70_100, None, 1, None);
    assert_eq!(s.open_dm(&first, A, B).await.unwrap(), first.id);
    // The same pair, either way round: the same DM; nothing new is made.
    assert_eq!(s.open_dm(&channel(70_101, None, 1, None), B, A).await.unwrap(), first.id);
    assert!(s.get_dm(ChannelId(70_101)).await.unwrap().is_none());
    let dm = s.get_dm(first.id).await.unwrap().expect("the DM");
    assert_eq!(dm.recipients.iter().map(|u| u.id).collect::<Vec<_>>(), vec![A, B]);
    assert_eq!(dm.channel.kind, 1);
    assert!(s.get_dm(ChannelId(1)).await.unwrap().is_none(), "not a DM");
    assert_eq!(s.open_dm(&channel(70_102, None, 1, None), A, C).await.unwrap(), ChannelId(70_102));
    let mut found = s.dms_of_users(&[A, B, UserId(70_009)]).await.unwrap();
    found.sort_by_key(|(u, _)| *u);
    assert_eq!(found.len(), 2, "users without DMs are left out");
    assert_eq!(found[0].1.iter().map(|d| d.channel.id.0).collect::<Vec<_>>(), vec![70_100, 70_102]);
    assert_eq!(found[1].1.len(), 1);
    assert_eq!(found[1].1[0].recipients.len(), 2);

    // A DM's messages are changes fenced by its actor's key.
    let key = GuildId(70_100 | 1 << 63);
    let epoch = s.claim_guild(key, 1).await.unwrap();
    let mut m = message(70_110, 70_100, A.0, "hi");
    m.guild_id = None;
    assert_eq!(s.apply_changes(epoch, key, &[Change::CreateDmMessage(m.clone())]).await.unwrap(), Some(vec![1]));
    let mut stale = message(70_111, 70_100, A.0, "late");
    stale.guild_id = None;
    s.claim_guild(key, 2).await.unwrap();
    assert_eq!(s.apply_changes(epoch, key, &[Change::CreateDmMessage(stale)]).await.unwrap(), None, "a stale owner writes nothing");
    assert_eq!(s.get_dm(first.id).await.unwrap().unwrap().channel.last_message_id, Some(MessageId(70_110)));
    let list = s.list_messages(first.id, MessageWindow::Latest, 10).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].guild_id, None);
}

async fn threads(s: &dyn Store) {
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
    assert_eq!(s.apply_changes(0, GuildId(70_200), &[create]).await.unwrap(), Some(vec![1]));
    s.create_message(&message(70_210, 70_202, A.0, "in thread")).await.unwrap();
    let snap = load_one(s, 70_200).await.unwrap();
    assert_eq!(snap.threads.len(), 1);
    assert_eq!((snap.threads[0].message_count, snap.threads[0].members.len()), (1, 1));
    assert_eq!(snap.threads[0].thread, meta);
    assert!(snap.channels.iter().any(|c| c.id == t.id), "a thread is a channel row too");

    let rows =
        s.apply_changes(0, GuildId(70_200), &[Change::AddThreadMember(member(B)), Change::AddThreadMember(member(B))]).await.unwrap();
    assert_eq!(rows, Some(vec![1, 0]), "a second join touches nothing");
    assert_eq!(s.thread_members(t.id).await.unwrap().iter().map(|m| m.user_id).collect::<Vec<_>>(), vec![A, B]);
    let rows = s.apply_changes(0, GuildId(70_200), &[Change::RemoveThreadMember { thread: t.id, user: B }]).await.unwrap();
    assert_eq!(rows, Some(vec![1]));

    let mut archived = meta.clone();
    archived.archived = true;
    archived.archive_timestamp = 2_000;
    archived.locked = true;
    let mut renamed = t.clone();
    renamed.name = "renamed".into();
    let rows = s.apply_changes(0, GuildId(70_200), &[Change::UpdateThread { channel: renamed, thread: archived.clone() }]).await.unwrap();
    assert_eq!(rows, Some(vec![1]));
    let (c, got) = s.get_thread(t.id).await.unwrap().unwrap();
    assert_eq!((c.name.as_str(), got), ("renamed", archived.clone()));
    let list = s.archived_threads(ChannelId(70_201), false, u64::MAX, 10).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!((list[0].message_count, list[0].members.len()), (1, 1));
    assert!(s.archived_threads(ChannelId(70_201), true, u64::MAX, 10).await.unwrap().is_empty(), "no private ones");
    assert!(s.archived_threads(ChannelId(70_201), false, 2_000, 10).await.unwrap().is_empty(), "archived before 2000: none");

    assert_eq!(s.apply_changes(0, GuildId(70_200), &[Change::DeleteChannel(t.id)]).await.unwrap(), Some(vec![1]));
    assert!(s.get_thread(t.id).await.unwrap().is_none());
    assert!(s.thread_members(t.id).await.unwrap().is_empty());
    assert!(load_one(s, 70_200).await.unwrap().threads.is_empty());
}

async fn commands(s: &dyn Store) {
    let app = ApplicationId(70_300);
    let cmd = |id: u64, guild: Option<u64>, name: &str, desc: &str| CommandRecord {
        id,
        application_id: app,
        guild_id: guild.map(GuildId),
        kind: 1,
        name: name.into(),
        version: id,
        body: serde_json::json!({"description": desc}),
    };
    let a = s.upsert_command(&cmd(70_301, None, "a", "first")).await.unwrap();
    assert_eq!(a.id, 70_301);
    // The same name again overwrites, keeping the id.
    let again = s.upsert_command(&cmd(70_302, None, "a", "second")).await.unwrap();
    assert_eq!(again.id, 70_301);
    assert_eq!(s.get_command(app, None, 70_301).await.unwrap().unwrap().body["description"], "second");
    s.upsert_command(&cmd(70_303, None, "b", "b")).await.unwrap();
    s.upsert_command(&cmd(70_304, Some(70_200), "a", "guild")).await.unwrap();
    assert_eq!(s.list_commands(app, None).await.unwrap().len(), 2, "global and guild scopes are apart");
    assert_eq!(s.list_commands(app, Some(GuildId(70_200))).await.unwrap().len(), 1);
    assert!(s.get_command(app, None, 70_304).await.unwrap().is_none());
    assert!(matches!(s.update_command(&cmd(70_303, None, "a", "clash")).await, Err(StoreError::Conflict)));
    assert!(!s.update_command(&cmd(70_399, None, "zz", "none")).await.unwrap());
    assert!(s.update_command(&cmd(70_303, None, "bb", "renamed")).await.unwrap());

    let result = s.overwrite_commands(app, None, &[cmd(70_310, None, "a", "second"), cmd(70_311, None, "c", "new")]).await.unwrap();
    assert_eq!(result.iter().map(|c| c.id).collect::<Vec<_>>(), vec![70_301, 70_311], "a keeps its id");
    assert_eq!(result[0].version, 70_302, "unchanged since the second upsert: same version");
    let listed: Vec<String> = s.list_commands(app, None).await.unwrap().into_iter().map(|c| c.name).collect();
    assert_eq!(listed, vec!["a", "c"]);
    assert_eq!(s.list_commands(app, Some(GuildId(70_200))).await.unwrap().len(), 1, "the guild's stay");
    assert!(s.delete_command(app, None, 70_311).await.unwrap());
    assert!(!s.delete_command(app, None, 70_311).await.unwrap());
    assert!(s.overwrite_commands(app, None, &[]).await.unwrap().is_empty());
    assert!(s.list_commands(app, None).await.unwrap().is_empty());
}
