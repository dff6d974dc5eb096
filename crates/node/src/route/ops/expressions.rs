//! Actions of the "Reactions, emojis, pins, bulk delete" slice: what REST
//! read and checked for shape, for the guild's actor to authorize, commit
//! and fan out.

use protocol::id::EmojiId;
use protocol::{ChannelId, MessageId, RoleId, UserId};
use serde::{Deserialize, Serialize};
use store::{EmojiRecord, ReactionEmoji, ReactionGroup};

use super::Set;

#[derive(Serialize, Deserialize)]
pub enum ReactionAction {
    /// The caller reacts (READ_MESSAGE_HISTORY; ADD_REACTIONS unless the
    /// emoji is on the message already). `groups`: the message's reactions
    /// as REST read them, seen by the caller; `custom`: the custom emoji
    /// named, as the store has it (`None`: Unicode, or no such emoji).
    Add {
        channel: ChannelId,
        message: MessageId,
        author: UserId,
        emoji: ReactionEmoji,
        custom: Option<Box<EmojiRecord>>,
        groups: Vec<ReactionGroup>,
    },
    /// Takes `user`'s reaction off: the caller's own, or anyone's with
    /// MANAGE_MESSAGES.
    Remove { channel: ChannelId, message: MessageId, emoji: ReactionEmoji, user: UserId },
    /// Every reaction with `emoji` (`Some`), or every reaction of the
    /// message: MANAGE_MESSAGES.
    Clear { channel: ChannelId, message: MessageId, emoji: Option<ReactionEmoji> },
}

#[derive(Serialize, Deserialize)]
pub enum PinAction {
    /// PIN_MESSAGES or MANAGE_MESSAGES. `kind`: the message's type;
    /// `pinned`: whether it is pinned already and `count` the channel's pins
    /// (as REST read them); `notice`: the id of the system message (type 6)
    /// that announces the pin.
    Pin { channel: ChannelId, message: MessageId, kind: u8, pinned: bool, count: u64, notice: MessageId },
    /// `pinned` as REST read it; `last`: when the latest other pin of the
    /// channel was made (ms), for CHANNEL_PINS_UPDATE.
    Unpin { channel: ChannelId, message: MessageId, pinned: bool, last: Option<u64> },
    /// Bulk delete (MANAGE_MESSAGES): `ids`, those of the request that are
    /// messages of the channel (REST checked count, duplicates and age).
    BulkDelete { channel: ChannelId, ids: Vec<MessageId> },
}

#[derive(Serialize, Deserialize)]
pub enum EmojiAction {
    /// MANAGE_GUILD_EXPRESSIONS or CREATE_GUILD_EXPRESSIONS; the image is
    /// stored already (REST wrote it under the emoji's id).
    Create {
        emoji: Box<EmojiRecord>,
    },
    /// MANAGE_GUILD_EXPRESSIONS, or CREATE_GUILD_EXPRESSIONS for one's own.
    Modify {
        id: EmojiId,
        name: Set<String>,
        roles: Set<Vec<RoleId>>,
    },
    Delete {
        id: EmojiId,
    },
}
