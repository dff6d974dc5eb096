//! Messages: create (JSON or multipart with `payload_json`), get, list,
//! edit, delete, and typing.
//!
//! A created message is committed to the store before the response; its JSON
//! is encoded once and serves as both the HTTP response and the body of the
//! MESSAGE_CREATE dispatch.

use std::sync::Arc;

use super::Query;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;
use protocol::model::{self, permission, MessageReference};
use protocol::{ChannelId, ErrorCode, MessageId, UserId};
use serde::Deserialize;
use serde_json::{json, Value};
use store::{MessageRecord, MessageWindow, UserRecord};

use super::attachments::Sender;
use super::{actor_of, channel_access, json_bytes, parse_id, ApiError, ApiResult, Caller};
use guild::GuildMsg;
use node::auth::now_ms;
use node::convert;
use node::route::ops::MessageAction;
use node::route::{Action, Post, PostReply};
use node::Node;

/// Discord's limit on message content, in characters.
const MAX_CONTENT: usize = 2000;
/// Discord's limit on embeds per message.
const MAX_EMBEDS: usize = 10;
/// User mentions kept per message: Discord resolves at most this many, and
/// it bounds the actor's work per message.
const MAX_MENTIONS: usize = 100;
/// `GET /channels/{c}/messages`: Discord's default and largest page.
const PAGE_DEFAULT: u32 = 50;
const PAGE_MAX: u32 = 100;

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct MessageBody {
    content: Option<String>,
    #[serde(default, deserialize_with = "protocol::de::null_default")]
    tts: bool,
    nonce: Option<Value>,
    #[serde(default)]
    embeds: Option<Vec<Value>>,
    #[serde(default)]
    components: Option<Vec<Value>>,
    message_reference: Option<MessageReference>,
    flags: Option<u64>,
    /// With a `nonce`: a repeat of this post within `limits.nonce_window_ms`
    /// returns the first message instead of creating another.
    #[serde(default, deserialize_with = "protocol::de::null_default")]
    enforce_nonce: bool,
    // Accepted and ignored: allowed_mentions, sticker_ids, attachments metadata.
}

/// Discord's longest `nonce`, in characters.
const MAX_NONCE: usize = 25;

