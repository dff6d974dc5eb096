//! Reactions: add one's own (`PUT …/reactions/{emoji}/@me`), take one's
//! own or anyone's off (`DELETE …/reactions/{emoji}/{user}`), list who
//! reacted (`GET …/reactions/{emoji}`), clear one emoji's or all of a
//! message's (`DELETE …/reactions[/{emoji}]`); and `reactions`/`pinned` on
//! the messages REST reads return, per requester.
//!
//! The emoji in the path is percent-decoded by the router (discord.js
//! encodes only Unicode emojis, discord.py everything, `:` included).

use std::sync::Arc;

use super::Query;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::model::{self, permission};
use protocol::{ChannelId, ErrorCode, MessageId, UserId};
use serde::Deserialize;
use store::{MessageRecord, ReactionEmoji, ReactionGroup};

use super::{actor_of, ask_actor, channel_access, json_bytes, parse_id, user_or_me, ApiError, ApiResult, Caller};
use node::emoji;
use node::route::ops::ReactionAction;
use node::route::Action;
use node::Node;

/// Users per page of `GET …/reactions/{emoji}`: Discord's default and most.
const USERS_DEFAULT: u32 = 25;
const USERS_MAX: u32 = 100;

/// The reaction type of `GET …/reactions/{emoji}?type=`: normal ones; super
/// reactions (1) cannot be made here, so that list is always empty.
const REACTION_NORMAL: u8 = 0;

/// The path's emoji, or 400 10014.
fn parse_emoji(s: &str) -> ApiResult<ReactionEmoji> {
    emoji::from_path(s).ok_or(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::UnknownEmoji))
}

/// The message `mid` of channel `c` (404 10008).
async fn message(node: &Node, c: ChannelId, mid: &str) -> ApiResult<MessageRecord> {
    let mid: MessageId = parse_id(mid, ErrorCode::UnknownMessage)?;
    node.store.get_message(c, mid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownMessage))
}

/// The emoji as the message's reactions have it (a custom one keeps the
/// name it had when first used), else as the path names it.
fn as_reacted(groups: &[ReactionGroup], e: ReactionEmoji) -> ReactionEmoji {
    let key = e.key();
    groups.iter().find(|g| g.emoji.key() == key).map_or(e, |g| g.emoji.clone())
}

