//! Roles, bans and a ban's purge on PostgreSQL: the [`Change`]s of that
//! slice (inside `apply_changes`' transaction, one statement each on the
//! rows they name) and the reads behind their routes.

use protocol::{ChannelId, GuildId, MessageId, UserId};
use sqlx::{FromRow, PgConnection, PgPool};

use super::{i, ids_json};
use crate::{BanRecord, Change, Result};

/// Applies one change of this slice; the rows it touched. `None`: not one of them.
pub(super) async fn apply(conn: &mut PgConnection, change: &Change) -> Result<Option<u64>> {
    let rows = match change {
        Change::AddMemberUnlessBanned(m) => sqlx::query(
            "INSERT INTO members (guild_id, user_id, nick, roles, joined_at, flags)
             SELECT $1, $2, $3, $4, $5, $6 WHERE NOT EXISTS (SELECT 1 FROM bans WHERE guild_id = $1 AND user_id = $2)
             ON CONFLICT (guild_id, user_id) DO NOTHING",
        )
        .bind(i(m.guild_id))
        .bind(i(m.user_id))
        .bind(&m.nick)
        .bind(ids_json(m.roles.iter().map(|r| r.0)))
        .bind(m.joined_at as i64)
        .bind(m.flags as i64)
        .execute(conn)
        .await?
        .rows_affected(),
        Change::CreateRole(r) => sqlx::query(
            "INSERT INTO roles (id, guild_id, name, color, hoist, position, permissions, mentionable, bot_id) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(i(r.id))
        .bind(i(r.guild_id))
        .bind(&r.name)
        .bind(i64::from(r.color))
        .bind(r.hoist)
        .bind(i64::from(r.position))
        .bind(r.permissions as i64)
        .bind(r.mentionable)
        .bind(r.bot_id.map(i))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::UpdateRole(r) => sqlx::query(
            "UPDATE roles SET name = $1, color = $2, hoist = $3, position = $4, permissions = $5, mentionable = $6 WHERE id = $7",
        )
        .bind(&r.name)
        .bind(i64::from(r.color))
        .bind(r.hoist)
        .bind(i64::from(r.position))
        .bind(r.permissions as i64)
        .bind(r.mentionable)
        .bind(i(r.id))
        .execute(conn)
        .await?
        .rows_affected(),
        Change::DeleteRole { guild, role } => {
            // One statement per table: only the members who hold it are
            // rewritten, keeping the order of their other roles.
            sqlx::query(
                "UPDATE members SET roles = (
                     SELECT COALESCE(jsonb_agg(e ORDER BY n), '[]'::jsonb)::text
                     FROM jsonb_array_elements(members.roles::jsonb) WITH ORDINALITY AS x(e, n)
                     WHERE e <> to_jsonb($2::BIGINT))
                 WHERE guild_id = $1 AND members.roles::jsonb @> jsonb_build_array($2::BIGINT)",
            )
            .bind(i(*guild))
            .bind(i(*role))
            .execute(&mut *conn)
            .await?;
            sqlx::query("DELETE FROM roles WHERE id = $1 AND guild_id = $2").bind(i(*role)).bind(i(*guild)).execute(conn).await?.rows_affected()
        }
        Change::AddBan(b) => sqlx::query(
            "INSERT INTO bans (guild_id, user_id, reason, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (guild_id, user_id) DO NOTHING",
        )
        .bind(i(b.guild_id))
        .bind(i(b.user_id))
        .bind(&b.reason)
        .bind(b.created_at as i64)
        .execute(conn)
        .await?
        .rows_affected(),
        Change::RemoveBan { guild, user } => sqlx::query("DELETE FROM bans WHERE guild_id = $1 AND user_id = $2")
            .bind(i(*guild))
            .bind(i(*user))
            .execute(conn)
            .await?
            .rows_affected(),
        Change::PurgeMessages { guild, author, ids } => {
            sqlx::query("DELETE FROM messages WHERE id = ANY($1) AND author_id = $2 AND guild_id = $3")
                .bind(ids.iter().map(|&m| i(m)).collect::<Vec<_>>())
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
    pool: &PgPool,
    guild: GuildId,
    before: Option<UserId>,
    after: UserId,
    limit: u32,
) -> Result<Vec<BanRecord>> {
    let rows: Vec<BanRow> = match before {
        // The `limit` bans just before `before`, still in ascending order.
        Some(b) => {
            let mut v: Vec<BanRow> =
                sqlx::query_as(&format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = $1 AND user_id < $2 ORDER BY user_id DESC LIMIT $3"))
                    .bind(i(guild))
                    .bind(i(b))
                    .bind(i64::from(limit))
                    .fetch_all(pool)
                    .await?;
            v.reverse();
            v
        }
        None => {
            sqlx::query_as(&format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = $1 AND user_id > $2 ORDER BY user_id LIMIT $3"))
                .bind(i(guild))
                .bind(i(after))
                .bind(i64::from(limit))
                .fetch_all(pool)
                .await?
        }
    };
    Ok(rows.into_iter().map(Into::into).collect())
}

pub(super) async fn get_ban(pool: &PgPool, guild: GuildId, user: UserId) -> Result<Option<BanRecord>> {
    let row: Option<BanRow> = sqlx::query_as(&format!("SELECT {BAN_COLS} FROM bans WHERE guild_id = $1 AND user_id = $2"))
        .bind(i(guild))
        .bind(i(user))
        .fetch_optional(pool)
        .await?;
    Ok(row.map(Into::into))
}

/// Banned users of each of `guilds` (ids as stored): (guild, user).
pub(super) async fn bans_of_guilds(pool: &PgPool, guilds: &[i64]) -> Result<Vec<(GuildId, UserId)>> {
    let rows: Vec<(i64, i64)> = sqlx::query_as("SELECT guild_id, user_id FROM bans WHERE guild_id = ANY($1) ORDER BY guild_id, user_id")
        .bind(guilds)
        .fetch_all(pool)
        .await?;
    Ok(rows.into_iter().map(|(g, u)| (GuildId(g as u64), UserId(u as u64))).collect())
}

/// `author`'s messages in `guild` with ids from `since` on, newest first,
/// through each of the guild's channels' `(channel_id, id)` index.
pub(super) async fn messages_of_author(
    pool: &PgPool,
    guild: GuildId,
    author: UserId,
    since: MessageId,
    limit: u32,
) -> Result<Vec<(ChannelId, MessageId)>> {
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT m.channel_id, m.id FROM channels c JOIN messages m ON m.channel_id = c.id AND m.id >= $1
         WHERE c.guild_id = $2 AND m.author_id = $3 ORDER BY m.id DESC LIMIT $4",
    )
    .bind(i(since))
    .bind(i(guild))
    .bind(i(author))
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|(c, m)| (ChannelId(c as u64), MessageId(m as u64))).collect())
}
