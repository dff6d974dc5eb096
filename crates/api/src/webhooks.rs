//! Incoming webhooks: create, list, get, modify, delete (MANAGE_WEBHOOKS in
//! the webhook's channel, or the webhook's token instead of a user), and
//! execute (`POST /webhooks/{id}/{token}`, JSON or multipart with files).
//!
//! Reads come from the store; every change, and every message a webhook
//! sends, goes through the guild's actor (it checks the caller's
//! permissions, or that the channel still exists, from its own state).

use std::sync::Arc;

use super::Query;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use protocol::model::permission;
use protocol::{ActorKey, ChannelId, ErrorCode, GuildId, Snowflake, UserId};
use rand::distributions::Alphanumeric;
use rand::Rng;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use store::{MessageRecord, UserRecord, WebhookRecord};

use super::guard::ChannelMay;
use super::{channel_access, guild_access, json_bytes, parse_id, ApiError, ApiResult, Caller, JsonBody};
use node::attachments::http_base;
use node::auth::now_ms;
use node::convert;
use node::route::ops::WebhookAction;
use node::route::Action;
use node::Node;

/// Discord's limits on a webhook's name and on message content.
const MAX_NAME: usize = 80;
const MAX_CONTENT: usize = 2000;
const MAX_EMBEDS: usize = 10;
/// Characters of a webhook token (Discord's are 68).
const TOKEN_LEN: usize = 68;
/// Discord's webhook type 1: incoming.
const INCOMING: u8 = 1;
/// Flags a webhook message may set: SUPPRESS_EMBEDS, SUPPRESS_NOTIFICATIONS.
const SETTABLE_FLAGS: u64 = 1 << 2 | 1 << 12;

/// The routes, under the API prefixes.
/// The webhook object as Discord documents it; `user` (its creator) only
/// for callers with a user token.
/// A webhook without its secret (token, URL): what anyone who may see it
/// in the audit log gets.
pub(crate) fn public_json(w: &WebhookRecord) -> Value {
    json!({
        "id": w.id, "type": w.kind, "guild_id": w.guild_id, "channel_id": w.channel_id, "name": w.name,
        "avatar": w.avatar, "application_id": w.application_id.map(|a| a.to_string()),
    })
}

fn webhook_json(node: &Node, w: &WebhookRecord, creator: Option<&UserRecord>) -> Value {
    let mut v = public_json(w);
    v["token"] = w.token.clone().into();
    v["url"] = format!("{}/api/webhooks/{}/{}", http_base(&node.config), w.id, w.token).into();
    if let Some(u) = creator {
        v["user"] = serde_json::to_value(convert::user(u)).unwrap_or(Value::Null);
    }
    v
}

/// Renders webhooks with their creators (one users read).
async fn render(node: &Node, hooks: &[WebhookRecord]) -> ApiResult<Value> {
    let mut ids: Vec<UserId> = hooks.iter().filter_map(|w| w.creator_id).collect();
    ids.sort();
    ids.dedup();
    let users = node.store.get_users(&ids).await?;
    let creator = |w: &WebhookRecord| w.creator_id.and_then(|c| users.iter().find(|u| u.id == c));
    Ok(Value::Array(hooks.iter().map(|w| webhook_json(node, w, creator(w))).collect()))
}

fn ok(v: &Value) -> Response {
    json_bytes(StatusCode::OK, v.to_string())
}

#[derive(schemars::JsonSchema, Deserialize)]
#[schemars(rename = "CreateWebhook")]
pub struct CreateBody {
    name: Option<String>,
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    avatar: Option<Option<String>>,
}

fn check_name(name: &str) -> ApiResult<()> {
    let n = name.chars().count();
    if !(1..=MAX_NAME).contains(&n) {
        return Err(ApiError::field("name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 80 in length."));
    }
    let lower = name.to_lowercase();
    if lower.contains("clyde") || lower.contains("discord") {
        return Err(ApiError::field("name", "WEBHOOK_INVALID_USERNAME", "Username cannot contain \"clyde\" or \"discord\""));
    }
    Ok(())
}

/// An avatar as given (a data URI): kept as a hash, like Discord's image
/// fields. The image itself is not served (throng has no CDN for avatars).
fn avatar_hash(data: &str) -> String {
    hex::encode(&Sha256::digest(data.as_bytes())[..16])
}

