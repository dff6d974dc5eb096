//! Shapes of the answers that handlers build as JSON values rather than as
//! `protocol::model` types: what the OpenAPI document says of them. Never
//! constructed; `tests/it/openapi.rs` checks real answers against them.
#![allow(dead_code)]

use protocol::model::{Channel, Message, User};
use protocol::{GuildId, Snowflake, UserId};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

/// `GET /gateway`.
#[derive(Serialize, JsonSchema)]
pub struct Gateway {
    url: String,
}

#[derive(Serialize, JsonSchema)]
pub struct SessionStartLimit {
    total: u32,
    remaining: u32,
    reset_after: u64,
    max_concurrency: u32,
}

/// `GET /gateway/bot`.
#[derive(Serialize, JsonSchema)]
pub struct GatewayBot {
    url: String,
    shards: u32,
    session_start_limit: SessionStartLimit,
}

/// `POST /auth/register` and `/auth/login`: a user token.
#[derive(Serialize, JsonSchema)]
pub struct Token {
    token: String,
    user_id: UserId,
}

/// `GET /users/@me/guilds`: a partial guild with the caller's permissions.
#[derive(Serialize, JsonSchema)]
pub struct PartialGuild {
    id: GuildId,
    name: String,
    icon: Option<String>,
    banner: Option<String>,
    owner: bool,
    /// Decimal bits.
    permissions: String,
    features: Vec<String>,
}

/// `GET /applications/@me`: the bot's application.
#[derive(Serialize, JsonSchema)]
pub struct Application {
    id: Snowflake,
    name: String,
    icon: Option<String>,
    description: String,
    bot_public: bool,
    bot_require_code_grant: bool,
    verify_key: String,
    flags: u64,
    owner: User,
    bot: User,
    /// Where it gets interactions as signed POSTs (`null`: its gateway sessions).
    interactions_endpoint_url: Option<String>,
    approximate_guild_count: u64,
}

