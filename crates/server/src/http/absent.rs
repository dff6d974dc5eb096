//! Routes that client libraries call while they log in or get ready, for
//! features throng does not have yet. Each answers what Discord answers
//! when there is nothing to list, so a library's start-up never stops on a
//! 404 (one library waited forever for its ready event on one of these).

use axum::http::StatusCode;
use axum::response::Response;

use super::{json_bytes, Caller};

/// `[]`: application commands (global and per guild, and their
/// permissions), the soundboard's default sounds, entitlements, a guild's
/// emojis and stickers, voice regions.
pub async fn empty_list(_c: Caller) -> Response {
    json_bytes(StatusCode::OK, "[]")
}

/// `{"items": []}`: an application's emojis, a guild's soundboard sounds.
pub async fn empty_items(_c: Caller) -> Response {
    json_bytes(StatusCode::OK, r#"{"items":[]}"#)
}

/// `{"sticker_packs": []}`.
pub async fn sticker_packs(_c: Caller) -> Response {
    json_bytes(StatusCode::OK, r#"{"sticker_packs":[]}"#)
}
