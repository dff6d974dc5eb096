//! What DM actors are asked (plain data, like [`super::ops`]), and how a
//! DM's actor is found.
//!
//! A DM has no guild, but it needs what a guild's actor gives a guild: one
//! ordered stream of its events, one writer of its messages fenced by an
//! ownership epoch, and delivery once per node. So each DM channel gets an
//! actor of its own, reached through the guild router under a key of its
//! own ([`protocol::ActorKey::dm`]): the channel's id with the top bit set. Snowflakes use
//! 63 bits (until 2084), so no guild id is ever a DM key; the ring places
//! DM actors like guilds, ownership claims and fences use the same table,
//! and sessions subscribe to their DMs like to guilds (cluster delivery,
//! re-homing after a ring change and unsubscribing at the end need nothing
//! new).

use serde::{Deserialize, Serialize};

use fanout::NodeId;

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
