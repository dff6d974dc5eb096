//! The REST API under `/api/v10`, `/api/v9` and `/api`, in Discord's shapes.
//!
//! One file per resource; this file holds the router, the extractors
//! (caller, JSON body) and the access checks they share.

pub mod absent;
pub mod admin;
pub mod attachments;
pub mod bans;
pub mod channels;
pub mod commands;
pub mod dms;
pub mod emojis;
pub mod error;
pub mod guilds;
pub mod messages;
pub mod metrics;
pub mod pins;
pub mod ratelimit;
pub mod reactions;
pub mod roles;
pub mod threads;
pub mod users;
pub mod web;
pub mod webhooks;

use std::sync::Arc;

use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use axum::Router;
use protocol::model::permission;
use protocol::{ErrorCode, GuildId, UserId};
use serde::de::DeserializeOwned;
use store::{ChannelRecord, GuildRecord, MemberRecord, UserRecord};

pub use error::{json_bytes, ApiError, ApiResult};

use crate::node::Node;

/// The authenticated caller (`Authorization: Bot <token>` or a bare user token).
pub struct Caller(pub Arc<UserRecord>);

impl FromRequestParts<Arc<Node>> for Caller {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, node: &Arc<Node>) -> ApiResult<Self> {
        let h = parts.headers.get(axum::http::header::AUTHORIZATION).and_then(|v| v.to_str().ok()).ok_or_else(ApiError::unauthorized)?;
        Ok(Caller(node.auth.user_for_header(h).await?))
    }
}

/// A JSON request body with Discord's errors: 50109 for malformed JSON,
/// 50035 for a body of the wrong shape, 40005 when over the size limit.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> ApiResult<Self> {
        let bytes = axum::body::Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::Code(StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::EntityTooLarge)
            } else {
                ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson)
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// Parses a JSON body (an empty body counts as `{}`). JSON text is UTF-8
/// (RFC 8259): a body that is not is invalid JSON, also when the bad bytes
/// sit in a field we ignore (serde_json skips those without checking them).
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    let text: &str = if bytes.iter().all(u8::is_ascii_whitespace) {
        "{}"
    } else {
        std::str::from_utf8(bytes).map_err(|_| ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson))?
    };
    serde_json::from_str(text).map_err(|e| {
        if e.is_syntax() || e.is_eof() {
            ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson)
        } else {
            ApiError::InvalidForm(serde_json::json!({ "_errors": [{ "code": "BASE_TYPE_INVALID", "message": e.to_string() }] }))
        }
    })
}

/// A caller's standing in a guild.
pub struct Access {
    pub guild: GuildRecord,
    pub member: MemberRecord,
    /// Guild-level permission bits.
    pub perms: u64,
}

impl Access {
    pub fn is_owner(&self) -> bool {
        self.guild.owner_id == self.member.user_id
    }

    pub fn require(&self, bits: u64) -> ApiResult<()> {
        if self.perms & permission::ADMINISTRATOR != 0 || self.perms & bits == bits {
            Ok(())
        } else {
            Err(ApiError::forbidden(ErrorCode::MissingPermissions))
        }
    }

    /// Permission bits in a channel: guild bits with the channel's overwrites applied.
    pub fn in_channel(&self, c: &ChannelRecord) -> u64 {
        crate::perm::in_channel(self.perms, self.guild.id, &self.member, c)
    }
}

/// The caller's membership and permissions in `guild`: 404 10004 if the guild
/// does not exist, 403 50001 if the caller is not a member.
pub async fn guild_access(node: &Node, guild: GuildId, user: UserId) -> ApiResult<Access> {
    let g = node.store.get_guild(guild).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownGuild))?;
    let member = node.store.get_member(guild, user).await?.ok_or_else(|| ApiError::forbidden(ErrorCode::MissingAccess))?;
    // The owner has every permission: no roles query on their (common) requests.
    let roles = if g.owner_id == user { Vec::new() } else { node.store.roles_of_guild(guild).await? };
    let perms = crate::perm::base(guild, g.owner_id, &roles, &member);
    Ok(Access { guild: g, member, perms })
}

/// A guild channel the caller can see: 404 10003 if it does not exist (or is
/// not a guild channel), 403 50001 if the caller may not view it.
pub async fn channel_access(node: &Node, channel: protocol::ChannelId, user: UserId) -> ApiResult<(ChannelRecord, Access)> {
    let c = node.store.get_channel(channel).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    let guild = c.guild_id.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    let access = guild_access(node, guild, user).await?;
    // A thread: the parent's permissions (and private threads' membership).
    if store::is_thread(c.kind) {
        return threads::thread_access(node, c, access, user).await;
    }
    if access.in_channel(&c) & permission::VIEW_CHANNEL == 0 {
        return Err(ApiError::forbidden(ErrorCode::MissingAccess));
    }
    Ok((c, access))
}

