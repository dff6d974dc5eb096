//! Operator and test hooks, enabled only when `admin_token` is configured.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;
use protocol::{ErrorCode, GuildId, UserId};
use serde::Deserialize;
use serde_json::json;

use super::{json_bytes, ApiError, ApiResult};
use node::Node;

#[derive(schemars::JsonSchema, Deserialize)]
pub struct DropSessions {
    user_id: UserId,
}

/// Checks the `X-Throng-Admin-Token` header; the routes do not exist without a configured token.
fn authorize(node: &Node, headers: &HeaderMap) -> ApiResult<()> {
    let Some(expected) = node.config.admin_token.as_deref() else {
        return Err(ApiError::not_found(ErrorCode::UnknownRoute));
    };
    let given = headers.get("x-throng-admin-token").and_then(|v| v.to_str().ok());
    if given != Some(expected) {
        return Err(ApiError::unauthorized());
    }
    Ok(())
}

/// `POST /_throng/admin/drop-sessions {"user_id"}`: closes every gateway
/// socket of the user with 4000 (resumable) and keeps the sessions for their
/// resume window.
pub async fn drop_sessions(
    State(node): State<Arc<Node>>,
    Extension(sessions): Extension<Arc<gateway::Sessions>>,
    req: axum::extract::Request,
) -> ApiResult<Response> {
    // The token first: the body of a caller without it is never read.
    authorize(&node, req.headers())?;
    let b: DropSessions = super::read_json(req).await?;
    let dropped = sessions.of_user(b.user_id).iter().filter(|s| s.drop_connection()).count();
    Ok(json_bytes(StatusCode::OK, json!({ "dropped": dropped }).to_string()))
}

/// `GET /_throng/admin/guilds/{guild_id}/owner`: `{"node": N}`, the node
/// whose actor runs the guild (this node when there is no cluster; `null`
/// when this node is not in its cluster).
pub async fn owner(State(node): State<Arc<Node>>, headers: HeaderMap, Path(id): Path<String>) -> ApiResult<Response> {
    authorize(&node, &headers)?;
    let g: GuildId = super::parse_id(&id, ErrorCode::UnknownGuild)?;
    let owner = match node.cluster_nodes().is_empty() && node.health().is_ok() {
        true => Some(node.id),
        false => node.cluster().and_then(|c| c.owner_of(g.into())),
    };
    Ok(json_bytes(StatusCode::OK, json!({ "node": owner.map(|n| n.0) }).to_string()))
}

/// `GET /_throng/admin/stats`: the node's gateway counters (sessions, open
/// sockets, delivery backlog, write-queue bytes now and the largest seen,
/// slow-consumer closes, dispatches delivered, socket writes).
pub async fn stats(
    State(node): State<Arc<Node>>,
    Extension(sessions): Extension<Arc<gateway::Sessions>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    authorize(&node, &headers)?;
    let sessions = sessions.all();
    let pending: usize = sessions.iter().map(|s| s.pending_bytes()).sum();
    let (replay_events, replay_bytes) = sessions.iter().map(|s| s.replay_size()).fold((0, 0), |(e, b), (e2, b2)| (e + e2, b + b2));
    let st = node.delivery.stats();
    let body = json!({
        "sessions": sessions.len(),
        "connections": node.gateway_connections.load(Ordering::Relaxed),
        "delivery_workers": node.delivery.workers(),
        "delivery_backlog": node.delivery.backlog(),
        "pending_bytes": pending,
        "replay_events": replay_events,
        "replay_bytes": replay_bytes,
        "pending_bytes_max": st.pending_bytes_max.load(Ordering::Relaxed),
        "slow_consumer_closes": st.slow_consumer_closes.load(Ordering::Relaxed),
        "delivered": st.delivered.load(Ordering::Relaxed),
        "writes": st.writes.load(Ordering::Relaxed),
        "posts_resent": node.posts_resent.load(Ordering::Relaxed),
        "heap": heap_stats(),
        "cluster": node.cluster().map_or(serde_json::Value::Null, |c| c.stats()),
        "writer": {
            "commits": node.writer.stats.commits.load(Ordering::Relaxed),
            "rows": node.writer.stats.rows.load(Ordering::Relaxed),
            "changes": node.writer.stats.changes.load(Ordering::Relaxed),
            "fenced": node.writer.stats.fenced.load(Ordering::Relaxed),
            "failed": node.writer.stats.failed.load(Ordering::Relaxed),
            "queued": node.writer.queued(),
        },
    });
    Ok(json_bytes(StatusCode::OK, body.to_string()))
}

/// jemalloc's view of the heap (bytes): `allocated` by the program, `active`
/// in pages holding allocations, `resident` in physical memory (also metadata
/// and pages not yet returned), `retained` mapped but returned. `null` when
/// the statistics cannot be read.
fn heap_stats() -> serde_json::Value {
    use tikv_jemalloc_ctl::{epoch, stats};
    let read = || -> Result<serde_json::Value, tikv_jemalloc_ctl::Error> {
        epoch::advance()?;
        Ok(json!({
            "allocated": stats::allocated::read()?,
            "active": stats::active::read()?,
            "metadata": stats::metadata::read()?,
            "resident": stats::resident::read()?,
            "retained": stats::retained::read()?,
            "background_thread": tikv_jemalloc_ctl::background_thread::read()?,
        }))
    };
    read().unwrap_or(serde_json::Value::Null)
}
