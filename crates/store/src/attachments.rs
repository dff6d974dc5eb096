//! Rows of uploaded files and incoming webhooks (issue #14: attachments,
//! webhooks), and what both backends share about them.

use protocol::{ChannelId, GuildId, MessageId, Snowflake, UserId};
use serde_json::Value;

use crate::MessageRecord;

/// One uploaded file. Its content is on disk, named by `hash`; `message_id`
/// is `None` while the upload's message is not committed (a pending upload).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AttachmentRecord {
    pub id: Snowflake,
    pub channel_id: ChannelId,
    pub message_id: Option<MessageId>,
    /// SHA-256 of the content, lowercase hex: the file's name on disk.
    pub hash: String,
    pub filename: String,
    pub size: u64,
    pub content_type: Option<String>,
    pub width: Option<u32>,
    pub height: Option<u32>,
    pub description: Option<String>,
    pub created_at: u64,
    /// Who uploaded it (a user, or a webhook's creator): whose storage
    /// quota it counts against. `None` for rows from before uploaders were
    /// recorded.
    pub uploader_id: Option<UserId>,
}

/// An incoming webhook of a guild channel.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WebhookRecord {
    pub id: Snowflake,
    pub guild_id: GuildId,
    pub channel_id: ChannelId,
    /// 1: incoming (the only kind throng has).
    pub kind: u8,
    pub name: String,
    pub avatar: Option<String>,
    pub token: String,
    /// Who created it (shown as the webhook's `user`).
    pub creator_id: Option<UserId>,
    pub application_id: Option<u64>,
    pub created_at: u64,
}

/// The attachment ids a message carries (`extra.attachments[].id`): the
/// pending uploads its commit links to it.
pub(crate) fn attachment_ids(m: &MessageRecord) -> impl Iterator<Item = i64> + '_ {
    m.extra.get("attachments").and_then(Value::as_array).into_iter().flatten().filter_map(|a| match a.get("id") {
        Some(Value::String(s)) => s.parse::<u64>().ok().map(|v| v as i64),
        Some(Value::Number(n)) => n.as_u64().map(|v| v as i64),
        _ => None,
    })
}
