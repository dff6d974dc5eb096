//! Changes users ask of a guild (REST), as plain data: the guild's actor,
//! wherever it runs, checks them against its own state (membership, roles,
//! overwrites: no store read), commits them through the node's writer,
//! fenced by its ownership epoch, applies them and fans the events out in
//! commit order, then answers with an [`OpReply`].
//!
//! The REST handler checks only the request's shape and reads what the
//! actor does not hold (a message's current row); everything that depends
//! on who the caller is happens in the actor.

use axum::http::StatusCode;
use protocol::{model, ChannelId, ErrorCode, MessageId, RoleId, UserId};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use store::{ChannelRecord, MemberRecord, MessageRecord, OverwriteRecord, RoleRecord, UserRecord};

use super::ReplyTo;

mod emojis;
mod pins;
mod reactions;
pub use emojis::EmojiAction;
pub use pins::PinAction;
pub use reactions::ReactionAction;
pub mod roles;
pub use roles::{BanAction, OverwriteAction, RoleAction, RolePatch};

/// A change `user` asks of a guild; the actor answers `reply`.
#[derive(Serialize, Deserialize)]
pub struct Op {
    pub user: UserId,
    pub action: Action,
    pub reply: ReplyTo,
    /// The request's `X-Audit-Log-Reason`, for the audit log entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// What is asked, grouped by resource.
#[derive(Serialize, Deserialize)]
pub enum Action {
    Message(MessageAction),
    Channel(ChannelAction),
    Member(MemberAction),
    Guild(GuildAction),
    // Roles, overwrites, bans (#14):
    Role(RoleAction),
    Overwrite(OverwriteAction),
    Ban(BanAction),
    // Reactions, emojis, pins, bulk delete (#14):
    Reaction(ReactionAction),
    Pin(PinAction),
    Emoji(EmojiAction),
    // Attachments, webhooks (#14):
    Webhook(WebhookAction),
    // DMs, threads, application commands (#14):
    Dm(super::dm::DmAction),
    Thread(super::threads::ThreadAction),
    // Interactions (#27):
    Interaction(super::interactions::InteractionAction),
}

/// A field of a PATCH: left alone, or set (to `None`: cleared). Unlike
/// `Option<Option<T>>`, it keeps the difference through JSON.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub enum Set<T> {
    #[default]
    Keep,
    To(T),
}

impl<T> Set<T> {
    /// Writes the new value into `slot`, if there is one.
    pub fn apply(self, slot: &mut T) {
        if let Set::To(v) = self {
            *slot = v;
        }
    }

    pub fn is_set(&self) -> bool {
        matches!(self, Set::To(_))
    }
}

impl<T> From<Option<T>> for Set<T> {
    /// A present JSON field (`Some`) sets, an absent one keeps.
    fn from(v: Option<T>) -> Set<T> {
        v.map_or(Set::Keep, Set::To)
    }
}

#[derive(Serialize, Deserialize)]
pub enum MessageAction {
    /// TYPING_START in a channel (SEND_MESSAGES).
    Typing { channel: ChannelId },
    /// May the caller mark `channel` read (they can see it: a guild
    /// channel they may view, a thread they may see, a DM of theirs)?
    /// Answered 204; the ack itself is written by the node. `message` is
    /// what the caller read up to (a passive update pending for that
    /// channel tells them of nothing newer).
    Ack { channel: ChannelId, message: protocol::MessageId },
    /// The author edits a message: `message` is its row with the edit
    /// applied (content, embeds, `edited_at`; `mentions` as parsed from the
    /// content: the actor keeps the members among them).
    Edit {
        message: Box<MessageRecord>,
        /// A reply's `referenced_message`, rendered (the actor has no
        /// history): `Some(None)` once the original is gone.
        referenced: Option<Option<Box<model::Message>>>,
        /// Whether it is pinned (REST read it: pins are not in the row).
        #[serde(default)]
        pinned: bool,
    },
    /// The author, or a member with MANAGE_MESSAGES, deletes a message.
    Delete { channel: ChannelId, id: MessageId, author: UserId },
}

#[derive(Serialize, Deserialize)]
pub enum ChannelAction {
    /// A new channel (MANAGE_CHANNELS); `position: None` puts it last.
    Create {
        channel: Box<ChannelRecord>,
        position: Option<i32>,
    },
    Modify {
        channel: ChannelId,
        patch: Box<ChannelPatch>,
    },
    Delete {
        channel: ChannelId,
    },
}

#[derive(Default, Serialize, Deserialize)]
pub struct ChannelPatch {
    pub name: Set<String>,
    pub topic: Set<Option<String>>,
    pub position: Set<i32>,
    pub nsfw: Set<bool>,
    pub parent_id: Set<Option<ChannelId>>,
    pub rate_limit_per_user: Set<u32>,
    pub overwrites: Set<Vec<OverwriteRecord>>,
}

