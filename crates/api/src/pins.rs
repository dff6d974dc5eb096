//! Pins and bulk deletes. Pins: `GET /channels/{c}/messages/pins`
//! (`{items: [{pinned_at, message}], has_more}`, paged by pin time: what
//! discord.py 2.7 and discord.js' `fetchPins` call), the older
//! `GET /channels/{c}/pins` (an array of messages: discord.js'
//! `fetchPinned`), and `PUT`/`DELETE` of a pin under both paths.
//! Bulk delete: `POST /channels/{c}/messages/bulk-delete`.

use std::sync::Arc;

use super::Query;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::model::{iso8601, permission};
use protocol::{ChannelId, ErrorCode, MessageId};
use serde::Deserialize;
use serde_json::json;

use super::guard::ChannelMay;
use super::{actor_of, ask_actor, channel_access, json_bytes, parse_id, ApiError, ApiResult, Caller, JsonBody};
use node::auth::now_ms;
use node::route::ops::PinAction;
use node::route::Action;
use node::Node;

/// Pins per page of `GET …/messages/pins` (Discord: 1-50, default 50), and
/// all that the older `GET …/pins` returns.
const PINS_PAGE: u32 = 50;

/// Messages per bulk delete, as on Discord.
const BULK_MIN: usize = 2;
const BULK_MAX: usize = 100;

/// Bulk delete takes no message older than two weeks (50034), as on Discord.
const BULK_MAX_AGE_MS: u64 = 14 * 24 * 3600 * 1000;

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct PinsQuery {
    before: Option<String>,
    limit: Option<u32>,
}

