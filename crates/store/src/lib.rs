//! Persistence for throng.
//!
//! - [`Store`]: the backend-neutral trait the server talks to (one method per
//!   query it needs; no SQL leaks out).
//! - [`records`]: plain rows the trait exchanges.
//! - [`change`]: the changes a guild's actor commits (`apply_changes`).
//! - `sql`: the SQL both backends run, written once; each backend supplies
//!   its pools and what it does its own way.
//! - [`sqlite`]: the embedded default backend (WAL, one writer connection,
//!   a small reader pool, migrations embedded in the binary).
//! - [`postgres`]: the backend several nodes share (`--database postgres://…`):
//!   one statement or row locks per change, arrays for batches.
//! - [`conformance`]: the test suite every backend must pass.
//!
//! Invariants: a method that returns `Ok` has committed its writes; library
//! code never reads environment variables.

pub mod accounts;
pub mod attachments;
pub mod change;
pub mod commands;
pub mod community;
pub mod conformance;
pub mod postgres;
pub mod reactions;
pub mod records;
mod sql;
pub mod sqlite;
pub mod threads;

use async_trait::async_trait;
use protocol::{ActorKey, ApplicationId, ChannelId, GuildId, MessageId, UserId};

pub use accounts::{AccountStore, GrantKind, GrantRecord, OAuthApp, SessionStart, StartLimits, TokenRecord};
pub use attachments::{AttachmentRecord, WebhookRecord};
pub use change::Change;
pub use commands::*;
pub use community::{
    index_scope, pair_token, pairs_word, scope_tokens, search_words, word_pairs, AuditQuery, AuditRecord, CommunityStore, Has, ReadState,
    ReadStateWrite, SearchQuery,
};
pub use reactions::*;
pub use records::*;
pub use threads::*;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A unique key already exists (e.g. a username).
    #[error("already exists")]
    Conflict,
    #[error("database error: {0}")]
    Db(#[from] sqlx::Error),
    /// From the SQLite batch writer's own connection.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("stored data is corrupt: {0}")]
    Corrupt(#[from] serde_json::Error),
}

impl StoreError {
    /// The error is about the rows written (a constraint refused one: its
    /// channel was deleted meanwhile, a duplicate id), not about the
    /// database (locked, full, I/O): writing the rows one by one can help.
    pub fn is_row_error(&self) -> bool {
        use sqlx::error::ErrorKind;
        match self {
            StoreError::Conflict | StoreError::Corrupt(_) => true,
            StoreError::Db(sqlx::Error::Database(d)) => !matches!(d.kind(), ErrorKind::Other),
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => e.code == rusqlite::ErrorCode::ConstraintViolation,
            _ => false,
        }
    }
}

impl StoreError {
    /// The database could not take the request just now (no pooled
    /// connection in time, SQLite busy or locked, PostgreSQL refusing new
    /// connections or dropping one, a serialisation conflict): the same
    /// request may succeed if retried, so callers answer 503, not 500.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Db(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_)) => true,
            StoreError::Db(sqlx::Error::Database(d)) => {
                // SQLite: 5 BUSY, 6 LOCKED and their extended codes (low byte);
                // PostgreSQL: 40001 serialization failure, 40P01 deadlock,
                // 53300 too many connections, 57P01 admin shutdown and
                // 57P02 crash shutdown (a server stopping or restarting
                // ends its sessions with these), 57P03 cannot connect now
                // (starting up or shutting down), and class 08, a lost or
                // refused connection. The pool opens new connections for
                // the next try.
                let code = d.code().unwrap_or_default();
                let sqlite = code.parse::<u32>().is_ok_and(|c| matches!(c & 0xff, 5 | 6));
                sqlite || matches!(code.as_ref(), "40001" | "40P01" | "53300" | "57P01" | "57P02" | "57P03") || code.starts_with("08")
            }
            StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)) => {
                matches!(e.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            }
            _ => false,
        }
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// Which messages `list_messages` returns (Discord's `before`/`after`/`around`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageWindow {
    Latest,
    Before(MessageId),
    After(MessageId),
    Around(MessageId),
}

