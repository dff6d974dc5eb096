//! Threads: start one from a message or alone, change, archive and delete
//! it, join and leave, list members, active and archived threads. The
//! request's shape is checked here; the guild's actor decides the rest
//! from its own state (permissions come from the parent channel).

use std::sync::Arc;

use super::Query;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::model::{channel_type, permission};
use protocol::{ChannelId, ErrorCode, GuildId, UserId};
use serde::Deserialize;
use serde_json::{json, Value};
use store::{is_thread, ChannelRecord, ThreadSnapshot, PRIVATE_THREAD, PUBLIC_THREAD};

use super::guard::ChannelMay;
use super::{actor_of, ask, channel_access, json_bytes, parse_id, user_or_me, Access, ApiError, ApiResult, Caller, JsonBody};
use guild::threads::Thread;
use node::route::threads::{ThreadAction, ThreadPatch};
use node::route::Action;
use node::Node;

/// The auto archive durations Discord accepts, in minutes.
const ARCHIVE_DURATIONS: [u32; 4] = [60, 1440, 4320, 10080];
/// Discord's default when a request names none: one day.
const DEFAULT_ARCHIVE_MINUTES: u32 = 1440;
/// Longest thread name.
const MAX_NAME: usize = 100;
/// Longest slowmode, in seconds (six hours).
const MAX_SLOWMODE_S: u32 = 21_600;
/// Archived threads per page at most, and by default.
const MAX_ARCHIVED_PAGE: u32 = 100;
const DEFAULT_ARCHIVED_PAGE: u32 = 50;

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct StartThread {
    name: Option<String>,
    auto_archive_duration: Option<u32>,
    rate_limit_per_user: Option<u32>,
    #[serde(rename = "type")]
    kind: Option<u8>,
    invitable: Option<bool>,
}

fn check_name(name: &str) -> ApiResult<()> {
    if !(1..=MAX_NAME).contains(&name.chars().count()) {
        return Err(ApiError::field("name", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length."));
    }
    Ok(())
}

fn check_duration(d: Option<u32>) -> ApiResult<u32> {
    let d = d.unwrap_or(DEFAULT_ARCHIVE_MINUTES);
    if !ARCHIVE_DURATIONS.contains(&d) {
        return Err(ApiError::field("auto_archive_duration", "BASE_TYPE_CHOICES", "Value must be one of {60, 1440, 4320, 10080}."));
    }
    Ok(d)
}

fn check_slowmode(r: Option<u32>) -> ApiResult<u32> {
    let r = r.unwrap_or(0);
    if r > MAX_SLOWMODE_S {
        return Err(ApiError::field("rate_limit_per_user", "NUMBER_TYPE_MAX", "Must be less than or equal to 21600."));
    }
    Ok(r)
}

/// The guild of a guild channel: DMs have no threads (50003).
async fn guild_channel(node: &Node, c: ChannelId) -> ApiResult<GuildId> {
    actor_of(node, c).await?.as_guild().ok_or(ApiError::Code(StatusCode::BAD_REQUEST, ErrorCode::CannotExecuteOnDm))
}

fn thread_channel(id: ChannelId, kind: u8, name: String, slowmode: u32) -> ChannelRecord {
    ChannelRecord {
        id,
        guild_id: None,
        kind,
        name,
        position: 0,
        topic: None,
        nsfw: false,
        parent_id: None,
        rate_limit_per_user: slowmode,
        overwrites: Vec::new(),
        last_message_id: None,
    }
}

/// `POST /channels/{c}/messages/{m}/threads`: a public thread from a
/// message (it takes the message's id), CREATE_PUBLIC_THREADS.
pub async fn start_from_message(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((cid, mid)): Path<(String, String)>,
    _: ChannelMay<{ permission::CREATE_PUBLIC_THREADS }>,
    JsonBody(b): JsonBody<StartThread>,
) -> ApiResult<Response> {
    let cid: ChannelId = parse_id(&cid, ErrorCode::UnknownChannel)?;
    let guild = guild_channel(&node, cid).await?;
    let name = b.name.ok_or_else(|| ApiError::field("name", "BASE_TYPE_REQUIRED", "This field is required"))?;
    check_name(&name)?;
    let duration = check_duration(b.auto_archive_duration)?;
    let slowmode = check_slowmode(b.rate_limit_per_user)?;
    let mid = parse_id(&mid, ErrorCode::UnknownMessage)?;
    let m = node.store.get_message(cid, mid).await?.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownMessage))?;
    let channel = thread_channel(ChannelId(m.id.0), PUBLIC_THREAD, name, slowmode);
    let action = ThreadAction::Create {
        parent: cid,
        from_message: true,
        channel: Box::new(channel),
        auto_archive_duration: duration,
        invitable: true,
    };
    ask(&node, guild, u.id, Action::Thread(action)).await
}