/// `POST /channels/{c}/webhooks` (MANAGE_WEBHOOKS in the channel).
pub async fn create(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    _: ChannelMay<{ permission::MANAGE_WEBHOOKS }>,
    JsonBody(b): JsonBody<CreateBody>,
) -> ApiResult<Response> {
    let cid: ChannelId = parse_id(&id, ErrorCode::UnknownChannel)?;
    let guild =
        super::actor_of(&node, cid).await?.as_guild().ok_or(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::CannotExecuteOnDm))?;
    let name = b.name.ok_or_else(|| ApiError::field("name", "BASE_TYPE_REQUIRED", "This field is required"))?;
    check_name(&name)?;
    let w = WebhookRecord {
        id: node.ids.next(),
        guild_id: guild,
        channel_id: cid,
        kind: INCOMING,
        name,
        avatar: b.avatar.flatten().map(|a| avatar_hash(&a)),
        token: rand::thread_rng().sample_iter(&Alphanumeric).take(TOKEN_LEN).map(char::from).collect(),
        creator_id: Some(u.id),
        application_id: None,
        created_at: now_ms(),
    };
    let body = webhook_json(&node, &w, Some(&u));
    super::ask(&node, guild, u.id, Action::Webhook(WebhookAction::Create { webhook: Box::new(w), body })).await
}

/// `GET /channels/{c}/webhooks` (MANAGE_WEBHOOKS in the channel).
pub async fn list_channel(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let (c, a) = channel_access(&node, parse_id(&id, ErrorCode::UnknownChannel)?, u.id).await?;
    require_manage(a.in_channel(&c))?;
    let hooks = node.store.webhooks_of_channel(c.id).await?;
    Ok(ok(&render(&node, &hooks).await?))
}

/// `GET /guilds/{g}/webhooks` (MANAGE_WEBHOOKS in the guild).
pub async fn list_guild(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    let a = guild_access(&node, gid, u.id).await?;
    a.require(permission::MANAGE_WEBHOOKS)?;
    let hooks = node.store.webhooks_of_guild(gid).await?;
    Ok(ok(&render(&node, &hooks).await?))
}

fn require_manage(bits: u64) -> ApiResult<()> {
    if bits & permission::MANAGE_WEBHOOKS == 0 {
        return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
    }
    Ok(())
}

async fn find(node: &Node, id: &str) -> ApiResult<WebhookRecord> {
    let id: u64 = parse_id(id, ErrorCode::UnknownWebhook)?;
    node.store.get_webhook(Snowflake(id)).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownWebhook))
}

