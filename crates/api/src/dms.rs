//! DMs: open (or find) the DM with a user, and list one's DMs. Messages in
//! a DM take the usual message routes; they reach the DM's own actor (see
//! `route::dm`), which checks that the author is a recipient.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use protocol::model::channel_type;
use protocol::{ActorKey, ChannelId, ErrorCode, UserId};
use serde::Deserialize;
use serde_json::Value;
use store::ChannelRecord;

use super::{ask_actor, json_bytes, ApiError, ApiResult, Caller, JsonBody};
use guild::dm::dm_json;
use node::route::dm::DmAction;
use node::route::Action;
use node::Node;

#[derive(schemars::JsonSchema, Deserialize)]
pub struct OpenDm {
    recipient_id: Option<UserId>,
    /// The official client's form: one user opens (or finds) the DM with
    /// them; two or more make a new group DM with the caller.
    recipients: Option<Vec<UserId>>,
}

/// People in a group DM at most, the caller included (Discord's limit).
pub const MAX_GROUP_DM_RECIPIENTS: usize = 10;

/// `POST /users/@me/channels` `{recipient_id}`: the DM with that user,
/// created on first use. Two users may have a DM when they share a guild
/// (else 50007, as Discord refuses strangers). A new DM's recipients are
/// subscribed to it on every node before the answer, so the first message
/// reaches all their sessions.
pub async fn open(State(node): State<Arc<Node>>, Caller(u): Caller, JsonBody(b): JsonBody<OpenDm>) -> ApiResult<Response> {
    let mut others: Vec<UserId> = match (&b.recipients, b.recipient_id) {
        (Some(list), _) => list.iter().copied().filter(|&r| r != u.id).collect(),
        (None, Some(to)) => vec![to],
        (None, None) => return Err(ApiError::field("recipient_id", "BASE_TYPE_REQUIRED", "This field is required")),
    };
    others.sort_unstable();
    others.dedup();
    if others.len() >= 2 {
        return open_group(&node, u.id, others).await;
    }
    let Some(&to) = others.first() else {
        return Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::CannotSendToUser));
    };
    if to == u.id {
        return Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::CannotSendToUser));
    }
    may_message(&node, u.id, to).await?;
    let fresh = new_dm_channel(&node, channel_type::DM);
    let id = node.store.open_dm(&fresh, u.id, to).await?;
    if id == fresh.id {
        ask_actor(&node, ActorKey::dm(id), u.id, Action::Dm(DmAction::Opened)).await?;
    }
    let dm = node.store.get_dm(id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    Ok(json_bytes(StatusCode::OK, dm_json(&dm, u.id).to_string()))
}

/// A new DM or group DM channel (`kind`), not yet stored.
fn new_dm_channel(node: &Node, kind: u8) -> ChannelRecord {
    ChannelRecord {
        id: ChannelId(node.ids.next().0),
        guild_id: None,
        kind,
        name: String::new(),
        position: 0,
        topic: None,
        nsfw: false,
        parent_id: None,
        rate_limit_per_user: 0,
        overwrites: Vec::new(),
        last_message_id: None,
    }
}

/// `from` may start a DM with `to`: `to` exists (else 400 50035) and the
/// two share a guild (else 403 50007, as Discord refuses strangers).
async fn may_message(node: &Node, from: UserId, to: UserId) -> ApiResult<()> {
    if node.store.get_user(to).await?.is_none() {
        return Err(ApiError::field("recipient_id", "INVALID_RECIPIENT", "Invalid Recipient(s)"));
    }
    let mine = node.store.guilds_of_user(from).await?;
    let theirs = node.store.guilds_of_user(to).await?;
    if !mine.iter().any(|g| theirs.binary_search(g).is_ok()) {
        return Err(ApiError::forbidden(ErrorCode::CannotSendToUser));
    }
    Ok(())
}

/// A new group DM of the caller and `others` (two or more, each someone
/// the caller may message; at most [`MAX_GROUP_DM_RECIPIENTS`] people in
/// all). Its recipients' sessions are subscribed on every node, and each
/// other recipient gets CHANNEL_CREATE, before the answer.
async fn open_group(node: &Arc<Node>, caller: UserId, others: Vec<UserId>) -> ApiResult<Response> {
    if others.len() + 1 > MAX_GROUP_DM_RECIPIENTS {
        return Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::MaxGroupDmRecipients));
    }
    for &to in &others {
        may_message(node, caller, to).await?;
    }
    let group = new_dm_channel(node, channel_type::GROUP_DM);
    let mut everyone = others;
    everyone.push(caller);
    node.store.create_group_dm(&group, &everyone).await?;
    ask_actor(node, ActorKey::dm(group.id), caller, Action::Dm(DmAction::Opened)).await?;
    let dm = node.store.get_dm(group.id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    Ok(json_bytes(StatusCode::OK, dm_json(&dm, caller).to_string()))
}

/// `GET /users/@me/channels`: the caller's DMs.
pub async fn list(State(node): State<Arc<Node>>, Caller(u): Caller) -> ApiResult<Response> {
    let dms = node.store.dms_of_users(&[u.id]).await?;
    let list: Vec<Value> = dms.into_iter().flat_map(|(_, v)| v).map(|d| dm_json(&d, u.id)).collect();
    Ok(json_bytes(StatusCode::OK, Value::Array(list).to_string()))
}

/// The DM `id` with its recipients, if the caller is one (403 50001 if
/// not); `None` if `id` is not a DM. No store read for a guild channel
/// once the node knows its guild.
async fn dm_of_caller(node: &Node, id: ChannelId, user: UserId) -> ApiResult<Option<store::DmChannel>> {
    let Some(key) = node.channel_actor(id).await? else { return Ok(None) };
    if key.as_dm().is_none() {
        return Ok(None);
    }
    let dm = node.store.get_dm(id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    if !dm.recipients.iter().any(|r| r.id == user) {
        return Err(ApiError::forbidden(ErrorCode::MissingAccess));
    }
    Ok(Some(dm))
}

/// A DM channel the caller reads (see `dm_of_caller`).
pub async fn readable(node: &Node, id: ChannelId, user: UserId) -> ApiResult<Option<ChannelRecord>> {
    Ok(dm_of_caller(node, id, user).await?.map(|d| d.channel))
}

/// `GET /channels/{dm}`: the DM as the caller sees it; `None` if `id` is not a DM.
pub async fn get(node: &Node, id: ChannelId, user: UserId) -> ApiResult<Option<Response>> {
    Ok(dm_of_caller(node, id, user).await?.map(|dm| json_bytes(StatusCode::OK, dm_json(&dm, user).to_string())))
}
