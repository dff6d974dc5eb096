//! Guilds, their channels, roles and members.

use std::sync::Arc;

use super::Query;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::model::{channel_type, permission};
use protocol::{ChannelId, ErrorCode, GuildId, RoleId, UserId};
use serde::Deserialize;
use serde_json::json;
use store::{ChannelRecord, GuildRecord, MemberRecord, NewGuild, OverwriteRecord, RoleRecord};

use super::guard::GuildMay;
use super::{ask, guild_access, json_bytes, parse_id, publish, read_json, ApiError, ApiResult, Caller, JsonBody};
use guild::{GuildEvent, GuildMsg};
use node::auth::now_ms;
use node::convert;
use node::route::ops::{ChannelAction, GuildAction, Join, MemberAction};
use node::route::{Action, Set};
use node::Node;

fn json_ok<T: serde::Serialize>(status: StatusCode, v: &T) -> ApiResult<Response> {
    Ok(json_bytes(status, serde_json::to_vec(v).map_err(ApiError::internal)?))
}

fn guild_json(g: &GuildRecord, roles: &[RoleRecord], extra: serde_json::Value) -> serde_json::Value {
    let mut v = serde_json::to_value(convert::guild(g, roles)).unwrap_or_default();
    if let (Some(o), serde_json::Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
    v
}

/// Discord's longest slow mode: 6 hours.
pub const MAX_SLOWMODE_S: u32 = 21_600;

fn check_name(field: &str, name: &str, min: usize, max: usize) -> ApiResult<()> {
    let n = name.chars().count();
    if n < min || n > max {
        return Err(ApiError::field(field, "BASE_TYPE_BAD_LENGTH", &format!("Must be between {min} and {max} in length.")));
    }
    Ok(())
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateGuild {
    name: Option<String>,
    description: Option<String>,
}

pub async fn create(State(node): State<Arc<Node>>, Caller(u): Caller, JsonBody(b): JsonBody<CreateGuild>) -> ApiResult<Response> {
    let name = b.name.ok_or_else(|| ApiError::field("name", "BASE_TYPE_REQUIRED", "This field is required"))?;
    check_name("name", &name, 2, 100)?;
    if node.store.guilds_of_user(u.id).await?.len() as u32 >= node.config.limits.max_guilds_per_user {
        return Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::MaxGuilds));
    }
    let gid: GuildId = node.ids.next().into();
    let cid: ChannelId = node.ids.next().into();
    let now = now_ms();
    let guild = GuildRecord {
        id: gid,
        name,
        icon: None,
        description: b.description,
        owner_id: u.id,
        system_channel_id: Some(cid),
        created_at: now,
    };
    let everyone = guild::everyone_role(gid);
    let general = guild::text_channel(cid, gid, "general".into(), 0);
    let owner = MemberRecord::joined(gid, u.id, now);
    let ng = NewGuild { guild, roles: vec![everyone], channels: vec![general], members: vec![owner.clone()] };
    node.store.create_guild(&ng).await?;
    // The owner's live sessions receive GUILD_CREATE, as for any new member.
    publish(&node, gid, GuildEvent::MemberAdd { member: owner, user: (*u).clone() });
    let body = guild_json(&ng.guild, &ng.roles, json!({ "channels": ng.channels.iter().map(convert::channel).collect::<Vec<_>>() }));
    json_ok(StatusCode::CREATED, &body)
}

/// How long `GET /guilds/{g}?with_counts=true` waits for the guild actor's
/// counts before it answers with the store's member count alone.
const COUNTS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// `GET /guilds/{g}/members`: Discord's default and largest page.
const MEMBERS_PAGE_DEFAULT: u32 = 1;
const MEMBERS_PAGE_MAX: u32 = 1000;

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct WithCounts {
    #[serde(default, deserialize_with = "protocol::de::flag")]
    with_counts: Option<bool>,
}

