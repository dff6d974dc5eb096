//! Changes to a guild's data, as its actor commits them: each goes through
//! [`crate::Store::apply_changes`], atomically and fenced by the actor's
//! ownership epoch, so only the guild's current owner writes.

use protocol::{ChannelId, GuildId, MessageId, UserId};

use crate::dms_threads_commands::{ThreadMemberRecord, ThreadRecord};
use crate::records::*;

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

    // Reactions, emojis, pins, bulk delete:

    // Attachments, webhooks:

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
}
