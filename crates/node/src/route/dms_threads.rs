//! What DM actors and the thread half of guild actors are asked (plain
//! data, like the rest of [`super::ops`]), and how a DM's actor is found.
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

use protocol::{ChannelId, GuildId, UserId};
use serde::{Deserialize, Serialize};
use store::ChannelRecord;

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

/// Thread changes and reads a guild's actor decides (permissions come
/// from the parent channel).
#[derive(Serialize, Deserialize)]
pub enum ThreadAction {
    /// A new thread in `parent` (`from_message`: the thread takes the
    /// message's id). `channel` is the thread's channel as REST built it.
    Create {
        parent: ChannelId,
        from_message: bool,
        channel: Box<ChannelRecord>,
        auto_archive_duration: u32,
        invitable: bool,
    },
    /// PATCH of a thread: name, slowmode, archived, locked, auto archive, invitable.
    Modify {
        thread: ChannelId,
        patch: Box<ThreadPatch>,
    },
    Delete {
        thread: ChannelId,
    },
    /// `GET /channels/{t}`: the thread channel object.
    Get {
        thread: ChannelId,
    },
    /// `user` joins (the caller) or is added (by a member of the thread).
    AddMember {
        thread: ChannelId,
        user: UserId,
    },
    RemoveMember {
        thread: ChannelId,
        user: UserId,
    },
    /// `GET /channels/{t}/thread-members[/{u}]`: the members (`user: None`)
    /// or one, if the caller may see the thread.
    Members {
        thread: ChannelId,
        user: Option<UserId>,
        with_member: bool,
    },
    /// `GET /guilds/{g}/threads/active`: active threads the caller may see.
    Active,
    /// The archive sweep (the actor's own timer): threads idle past their
    /// `auto_archive_duration` are archived.
    Sweep,
}

#[derive(Default, Serialize, Deserialize)]
pub struct ThreadPatch {
    pub name: Option<String>,
    pub archived: Option<bool>,
    pub locked: Option<bool>,
    pub auto_archive_duration: Option<u32>,
    pub invitable: Option<bool>,
    pub rate_limit_per_user: Option<u32>,
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
