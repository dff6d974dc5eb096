//! Rows exchanged with a [`crate::Store`]. Times are ms since the Unix epoch.

use protocol::id::EmojiId;
use protocol::{ApplicationId, ChannelId, GuildId, MessageId, RoleId, UserId};

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UserRecord {
    pub id: UserId,
    pub username: String,
    pub global_name: Option<String>,
    pub avatar: Option<String>,
    pub bot: bool,
    pub flags: u64,
    pub created_at: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ApplicationRecord {
    pub id: ApplicationId,
    pub name: String,
    pub owner_id: Option<UserId>,
    pub bot_user_id: UserId,
    pub flags: u64,
    /// Not read by the server: the key `/applications/@me` shows is derived
    /// from the deployment's key (`node::signing`), which also signs.
    pub verify_key: String,
    /// Where the application gets its interactions as signed HTTP POSTs
    /// (`None`: over its gateway sessions).
    #[serde(default)]
    pub interactions_endpoint_url: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GuildRecord {
    pub id: GuildId,
    pub name: String,
    pub icon: Option<String>,
    pub description: Option<String>,
    pub owner_id: UserId,
    pub system_channel_id: Option<ChannelId>,
    pub created_at: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RoleRecord {
    pub id: RoleId,
    pub guild_id: GuildId,
    pub name: String,
    pub color: u32,
    pub hoist: bool,
    pub position: i32,
    pub permissions: u64,
    pub mentionable: bool,
    /// A bot's managed role (Discord's `tags.bot_id`): made when the bot is
    /// authorized into the guild; never assigned, edited into or deleted
    /// by hand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bot_id: Option<UserId>,
}

/// A permission overwrite on a channel.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OverwriteRecord {
    pub id: u64,
    /// 0 = role, 1 = member.
    pub kind: u8,
    pub allow: u64,
    pub deny: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ChannelRecord {
    pub id: ChannelId,
    pub guild_id: Option<GuildId>,
    pub kind: u8,
    pub name: String,
    pub position: i32,
    pub topic: Option<String>,
    pub nsfw: bool,
    pub parent_id: Option<ChannelId>,
    pub rate_limit_per_user: u32,
    pub overwrites: Vec<OverwriteRecord>,
    pub last_message_id: Option<MessageId>,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MemberRecord {
    pub guild_id: GuildId,
    pub user_id: UserId,
    pub nick: Option<String>,
    pub roles: Vec<RoleId>,
    pub joined_at: u64,
    pub flags: u64,
    /// A timeout: until this time (ms since the epoch) the member may only
    /// read (Discord's `communication_disabled_until`).
    #[serde(default)]
    pub communication_disabled_until: Option<u64>,
}

impl MemberRecord {
    /// A member as they join: no nickname, roles, flags or timeout.
    pub fn joined(guild_id: GuildId, user_id: UserId, joined_at: u64) -> MemberRecord {
        MemberRecord { guild_id, user_id, nick: None, roles: Vec::new(), joined_at, flags: 0, communication_disabled_until: None }
    }
}

/// A DM channel (a `channels` row of kind 1) with its recipients.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DmChannel {
    pub channel: ChannelRecord,
    pub recipients: Vec<UserRecord>,
}

/// The field of a message's `extra` holding its deduplication key: a
/// client's `nonce` sent with `enforce_nonce`, or a key a cluster node gave
/// a post it may send again. Stored, never shown to clients.
pub const DEDUP_FIELD: &str = "dedup";

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MessageRecord {
    pub id: MessageId,
    pub channel_id: ChannelId,
    pub guild_id: Option<GuildId>,
    pub author_id: UserId,
    pub content: String,
    pub edited_at: Option<u64>,
    pub kind: u8,
    pub flags: u64,
    pub tts: bool,
    pub mention_everyone: bool,
    pub mentions: Vec<UserId>,
    /// `message_reference` as JSON, if any.
    pub reference: Option<serde_json::Value>,
    /// Embeds, attachments and components as one JSON object.
    pub extra: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InviteRecord {
    pub code: String,
    pub guild_id: GuildId,
    pub channel_id: ChannelId,
    pub inviter_id: Option<UserId>,
    /// Seconds; 0 = never expires.
    pub max_age: u32,
    /// 0 = unlimited.
    pub max_uses: u32,
    pub uses: u32,
    pub created_at: u64,
}

/// Everything created with a new guild, in one transaction.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct NewGuild {
    pub guild: GuildRecord,
    pub roles: Vec<RoleRecord>,
    pub channels: Vec<ChannelRecord>,
    pub members: Vec<MemberRecord>,
}

/// What IDENTIFY needs about a token's user, read in one query.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct IdentifyRecord {
    pub user: UserRecord,
    /// Guilds the user is a member of, ascending.
    pub guilds: Vec<GuildId>,
    /// A bot's application: id and flags.
    pub application: Option<(ApplicationId, u64)>,
    /// When the token expires (`None`: never); the caller checks it.
    pub token_expires_at: Option<u64>,
}

/// A guild's full state as its actor loads it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GuildSnapshot {
    pub guild: GuildRecord,
    pub roles: Vec<RoleRecord>,
    pub channels: Vec<ChannelRecord>,
    pub members: Vec<(MemberRecord, UserRecord)>,
    /// Custom emojis, by id.
    #[serde(default)]
    pub emojis: Vec<EmojiRecord>,
    /// Users banned from the guild, ascending: the actor refuses their joins.
    #[serde(default)]
    pub bans: Vec<UserId>,
    /// Threads with their members (archived ones too).
    #[serde(default)]
    pub threads: Vec<crate::ThreadSnapshot>,
}

/// Rows inserted in bulk by the seeding tool, in one transaction.
#[derive(Clone, Debug, Default)]
pub struct BulkLoad {
    pub users: Vec<UserRecord>,
    /// (token hash, user).
    pub tokens: Vec<([u8; 32], UserId)>,
    pub guilds: Vec<NewGuild>,
    /// Messages of those guilds (or of guilds loaded before), inserted as
    /// the server inserts posted ones: the same rows, in the search index,
    /// channels' `last_message_id` raised. The seeding tool loads millions
    /// in batches, one `BulkLoad` of messages only per transaction.
    pub messages: Vec<MessageRecord>,
}

/// A user banned from a guild.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BanRecord {
    pub guild_id: GuildId,
    pub user_id: UserId,
    pub reason: Option<String>,
    pub created_at: u64,
}

/// A custom emoji of a guild. Its image is a file the server keeps by id.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EmojiRecord {
    pub id: EmojiId,
    pub guild_id: GuildId,
    pub name: String,
    pub animated: bool,
    /// Roles allowed to use it (empty: everyone).
    pub roles: Vec<RoleId>,
    pub creator_id: Option<UserId>,
}
