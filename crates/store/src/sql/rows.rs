//! Rows as both backends store them, their columns, and the records they
//! become. Ids and integers are 64-bit signed integers (a u64 stored as the
//! i64 of its bits); lists and JSON objects are JSON text.

use protocol::id::EmojiId;
use protocol::{ApplicationId, ChannelId, GuildId, MessageId, RoleId, Snowflake, UserId};
use serde::de::Error as _;
use sqlx::FromRow;

use crate::accounts::{GrantKind, GrantRecord, TokenRecord};
use crate::*;

pub(crate) const USER_COLS: &str = "id, username, global_name, avatar, bot, flags, created_at";
pub(crate) const APPLICATION_COLS: &str = "id, name, owner_id, bot_user_id, flags, verify_key, interactions_endpoint_url";
pub(crate) const GUILD_COLS: &str = "id, name, icon, description, owner_id, system_channel_id, created_at";
pub(crate) const ROLE_COLS: &str = "id, guild_id, name, color, hoist, position, permissions, mentionable, bot_id";
pub(crate) const CHANNEL_COLS: &str =
    "id, guild_id, kind, name, position, topic, nsfw, parent_id, rate_limit_per_user, overwrites, last_message_id";
pub(crate) const MEMBER_COLS: &str = "guild_id, user_id, nick, roles, joined_at, flags, communication_disabled_until";
pub(crate) const MESSAGE_COLS: &str =
    "id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra";
pub(crate) const INVITE_COLS: &str = "code, guild_id, channel_id, inviter_id, max_age, max_uses, uses, created_at";
pub(crate) const BAN_COLS: &str = "guild_id, user_id, reason, created_at";
pub(crate) const EMOJI_COLS: &str = "id, guild_id, name, animated, roles, creator_id";
pub(crate) const ATTACHMENT_COLS: &str =
    "id, channel_id, message_id, hash, filename, size, content_type, width, height, description, created_at, uploader_id";
pub(crate) const WEBHOOK_COLS: &str = "id, guild_id, channel_id, kind, name, avatar, token, creator_id, application_id, created_at";
pub(crate) const THREAD_COLS: &str =
    "channel_id, guild_id, owner_id, archived, archive_timestamp, auto_archive_duration, locked, invitable, created_at";
pub(crate) const THREAD_MEMBER_COLS: &str = "thread_id, user_id, join_timestamp, flags";
pub(crate) const COMMAND_COLS: &str = "id, application_id, guild_id, kind, name, version, body";
pub(crate) const GRANT_COLS: &str = "hash, kind, application_id, user_id, scopes, redirect_uri, expires_at";

/// `cols` of the table aliased `alias` in a join: `c.id, c.guild_id, …`.
pub(crate) fn qualified(alias: &str, cols: &str) -> String {
    cols.split(", ").map(|c| format!("{alias}.{c}")).collect::<Vec<_>>().join(", ")
}

/// A list of ids as stored in a column (roles, mentions): a JSON array.
pub(crate) fn ids_json(ids: impl IntoIterator<Item = u64>) -> String {
    serde_json::Value::from(ids.into_iter().collect::<Vec<u64>>()).to_string()
}

/// `[u8; 32]` from a stored hash column.
pub(crate) fn hash32(v: Vec<u8>) -> Result<[u8; 32]> {
    <[u8; 32]>::try_from(v.as_slice()).map_err(|_| StoreError::Corrupt(serde_json::Error::custom("stored hash is not 32 bytes")))
}

#[derive(FromRow)]
pub(crate) struct UserRow {
    id: i64,
    username: String,
    global_name: Option<String>,
    avatar: Option<String>,
    bot: bool,
    flags: i64,
    created_at: i64,
}

impl From<UserRow> for UserRecord {
    fn from(r: UserRow) -> Self {
        UserRecord {
            id: UserId(r.id as u64),
            username: r.username,
            global_name: r.global_name,
            avatar: r.avatar,
            bot: r.bot,
            flags: r.flags as u64,
            created_at: r.created_at as u64,
        }
    }
}

