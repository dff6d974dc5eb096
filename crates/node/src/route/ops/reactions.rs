//! Reactions a caller adds or takes off, as the guild's actor decides them.

use protocol::{ChannelId, MessageId, UserId};
use serde::{Deserialize, Serialize};
use store::{EmojiRecord, ReactionEmoji, ReactionGroup};

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
