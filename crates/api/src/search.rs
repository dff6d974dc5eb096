//! Message search: `GET /guilds/{guild_id}/messages/search` (the guild's
//! channels the caller may read) and `GET /channels/{channel_id}/messages/search`
//! (one channel: a DM, or a guild channel the caller may read), with
//! Discord's parameters and answer. The stores' full-text engines do the
//! matching (`store::CommunityStore::search_messages`).

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use protocol::model::permission;
use protocol::{ChannelId, ErrorCode, GuildId, MessageId, UserId};
use serde::Deserialize;
use serde_json::{json, Value};
use store::{Has, SearchQuery};

use super::{channel_access, guild_access, json_bytes, parse_id, snowflake_param, ApiError, ApiResult, Caller, Query};
use node::Node;

/// Discord's bounds: 25 results a page, offsets up to 9,975, 1,024
/// characters of content.
const PAGE_DEFAULT: u32 = 25;
const PAGE_MAX: u32 = 25;
const OFFSET_MAX: u32 = 9_975;
const CONTENT_MAX: usize = 1_024;

/// The parameters, as the OpenAPI document shows them. `author_id`,
/// `mentions`, `has` and `channel_id` may be repeated.
#[derive(schemars::JsonSchema, Deserialize, Default)]
#[allow(dead_code)]
pub struct SearchParams {
    /// Words (all required) and "quoted phrases".
    content: Option<String>,
    author_id: Option<String>,
    mentions: Option<String>,
    /// link, embed, file, image, video, sound or sticker.
    has: Option<String>,
    /// Guild search only: these channels.
    channel_id: Option<String>,
    min_id: Option<String>,
    max_id: Option<String>,
    pinned: Option<bool>,
    /// `timestamp` (default) or `relevance`.
    sort_by: Option<String>,
    /// `desc` (default) or `asc`.
    sort_order: Option<String>,
    offset: Option<u32>,
    limit: Option<u32>,
}

/// `content` as the stores take it: "quoted phrases" and single words,
/// each a list of lowercase runs of letters and digits.
pub fn terms(content: &str) -> Vec<Vec<String>> {
    let tokens = |s: &str| -> Vec<String> { store::search_words(s).map(str::to_lowercase).collect() };
    let mut out = Vec::new();
    for (k, part) in content.split('"').enumerate() {
        if k % 2 == 1 {
            let p = tokens(part);
            if !p.is_empty() {
                out.push(p);
            }
        } else {
            out.extend(tokens(part).into_iter().map(|t| vec![t]));
        }
    }
    out
}

fn bad(field: &str, message: &str) -> ApiError {
    ApiError::field(field, "BASE_TYPE_INVALID", message)
}

/// The query from the request's pairs; `channels` still empty.
fn parse(pairs: &[(String, String)]) -> ApiResult<(SearchQuery, Vec<ChannelId>)> {
    let mut q = SearchQuery { limit: PAGE_DEFAULT, ..Default::default() };
    let mut only = Vec::new();
    let mut content = None;
    for (k, v) in pairs {
        match k.as_str() {
            "content" => {
                if v.chars().count() > CONTENT_MAX {
                    return Err(ApiError::field("content", "BASE_TYPE_MAX_LENGTH", &format!("Must be {CONTENT_MAX} or fewer in length.")));
                }
                content = Some(v.clone());
            }
            "author_id" => q.authors.push(UserId(snowflake_param(k, v)?)),
            "mentions" => q.mentions.push(UserId(snowflake_param(k, v)?)),
            "channel_id" => only.push(ChannelId(snowflake_param(k, v)?)),
            "min_id" => q.min_id = Some(MessageId(snowflake_param(k, v)?)),
            "max_id" => q.max_id = Some(MessageId(snowflake_param(k, v)?)),
            "has" => q.has.push(match v.as_str() {
                "link" => Has::Link,
                "embed" => Has::Embed,
                "file" => Has::File,
                "image" => Has::Image,
                "video" => Has::Video,
                "sound" => Has::Sound,
                "sticker" => Has::Sticker,
                _ => return Err(bad("has", "Value must be one of link, embed, file, image, video, sound, sticker.")),
            }),
            "pinned" => q.pinned = Some(protocol::de::parse_flag(v).ok_or_else(|| bad("pinned", "Value is not a boolean."))?),
            "sort_by" => {
                q.by_relevance = match v.as_str() {
                    "timestamp" => false,
                    "relevance" => true,
                    _ => return Err(bad("sort_by", "Value must be one of timestamp, relevance.")),
                }
            }
            "sort_order" => {
                q.ascending = match v.as_str() {
                    "desc" => false,
                    "asc" => true,
                    _ => return Err(bad("sort_order", "Value must be one of desc, asc.")),
                }
            }
            "offset" => {
                q.offset = v
                    .parse()
                    .ok()
                    .filter(|o| *o <= OFFSET_MAX)
                    .ok_or_else(|| ApiError::field("offset", "NUMBER_TYPE_MAX", &format!("Must be between 0 and {OFFSET_MAX}.")))?
            }
            "limit" => {
                q.limit = v
                    .parse()
                    .ok()
                    .filter(|l| (1..=PAGE_MAX).contains(l))
                    .ok_or_else(|| ApiError::field("limit", "NUMBER_TYPE_MAX", &format!("Must be between 1 and {PAGE_MAX}.")))?
            }
            // Discord's other filters (author_type, embed_type, ...) are not
            // kept: leniently ignored, as unknown parameters are.
            _ => {}
        }
    }
    if let Some(c) = content {
        q.terms = terms(&c);
    }
    Ok((q, only))
}

