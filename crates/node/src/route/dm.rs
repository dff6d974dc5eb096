//! What DM actors are asked (plain data, like [`super::ops`]), and how a
//! DM's actor is found.
//!
//! A DM has no guild, but it needs what a guild's actor gives a guild: one
//! ordered stream of its events, one writer of its messages fenced by an
//! ownership epoch, and delivery once per node. So each DM channel gets an
//! actor of its own, reached through the guild router under a key of its
//! own ([`dm_key`]): the channel's id with the top bit set. Snowflakes use
//! 63 bits (until 2084), so no guild id is ever a DM key; the ring places
//! DM actors like guilds, ownership claims and fences use the same table,
//! and sessions subscribe to their DMs like to guilds (cluster delivery,
//! re-homing after a ring change and unsubscribing at the end need nothing
//! new).

use protocol::{ChannelId, GuildId};
use serde::{Deserialize, Serialize};

use fanout::NodeId;

/// The top bit: set in DM keys, never in a snowflake.
const DM_BIT: u64 = 1 << 63;

/// The router key of DM channel `c`'s actor.
pub fn dm_key(c: ChannelId) -> GuildId {
    GuildId(c.0 | DM_BIT)
}

/// The DM channel whose actor `key` names, if it names one.
pub fn dm_of(key: GuildId) -> Option<ChannelId> {
    (key.0 & DM_BIT != 0).then_some(ChannelId(key.0 & !DM_BIT))
}

/// What a DM's actor is asked besides messages (which are `MessageAction`s
/// and `GuildMsg::Post`, as in guilds).
#[derive(Serialize, Deserialize)]
pub enum DmAction {
    /// The DM was just created: subscribe every session of its recipients
    /// on every node, then answer with the channel (so the first message,
    /// sent after the answer, reaches all of them).
    Opened,
    /// `node` has subscribed its sessions of the recipients (its answer to
    /// `Opened`; the actor's own timer sends it with `None` to stop waiting).
    Settled { node: Option<NodeId> },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dm_keys_never_meet_snowflakes() {
        let c = ChannelId(1_339_999_999_999_999_999);
        assert_eq!(dm_of(dm_key(c)), Some(c));
        assert_eq!(dm_of(GuildId(c.0)), None);
        assert_ne!(dm_key(c), GuildId(c.0));
    }
}
