//! DMs, threads and application commands on SQLite (migration 0006).

use std::collections::HashMap;

use async_trait::async_trait;
use protocol::{ApplicationId, ChannelId, GuildId, UserId};
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection, SqlitePool};

use super::{i, insert_channel, insert_message, is_unique_violation, ChannelRow, SqliteStore, UserRow, CHANNEL_COLS};
use crate::{
    Change, ChannelRecord, CommandRecord, DmChannel, DmThreadCommandStore, GuildSnapshot, Result, StoreError, ThreadMemberRecord,
    ThreadRecord, ThreadSnapshot, UserRecord,
};

const THREAD_COLS: &str = "t.channel_id, t.guild_id, t.owner_id, t.archived, t.archive_timestamp, t.auto_archive_duration, t.locked, \
                           t.invitable, t.created_at";
const COMMAND_COLS: &str = "id, application_id, guild_id, kind, name, version, body";

/// The changes of migration 0006, inside `apply_changes`' transaction.
pub(super) async fn apply(conn: &mut SqliteConnection, change: &Change) -> Result<u64> {
    Ok(match change {
        Change::CreateDmMessage(m) => {
            insert_message(conn, m).await?;
            1
        }
        Change::CreateThread { channel, thread, members } => {
            insert_channel(&mut *conn, channel).await?;
            sqlx::query(
                "INSERT INTO threads (channel_id, guild_id, owner_id, archived, archive_timestamp, auto_archive_duration, locked, invitable, created_at)
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            sqlx::query("UPDATE channels SET name = ?, rate_limit_per_user = ? WHERE id = ?")
                .bind(&channel.name)
                .bind(i64::from(channel.rate_limit_per_user))
                .bind(i(channel.id))
                .execute(&mut *conn)
                .await?;
            sqlx::query(
                "UPDATE threads SET archived = ?, archive_timestamp = ?, auto_archive_duration = ?, locked = ?, invitable = ?
                 WHERE channel_id = ?",
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
        Change::RemoveThreadMember { thread, user } => sqlx::query("DELETE FROM thread_members WHERE thread_id = ? AND user_id = ?")
            .bind(i(*thread))
            .bind(i(*user))
            .execute(conn)
            .await?
            .rows_affected(),
        _ => unreachable!("not a change of migration 0006"),
    })
}

async fn add_member(conn: &mut SqliteConnection, m: &ThreadMemberRecord) -> Result<u64> {
    Ok(sqlx::query(
        "INSERT INTO thread_members (thread_id, user_id, join_timestamp, flags) VALUES (?, ?, ?, ?)
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
pub(super) async fn load_threads(reader: &SqlitePool, snaps: &mut [GuildSnapshot]) -> Result<()> {
    let ids: Vec<i64> = snaps.iter().map(|s| i(s.guild.id)).collect();
    let in_list = |sql: &str| {
        let mut q = QueryBuilder::<Sqlite>::new(sql);
        q.push(" IN (");
        let mut list = q.separated(", ");
        for &id in &ids {
            list.push_bind(id);
        }
        q.push(")");
        q
    };
    let c_cols = CHANNEL_COLS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ");
    let mut q = in_list(&format!(
        "SELECT {THREAD_COLS}, (SELECT count(*) FROM messages m WHERE m.channel_id = t.channel_id) AS message_count, {c_cols}
         FROM threads t JOIN channels c ON c.id = t.channel_id WHERE t.guild_id"
    ));
    q.push(" ORDER BY t.channel_id");
    let rows = q.build().fetch_all(reader).await?;
    if rows.is_empty() {
        return Ok(());
    }
    let mut q = in_list(
        "SELECT tm.thread_id, tm.user_id, tm.join_timestamp, tm.flags FROM thread_members tm
         JOIN threads t ON t.channel_id = tm.thread_id WHERE t.guild_id",
    );
    q.push(" ORDER BY tm.thread_id, tm.user_id");
    let mut members: HashMap<ChannelId, Vec<ThreadMemberRecord>> = HashMap::new();
    for r in q.build().fetch_all(reader).await? {
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

fn thread_row(r: &sqlx::sqlite::SqliteRow) -> Result<ThreadRecord> {
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

fn member_row(r: &sqlx::sqlite::SqliteRow) -> Result<ThreadMemberRecord> {
    Ok(ThreadMemberRecord {
        thread_id: ChannelId(r.try_get::<i64, _>("thread_id")? as u64),
        user_id: UserId(r.try_get::<i64, _>("user_id")? as u64),
        join_timestamp: r.try_get::<i64, _>("join_timestamp")? as u64,
        flags: r.try_get::<i64, _>("flags")? as u64,
    })
}

fn command_row(r: &sqlx::sqlite::SqliteRow) -> Result<CommandRecord> {
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

/// `guild_id IS ?` matches NULL too (a global command's scope).
const SCOPE: &str = "application_id = ? AND guild_id IS ?";

async fn insert_command(conn: &mut SqliteConnection, c: &CommandRecord) -> Result<()> {
    sqlx::query(&format!("INSERT INTO application_commands ({COMMAND_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?)"))
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
async fn command_named(conn: &mut SqliteConnection, c: &CommandRecord) -> Result<Option<u64>> {
    let id: Option<i64> = sqlx::query_scalar(&format!("SELECT id FROM application_commands WHERE {SCOPE} AND kind = ? AND name = ?"))
        .bind(c.application_id.0 as i64)
        .bind(c.guild_id.map(i))
        .bind(i64::from(c.kind))
        .bind(&c.name)
        .fetch_optional(conn)
        .await?;
    Ok(id.map(|v| v as u64))
}

/// Writes `c` over the scope's command of its id (name, body, version).
async fn replace_command(conn: &mut SqliteConnection, c: &CommandRecord) -> Result<u64> {
    Ok(sqlx::query(&format!("UPDATE application_commands SET kind = ?, name = ?, version = ?, body = ? WHERE id = ? AND {SCOPE}"))
        .bind(i64::from(c.kind))
        .bind(&c.name)
        .bind(c.version as i64)
        .bind(serde_json::to_string(&c.body)?)
        .bind(c.id as i64)
        .bind(c.application_id.0 as i64)
        .bind(c.guild_id.map(i))
        .execute(conn)
        .await
        .map_err(|e| if is_unique_violation(&e) { StoreError::Conflict } else { StoreError::from(e) })?
        .rows_affected())
}

fn users_of(rows: Vec<sqlx::sqlite::SqliteRow>) -> Result<HashMap<ChannelId, Vec<UserRecord>>> {
    let mut out: HashMap<ChannelId, Vec<UserRecord>> = HashMap::new();
    for r in rows {
        let c = ChannelId(r.try_get::<i64, _>("channel_id")? as u64);
        out.entry(c).or_default().push(<UserRow as sqlx::FromRow<_>>::from_row(&r)?.into());
    }
    Ok(out)
}

#[async_trait]
impl DmThreadCommandStore for SqliteStore {
    async fn open_dm(&self, channel: &ChannelRecord, a: UserId, b: UserId) -> Result<ChannelId> {
        let (low, high) = if a <= b { (a, b) } else { (b, a) };
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let found: Option<i64> = sqlx::query_scalar("SELECT channel_id FROM dm_pairs WHERE low = ? AND high = ?")
            .bind(i(low))
            .bind(i(high))
            .fetch_optional(&mut *tx)
            .await?;
        if let Some(id) = found {
            return Ok(ChannelId(id as u64));
        }
        insert_channel(&mut *tx, channel).await?;
        for u in [low, high] {
            sqlx::query("INSERT INTO dm_recipients (channel_id, user_id) VALUES (?, ?) ON CONFLICT DO NOTHING")
                .bind(i(channel.id))
                .bind(i(u))
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query("INSERT INTO dm_pairs (low, high, channel_id) VALUES (?, ?, ?)")
            .bind(i(low))
            .bind(i(high))
            .bind(i(channel.id))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(channel.id)
    }

    async fn get_dm(&self, id: ChannelId) -> Result<Option<DmChannel>> {
        let Some(row) = sqlx::query_as::<_, ChannelRow>(&format!("SELECT {CHANNEL_COLS} FROM channels WHERE id = ? AND kind = 1"))
            .bind(i(id))
            .fetch_optional(&self.reader)
            .await?
        else {
            return Ok(None);
        };
        let users = sqlx::query(
            "SELECT r.channel_id, u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at
             FROM dm_recipients r JOIN users u ON u.id = r.user_id WHERE r.channel_id = ? ORDER BY u.id",
        )
        .bind(i(id))
        .fetch_all(&self.reader)
        .await?;
        let recipients = users_of(users)?.remove(&id).unwrap_or_default();
        Ok(Some(DmChannel { channel: row.try_into()?, recipients }))
    }

    async fn dms_of_users(&self, users: &[UserId]) -> Result<Vec<(UserId, Vec<DmChannel>)>> {
        if users.is_empty() {
            return Ok(Vec::new());
        }
        let in_list = |sql: &str, tail: &str| {
            let mut q = QueryBuilder::<Sqlite>::new(sql);
            q.push(" IN (");
            let mut list = q.separated(", ");
            for &u in users {
                list.push_bind(i(u));
            }
            q.push(")");
            q.push(tail);
            q
        };
        let c_cols = CHANNEL_COLS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ");
        let mut q = in_list(
            &format!("SELECT r.user_id AS owner, {c_cols} FROM dm_recipients r JOIN channels c ON c.id = r.channel_id WHERE r.user_id"),
            " ORDER BY r.user_id, c.id",
        );
        let channels = q.build().fetch_all(&self.lookup).await?;
        if channels.is_empty() {
            return Ok(Vec::new());
        }
        let mut q = in_list(
            "SELECT r.channel_id, u.id, u.username, u.global_name, u.avatar, u.bot, u.flags, u.created_at
             FROM dm_recipients r JOIN users u ON u.id = r.user_id
             WHERE r.channel_id IN (SELECT channel_id FROM dm_recipients WHERE user_id",
            ") ORDER BY u.id",
        );
        let recipients = users_of(q.build().fetch_all(&self.lookup).await?)?;
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
            "SELECT {THREAD_COLS}, {c_cols} FROM threads t JOIN channels c ON c.id = t.channel_id WHERE t.channel_id = ?"
        ))
        .bind(i(id))
        .fetch_optional(&self.reader)
        .await?;
        let Some(r) = row else { return Ok(None) };
        let channel: ChannelRecord = <ChannelRow as sqlx::FromRow<_>>::from_row(&r)?.try_into()?;
        Ok(Some((channel, thread_row(&r)?)))
    }

    async fn thread_members(&self, thread: ChannelId) -> Result<Vec<ThreadMemberRecord>> {
        let rows = sqlx::query("SELECT thread_id, user_id, join_timestamp, flags FROM thread_members WHERE thread_id = ? ORDER BY user_id")
            .bind(i(thread))
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(member_row).collect()
    }

    async fn archived_threads(&self, parent: ChannelId, private: bool, before: u64, limit: u32) -> Result<Vec<ThreadSnapshot>> {
        let c_cols = CHANNEL_COLS.split(", ").map(|c| format!("c.{c}")).collect::<Vec<_>>().join(", ");
        let rows = sqlx::query(&format!(
            "SELECT {THREAD_COLS}, (SELECT count(*) FROM messages m WHERE m.channel_id = t.channel_id) AS message_count, {c_cols}
             FROM threads t JOIN channels c ON c.id = t.channel_id
             WHERE c.parent_id = ? AND t.archived AND c.kind = ? AND t.archive_timestamp < ?
             ORDER BY t.archive_timestamp DESC, t.channel_id DESC LIMIT ?"
        ))
        .bind(i(parent))
        .bind(i64::from(if private { crate::PRIVATE_THREAD } else { crate::PUBLIC_THREAD }))
        .bind(before.min(i64::MAX as u64) as i64)
        .bind(i64::from(limit))
        .fetch_all(&self.reader)
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
            .fetch_all(&self.reader)
            .await?;
        rows.iter().map(command_row).collect()
    }

    async fn get_command(&self, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<Option<CommandRecord>> {
        let row = sqlx::query(&format!("SELECT {COMMAND_COLS} FROM application_commands WHERE {SCOPE} AND id = ?"))
            .bind(app.0 as i64)
            .bind(guild.map(i))
            .bind(id as i64)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(command_row).transpose()
    }

    async fn upsert_command(&self, c: &CommandRecord) -> Result<CommandRecord> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
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
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let n = replace_command(&mut tx, c).await?;
        tx.commit().await?;
        Ok(n > 0)
    }

    async fn delete_command(&self, app: ApplicationId, guild: Option<GuildId>, id: u64) -> Result<bool> {
        let r = sqlx::query(&format!("DELETE FROM application_commands WHERE {SCOPE} AND id = ?"))
            .bind(app.0 as i64)
            .bind(guild.map(i))
            .bind(id as i64)
            .execute(&self.writer)
            .await?;
        Ok(r.rows_affected() > 0)
    }

    async fn overwrite_commands(&self, app: ApplicationId, guild: Option<GuildId>, cmds: &[CommandRecord]) -> Result<Vec<CommandRecord>> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let rows = sqlx::query(&format!("SELECT {COMMAND_COLS} FROM application_commands WHERE {SCOPE}"))
            .bind(app.0 as i64)
            .bind(guild.map(i))
            .fetch_all(&mut *tx)
            .await?;
        let old: Vec<CommandRecord> = rows.iter().map(command_row).collect::<Result<_>>()?;
        let plan = crate::dms_threads_commands::overwrite_plan(&old, cmds);
        for id in &plan.removed {
            sqlx::query("DELETE FROM application_commands WHERE id = ?").bind(*id as i64).execute(&mut *tx).await?;
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
