//! Reactions to messages, exchanged with a [`crate::Store`] (custom emojis
//! are [`crate::EmojiRecord`]s; pins have no row type of their own).

use protocol::id::EmojiId;
use protocol::{MessageId, UserId};

/// What a reaction is made with.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReactionEmoji {
    /// The emoji itself, as the client sent it.
    Unicode(String),
    /// A custom emoji, with its name and form when the reaction was made
    /// (reactions outlive a rename or deletion of the emoji).
    Custom { id: EmojiId, name: String, animated: bool },
}

impl ReactionEmoji {
    /// How reactions with this emoji are keyed in the store: the Unicode
    /// emoji, or the custom emoji's id in decimal. No Unicode emoji is all
    /// ASCII digits (keycaps end in U+20E3), so the two never meet.
    pub fn key(&self) -> String {
        match self {
            ReactionEmoji::Unicode(s) => s.clone(),
            ReactionEmoji::Custom { id, .. } => id.0.to_string(),
        }
    }

    /// The custom emoji's id, if it is one.
    pub fn id(&self) -> Option<EmojiId> {
        match self {
            ReactionEmoji::Unicode(_) => None,
            ReactionEmoji::Custom { id, .. } => Some(*id),
        }
    }

    /// The (stored) name: the emoji itself, or the custom emoji's name.
    pub fn name(&self) -> &str {
        match self {
            ReactionEmoji::Unicode(s) => s,
            ReactionEmoji::Custom { name, .. } => name,
        }
    }

    pub fn animated(&self) -> bool {
        matches!(self, ReactionEmoji::Custom { animated: true, .. })
    }

    /// Rebuilds an emoji from its stored columns (`emoji_id` NULL: Unicode).
    pub fn from_columns(emoji_id: Option<i64>, name: String, animated: bool) -> ReactionEmoji {
        match emoji_id {
            Some(id) => ReactionEmoji::Custom { id: EmojiId(id as u64), name, animated },
            None => ReactionEmoji::Unicode(name),
        }
    }
}

/// One user's reaction to a message.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReactionRecord {
    pub message_id: MessageId,
    pub emoji: ReactionEmoji,
    pub user_id: UserId,
    /// Orders a message's emojis by their first use.
    pub created_at: u64,
}

/// A message's reactions with one emoji, as one viewer sees them.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReactionGroup {
    pub message_id: MessageId,
    pub emoji: ReactionEmoji,
    pub count: u32,
    /// The viewer is among those who reacted.
    pub me: bool,
}
