//! Routes that client libraries call while they log in or get ready, for
//! features throng does not have yet. Each answers what Discord answers
//! when there is nothing to list, so a library's start-up never stops on a
//! 404 (one library waited forever for its ready event on one of these).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::ErrorCode;

use super::{guild_access, json_bytes, parse_id, ApiResult, Caller};
use node::Node;

/// `[]`: application command permissions, the soundboard's default sounds,
/// entitlements, voice regions.
pub async fn empty_list(_c: Caller) -> Response {
    json_bytes(StatusCode::OK, "[]")
}

/// `{"items": []}`: an application's emojis.
pub async fn empty_items(_c: Caller) -> Response {
    json_bytes(StatusCode::OK, r#"{"items":[]}"#)
}

/// `[]` for a guild's stickers, to its members.
pub async fn guild_empty_list(State(node): State<Arc<Node>>, Caller(u): Caller, Path(g): Path<String>) -> ApiResult<Response> {
    to_members(&node, u.id, &g, "[]").await
}

/// `{"items": []}` for a guild's soundboard sounds, to its members.
pub async fn guild_empty_items(State(node): State<Arc<Node>>, Caller(u): Caller, Path(g): Path<String>) -> ApiResult<Response> {
    to_members(&node, u.id, &g, r#"{"items":[]}"#).await
}

/// `body` if `user` is a member of guild `g` (404 10004 for no such guild,
/// 403 50001 for one the caller is not in, as for any guild read).
async fn to_members(node: &Node, user: protocol::UserId, g: &str, body: &'static str) -> ApiResult<Response> {
    guild_access(node, parse_id(g, ErrorCode::UnknownGuild)?, user).await?;
    Ok(json_bytes(StatusCode::OK, body))
}

/// `{"sticker_packs": []}`.
pub async fn sticker_packs(_c: Caller) -> Response {
    json_bytes(StatusCode::OK, r#"{"sticker_packs":[]}"#)
}
