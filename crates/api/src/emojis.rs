//! A guild's custom emojis: `GET/POST /guilds/{g}/emojis`,
//! `GET/PATCH/DELETE /guilds/{g}/emojis/{id}`, and the images themselves at
//! `GET /emojis/{id}.{png,gif,webp,jpg}` (Discord's CDN path, on this
//! server: point a library's CDN base here).
//!
//! `POST` takes the image as a data URI, checks it (PNG, JPEG, GIF or WebP,
//! at most 256 KiB) and writes it under the data directory before the
//! guild's actor decides; the file goes again if the actor refuses. The
//! file is the image as uploaded (no resizing or conversion).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use protocol::id::EmojiId;
use protocol::model::{self, permission};
use protocol::{ErrorCode, GuildId, RoleId, UserId};
use serde::Deserialize;
use store::EmojiRecord;

use super::guard::GuildMay;
use super::{ask, guild_access, json_bytes, parse_id, ApiError, ApiResult, Caller, JsonBody};
use node::emoji::{self, ImageError, ImageKind};
use node::route::ops::EmojiAction;
use node::route::{Action, Set};
use node::Node;

/// Whether the caller sees who created each emoji (Discord: with
/// MANAGE_GUILD_EXPRESSIONS or CREATE_GUILD_EXPRESSIONS).
fn sees_creators(perms: u64) -> bool {
    perms & (permission::ADMINISTRATOR | permission::MANAGE_GUILD_EXPRESSIONS | permission::CREATE_GUILD_EXPRESSIONS) != 0
}

/// The emoji objects of `list`, with their creators if `with_creators`.
async fn objects(node: &Node, list: &[EmojiRecord], with_creators: bool) -> ApiResult<Vec<model::Emoji>> {
    let mut ids: Vec<UserId> = if with_creators { list.iter().filter_map(|e| e.creator_id).collect() } else { Vec::new() };
    ids.sort();
    ids.dedup();
    let users = if ids.is_empty() { Vec::new() } else { node.store.get_users(&ids).await? };
    Ok(list.iter().map(|e| emoji::full(e, e.creator_id.and_then(|c| users.iter().find(|u| u.id == c)))).collect())
}

/// `GET /guilds/{g}/emojis`: members only.
pub async fn list(State(node): State<Arc<Node>>, Caller(u): Caller, Path(g): Path<String>) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&g, ErrorCode::UnknownGuild)?;
    let access = guild_access(&node, gid, u.id).await?;
    let list = node.store.emojis_of(gid).await?;
    let out = objects(&node, &list, sees_creators(access.perms)).await?;
    Ok(json_bytes(StatusCode::OK, serde_json::to_vec(&out).map_err(ApiError::internal)?))
}

/// `GET /guilds/{g}/emojis/{id}`.
pub async fn get(State(node): State<Arc<Node>>, Caller(u): Caller, Path((g, id)): Path<(String, String)>) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&g, ErrorCode::UnknownGuild)?;
    let access = guild_access(&node, gid, u.id).await?;
    let id: EmojiId = parse_id(&id, ErrorCode::UnknownEmoji)?;
    let e = node.store.get_emoji(id).await?.filter(|e| e.guild_id == gid).ok_or_else(|| ApiError::not_found(ErrorCode::UnknownEmoji))?;
    let out = objects(&node, std::slice::from_ref(&e), sees_creators(access.perms)).await?;
    Ok(json_bytes(StatusCode::OK, serde_json::to_vec(&out[0]).map_err(ApiError::internal)?))
}

#[derive(schemars::JsonSchema, Deserialize)]
#[schemars(rename = "CreateEmoji")]
pub struct CreateBody {
    name: Option<String>,
    image: Option<String>,
    #[serde(default, deserialize_with = "protocol::de::null_default")]
    roles: Vec<RoleId>,
}