/// The webhook `id`, if `token` is its token: 404 10015 / 401 50027.
async fn find_by_token(node: &Node, id: &str, token: &str) -> ApiResult<WebhookRecord> {
    let w = find(node, id).await?;
    if !constant_time_eq(w.token.as_bytes(), token.as_bytes()) {
        return Err(ApiError::Code(StatusCode::UNAUTHORIZED, ErrorCode::InvalidWebhookToken));
    }
    Ok(w)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// A webhook the caller may manage (MANAGE_WEBHOOKS in its channel).
async fn managed(node: &Node, id: &str, user: UserId) -> ApiResult<WebhookRecord> {
    let w = find(node, id).await?;
    let (c, a) = channel_access(node, w.channel_id, user).await?;
    require_manage(a.in_channel(&c))?;
    Ok(w)
}

/// `GET /webhooks/{id}`.
pub async fn get_one(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let w = managed(&node, &id, u.id).await?;
    let creator = match w.creator_id {
        Some(c) => node.store.get_user(c).await?,
        None => None,
    };
    Ok(ok(&webhook_json(&node, &w, creator.as_ref())))
}

/// `GET /webhooks/{id}/{token}`: no user needed, none shown.
pub async fn get_by_token(State(node): State<Arc<Node>>, Path((id, token)): Path<(String, String)>) -> ApiResult<Response> {
    let w = find_by_token(&node, &id, &token).await?;
    Ok(ok(&webhook_json(&node, &w, None)))
}

#[derive(schemars::JsonSchema, Deserialize)]
#[schemars(rename = "ModifyWebhook")]
pub struct ModifyBody {
    name: Option<String>,
    #[serde(default, deserialize_with = "protocol::de::nullable")]
    avatar: Option<Option<String>>,
    channel_id: Option<String>,
}

/// Applies a PATCH body to `w`; `channel_id` only when `with_channel`.
async fn patched(node: &Node, mut w: WebhookRecord, b: ModifyBody, with_channel: bool) -> ApiResult<WebhookRecord> {
    if let Some(n) = b.name {
        check_name(&n)?;
        w.name = n;
    }
    if let Some(a) = b.avatar {
        w.avatar = a.map(|a| avatar_hash(&a));
    }
    if let (true, Some(c)) = (with_channel, b.channel_id) {
        let bad = || ApiError::field("channel_id", "CHANNEL_NOT_IN_GUILD", "Channel is not in this guild.");
        let cid: ChannelId = c.parse().map_err(|_| bad())?;
        if node.channel_actor(cid).await? != Some(ActorKey::guild(w.guild_id)) {
            return Err(bad());
        }
        w.channel_id = cid;
    }
    Ok(w)
}

/// `PATCH /webhooks/{id}`: name, avatar, channel (MANAGE_WEBHOOKS in both).
pub async fn modify(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>, req: Request) -> ApiResult<Response> {
    let w = find(&node, &id).await?;
    // Before the body: MANAGE_WEBHOOKS where the webhook is (the actor
    // checks it again, and in the channel it moves to).
    super::guard::channel_may(&node, w.channel_id, u.id, permission::MANAGE_WEBHOOKS).await?;
    let b: ModifyBody = super::read_json(req).await?;
    let from = w.channel_id;
    let creator = match w.creator_id {
        Some(c) => node.store.get_user(c).await?,
        None => None,
    };
    let w = patched(&node, w, b, true).await?;
    let body = webhook_json(&node, &w, creator.as_ref());
    let action = WebhookAction::Modify { from, by_token: false, body, webhook: Box::new(w.clone()) };
    super::ask(&node, w.guild_id, u.id, Action::Webhook(action)).await
}

/// `PATCH /webhooks/{id}/{token}`: name and avatar.
pub async fn modify_by_token(
    State(node): State<Arc<Node>>,
    Path((id, token)): Path<(String, String)>,
    JsonBody(b): JsonBody<ModifyBody>,
) -> ApiResult<Response> {
    let w = find_by_token(&node, &id, &token).await?;
    let from = w.channel_id;
    let w = patched(&node, w, b, false).await?;
    let body = webhook_json(&node, &w, None);
    let action = WebhookAction::Modify { from, by_token: true, body, webhook: Box::new(w.clone()) };
    super::ask(&node, w.guild_id, UserId(w.id.0), Action::Webhook(action)).await
}

/// `DELETE /webhooks/{id}`.
pub async fn delete(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let w = find(&node, &id).await?;
    let action = WebhookAction::Delete { id: w.id, channel: w.channel_id, by_token: false };
    super::ask(&node, w.guild_id, u.id, Action::Webhook(action)).await
}

/// `DELETE /webhooks/{id}/{token}`.
pub async fn delete_by_token(State(node): State<Arc<Node>>, Path((id, token)): Path<(String, String)>) -> ApiResult<Response> {
    let w = find_by_token(&node, &id, &token).await?;
    let action = WebhookAction::Delete { id: w.id, channel: w.channel_id, by_token: true };
    super::ask(&node, w.guild_id, UserId(w.id.0), Action::Webhook(action)).await
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
#[schemars(rename = "ExecuteWebhook")]
pub struct ExecuteBody {
    content: Option<String>,
    username: Option<String>,
    /// Accepted; not shown (throng does not fetch or proxy images).
    #[allow(dead_code)]
    avatar_url: Option<String>,
    #[serde(default, deserialize_with = "protocol::de::null_default")]
    tts: bool,
    embeds: Option<Vec<Value>>,
    components: Option<Vec<Value>>,
    flags: Option<u64>,
    // Accepted and ignored: allowed_mentions, attachments metadata (their
    // descriptions are read), thread_name, applied_tags, poll.
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct ExecuteQuery {
    /// `true`/`false` (discord.js) or `1`/`0` (discord.py).
    #[serde(default, deserialize_with = "protocol::de::flag")]
    wait: Option<bool>,
    /// Threads do not exist yet: ignored.
    #[allow(dead_code)]
    thread_id: Option<String>,
}

/// `POST /webhooks/{id}/{token}`: the webhook sends a message. `?wait=true`
/// answers with the message, otherwise 204 once committed.
pub async fn execute(
    State(node): State<Arc<Node>>,
    Path((id, token)): Path<(String, String)>,
    Query(q): Query<ExecuteQuery>,
    req: Request,
) -> ApiResult<Response> {
    if super::interactions::is_interaction_token(&token) {
        // An interaction's followup (the token is checked before the body is read).
        return super::interactions::followup(&node, &id, token, req).await;
    }
    // The token is checked before any byte of the body is read.
    let w = find_by_token(&node, &id, &token).await?;
    // A webhook's files count against its creator's quota (the webhook's
    // own id for one without a creator): one member cannot multiply their
    // storage by making webhooks.
    let sender = super::attachments::Sender { uploader: w.creator_id.unwrap_or(UserId(w.id.0)), may_attach: true };
    let (b, uploads) = super::attachments::read_body::<ExecuteBody>(req, &node, w.channel_id, sender).await?;
    let content = b.content.unwrap_or_default();
    let embeds = b.embeds.unwrap_or_default();
    if content.chars().count() > MAX_CONTENT {
        return Err(ApiError::field("content", "BASE_TYPE_MAX_LENGTH", "Must be 2000 or fewer in length."));
    }
    if embeds.len() > MAX_EMBEDS {
        return Err(ApiError::field("embeds", "BASE_TYPE_MAX_LENGTH", "Must be 10 or fewer in length."));
    }
    if content.trim().is_empty() && embeds.is_empty() && uploads.list.is_empty() {
        return Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::EmptyMessage));
    }
    if let Some(c) = &b.components {
        super::check_components(&Value::Array(c.clone()), "components")?;
    }
    let username = match b.username.filter(|n| !n.is_empty()) {
        Some(n) => {
            check_name(&n).map_err(|_| ApiError::field("username", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 80 in length."))?;
            n
        }
        None => w.name.clone(),
    };
    if node.delivery.backlog() > node.config.gateway.delivery_backlog_max {
        return Err(ApiError::Busy);
    }
    let mut mentions = super::messages::parse_mentions(&content);
    mentions.truncate(100);
    let message = MessageRecord {
        id: node.ids.next().into(),
        channel_id: w.channel_id,
        guild_id: Some(w.guild_id),
        author_id: UserId(w.id.0),
        edited_at: None,
        kind: 0,
        flags: b.flags.unwrap_or(0) & SETTABLE_FLAGS,
        tts: b.tts,
        // Webhooks may mention everyone (Discord's allowed_mentions aside).
        mention_everyone: content.contains("@everyone") || content.contains("@here"),
        mentions,
        reference: None,
        extra: json!({
            "embeds": embeds,
            "attachments": uploads.json(),
            "components": b.components.unwrap_or_default(),
            "webhook_id": w.id,
            "webhook_author": {"username": username, "avatar": w.avatar},
        }),
        content,
    };
    let r = super::ask(&node, w.guild_id, UserId(w.id.0), Action::Webhook(WebhookAction::Execute { message: Box::new(message) })).await;
    match r {
        Ok(resp) => {
            uploads.keep();
            if q.wait.unwrap_or(false) {
                Ok(resp)
            } else {
                Ok(StatusCode::NO_CONTENT.into_response())
            }
        }
        Err(ApiError::Busy) => {
            // Maybe committed (no answer in time): the sweeper decides.
            uploads.keep();
            Err(ApiError::Busy)
        }
        Err(e) => Err(e),
    }
}

/// `GET /webhooks/{id}/{token}/messages/{message_id}`: interactions' messages
/// (a plain webhook's messages are not readable this way yet: 404).
pub async fn get_message(State(node): State<Arc<Node>>, Path((id, token, message)): Path<(String, String, String)>) -> ApiResult<Response> {
    interaction_only(&token)?;
    super::interactions::message(&node, &id, token, &message, None, false).await
}

/// `PATCH /webhooks/{id}/{token}/messages/{message_id}`.
pub async fn edit_message(
    State(node): State<Arc<Node>>,
    Path((id, token, message)): Path<(String, String, String)>,
    req: Request,
) -> ApiResult<Response> {
    interaction_only(&token)?;
    super::interactions::require_token(&node, &token)?;
    let patch: Value = super::parse_json(&super::interactions::read_body(&node, req).await?)?;
    if !patch.is_object() {
        return Err(ApiError::field("_", "DICT_TYPE_CONVERT", "Only dictionaries may be used in a DictType"));
    }
    super::interactions::message(&node, &id, token, &message, Some(patch), false).await
}

/// `DELETE /webhooks/{id}/{token}/messages/{message_id}`.
pub async fn delete_message(
    State(node): State<Arc<Node>>,
    Path((id, token, message)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    interaction_only(&token)?;
    super::interactions::message(&node, &id, token, &message, None, true).await
}

fn interaction_only(token: &str) -> ApiResult<()> {
    if super::interactions::is_interaction_token(token) {
        Ok(())
    } else {
        Err(ApiError::not_found(ErrorCode::UnknownWebhook))
    }
}