async fn not_found() -> ApiError {
    ApiError::not_found(ErrorCode::UnknownRoute)
}

fn api(node: &Arc<Node>) -> Router<Arc<Node>> {
    Router::new()
        .route("/gateway", get(users::gateway))
        .route("/gateway/bot", get(users::gateway_bot))
        .route("/auth/register", post(users::register))
        .route("/auth/login", post(users::login))
        .route("/users/@me", get(users::me).patch(users::modify_me))
        .route("/users/@me/guilds", get(users::my_guilds))
        .route("/users/@me/guilds/{guild_id}", axum::routing::delete(guilds::leave))
        .route("/users/{user_id}", get(users::get_user))
        .route("/oauth2/applications/@me", get(users::application))
        .route("/applications/@me", get(users::application))
        .route("/guilds", post(guilds::create))
        .route("/guilds/{guild_id}", get(guilds::get).patch(guilds::modify).delete(guilds::delete))
        .route("/guilds/{guild_id}/channels", get(guilds::channels).post(guilds::create_channel))
        .route("/guilds/{guild_id}/roles", get(guilds::roles))
        .route("/guilds/{guild_id}/members", get(guilds::members))
        .route("/guilds/{guild_id}/members/@me", axum::routing::patch(guilds::modify_me))
        .route(
            "/guilds/{guild_id}/members/{user_id}",
            get(guilds::member).put(guilds::add_member).patch(guilds::modify_member).delete(guilds::remove_member),
        )
        .route("/channels/{channel_id}", get(channels::get).patch(channels::modify).delete(channels::delete))
        .route("/channels/{channel_id}/messages", get(messages::list).post(messages::create))
        .route("/channels/{channel_id}/messages/{message_id}", get(messages::get).patch(messages::edit).delete(messages::delete))
        .route("/channels/{channel_id}/typing", post(messages::typing))
        .route("/channels/{channel_id}/invites", post(channels::create_invite))
        .route("/invites/{code}", get(channels::get_invite).post(channels::accept_invite).delete(channels::delete_invite))
        // Roles, overwrites, bans:
        .route("/guilds/{guild_id}/roles", post(roles::create).patch(roles::reorder))
        .route("/guilds/{guild_id}/roles/{role_id}", get(roles::get).patch(roles::modify).delete(roles::delete))
        .route("/guilds/{guild_id}/members/{user_id}/roles/{role_id}", put(roles::grant).delete(roles::revoke))
        .route("/channels/{channel_id}/permissions/{overwrite_id}", put(roles::put_overwrite).delete(roles::delete_overwrite))
        .route("/guilds/{guild_id}/bans", get(bans::list))
        .route("/guilds/{guild_id}/bans/{user_id}", get(bans::get).put(bans::create).delete(bans::remove))
        // Reactions, emojis, pins, bulk delete:
        .route(
            "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/{user_id}",
            axum::routing::put(reactions::add).delete(reactions::remove),
        )
        .route("/channels/{channel_id}/messages/{message_id}/reactions/{emoji}", get(reactions::users).delete(reactions::clear_emoji))
        .route("/channels/{channel_id}/messages/{message_id}/reactions", axum::routing::delete(reactions::clear_all))
        .route("/channels/{channel_id}/messages/pins", get(pins::list))
        .route("/channels/{channel_id}/messages/pins/{message_id}", axum::routing::put(pins::pin).delete(pins::unpin))
        .route("/channels/{channel_id}/pins", get(pins::list_old))
        .route("/channels/{channel_id}/pins/{message_id}", axum::routing::put(pins::pin).delete(pins::unpin))
        .route("/channels/{channel_id}/messages/bulk-delete", post(pins::bulk_delete))
        .route("/guilds/{guild_id}/emojis/{emoji_id}", get(emojis::get).patch(emojis::modify).delete(emojis::delete))
        // Attachments, webhooks:
        .merge(webhooks::routes())
        // DMs, threads, application commands:
        .route("/users/@me/channels", get(dms::list).post(dms::open))
        .route("/channels/{channel_id}/messages/{message_id}/threads", post(threads::start_from_message))
        .route("/channels/{channel_id}/threads", post(threads::start))
        .route("/channels/{channel_id}/threads/archived/public", get(threads::archived_public))
        .route("/channels/{channel_id}/threads/archived/private", get(threads::archived_private))
        .route("/channels/{channel_id}/thread-members", get(threads::members))
        .route(
            "/channels/{channel_id}/thread-members/{user_id}",
            get(threads::member).put(threads::add_member).delete(threads::remove_member),
        )
        .route("/guilds/{guild_id}/threads/active", get(threads::active))
        .route("/applications/{app_id}/commands", get(commands::global_list).post(commands::global_create).put(commands::global_overwrite))
        .route(
            "/applications/{app_id}/commands/{command_id}",
            get(commands::global_get).patch(commands::global_edit).delete(commands::global_delete),
        )
        .route(
            "/applications/{app_id}/guilds/{guild_id}/commands",
            get(commands::guild_list).post(commands::guild_create).put(commands::guild_overwrite),
        )
        .route(
            "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}",
            get(commands::guild_get).patch(commands::guild_edit).delete(commands::guild_delete),
        )
        .route("/applications/{app_id}/guilds/{guild_id}/commands/permissions", get(absent::empty_list))
        .route("/applications/{app_id}/entitlements", get(absent::empty_list))
        .route("/applications/{app_id}/emojis", get(absent::empty_items))
        .route("/soundboard-default-sounds", get(absent::empty_list))
        .route("/guilds/{guild_id}/soundboard-sounds", get(absent::empty_items))
        .route("/guilds/{guild_id}/emojis", get(emojis::list).post(emojis::create))
        .route("/guilds/{guild_id}/stickers", get(absent::empty_list))
        .route("/sticker-packs", get(absent::sticker_packs))
        .route("/voice/regions", get(absent::empty_list))
        .route("/_throng/admin/drop-sessions", post(admin::drop_sessions))
        .route("/_throng/admin/stats", get(admin::stats))
        .route("/_throng/admin/guilds/{guild_id}/owner", get(admin::owner))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(node.clone(), ratelimit::middleware))
}

