//! Who may call a route, decided from its path and the store before its
//! body is read.
//!
//! A route that takes a body names one of these extractors before its body
//! extractor: axum runs the extractors of a request's head first, so a
//! caller who may not call the route is answered without one byte of the
//! body read (the authorization matrix, `tests/it/authz.rs`, sends every
//! refused call with a body that never arrives and expects the refusal at
//! once). They are necessary conditions: the guild's actor that does the
//! work checks again from its own state when it commits, so a permission
//! taken away in between is still refused there.

use std::sync::Arc;

use axum::extract::{FromRequestParts, RawPathParams};
use axum::http::request::Parts;
use protocol::model::permission;
use protocol::{ChannelId, ErrorCode, GuildId};

use super::{channel_access, guild_access, parse_id, Access, ApiError, ApiResult, Caller};
use node::Node;

/// A path parameter of the matched route, by name.
async fn param(parts: &mut Parts, node: &Arc<Node>, name: &str) -> ApiResult<String> {
    let params = RawPathParams::from_request_parts(parts, node).await.map_err(|_| ApiError::internal("no path parameters"))?;
    let found = params.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string());
    found.ok_or_else(|| ApiError::internal(format!("route has no {{{name}}}")))
}

/// Whether guild-level or channel bits allow a route that needs any one of
/// `any_of` (0: none beyond being there). ADMINISTRATOR allows everything.
fn allows(bits: u64, any_of: u64) -> bool {
    any_of == 0 || bits & permission::ADMINISTRATOR != 0 || bits & any_of != 0
}

/// The caller is a member of the path's `{guild_id}` holding at least one
/// of the bits `ANY_OF` (0: any member): 404 10004 for no such guild, 403
/// 50001 for a non-member, 403 50013 without the permission.
pub struct GuildMay<const ANY_OF: u64>(pub Access);

impl<const ANY_OF: u64> FromRequestParts<Arc<Node>> for GuildMay<ANY_OF> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        let Caller(u) = Caller::from_request_parts(parts, node).await?;
        let gid: GuildId = parse_id(&param(parts, node, "guild_id").await?, ErrorCode::UnknownGuild)?;
        let access = guild_access(node, gid, u.id).await?;
        if !allows(access.perms, ANY_OF) {
            return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
        }
        Ok(GuildMay(access))
    }
}

/// The caller sees the path's `{channel_id}` (a guild channel or thread as
/// `channel_access` judges it, or a DM of theirs) and, in a guild, holds at
/// least one of `ANY_OF` there (0: seeing it is enough). In a DM its
/// recipients may do what the route does; the DM's actor decides the rest.
pub struct ChannelMay<const ANY_OF: u64>;

impl<const ANY_OF: u64> FromRequestParts<Arc<Node>> for ChannelMay<ANY_OF> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        let Caller(u) = Caller::from_request_parts(parts, node).await?;
        let cid: ChannelId = parse_id(&param(parts, node, "channel_id").await?, ErrorCode::UnknownChannel)?;
        channel_may(node, cid, u.id, ANY_OF).await.map(|_| ChannelMay)
    }
}

/// [`ChannelMay`]'s check: `None` for a DM of the caller's, else the
/// guild channel and the caller's standing.
pub async fn channel_may(
    node: &Node,
    channel: ChannelId,
    user: protocol::UserId,
    any_of: u64,
) -> ApiResult<Option<(store::ChannelRecord, Access)>> {
    if super::dms::readable(node, channel, user).await?.is_some() {
        return Ok(None);
    }
    let (c, a) = channel_access(node, channel, user).await?;
    if !allows(a.in_channel(&c), any_of) {
        return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
    }
    Ok(Some((c, a)))
}

/// The caller is a person, not a bot: 401 20001 ("Bots cannot use this
/// endpoint") otherwise.
pub struct Person;

impl FromRequestParts<Arc<Node>> for Person {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        let Caller(u) = Caller::from_request_parts(parts, node).await?;
        if u.bot {
            return Err(ApiError::forbidden(ErrorCode::BotsCannotUse));
        }
        Ok(Person)
    }
}

/// The caller is a bot (its application's own routes): 404 10002 (Unknown
/// Application) for a person, as Discord answers.
pub struct Bot;

impl FromRequestParts<Arc<Node>> for Bot {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        let Caller(u) = Caller::from_request_parts(parts, node).await?;
        if !u.bot {
            return Err(ApiError::not_found(ErrorCode::UnknownApplication));
        }
        Ok(Bot)
    }
}

/// The caller is the bot of the path's `{app_id}` (403 50001 otherwise).
pub struct OwnApp;

impl FromRequestParts<Arc<Node>> for OwnApp {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        let Caller(u) = Caller::from_request_parts(parts, node).await?;
        super::commands::own_app(node, u.id, &param(parts, node, "app_id").await?).await.map(|_| OwnApp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_of_the_bits_or_administrator_allows() {
        let (a, b) = (permission::MANAGE_ROLES, permission::MANAGE_NICKNAMES);
        assert!(allows(0, 0) && allows(a, a) && allows(b, a | b) && allows(permission::ADMINISTRATOR, a));
        assert!(!allows(0, a) && !allows(b, a) && !allows(permission::VIEW_CHANNEL, a | b));
    }
}
