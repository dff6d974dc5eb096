//! Changes to a guild's data, as its actor commits them: each goes through
//! [`crate::Store::apply_changes`], atomically and fenced by the actor's
//! ownership epoch, so only the guild's current owner writes.

use protocol::{ChannelId, GuildId, MessageId, RoleId, UserId};

use crate::records::*;
use crate::threads::{ThreadMemberRecord, ThreadRecord};

/// One change to one guild's rows. `apply_changes` answers, for each, how
/// many rows it touched (0: the row was not there, or already so).
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    UpdateGuild(GuildRecord),
    /// The guild and everything in it (messages, channels, roles, members).
    DeleteGuild(GuildId),
    CreateChannel(ChannelRecord),
    UpdateChannel(ChannelRecord),
    DeleteChannel(ChannelId),
    /// Adds a member; 0 if it already was one.
    AddMember(MemberRecord),
    UpdateMember(MemberRecord),
    RemoveMember {
        guild: GuildId,
        user: UserId,
    },
    /// Content, edit time, flags, mentions and extra of an existing message.
    UpdateMessage(MessageRecord),
    DeleteMessage {
        channel: ChannelId,
        id: MessageId,
    },
    // Roles, overwrites, bans:
    /// `AddMember`, unless the user is banned from the guild (0 then too):
    /// decided in the transaction, so a ban committed before it always wins.
    AddMemberUnlessBanned(MemberRecord),
    CreateRole(RoleRecord),
    /// Name, colour, hoist, position, permissions and mentionable of a role.
    UpdateRole(RoleRecord),
    /// The role, and its id in every member's roles (overwrites naming it
    /// are channel updates of their own).
    DeleteRole {
        guild: GuildId,
        role: RoleId,
    },
    /// Bans a user; 0 if they already were.
    AddBan(BanRecord),
    RemoveBan {
        guild: GuildId,
        user: UserId,
    },
    /// Deletes these messages, if `author` wrote them in `guild` (a ban's purge).
    PurgeMessages {
        guild: GuildId,
        author: UserId,
        ids: Vec<MessageId>,
    },
    // Reactions, emojis, pins, bulk delete:
    /// A reaction; 0 rows if it is there already, if its message is gone,
    /// or if the message has `max_emojis` other emojis already (one
    /// conditional insert: the limit holds whatever raced the caller's check).
    AddReaction {
        reaction: crate::ReactionRecord,
        max_emojis: u32,
    },
    /// A message's reactions: all of them, those with one emoji (`emoji`:
    /// its key, [`ReactionEmoji::key`]), or one user's with it (both).
    RemoveReactions {
        message: MessageId,
        emoji: Option<String>,
        user: Option<UserId>,
    },
    /// Pins a message of `channel` at `at` (ms); 0 rows if it is pinned
    /// already, gone, or the channel has `max` pins (one conditional insert).
    PinMessage {
        channel: ChannelId,
        message: MessageId,
        at: u64,
        max: u32,
    },
    UnpinMessage {
        channel: ChannelId,
        message: MessageId,
    },
    /// The system message announcing a pin (type 6): written only if
    /// `pinned` is pinned at `at`, i.e. the `PinMessage` before it took.
    PinNotice {
        message: MessageRecord,
        pinned: MessageId,
        at: u64,
    },
    /// Bulk delete: the messages of `channel` among `ids`.
    DeleteMessages {
        channel: ChannelId,
        ids: Vec<MessageId>,
    },
    CreateEmoji(crate::EmojiRecord),
    /// Name and roles.
    UpdateEmoji(crate::EmojiRecord),
    DeleteEmoji {
        guild: GuildId,
        id: protocol::id::EmojiId,
    },
    // Attachments, webhooks:
    CreateWebhook(crate::WebhookRecord),
    /// Name, avatar and channel of a webhook.
    UpdateWebhook(crate::WebhookRecord),
    DeleteWebhook(protocol::Snowflake),
    /// A message a webhook sent (with its channel's `last_message_id`, and
    /// its pending uploads linked to it).
    WebhookMessage(MessageRecord),
    // DMs, threads, application commands:
    /// A new message of a DM (its actor's own fence key), with the
    /// channel's `last_message_id`.
    CreateDmMessage(MessageRecord),
    /// A new thread: its channel, metadata and first members.
    CreateThread {
        channel: ChannelRecord,
        thread: ThreadRecord,
        members: Vec<ThreadMemberRecord>,
    },
    /// A thread's name, slowmode and metadata (archived, locked, ...).
    UpdateThread {
        channel: ChannelRecord,
        thread: ThreadRecord,
    },
    /// Adds a thread member; 0 if it already was one.
    AddThreadMember(ThreadMemberRecord),
    RemoveThreadMember {
        thread: ChannelId,
        user: UserId,
    },
    // The audit log:
    /// One entry, in the transaction of the change it records.
    AddAuditEntry(crate::community::AuditRecord),
}
