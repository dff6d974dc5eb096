//! Bans. Reads check BAN_MEMBERS against the store; a ban and an unban go
//! to the guild's actor, which checks BAN_MEMBERS and the role hierarchy
//! and holds the banned ids that refuse joins.

use std::sync::Arc;

use super::Query;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::id::DISCORD_EPOCH_MS;
use protocol::model::permission;
use protocol::{ErrorCode, GuildId, MessageId, UserId};
use serde::Deserialize;
use serde_json::json;
use store::BanRecord;

use super::guard::GuildMay;
use super::{ask, guild_access, json_bytes, parse_id, user_or_me, ApiError, ApiResult, Caller, JsonBody};
use node::auth::now_ms;
use node::convert;
use node::route::ops::BanAction;
use node::route::Action;
use node::Node;

/// Discord's page size and default for `GET /guilds/{g}/bans`.
const MAX_BANS_PAGE: u32 = 1000;
/// Discord's limit on `delete_message_seconds`: 7 days.
const MAX_PURGE_SECONDS: u64 = 604_800;
/// ... and on the deprecated `delete_message_days`.
const MAX_PURGE_DAYS: u64 = 7;
/// Messages one ban deletes at most: the newest of the window. Bounds the
/// read, the commit (one statement) and the events; a spammer's older
/// messages in the window stay.
pub const MAX_PURGE_MESSAGES: u32 = 10_000;

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct BanPage {
    limit: Option<u32>,
    before: Option<UserId>,
    after: Option<UserId>,
}

fn ban_json(b: &BanRecord, users: &[store::UserRecord]) -> Option<serde_json::Value> {
    let u = users.iter().find(|u| u.id == b.user_id)?;
    Some(json!({ "reason": b.reason, "user": convert::user(u) }))
}

/// `GET /guilds/{g}/bans`: BAN_MEMBERS; ascending user ids.
pub async fn list(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    Query(q): Query<BanPage>,
) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    guild_access(&node, gid, u.id).await?.require(permission::BAN_MEMBERS)?;
    let limit = q.limit.unwrap_or(MAX_BANS_PAGE);
    if !(1..=MAX_BANS_PAGE).contains(&limit) {
        return Err(ApiError::field("limit", "NUMBER_TYPE_MAX", &format!("Must be between 1 and {MAX_BANS_PAGE}.")));
    }
    let bans = node.store.bans_of_guild(gid, q.before, q.after.unwrap_or(UserId(0)), limit).await?;
    let users = node.store.get_users(&bans.iter().map(|b| b.user_id).collect::<Vec<_>>()).await?;
    let out: Vec<_> = bans.iter().filter_map(|b| ban_json(b, &users)).collect();
    Ok(json_bytes(StatusCode::OK, serde_json::Value::Array(out).to_string()))
}

/// `GET /guilds/{g}/bans/{u}`: BAN_MEMBERS; 404 10026 if not banned.
pub async fn get(State(node): State<Arc<Node>>, Caller(u): Caller, Path((id, uid)): Path<(String, String)>) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    let uid = parse_id(&uid, ErrorCode::UnknownBan)?;
    guild_access(&node, gid, u.id).await?.require(permission::BAN_MEMBERS)?;
    let unknown = || ApiError::not_found(ErrorCode::UnknownBan);
    let ban = node.store.get_ban(gid, uid).await?.ok_or_else(unknown)?;
    let users = node.store.get_users(&[uid]).await?;
    Ok(json_bytes(StatusCode::OK, ban_json(&ban, &users).ok_or_else(unknown)?.to_string()))
}

/// How much of a user's history a ban deletes: `delete_message_seconds`
/// (or the older `delete_message_days`), in the JSON body or, as some
/// libraries send it, the query string.
#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct Purge {
    delete_message_seconds: Option<u64>,
    delete_message_days: Option<u64>,
}

impl Purge {
    fn seconds(&self) -> ApiResult<Option<u64>> {
        if let Some(s) = self.delete_message_seconds {
            if s > MAX_PURGE_SECONDS {
                return Err(ApiError::field("delete_message_seconds", "NUMBER_TYPE_MAX", &format!("Must be {MAX_PURGE_SECONDS} or less.")));
            }
            return Ok(Some(s));
        }
        if let Some(d) = self.delete_message_days {
            if d > MAX_PURGE_DAYS {
                return Err(ApiError::field("delete_message_days", "NUMBER_TYPE_MAX", &format!("Must be {MAX_PURGE_DAYS} or less.")));
            }
            return Ok(Some(d * 86_400));
        }
        Ok(None)
    }
}

/// `PUT /guilds/{g}/bans/{u}`: 204. The user leaves the guild if a member,
/// cannot join again, and their messages of the last
/// `delete_message_seconds` in the guild are deleted.
pub async fn create(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((id, uid)): Path<(String, String)>,
    Query(q): Query<Purge>,
    _: GuildMay<{ permission::BAN_MEMBERS }>,
    JsonBody(b): JsonBody<Purge>,
) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    let uid = user_or_me(&uid, u.id)?;
    let seconds = match b.seconds()? {
        Some(s) => s,
        None => q.seconds()?.unwrap_or(0),
    };
    let user = node.store.get_user(uid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownUser))?;
    let purge = if seconds > 0 {
        let since = now_ms().saturating_sub(seconds * 1000).saturating_sub(DISCORD_EPOCH_MS) << 22;
        node.store.messages_of_author(gid, uid, MessageId(since), MAX_PURGE_MESSAGES).await?
    } else {
        Vec::new()
    };
    let action = BanAction::Add { user: Box::new(user), reason: super::audit::reason(), purge };
    ask(&node, gid, u.id, Action::Ban(action)).await
}

/// `DELETE /guilds/{g}/bans/{u}`: 204; 404 10026 if not banned.
pub async fn remove(State(node): State<Arc<Node>>, Caller(u): Caller, Path((id, uid)): Path<(String, String)>) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    let uid = parse_id(&uid, ErrorCode::UnknownBan)?;
    let user = node.store.get_user(uid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownBan))?;
    ask(&node, gid, u.id, Action::Ban(BanAction::Remove { user: Box::new(user) })).await
}