pub async fn get(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    Query(q): Query<WithCounts>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let a = guild_access(&node, gid, u.id).await?;
    let roles = node.store.roles_of_guild(gid).await?;
    let extra = if q.with_counts.unwrap_or(false) {
        // The guild's actor has both counts; if it cannot answer (busy,
        // still loading after a moment), the store has the member count.
        let (reply, rx) = node.replies.register();
        let counts = match node.guilds.send(gid.into(), GuildMsg::Counts { reply }) {
            Ok(()) => tokio::time::timeout(COUNTS_TIMEOUT, rx)
                .await
                .ok()
                .and_then(Result::ok)
                .and_then(|b| serde_json::from_slice::<(usize, usize)>(&b).ok()),
            Err(_) => None,
        };
        let (members, present) = match counts {
            Some(c) => c,
            None => (node.store.count_members(gid).await? as usize, 0),
        };
        json!({ "approximate_member_count": members, "approximate_presence_count": present })
    } else {
        json!({})
    };
    let mut extra = extra;
    extra["emojis"] = json!(node.store.emojis_of(gid).await?.iter().map(|e| node::emoji::full(e, None)).collect::<Vec<_>>());
    json_ok(StatusCode::OK, &guild_json(&a.guild, &roles, extra))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct ModifyGuild {
    name: Option<String>,
    /// A data URI (PNG, JPEG, GIF or WebP), or null to remove it.
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    icon: Option<Option<String>>,
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    description: Option<Option<String>>,
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    system_channel_id: Option<Option<ChannelId>>,
}

pub async fn modify(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    _: GuildMay<{ permission::MANAGE_GUILD }>,
    JsonBody(b): JsonBody<ModifyGuild>,
) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    if let Some(n) = &b.name {
        check_name("name", n, 2, 100)?;
    }
    // A new icon is written only for someone who may change the guild
    // (`GuildMay` above; the actor checks again when it commits the name of
    // the file).
    let icon = match &b.icon {
        Some(Some(uri)) => {
            let max = node.config.limits.max_avatar_bytes;
            let (bytes, kind) = node::emoji::decode_image_uri(uri, max).map_err(|e| match e {
                node::emoji::ImageError::TooLarge => {
                    ApiError::field("icon", "BINARY_TYPE_MAX_SIZE", &format!("File cannot be larger than {max} bytes."))
                }
                node::emoji::ImageError::Invalid => ApiError::field("icon", "IMAGE_INVALID", "Invalid image data"),
            })?;
            let hash = super::users::avatar_hash(&bytes, node::emoji::animated(kind, &bytes));
            let path = super::users::image_path(&node.config, "icons", gid.0, &hash);
            if let Some(dir) = path.parent() {
                tokio::fs::create_dir_all(dir).await.map_err(|e| ApiError::internal(format!("icon directory: {e}")))?;
            }
            tokio::fs::write(&path, &bytes).await.map_err(|e| ApiError::internal(format!("icon file: {e}")))?;
            Some(Some(hash))
        }
        Some(None) => Some(None),
        None => None,
    };
    let action = GuildAction::Modify {
        name: b.name.into(),
        icon: icon.into(),
        description: b.description.into(),
        system_channel_id: b.system_channel_id.into(),
    };
    ask(&node, gid, u.id, Action::Guild(action)).await
}

/// `GET /icons/{guild_id}/{hash}.{png|jpg|webp|gif}`: a guild's icon (no
/// token, as Discord's CDN; the name is its content's hash).
pub async fn icon(State(node): State<Arc<Node>>, Path((guild, file)): Path<(String, String)>) -> Response {
    super::users::serve_image(&node, "icons", &guild, &file).await
}

/// `DELETE /guilds/{id}`: the owner deletes the guild.
pub async fn delete(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    ask(&node, parse_id(&id, ErrorCode::UnknownGuild)?, u.id, Action::Guild(GuildAction::Delete)).await
}

/// `DELETE /users/@me/guilds/{id}`: leave a guild (the owner cannot).
pub async fn leave(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    ask(&node, parse_id(&id, ErrorCode::UnknownGuild)?, u.id, Action::Member(MemberAction::Leave)).await
}