#[derive(FromRow)]
pub(crate) struct ApplicationRow {
    id: i64,
    name: String,
    owner_id: Option<i64>,
    bot_user_id: i64,
    flags: i64,
    verify_key: String,
    interactions_endpoint_url: Option<String>,
}

impl From<ApplicationRow> for ApplicationRecord {
    fn from(r: ApplicationRow) -> Self {
        ApplicationRecord {
            id: ApplicationId(r.id as u64),
            name: r.name,
            owner_id: r.owner_id.map(|v| UserId(v as u64)),
            bot_user_id: UserId(r.bot_user_id as u64),
            flags: r.flags as u64,
            verify_key: r.verify_key,
            interactions_endpoint_url: r.interactions_endpoint_url,
        }
    }
}

#[derive(FromRow)]
pub(crate) struct GuildRow {
    id: i64,
    name: String,
    icon: Option<String>,
    description: Option<String>,
    owner_id: i64,
    system_channel_id: Option<i64>,
    created_at: i64,
}

impl From<GuildRow> for GuildRecord {
    fn from(r: GuildRow) -> Self {
        GuildRecord {
            id: GuildId(r.id as u64),
            name: r.name,
            icon: r.icon,
            description: r.description,
            owner_id: UserId(r.owner_id as u64),
            system_channel_id: r.system_channel_id.map(|v| ChannelId(v as u64)),
            created_at: r.created_at as u64,
        }
    }
}

#[derive(FromRow)]
pub(crate) struct RoleRow {
    id: i64,
    pub(crate) guild_id: i64,
    name: String,
    color: i64,
    hoist: bool,
    position: i64,
    permissions: i64,
    mentionable: bool,
    bot_id: Option<i64>,
}

impl From<RoleRow> for RoleRecord {
    fn from(r: RoleRow) -> Self {
        RoleRecord {
            id: RoleId(r.id as u64),
            guild_id: GuildId(r.guild_id as u64),
            name: r.name,
            color: r.color as u32,
            hoist: r.hoist,
            position: r.position as i32,
            permissions: r.permissions as u64,
            mentionable: r.mentionable,
            bot_id: r.bot_id.map(|b| UserId(b as u64)),
        }
    }
}

#[derive(FromRow)]
pub(crate) struct ChannelRow {
    id: i64,
    pub(crate) guild_id: Option<i64>,
    kind: i64,
    name: String,
    position: i64,
    topic: Option<String>,
    nsfw: bool,
    parent_id: Option<i64>,
    rate_limit_per_user: i64,
    overwrites: String,
    last_message_id: Option<i64>,
}

impl TryFrom<ChannelRow> for ChannelRecord {
    type Error = StoreError;
    fn try_from(r: ChannelRow) -> Result<Self> {
        Ok(ChannelRecord {
            id: ChannelId(r.id as u64),
            guild_id: r.guild_id.map(|v| GuildId(v as u64)),
            kind: r.kind as u8,
            name: r.name,
            position: r.position as i32,
            topic: r.topic,
            nsfw: r.nsfw,
            parent_id: r.parent_id.map(|v| ChannelId(v as u64)),
            rate_limit_per_user: r.rate_limit_per_user as u32,
            overwrites: serde_json::from_str(&r.overwrites)?,
            last_message_id: r.last_message_id.map(|v| MessageId(v as u64)),
        })
    }
}

#[derive(FromRow)]
pub(crate) struct MemberRow {
    guild_id: i64,
    user_id: i64,
    nick: Option<String>,
    roles: String,
    joined_at: i64,
    flags: i64,
    communication_disabled_until: Option<i64>,
}

impl TryFrom<MemberRow> for MemberRecord {
    type Error = StoreError;
    fn try_from(r: MemberRow) -> Result<Self> {
        let roles: Vec<u64> = serde_json::from_str(&r.roles)?;
        Ok(MemberRecord {
            guild_id: GuildId(r.guild_id as u64),
            user_id: UserId(r.user_id as u64),
            nick: r.nick,
            roles: roles.into_iter().map(RoleId).collect(),
            joined_at: r.joined_at as u64,
            flags: r.flags as u64,
            communication_disabled_until: r.communication_disabled_until.map(|t| t as u64),
        })
    }
}

