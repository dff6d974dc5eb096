//! Reactions, custom emojis and pins in SQLite: the changes (inside
//! `apply_changes`' transaction), the reads, and the emojis of guild loads.

use std::collections::HashMap;

use protocol::id::EmojiId;
use protocol::{ChannelId, GuildId, MessageId, RoleId, UserId};
use sqlx::{FromRow, QueryBuilder, Sqlite, SqliteConnection, SqlitePool};

use super::{i, ids_json, MessageRow, UserRow, MESSAGE_COLS, USER_COLS};
use crate::*;

/// The change's statements; the rows it touched.
pub(super) async fn apply(conn: &mut SqliteConnection, change: &Change) -> Result<u64> {
    let rows = match change {
        Change::AddReaction { reaction: r, max_emojis } => sqlx::query(
            "INSERT INTO reactions (message_id, emoji, user_id, emoji_id, emoji_name, animated, created_at)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7
             WHERE EXISTS (SELECT 1 FROM messages WHERE id = ?1)
               AND (EXISTS (SELECT 1 FROM reactions WHERE message_id = ?1 AND emoji = ?2)
                    OR (SELECT count(DISTINCT emoji) FROM reactions WHERE message_id = ?1) < ?8)
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
        Change::RemoveReactions { message, emoji, user } => {
            let mut q = QueryBuilder::<Sqlite>::new("DELETE FROM reactions WHERE message_id = ");
            q.push_bind(i(*message));
            if let Some(e) = emoji {
                q.push(" AND emoji = ").push_bind(e.clone());
            }
            if let Some(u) = user {
                q.push(" AND user_id = ").push_bind(i(*u));
            }
            q.build().execute(conn).await?.rows_affected()
        }
        Change::PinMessage { channel, message, at, max } => sqlx::query(
            "INSERT INTO pins (message_id, channel_id, pinned_at)
             SELECT ?1, ?2, ?3
             WHERE EXISTS (SELECT 1 FROM messages WHERE id = ?1 AND channel_id = ?2)
               AND (SELECT count(*) FROM pins WHERE channel_id = ?2) < ?4
             ON CONFLICT DO NOTHING",
        )
        .bind(i(*message))
        .bind(i(*channel))
        .bind(*at as i64)
        .bind(i64::from(*max))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::UnpinMessage { channel, message } => sqlx::query("DELETE FROM pins WHERE message_id = ? AND channel_id = ?")
            .bind(i(*message))
            .bind(i(*channel))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::PinNotice { message: m, pinned, at } => {
            let n = sqlx::query(
                "INSERT INTO messages (id, channel_id, guild_id, author_id, content, edited_at, kind, flags, tts, mention_everyone, mentions, reference, extra)
                 SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
                 WHERE EXISTS (SELECT 1 FROM pins WHERE message_id = ? AND pinned_at = ?)",
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
            .bind(ids_json(&m.mentions.iter().map(|u| u.0).collect::<Vec<_>>()))
            .bind(m.reference.as_ref().map(serde_json::to_string).transpose()?)
            .bind(serde_json::to_string(&m.extra)?)
            .bind(i(*pinned))
            .bind(*at as i64)
            .execute(&mut *conn)
            .await?
            .rows_affected();
            if n > 0 {
                sqlx::query("UPDATE channels SET last_message_id = max(coalesce(last_message_id, 0), ?) WHERE id = ?")
                    .bind(i(m.id))
                    .bind(i(m.channel_id))
                    .execute(conn)
                    .await?;
            }
            n
        }
        Change::DeleteMessages { channel, ids } => {
            if ids.is_empty() {
                return Ok(0);
            }
            let mut q = QueryBuilder::<Sqlite>::new("DELETE FROM messages WHERE channel_id = ");
            q.push_bind(i(*channel)).push(" AND id IN (");
            let mut list = q.separated(", ");
            for id in ids {
                list.push_bind(i(*id));
            }
            q.push(")");
            q.build().execute(conn).await?.rows_affected()
        }
        Change::CreateEmoji(e) => sqlx::query(
            "INSERT INTO emojis (id, guild_id, name, animated, roles, creator_id) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        )
        .bind(e.id.0 as i64)
        .bind(i(e.guild_id))
        .bind(&e.name)
        .bind(e.animated)
        .bind(ids_json(&e.roles.iter().map(|r| r.0).collect::<Vec<_>>()))
        .bind(e.creator_id.map(i))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::UpdateEmoji(e) => sqlx::query("UPDATE emojis SET name = ?, roles = ? WHERE id = ? AND guild_id = ?")
            .bind(&e.name)
            .bind(ids_json(&e.roles.iter().map(|r| r.0).collect::<Vec<_>>()))
            .bind(e.id.0 as i64)
            .bind(i(e.guild_id))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::DeleteEmoji { guild, id } => sqlx::query("DELETE FROM emojis WHERE id = ? AND guild_id = ?")
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
pub(super) struct EmojiRow {
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

/// `sql` followed by ` IN (ids...)`.
fn in_list<'a>(sql: &str, ids: impl IntoIterator<Item = i64>) -> QueryBuilder<'a, Sqlite> {
    let mut q = QueryBuilder::<Sqlite>::new(sql);
    q.push(" IN (");
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(id);
    }
    q.push(")");
    q
}

#[derive(FromRow)]
struct GroupRow {
    message_id: i64,
    emoji_id: Option<i64>,
    emoji_name: String,
    animated: bool,
    count: i64,
    me: bool,
}

pub(super) async fn reactions_of(pool: &SqlitePool, messages: &[MessageId], viewer: UserId) -> Result<Vec<ReactionGroup>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = QueryBuilder::<Sqlite>::new("SELECT message_id, min(emoji_id) AS emoji_id, min(emoji_name) AS emoji_name, ");
    q.push("max(animated) AS animated, count(*) AS count, max(user_id = ").push_bind(i(viewer));
    q.push(") AS me, min(created_at) AS first FROM reactions WHERE message_id IN (");
    let mut list = q.separated(", ");
    for m in messages {
        list.push_bind(i(*m));
    }
    q.push(") GROUP BY message_id, emoji ORDER BY message_id, first, emoji");
    let rows: Vec<GroupRow> = q.build_query_as().fetch_all(pool).await?;
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

pub(super) async fn reaction_users(pool: &SqlitePool, message: MessageId, key: &str, after: UserId, limit: u32) -> Result<Vec<UserRecord>> {
    let cols = USER_COLS.split(", ").map(|c| format!("u.{c}")).collect::<Vec<_>>().join(", ");
    let q = format!(
        "SELECT {cols} FROM reactions r JOIN users u ON u.id = r.user_id
         WHERE r.message_id = ? AND r.emoji = ? AND r.user_id > ? ORDER BY r.user_id LIMIT ?"
    );
    let rows: Vec<UserRow> = sqlx::query_as(&q).bind(i(message)).bind(key).bind(i(after)).bind(i64::from(limit)).fetch_all(pool).await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

pub(super) async fn pins_among(pool: &SqlitePool, messages: &[MessageId]) -> Result<Vec<(MessageId, u64)>> {
    if messages.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = in_list("SELECT message_id, pinned_at FROM pins WHERE message_id", messages.iter().map(|m| i(*m)));
    let rows: Vec<(i64, i64)> = q.build_query_as().fetch_all(pool).await?;
    Ok(rows.into_iter().map(|(m, at)| (MessageId(m as u64), at as u64)).collect())
}

#[derive(FromRow)]
struct PinnedRow {
    #[sqlx(flatten)]
    message: MessageRow,
    pinned_at: i64,
}

pub(super) async fn pinned_messages(
    pool: &SqlitePool,
    channel: ChannelId,
    before: Option<u64>,
    limit: u32,
) -> Result<Vec<(MessageRecord, u64)>> {
    let cols = MESSAGE_COLS.split(", ").map(|c| format!("m.{c}")).collect::<Vec<_>>().join(", ");
    let q = format!(
        "SELECT {cols}, p.pinned_at FROM pins p JOIN messages m ON m.id = p.message_id
         WHERE p.channel_id = ? AND p.pinned_at < ? ORDER BY p.pinned_at DESC, p.message_id DESC LIMIT ?"
    );
    let before = before.map_or(i64::MAX, |b| b as i64);
    let rows: Vec<PinnedRow> = sqlx::query_as(&q).bind(i(channel)).bind(before).bind(i64::from(limit)).fetch_all(pool).await?;
    rows.into_iter().map(|r| Ok((r.message.try_into()?, r.pinned_at as u64))).collect()
}

pub(super) async fn count_pins(pool: &SqlitePool, channel: ChannelId) -> Result<u64> {
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM pins WHERE channel_id = ?").bind(i(channel)).fetch_one(pool).await?;
    Ok(n as u64)
}

pub(super) async fn messages_among(pool: &SqlitePool, channel: ChannelId, ids: &[MessageId]) -> Result<Vec<MessageId>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let mut q = QueryBuilder::<Sqlite>::new("SELECT id FROM messages WHERE channel_id = ");
    q.push_bind(i(channel)).push(" AND id IN (");
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(i(*id));
    }
    q.push(") ORDER BY id");
    let rows: Vec<(i64,)> = q.build_query_as().fetch_all(pool).await?;
    Ok(rows.into_iter().map(|(id,)| MessageId(id as u64)).collect())
}

pub(super) async fn emojis_of(pool: &SqlitePool, guild: GuildId) -> Result<Vec<EmojiRecord>> {
    let q = format!("SELECT {EMOJI_COLS} FROM emojis WHERE guild_id = ? ORDER BY id");
    sqlx::query_as::<_, EmojiRow>(&q).bind(i(guild)).fetch_all(pool).await?.into_iter().map(TryInto::try_into).collect()
}

pub(super) async fn get_emoji(pool: &SqlitePool, id: EmojiId) -> Result<Option<EmojiRecord>> {
    let q = format!("SELECT {EMOJI_COLS} FROM emojis WHERE id = ?");
    sqlx::query_as::<_, EmojiRow>(&q).bind(id.0 as i64).fetch_optional(pool).await?.map(TryInto::try_into).transpose()
}

/// The emojis of the guilds of a `load_guilds` batch (one statement).
pub(super) async fn load_emojis(pool: &SqlitePool, snaps: &mut [GuildSnapshot]) -> Result<()> {
    if snaps.is_empty() {
        return Ok(());
    }
    let mut q = in_list(&format!("SELECT {EMOJI_COLS} FROM emojis WHERE guild_id"), snaps.iter().map(|s| i(s.guild.id)));
    q.push(" ORDER BY guild_id, id");
    let rows: Vec<EmojiRow> = q.build_query_as().fetch_all(pool).await?;
    let index: HashMap<u64, usize> = snaps.iter().enumerate().map(|(n, s)| (s.guild.id.0, n)).collect();
    for r in rows {
        if let Some(&n) = index.get(&(r.guild_id as u64)) {
            snaps[n].emojis.push(r.try_into()?);
        }
    }
    Ok(())
}
