//! Roles, a member's roles and channel permission overwrites. The handlers
//! check the request's shape; the guild's actor checks MANAGE_ROLES and the
//! role hierarchy (`guild::ops::roles`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::model::permission;
use protocol::{ErrorCode, GuildId, RoleId};
use serde::Deserialize;
use store::{OverwriteRecord, RoleRecord};

use super::guard::{ChannelMay, GuildMay};
use super::{actor_of, ask, ask_actor, guild_access, json_bytes, parse_id, user_or_me, ApiError, ApiResult, Caller, JsonBody};
use node::convert;
use node::route::ops::{OverwriteAction, RoleAction, RolePatch};
use node::route::{Action, Set};
use node::Node;

/// Discord's longest role name.
const MAX_ROLE_NAME: usize = 100;
/// The name of a role created without one, as on Discord.
const DEFAULT_ROLE_NAME: &str = "new role";
/// Colours are 24-bit RGB.
const MAX_COLOR: u32 = 0xff_ffff;
/// Entries in one reorder: a guild has at most this many roles.
const MAX_REORDER: usize = node::route::ops::roles::MAX_ROLES;

/// Permission bits as Discord sends them (a decimal string) or as an integer.
#[derive(schemars::JsonSchema, Deserialize)]
#[serde(untagged)]
pub enum Bits {
    S(String),
    I(u64),
}

impl Bits {
    /// The bits, unknown ones dropped; 50035 on `field` if not a number.
    pub fn parse(&self, field: &str) -> ApiResult<u64> {
        let v = match self {
            Bits::I(i) => *i,
            Bits::S(s) => s.trim().parse().map_err(|_| ApiError::field(field, "BASE_TYPE_INVALID", "Invalid permission bits."))?,
        };
        Ok(v & permission::ALL)
    }
}

/// `colors` of a role: the primary colour is the role's colour; gradients
/// (`secondary_color`, `tertiary_color`) need a guild feature throng does
/// not have, so they are read and left out.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct Colors {
    primary_color: Option<u32>,
}

/// The body of role create and modify; every field optional, `null` as absent.
#[derive(schemars::JsonSchema, Deserialize)]
pub struct RoleBody {
    name: Option<String>,
    permissions: Option<Bits>,
    color: Option<u32>,
    colors: Option<Colors>,
    hoist: Option<bool>,
    mentionable: Option<bool>,
}

impl RoleBody {
    fn patch(self) -> ApiResult<RolePatch> {
        if let Some(n) = &self.name {
            if !(1..=MAX_ROLE_NAME).contains(&n.chars().count()) {
                return Err(ApiError::field("name", "BASE_TYPE_BAD_LENGTH", &format!("Must be between 1 and {MAX_ROLE_NAME} in length.")));
            }
        }
        let color = self.colors.and_then(|c| c.primary_color).or(self.color);
        if color.is_some_and(|c| c > MAX_COLOR) {
            return Err(ApiError::field("color", "NUMBER_TYPE_MAX", &format!("Must be {MAX_COLOR} or less.")));
        }
        Ok(RolePatch {
            name: self.name.into(),
            color: color.into(),
            hoist: self.hoist.into(),
            permissions: self.permissions.map(|b| b.parse("permissions")).transpose()?.into(),
            mentionable: self.mentionable.into(),
        })
    }
}

fn json_ok<T: serde::Serialize>(v: &T) -> ApiResult<Response> {
    Ok(json_bytes(StatusCode::OK, serde_json::to_vec(v).map_err(ApiError::internal)?))
}

/// `POST /guilds/{g}/roles`: 200 with the new role (without `permissions`,
/// `@everyone`'s, as on Discord).
pub async fn create(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    _: GuildMay<{ permission::MANAGE_ROLES }>,
    JsonBody(b): JsonBody<RoleBody>,
) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    let p = b.patch()?;
    let mut r = RoleRecord {
        id: node.ids.next().into(),
        guild_id: gid,
        name: DEFAULT_ROLE_NAME.into(),
        color: 0,
        hoist: false,
        position: 0,
        permissions: 0,
        mentionable: false,
        bot_id: None,
    };
    p.name.apply(&mut r.name);
    p.color.apply(&mut r.color);
    p.hoist.apply(&mut r.hoist);
    p.mentionable.apply(&mut r.mentionable);
    let permissions = match p.permissions {
        Set::To(bits) => Some(bits),
        Set::Keep => None,
    };
    ask(&node, gid, u.id, Action::Role(RoleAction::Create { role: Box::new(r), permissions })).await
}

/// `GET /guilds/{g}/roles/{r}`.
pub async fn get(State(node): State<Arc<Node>>, Caller(u): Caller, Path((id, rid)): Path<(String, String)>) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    let rid: RoleId = parse_id(&rid, ErrorCode::UnknownRole)?;
    guild_access(&node, gid, u.id).await?;
    let roles = node.store.roles_of_guild(gid).await?;
    let r = roles.iter().find(|r| r.id == rid).ok_or_else(|| ApiError::not_found(ErrorCode::UnknownRole))?;
    json_ok(&convert::role(r))
}