/// `GET /health`: 200 `{"status":"ok"}` while the node takes sessions;
/// 503 with `"draining"` during shutdown or `"no-cluster"` when a cluster
/// node has lost its bus. For load balancers' checks; no token.
async fn health(axum::extract::State(node): axum::extract::State<Arc<Node>>) -> axum::response::Response {
    let nodes = node.guilds.cluster_nodes();
    let (status, code, reason) = if node.shutdown.is_cancelled() {
        ("draining", StatusCode::SERVICE_UNAVAILABLE, None)
    } else {
        match node.guilds.health() {
            Ok(()) => ("ok", StatusCode::OK, None),
            Err(why) => ("no-cluster", StatusCode::SERVICE_UNAVAILABLE, Some(why)),
        }
    };
    let body = serde_json::json!({
        "status": status, "reason": reason, "node": node.id.0, "cluster_nodes": nodes,
        "sessions": node.sessions.len(), "guild_actors": node.guilds.local_actors(),
    });
    json_bytes(code, body.to_string())
}

/// `GET /ready`: 200 `{"status":"ready"}` when the node takes sessions
/// (as `/health`) and its store answers a query; 503 with the reason
/// otherwise. For orchestrators' readiness checks; no token.
/// How long `/ready` waits for the store's answer before it says not ready.
const READY_STORE_PROBE: std::time::Duration = std::time::Duration::from_secs(2);

async fn ready(axum::extract::State(node): axum::extract::State<Arc<Node>>) -> axum::response::Response {
    let why: Option<String> = if node.shutdown.is_cancelled() {
        Some("draining".into())
    } else if let Err(why) = node.guilds.health() {
        Some(why.into())
    } else {
        let probe = tokio::time::timeout(READY_STORE_PROBE, node.store.get_user(UserId(0))).await;
        match probe {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(format!("store: {e}")),
            Err(_) => Some(format!("store: no answer within {} s", READY_STORE_PROBE.as_secs())),
        }
    };
    match why {
        None => json_bytes(StatusCode::OK, r#"{"status":"ready"}"#),
        Some(w) => json_bytes(StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({"status": "not-ready", "reason": w}).to_string()),
    }
}

/// The whole HTTP surface: the API under its three prefixes and the gateway
/// upgrade on `/` (handled before routing by the listener).
pub fn router(node: Arc<Node>) -> Router {
    let api = api(&node);
    Router::new()
        .nest("/api/v10", api.clone())
        .nest("/api/v9", api.clone())
        .nest("/api", api)
        .route("/health", get(health))
        .route("/metrics", get(metrics::metrics))
        .route("/ready", get(ready))
        .route("/emojis/{file}", get(emojis::image))
        .merge(web::routes())
        .merge(attachments::routes())
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(node.config.limits.max_body_bytes))
        .with_state(node)
}