/// One member as `load_guilds` aggregates it: a JSON array in this order.
#[derive(serde::Deserialize)]
pub(crate) struct MemberJson(
    i64,            // user_id
    Option<String>, // nick
    Vec<u64>,       // roles
    i64,            // joined_at
    i64,            // member flags
    String,         // username
    Option<String>, // global_name
    Option<String>, // avatar
    JsonBool,       // bot
    i64,            // user flags
    i64,            // created_at
    Option<i64>,    // communication_disabled_until
);

/// A flag in JSON: `true`/`false` from PostgreSQL, 1/0 from SQLite (which
/// stores booleans as integers). Read by hand: serde's untagged enums
/// buffer each value first, a tenth of a million-member guild's load.
struct JsonBool(bool);

impl<'de> serde::Deserialize<'de> for JsonBool {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = JsonBool;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a boolean or an integer")
            }
            fn visit_bool<E>(self, b: bool) -> std::result::Result<JsonBool, E> {
                Ok(JsonBool(b))
            }
            fn visit_i64<E>(self, n: i64) -> std::result::Result<JsonBool, E> {
                Ok(JsonBool(n != 0))
            }
            fn visit_u64<E>(self, n: u64) -> std::result::Result<JsonBool, E> {
                Ok(JsonBool(n != 0))
            }
        }
        d.deserialize_any(V)
    }
}

impl MemberJson {
    pub(crate) fn into_records(self, guild_id: GuildId) -> (MemberRecord, UserRecord) {
        let MemberJson(user_id, nick, roles, joined_at, mflags, username, global_name, avatar, bot, flags, created_at, until) = self;
        let user_id = UserId(user_id as u64);
        let member = MemberRecord {
            guild_id,
            user_id,
            nick,
            roles: roles.into_iter().map(RoleId).collect(),
            joined_at: joined_at as u64,
            flags: mflags as u64,
            communication_disabled_until: until.map(|t| t as u64),
        };
        let JsonBool(bot) = bot;
        let user = UserRecord { id: user_id, username, global_name, avatar, bot, flags: flags as u64, created_at: created_at as u64 };
        (member, user)
    }
}

#[derive(FromRow)]
pub(crate) struct MessageRow {
    id: i64,
    channel_id: i64,
    guild_id: Option<i64>,
    author_id: i64,
    content: String,
    edited_at: Option<i64>,
    kind: i64,
    flags: i64,
    tts: bool,
    mention_everyone: bool,
    mentions: String,
    reference: Option<String>,
    extra: String,
}

impl TryFrom<MessageRow> for MessageRecord {
    type Error = StoreError;
    fn try_from(r: MessageRow) -> Result<Self> {
        let mentions: Vec<u64> = serde_json::from_str(&r.mentions)?;
        Ok(MessageRecord {
            id: MessageId(r.id as u64),
            channel_id: ChannelId(r.channel_id as u64),
            guild_id: r.guild_id.map(|v| GuildId(v as u64)),
            author_id: UserId(r.author_id as u64),
            content: r.content,
            edited_at: r.edited_at.map(|v| v as u64),
            kind: r.kind as u8,
            flags: r.flags as u64,
            tts: r.tts,
            mention_everyone: r.mention_everyone,
            mentions: mentions.into_iter().map(UserId).collect(),
            reference: r.reference.as_deref().map(serde_json::from_str).transpose()?,
            extra: serde_json::from_str(&r.extra)?,
        })
    }
}

#[derive(FromRow)]
pub(crate) struct InviteRow {
    code: String,
    guild_id: i64,
    channel_id: i64,
    inviter_id: Option<i64>,
    max_age: i64,
    max_uses: i64,
    uses: i64,
    created_at: i64,
}