/// A post's deduplication key (see `store::DEDUP_FIELD`): `n` and the
/// client's nonce when it asks to enforce it; in a cluster otherwise `r` and
/// a new snowflake, so the node may send the post again; else none.
fn post_key(node: &Node, nonce: Option<&Value>, enforce: bool) -> ApiResult<Option<String>> {
    let nonce = match nonce {
        Some(Value::String(s)) if s.chars().count() > MAX_NONCE => {
            return Err(ApiError::field("nonce", "BASE_TYPE_MAX_LENGTH", &format!("Must be {MAX_NONCE} or fewer in length.")))
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    };
    Ok(match nonce {
        Some(n) if enforce => Some(format!("n{n}")),
        _ => node.cluster().map(|_| format!("r{}", node.ids.next().0)),
    })
}

/// How a post handed to its actor ended.
enum Delivered {
    /// The actor's answer.
    Answer(Bytes),
    /// No answer in time, or the post could not be handed over: whether it
    /// may have been committed all the same (files are then kept).
    Failed(ApiError, bool),
}

/// Hands `post` to its actor and waits for the answer, up to
/// `limits.write_timeout_ms`. In a cluster a post with a key is held for its
/// guild's owner: sent again (the key keeps it from being committed twice)
/// when the owner changes, when a node reconnected to NATS (a NATS server
/// failed: the post or its answer may be lost with it), and after
/// `cluster.post_resend_ms` without an answer; "retry" (not committed)
/// waits for one of these.
async fn deliver(node: &Arc<Node>, actor: protocol::ActorKey, mut post: Post) -> Delivered {
    use tokio::time::{sleep_until, timeout_at, Instant};
    let deadline = Instant::now() + std::time::Duration::from_millis(node.config.limits.write_timeout_ms);
    let Some(cluster) = node.cluster().filter(|_| post.key.is_some()) else {
        let (reply, answer) = node.replies.register();
        post.reply = reply;
        if let Err(e) = node.guilds.send(actor, GuildMsg::Post(Box::new(post))) {
            return Delivered::Failed(e.into(), false);
        }
        return match timeout_at(deadline, answer).await {
            Ok(Ok(b)) => Delivered::Answer(b),
            _ => Delivered::Failed(ApiError::Busy, true),
        };
    };
    // Sent again after `cluster.post_resend_ms` without an answer, then
    // after twice as long each time the owner stayed silent: an owner that
    // is only slow is not handed every waiting post again each interval.
    let mut resend = std::time::Duration::from_millis(node.config.cluster.post_resend_ms.max(10));
    // Wakes the wait below when the owner or the bus may have changed: a
    // held post waits without polling (a 20 ms poll per waiting post was
    // a wake-up storm once thousands waited on an overloaded cluster).
    let mut changes = cluster.changes();
    let mut changes_open = true;
    let mut sent_any = false;
    loop {
        // Marked seen before the owner is read: a later change wakes us.
        changes.borrow_and_update();
        let (owner, bus) = (cluster.owner_of(actor), cluster.bus_epoch());
        let (reply, answer) = node.replies.register();
        post.reply = reply;
        let mut answer = match node.guilds.send(actor, GuildMsg::Post(Box::new(post.clone()))) {
            Ok(()) => {
                if sent_any {
                    node.posts_resent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                sent_any = true;
                Some(answer)
            }
            // A full mailbox or queue, or this node off the bus: fail
            // fast, as without a cluster (a balancer may try another node).
            Err(e) => return Delivered::Failed(e.into(), sent_any),
        };
        let again_at = (Instant::now() + resend).min(deadline);
        loop {
            let waiting = async {
                match answer.as_mut() {
                    Some(a) => a.await.ok(),
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                got = waiting => {
                    answer = None;
                    // "Retry" (not committed: fenced, or the writer
                    // full) waits for a new owner or the resend time.
                    if let Some(b) = got.filter(|b| &b[..] != PostReply::RETRY) {
                        return Delivered::Answer(b);
                    }
                }
                _ = sleep_until(again_at) => {}
                r = changes.changed(), if changes_open => changes_open = r.is_ok(),
            }
            if Instant::now() >= deadline {
                return Delivered::Failed(ApiError::Busy, sent_any);
            }
            let moved = cluster.owner_of(actor) != owner;
            // A node reconnected to NATS: the post or its answer may be lost.
            let reconnected = cluster.bus_epoch() != bus;
            if moved || reconnected {
                break;
            }
            if Instant::now() >= again_at {
                // No answer at all: the owner is slow, and the next wait is
                // longer. A "retry" answer (not committed) is sent again
                // after the same interval.
                if answer.is_some() {
                    resend *= 2;
                }
                break;
            }
        }
    }
}

/// `<@id>` and `<@!id>` mentions in `content`.
pub(crate) fn parse_mentions(content: &str) -> Vec<UserId> {
    let mut out = Vec::new();
    let mut rest = content;
    while let Some(i) = rest.find("<@") {
        rest = &rest[i + 2..];
        let r = rest.strip_prefix('!').unwrap_or(rest);
        if let Some(end) = r.find('>') {
            if let Ok(id) = r[..end].parse::<u64>() {
                if !out.contains(&UserId(id)) {
                    out.push(UserId(id));
                }
            }
        }
    }
    out
}

/// Resolves authors, mentions and replied-to messages and renders stored messages.
pub(crate) async fn render(node: &Node, msgs: &[MessageRecord]) -> ApiResult<Vec<model::Message>> {
    let mut out = render_plain(node, msgs).await?;
    // Replies carry the message they answer (one level deep, as on Discord),
    // or null once it is gone.
    for m in out.iter_mut().filter(|m| m.kind == 19) {
        let Some(r) = &m.message_reference else { continue };
        let (Some(rc), Some(rid)) = (r.channel_id, r.message_id) else { continue };
        let found = match node.store.get_message(rc, rid).await? {
            Some(rec) => render_plain(node, std::slice::from_ref(&rec)).await?.pop(),
            None => None,
        };
        m.referenced_message = Some(found.map(Box::new));
    }
    Ok(out)
}

/// Resolves authors and mentions and renders stored messages.
async fn render_plain(node: &Node, msgs: &[MessageRecord]) -> ApiResult<Vec<model::Message>> {
    let mut ids: Vec<UserId> = msgs.iter().flat_map(|m| std::iter::once(m.author_id).chain(m.mentions.iter().copied())).collect();
    ids.sort();
    ids.dedup();
    let users = node.store.get_users(&ids).await?;
    let find = |id: UserId| users.iter().find(|u| u.id == id);
    let ghost = |id: UserId| UserRecord {
        id,
        username: "Deleted User".into(),
        global_name: None,
        avatar: None,
        bot: false,
        flags: 0,
        created_at: 0,
    };
    let now = node::attachments::now_s();
    Ok(msgs
        .iter()
        .map(|m| {
            let author = find(m.author_id).cloned().unwrap_or_else(|| ghost(m.author_id));
            let mentions: Vec<UserRecord> = m.mentions.iter().filter_map(|u| find(*u).cloned()).collect();
            let mut out = convert::message(m, &author, &mentions, None);
            // Every read hands out attachment URLs signed afresh.
            node.blobs.signer.resign_all(&mut out.attachments, now);
            out
        })
        .collect())
}

fn encode_message(m: &model::Message) -> ApiResult<Bytes> {
    serde_json::to_vec(m).map(Bytes::from).map_err(ApiError::internal)
}

fn validate_content(content: &str, has_other: bool) -> ApiResult<()> {
    if content.chars().count() > MAX_CONTENT {
        return Err(ApiError::field("content", "BASE_TYPE_MAX_LENGTH", &format!("Must be {MAX_CONTENT} or fewer in length.")));
    }
    if content.trim().is_empty() && !has_other {
        return Err(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::EmptyMessage));
    }
    Ok(())
}

pub async fn create(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>, req: Request) -> ApiResult<Response> {
    let cid: ChannelId = parse_id(&id, ErrorCode::UnknownChannel)?;
    // The guild's actor checks membership and permissions from its own
    // state; this node only needs to know which guild (no store read once
    // the channel is known).
    let actor = node.channel_actor(cid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    // Before its body is read, the caller must be able to post here (store
    // reads; the actor checks again at commit). A form may carry files, so
    // it is checked each time; a JSON post of someone found allowed here
    // within `limits.post_check_ttl_ms` is not asked again.
    let sender = if super::attachments::is_multipart(req.headers()) {
        may_post(&node, cid, u.id).await?
    } else {
        if !node.lately_allowed_poster(u.id, cid) {
            may_post(&node, cid, u.id).await?;
            node.allowed_poster(u.id, cid);
        }
        Sender { uploader: u.id, may_attach: false }
    };
    // Files are on disk and recorded as pending uploads from here; dropped
    // without `keep` (a refusal, an error), they are discarded.
    let (b, uploads) = super::attachments::read_body::<MessageBody>(req, &node, cid, sender).await?;
    let attachments = uploads.json();
    let content = b.content.unwrap_or_default();
    let embeds = b.embeds.unwrap_or_default();
    if embeds.len() > MAX_EMBEDS {
        return Err(ApiError::field("embeds", "BASE_TYPE_MAX_LENGTH", &format!("Must be {MAX_EMBEDS} or fewer in length.")));
    }
    validate_content(&content, !embeds.is_empty() || !attachments.is_empty())?;
    let mut reference = None;
    let mut referenced = None;
    if let Some(mut r) = b.message_reference {
        // discord.js omits channel_id: it defaults to this channel.
        let rc = r.channel_id.unwrap_or(cid);
        r.channel_id = Some(rc);
        r.guild_id = actor.as_guild();
        if let Some(mid) = r.message_id {
            let found = if rc == cid { node.store.get_message(cid, mid).await? } else { None };
            if found.is_none() && r.fail_if_not_exists.unwrap_or(true) {
                return Err(ApiError::field("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message"));
            }
            if let Some(m) = found {
                reference = Some(r);
                referenced = render_plain(&node, std::slice::from_ref(&m)).await?.pop().map(Box::new);
            }
        }
    }
    // Fail fast before anything is committed: the delivery workers are too
    // far behind, or the guild's mailbox has no room.
    if node.delivery.backlog() > node.config.gateway.delivery_backlog_max {
        return Err(ApiError::Busy);
    }
    if let Some(c) = &b.components {
        super::check_components(&Value::Array(c.clone()), "components")?;
    }
    let mut mentions = parse_mentions(&content);
    mentions.truncate(MAX_MENTIONS);
    let key = post_key(&node, b.nonce.as_ref(), b.enforce_nonce)?;
    let post = Post {
        author: u.id,
        channel: cid,
        tts: b.tts,
        flags: b.flags.unwrap_or(0) & (1 << 2 | 1 << 12),
        mentions,
        extra: json!({
            "embeds": embeds,
            "attachments": attachments,
            "components": b.components.unwrap_or_default(),
            "nonce": b.nonce,
        }),
        reference,
        referenced,
        content,
        key,
        reply: node::route::ReplyTo { node: node.id, id: 0 },
    };
    let answer = match deliver(&node, actor, post).await {
        Delivered::Answer(b) => b,
        // No answer in time (the owner died or lost the bus): the message
        // may or may not be committed; the client may retry (with
        // `enforce_nonce`, safely).
        Delivered::Failed(e, maybe_committed) => {
            if maybe_committed {
                uploads.keep();
            }
            return Err(e);
        }
    };
    if let Some(body) = PostReply::ok_body(&answer) {
        uploads.keep();
        return Ok(json_bytes(StatusCode::OK, body));
    }
    let reply = serde_json::from_slice::<PostReply>(&answer).map_err(ApiError::internal)?;
    if matches!(reply, PostReply::UnknownChannel | PostReply::MissingAccess | PostReply::MissingPermissions) {
        // The store is asked again before this caller's next body is read.
        node.refused_poster(u.id, cid);
    }
    match reply {
        PostReply::Ok(body) => Ok(json_bytes(StatusCode::OK, Bytes::copy_from_slice(body.get().as_bytes()))),
        PostReply::UnknownChannel => Err(ApiError::not_found(ErrorCode::UnknownChannel)),
        PostReply::MissingAccess => Err(ApiError::forbidden(ErrorCode::MissingAccess)),
        PostReply::MissingPermissions => Err(ApiError::forbidden(ErrorCode::MissingPermissions)),
        PostReply::Retry => Err(ApiError::Busy),
        PostReply::Failed(e) => Err(ApiError::internal(e)),
        // A repeat: the message its first post created (these files are
        // not part of it and go).
        PostReply::Duplicate(id) => {
            let rec = node.store.get_message(cid, id).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownMessage))?;
            let m = render(&node, std::slice::from_ref(&rec)).await?.pop().ok_or_else(|| ApiError::internal("message not rendered"))?;
            Ok(json_bytes(StatusCode::OK, encode_message(&m)?))
        }
    }
}

/// Whether `user` may post in `channel`, from the store, as the guild's
/// actor would judge it: a DM of theirs, or VIEW_CHANNEL and SEND_MESSAGES
/// (SEND_MESSAGES_IN_THREADS in a thread): 404 10003, 403 50001 or 50013.
/// Whether they may attach files is told, not required: a form without
/// files needs no ATTACH_FILES.
async fn may_post(node: &Node, channel: ChannelId, user: UserId) -> ApiResult<Sender> {
    if super::dms::readable(node, channel, user).await?.is_some() {
        return Ok(Sender { uploader: user, may_attach: true });
    }
    let (c, a) = channel_access(node, channel, user).await?;
    let bits = a.in_channel(&c);
    let send = if store::is_thread(c.kind) { permission::SEND_MESSAGES_IN_THREADS } else { permission::SEND_MESSAGES };
    if bits & send == 0 {
        return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
    }
    Ok(Sender { uploader: user, may_attach: bits & permission::ATTACH_FILES != 0 })
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct ListQuery {
    before: Option<String>,
    after: Option<String>,
    around: Option<String>,
    limit: Option<u32>,
}

pub async fn list(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Response> {
    let cid = parse_id(&id, ErrorCode::UnknownChannel)?;
    let c = match super::dms::readable(&node, cid, u.id).await? {
        Some(dm) => dm,
        None => {
            let (c, a) = channel_access(&node, cid, u.id).await?;
            if a.in_channel(&c) & permission::READ_MESSAGE_HISTORY == 0 {
                return Ok(json_bytes(StatusCode::OK, "[]"));
            }
            c
        }
    };
    let limit = q.limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(ApiError::field("limit", "NUMBER_TYPE_MAX", &format!("Must be between 1 and {PAGE_MAX}.")));
    }
    let id_of = |field: &str, v: &str| {
        v.parse::<u64>().map(MessageId).map_err(|_| ApiError::field(field, "NUMBER_TYPE_COERCE", "Value is not snowflake."))
    };
    let window = match (&q.before, &q.after, &q.around) {
        (None, None, None) => MessageWindow::Latest,
        (Some(b), None, None) => MessageWindow::Before(id_of("before", b)?),
        (None, Some(a), None) => MessageWindow::After(id_of("after", a)?),
        (None, None, Some(r)) => MessageWindow::Around(id_of("around", r)?),
        _ => return Err(ApiError::field("_errors", "BASE_TYPE_INVALID", "Only one of before, after and around may be given.")),
    };
    let msgs = node.store.list_messages(c.id, window, limit).await?;
    let mut out = render(&node, &msgs).await?;
    super::reactions::decorate(&node, &mut out, u.id).await?;
    Ok(json_bytes(StatusCode::OK, serde_json::to_vec(&out).map_err(ApiError::internal)?))
}

async fn find(node: &Node, c: ChannelId, mid: &str) -> ApiResult<MessageRecord> {
    let mid: MessageId = parse_id(mid, ErrorCode::UnknownMessage)?;
    node.store.get_message(c, mid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownMessage))
}

pub async fn get(State(node): State<Arc<Node>>, Caller(u): Caller, Path((id, mid)): Path<(String, String)>) -> ApiResult<Response> {
    let cid = parse_id(&id, ErrorCode::UnknownChannel)?;
    let c = match super::dms::readable(&node, cid, u.id).await? {
        Some(dm) => dm,
        None => channel_access(&node, cid, u.id).await?.0,
    };
    let m = find(&node, c.id, &mid).await?;
    let mut out = render(&node, &[m]).await?;
    super::reactions::decorate(&node, &mut out, u.id).await?;
    Ok(json_bytes(StatusCode::OK, encode_message(&out[0])?))
}

#[derive(schemars::JsonSchema, Deserialize)]
pub struct EditBody {
    content: Option<String>,
    embeds: Option<Vec<Value>>,
    components: Option<Vec<Value>>,
}

/// `PATCH /channels/{c}/messages/{m}`: the author edits; the guild's actor
/// checks who asks, commits and sends MESSAGE_UPDATE.
pub async fn edit(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((id, mid)): Path<(String, String)>,
    req: axum::extract::Request,
) -> ApiResult<Response> {
    let cid = parse_id(&id, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    // Before the body: the caller sees the channel and wrote the message
    // (the actor checks both again).
    super::guard::channel_may(&node, cid, u.id, 0).await?;
    let mut m = find(&node, cid, &mid).await?;
    if m.author_id != u.id {
        return Err(ApiError::forbidden(ErrorCode::CannotEditOthersMessage));
    }
    let b: EditBody = super::read_json(req).await?;
    // The edited message (answer and MESSAGE_UPDATE) carries URLs signed now.
    if let Some(files) = m.extra.get_mut("attachments").and_then(Value::as_array_mut) {
        node.blobs.signer.resign_all(files, node::attachments::now_s());
    }
    if let Some(content) = b.content {
        m.mentions = parse_mentions(&content);
        m.content = content;
    }
    if let Some(e) = b.embeds {
        m.extra["embeds"] = Value::Array(e);
    }
    if let Some(cm) = b.components {
        let cm = Value::Array(cm);
        super::check_components(&cm, "components")?;
        m.extra["components"] = cm;
    }
    let has_other =
        m.extra["embeds"].as_array().is_some_and(|a| !a.is_empty()) || m.extra["attachments"].as_array().is_some_and(|a| !a.is_empty());
    validate_content(&m.content, has_other)?;
    m.edited_at = Some(now_ms());
    // A reply carries the message it answers (the actor keeps no history).
    let mut referenced = None;
    if m.kind == 19 {
        if let Some((rc, rid)) = m
            .reference
            .as_ref()
            .and_then(|r| serde_json::from_value::<MessageReference>(r.clone()).ok())
            .and_then(|r| r.channel_id.zip(r.message_id))
        {
            referenced = Some(match node.store.get_message(rc, rid).await? {
                Some(rec) => render_plain(&node, std::slice::from_ref(&rec)).await?.pop().map(Box::new),
                None => None,
            });
        }
    }
    let pinned = !node.store.pins_among(&[m.id]).await?.is_empty();
    super::ask_actor(&node, guild, u.id, Action::Message(MessageAction::Edit { message: Box::new(m), referenced, pinned })).await
}

/// `DELETE /channels/{c}/messages/{m}`: the author, or a member with
/// MANAGE_MESSAGES in the channel (checked by the guild's actor).
pub async fn delete(State(node): State<Arc<Node>>, Caller(u): Caller, Path((id, mid)): Path<(String, String)>) -> ApiResult<Response> {
    let cid = parse_id(&id, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    let m = find(&node, cid, &mid).await?;
    let files = super::attachments::files_of(&node, &m).await?;
    let r = super::ask_actor(&node, guild, u.id, Action::Message(MessageAction::Delete { channel: cid, id: m.id, author: m.author_id }))
        .await?;
    super::attachments::release(&node, files).await;
    Ok(r)
}

/// `POST /channels/{c}/typing`: TYPING_START to those who see the channel
/// (SEND_MESSAGES, checked by the guild's actor; nothing is stored).
pub async fn typing(State(node): State<Arc<Node>>, Caller(u): Caller, Path(id): Path<String>) -> ApiResult<Response> {
    let cid = parse_id(&id, ErrorCode::UnknownChannel)?;
    let guild = actor_of(&node, cid).await?;
    super::ask_actor(&node, guild, u.id, Action::Message(MessageAction::Typing { channel: cid })).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_parsed_once_each() {
        assert_eq!(parse_mentions("hi <@12> and <@!34> and <@12> <@x> <@"), vec![UserId(12), UserId(34)]);
    }
}
