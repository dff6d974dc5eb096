//! Reactions, custom emojis and pins in PostgreSQL: the changes (inside
//! `apply_changes`' transaction, each one statement on the rows it names,
//! its limits checked in that statement), the reads, and the emojis of
//! guild loads.

use std::collections::HashMap;

use protocol::id::EmojiId;
use protocol::{ChannelId, GuildId, MessageId, RoleId, UserId};
use sqlx::{FromRow, PgConnection, PgPool};

use super::{i, ids_json, MessageRow, UserRow, MESSAGE_COLS, USER_COLS};
use crate::*;

/// The change's statements; the rows it touched.
pub(super) async fn apply(conn: &mut PgConnection, change: &Change) -> Result<u64> {
    let rows = match change {
        Change::AddReaction { reaction: r, max_emojis } => sqlx::query(
            "INSERT INTO reactions (message_id, emoji, user_id, emoji_id, emoji_name, animated, created_at)
             SELECT $1, $2, $3, $4, $5, $6, $7
             WHERE EXISTS (SELECT 1 FROM messages WHERE id = $1)
               AND (EXISTS (SELECT 1 FROM reactions WHERE message_id = $1 AND emoji = $2)
                    OR (SELECT count(DISTINCT emoji) FROM reactions WHERE message_id = $1) < $8)
             ON CONFLICT DO NOTHING",
        )
        .bind(i(r.message_id))
        .bind(r.emoji.key())
        .bind(i(r.user_id))
        .bind(r.emoji.id().map(|e| e.0 as i64))
        .bind(r.emoji.name())
        .bind(r.emoji.animated())
        .bind(r.created_at as i64)
        .bind(i64::from(*max_emojis))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::RemoveReactions { message, emoji, user } => sqlx::query(
            "DELETE FROM reactions WHERE message_id = $1 AND ($2::TEXT IS NULL OR emoji = $2) AND ($3::BIGINT IS NULL OR user_id = $3)",
        )
        .bind(i(*message))
        .bind(emoji.as_deref())
        .bind(user.map(i))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::PinMessage { channel, message, at, max } => sqlx::query(
            "INSERT INTO pins (message_id, channel_id, pinned_at)
             SELECT $1, $2, $3
             WHERE EXISTS (SELECT 1 FROM messages WHERE id = $1 AND channel_id = $2)
               AND (SELECT count(*) FROM pins WHERE channel_id = $2) < $4
             ON CONFLICT DO NOTHING",
        )
        .bind(i(*message))
        .bind(i(*channel))
        .bind(*at as i64)
        .bind(i64::from(*max))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::UnpinMessage { channel, message } => sqlx::query("DELETE FROM pins WHERE message_id = $1 AND channel_id = $2")
            .bind(i(*message))
            .bind(i(*channel))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::PinNotice { message: m, pinned, at } => sqlx::query(
            // The message, and its channel's newest id, in one statement.
            "WITH added AS (
                 INSERT INTO messages (id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone,
                                       mentions, reference, extra)
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13
                 WHERE EXISTS (SELECT 1 FROM pins WHERE message_id = $14 AND pinned_at = $15)
                 RETURNING id, channel_id)
             UPDATE channels c SET last_message_id = GREATEST(c.last_message_id, a.id) FROM added a WHERE c.id = a.channel_id",
        )
        .bind(i(m.id))
        .bind(i(m.channel_id))
        .bind(m.guild_id.map(i))
        .bind(i(m.author_id))
        .bind(&m.content)
        .bind(m.edited_at.map(|v| v as i64))
        .bind(i64::from(m.kind))
        .bind(m.flags as i64)
        .bind(m.tts)
        .bind(m.mention_everyone)
        .bind(ids_json(m.mentions.iter().map(|u| u.0)))
        .bind(m.reference.as_ref().map(serde_json::to_string).transpose()?)
        .bind(serde_json::to_string(&m.extra)?)
        .bind(i(*pinned))
        .bind(*at as i64)
        .execute(conn)
        .await?
        .rows_affected(),
        Change::DeleteMessages { channel, ids } => sqlx::query("DELETE FROM messages WHERE channel_id = $1 AND id = ANY($2)")
            .bind(i(*channel))
            .bind(ids.iter().map(|m| i(*m)).collect::<Vec<_>>())
            .execute(conn)
            .await?
            .rows_affected(),
        Change::CreateEmoji(e) => sqlx::query(
            "INSERT INTO emojis (id, guild_id, name, animated, roles, creator_id) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(e.id.0 as i64)
        .bind(i(e.guild_id))
        .bind(&e.name)
        .bind(e.animated)
        .bind(ids_json(e.roles.iter().map(|r| r.0)))
        .bind(e.creator_id.map(i))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::UpdateEmoji(e) => sqlx::query("UPDATE emojis SET name = $1, roles = $2 WHERE id = $3 AND guild_id = $4")
            .bind(&e.name)
            .bind(ids_json(e.roles.iter().map(|r| r.0)))
            .bind(e.id.0 as i64)
            .bind(i(e.guild_id))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::DeleteEmoji { guild, id } => sqlx::query("DELETE FROM emojis WHERE id = $1 AND guild_id = $2")
            .bind(id.0 as i64)
            .bind(i(*guild))
            .execute(conn)
            .await?
            .rows_affected(),
        _ => unreachable!("not a change of reactions, emojis or pins"),
    };
    Ok(rows)
}