#[async_trait]
pub trait Store: DmThreadCommandStore + AccountStore + CommunityStore + Send + Sync + 'static {
    // Users and tokens.
    async fn create_user(&self, user: &UserRecord, password_hash: Option<&str>) -> Result<()>;
    async fn get_user(&self, id: UserId) -> Result<Option<UserRecord>>;
    async fn get_users(&self, ids: &[UserId]) -> Result<Vec<UserRecord>>;
    /// A human account by username, with its password hash.
    async fn user_by_username(&self, username: &str) -> Result<Option<(UserRecord, String)>>;
    async fn add_token(&self, hash: &[u8; 32], user: UserId, now_ms: u64) -> Result<()>;
    async fn user_by_token(&self, hash: &[u8; 32]) -> Result<Option<UserRecord>>;
    async fn create_application(&self, app: &ApplicationRecord) -> Result<()>;
    async fn application_of_bot(&self, bot: UserId) -> Result<Option<ApplicationRecord>>;
    async fn get_application(&self, id: ApplicationId) -> Result<Option<ApplicationRecord>>;
    /// Sets (or clears) where the application gets interactions over HTTP.
    async fn set_interactions_endpoint(&self, app: ApplicationId, url: Option<&str>) -> Result<()>;
    /// The applications whose bots are members of `guild`.
    async fn guild_applications(&self, guild: GuildId) -> Result<Vec<ApplicationRecord>>;
    /// For each token hash that exists: its user, guild ids and (for bots)
    /// application, all in one round trip (IDENTIFYs arriving together are
    /// looked up together).
    async fn identify_lookup(&self, hashes: &[[u8; 32]]) -> Result<Vec<([u8; 32], IdentifyRecord)>>;

    /// Inserts users, tokens, whole guilds and messages in one transaction (seeding).
    async fn bulk_load(&self, b: &BulkLoad) -> Result<()>;

    // Guilds.
    /// Creates a guild with its roles, channels and first members in one transaction.
    async fn create_guild(&self, g: &NewGuild) -> Result<()>;
    async fn get_guild(&self, id: GuildId) -> Result<Option<GuildRecord>>;
    async fn update_guild(&self, g: &GuildRecord) -> Result<()> {
        self.apply_changes(0, ActorKey::guild(g.id), &[Change::UpdateGuild(g.clone())]).await.map(drop)
    }
    async fn delete_guild(&self, id: GuildId) -> Result<bool> {
        one_row(self.apply_changes(0, ActorKey::guild(id), &[Change::DeleteGuild(id)]).await)
    }
    /// Everything guild actors hold, for several guilds in one round of
    /// statements: each guild, its roles, channels, members (ordered by user
    /// id) and their users. Guilds that do not exist are left out.
    async fn load_guilds(&self, ids: &[GuildId]) -> Result<Vec<GuildSnapshot>>;
    async fn guilds_of_user(&self, user: UserId) -> Result<Vec<GuildId>>;
    async fn roles_of_guild(&self, guild: GuildId) -> Result<Vec<RoleRecord>>;

    // Channels.
    async fn create_channel(&self, c: &ChannelRecord) -> Result<()> {
        self.apply_changes(0, ActorKey::guild(c.guild_id.unwrap_or(GuildId(0))), &[Change::CreateChannel(c.clone())]).await.map(drop)
    }
    async fn get_channel(&self, id: ChannelId) -> Result<Option<ChannelRecord>>;
    async fn update_channel(&self, c: &ChannelRecord) -> Result<()> {
        self.apply_changes(0, ActorKey::guild(c.guild_id.unwrap_or(GuildId(0))), &[Change::UpdateChannel(c.clone())]).await.map(drop)
    }
    async fn delete_channel(&self, id: ChannelId) -> Result<bool> {
        one_row(self.apply_changes(0, ActorKey::guild(GuildId(0)), &[Change::DeleteChannel(id)]).await)
    }
    async fn channels_of_guild(&self, guild: GuildId) -> Result<Vec<ChannelRecord>>;

    // Members.
    /// Adds a member; `Ok(false)` if it already was one.
    async fn add_member(&self, m: &MemberRecord) -> Result<bool> {
        one_row(self.apply_changes(0, ActorKey::guild(m.guild_id), &[Change::AddMember(m.clone())]).await)
    }
    async fn get_member(&self, guild: GuildId, user: UserId) -> Result<Option<MemberRecord>>;
    async fn update_member(&self, m: &MemberRecord) -> Result<bool> {
        one_row(self.apply_changes(0, ActorKey::guild(m.guild_id), &[Change::UpdateMember(m.clone())]).await)
    }
    async fn remove_member(&self, guild: GuildId, user: UserId) -> Result<bool> {
        one_row(self.apply_changes(0, ActorKey::guild(guild), &[Change::RemoveMember { guild, user }]).await)
    }
    /// Members ordered by user id, starting after `after`.
    async fn list_members(&self, guild: GuildId, after: UserId, limit: u32) -> Result<Vec<MemberRecord>>;
    async fn count_members(&self, guild: GuildId) -> Result<u64>;

    // Messages.
    async fn create_message(&self, m: &MessageRecord) -> Result<()>;
    /// Group commit: every message of `batch` in one transaction. Each is
    /// fenced by the ownership epoch its guild actor claimed (0: not
    /// fenced); one whose epoch is no longer its guild's current one is not
    /// written, and its entry in the answer is `false`. An error means
    /// nothing of the batch was written.
    async fn create_messages(&self, batch: &[(u64, MessageRecord)]) -> Result<Vec<bool>>;

    // Ownership (a cluster).
    /// `node` takes the actor `key` over (a guild's, or a DM's): its epoch
    /// goes up by one and is returned. Writes fenced by an older epoch are
    /// refused from now on.
    async fn claim_guild(&self, key: ActorKey, node: u64) -> Result<u64>;
    /// `claim_guild` for several guilds (distinct) in one transaction; the
    /// new epoch of each.
    async fn claim_guilds(&self, keys: &[ActorKey], node: u64) -> Result<Vec<(ActorKey, u64)>> {
        let mut out = Vec::with_capacity(keys.len());
        for &k in keys {
            out.push((k, self.claim_guild(k, node).await?));
        }
        Ok(out)
    }
    /// Commits `changes` of `guild` in one transaction, fenced by `epoch`
    /// (the ownership epoch its actor claimed; 0: not fenced). `Ok(None)`:
    /// the guild has a newer owner and nothing was written. Otherwise the
    /// rows each change touched, in order. An error means nothing was written.
    async fn apply_changes(&self, epoch: u64, key: ActorKey, changes: &[Change]) -> Result<Option<Vec<u64>>>;
    /// The guild's current owner and epoch, if it was ever claimed.
    async fn guild_owner(&self, key: ActorKey) -> Result<Option<(u64, u64)>>;
    async fn get_message(&self, channel: ChannelId, id: MessageId) -> Result<Option<MessageRecord>>;
    /// The messages of `channels` from `since` on that carry a
    /// deduplication key ([`DEDUP_FIELD`] in `extra`), newest first, at
    /// most `limit`: (channel, id, author, key). An actor that starts
    /// reads them so a post its previous owner committed is not committed
    /// twice; actors starting together read theirs in one statement
    /// (`node::batch::message_keys`).
    async fn recent_message_keys(
        &self,
        channels: &[ChannelId],
        since: MessageId,
        limit: u32,
    ) -> Result<Vec<(ChannelId, MessageId, UserId, String)>>;
    async fn update_message(&self, m: &MessageRecord) -> Result<()> {
        self.apply_changes(0, ActorKey::guild(m.guild_id.unwrap_or(GuildId(0))), &[Change::UpdateMessage(m.clone())]).await.map(drop)
    }
    async fn delete_message(&self, channel: ChannelId, id: MessageId) -> Result<bool> {
        one_row(self.apply_changes(0, ActorKey::guild(GuildId(0)), &[Change::DeleteMessage { channel, id }]).await)
    }
    /// Messages newest first, as Discord returns them.
    async fn list_messages(&self, channel: ChannelId, window: MessageWindow, limit: u32) -> Result<Vec<MessageRecord>>;

    // Invites.
    async fn create_invite(&self, i: &InviteRecord) -> Result<()>;
    async fn get_invite(&self, code: &str) -> Result<Option<InviteRecord>>;
    /// Counts one use; `Ok(false)` if the invite is used up or gone.
    async fn use_invite(&self, code: &str) -> Result<bool>;
    async fn delete_invite(&self, code: &str) -> Result<bool>;
    /// The guild's invites (expired and used-up ones too), newest first,
    /// at most `limit`.
    async fn invites_of_guild(&self, guild: GuildId, limit: u32) -> Result<Vec<InviteRecord>>;

    // Roles, overwrites, bans:
    async fn create_role(&self, r: &RoleRecord) -> Result<()> {
        self.apply_changes(0, ActorKey::guild(r.guild_id), &[Change::CreateRole(r.clone())]).await.map(drop)
    }
    /// Bans of `guild` in ascending user id, at most `limit`: those after
    /// `after`, or, if `before` is given, the ones just before it.
    async fn bans_of_guild(&self, guild: GuildId, before: Option<UserId>, after: UserId, limit: u32) -> Result<Vec<BanRecord>>;
    async fn get_ban(&self, guild: GuildId, user: UserId) -> Result<Option<BanRecord>>;
    /// `author`'s messages in `guild` with ids from `since` on, newest
    /// first, at most `limit`: (channel, message).
    async fn messages_of_author(&self, guild: GuildId, author: UserId, since: MessageId, limit: u32)
        -> Result<Vec<(ChannelId, MessageId)>>;

    // Reactions, emojis, pins, bulk delete:
    /// The reactions of each of `messages` grouped by emoji, each message's
    /// groups in the order their emojis were first used; `me`: `viewer` is
    /// among those who reacted.
    async fn reactions_of(&self, messages: &[MessageId], viewer: UserId) -> Result<Vec<ReactionGroup>>;
    /// Who reacted to `message` with the emoji keyed `key`
    /// ([`ReactionEmoji::key`]), by user id ascending, after `after`.
    async fn reaction_users(&self, message: MessageId, key: &str, after: UserId, limit: u32) -> Result<Vec<UserRecord>>;
    /// When each of `messages` that is pinned was pinned (ms).
    async fn pins_among(&self, messages: &[MessageId]) -> Result<Vec<(MessageId, u64)>>;
    /// A channel's pinned messages, latest pin first, pinned before `before`
    /// (ms; `None`: the latest), with when each was pinned.
    async fn pinned_messages(&self, channel: ChannelId, before: Option<u64>, limit: u32) -> Result<Vec<(MessageRecord, u64)>>;
    async fn count_pins(&self, channel: ChannelId) -> Result<u64>;
    /// Which of `ids` are messages of `channel`.
    async fn messages_among(&self, channel: ChannelId, ids: &[MessageId]) -> Result<Vec<MessageId>>;
    /// A guild's custom emojis, by id.
    async fn emojis_of(&self, guild: GuildId) -> Result<Vec<EmojiRecord>>;
    async fn get_emoji(&self, id: protocol::id::EmojiId) -> Result<Option<EmojiRecord>>;

    // Attachments, webhooks:
    /// Records an upload before its message exists (`message_id: None`):
    /// from now on it counts as a reference to its file.
    async fn create_attachment(&self, a: &AttachmentRecord) -> Result<()>;
    async fn get_attachment(&self, id: protocol::Snowflake) -> Result<Option<AttachmentRecord>>;
    async fn attachments_of_message(&self, message: MessageId) -> Result<Vec<AttachmentRecord>>;
    /// Removes uploads whose message never committed (only rows still
    /// pending); the hashes of the rows removed.
    async fn delete_pending_attachments(&self, ids: &[protocol::Snowflake]) -> Result<Vec<String>>;
    /// Removes pending uploads created before `before_ms`; their hashes.
    async fn expire_pending_attachments(&self, before_ms: u64) -> Result<Vec<String>>;
    /// How many attachment rows (pending or not) name the file `hash`.
    async fn blob_refs(&self, hash: &str) -> Result<u64>;
    /// The bytes of the attachment rows (pending or linked) `user`
    /// uploaded: what their storage quota counts. A file stored once for
    /// several rows counts once per row.
    async fn uploaded_bytes(&self, user: UserId) -> Result<u64>;
    /// The deployment-wide setting `name`; inserted as `value` first if
    /// absent. Nodes starting together all get the first one inserted.
    async fn setting_or_init(&self, name: &str, value: &str) -> Result<String>;
    async fn get_webhook(&self, id: protocol::Snowflake) -> Result<Option<WebhookRecord>>;
    async fn webhooks_of_channel(&self, channel: ChannelId) -> Result<Vec<WebhookRecord>>;
    async fn webhooks_of_guild(&self, guild: GuildId) -> Result<Vec<WebhookRecord>>;

    // DMs, threads, application commands: see [`DmThreadCommandStore`], a supertrait.
}