/// `PATCH /guilds/{g}/roles/{r}`: 200 with the role.
pub async fn modify(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((id, rid)): Path<(String, String)>,
    _: GuildMay<{ permission::MANAGE_ROLES }>,
    JsonBody(b): JsonBody<RoleBody>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let role = parse_id(&rid, ErrorCode::UnknownRole)?;
    ask(&node, gid, u.id, Action::Role(RoleAction::Modify { role, patch: b.patch()? })).await
}

/// `DELETE /guilds/{g}/roles/{r}`: 204.
pub async fn delete(State(node): State<Arc<Node>>, Caller(u): Caller, Path((id, rid)): Path<(String, String)>) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let role = parse_id(&rid, ErrorCode::UnknownRole)?;
    ask(&node, gid, u.id, Action::Role(RoleAction::Delete { role })).await
}

#[derive(schemars::JsonSchema, Deserialize)]
#[schemars(rename = "RolePosition")]
pub struct Position {
    id: RoleId,
    position: Option<i32>,
}

/// `PATCH /guilds/{g}/roles` with `[{id, position}]`: 200 with every role.
pub async fn reorder(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    _: GuildMay<{ permission::MANAGE_ROLES }>,
    JsonBody(b): JsonBody<Vec<Position>>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    if b.len() > MAX_REORDER {
        return Err(ApiError::field("_root", "BASE_TYPE_MAX_LENGTH", &format!("Must be {MAX_REORDER} or fewer in length.")));
    }
    let positions = b.into_iter().filter_map(|p| Some((p.id, p.position?))).collect();
    ask(&node, gid, u.id, Action::Role(RoleAction::Reorder { positions })).await
}

/// `PUT /guilds/{g}/members/{u}/roles/{r}`: 204.
pub async fn grant(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((id, uid, rid)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let user = user_or_me(&uid, u.id)?;
    let role = parse_id(&rid, ErrorCode::UnknownRole)?;
    ask(&node, gid, u.id, Action::Role(RoleAction::Grant { user, role })).await
}

/// `DELETE /guilds/{g}/members/{u}/roles/{r}`: 204.
pub async fn revoke(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((id, uid, rid)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let gid = parse_id(&id, ErrorCode::UnknownGuild)?;
    let user = user_or_me(&uid, u.id)?;
    let role = parse_id(&rid, ErrorCode::UnknownRole)?;
    ask(&node, gid, u.id, Action::Role(RoleAction::Revoke { user, role })).await
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct OverwriteBody {
    #[serde(rename = "type")]
    kind: Option<OverwriteType>,
    allow: Option<Bits>,
    deny: Option<Bits>,
}

/// `type`: 0 (role) or 1 (member), as a number or a string of one.
#[derive(schemars::JsonSchema, Deserialize)]
#[serde(untagged)]
pub enum OverwriteType {
    I(u64),
    S(String),
}

/// `PUT /channels/{c}/permissions/{id}`: 204.
pub async fn put_overwrite(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((cid, oid)): Path<(String, String)>,
    _: ChannelMay<{ permission::MANAGE_ROLES }>,
    JsonBody(b): JsonBody<OverwriteBody>,
) -> ApiResult<Response> {
    let channel = parse_id(&cid, ErrorCode::UnknownChannel)?;
    let id: u64 = parse_id(&oid, ErrorCode::UnknownOverwrite)?;
    let kind = match b.kind {
        Some(OverwriteType::I(k)) => Some(k),
        Some(OverwriteType::S(s)) => s.parse().ok(),
        None => return Err(ApiError::field("type", "BASE_TYPE_REQUIRED", "This field is required")),
    };
    let kind = kind.filter(|k| *k <= 1).ok_or_else(|| ApiError::field("type", "BASE_TYPE_CHOICES", "Value must be one of {0, 1}."))? as u8;
    let allow = b.allow.map(|x| x.parse("allow")).transpose()?.unwrap_or(0);
    let deny = b.deny.map(|x| x.parse("deny")).transpose()?.unwrap_or(0);
    let guild = actor_of(&node, channel).await?;
    let overwrite = OverwriteRecord { id, kind, allow, deny };
    ask_actor(&node, guild, u.id, Action::Overwrite(OverwriteAction::Put { channel, overwrite })).await
}

/// `DELETE /channels/{c}/permissions/{id}`: 204.
pub async fn delete_overwrite(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((cid, oid)): Path<(String, String)>,
) -> ApiResult<Response> {
    let channel = parse_id(&cid, ErrorCode::UnknownChannel)?;
    let id: u64 = parse_id(&oid, ErrorCode::UnknownOverwrite)?;
    let guild = actor_of(&node, channel).await?;
    ask_actor(&node, guild, u.id, Action::Overwrite(OverwriteAction::Delete { channel, id })).await
}