#[derive(FromRow)]
struct EmojiRow {
    id: i64,
    guild_id: i64,
    name: String,
    animated: bool,
    roles: String,
    creator_id: Option<i64>,
}

impl TryFrom<EmojiRow> for EmojiRecord {
    type Error = StoreError;
    fn try_from(r: EmojiRow) -> Result<Self> {
        let roles: Vec<u64> = serde_json::from_str(&r.roles)?;
        Ok(EmojiRecord {
            id: EmojiId(r.id as u64),
            guild_id: GuildId(r.guild_id as u64),
            name: r.name,
            animated: r.animated,
            roles: roles.into_iter().map(RoleId).collect(),
            creator_id: r.creator_id.map(|v| UserId(v as u64)),
        })
    }
}

const EMOJI_COLS: &str = "id, guild_id, name, animated, roles, creator_id";

#[derive(FromRow)]
struct GroupRow {
    message_id: i64,
    emoji_id: Option<i64>,
    emoji_name: String,
    animated: bool,
    count: i64,
    me: bool,
}

pub(super) async fn reactions_of(pool: &PgPool, messages: &[MessageId], viewer: UserId) -> Result<Vec<ReactionGroup>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<GroupRow> = sqlx::query_as(
        "SELECT message_id, min(emoji_id) AS emoji_id, min(emoji_name) AS emoji_name, bool_or(animated) AS animated,
                count(*) AS count, bool_or(user_id = $2) AS me
         FROM reactions WHERE message_id = ANY($1)
         GROUP BY message_id, emoji ORDER BY message_id, min(created_at), emoji",
    )
    .bind(messages.iter().map(|m| i(*m)).collect::<Vec<_>>())
    .bind(i(viewer))
    .fetch_all(pool)
    .await?;
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

pub(super) async fn reaction_users(pool: &PgPool, message: MessageId, key: &str, after: UserId, limit: u32) -> Result<Vec<UserRecord>> {
    let cols = USER_COLS.split(", ").map(|c| format!("u.{c}")).collect::<Vec<_>>().join(", ");
    let q = format!(
        "SELECT {cols} FROM reactions r JOIN users u ON u.id = r.user_id
         WHERE r.message_id = $1 AND r.emoji = $2 AND r.user_id > $3 ORDER BY r.user_id LIMIT $4"
    );
    let rows: Vec<UserRow> = sqlx::query_as(&q).bind(i(message)).bind(key).bind(i(after)).bind(i64::from(limit)).fetch_all(pool).await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

pub(super) async fn pins_among(pool: &PgPool, messages: &[MessageId]) -> Result<Vec<(MessageId, u64)>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT message_id, pinned_at FROM pins WHERE message_id = ANY($1)")
        .bind(messages.iter().map(|m| i(*m)).collect::<Vec<_>>())
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|(m, at)| (MessageId(m as u64), at as u64)).collect())
}