/// The store's queries for DMs, threads and application commands, a
/// supertrait of [`Store`]. Changes a guild's or a DM's actor commits are
/// [`Change`]s.
#[async_trait]
pub trait DmThreadCommandStore: Send + Sync {
    /// The DM between `a` and `b`: `channel` (kind 1, no guild) is created
    /// with both as recipients unless they already have one, whose id is
    /// returned instead (one DM per pair, also under concurrent opens).
    async fn open_dm(&self, channel: &ChannelRecord, a: UserId, b: UserId) -> Result<ChannelId>;
    /// Creates a group DM (`channel`, kind 3) with `recipients`, in one
    /// transaction; every call makes a new one, as on Discord.
    async fn create_group_dm(&self, channel: &ChannelRecord, recipients: &[UserId]) -> Result<()>;
    /// A DM or group DM channel with its recipients.
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
    /// An application's command permission overrides in a guild.
    async fn command_permissions(&self, app: ApplicationId, guild: GuildId) -> Result<Vec<CommandPermissions>>;
    /// Replaces one command's (or the application-wide) overrides; none
    /// removes them.
    async fn set_command_permissions(&self, app: ApplicationId, guild: GuildId, p: &CommandPermissions) -> Result<()>;
}

/// `Ok(true)` if the one change of an unfenced `apply_changes` touched a row.
fn one_row(r: Result<Option<Vec<u64>>>) -> Result<bool> {
    r.map(|rows| rows.and_then(|v| v.first().copied()).unwrap_or(0) > 0)
}

#[cfg(test)]
mod tests {
    use super::StoreError;

    #[test]
    fn busy_and_locked_databases_and_pool_timeouts_are_transient_constraints_are_not() {
        let busy = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(5), None);
        let locked = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(6), None);
        let constraint = rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(19), None);
        assert!(StoreError::Sqlite(busy).is_transient());
        assert!(StoreError::Sqlite(locked).is_transient());
        assert!(!StoreError::Sqlite(constraint).is_transient());
        assert!(StoreError::Db(sqlx::Error::PoolTimedOut).is_transient());
        assert!(!StoreError::Db(sqlx::Error::RowNotFound).is_transient());
        assert!(!StoreError::Conflict.is_transient());
    }
}