/// `GET /channels/{c}/messages/pins?before=&limit=`: the latest pins first;
/// none without READ_MESSAGE_HISTORY.
pub async fn list(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(c): Path<String>,
    Query(q): Query<PinsQuery>,
) -> ApiResult<Response> {
    let limit = q.limit.unwrap_or(PINS_PAGE);
    if !(1..=PINS_PAGE).contains(&limit) {
        return Err(ApiError::field("limit", "NUMBER_TYPE_MAX", "Must be between 1 and 50."));
    }
    let before = match q.before.as_deref() {
        None => None,
        Some(b) => {
            Some(protocol::model::parse_time(b).ok_or_else(|| ApiError::field("before", "DATE_TYPE_PARSE", "Could not parse date."))?)
        }
    };
    let (channel, access) = channel_access(&node, parse_id(&c, ErrorCode::UnknownChannel)?, u.id).await?;
    if access.in_channel(&channel) & permission::READ_MESSAGE_HISTORY == 0 {
        return Ok(json_bytes(StatusCode::OK, r#"{"items":[],"has_more":false}"#));
    }
    // One more than asked: whether there are more.
    let mut found = node.store.pinned_messages(channel.id, before, limit + 1).await?;
    let has_more = found.len() > limit as usize;
    found.truncate(limit as usize);
    let items = pinned(&node, found).await?;
    let items: Vec<_> = items.into_iter().map(|(m, at)| json!({ "pinned_at": iso8601(at), "message": m })).collect();
    Ok(json_bytes(StatusCode::OK, json!({ "items": items, "has_more": has_more }).to_string()))
}

/// `GET /channels/{c}/pins` (deprecated by Discord): the latest 50 pinned messages.
pub async fn list_old(State(node): State<Arc<Node>>, Caller(u): Caller, Path(c): Path<String>) -> ApiResult<Response> {
    let (channel, access) = channel_access(&node, parse_id(&c, ErrorCode::UnknownChannel)?, u.id).await?;
    if access.in_channel(&channel) & permission::READ_MESSAGE_HISTORY == 0 {
        return Ok(json_bytes(StatusCode::OK, "[]"));
    }
    let found = node.store.pinned_messages(channel.id, None, PINS_PAGE).await?;
    let out: Vec<_> = pinned(&node, found).await?.into_iter().map(|(m, _)| m).collect();
    Ok(json_bytes(StatusCode::OK, serde_json::to_vec(&out).map_err(ApiError::internal)?))
}

/// Renders pinned messages (without reactions, as Discord lists pins).
async fn pinned(node: &Node, found: Vec<(store::MessageRecord, u64)>) -> ApiResult<Vec<(protocol::model::Message, u64)>> {
    let (recs, times): (Vec<_>, Vec<_>) = found.into_iter().unzip();
    let mut msgs = super::messages::render(node, &recs).await?;
    for m in &mut msgs {
        m.pinned = true;
    }
    Ok(msgs.into_iter().zip(times).collect())
}

/// `PUT /channels/{c}/messages/pins/{m}` and `PUT /channels/{c}/pins/{m}`.
pub async fn pin(State(node): State<Arc<Node>>, Caller(u): Caller, Path((c, m)): Path<(String, String)>) -> ApiResult<Response> {
    let cid: ChannelId = parse_id(&c, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    let msg = message(&node, cid, &m).await?;
    let pinned = !node.store.pins_among(&[msg.id]).await?.is_empty();
    let count = node.store.count_pins(cid).await?;
    let action = PinAction::Pin {
        channel: cid,
        message: msg.id,
        kind: msg.kind,
        pinned,
        count,
        notice: node.ids.next().into(),
        author: msg.author_id,
    };
    ask_actor(&node, guild, u.id, Action::Pin(action)).await
}

/// `DELETE /channels/{c}/messages/pins/{m}` and `DELETE /channels/{c}/pins/{m}`.
pub async fn unpin(State(node): State<Arc<Node>>, Caller(u): Caller, Path((c, m)): Path<(String, String)>) -> ApiResult<Response> {
    let cid: ChannelId = parse_id(&c, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    let msg = message(&node, cid, &m).await?;
    // The latest two pins: whether this one is pinned, and the latest other.
    let latest = node.store.pinned_messages(cid, None, 2).await?;
    let pinned = !node.store.pins_among(&[msg.id]).await?.is_empty();
    let last = latest.iter().find(|(p, _)| p.id != msg.id).map(|(_, at)| *at);
    ask_actor(&node, guild, u.id, Action::Pin(PinAction::Unpin { channel: cid, message: msg.id, pinned, last, author: msg.author_id }))
        .await
}

async fn message(node: &Node, c: ChannelId, mid: &str) -> ApiResult<store::MessageRecord> {
    let mid: MessageId = parse_id(mid, ErrorCode::UnknownMessage)?;
    node.store.get_message(c, mid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownMessage))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct BulkBody {
    messages: Vec<MessageId>,
}

/// `POST /channels/{c}/messages/bulk-delete` `{messages: [ids]}`: 2 to 100
/// distinct ids, none older than two weeks; ids that are no message of the
/// channel count toward the limits and are skipped. One MESSAGE_DELETE_BULK.
pub async fn bulk_delete(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(c): Path<String>,
    _: ChannelMay<{ permission::MANAGE_MESSAGES }>,
    JsonBody(b): JsonBody<BulkBody>,
) -> ApiResult<Response> {
    let cid: ChannelId = parse_id(&c, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    check_bulk(&b.messages, now_ms())?;
    let ids = node.store.messages_among(cid, &b.messages).await?;
    ask_actor(&node, guild, u.id, Action::Pin(PinAction::BulkDelete { channel: cid, ids })).await
}

/// Count, duplicates and age of a bulk delete's ids, at `now` (ms).
fn check_bulk(ids: &[MessageId], now: u64) -> ApiResult<()> {
    if ids.len() < BULK_MIN {
        return Err(ApiError::field("messages", "BASE_TYPE_MIN_LENGTH", "Must be 2 or more in length."));
    }
    if ids.len() > BULK_MAX {
        return Err(ApiError::field("messages", "BASE_TYPE_MAX_LENGTH", "Must be 100 or fewer in length."));
    }
    let mut sorted = ids.to_vec();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(ApiError::field("messages", "BASE_TYPE_DUPLICATES", "Must not contain duplicate values."));
    }
    if ids.iter().any(|id| id.timestamp_ms() + BULK_MAX_AGE_MS < now) {
        return Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::BulkDeleteTooOld));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_deletes_are_checked_like_discords() {
        let now = protocol::id::DISCORD_EPOCH_MS + 100 * 24 * 3600 * 1000;
        let at = |ms: u64| MessageId((ms - protocol::id::DISCORD_EPOCH_MS) << 22);
        let fresh = [at(now - 1000), at(now - 2000)];
        assert!(check_bulk(&fresh, now).is_ok());
        assert!(matches!(check_bulk(&fresh[..1], now), Err(ApiError::InvalidForm(_))));
        assert!(matches!(check_bulk(&vec![at(now); 101], now), Err(ApiError::InvalidForm(_))));
        assert!(matches!(check_bulk(&[fresh[0], fresh[0]], now), Err(ApiError::InvalidForm(_))));
        let old = at(now - BULK_MAX_AGE_MS - 1);
        assert!(matches!(check_bulk(&[fresh[0], old], now), Err(ApiError::Code(_, ErrorCode::BulkDeleteTooOld))));
    }
}
