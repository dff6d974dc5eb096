//! A guild's custom emojis, as its actor decides changes to them.

use protocol::id::EmojiId;
use protocol::RoleId;
use serde::{Deserialize, Serialize};
use store::EmojiRecord;

use super::Set;

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
