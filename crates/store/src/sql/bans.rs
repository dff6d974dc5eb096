//! Reads behind bans: a guild's bans, one ban, and the messages a ban's
//! purge deletes (roles and bans change through `changes`).

use protocol::{ChannelId, GuildId, MessageId, UserId};

use super::rows::{BanRow, BAN_COLS};
use super::{query, Dialect, Pool};
use crate::{BanRecord, Result};

pub(super) async fn of_guild(db: Pool<'_>, guild: GuildId, before: Option<UserId>, after: UserId, limit: u32) -> Result<Vec<BanRecord>> {
    let rows: Vec<BanRow> = match before {
        // The `limit` bans just before `before`, still in ascending order.
        Some(b) => {
            let q = format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = $1 AND user_id < $2 ORDER BY user_id DESC LIMIT $3");
            let mut v: Vec<BanRow> = query(q).bind(guild).bind(b).bind(limit).fetch_all(db).await?;
            v.reverse();
            v
        }
        None => {
            let q = format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = $1 AND user_id > $2 ORDER BY user_id LIMIT $3");
            query(q).bind(guild).bind(after).bind(limit).fetch_all(db).await?
        }
    };
    Ok(rows.into_iter().map(Into::into).collect())
}

pub(super) async fn get(db: Pool<'_>, guild: GuildId, user: UserId) -> Result<Option<BanRecord>> {
    let q = format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = $1 AND user_id = $2");
    let row: Option<BanRow> = query(q).bind(guild).bind(user).fetch_optional(db).await?;
    Ok(row.map(Into::into))
}

/// `author`'s messages in `guild` with ids from `since` on, newest first.
/// Through each channel's `(channel_id, id)` index: the time window of the
/// guild's channels, never a scan of every guild's recent messages (SQLite's
/// planner is told so; PostgreSQL's finds it).
pub(super) async fn messages_of_author(
    db: Pool<'_>,
    guild: GuildId,
    author: UserId,
    since: MessageId,
    limit: u32,
) -> Result<Vec<(ChannelId, MessageId)>> {
    let index = if db.dialect() == Dialect::Sqlite { "INDEXED BY messages_channel" } else { "" };
    let q = format!(
        "SELECT m.channel_id, m.id FROM channels c JOIN messages m {index} ON m.channel_id = c.id AND m.id >= $1
         WHERE c.guild_id = $2 AND m.author_id = $3 ORDER BY m.id DESC LIMIT $4"
    );
    let rows: Vec<(i64, i64)> = query(q).bind(since).bind(guild).bind(author).bind(limit).fetch_all(db).await?;
    Ok(rows.into_iter().map(|(c, m)| (ChannelId(c as u64), MessageId(m as u64))).collect())
}
