//! Reads of reactions, custom emojis, pins and the messages a bulk delete
//! names (their changes are in `changes`; a guild load's emojis in
//! `guilds`).

use protocol::id::EmojiId;
use protocol::{ChannelId, GuildId, MessageId, UserId};
use sqlx::FromRow;

use super::rows::*;
use super::{i, query, Pool};
use crate::{EmojiRecord, MessageRecord, ReactionEmoji, ReactionGroup, Result, UserRecord};

#[derive(FromRow)]
struct GroupRow {
    message_id: i64,
    emoji_id: Option<i64>,
    emoji_name: String,
    animated: bool,
    count: i64,
    me: bool,
}

#[derive(FromRow)]
struct PinnedRow {
    #[sqlx(flatten)]
    message: MessageRow,
    pinned_at: i64,
}

fn ids(messages: &[MessageId]) -> Vec<i64> {
    messages.iter().map(|&m| i(m)).collect()
}

pub(super) async fn reactions_of(db: Pool<'_>, messages: &[MessageId], viewer: UserId) -> Result<Vec<ReactionGroup>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let q = format!(
        "SELECT message_id, min(emoji_id) AS emoji_id, min(emoji_name) AS emoji_name,
                count(*) FILTER (WHERE animated) > 0 AS animated, count(*) AS count, count(*) FILTER (WHERE user_id = $1) > 0 AS me
         FROM reactions WHERE message_id {}
         GROUP BY message_id, emoji ORDER BY message_id, min(created_at), emoji",
        db.dialect().in_ids("$2")
    );
    let rows: Vec<GroupRow> = query(q).bind(viewer).bind(ids(messages)).fetch_all(db).await?;
    Ok(rows
        .into_iter()
        .map(|r| ReactionGroup {
            message_id: MessageId(r.message_id as u64),
            emoji: ReactionEmoji::from_columns(r.emoji_id, r.emoji_name, r.animated),
            count: r.count as u32,
            me: r.me,
        })
        .collect())
}

pub(super) async fn reaction_users(db: Pool<'_>, message: MessageId, key: &str, after: UserId, limit: u32) -> Result<Vec<UserRecord>> {
    let q = format!(
        "SELECT {} FROM reactions r JOIN users u ON u.id = r.user_id
         WHERE r.message_id = $1 AND r.emoji = $2 AND r.user_id > $3 ORDER BY r.user_id LIMIT $4",
        qualified("u", USER_COLS)
    );
    let rows: Vec<UserRow> = query(q).bind(message).bind(key).bind(after).bind(limit).fetch_all(db).await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

pub(super) async fn pins_among(db: Pool<'_>, messages: &[MessageId]) -> Result<Vec<(MessageId, u64)>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let q = format!("SELECT message_id, pinned_at FROM pins WHERE message_id {}", db.dialect().in_ids("$1"));
    let rows: Vec<(i64, i64)> = query(q).bind(ids(messages)).fetch_all(db).await?;
    Ok(rows.into_iter().map(|(m, at)| (MessageId(m as u64), at as u64)).collect())
}

pub(super) async fn pinned_messages(
    db: Pool<'_>,
    channel: ChannelId,
    before: Option<u64>,
    limit: u32,
) -> Result<Vec<(MessageRecord, u64)>> {
    let q = format!(
        "SELECT {}, p.pinned_at FROM pins p JOIN messages m ON m.id = p.message_id
         WHERE p.channel_id = $1 AND p.pinned_at < $2 ORDER BY p.pinned_at DESC, p.message_id DESC LIMIT $3",
        qualified("m", MESSAGE_COLS)
    );
    let before = before.map_or(i64::MAX, |b| b as i64);
    let rows: Vec<PinnedRow> = query(q).bind(channel).bind(before).bind(limit).fetch_all(db).await?;
    rows.into_iter().map(|r| Ok((r.message.try_into()?, r.pinned_at as u64))).collect()
}

pub(super) async fn count_pins(db: Pool<'_>, channel: ChannelId) -> Result<u64> {
    let (n,): (i64,) = query("SELECT count(*) FROM pins WHERE channel_id = $1").bind(channel).fetch_one(db).await?;
    Ok(n as u64)
}

pub(super) async fn messages_among(db: Pool<'_>, channel: ChannelId, among: &[MessageId]) -> Result<Vec<MessageId>> {
    if among.is_empty() {
        return Ok(Vec::new());
    }
    let q = format!("SELECT id FROM messages WHERE channel_id = $1 AND id {} ORDER BY id", db.dialect().in_ids("$2"));
    let rows: Vec<(i64,)> = query(q).bind(channel).bind(ids(among)).fetch_all(db).await?;
    Ok(rows.into_iter().map(|(id,)| MessageId(id as u64)).collect())
}

pub(super) async fn emojis_of(db: Pool<'_>, guild: GuildId) -> Result<Vec<EmojiRecord>> {
    let q = format!("SELECT {EMOJI_COLS} FROM emojis WHERE guild_id = $1 ORDER BY id");
    query(q).bind(guild).fetch_all::<EmojiRow>(db).await?.into_iter().map(TryInto::try_into).collect()
}

pub(super) async fn get_emoji(db: Pool<'_>, id: EmojiId) -> Result<Option<EmojiRecord>> {
    let q = format!("SELECT {EMOJI_COLS} FROM emojis WHERE id = $1");
    query(q).bind(id).fetch_optional::<EmojiRow>(db).await?.map(TryInto::try_into).transpose()
}
