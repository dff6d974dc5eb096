//! Channels and invites.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::model::{iso8601, permission};
use protocol::{ChannelId, ErrorCode, UserId};
use rand::distributions::Alphanumeric;
use rand::Rng;
use serde::Deserialize;
use serde_json::json;
use store::{InviteRecord, MemberRecord, StoreError};

use super::guard::{channel_may, ChannelMay};
use super::guilds::{overwrites, OverwriteIn, MAX_SLOWMODE_S};
use super::{actor_of, ask, ask_actor, channel_access, json_bytes, parse_id, read_json, ApiError, ApiResult, Caller, JsonBody};
use node::auth::now_ms;
use node::convert;
use node::route::ops::{audit_kind, ChannelAction, ChannelPatch, Join, MemberAction};
use node::route::Action;
use node::Node;

fn json_ok<T: serde::Serialize>(status: StatusCode, v: &T) -> ApiResult<Response> {
    Ok(json_bytes(status, serde_json::to_vec(v).map_err(ApiError::internal)?))
}

pub async fn get(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let cid = parse_id(&id, ErrorCode::UnknownChannel)?;
    if let Some(dm) = super::dms::get(&node, cid, u.id).await? {
        return Ok(dm);
    }
    let (c, _) = channel_access(&node, cid, u.id).await?;
    if store::is_thread(c.kind) {
        return super::threads::get(&node, u.id, cid).await;
    }
    json_ok(StatusCode::OK, &convert::channel(&c))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct ModifyChannel {
    name: Option<String>,
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    topic: Option<Option<String>>,
    position: Option<i32>,
    nsfw: Option<bool>,
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    parent_id: Option<Option<ChannelId>>,
    rate_limit_per_user: Option<u32>,
    permission_overwrites: Option<Vec<OverwriteIn>>,
    /// A thread's own fields (`PATCH` of a thread).
    #[serde(flatten)]
    thread: super::threads::ThreadFields,
}

/// `PATCH /channels/{id}`: MANAGE_CHANNELS in the channel (and MANAGE_ROLES
/// for its overwrites), checked by the guild's actor.
pub async fn modify(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>, req: Request) -> ApiResult<Response> {
    let cid = parse_id(&id, ErrorCode::UnknownChannel)?;
    // Before the body: a thread's creator may rename it, so seeing it is
    // enough there; a channel needs MANAGE_CHANNELS (or MANAGE_ROLES, for
    // its overwrites). The actor checks each field.
    let thread = super::threads::is_thread_channel(&node, cid).await?;
    let needs = if thread { 0 } else { permission::MANAGE_CHANNELS | permission::MANAGE_ROLES };
    channel_may(&node, cid, u.id, needs).await?;
    let b: ModifyChannel = read_json(req).await?;
    if thread {
        return super::threads::modify(&node, u.id, cid, b.name, b.rate_limit_per_user, b.thread).await;
    }
    let guild = actor_of(&node, cid).await?;
    if let Some(n) = &b.name {
        if !(1..=NAME_MAX).contains(&n.chars().count()) {
            return Err(ApiError::field("name", "BASE_TYPE_BAD_LENGTH", &format!("Must be between 1 and {NAME_MAX} in length.")));
        }
    }
    if let Some(Some(t)) = &b.topic {
        if t.chars().count() > TOPIC_MAX {
            return Err(ApiError::field("topic", "BASE_TYPE_MAX_LENGTH", &format!("Must be {TOPIC_MAX} or fewer in length.")));
        }
    }
    let patch = ChannelPatch {
        name: b.name.into(),
        topic: b.topic.into(),
        position: b.position.into(),
        nsfw: b.nsfw.into(),
        parent_id: b.parent_id.into(),
        rate_limit_per_user: b.rate_limit_per_user.map(|r| r.min(MAX_SLOWMODE_S)).into(),
        overwrites: b.permission_overwrites.map(overwrites).transpose()?.into(),
    };
    ask_actor(&node, guild, u.id, Action::Channel(ChannelAction::Modify { channel: cid, patch: Box::new(patch) })).await
}

/// `DELETE /channels/{id}`: MANAGE_CHANNELS; answers the deleted channel.
pub async fn delete(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let cid = parse_id(&id, ErrorCode::UnknownChannel)?;
    if super::threads::is_thread_channel(&node, cid).await? {
        return super::threads::delete(&node, u.id, cid).await;
    }
    let guild = actor_of(&node, cid).await?;
    ask_actor(&node, guild, u.id, Action::Channel(ChannelAction::Delete { channel: cid })).await
}

/// Discord's bounds on a channel's name and topic, in characters.
const NAME_MAX: usize = 100;
const TOPIC_MAX: usize = 1024;
/// Invites: Discord's default lifetime (a day) and longest (a week), in
/// seconds (0: never expires); at most this many uses (0: unlimited).
const INVITE_MAX_AGE_DEFAULT: u32 = 86_400;
const INVITE_MAX_AGE: u32 = 604_800;
const INVITE_MAX_USES: u32 = 100;
/// Random codes tried before giving up on a collision (10 alphanumerics:
/// a second collision in a row is already vanishingly rare).
const INVITE_CODE_TRIES: usize = 5;
const INVITE_CODE_LEN: usize = 10;

#[derive(schemars::JsonSchema, Deserialize)]
pub struct CreateInvite {
    max_age: Option<u32>,
    max_uses: Option<u32>,
}

fn invite_json(
    i: &InviteRecord,
    guild: &store::GuildRecord,
    channel: &store::ChannelRecord,
    inviter: Option<&store::UserRecord>,
) -> serde_json::Value {
    json!({
        "type": 0,
        "code": i.code,
        "guild": { "id": guild.id, "name": guild.name, "icon": guild.icon, "splash": null, "banner": null, "description": guild.description, "features": [], "verification_level": 0, "nsfw_level": 0 },
        "channel": { "id": channel.id, "name": channel.name, "type": channel.kind },
        "inviter": inviter.map(convert::user),
        "uses": i.uses,
        "max_uses": i.max_uses,
        "max_age": i.max_age,
        "temporary": false,
        "created_at": iso8601(i.created_at),
        "expires_at": (i.max_age > 0).then(|| iso8601(i.created_at + u64::from(i.max_age) * 1000)),
    })
}

pub async fn create_invite(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    _: ChannelMay<{ permission::CREATE_INSTANT_INVITE }>,
    JsonBody(b): JsonBody<CreateInvite>,
) -> ApiResult<Response> {
    let (c, a) = channel_access(&node, parse_id(&id, ErrorCode::UnknownChannel)?, u.id).await?;
    if a.in_channel(&c) & permission::CREATE_INSTANT_INVITE == 0 {
        return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
    }
    let max_age = b.max_age.unwrap_or(INVITE_MAX_AGE_DEFAULT);
    if max_age > INVITE_MAX_AGE {
        return Err(ApiError::field("max_age", "NUMBER_TYPE_MAX", &format!("Must be {INVITE_MAX_AGE} or less.")));
    }
    let max_uses = b.max_uses.unwrap_or(0);
    if max_uses > INVITE_MAX_USES {
        return Err(ApiError::field("max_uses", "NUMBER_TYPE_MAX", &format!("Must be {INVITE_MAX_USES} or less.")));
    }
    for _ in 0..INVITE_CODE_TRIES {
        let code: String = rand::thread_rng().sample_iter(&Alphanumeric).take(INVITE_CODE_LEN).map(char::from).collect();
        let inv = InviteRecord {
            code,
            guild_id: a.guild.id,
            channel_id: c.id,
            inviter_id: Some(u.id),
            max_age,
            max_uses,
            uses: 0,
            created_at: now_ms(),
        };
        match node.store.create_invite(&inv).await {
            Ok(()) => {
                super::audit::note(&node, a.guild.id, u.id, super::audit::invite_note(audit_kind::INVITE_CREATE, &inv)).await;
                return json_ok(StatusCode::OK, &invite_json(&inv, &a.guild, &c, Some(&u)));
            }
            Err(StoreError::Conflict) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Err(ApiError::internal("could not find a free invite code"))
}

/// A live invite and what it points at, or 404 10006.
/// Neither expired nor used up at `now` (ms).
fn is_live(i: &InviteRecord, now: u64) -> bool {
    let expired = i.max_age > 0 && now > i.created_at + u64::from(i.max_age) * 1000;
    let used_up = i.max_uses > 0 && i.uses >= i.max_uses;
    !expired && !used_up
}

async fn live_invite(node: &Node, code: &str) -> ApiResult<(InviteRecord, store::GuildRecord, store::ChannelRecord)> {
    let unknown = || ApiError::not_found(ErrorCode::UnknownInvite);
    let i = node.store.get_invite(code).await?.ok_or_else(unknown)?;
    if !is_live(&i, now_ms()) {
        return Err(unknown());
    }
    let g = node.store.get_guild(i.guild_id).await?.ok_or_else(unknown)?;
    let c = node.store.get_channel(i.channel_id).await?.ok_or_else(unknown)?;
    Ok((i, g, c))
}

pub async fn get_invite(State(node): State<Arc<Node>>, Path(code): Path<String>) -> ApiResult<Response> {
    let (i, g, c) = live_invite(&node, &code).await?;
    let inviter = match i.inviter_id {
        Some(id) => node.store.get_user(id).await?,
        None => None,
    };
    json_ok(StatusCode::OK, &invite_json(&i, &g, &c, inviter.as_ref()))
}

/// How many invites the invite lists answer at most (Discord gives no limit;
/// a guild with more sees its newest).
pub const MAX_LISTED_INVITES: u32 = 1000;

/// `GET /guilds/{guild_id}/invites`: MANAGE_GUILD, checked before anything
/// is read; the guild's live invites, newest first, with their inviters.
pub async fn guild_invites(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let a = super::guild_access(&node, gid, u.id).await?;
    a.require(permission::MANAGE_GUILD)?;
    listed_invites(&node, &a.guild, None).await
}

/// `GET /channels/{channel_id}/invites`: MANAGE_CHANNELS in the channel;
/// its live invites, newest first.
pub async fn channel_invites(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let (c, a) = channel_access(&node, parse_id(&id, ErrorCode::UnknownChannel)?, u.id).await?;
    if a.in_channel(&c) & permission::MANAGE_CHANNELS == 0 {
        return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
    }
    listed_invites(&node, &a.guild, Some(c.id)).await
}

async fn listed_invites(node: &Node, g: &store::GuildRecord, only: Option<ChannelId>) -> ApiResult<Response> {
    let now = now_ms();
    let live: Vec<InviteRecord> = node
        .store
        .invites_of_guild(g.id, MAX_LISTED_INVITES)
        .await?
        .into_iter()
        .filter(|i| only.is_none_or(|c| i.channel_id == c))
        .filter(|i| is_live(i, now))
        .collect();
    let channels = node.store.channels_of_guild(g.id).await?;
    let mut inviters: Vec<UserId> = live.iter().filter_map(|i| i.inviter_id).collect();
    inviters.sort_unstable();
    inviters.dedup();
    let users = node.store.get_users(&inviters).await?;
    let out: Vec<serde_json::Value> = live
        .iter()
        .filter_map(|i| {
            let c = channels.iter().find(|c| c.id == i.channel_id)?;
            Some(invite_json(i, g, c, i.inviter_id.and_then(|id| users.iter().find(|u| u.id == id))))
        })
        .collect();
    json_ok(StatusCode::OK, &out)
}

/// `POST /invites/{code}`: the caller joins the guild (users only, as on Discord).
pub async fn accept_invite(State(node): State<Arc<Node>>, Caller(u): Caller, Path(code): Path<String>) -> ApiResult<Response> {
    if u.bot {
        return Err(ApiError::forbidden(ErrorCode::BotsCannotUse));
    }
    let (i, g, c) = live_invite(&node, &code).await?;
    if node.store.get_member(g.id, u.id).await?.is_none() {
        // Spares the invite a use; the guild's actor refuses the join
        // authoritatively (a ban committed since this read).
        if node.store.get_ban(g.id, u.id).await?.is_some() {
            return Err(ApiError::forbidden(ErrorCode::UserBanned));
        }
        if node.store.guilds_of_user(u.id).await?.len() as u32 >= node.config.limits.max_guilds_per_user {
            return Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::MaxGuilds));
        }
        if !node.store.use_invite(&code).await? {
            return Err(ApiError::not_found(ErrorCode::UnknownInvite));
        }
        let m = MemberRecord::joined(g.id, u.id, now_ms());
        let joined = ask(
            &node,
            g.id,
            u.id,
            Action::Member(MemberAction::Add { user: Box::new((*u).clone()), member: Box::new(m), via: Join::Invite }),
        )
        .await?;
        if !joined.status().is_success() {
            return Ok(joined);
        }
    }
    let inviter = match i.inviter_id {
        Some(id) => node.store.get_user(id).await?,
        None => None,
    };
    json_ok(StatusCode::OK, &invite_json(&i, &g, &c, inviter.as_ref()))
}

pub async fn delete_invite(State(node): State<Arc<Node>>, Caller(u): Caller, Path(code): Path<String>) -> ApiResult<Response> {
    let (i, g, c) = live_invite(&node, &code).await?;
    let a = super::guild_access(&node, g.id, u.id).await?;
    if i.inviter_id != Some(u.id) {
        a.require(permission::MANAGE_CHANNELS)?;
    }
    node.store.delete_invite(&i.code).await?;
    super::audit::note(&node, g.id, u.id, super::audit::invite_note(audit_kind::INVITE_DELETE, &i)).await;
    json_ok(StatusCode::OK, &invite_json(&i, &g, &c, None))
}