/// A user id in a path, where `@me` is the caller. Clients may send it
/// percent-encoded (discord.js: `members/%40me`), which no literal `@me`
/// route matches, so routes with a `{user_id}` take it too.
pub fn user_or_me(s: &str, caller: UserId) -> ApiResult<UserId> {
    if s == "@me" {
        return Ok(caller);
    }
    parse_id(s, ErrorCode::UnknownUser)
}

/// Parses a path id; anything that is not a snowflake is an unknown `code`.
pub fn parse_id<T: std::str::FromStr>(s: &str, code: ErrorCode) -> ApiResult<T> {
    s.parse().map_err(|_| ApiError::not_found(code))
}

/// Asks `guild`'s actor, wherever it runs, to carry out `action` for
/// `user`, and answers with what it says: the actor checks permissions
/// from its own state and commits the change. A full mailbox or writer, an
/// owner that is gone or no answer within `limits.write_timeout_ms`: 503
/// (the change may have committed in the last case; the client may retry).
pub async fn ask(node: &Arc<Node>, guild: GuildId, user: UserId, action: crate::route::Action) -> ApiResult<axum::response::Response> {
    use crate::route::{Op, OpReply};
    let (reply, answer) = node.replies.register();
    node.guilds.send(guild, crate::guild::GuildMsg::Op(Box::new(Op { user, action, reply })))?;
    let wait = std::time::Duration::from_millis(node.config.limits.write_timeout_ms);
    let Ok(Ok(answer)) = tokio::time::timeout(wait, answer).await else { return Err(ApiError::Busy) };
    match serde_json::from_slice::<OpReply>(&answer).map_err(|e| ApiError::Internal(e.to_string()))? {
        OpReply::Done { status, body } => {
            let status = StatusCode::from_u16(status).map_err(|e| ApiError::Internal(e.to_string()))?;
            Ok(match body {
                Some(b) => json_bytes(status, b.get().to_owned()),
                None => axum::response::IntoResponse::into_response(status),
            })
        }
        OpReply::Error { status, code } => Err(ApiError::Code(StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST), code)),
        OpReply::Form(errors) => Err(ApiError::InvalidForm(errors)),
        OpReply::Retry => Err(ApiError::Busy),
        OpReply::Failed(e) => Err(ApiError::Internal(e)),
    }
}

/// The guild of channel `id` (a node-level map; a store read the first
/// time): 404 10003 if there is no such guild channel.
pub async fn guild_of(node: &Node, id: protocol::ChannelId) -> ApiResult<GuildId> {
    node.channel_guild(id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))
}

/// Sends a committed change to its guild's actor. The store already has it,
/// so a busy guild only delays live delivery; that is logged, not failed.
pub fn publish(node: &Arc<Node>, guild: GuildId, ev: crate::guild::GuildEvent) {
    if let Err(e) = node.guilds.send(guild, ev.into()) {
        tracing::warn!(guild = %guild, error = %e, "committed change not dispatched");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct Named {
        #[allow(dead_code)]
        name: Option<String>,
    }

    fn invalid_json<T: std::fmt::Debug>(r: ApiResult<T>) -> bool {
        matches!(r, Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::InvalidJson)))
    }

    #[test]
    fn parse_json_rejects_invalid_utf8_even_in_ignored_fields() {
        // Found by fuzzing (fuzz/ rest_json): a non-UTF-8 byte in an
        // unknown key was accepted.
        assert!(invalid_json(parse_json::<Named>(b"{\"name\":\"c\",\"al\xbfw\":3}")));
        assert!(invalid_json(parse_json::<Named>(b"{\"x\":\"\xff\"}")));
        assert!(invalid_json(parse_json::<Named>(b"{\"name\":\"\xc0\xaf\"}")));
        assert_eq!(parse_json::<Named>("{\"name\":\"h\u{e9}\"}".as_bytes()).unwrap().name.as_deref(), Some("h\u{e9}"));
        assert!(parse_json::<Named>(b" \n").unwrap().name.is_none());
        assert!(matches!(parse_json::<Named>(b"{\"name\":1}"), Err(ApiError::InvalidForm(_))));
    }
}
