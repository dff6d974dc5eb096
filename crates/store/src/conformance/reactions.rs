//! Conformance of reactions and bulk deletes: what the changes write and
//! refuse (their limits hold inside the one statement), and what the reads
//! return. Runs after `fenced_changes` on guild 100, channel 101, users 1-3;
//! custom emojis and pins (`emojis`, `pins`) run between `run` and
//! `bulk_delete`, and the four leave nothing of their own behind.

use protocol::id::EmojiId;
use protocol::{ChannelId, GuildId, MessageId, UserId};

use super::message;
use crate::*;

pub(super) const G: GuildId = GuildId(100);
pub(super) const C: ChannelId = ChannelId(101);

fn react(message: u64, emoji: ReactionEmoji, user: u64, at: u64) -> Change {
    Change::AddReaction {
        reaction: ReactionRecord { message_id: MessageId(message), emoji, user_id: UserId(user), created_at: at },
        max_emojis: 3,
    }
}

fn uni(s: &str) -> ReactionEmoji {
    ReactionEmoji::Unicode(s.into())
}

pub(super) async fn rows(s: &dyn Store, changes: Vec<Change>) -> Vec<u64> {
    s.apply_changes(0, ActorKey::from(G), &changes).await.unwrap().expect("unfenced")
}

pub(super) async fn run(s: &dyn Store) {
    for id in [5_001, 5_002, 5_003] {
        s.create_message(&message(id, 101, 1, "react to me")).await.unwrap();
    }
    reactions(s).await;
}

async fn reactions(s: &dyn Store) {
    let custom = ReactionEmoji::Custom { id: EmojiId(77), name: "party".into(), animated: true };
    // The same reaction twice counts once; a message that does not exist takes none.
    let got = rows(
        s,
        vec![
            react(5_001, uni("👍"), 1, 10),
            react(5_001, uni("👍"), 1, 11),
            react(5_001, custom.clone(), 2, 12),
            react(5_001, uni("👍"), 3, 13),
            react(5_001, uni("1\u{fe0f}\u{20e3}"), 2, 14),
            react(9_999, uni("👍"), 1, 15),
        ],
    )
    .await;
    assert_eq!(got, vec![1, 0, 1, 1, 1, 0]);
    // max_emojis (3) distinct emojis: a fourth is refused, another user of an existing one is not.
    assert_eq!(rows(s, vec![react(5_001, uni("🔥"), 1, 20), react(5_001, custom.clone(), 1, 21)]).await, vec![0, 1]);
    let groups = s.reactions_of(&[MessageId(5_001), MessageId(5_002)], UserId(2)).await.unwrap();
    let seen: Vec<(u64, String, u32, bool)> = groups.iter().map(|g| (g.message_id.0, g.emoji.key(), g.count, g.me)).collect();
    assert_eq!(
        seen,
        vec![(5_001, "👍".into(), 2, false), (5_001, "77".into(), 2, true), (5_001, "1\u{fe0f}\u{20e3}".into(), 1, true)],
        "grouped by emoji in order of first use, `me` for the viewer"
    );
    assert_eq!(groups[1].emoji, custom, "a custom emoji keeps its name and form");
    let users = |after: u64, limit: u32| async move {
        s.reaction_users(MessageId(5_001), "👍", UserId(after), limit).await.unwrap().into_iter().map(|u| u.id.0).collect::<Vec<_>>()
    };
    assert_eq!(users(0, 10).await, vec![1, 3]);
    assert_eq!(users(1, 10).await, vec![3], "after a user id");
    assert_eq!(users(0, 1).await, vec![1], "limit");
    // One user's, one emoji's, then all.
    let one = |emoji: &str, user: Option<u64>| Change::RemoveReactions {
        message: MessageId(5_001),
        emoji: Some(emoji.into()),
        user: user.map(UserId),
    };
    assert_eq!(rows(s, vec![one("👍", Some(3)), one("👍", Some(3)), one("77", None)]).await, vec![1, 0, 2]);
    assert_eq!(s.reactions_of(&[MessageId(5_001)], UserId(1)).await.unwrap().len(), 2);
    let all = Change::RemoveReactions { message: MessageId(5_001), emoji: None, user: None };
    assert_eq!(rows(s, vec![all]).await, vec![2]);
    assert!(s.reactions_of(&[MessageId(5_001)], UserId(1)).await.unwrap().is_empty());
    // Reactions go with their message.
    rows(s, vec![react(5_003, uni("👍"), 1, 30)]).await;
    s.delete_message(C, MessageId(5_003)).await.unwrap();
    assert!(s.reactions_of(&[MessageId(5_003)], UserId(1)).await.unwrap().is_empty());
    s.create_message(&message(5_003, 101, 1, "again")).await.unwrap();
    assert!(s.reactions_of(&[MessageId(5_003)], UserId(1)).await.unwrap().is_empty(), "a reused id starts clean");
}

pub(super) async fn bulk_delete(s: &dyn Store) {
    let ids = [5_002, 5_003, 9_999].map(MessageId);
    assert_eq!(s.messages_among(C, &ids).await.unwrap(), vec![MessageId(5_002), MessageId(5_003)]);
    assert!(s.messages_among(ChannelId(999), &ids).await.unwrap().is_empty(), "scoped to the channel");
    rows(s, vec![react(5_002, uni("👍"), 1, 40)]).await;
    let del = |channel: ChannelId| Change::DeleteMessages { channel, ids: ids.to_vec() };
    assert_eq!(
        rows(s, vec![del(ChannelId(999)), del(C), del(C), Change::DeleteMessages { channel: C, ids: vec![] }]).await,
        vec![0, 2, 0, 0]
    );
    assert!(s.messages_among(C, &ids).await.unwrap().is_empty());
    assert!(s.reactions_of(&[MessageId(5_002)], UserId(1)).await.unwrap().is_empty(), "reactions go with their messages");
}
