//! Conformance of reactions, custom emojis, pins and bulk deletes: what the
//! changes write and refuse (their limits hold inside the one statement),
//! and what the reads return. Runs after `fenced_changes` on guild 100,
//! channel 101, users 1-3, and leaves nothing of its own behind.

use protocol::id::EmojiId;
use protocol::{ChannelId, GuildId, MessageId, RoleId, UserId};

use super::{load_one, message};
use crate::*;

const G: GuildId = GuildId(100);
const C: ChannelId = ChannelId(101);

fn react(message: u64, emoji: ReactionEmoji, user: u64, at: u64) -> Change {
    Change::AddReaction {
        reaction: ReactionRecord { message_id: MessageId(message), emoji, user_id: UserId(user), created_at: at },
        max_emojis: 3,
    }
}

fn uni(s: &str) -> ReactionEmoji {
    ReactionEmoji::Unicode(s.into())
}

async fn rows(s: &dyn Store, changes: Vec<Change>) -> Vec<u64> {
    s.apply_changes(0, G, &changes).await.unwrap().expect("unfenced")
}

pub(super) async fn run(s: &dyn Store) {
    for id in [5_001, 5_002, 5_003] {
        s.create_message(&message(id, 101, 1, "react to me")).await.unwrap();
    }
    reactions(s).await;
    emojis(s).await;
    pins(s).await;
    bulk_delete(s).await;
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

async fn emojis(s: &dyn Store) {
    let e = EmojiRecord {
        id: EmojiId(700),
        guild_id: G,
        name: "blob".into(),
        animated: false,
        roles: vec![RoleId(100)],
        creator_id: Some(UserId(1)),
    };
    let gif = EmojiRecord { id: EmojiId(701), name: "dance".into(), animated: true, roles: vec![], ..e.clone() };
    assert_eq!(
        rows(s, vec![Change::CreateEmoji(e.clone()), Change::CreateEmoji(gif.clone()), Change::CreateEmoji(e.clone())]).await,
        vec![1, 1, 0]
    );
    assert_eq!(s.emojis_of(G).await.unwrap(), vec![e.clone(), gif.clone()]);
    assert_eq!(load_one(s, 100).await.unwrap().emojis, vec![e.clone(), gif.clone()], "guild loads carry the emojis");
    let renamed = EmojiRecord { name: "blobby".into(), roles: vec![], ..e.clone() };
    let elsewhere = EmojiRecord { guild_id: GuildId(9_999), ..renamed.clone() };
    assert_eq!(rows(s, vec![Change::UpdateEmoji(renamed.clone()), Change::UpdateEmoji(elsewhere)]).await, vec![1, 0]);
    assert_eq!(s.get_emoji(EmojiId(700)).await.unwrap(), Some(renamed));
    let gone = |guild, id| Change::DeleteEmoji { guild, id: EmojiId(id) };
    assert_eq!(rows(s, vec![gone(GuildId(9_999), 700), gone(G, 700), gone(G, 700), gone(G, 701)]).await, vec![0, 1, 0, 1]);
    assert!(s.emojis_of(G).await.unwrap().is_empty());
    assert!(s.get_emoji(EmojiId(700)).await.unwrap().is_none());
}

async fn pins(s: &dyn Store) {
    let pin = |m: u64, at: u64| Change::PinMessage { channel: C, message: MessageId(m), at, max: 2 };
    let notice = MessageRecord { kind: 6, content: String::new(), ..message(5_010, 101, 2, "") };
    let got = rows(
        s,
        vec![
            pin(5_001, 100),
            pin(5_001, 101),
            Change::PinMessage { channel: ChannelId(999), message: MessageId(5_002), at: 102, max: 2 },
            pin(5_002, 103),
            pin(5_003, 104),
            Change::PinNotice { message: notice.clone(), pinned: MessageId(5_002), at: 103 },
            Change::PinNotice { message: MessageRecord { id: MessageId(5_011), ..notice.clone() }, pinned: MessageId(5_003), at: 104 },
        ],
    )
    .await;
    assert_eq!(got, vec![1, 0, 0, 1, 0, 1, 0], "once each, in its own channel, at most `max`; a notice only for a pin that took");
    assert_eq!(s.get_message(C, MessageId(5_010)).await.unwrap(), Some(notice));
    assert!(s.get_message(C, MessageId(5_011)).await.unwrap().is_none());
    assert_eq!(s.get_channel(C).await.unwrap().unwrap().last_message_id, Some(MessageId(5_010)), "the notice is the newest message");
    assert_eq!(s.count_pins(C).await.unwrap(), 2);
    let mut among = s.pins_among(&[MessageId(5_001), MessageId(5_002), MessageId(5_003)]).await.unwrap();
    among.sort();
    assert_eq!(among, vec![(MessageId(5_001), 100), (MessageId(5_002), 103)]);
    let listed = |before: Option<u64>, limit: u32| async move {
        s.pinned_messages(C, before, limit).await.unwrap().into_iter().map(|(m, at)| (m.id.0, at)).collect::<Vec<_>>()
    };
    assert_eq!(listed(None, 50).await, vec![(5_002, 103), (5_001, 100)], "latest pin first");
    assert_eq!(listed(Some(103), 50).await, vec![(5_001, 100)], "pinned before a time");
    assert_eq!(listed(None, 1).await, vec![(5_002, 103)]);
    let unpin = |m: u64| Change::UnpinMessage { channel: C, message: MessageId(m) };
    assert_eq!(
        rows(s, vec![unpin(5_002), unpin(5_002), Change::UnpinMessage { channel: ChannelId(999), message: MessageId(5_001) }]).await,
        vec![1, 0, 0]
    );
    // A pin goes with its message.
    s.delete_message(C, MessageId(5_001)).await.unwrap();
    assert_eq!(s.count_pins(C).await.unwrap(), 0);
    s.delete_message(C, MessageId(5_010)).await.unwrap();
}

async fn bulk_delete(s: &dyn Store) {
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