impl From<InviteRow> for InviteRecord {
    fn from(r: InviteRow) -> Self {
        InviteRecord {
            code: r.code,
            guild_id: GuildId(r.guild_id as u64),
            channel_id: ChannelId(r.channel_id as u64),
            inviter_id: r.inviter_id.map(|v| UserId(v as u64)),
            max_age: r.max_age as u32,
            max_uses: r.max_uses as u32,
            uses: r.uses as u32,
            created_at: r.created_at as u64,
        }
    }
}

#[derive(FromRow)]
pub(crate) struct BanRow {
    guild_id: i64,
    user_id: i64,
    reason: Option<String>,
    created_at: i64,
}

impl From<BanRow> for BanRecord {
    fn from(r: BanRow) -> Self {
        BanRecord {
            guild_id: GuildId(r.guild_id as u64),
            user_id: UserId(r.user_id as u64),
            reason: r.reason,
            created_at: r.created_at as u64,
        }
    }
}

#[derive(FromRow)]
pub(crate) struct EmojiRow {
    id: i64,
    pub(crate) guild_id: i64,
    name: String,
    animated: bool,
    roles: String,
    creator_id: Option<i64>,
}

impl TryFrom<EmojiRow> for EmojiRecord {
    type Error = StoreError;
    fn try_from(r: EmojiRow) -> Result<Self> {
        let roles: Vec<u64> = serde_json::from_str(&r.roles)?;
        Ok(EmojiRecord {
            id: EmojiId(r.id as u64),
            guild_id: GuildId(r.guild_id as u64),
            name: r.name,
            animated: r.animated,
            roles: roles.into_iter().map(RoleId).collect(),
            creator_id: r.creator_id.map(|v| UserId(v as u64)),
        })
    }
}

#[derive(FromRow)]
pub(crate) struct AttachmentRow {
    id: i64,
    channel_id: i64,
    message_id: Option<i64>,
    hash: String,
    filename: String,
    size: i64,
    content_type: Option<String>,
    width: Option<i64>,
    height: Option<i64>,
    description: Option<String>,
    created_at: i64,
    uploader_id: Option<i64>,
}

impl From<AttachmentRow> for AttachmentRecord {
    fn from(r: AttachmentRow) -> Self {
        AttachmentRecord {
            id: Snowflake(r.id as u64),
            channel_id: ChannelId(r.channel_id as u64),
            message_id: r.message_id.map(|m| MessageId(m as u64)),
            hash: r.hash,
            filename: r.filename,
            size: r.size as u64,
            content_type: r.content_type,
            width: r.width.map(|v| v as u32),
            height: r.height.map(|v| v as u32),
            description: r.description,
            created_at: r.created_at as u64,
            uploader_id: r.uploader_id.map(|u| UserId(u as u64)),
        }
    }
}

#[derive(FromRow)]
pub(crate) struct WebhookRow {
    id: i64,
    guild_id: i64,
    channel_id: i64,
    kind: i64,
    name: String,
    avatar: Option<String>,
    token: String,
    creator_id: Option<i64>,
    application_id: Option<i64>,
    created_at: i64,
}

impl From<WebhookRow> for WebhookRecord {
    fn from(r: WebhookRow) -> Self {
        WebhookRecord {
            id: Snowflake(r.id as u64),
            guild_id: GuildId(r.guild_id as u64),
            channel_id: ChannelId(r.channel_id as u64),
            kind: r.kind as u8,
            name: r.name,
            avatar: r.avatar,
            token: r.token,
            creator_id: r.creator_id.map(|u| UserId(u as u64)),
            application_id: r.application_id.map(|a| a as u64),
            created_at: r.created_at as u64,
        }
    }
}

#[derive(FromRow)]
pub(crate) struct ThreadRow {
    channel_id: i64,
    guild_id: i64,
    owner_id: i64,
    archived: bool,
    archive_timestamp: i64,
    auto_archive_duration: i64,
    locked: bool,
    invitable: bool,
    created_at: i64,
}

impl From<ThreadRow> for ThreadRecord {
    fn from(r: ThreadRow) -> Self {
        ThreadRecord {
            channel_id: ChannelId(r.channel_id as u64),
            guild_id: GuildId(r.guild_id as u64),
            owner_id: UserId(r.owner_id as u64),
            archived: r.archived,
            archive_timestamp: r.archive_timestamp as u64,
            auto_archive_duration: r.auto_archive_duration as u32,
            locked: r.locked,
            invitable: r.invitable,
            created_at: r.created_at as u64,
        }
    }
}

