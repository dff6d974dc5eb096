//! Conformance of custom emojis: created once each, listed by id, carried
//! by guild loads, renamed and deleted only in their own guild.

use protocol::id::EmojiId;
use protocol::{GuildId, RoleId, UserId};

use super::load_one;
use super::reactions::{rows, G};
use crate::*;

pub(super) async fn emojis(s: &dyn Store) {
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