/// `POST /channels/{c}/threads`: a thread without a message, public (11)
/// or private (12, the default as on Discord).
pub async fn start(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(cid): Path<String>,
    _: ChannelMay<{ permission::CREATE_PUBLIC_THREADS | permission::CREATE_PRIVATE_THREADS }>,
    JsonBody(b): JsonBody<StartThread>,
) -> ApiResult<Response> {
    let cid: ChannelId = parse_id(&cid, ErrorCode::UnknownChannel)?;
    let guild = guild_channel(&node, cid).await?;
    let name = b.name.ok_or_else(|| ApiError::field("name", "BASE_TYPE_REQUIRED", "This field is required"))?;
    check_name(&name)?;
    let duration = check_duration(b.auto_archive_duration)?;
    let slowmode = check_slowmode(b.rate_limit_per_user)?;
    let kind = b.kind.unwrap_or(PRIVATE_THREAD);
    if kind != PUBLIC_THREAD && kind != PRIVATE_THREAD && kind != channel_type::ANNOUNCEMENT_THREAD {
        return Err(ApiError::field("type", "BASE_TYPE_CHOICES", "Value must be one of {10, 11, 12}."));
    }
    let channel = thread_channel(node.ids.next().into(), kind, name, slowmode);
    let action = ThreadAction::Create {
        parent: cid,
        from_message: false,
        channel: Box::new(channel),
        auto_archive_duration: duration,
        invitable: b.invitable.unwrap_or(true),
    };
    ask(&node, guild, u.id, Action::Thread(action)).await
}

/// A thread's PATCH fields (with those of channels: name, slowmode).
#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct ThreadFields {
    pub archived: Option<bool>,
    pub locked: Option<bool>,
    pub auto_archive_duration: Option<u32>,
    pub invitable: Option<bool>,
}

/// Whether channel `id` is a thread (a store read; for PATCH and DELETE
/// of `/channels/{id}`, which serve both).
pub async fn is_thread_channel(node: &Node, id: ChannelId) -> ApiResult<bool> {
    Ok(node.store.get_channel(id).await?.is_some_and(|c| is_thread(c.kind)))
}

/// `PATCH /channels/{thread}`: the creator may rename, archive and set the
/// archive delay; locking, slowmode and invitable need MANAGE_THREADS.
pub async fn modify(
    node: &Arc<Node>,
    user: UserId,
    thread: ChannelId,
    name: Option<String>,
    slowmode: Option<u32>,
    f: ThreadFields,
) -> ApiResult<Response> {
    let guild = guild_channel(node, thread).await?;
    if let Some(n) = &name {
        check_name(n)?;
    }
    if f.auto_archive_duration.is_some() {
        check_duration(f.auto_archive_duration)?;
    }
    if slowmode.is_some() {
        check_slowmode(slowmode)?;
    }
    let patch = ThreadPatch {
        name,
        archived: f.archived,
        locked: f.locked,
        auto_archive_duration: f.auto_archive_duration,
        invitable: f.invitable,
        rate_limit_per_user: slowmode,
    };
    ask(node, guild, user, Action::Thread(ThreadAction::Modify { thread, patch: Box::new(patch) })).await
}

/// `DELETE /channels/{thread}`: MANAGE_THREADS.
pub async fn delete(node: &Arc<Node>, user: UserId, thread: ChannelId) -> ApiResult<Response> {
    let guild = guild_channel(node, thread).await?;
    ask(node, guild, user, Action::Thread(ThreadAction::Delete { thread })).await
}

/// `GET /channels/{thread}`: the thread channel object.
pub async fn get(node: &Arc<Node>, user: UserId, thread: ChannelId) -> ApiResult<Response> {
    let guild = guild_channel(node, thread).await?;
    ask(node, guild, user, Action::Thread(ThreadAction::Get { thread })).await
}

/// `PUT /channels/{t}/thread-members/{u}` (`@me`: join).
pub async fn add_member(State(node): State<Arc<Node>>, Caller(u): Caller, Path((t, who)): Path<(String, String)>) -> ApiResult<Response> {
    let thread = parse_id(&t, ErrorCode::UnknownChannel)?;
    let target = user_or_me(&who, u.id)?;
    let guild = guild_channel(&node, thread).await?;
    ask(&node, guild, u.id, Action::Thread(ThreadAction::AddMember { thread, user: target })).await
}

