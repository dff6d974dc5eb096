//! What the thread half of a guild's actor is asked (plain data, like
//! [`super::ops`]).

use protocol::{ChannelId, UserId};
use serde::{Deserialize, Serialize};
use store::ChannelRecord;

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
