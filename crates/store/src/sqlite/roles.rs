//! Roles, bans and a ban's purge on SQLite: the [`Change`]s of that slice
//! (inside `apply_changes`' transaction) and the reads behind their routes.

use protocol::{ChannelId, GuildId, MessageId, UserId};
use sqlx::{FromRow, SqliteConnection, SqlitePool};

use super::{i, ids_json, insert_role};
use crate::{BanRecord, Change, Result};

/// Applies one change of this slice; the rows it touched. `None`: not one of them.
pub(super) async fn apply(conn: &mut SqliteConnection, change: &Change) -> Result<Option<u64>> {
    let rows = match change {
        Change::AddMemberUnlessBanned(m) => sqlx::query(
            "INSERT INTO members (guild_id, user_id, nick, roles, joined_at, flags)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS (SELECT 1 FROM bans WHERE guild_id = ?1 AND user_id = ?2)
             ON CONFLICT (guild_id, user_id) DO NOTHING",
        )
        .bind(i(m.guild_id))
        .bind(i(m.user_id))
        .bind(&m.nick)
        .bind(ids_json(&m.roles.iter().map(|r| r.0).collect::<Vec<_>>()))
        .bind(m.joined_at as i64)
        .bind(m.flags as i64)
        .execute(conn)
        .await?
        .rows_affected(),
        Change::CreateRole(r) => {
            insert_role(conn, r).await?;
            1
        }
        Change::UpdateRole(r) => {
            sqlx::query("UPDATE roles SET name = ?, color = ?, hoist = ?, position = ?, permissions = ?, mentionable = ? WHERE id = ?")
                .bind(&r.name)
                .bind(i64::from(r.color))
                .bind(r.hoist)
                .bind(i64::from(r.position))
                .bind(r.permissions as i64)
                .bind(r.mentionable)
                .bind(i(r.id))
                .execute(conn)
                .await?
                .rows_affected()
        }
        Change::DeleteRole { guild, role } => {
            // Only the members who hold it are rewritten.
            sqlx::query(
                "UPDATE members SET roles = (SELECT json_group_array(j.value) FROM json_each(members.roles) j WHERE j.value != ?2)
                 WHERE guild_id = ?1 AND EXISTS (SELECT 1 FROM json_each(members.roles) j WHERE j.value = ?2)",
            )
            .bind(i(*guild))
            .bind(i(*role))
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM roles WHERE id = ? AND guild_id = ?")
                .bind(i(*role))
                .bind(i(*guild))
                .execute(conn)
                .await?
                .rows_affected()
        }
        Change::AddBan(b) => sqlx::query(
            "INSERT INTO bans (guild_id, user_id, reason, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (guild_id, user_id) DO NOTHING",
        )
        .bind(i(b.guild_id))
        .bind(i(b.user_id))
        .bind(&b.reason)
        .bind(b.created_at as i64)
        .execute(conn)
        .await?
        .rows_affected(),
        Change::RemoveBan { guild, user } => sqlx::query("DELETE FROM bans WHERE guild_id = ? AND user_id = ?")
            .bind(i(*guild))
            .bind(i(*user))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::PurgeMessages { guild, author, ids } => {
            sqlx::query("DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?)) AND author_id = ? AND guild_id = ?")
                .bind(ids_json(&ids.iter().map(|m| m.0).collect::<Vec<_>>()))
                .bind(i(*author))
                .bind(i(*guild))
                .execute(conn)
                .await?
                .rows_affected()
        }
        _ => return Ok(None),
    };
    Ok(Some(rows))
}

#[derive(FromRow)]
struct BanRow {
    guild_id: i64,
    user_id: i64,
    reason: Option<String>,
    created_at: i64,
}

impl From<BanRow> for BanRecord {
    fn from(r: BanRow) -> Self {
        BanRecord {
            guild_id: GuildId(r.guild_id as u64),
            user_id: UserId(r.user_id as u64),
            reason: r.reason,
            created_at: r.created_at as u64,
        }
    }
}

const BAN_COLS: &str = "guild_id, user_id, reason, created_at";

pub(super) async fn bans_of_guild(
    pool: &SqlitePool,
    guild: GuildId,
    before: Option<UserId>,
    after: UserId,
    limit: u32,
) -> Result<Vec<BanRecord>> {
    let rows: Vec<BanRow> = match before {
        // The `limit` bans just before `before`, still in ascending order.
        Some(b) => {
            let mut v: Vec<BanRow> =
                sqlx::query_as(&format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = ? AND user_id < ? ORDER BY user_id DESC LIMIT ?"))
                    .bind(i(guild))
                    .bind(i(b))
                    .bind(i64::from(limit))
                    .fetch_all(pool)
                    .await?;
            v.reverse();
            v
        }
        None => {
            sqlx::query_as(&format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = ? AND user_id > ? ORDER BY user_id LIMIT ?"))
                .bind(i(guild))
                .bind(i(after))
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        }
    };
    Ok(rows.into_iter().map(Into::into).collect())
}

pub(super) async fn get_ban(pool: &SqlitePool, guild: GuildId, user: UserId) -> Result<Option<BanRecord>> {
    let row: Option<BanRow> = sqlx::query_as(&format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = ? AND user_id = ?"))
        .bind(i(guild))
        .bind(i(user))
        .fetch_optional(pool)
        .await?;
    Ok(row.map(Into::into))
}

/// Banned users of each of `guilds`: (guild, user).
pub(super) async fn bans_of_guilds(pool: &SqlitePool, guilds: &[GuildId]) -> Result<Vec<(GuildId, UserId)>> {
    let rows: Vec<(i64, i64)> =
        sqlx::query_as("SELECT guild_id, user_id FROM bans WHERE guild_id IN (SELECT value FROM json_each(?)) ORDER BY guild_id, user_id")
            .bind(ids_json(&guilds.iter().map(|g| g.0).collect::<Vec<_>>()))
            .fetch_all(pool)
            .await?;
    Ok(rows.into_iter().map(|(g, u)| (GuildId(g as u64), UserId(u as u64))).collect())
}

/// `author`'s messages in `guild` with ids from `since` on, newest first.
/// Through each channel's `(channel_id, id)` index: the time window of the
/// guild's channels, never a scan of every guild's recent messages.
pub(super) async fn messages_of_author(
    pool: &SqlitePool,
    guild: GuildId,
    author: UserId,
    since: MessageId,
    limit: u32,
) -> Result<Vec<(ChannelId, MessageId)>> {
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT m.channel_id, m.id FROM channels c JOIN messages m INDEXED BY messages_channel ON m.channel_id = c.id AND m.id >= ?
         WHERE c.guild_id = ? AND m.author_id = ? ORDER BY m.id DESC LIMIT ?",
    )
    .bind(i(since))
    .bind(i(guild))
    .bind(i(author))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(c, m)| (ChannelId(c as u64), MessageId(m as u64))).collect())
}
