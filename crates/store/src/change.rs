//! Changes to a guild's data, as its actor commits them: each goes through
//! [`crate::Store::apply_changes`], atomically and fenced by the actor's
//! ownership epoch, so only the guild's current owner writes.

use protocol::{ChannelId, GuildId, MessageId, UserId};

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
    CreateWebhook(crate::WebhookRecord),
    /// Name, avatar and channel of a webhook.
    UpdateWebhook(crate::WebhookRecord),
    DeleteWebhook(protocol::Snowflake),
    /// A message a webhook sent (with its channel's `last_message_id`, and
    /// its pending uploads linked to it).
    WebhookMessage(MessageRecord),
    // DMs, threads, application commands:
}
