//! Conformance of DMs (migration 0006): one per pair of users whichever
//! opens it, with its recipients, listed per user, and its messages fenced
//! by its actor's key.

use protocol::{ChannelId, MessageId, UserId};

use super::{channel, message, user};
use crate::*;

pub(super) const A: UserId = UserId(70_001);
pub(super) const B: UserId = UserId(70_002);
const C: UserId = UserId(70_003);

pub(super) async fn run(s: &dyn Store) {
    for (u, n) in [(A, "dm_a"), (B, "dm_b"), (C, "dm_c")] {
        s.create_user(&user(u.0, n, false), None).await.unwrap();
    }
    dms(s).await;
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
    let key = ActorKey::dm(ChannelId(70_100));
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