#[derive(FromRow)]
pub(crate) struct ThreadMemberRow {
    thread_id: i64,
    user_id: i64,
    join_timestamp: i64,
    flags: i64,
}

impl From<ThreadMemberRow> for ThreadMemberRecord {
    fn from(r: ThreadMemberRow) -> Self {
        ThreadMemberRecord {
            thread_id: ChannelId(r.thread_id as u64),
            user_id: UserId(r.user_id as u64),
            join_timestamp: r.join_timestamp as u64,
            flags: r.flags as u64,
        }
    }
}

#[derive(FromRow)]
pub(crate) struct CommandRow {
    id: i64,
    application_id: i64,
    guild_id: Option<i64>,
    kind: i64,
    name: String,
    version: i64,
    body: String,
}

impl TryFrom<CommandRow> for CommandRecord {
    type Error = StoreError;
    fn try_from(r: CommandRow) -> Result<Self> {
        Ok(CommandRecord {
            id: r.id as u64,
            application_id: ApplicationId(r.application_id as u64),
            guild_id: r.guild_id.map(|g| GuildId(g as u64)),
            kind: r.kind as u8,
            name: r.name,
            version: r.version as u64,
            body: serde_json::from_str(&r.body)?,
        })
    }
}

/// A token of a user the caller names.
#[derive(FromRow)]
pub(crate) struct TokenRow {
    hash: Vec<u8>,
    created_at: i64,
    expires_at: Option<i64>,
    client: Option<String>,
}

impl TokenRow {
    pub(crate) fn into_record(self, user_id: UserId) -> Result<TokenRecord> {
        Ok(TokenRecord {
            hash: hash32(self.hash)?,
            user_id,
            created_at: self.created_at as u64,
            expires_at: self.expires_at.map(|e| e as u64),
            client: self.client,
        })
    }
}

#[derive(FromRow)]
pub(crate) struct GrantRow {
    hash: Vec<u8>,
    kind: i64,
    application_id: i64,
    user_id: i64,
    scopes: String,
    redirect_uri: Option<String>,
    expires_at: i64,
}

impl TryFrom<GrantRow> for GrantRecord {
    type Error = StoreError;
    fn try_from(r: GrantRow) -> Result<Self> {
        Ok(GrantRecord {
            hash: hash32(r.hash)?,
            kind: match r.kind {
                0 => GrantKind::Code,
                2 => GrantKind::Refresh,
                _ => GrantKind::Access,
            },
            application_id: ApplicationId(r.application_id as u64),
            user_id: UserId(r.user_id as u64),
            scopes: serde_json::from_str(&r.scopes)?,
            redirect_uri: r.redirect_uri,
            expires_at: r.expires_at as u64,
        })
    }
}

/// A token's row in IDENTIFY's lookup; `guilds` as its backend aggregates
/// the user's guild ids.
#[derive(FromRow)]
pub(crate) struct IdentifyRow<G> {
    hash: Vec<u8>,
    #[sqlx(flatten)]
    user: UserRow,
    pub(crate) guilds: G,
    app_id: Option<i64>,
    app_flags: Option<i64>,
    expires_at: Option<i64>,
}

impl<G> IdentifyRow<G> {
    /// The token's hash and what IDENTIFY needs of it (`None`: a stored
    /// hash of the wrong length).
    pub(crate) fn into_record(self, guilds: Vec<GuildId>) -> Option<([u8; 32], IdentifyRecord)> {
        let hash = <[u8; 32]>::try_from(self.hash.as_slice()).ok()?;
        let application = self.app_id.map(|id| (ApplicationId(id as u64), self.app_flags.unwrap_or(0) as u64));
        Some((hash, IdentifyRecord { user: self.user.into(), guilds, application, token_expires_at: self.expires_at.map(|e| e as u64) }))
    }
}