/// `GET /guilds/{guild_id}/messages/search`.
pub async fn in_guild(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> ApiResult<Response> {
    let gid: GuildId = parse_id(&id, ErrorCode::UnknownGuild)?;
    let a = guild_access(&node, gid, u.id).await?;
    let (mut q, only) = parse(&pairs)?;
    let channels = node.store.channels_of_guild(gid).await?;
    let readable = |c: &store::ChannelRecord| {
        a.in_channel(c) & (permission::VIEW_CHANNEL | permission::READ_MESSAGE_HISTORY)
            == (permission::VIEW_CHANNEL | permission::READ_MESSAGE_HISTORY)
    };
    // Parents and the readable set by id: a guild may hold thousands of
    // threads and channels.
    let by_id: std::collections::HashMap<ChannelId, &store::ChannelRecord> = channels.iter().map(|c| (c.id, c)).collect();
    let mut visible = Vec::new();
    for c in &channels {
        if !store::is_thread(c.kind) {
            if readable(c) {
                visible.push(c.id);
            }
            continue;
        }
        // A thread: its parent's permissions; a private one, membership too
        // (or MANAGE_THREADS).
        let Some(&parent) = c.parent_id.and_then(|p| by_id.get(&p)) else { continue };
        if !readable(parent) {
            continue;
        }
        let private = c.kind == 12;
        if private && a.in_channel(parent) & permission::MANAGE_THREADS == 0 {
            let members = node.store.thread_members(c.id).await?;
            if !members.iter().any(|m| m.user_id == u.id) {
                continue;
            }
        }
        visible.push(c.id);
    }
    if only.is_empty() {
        // The whole guild less what the caller may not read: the index can
        // match the guild (see `store::index_scope`).
        let seen: std::collections::HashSet<ChannelId> = visible.iter().copied().collect();
        q.hidden = Some(channels.iter().map(|c| c.id).filter(|c| !seen.contains(c)).collect());
    } else {
        let only: std::collections::HashSet<ChannelId> = only.into_iter().collect();
        visible.retain(|c| only.contains(c));
    }
    q.channels = visible;
    q.guild = Some(gid);
    answer(&node, u.id, &mut q).await
}

/// `GET /channels/{channel_id}/messages/search`: one DM, or one guild
/// channel the caller may read.
pub async fn in_channel(
    State(node): State<Arc<Node>>,
    Caller(u): Caller,
    Path(id): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> ApiResult<Response> {
    let cid: ChannelId = parse_id(&id, ErrorCode::UnknownChannel)?;
    let (readable, guild) = match super::dms::readable(&node, cid, u.id).await? {
        Some(_) => (true, None),
        None => {
            let (c, a) = channel_access(&node, cid, u.id).await?;
            (a.in_channel(&c) & permission::READ_MESSAGE_HISTORY != 0, c.guild_id)
        }
    };
    let (mut q, _) = parse(&pairs)?;
    q.guild = guild;
    if readable {
        q.channels = vec![cid];
    }
    answer(&node, u.id, &mut q).await
}

async fn answer(node: &Node, viewer: UserId, q: &mut SearchQuery) -> ApiResult<Response> {
    q.count_max = node.config.search.count_max;
    q.window = node.config.search.window_rows;
    let (total, found) = node.store.search_messages(q).await?;
    let mut msgs = super::messages::render(node, &found).await?;
    super::reactions::decorate(node, &mut msgs, viewer).await?;
    let body = json!({
        "total_results": total,
        // Each hit is a list, as Discord sends it (once with context around it).
        "messages": msgs.iter().map(|m| json!([m])).collect::<Vec<Value>>(),
        "analytics_id": format!("{:016x}", node.ids.next().0),
        "doing_deep_historical_index": false,
    });
    Ok(json_bytes(StatusCode::OK, serde_json::to_vec(&body).map_err(ApiError::internal)?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn content_becomes_words_and_phrases() {
        let t = super::terms(r#"Hello, "brave  NEW world" café!  "" x"#);
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(t, vec![owned(&["hello"]), owned(&["brave", "new", "world"]), owned(&["café"]), owned(&["x"])]);
    }
}