pub async fn channels(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let a = guild_access(&node, gid, u.id).await?;
    let list: Vec<_> = node
        .store
        .channels_of_guild(gid)
        .await?
        .iter()
        // Threads are listed apart (`/guilds/{g}/threads/active`), as on Discord.
        .filter(|c| !store::is_thread(c.kind) && a.in_channel(c) & permission::VIEW_CHANNEL != 0)
        .map(convert::channel)
        .collect();
    json_ok(StatusCode::OK, &list)
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct OverwriteIn {
    id: protocol::Snowflake,
    #[serde(rename = "type")]
    kind: u8,
    #[serde(default)]
    allow: Option<StrOrInt>,
    #[serde(default)]
    deny: Option<StrOrInt>,
}

/// Permission bits arrive as strings (Discord) or integers (some clients).
#[derive(schemars::JsonSchema, Deserialize)]
#[serde(untagged)]
pub enum StrOrInt {
    S(String),
    I(u64),
}

impl StrOrInt {
    fn bits(&self) -> ApiResult<u64> {
        self.bits_of("permission_overwrites")
    }

    /// The bits, or 400 50035 naming `field`.
    pub fn bits_of(&self, field: &str) -> ApiResult<u64> {
        match self {
            StrOrInt::I(i) => Ok(*i),
            StrOrInt::S(s) => s.parse().map_err(|_| ApiError::field(field, "BASE_TYPE_INVALID", "Invalid permission bits")),
        }
    }
}

pub fn overwrites(v: Vec<OverwriteIn>) -> ApiResult<Vec<OverwriteRecord>> {
    v.into_iter()
        .map(|o| {
            if o.kind > 1 {
                return Err(ApiError::field("permission_overwrites", "BASE_TYPE_CHOICES", "type must be 0 or 1"));
            }
            Ok(OverwriteRecord {
                id: o.id.0,
                kind: o.kind,
                allow: o.allow.map(|b| b.bits()).transpose()?.unwrap_or(0),
                deny: o.deny.map(|b| b.bits()).transpose()?.unwrap_or(0),
            })
        })
        .collect()
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateChannel {
    name: Option<String>,
    #[serde(rename = "type")]
    kind: Option<u8>,
    topic: Option<String>,
    position: Option<i32>,
    parent_id: Option<ChannelId>,
    nsfw: Option<bool>,
    rate_limit_per_user: Option<u32>,
    permission_overwrites: Option<Vec<OverwriteIn>>,
}

pub async fn create_channel(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    _: GuildMay<{ permission::MANAGE_CHANNELS }>,
    JsonBody(b): JsonBody<CreateChannel>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let name = b.name.ok_or_else(|| ApiError::field("name", "BASE_TYPE_REQUIRED", "This field is required"))?;
    check_name("name", &name, 1, 100)?;
    let kind = b.kind.unwrap_or(channel_type::GUILD_TEXT);
    if ![channel_type::GUILD_TEXT, channel_type::GUILD_VOICE, channel_type::GUILD_CATEGORY, channel_type::GUILD_ANNOUNCEMENT]
        .contains(&kind)
    {
        return Err(ApiError::field("type", "BASE_TYPE_CHOICES", "Value must be one of {0, 2, 4, 5}."));
    }
    let c = ChannelRecord {
        id: node.ids.next().into(),
        guild_id: Some(gid),
        kind,
        name,
        position: 0,
        topic: b.topic,
        nsfw: b.nsfw.unwrap_or(false),
        parent_id: b.parent_id,
        rate_limit_per_user: b.rate_limit_per_user.unwrap_or(0).min(MAX_SLOWMODE_S),
        overwrites: overwrites(b.permission_overwrites.unwrap_or_default())?,
        last_message_id: None,
    };
    ask(&node, gid, u.id, Action::Channel(ChannelAction::Create { channel: Box::new(c), position: b.position })).await
}

pub async fn roles(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    guild_access(&node, gid, u.id).await?;
    let roles: Vec<_> = node.store.roles_of_guild(gid).await?.iter().map(convert::role).collect();
    json_ok(StatusCode::OK, &roles)
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct ListMembers {
    limit: Option<u32>,
    after: Option<u64>,
}

pub async fn members(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    Query(q): Query<ListMembers>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    guild_access(&node, gid, u.id).await?;
    let limit = q.limit.unwrap_or(MEMBERS_PAGE_DEFAULT);
    if !(1..=MEMBERS_PAGE_MAX).contains(&limit) {
        return Err(ApiError::field("limit", "NUMBER_TYPE_MAX", &format!("Must be between 1 and {MEMBERS_PAGE_MAX}.")));
    }
    let ms = node.store.list_members(gid, UserId(q.after.unwrap_or(0)), limit).await?;
    let users = node.store.get_users(&ms.iter().map(|m| m.user_id).collect::<Vec<_>>()).await?;
    let out: Vec<_> = ms.iter().filter_map(|m| users.iter().find(|x| x.id == m.user_id).map(|usr| convert::member(m, Some(usr)))).collect();
    json_ok(StatusCode::OK, &out)
}

pub async fn member(State(node): State<Arc<Node>>, Caller(u): Caller, Path((id, uid)): Path<(String, String)>) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let uid = super::user_or_me(&uid, u.id)?;
    guild_access(&node, gid, u.id).await?;
    let m = node.store.get_member(gid, uid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownMember))?;
    let usr = node.store.get_user(uid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownUser))?;
    json_ok(StatusCode::OK, &convert::member(&m, Some(&usr)))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct AddMember {
    /// An OAuth2 access token the user gave the caller's application, with
    /// the `guilds.join` scope.
    access_token: Option<String>,
}

/// `PUT /guilds/{id}/members/{user}`, as on Discord: a bot that is a member
/// with CREATE_INSTANT_INVITE adds a user who gave its application an
/// OAuth2 token with `guilds.join`. 201 with the member, or 204 if already
/// one. Nobody else can add anyone: people join by invite, bots by being
/// authorized (`POST /oauth2/authorize`).
pub async fn add_member(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((id, uid)): Path<(String, String)>,
    _: GuildMay<{ permission::CREATE_INSTANT_INVITE }>,
    req: Request,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let uid = super::user_or_me(&uid, u.id)?;
    if !u.bot {
        // People (owners included) cannot add anyone without their consent.
        return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
    }
    let b: AddMember = read_json(req).await?;
    let token = b.access_token.ok_or_else(|| ApiError::field("access_token", "BASE_TYPE_REQUIRED", "This field is required"))?;
    super::oauth2::check_join_token(&node, &token, uid, u.id).await?;
    let usr = node.store.get_user(uid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownUser))?;
    let m = MemberRecord::joined(gid, uid, now_ms());
    ask(&node, gid, u.id, Action::Member(MemberAction::Add { user: Box::new(usr), member: Box::new(m), via: Join::OAuth })).await
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct ModifyMember {
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    nick: Option<Option<String>>,
    roles: Option<Vec<RoleId>>,
    /// A timeout's end (ISO 8601, at most 28 days ahead), or null to end it.
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    communication_disabled_until: Option<Option<String>>,
}

/// The longest timeout Discord gives: 28 days.
pub const MAX_TIMEOUT_MS: u64 = 28 * 24 * 3600 * 1000;

/// A member's nickname, roles and timeout as an action sets them.
type MemberPatch = (Set<Option<String>>, Set<Vec<RoleId>>, Set<Option<u64>>);

impl ModifyMember {
    fn checked(self) -> ApiResult<MemberPatch> {
        if let Some(Some(n)) = &self.nick {
            if !n.is_empty() {
                check_name("nick", n, 1, 32)?;
            }
        }
        let timeout = match self.communication_disabled_until {
            None => Set::Keep,
            Some(None) => Set::To(None),
            Some(Some(t)) => {
                let at = protocol::model::parse_time(&t)
                    .filter(|_| !t.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| ApiError::field("communication_disabled_until", "DATE_TYPE_PARSE", "Could not parse date."))?;
                let now = now_ms();
                if at > now + MAX_TIMEOUT_MS {
                    return Err(ApiError::field("communication_disabled_until", "BASE_TYPE_BAD_TIME", "A timeout lasts at most 28 days."));
                }
                // A time already past ends any timeout, as null does.
                Set::To((at > now).then_some(at))
            }
        };
        Ok((self.nick.into(), self.roles.into(), timeout))
    }
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct SearchMembers {
    /// A prefix of a username, global name or nickname (any case).
    query: Option<String>,
    /// 1 to 1000; 1 if absent, as on Discord.
    limit: Option<u32>,
}

/// `GET /guilds/{id}/members/search`: members by name prefix, from the
/// guild actor's memory (its name index).
pub async fn search_members(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    Query(q): Query<SearchMembers>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let limit = q.limit.unwrap_or(MEMBERS_PAGE_DEFAULT);
    ask(&node, gid, u.id, Action::Member(MemberAction::Search { query: q.query, limit })).await
}

/// `PATCH /guilds/{id}/members/{user}`: nickname, roles and timeout.
pub async fn modify_member(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((id, uid)): Path<(String, String)>,
    // One's own nickname needs only CHANGE_NICKNAME (discord.js sends
    // `%40me`, which reaches this route rather than `members/@me`).
    _: GuildMay<{ permission::CHANGE_NICKNAME | permission::MANAGE_NICKNAMES | permission::MANAGE_ROLES | permission::MODERATE_MEMBERS }>,
    JsonBody(b): JsonBody<ModifyMember>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let uid = super::user_or_me(&uid, u.id)?;
    let (nick, roles, timeout) = b.checked()?;
    ask(&node, gid, u.id, Action::Member(MemberAction::Modify { user: uid, nick, roles, timeout })).await
}

/// `PATCH /guilds/{id}/members/@me`: change one's own nickname.
pub async fn modify_me(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    _: GuildMay<{ permission::CHANGE_NICKNAME | permission::MANAGE_NICKNAMES }>,
    JsonBody(b): JsonBody<ModifyMember>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    if b.roles.is_some() {
        return Err(ApiError::field("roles", "BASE_TYPE_INVALID", "Use PATCH /guilds/{id}/members/{user_id} to change roles."));
    }
    // Only the nickname: Discord ignores the rest here.
    let (nick, _, _) = b.checked()?;
    ask(&node, gid, u.id, Action::Member(MemberAction::Modify { user: u.id, nick, roles: Set::Keep, timeout: Set::Keep })).await
}

/// `DELETE /guilds/{id}/members/{user}`: a kick (KICK_MEMBERS).
pub async fn remove_member(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((id, uid)): Path<(String, String)>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let uid = super::user_or_me(&uid, u.id)?;
    ask(&node, gid, u.id, Action::Member(MemberAction::Remove { user: uid })).await
}
