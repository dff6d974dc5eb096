//! Rows of DMs, threads and application commands (see migration 0006).

use async_trait::async_trait;
use protocol::{ApplicationId, ChannelId, GuildId, UserId};

use crate::records::{ChannelRecord, UserRecord};
use crate::Result;

/// A DM channel (a `channels` row of kind 1) with its recipients.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DmChannel {
    pub channel: ChannelRecord,
    pub recipients: Vec<UserRecord>,
}

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

/// An application command. `body` holds the rest of the command object
/// (description, options, localizations, permissions, contexts...) as the
/// API returns it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CommandRecord {
    pub id: u64,
    pub application_id: ApplicationId,
    /// `None`: a global command.
    pub guild_id: Option<GuildId>,
    pub kind: u8,
    pub name: String,
    pub version: u64,
    pub body: serde_json::Value,
}

/// Thread channel types.
pub const ANNOUNCEMENT_THREAD: u8 = 10;
pub const PUBLIC_THREAD: u8 = 11;
pub const PRIVATE_THREAD: u8 = 12;

/// Whether a channel of this type is a thread.
pub fn is_thread(kind: u8) -> bool {
    matches!(kind, ANNOUNCEMENT_THREAD | PUBLIC_THREAD | PRIVATE_THREAD)
}

/// The store's queries for DMs, threads and application commands (a
/// supertrait of [`crate::Store`], so each backend implements them in a
/// file of its own). Changes a guild's or a DM's actor commits are
/// [`crate::Change`]s.
#[async_trait]
pub trait DmThreadCommandStore: Send + Sync {
    /// The DM between `a` and `b`: `channel` (kind 1, no guild) is created
    /// with both as recipients unless they already have one, whose id is
    /// returned instead (one DM per pair, also under concurrent opens).
    async fn open_dm(&self, channel: &ChannelRecord, a: UserId, b: UserId) -> Result<ChannelId>;
    /// A DM channel with its recipients.
    async fn get_dm(&self, id: ChannelId) -> Result<Option<DmChannel>>;
    /// Each user's DM channels (READY's `private_channels`), for several
    /// users in one round of statements.
    async fn dms_of_users(&self, users: &[UserId]) -> Result<Vec<(UserId, Vec<DmChannel>)>>;
    /// A thread's channel and metadata.
    async fn get_thread(&self, id: ChannelId) -> Result<Option<(ChannelRecord, ThreadRecord)>>;
    /// A thread's members, by user id.
    async fn thread_members(&self, thread: ChannelId) -> Result<Vec<ThreadMemberRecord>>;
    /// Archived threads of `parent` (public, or private ones), newest
    /// archive first, archived before `before` (ms), at most `limit`, with
    /// their members and message counts.
    async fn archived_threads(&self, parent: ChannelId, private: bool, before: u64, limit: u32) -> Result<Vec<ThreadSnapshot>>;
    /// An application's commands: global (`guild: None`) or of one guild, by id.
    async fn list_commands(&self, app: ApplicationId, guild: Option<GuildId>) -> Result<Vec<CommandRecord>>;
    async fn get_command(&self, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<Option<CommandRecord>>;
    /// Creates `c`, or overwrites the command of the same scope, type and
    /// name (keeping its id), as Discord's POST does. The stored command.
    async fn upsert_command(&self, c: &CommandRecord) -> Result<CommandRecord>;
    /// Replaces an existing command (same id and scope); `Conflict` if its
    /// new name is taken. `Ok(false)`: no such command.
    async fn update_command(&self, c: &CommandRecord) -> Result<bool>;
    async fn delete_command(&self, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<bool>;
    /// Bulk overwrite: the scope's commands become `cmds` in one
    /// transaction; a command whose type and name existed keeps its id.
    /// Returns the stored commands.
    async fn overwrite_commands(&self, app: ApplicationId, guild: Option<GuildId>, cmds: &[CommandRecord]) -> Result<Vec<CommandRecord>>;
}

/// What a bulk overwrite of a scope's commands does: which rows go, which
/// stay (same type and name: same id, new contents) and which are new.
pub struct OverwritePlan {
    pub removed: Vec<u64>,
    pub kept: Vec<CommandRecord>,
    pub added: Vec<CommandRecord>,
    /// The scope's commands afterwards, in the order asked.
    pub result: Vec<CommandRecord>,
}

/// Plans a bulk overwrite of `old` with `new` (ids and versions of `new`
/// are fresh ones; a kept command takes its old id, and its old version
/// when nothing changed).
pub fn overwrite_plan(old: &[CommandRecord], new: &[CommandRecord]) -> OverwritePlan {
    let mut plan = OverwritePlan { removed: Vec::new(), kept: Vec::new(), added: Vec::new(), result: Vec::new() };
    for c in new {
        let mut c = c.clone();
        match old.iter().find(|o| o.kind == c.kind && o.name == c.name) {
            Some(o) => {
                c.id = o.id;
                if o.body == c.body {
                    c.version = o.version;
                }
                plan.kept.push(c.clone());
            }
            None => plan.added.push(c.clone()),
        }
        plan.result.push(c);
    }
    plan.removed = old.iter().filter(|o| !plan.kept.iter().any(|k| k.id == o.id)).map(|o| o.id).collect();
    plan
}