/// `POST /guilds/{g}/emojis` `{name, image, roles?}`: 201 with the emoji.
pub async fn create(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(g): Path<String>,
    _: GuildMay<{ permission::MANAGE_GUILD_EXPRESSIONS | permission::CREATE_GUILD_EXPRESSIONS }>,
    JsonBody(b): JsonBody<CreateBody>,
) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&g, ErrorCode::UnknownGuild)?;
    let name = b.name.ok_or_else(|| ApiError::field("name", "BASE_TYPE_REQUIRED", "This field is required"))?;
    emoji::check_name(&name).map_err(|(code, msg)| ApiError::field("name", code, msg))?;
    let image = b.image.ok_or_else(|| ApiError::field("image", "BASE_TYPE_REQUIRED", "This field is required"))?;
    let (bytes, kind) = emoji::decode_data_uri(&image).map_err(|e| match e {
        ImageError::TooLarge => ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::AssetTooLarge),
        ImageError::Invalid => ApiError::field("image", "IMAGE_INVALID", "Invalid image data"),
    })?;
    let id: EmojiId = EmojiId(node.ids.next().0);
    let rec = EmojiRecord { id, guild_id: gid, name, animated: emoji::animated(kind, &bytes), roles: b.roles, creator_id: Some(u.id) };
    let path = emoji::image_path(&node.config.data_dir, id);
    write_image(&path, &bytes).await?;
    let answer = ask(&node, gid, u.id, Action::Emoji(EmojiAction::Create { emoji: Box::new(rec) })).await;
    // Refused: the image goes. No answer (503, 500): the emoji may have
    // been committed, so it stays.
    if matches!(answer, Err(ApiError::Code(..) | ApiError::InvalidForm(_))) {
        let _ = tokio::fs::remove_file(&path).await;
    }
    answer
}

/// Writes an image whole (a temporary name, then renamed into place).
async fn write_image(path: &std::path::Path, bytes: &[u8]) -> ApiResult<()> {
    let io = |e: std::io::Error| ApiError::internal(format!("emoji image {}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await.map_err(io)?;
    }
    let tmp = path.with_extension("tmp");
    tokio::fs::write(&tmp, bytes).await.map_err(io)?;
    tokio::fs::rename(&tmp, path).await.map_err(io)
}

#[derive(schemars::JsonSchema, Deserialize)]
#[schemars(rename = "ModifyEmoji")]
pub struct ModifyBody {
    #[serde(default, deserialize_with = "protocol::de::null_default")]
    name: Option<String>,
    /// `null` clears the list (everyone may use the emoji).
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    roles: Option<Option<Vec<RoleId>>>,
}

/// `PATCH /guilds/{g}/emojis/{id}` `{name?, roles?}`.
pub async fn modify(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((g, id)): Path<(String, String)>,
    _: GuildMay<{ permission::MANAGE_GUILD_EXPRESSIONS | permission::CREATE_GUILD_EXPRESSIONS }>,
    JsonBody(b): JsonBody<ModifyBody>,
) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&g, ErrorCode::UnknownGuild)?;
    let id: EmojiId = parse_id(&id, ErrorCode::UnknownEmoji)?;
    if let Some(n) = &b.name {
        emoji::check_name(n).map_err(|(code, msg)| ApiError::field("name", code, msg))?;
    }
    let roles = Set::from(b.roles.map(Option::unwrap_or_default));
    ask(&node, gid, u.id, Action::Emoji(EmojiAction::Modify { id, name: Set::from(b.name), roles })).await
}

/// `DELETE /guilds/{g}/emojis/{id}`: 204; its image goes too.
pub async fn delete(State(node): State<Arc<Node>>, Caller(u): Caller, Path((g, id)): Path<(String, String)>) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&g, ErrorCode::UnknownGuild)?;
    let id: EmojiId = parse_id(&id, ErrorCode::UnknownEmoji)?;
    let answer = ask(&node, gid, u.id, Action::Emoji(EmojiAction::Delete { id })).await?;
    if answer.status() == StatusCode::NO_CONTENT {
        let _ = tokio::fs::remove_file(emoji::image_path(&node.config.data_dir, id)).await;
    }
    Ok(answer)
}

/// `GET /emojis/{id}.{ext}`: the image as uploaded, whatever extension is
/// asked (its real type in `Content-Type`); no token, as on a CDN.
pub async fn image(State(node): State<Arc<Node>>, Path(file): Path<String>) -> Response {
    let not_found = || ApiError::not_found(ErrorCode::UnknownEmoji).into_response();
    let stem = file.split_once('.').map_or(file.as_str(), |(s, _)| s);
    let Ok(id) = stem.parse::<u64>() else { return not_found() };
    let Ok(bytes) = tokio::fs::read(emoji::image_path(&node.config.data_dir, EmojiId(id))).await else { return not_found() };
    let kind = ImageKind::sniff(&bytes).unwrap_or(ImageKind::Png);
    let mut r = (StatusCode::OK, bytes).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind.content_type()));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("public, max-age=86400"));
    r
}
