//! Read states (issue #29): `POST /channels/{c}/messages/{m}/ack`, the
//! official client's route. The channel's actor checks that the caller
//! sees the channel (a guild channel or thread they may view, a DM of
//! theirs) before the body is read; the node's read-state writer records
//! the ack (batched, answered once committed); MESSAGE_ACK goes to every
//! session of the caller, on every node.

use std::sync::Arc;

use axum::extract::{FromRequest, Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::{ChannelId, ErrorCode, MessageId};
use serde::Deserialize;
use serde_json::json;

use super::{actor_of, ask_actor_reply, json_bytes, parse_id, reply_response, ApiError, ApiResult, Caller, JsonBody};
use node::read_states::AckError;
use node::route::ops::MessageAction;
use node::route::{Action, OpReply};
use node::{Node, Notice};

/// The ack's body; every field is optional, unknown ones are ignored.
#[derive(schemars::JsonSchema, Deserialize, Default)]
#[serde(default)]
pub struct AckBody {
    /// Always null on the way back; accepted and ignored.
    pub token: Option<serde_json::Value>,
    /// A person marking a message unread: the mark may move back, and
    /// `mention_count` is kept as given.
    pub manual: Option<bool>,
    /// Mentions still unread after the message (with `manual`).
    pub mention_count: Option<u32>,
    /// Accepted and ignored (the client's own bookkeeping).
    pub last_viewed: Option<u64>,
    pub flags: Option<u64>,
}

/// `POST /channels/{channel_id}/messages/{message_id}/ack`.
pub async fn ack(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((c, m)): Path<(String, String)>,
    req: Request,
) -> ApiResult<Response> {
    let channel: ChannelId = parse_id(&c, ErrorCode::UnknownChannel)?;
    let message: MessageId = parse_id(&m, ErrorCode::UnknownMessage)?;
    let key = actor_of(&node, channel).await?;
    match ask_actor_reply(&node, key, u.id, Action::Message(MessageAction::Ack { channel, message })).await? {
        OpReply::Done { .. } => {}
        refused => return reply_response(refused),
    }
    // Read only now, after the check (an empty body is `{}`).
    let JsonBody(body) = JsonBody::<AckBody>::from_request(req, &()).await?;
    let manual = body.manual.unwrap_or(false);
    let mention_count = if manual { body.mention_count.unwrap_or(0) } else { 0 };
    match node.read_states.ack(u.id, channel, message, mention_count, manual).await {
        Ok(()) => {}
        Err(AckError::Busy) => return Err(ApiError::Busy),
        // Not saved; a store that could not write just now (a PostgreSQL
        // restart) is 503, and the client may send it again.
        Err(AckError::Failed(e)) => return Err(e.into()),
    }
    let mut event = json!({
        "channel_id": channel,
        "message_id": message,
        "version": node::auth::now_ms(),
        "last_viewed": body.last_viewed,
        "flags": body.flags,
    });
    if manual {
        event["manual"] = json!(true);
        event["mention_count"] = json!(mention_count);
    }
    if let Ok(raw) = serde_json::value::to_raw_value(&event) {
        node.notify(Notice::MessageAck { user: u.id, body: raw });
    }
    Ok(json_bytes(StatusCode::OK, r#"{"token":null}"#.to_string()))
}
