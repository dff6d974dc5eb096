//! Operator and test hooks, enabled only when `admin_token` is configured.

use std::sync::Arc;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use protocol::{ErrorCode, UserId};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::oneshot;

use super::{json_bytes, ApiError, ApiResult, JsonBody};
use crate::gateway::Control;
use crate::node::Node;

#[derive(Deserialize)]
pub struct DropSessions {
    user_id: UserId,
}

/// `POST /_throng/admin/drop-sessions {"user_id"}`: closes every gateway
/// socket of the user with 4000 (resumable) and keeps the sessions for their
/// resume window. Answers once the sockets are closed.
pub async fn drop_sessions(State(node): State<Arc<Node>>, headers: HeaderMap, JsonBody(b): JsonBody<DropSessions>) -> ApiResult<Response> {
    let Some(expected) = node.config.admin_token.as_deref() else {
        return Err(ApiError::not_found(ErrorCode::UnknownRoute));
    };
    let given = headers.get("x-throng-admin-token").and_then(|v| v.to_str().ok());
    if given != Some(expected) {
        return Err(ApiError::unauthorized());
    }
    let mut waits = Vec::new();
    for s in node.sessions.of_user(b.user_id) {
        let (done, wait) = oneshot::channel();
        if s.control(Control::Drop { done }).is_ok() {
            waits.push(wait);
        }
    }
    let mut dropped = 0;
    for w in waits {
        if w.await.is_ok() {
            dropped += 1;
        }
    }
    Ok(json_bytes(StatusCode::OK, json!({ "dropped": dropped }).to_string()))
}