/// Why a user may become a member: every way in names its reason, and the
/// actor checks it (there is no other way in but creating the guild).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Join {
    /// The caller joins by an invite the REST handler has just used.
    Invite,
    /// A bot (the caller, a member with CREATE_INSTANT_INVITE) adds a user
    /// who gave its application an OAuth2 `guilds.join` token, which the
    /// REST handler has checked.
    OAuth,
}

#[derive(Serialize, Deserialize)]
pub enum MemberAction {
    /// `user` becomes a member, for the reason `via`.
    Add { user: Box<UserRecord>, member: Box<MemberRecord>, via: Join },
    /// A bot authorized into the guild (`POST /oauth2/authorize` with the
    /// `bot` scope) by the caller, who needs MANAGE_GUILD and every
    /// permission given: it joins with its managed `role`. Already a
    /// member: its managed role takes the permissions given now.
    AuthorizeBot { bot: Box<UserRecord>, role: Box<RoleRecord>, joined_at: u64 },
    /// Nickname and roles. The caller's own nickname needs CHANGE_NICKNAME
    /// (or MANAGE_NICKNAMES); anyone else's MANAGE_NICKNAMES and a rank
    /// above theirs; roles MANAGE_ROLES, each role added or taken away
    /// below the caller's highest (see `guild::ops::roles`); a timeout
    /// (ms since the epoch, `None` ends it) MODERATE_MEMBERS and a rank
    /// above theirs, never of the owner or an administrator.
    Modify {
        user: UserId,
        nick: Set<Option<String>>,
        roles: Set<Vec<RoleId>>,
        #[serde(default)]
        timeout: Set<Option<u64>>,
    },
    /// A kick (KICK_MEMBERS, and a rank above the member's); never the owner.
    Remove { user: UserId },
    /// The caller leaves (never the owner).
    Leave,
    /// Members whose username, global name or nickname starts with `query`
    /// (any case), at most `limit` (1..=1000): for any member. `None`:
    /// the query was missing (400 50035 to a member).
    Search { query: Option<String>, limit: u32 },
}

#[derive(Serialize, Deserialize)]
pub enum GuildAction {
    /// MANAGE_GUILD.
    Modify { name: Set<String>, icon: Set<Option<String>>, description: Set<Option<String>>, system_channel_id: Set<Option<ChannelId>> },
    /// The owner only.
    Delete,
    /// An audit log entry for a change made outside the actor (an invite,
    /// command permissions), by a member: the actor writes and announces
    /// it like its own.
    Record(Box<AuditNote>),
}

/// Discord's audit log event types (those throng has actions for).
pub mod audit_kind {
    pub const GUILD_UPDATE: u16 = 1;
    pub const CHANNEL_CREATE: u16 = 10;
    pub const CHANNEL_UPDATE: u16 = 11;
    pub const CHANNEL_DELETE: u16 = 12;
    pub const CHANNEL_OVERWRITE_CREATE: u16 = 13;
    pub const CHANNEL_OVERWRITE_UPDATE: u16 = 14;
    pub const CHANNEL_OVERWRITE_DELETE: u16 = 15;
    pub const MEMBER_KICK: u16 = 20;
    pub const MEMBER_BAN_ADD: u16 = 22;
    pub const MEMBER_BAN_REMOVE: u16 = 23;
    pub const MEMBER_UPDATE: u16 = 24;
    pub const MEMBER_ROLE_UPDATE: u16 = 25;
    pub const BOT_ADD: u16 = 28;
    pub const ROLE_CREATE: u16 = 30;
    pub const ROLE_UPDATE: u16 = 31;
    pub const ROLE_DELETE: u16 = 32;
    pub const INVITE_CREATE: u16 = 40;
    pub const INVITE_DELETE: u16 = 42;
    pub const WEBHOOK_CREATE: u16 = 50;
    pub const WEBHOOK_UPDATE: u16 = 51;
    pub const WEBHOOK_DELETE: u16 = 52;
    pub const EMOJI_CREATE: u16 = 60;
    pub const EMOJI_UPDATE: u16 = 61;
    pub const EMOJI_DELETE: u16 = 62;
    pub const MESSAGE_DELETE: u16 = 72;
    pub const MESSAGE_BULK_DELETE: u16 = 73;
    pub const MESSAGE_PIN: u16 = 74;
    pub const MESSAGE_UNPIN: u16 = 75;
    pub const THREAD_CREATE: u16 = 110;
    pub const THREAD_UPDATE: u16 = 111;
    pub const THREAD_DELETE: u16 = 112;
    pub const APPLICATION_COMMAND_PERMISSION_UPDATE: u16 = 121;
}

