//! Threads (migration 0006): channels with a parent, their metadata and
//! members, exchanged with a [`crate::Store`].

use protocol::{ChannelId, GuildId, UserId};

use crate::records::ChannelRecord;

/// A thread's metadata (its channel is a `channels` row with `parent_id`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadRecord {
    pub channel_id: ChannelId,
    pub guild_id: GuildId,
    pub owner_id: UserId,
    pub archived: bool,
    /// When `archived` last changed (or the thread was created), ms.
    pub archive_timestamp: u64,
    /// Minutes of inactivity before the thread archives itself.
    pub auto_archive_duration: u32,
    pub locked: bool,
    pub invitable: bool,
    pub created_at: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadMemberRecord {
    pub thread_id: ChannelId,
    pub user_id: UserId,
    pub join_timestamp: u64,
    pub flags: u64,
}

/// A thread as a guild actor loads it: its channel, metadata, members and
/// how many messages it holds (counted, not stored).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ThreadSnapshot {
    pub channel: ChannelRecord,
    pub thread: ThreadRecord,
    pub members: Vec<ThreadMemberRecord>,
    pub message_count: u64,
}

/// Thread channel types.
pub const ANNOUNCEMENT_THREAD: u8 = 10;
pub const PUBLIC_THREAD: u8 = 11;
pub const PRIVATE_THREAD: u8 = 12;

/// Whether a channel of this type is a thread.
pub fn is_thread(kind: u8) -> bool {
    matches!(kind, ANNOUNCEMENT_THREAD | PUBLIC_THREAD | PRIVATE_THREAD)
}