#[derive(Serialize, JsonSchema)]
pub struct InviteGuild {
    id: GuildId,
    name: String,
    icon: Option<String>,
    description: Option<String>,
    features: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct InviteChannel {
    id: Snowflake,
    name: String,
    #[serde(rename = "type")]
    kind: u8,
}

#[derive(Serialize, JsonSchema)]
pub struct Invite {
    #[serde(rename = "type")]
    kind: u8,
    code: String,
    guild: InviteGuild,
    channel: InviteChannel,
    inviter: Option<User>,
    uses: u32,
    max_uses: u32,
    /// Seconds; 0 never expires.
    max_age: u32,
    temporary: bool,
    created_at: String,
    expires_at: Option<String>,
}

#[derive(Serialize, JsonSchema)]
pub struct Ban {
    reason: Option<String>,
    user: User,
}

#[derive(Serialize, JsonSchema)]
pub struct Webhook {
    id: Snowflake,
    #[serde(rename = "type")]
    kind: u8,
    guild_id: GuildId,
    channel_id: Snowflake,
    name: Option<String>,
    avatar: Option<String>,
    token: Option<String>,
    application_id: Option<String>,
    url: String,
    /// Its creator; only to those who may manage webhooks.
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<User>,
}

/// A DM channel as its members see it.
#[derive(Serialize, JsonSchema)]
pub struct DmChannel {
    id: Snowflake,
    #[serde(rename = "type")]
    kind: u8,
    last_message_id: Option<Snowflake>,
    flags: u64,
    /// The other participants.
    recipients: Vec<User>,
}

/// Any channel: a guild channel, a thread or a DM.
#[derive(Serialize, JsonSchema)]
#[serde(untagged)]
pub enum AnyChannel {
    Guild(Channel),
    Thread(Box<Thread>),
    Dm(DmChannel),
}

#[derive(Serialize, JsonSchema)]
pub struct ThreadMetadata {
    archived: bool,
    auto_archive_duration: u32,
    archive_timestamp: String,
    locked: bool,
    create_timestamp: String,
    /// Private threads only.
    #[serde(skip_serializing_if = "Option::is_none")]
    invitable: Option<bool>,
}

#[derive(Serialize, JsonSchema)]
pub struct ThreadMember {
    id: Snowflake,
    user_id: UserId,
    join_timestamp: String,
    flags: u64,
    /// With `with_member=true`: the guild member.
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<protocol::model::Member>,
}

/// A thread channel.
#[derive(Serialize, JsonSchema)]
pub struct Thread {
    id: Snowflake,
    #[serde(rename = "type")]
    kind: u8,
    guild_id: GuildId,
    parent_id: Option<Snowflake>,
    owner_id: UserId,
    name: String,
    last_message_id: Option<Snowflake>,
    rate_limit_per_user: u32,
    flags: u64,
    message_count: u32,
    total_message_sent: u32,
    member_count: u32,
    thread_metadata: ThreadMetadata,
    applied_tags: Vec<String>,
    /// The caller's own thread member, when they are in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    member: Option<ThreadMember>,
}

/// `GET /guilds/{g}/threads/active` (`has_more` absent) and the archived lists.
#[derive(Serialize, JsonSchema)]
pub struct ThreadList {
    threads: Vec<Thread>,
    members: Vec<ThreadMember>,
    #[serde(skip_serializing_if = "Option::is_none")]
    has_more: Option<bool>,
}

/// An application command as stored, with its ids and version.
#[derive(Serialize, JsonSchema)]
pub struct ApplicationCommand {
    id: Snowflake,
    #[serde(rename = "type")]
    kind: u8,
    application_id: Snowflake,
    #[serde(skip_serializing_if = "Option::is_none")]
    guild_id: Option<GuildId>,
    name: String,
    description: String,
    version: String,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

/// What a command's create or edit reads: Discord's application command
/// (`name`, `description`, `type`, `options`, ...).
#[derive(serde::Deserialize, JsonSchema)]
pub struct CommandBody {
    name: Option<String>,
    description: Option<String>,
    #[serde(rename = "type")]
    kind: Option<u8>,
    options: Option<Vec<Value>>,
    default_member_permissions: Option<Value>,
    nsfw: Option<bool>,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

#[derive(Serialize, JsonSchema)]
pub struct PinnedMessage {
    pinned_at: String,
    message: Message,
}

/// `GET /channels/{c}/messages/pins`.
#[derive(Serialize, JsonSchema)]
pub struct Pins {
    items: Vec<PinnedMessage>,
    has_more: bool,
}

/// `{"items": [...]}`: lists throng keeps empty (application emojis, soundboard sounds).
#[derive(Serialize, JsonSchema)]
pub struct Items {
    items: Vec<Value>,
}

/// `GET /sticker-packs`: none.
#[derive(Serialize, JsonSchema)]
pub struct StickerPacks {
    sticker_packs: Vec<Value>,
}

/// `POST /_throng/admin/drop-sessions`.
#[derive(Serialize, JsonSchema)]
pub struct Dropped {
    dropped: u64,
}

/// `GET /_throng/admin/guilds/{g}/owner`: the node running the guild's actor.
#[derive(Serialize, JsonSchema)]
pub struct Owner {
    node: Option<u64>,
}

/// `GET /_throng/admin/stats`: the node's counters (see docs/deployment.md).
#[derive(Serialize, JsonSchema)]
pub struct Stats {
    sessions: u64,
    connections: u64,
    #[serde(flatten)]
    rest: serde_json::Map<String, Value>,
}

/// `GET /auth/sessions`.
#[derive(Serialize, JsonSchema)]
pub struct Sessions {
    user_sessions: Vec<Session>,
}

#[derive(Serialize, JsonSchema)]
pub struct Session {
    /// The session's public id (not its token's hash).
    id_hash: String,
    approx_last_used_time: String,
    created_at: String,
    expires_at: Option<String>,
    client_info: ClientInfo,
    /// The session of the token that asked.
    current: bool,
}

#[derive(Serialize, JsonSchema)]
pub struct ClientInfo {
    os: Option<String>,
    platform: Option<String>,
    location: Option<String>,
}

/// `POST /oauth2/authorize`: where the consent page goes next.
#[derive(Serialize, JsonSchema)]
pub struct Location {
    location: String,
}

/// `POST /oauth2/token`.
#[derive(Serialize, JsonSchema)]
pub struct OAuthToken {
    access_token: String,
    token_type: String,
    /// Seconds.
    expires_in: u64,
    refresh_token: String,
    /// Space-separated.
    scope: String,
}

/// An error of the OAuth2 token endpoint (RFC 6749).
#[derive(Serialize, JsonSchema)]
pub struct OAuthError {
    error: String,
    error_description: String,
}

/// One audit log entry.
#[derive(Serialize, JsonSchema)]
pub struct AuditLogEntry {
    id: Snowflake,
    /// Who did it; null for the system.
    user_id: Option<UserId>,
    /// What it was done to (a user, channel, role, ...), if anything.
    target_id: Option<Snowflake>,
    action_type: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    changes: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// `GET /guilds/{g}/audit-logs`.
#[derive(Serialize, JsonSchema)]
pub struct AuditLog {
    audit_log_entries: Vec<AuditLogEntry>,
    users: Vec<User>,
    webhooks: Vec<Value>,
    integrations: Vec<Value>,
    threads: Vec<Value>,
    application_commands: Vec<Value>,
    auto_moderation_rules: Vec<Value>,
    guild_scheduled_events: Vec<Value>,
}

/// `GET /guilds/{g}/messages/search` and `GET /channels/{c}/messages/search`.
#[derive(Serialize, JsonSchema)]
pub struct SearchResults {
    total_results: u64,
    /// Each hit as a list of one message.
    messages: Vec<Vec<Message>>,
    analytics_id: String,
    doing_deep_historical_index: bool,
}

/// The answer to an ack: `{"token": null}`, as Discord's.
#[derive(Serialize, JsonSchema)]
pub struct AckToken {
    pub token: Option<String>,
}