/// An audit log entry before it has an id, an author or a reason.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AuditNote {
    pub action: u16,
    pub target: Option<u64>,
    #[serde(default)]
    pub changes: Vec<Value>,
    #[serde(default)]
    pub options: Option<Value>,
}

impl AuditNote {
    pub fn new(action: u16, target: impl Into<Option<u64>>) -> AuditNote {
        AuditNote { action, target: target.into(), changes: Vec::new(), options: None }
    }

    pub fn with(mut self, changes: Vec<Value>) -> AuditNote {
        self.changes = changes;
        self
    }

    pub fn options(mut self, o: Value) -> AuditNote {
        self.options = Some(o);
        self
    }

    /// One change: `key` with its value before (`None`: none) and after.
    pub fn change(key: &str, old: Option<Value>, new: Option<Value>) -> Value {
        let mut c = serde_json::Map::new();
        c.insert("key".into(), key.into());
        if let Some(o) = old {
            c.insert("old_value".into(), o);
        }
        if let Some(n) = new {
            c.insert("new_value".into(), n);
        }
        Value::Object(c)
    }

    /// The changes between two sets of fields: the keys whose values differ
    /// (`None` on one side: created or deleted, every key with a value;
    /// a null counts as no value).
    pub fn diff(old: Option<&[(&str, Value)]>, new: Option<&[(&str, Value)]>) -> Vec<Value> {
        let keys = old.or(new).map(|f| f.iter().map(|(k, _)| *k).collect::<Vec<_>>()).unwrap_or_default();
        let get = |f: Option<&[(&str, Value)]>, k: &str| f.and_then(|f| f.iter().find(|(x, _)| *x == k)).map(|(_, v)| v.clone());
        keys.into_iter()
            .filter_map(|k| {
                let (o, n) = (get(old, k).filter(|v| !v.is_null()), get(new, k).filter(|v| !v.is_null()));
                (o != n).then(|| AuditNote::change(k, o, n))
            })
            .collect()
    }
}

/// The actor's answer, as the REST handler turns it into a response.
#[derive(Serialize, Deserialize)]
pub enum OpReply {
    /// A 2xx status with a JSON body, or none (204).
    Done {
        status: u16,
        body: Option<Box<RawValue>>,
    },
    /// One of Discord's error codes with its status.
    Error {
        status: u16,
        code: ErrorCode,
    },
    /// 400 50035 with these field errors.
    Form(Value),
    /// The actor no longer owns the guild, or the writer is full: 503.
    Retry,
    Failed(String),
}

impl OpReply {
    pub fn ok<T: Serialize>(status: StatusCode, body: &T) -> OpReply {
        match serde_json::value::to_raw_value(body) {
            Ok(b) => OpReply::Done { status: status.as_u16(), body: Some(b) },
            Err(e) => OpReply::Failed(e.to_string()),
        }
    }

    /// `body`: JSON we encoded ourselves.
    pub fn ok_bytes(status: StatusCode, body: &bytes::Bytes) -> OpReply {
        OpReply::Done { status: status.as_u16(), body: Some(super::raw(body)) }
    }

    pub fn no_content() -> OpReply {
        OpReply::Done { status: StatusCode::NO_CONTENT.as_u16(), body: None }
    }

    pub fn error(status: StatusCode, code: ErrorCode) -> OpReply {
        OpReply::Error { status: status.as_u16(), code }
    }

    pub fn not_found(code: ErrorCode) -> OpReply {
        OpReply::error(StatusCode::NOT_FOUND, code)
    }

    pub fn forbidden(code: ErrorCode) -> OpReply {
        OpReply::error(StatusCode::FORBIDDEN, code)
    }

    /// A 50035 error for one field.
    pub fn field(field: &str, code: &str, message: &str) -> OpReply {
        OpReply::Form(protocol::codes::form_error(field, code, message))
    }
}

/// Webhooks of a guild's channels, and the messages they send.
#[derive(Serialize, Deserialize)]
pub enum WebhookAction {
    /// A new webhook (MANAGE_WEBHOOKS in its channel). `body`: the webhook
    /// object the REST handler rendered, the answer once committed.
    Create { webhook: Box<store::WebhookRecord>, body: Value },
    /// Name, avatar or channel. `by_token`: the caller proved the webhook's
    /// token (no user; the channel cannot change). Otherwise the caller
    /// needs MANAGE_WEBHOOKS in the webhook's channel, and in the new one.
    Modify { webhook: Box<store::WebhookRecord>, from: ChannelId, by_token: bool, body: Value },
    /// As `Modify`, for removing it.
    Delete { id: protocol::Snowflake, channel: ChannelId, by_token: bool },
    /// A message the webhook sends (its token was checked): its channel must
    /// still exist; no member or permission is involved.
    Execute { message: Box<MessageRecord> },
}
