//! DMs, threads and application commands on PostgreSQL (migration 0006).
//! Changes are one statement each; the command writes of one application
//! are serialised by a transaction-scoped advisory lock on its id, so nodes
//! sharing the database never interleave a read and a write of a scope.

use std::collections::HashMap;

use async_trait::async_trait;
use protocol::{ApplicationId, ChannelId, GuildId, UserId};
use sqlx::{PgConnection, PgPool, Row};

use super::{i, insert_channels, insert_messages, is_unique_violation, ChannelRow, PostgresStore, UserRow, CHANNEL_COLS};
use crate::{
    Change, ChannelRecord, CommandRecord, DmChannel, DmThreadCommandStore, GuildSnapshot, Result, StoreError, ThreadMemberRecord,
    ThreadRecord, ThreadSnapshot, UserRecord,
};

const THREAD_COLS: &str = "t.channel_id, t.guild_id, t.owner_id, t.archived, t.archive_timestamp, t.auto_archive_duration, t.locked, \
                           t.invitable, t.created_at";
const COMMAND_COLS: &str = "id, application_id, guild_id, kind, name, version, body";

/// The changes of migration 0006, inside `apply_changes`' transaction.
pub(super) async fn apply(conn: &mut PgConnection, change: &Change) -> Result<u64> {
    Ok(match change {
        Change::CreateDmMessage(m) => {
            insert_messages(conn, &[m]).await?;
            1
        }
        Change::CreateThread { channel, thread, members } => {
            insert_channels(&mut *conn, &[channel]).await?;
            sqlx::query(
                "INSERT INTO threads (channel_id, guild_id, owner_id, archived, archive_timestamp, auto_archive_duration, locked, invitable, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(i(thread.channel_id))
            .bind(i(thread.guild_id))
            .bind(i(thread.owner_id))
            .bind(thread.archived)
            .bind(thread.archive_timestamp as i64)
            .bind(i64::from(thread.auto_archive_duration))
            .bind(thread.locked)
            .bind(thread.invitable)
            .bind(thread.created_at as i64)
            .execute(&mut *conn)
            .await?;
            for m in members {
                add_member(conn, m).await?;
            }
            1
        }
        Change::UpdateThread { channel, thread } => {
            sqlx::query("UPDATE channels SET name = $1, rate_limit_per_user = $2 WHERE id = $3")
                .bind(&channel.name)
                .bind(i64::from(channel.rate_limit_per_user))
                .bind(i(channel.id))
                .execute(&mut *conn)
                .await?;
            sqlx::query(
                "UPDATE threads SET archived = $1, archive_timestamp = $2, auto_archive_duration = $3, locked = $4, invitable = $5
                 WHERE channel_id = $6",
            )
            .bind(thread.archived)
            .bind(thread.archive_timestamp as i64)
            .bind(i64::from(thread.auto_archive_duration))
            .bind(thread.locked)
            .bind(thread.invitable)
            .bind(i(thread.channel_id))
            .execute(conn)
            .await?
            .rows_affected()
        }
        Change::AddThreadMember(m) => add_member(conn, m).await?,
        Change::RemoveThreadMember { thread, user } => sqlx::query("DELETE FROM thread_members WHERE thread_id = $1 AND user_id = $2")
            .bind(i(*thread))
            .bind(i(*user))
            .execute(conn)
            .await?
            .rows_affected(),
        _ => unreachable!("not a change of migration 0006"),
    })
}

async fn add_member(conn: &mut PgConnection, m: &ThreadMemberRecord) -> Result<u64> {
    Ok(sqlx::query(
        "INSERT INTO thread_members (thread_id, user_id, join_timestamp, flags) VALUES ($1, $2, $3, $4)
         ON CONFLICT (thread_id, user_id) DO NOTHING",
    )
    .bind(i(m.thread_id))
    .bind(i(m.user_id))
    .bind(m.join_timestamp as i64)
    .bind(m.flags as i64)
    .execute(conn)
    .await?
    .rows_affected())
}

/// Adds each guild's threads (with members and message counts) to `snaps`:
/// two statements for the whole batch.
pub(super) async fn load_threads(pool: &PgPool, snaps: &mut [GuildSnapshot]) -> Result<()> {
    let ids: Vec<i64> = snaps.iter().map(|s| i(s.guild.id)).collect();
    let c_cols = CHANNEL_COLS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ");
    let rows = sqlx::query(&format!(
        "SELECT {THREAD_COLS}, (SELECT count(*) FROM messages m WHERE m.channel_id = t.channel_id) AS message_count, {c_cols}
         FROM threads t JOIN channels c ON c.id = t.channel_id WHERE t.guild_id = ANY($1) ORDER BY t.channel_id"
    ))
    .bind(&ids)
    .fetch_all(pool)
    .await?;
    if rows.is_empty() {
        return Ok(());
    }
    let member_rows = sqlx::query(
        "SELECT tm.thread_id, tm.user_id, tm.join_timestamp, tm.flags FROM thread_members tm
         JOIN threads t ON t.channel_id = tm.thread_id WHERE t.guild_id = ANY($1) ORDER BY tm.thread_id, tm.user_id",
    )
    .bind(&ids)
    .fetch_all(pool)
    .await?;
    let mut members: HashMap<ChannelId, Vec<ThreadMemberRecord>> = HashMap::new();
    for r in member_rows {
        let m = member_row(&r)?;
        members.entry(m.thread_id).or_default().push(m);
    }
    let index: HashMap<GuildId, usize> = snaps.iter().enumerate().map(|(n, s)| (s.guild.id, n)).collect();
    for r in rows {
        let thread = thread_row(&r)?;
        let channel: ChannelRecord = <ChannelRow as sqlx::FromRow<_>>::from_row(&r)?.try_into()?;
        let Some(&n) = index.get(&thread.guild_id) else { continue };
        snaps[n].threads.push(ThreadSnapshot {
            members: members.remove(&thread.channel_id).unwrap_or_default(),
            message_count: r.try_get::<i64, _>("message_count")? as u64,
            channel,
            thread,
        });
    }
    Ok(())
}

fn thread_row(r: &sqlx::postgres::PgRow) -> Result<ThreadRecord> {
    Ok(ThreadRecord {
        channel_id: ChannelId(r.try_get::<i64, _>("channel_id")? as u64),
        guild_id: GuildId(r.try_get::<i64, _>("guild_id")? as u64),
        owner_id: UserId(r.try_get::<i64, _>("owner_id")? as u64),
        archived: r.try_get("archived")?,
        archive_timestamp: r.try_get::<i64, _>("archive_timestamp")? as u64,
        auto_archive_duration: r.try_get::<i64, _>("auto_archive_duration")? as u32,
        locked: r.try_get("locked")?,
        invitable: r.try_get("invitable")?,
        created_at: r.try_get::<i64, _>("created_at")? as u64,
    })
}

fn member_row(r: &sqlx::postgres::PgRow) -> Result<ThreadMemberRecord> {
    Ok(ThreadMemberRecord {
        thread_id: ChannelId(r.try_get::<i64, _>("thread_id")? as u64),
        user_id: UserId(r.try_get::<i64, _>("user_id")? as u64),
        join_timestamp: r.try_get::<i64, _>("join_timestamp")? as u64,
        flags: r.try_get::<i64, _>("flags")? as u64,
    })
}

fn command_row(r: &sqlx::postgres::PgRow) -> Result<CommandRecord> {
    Ok(CommandRecord {
        id: r.try_get::<i64, _>("id")? as u64,
        application_id: ApplicationId(r.try_get::<i64, _>("application_id")? as u64),
        guild_id: r.try_get::<Option<i64>, _>("guild_id")?.map(|g| GuildId(g as u64)),
        kind: r.try_get::<i64, _>("kind")? as u8,
        name: r.try_get("name")?,
        version: r.try_get::<i64, _>("version")? as u64,
        body: serde_json::from_str(r.try_get("body")?)?,
    })
}

/// The scope's rows: `application_id = $1`, and `guild_id` equal to `$2`
/// (NULL too: a global command's scope).
const SCOPE: &str = "application_id = $1 AND guild_id IS NOT DISTINCT FROM $2";

/// Serialises this application's command writes until the transaction ends.
async fn lock_app(conn: &mut PgConnection, app: ApplicationId) -> Result<()> {
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(app.0 as i64).execute(conn).await?;
    Ok(())
}

async fn insert_command(conn: &mut PgConnection, c: &CommandRecord) -> Result<()> {
    sqlx::query(&format!("INSERT INTO application_commands ({COMMAND_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"))
        .bind(c.id as i64)
        .bind(c.application_id.0 as i64)
        .bind(c.guild_id.map(i))
        .bind(i64::from(c.kind))
        .bind(&c.name)
        .bind(c.version as i64)
        .bind(serde_json::to_string(&c.body)?)
        .execute(conn)
        .await
        .map_err(|e| if is_unique_violation(&e) { StoreError::Conflict } else { e.into() })?;
    Ok(())
}

/// The id of the scope's command of this type and name, if any.
async fn command_named(conn: &mut PgConnection, c: &CommandRecord) -> Result<Option<u64>> {
    let id: Option<i64> = sqlx::query_scalar(&format!("SELECT id FROM application_commands WHERE {SCOPE} AND kind = $3 AND name = $4"))
        .bind(c.application_id.0 as i64)
        .bind(c.guild_id.map(i))
        .bind(i64::from(c.kind))
        .bind(&c.name)
        .fetch_optional(conn)
        .await?;
    Ok(id.map(|v| v as u64))
}

/// Writes `c` over the scope's command of its id (name, body, version).
async fn replace_command(conn: &mut PgConnection, c: &CommandRecord) -> Result<u64> {
    Ok(sqlx::query(&format!("UPDATE application_commands SET kind = $3, name = $4, version = $5, body = $6 WHERE id = $7 AND {SCOPE}"))
        .bind(c.application_id.0 as i64)
        .bind(c.guild_id.map(i))
        .bind(i64::from(c.kind))
        .bind(&c.name)
        .bind(c.version as i64)
        .bind(serde_json::to_string(&c.body)?)
        .bind(c.id as i64)
        .execute(conn)
        .await
        .map_err(|e| if is_unique_violation(&e) { StoreError::Conflict } else { StoreError::from(e) })?
        .rows_affected())
}

fn users_of(rows: Vec<sqlx::postgres::PgRow>) -> Result<HashMap<ChannelId, Vec<UserRecord>>> {
    let mut out: HashMap<ChannelId, Vec<UserRecord>> = HashMap::new();
    for r in rows {
        let c = ChannelId(r.try_get::<i64, _>("channel_id")? as u64);
        out.entry(c).or_default().push(<UserRow as sqlx::FromRow<_>>::from_row(&r)?.into());
    }
    Ok(out)
}

#[async_trait]
impl DmThreadCommandStore for PostgresStore {
    async fn open_dm(&self, channel: &ChannelRecord, a: UserId, b: UserId) -> Result<ChannelId> {
        let (low, high) = if a <= b { (a, b) } else { (b, a) };
        let existing = || async {
            let id: Option<i64> = sqlx::query_scalar("SELECT channel_id FROM dm_pairs WHERE low = $1 AND high = $2")
                .bind(i(low))
                .bind(i(high))
                .fetch_optional(&self.pool)
                .await?;
            Result::Ok(id.map(|v| ChannelId(v as u64)))
        };
        if let Some(id) = existing().await? {
            return Ok(id);
        }
        // The pair's row decides: a concurrent open of the same pair waits
        // on it, then inserts nothing, and this one's channel is undone.
        let mut tx = self.pool.begin().await?;
        insert_channels(&mut *tx, &[channel]).await?;
        sqlx::query("INSERT INTO dm_recipients (channel_id, user_id) SELECT $1, u FROM UNNEST($2::BIGINT[]) AS u")
            .bind(i(channel.id))
            .bind(vec![i(low), i(high)])
            .execute(&mut *tx)
            .await?;
        let won = sqlx::query("INSERT INTO dm_pairs (low, high, channel_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING")
            .bind(i(low))
            .bind(i(high))
            .bind(i(channel.id))
            .execute(&mut *tx)
            .await?
            .rows_affected()
            == 1;
        if !won {
            tx.rollback().await?;
            return existing().await?.ok_or(StoreError::Conflict);
        }
        tx.commit().await?;
        Ok(channel.id)
    }

    async fn get_dm(&self, id: ChannelId) -> Result<Option<DmChannel>> {
        let Some(row) = sqlx::query_as::<_, ChannelRow>(&format!("SELECT {CHANNEL_COLS} FROM channels WHERE id = $1 AND kind = 1"))
            .bind(i(id))
            .fetch_optional(&self.pool)
            .await?
        else {
            return Ok(None);
        };
        let users = sqlx::query(
            "SELECT r.channel_id, u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at
             FROM dm_recipients r JOIN users u ON u.id = r.user_id WHERE r.channel_id = $1 ORDER BY u.id",
        )
        .bind(i(id))
        .fetch_all(&self.pool)
        .await?;
        let recipients = users_of(users)?.remove(&id).unwrap_or_default();
        Ok(Some(DmChannel { channel: row.try_into()?, recipients }))
    }

    async fn dms_of_users(&self, users: &[UserId]) -> Result<Vec<(UserId, Vec<DmChannel>)>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = users.iter().map(|&u| i(u)).collect();
        let c_cols = CHANNEL_COLS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ");
        let channels = sqlx::query(&format!(
            "SELECT r.user_id AS owner, {c_cols} FROM dm_recipients r JOIN channels c ON c.id = r.channel_id
             WHERE r.user_id = ANY($1) ORDER BY r.user_id, c.id"
        ))
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT r.channel_id, u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at
             FROM dm_recipients r JOIN users u ON u.id = r.user_id
             WHERE r.channel_id IN (SELECT channel_id FROM dm_recipients WHERE user_id = ANY($1)) ORDER BY u.id",
        )
        .bind(&ids)
        .fetch_all(&self.pool)
        .await?;
        let recipients = users_of(rows)?;
        let mut out: Vec<(UserId, Vec<DmChannel>)> = Vec::new();
        for r in channels {
            let owner = UserId(r.try_get::<i64, _>("owner")? as u64);
            let channel: ChannelRecord = <ChannelRow as sqlx::FromRow<_>>::from_row(&r)?.try_into()?;
            let dm = DmChannel { recipients: recipients.get(&channel.id).cloned().unwrap_or_default(), channel };
            match out.last_mut() {
                Some((u, v)) if *u == owner => v.push(dm),
                _ => out.push((owner, vec![dm])),
            }
        }
        Ok(out)
    }

    async fn get_thread(&self, id: ChannelId) -> Result<Option<(ChannelRecord, ThreadRecord)>> {
        let c_cols = CHANNEL_COLS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ");
        let row = sqlx::query(&format!(
            "SELECT {THREAD_COLS}, {c_cols} FROM threads t JOIN channels c ON c.id = t.channel_id WHERE t.channel_id = $1"
        ))
        .bind(i(id))
        .fetch_optional(&self.pool)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let channel: ChannelRecord = <ChannelRow as sqlx::FromRow<_>>::from_row(&r)?.try_into()?;
        Ok(Some((channel, thread_row(&r)?)))
    }

    async fn thread_members(&self, thread: ChannelId) -> Result<Vec<ThreadMemberRecord>> {
        let rows =
            sqlx::query("SELECT thread_id, user_id, join_timestamp, flags FROM thread_members WHERE thread_id = $1 ORDER BY user_id")
                .bind(i(thread))
                .fetch_all(&self.pool)
                .await?;
        rows.iter().map(member_row).collect()
    }

    async fn archived_threads(&self, parent: ChannelId, private: bool, before: u64, limit: u32) -> Result<Vec<ThreadSnapshot>> {
        let c_cols = CHANNEL_COLS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ");
        let rows = sqlx::query(&format!(
            "SELECT {THREAD_COLS}, (SELECT count(*) FROM messages m WHERE m.channel_id = t.channel_id) AS message_count, {c_cols}
             FROM threads t JOIN channels c ON c.id = t.channel_id
             WHERE c.parent_id = $1 AND t.archived AND c.kind = $2 AND t.archive_timestamp < $3
             ORDER BY t.archive_timestamp DESC, t.channel_id DESC LIMIT $4"
        ))
        .bind(i(parent))
        .bind(i64::from(if private { crate::PRIVATE_THREAD } else { crate::PUBLIC_THREAD }))
        .bind(before.min(i64::MAX as u64) as i64)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let channel: ChannelRecord = <ChannelRow as sqlx::FromRow<_>>::from_row(r)?.try_into()?;
            let thread = thread_row(r)?;
            let members = self.thread_members(thread.channel_id).await?;
            out.push(ThreadSnapshot { channel, thread, members, message_count: r.try_get::<i64, _>("message_count")? as u64 });
        }
        Ok(out)
    }

    async fn list_commands(&self, app: ApplicationId, guild: Option<GuildId>) -> Result<Vec<CommandRecord>> {
        let rows = sqlx::query(&format!("SELECT {COMMAND_COLS} FROM application_commands WHERE {SCOPE} ORDER BY id"))
            .bind(app.0 as i64)
            .bind(guild.map(i))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(command_row).collect()
    }

    async fn get_command(&self, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<Option<CommandRecord>> {
        let row = sqlx::query(&format!("SELECT {COMMAND_COLS} FROM application_commands WHERE {SCOPE} AND id = $3"))
            .bind(app.0 as i64)
            .bind(guild.map(i))
            .bind(id as i64)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(command_row).transpose()
    }

    async fn upsert_command(&self, c: &CommandRecord) -> Result<CommandRecord> {
        let mut tx = self.pool.begin().await?;
        lock_app(&mut tx, c.application_id).await?;
        let mut out = c.clone();
        match command_named(&mut tx, c).await? {
            Some(id) => {
                out.id = id;
                replace_command(&mut tx, &out).await?;
            }
            None => insert_command(&mut tx, c).await?,
        }
        tx.commit().await?;
        Ok(out)
    }

    async fn update_command(&self, c: &CommandRecord) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        lock_app(&mut tx, c.application_id).await?;
        let n = replace_command(&mut tx, c).await?;
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn delete_command(&self, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<bool> {
        let r = sqlx::query(&format!("DELETE FROM application_commands WHERE {SCOPE} AND id = $3"))
            .bind(app.0 as i64)
            .bind(guild.map(i))
            .bind(id as i64)
            .execute(&self.pool)
            .await?;
        Ok(r.rows_affected() > 0)
    }

    async fn overwrite_commands(&self, app: ApplicationId, guild: Option<GuildId>, cmds: &[CommandRecord]) -> Result<Vec<CommandRecord>> {
        let mut tx = self.pool.begin().await?;
        lock_app(&mut tx, app).await?;
        let rows = sqlx::query(&format!("SELECT {COMMAND_COLS} FROM application_commands WHERE {SCOPE}"))
            .bind(app.0 as i64)
            .bind(guild.map(i))
            .fetch_all(&mut *tx)
            .await?;
        let old: Vec<CommandRecord> = rows.iter().map(command_row).collect::<Result<_>>()?;
        let plan = crate::dms_threads_commands::overwrite_plan(&old, cmds);
        if !plan.removed.is_empty() {
            sqlx::query("DELETE FROM application_commands WHERE id = ANY($1)")
                .bind(plan.removed.iter().map(|&id| id as i64).collect::<Vec<_>>())
                .execute(&mut *tx)
                .await?;
        }
        for c in &plan.kept {
            replace_command(&mut tx, c).await?;
        }
        for c in &plan.added {
            insert_command(&mut tx, c).await?;
        }
        tx.commit().await?;
        Ok(plan.result)
    }
}