#[derive(FromRow)]
struct PinnedRow {
    #[sqlx(flatten)]
    message: MessageRow,
    pinned_at: i64,
}

pub(super) async fn pinned_messages(
    pool: &PgPool,
    channel: ChannelId,
    before: Option<u64>,
    limit: u32,
) -> Result<Vec<(MessageRecord, u64)>> {
    let cols = MESSAGE_COLS.split(", ").map(|c| format!("m.{c}")).collect::<Vec<_>>().join(", ");
    let q = format!(
        "SELECT {cols}, p.pinned_at FROM pins p JOIN messages m ON m.id = p.message_id
         WHERE p.channel_id = $1 AND p.pinned_at < $2 ORDER BY p.pinned_at DESC, p.message_id DESC LIMIT $3"
    );
    let before = before.map_or(i64::MAX, |b| b as i64);
    let rows: Vec<PinnedRow> = sqlx::query_as(&q).bind(i(channel)).bind(before).bind(i64::from(limit)).fetch_all(pool).await?;
    rows.into_iter().map(|r| Ok((r.message.try_into()?, r.pinned_at as u64))).collect()
}

pub(super) async fn count_pins(pool: &PgPool, channel: ChannelId) -> Result<u64> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pins WHERE channel_id = $1").bind(i(channel)).fetch_one(pool).await?;
    Ok(n as u64)
}

pub(super) async fn messages_among(pool: &PgPool, channel: ChannelId, ids: &[MessageId]) -> Result<Vec<MessageId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let rows: Vec<(i64,)> = sqlx::query_as("SELECT id FROM messages WHERE channel_id = $1 AND id = ANY($2) ORDER BY id")
        .bind(i(channel))
        .bind(ids.iter().map(|m| i(*m)).collect::<Vec<_>>())
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|(id,)| MessageId(id as u64)).collect())
}

pub(super) async fn emojis_of(pool: &PgPool, guild: GuildId) -> Result<Vec<EmojiRecord>> {
    let q = format!("SELECT {EMOJI_COLS} FROM emojis WHERE guild_id = $1 ORDER BY id");
    sqlx::query_as::<_, EmojiRow>(&q).bind(i(guild)).fetch_all(pool).await?.into_iter().map(TryInto::try_into).collect()
}

pub(super) async fn get_emoji(pool: &PgPool, id: EmojiId) -> Result<Option<EmojiRecord>> {
    let q = format!("SELECT {EMOJI_COLS} FROM emojis WHERE id = $1");
    sqlx::query_as::<_, EmojiRow>(&q).bind(id.0 as i64).fetch_optional(pool).await?.map(TryInto::try_into).transpose()
}

/// The emojis of the guilds of a `load_guilds` batch (one statement).
pub(super) async fn load_emojis(pool: &PgPool, snaps: &mut [GuildSnapshot]) -> Result<()> {
    if snaps.is_empty() {
        return Ok(());
    }
    let ids: Vec<i64> = snaps.iter().map(|s| i(s.guild.id)).collect();
    let q = format!("SELECT {EMOJI_COLS} FROM emojis WHERE guild_id = ANY($1) ORDER BY guild_id, id");
    let rows: Vec<EmojiRow> = sqlx::query_as(&q).bind(&ids).fetch_all(pool).await?;
    let index: HashMap<u64, usize> = snaps.iter().enumerate().map(|(n, s)| (s.guild.id.0, n)).collect();
    for r in rows {
        if let Some(&n) = index.get(&(r.guild_id as u64)) {
            snaps[n].emojis.push(r.try_into()?);
        }
    }
    Ok(())
}