/// `PUT /channels/{c}/messages/{m}/reactions/{emoji}/@me`.
pub async fn add(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((c, m, e, who)): Path<(String, String, String, String)>,
) -> ApiResult<Response> {
    let cid = parse_id(&c, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    // Only for oneself: Discord has no route to react as someone else.
    if who != "@me" {
        return Err(ApiError::Code(StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed));
    }
    let e = parse_emoji(&e)?;
    let msg = message(&node, cid, &m).await?;
    let custom = match e.id() {
        Some(id) => node.store.get_emoji(id).await?.map(Box::new),
        None => None,
    };
    let groups = node.store.reactions_of(&[msg.id], u.id).await?;
    let emoji = match &custom {
        Some(c) => emoji::of_record(c),
        None => as_reacted(&groups, e),
    };
    let action = ReactionAction::Add { channel: cid, message: msg.id, author: msg.author_id, emoji, custom, groups };
    ask_actor(&node, guild, u.id, Action::Reaction(action)).await
}

/// `DELETE /channels/{c}/messages/{m}/reactions/{emoji}/{user}` (`@me`:
/// one's own; anyone else's needs MANAGE_MESSAGES).
pub async fn remove(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((c, m, e, who)): Path<(String, String, String, String)>,
) -> ApiResult<Response> {
    let cid = parse_id(&c, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    let e = parse_emoji(&e)?;
    let whose = user_or_me(&who, u.id)?;
    let msg = message(&node, cid, &m).await?;
    let groups = node.store.reactions_of(&[msg.id], u.id).await?;
    let action = ReactionAction::Remove { channel: cid, message: msg.id, emoji: as_reacted(&groups, e), user: whose };
    ask_actor(&node, guild, u.id, Action::Reaction(action)).await
}

/// `DELETE /channels/{c}/messages/{m}/reactions/{emoji}` (MANAGE_MESSAGES).
pub async fn clear_emoji(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((c, m, e)): Path<(String, String, String)>,
) -> ApiResult<Response> {
    let cid = parse_id(&c, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    let e = parse_emoji(&e)?;
    let msg = message(&node, cid, &m).await?;
    let groups = node.store.reactions_of(&[msg.id], u.id).await?;
    let action = ReactionAction::Clear { channel: cid, message: msg.id, emoji: Some(as_reacted(&groups, e)) };
    ask_actor(&node, guild, u.id, Action::Reaction(action)).await
}

/// `DELETE /channels/{c}/messages/{m}/reactions` (MANAGE_MESSAGES).
pub async fn clear_all(State(node): State<Arc<Node>>, Caller(u): Caller, Path((c, m)): Path<(String, String)>) -> ApiResult<Response> {
    let cid = parse_id(&c, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    let msg = message(&node, cid, &m).await?;
    ask_actor(&node, guild, u.id, Action::Reaction(ReactionAction::Clear { channel: cid, message: msg.id, emoji: None })).await
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct UsersQuery {
    after: Option<String>,
    limit: Option<u32>,
    #[serde(rename = "type")]
    kind: Option<u8>,
}

/// `GET /channels/{c}/messages/{m}/reactions/{emoji}?after=&limit=&type=`:
/// who reacted, by user id (VIEW_CHANNEL and READ_MESSAGE_HISTORY).
pub async fn users(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((c, m, e)): Path<(String, String, String)>,
    Query(q): Query<UsersQuery>,
) -> ApiResult<Response> {
    let e = parse_emoji(&e)?;
    let limit = q.limit.unwrap_or(USERS_DEFAULT);
    if !(1..=USERS_MAX).contains(&limit) {
        return Err(ApiError::field("limit", "NUMBER_TYPE_MAX", "Must be between 1 and 100."));
    }
    let after = match q.after.as_deref() {
        None => UserId(0),
        Some(a) => a.parse().map_err(|_| ApiError::field("after", "NUMBER_TYPE_COERCE", "Value is not snowflake."))?,
    };
    let (channel, access) = channel_access(&node, parse_id(&c, ErrorCode::UnknownChannel)?, u.id).await?;
    if access.in_channel(&channel) & permission::READ_MESSAGE_HISTORY == 0 {
        return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
    }
    let msg = message(&node, channel.id, &m).await?;
    let users = match q.kind.unwrap_or(REACTION_NORMAL) {
        REACTION_NORMAL => node.store.reaction_users(msg.id, &e.key(), after, limit).await?,
        _ => Vec::new(),
    };
    let out: Vec<model::User> = users.iter().map(node::convert::user).collect();
    Ok(json_bytes(StatusCode::OK, serde_json::to_vec(&out).map_err(ApiError::internal)?))
}

/// Fills in `reactions` (with `me` for `viewer`) and `pinned` of messages
/// REST read: two indexed reads for the whole page.
pub async fn decorate(node: &Node, msgs: &mut [model::Message], viewer: UserId) -> ApiResult<()> {
    let ids: Vec<MessageId> = msgs.iter().map(|m| m.id).collect();
    let groups = node.store.reactions_of(&ids, viewer).await?;
    let pins = node.store.pins_among(&ids).await?;
    for m in msgs.iter_mut() {
        m.pinned = pins.iter().any(|(id, _)| *id == m.id);
        m.reactions = groups.iter().filter(|g| g.message_id == m.id).map(reaction).collect();
    }
    Ok(())
}

/// One emoji's reactions as the message object carries them.
fn reaction(g: &ReactionGroup) -> model::Reaction {
    model::Reaction {
        count: g.count,
        count_details: model::ReactionCountDetails { burst: 0, normal: g.count },
        me: g.me,
        me_burst: false,
        burst_colors: Vec::new(),
        emoji: emoji::partial(&g.emoji),
    }
}
