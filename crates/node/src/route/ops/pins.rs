//! Pins, and bulk deletes (both MANAGE_MESSAGES work on a channel's
//! messages), as the guild's actor decides them.

use protocol::{ChannelId, MessageId, UserId};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize)]
pub enum PinAction {
    /// PIN_MESSAGES or MANAGE_MESSAGES. `kind`: the message's type;
    /// `pinned`: whether it is pinned already and `count` the channel's pins
    /// (as REST read them); `notice`: the id of the system message (type 6)
    /// that announces the pin; `author`: the message's (for the audit log).
    Pin { channel: ChannelId, message: MessageId, kind: u8, pinned: bool, count: u64, notice: MessageId, author: UserId },
    /// `pinned` as REST read it; `last`: when the latest other pin of the
    /// channel was made (ms), for CHANNEL_PINS_UPDATE.
    Unpin { channel: ChannelId, message: MessageId, pinned: bool, last: Option<u64>, author: UserId },
    /// Bulk delete (MANAGE_MESSAGES): `ids`, those of the request that are
    /// messages of the channel (REST checked count, duplicates and age).
    BulkDelete { channel: ChannelId, ids: Vec<MessageId> },
}