/// `DELETE /channels/{t}/thread-members/{u}` (`@me`: leave).
pub async fn remove_member(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((t, who)): Path<(String, String)>,
) -> ApiResult<Response> {
    let thread = parse_id(&t, ErrorCode::UnknownChannel)?;
    let target = user_or_me(&who, u.id)?;
    let guild = guild_channel(&node, thread).await?;
    ask(&node, guild, u.id, Action::Thread(ThreadAction::RemoveMember { thread, user: target })).await
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct MembersQuery {
    #[serde(default, deserialize_with = "protocol::de::flag")]
    with_member: Option<bool>,
}

/// `GET /channels/{t}/thread-members`.
pub async fn members(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(t): Path<String>,
    Query(q): Query<MembersQuery>,
) -> ApiResult<Response> {
    let thread = parse_id(&t, ErrorCode::UnknownChannel)?;
    let guild = guild_channel(&node, thread).await?;
    let action = ThreadAction::Members { thread, user: None, with_member: q.with_member.unwrap_or(false) };
    ask(&node, guild, u.id, Action::Thread(action)).await
}

/// `GET /channels/{t}/thread-members/{u}`.
pub async fn member(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path((t, who)): Path<(String, String)>,
    Query(q): Query<MembersQuery>,
) -> ApiResult<Response> {
    let thread = parse_id(&t, ErrorCode::UnknownChannel)?;
    let target = user_or_me(&who, u.id)?;
    let guild = guild_channel(&node, thread).await?;
    let action = ThreadAction::Members { thread, user: Some(target), with_member: q.with_member.unwrap_or(false) };
    ask(&node, guild, u.id, Action::Thread(action)).await
}

/// `GET /guilds/{g}/threads/active`: `{threads, members}`, what the caller may see.
pub async fn active(State(node): State<Arc<Node>>, Caller(u): Caller, Path(g): Path<String>) -> ApiResult<Response> {
    let guild: GuildId = parse_id(&g, ErrorCode::UnknownGuild)?;
    ask(&node, guild, u.id, Action::Thread(ThreadAction::Active)).await
}

#[derive(schemars::JsonSchema, Deserialize, Default)]
pub struct ArchivedQuery {
    before: Option<String>,
    limit: Option<u32>,
}

/// `GET /channels/{c}/threads/archived/public`: READ_MESSAGE_HISTORY in the parent.
pub async fn archived_public(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(c): Path<String>,
    Query(q): Query<ArchivedQuery>,
) -> ApiResult<Response> {
    archived(&node, u.id, &c, q, false).await
}

/// `GET /channels/{c}/threads/archived/private`: and MANAGE_THREADS.
pub async fn archived_private(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(c): Path<String>,
    Query(q): Query<ArchivedQuery>,
) -> ApiResult<Response> {
    archived(&node, u.id, &c, q, true).await
}

async fn archived(node: &Node, user: UserId, c: &str, q: ArchivedQuery, private: bool) -> ApiResult<Response> {
    let (parent, access) = channel_access(node, parse_id(c, ErrorCode::UnknownChannel)?, user).await?;
    let bits = access.in_channel(&parent);
    let need = if private { permission::READ_MESSAGE_HISTORY | permission::MANAGE_THREADS } else { permission::READ_MESSAGE_HISTORY };
    if bits & need != need {
        return Err(ApiError::forbidden(ErrorCode::MissingPermissions));
    }
    let limit = q.limit.unwrap_or(DEFAULT_ARCHIVED_PAGE);
    if !(2..=MAX_ARCHIVED_PAGE).contains(&limit) {
        return Err(ApiError::field("limit", "NUMBER_TYPE_MAX", "Must be between 2 and 100."));
    }
    let before = match q.before.as_deref() {
        None => u64::MAX,
        Some(b) => protocol::model::parse_time(b).ok_or_else(|| ApiError::field("before", "DATE_TYPE_PARSE", "Could not parse date."))?,
    };
    // One more than asked: whether there are more.
    let mut snaps = node.store.archived_threads(parent.id, private, before, limit + 1).await?;
    let has_more = snaps.len() > limit as usize;
    snaps.truncate(limit as usize);
    archived_body(&snaps, user, has_more)
}

fn archived_body(snaps: &[ThreadSnapshot], user: UserId, has_more: bool) -> ApiResult<Response> {
    let threads: Vec<Thread> = snaps
        .iter()
        .map(|s| Thread {
            channel: s.channel.clone(),
            meta: s.thread.clone(),
            members: s.members.iter().map(|m| (m.user_id, m.clone())).collect(),
            message_count: s.message_count,
            last_activity: 0,
        })
        .collect();
    let members: Vec<Value> = threads.iter().filter_map(|t| t.members.get(&user)).map(guild::threads::member_json).collect();
    let body = json!({
        "threads": threads.iter().map(Thread::json).collect::<Vec<_>>(),
        "members": members,
        "has_more": has_more,
    });
    Ok(json_bytes(StatusCode::OK, body.to_string()))
}

/// The caller may see thread `c` (a thread channel read by `channel_access`):
/// they may see its parent, and a private thread only as its member or
/// with MANAGE_THREADS. The thread comes back with its parent's
/// overwrites, so the caller's bits in it are the parent's.
pub async fn thread_access(node: &Node, mut c: ChannelRecord, access: Access, user: UserId) -> ApiResult<(ChannelRecord, Access)> {
    let parent = match c.parent_id {
        Some(p) => node.store.get_channel(p).await?,
        None => None,
    };
    let parent = parent.ok_or_else(|| ApiError::not_found(ErrorCode::UnknownChannel))?;
    let bits = access.in_channel(&parent);
    if bits & permission::VIEW_CHANNEL == 0 {
        return Err(ApiError::forbidden(ErrorCode::MissingAccess));
    }
    if c.kind == PRIVATE_THREAD && bits & permission::MANAGE_THREADS == 0 {
        let members = node.store.thread_members(c.id).await?;
        if !members.iter().any(|m| m.user_id == user) {
            return Err(ApiError::forbidden(ErrorCode::MissingAccess));
        }
    }
    c.overwrites = parent.overwrites;
    Ok((c, access))
}
