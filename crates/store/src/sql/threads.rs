//! Threads (migration 0006): a thread is a `channels` row with a `threads`
//! row of metadata and its members in `thread_members`.

use std::collections::HashMap;

use protocol::ChannelId;
use sqlx::FromRow;

use super::rows::*;
use super::{query, Pool};
use crate::{ChannelRecord, Result, ThreadMemberRecord, ThreadRecord, ThreadSnapshot, PRIVATE_THREAD, PUBLIC_THREAD};

/// A thread's channel and metadata, and how many messages it holds.
#[derive(FromRow)]
struct ThreadChannelRow {
    #[sqlx(flatten)]
    thread: ThreadRow,
    #[sqlx(flatten)]
    channel: ChannelRow,
    #[sqlx(default)]
    message_count: i64,
}

/// The columns of a [`ThreadChannelRow`], `counted` with its messages.
fn thread_columns(counted: bool) -> String {
    let count = if counted { ", (SELECT count(*) FROM messages m WHERE m.channel_id = t.channel_id) AS message_count" } else { "" };
    format!("{}{count}, {}", qualified("t", THREAD_COLS), qualified("c", CHANNEL_COLS))
}

pub(super) async fn get(db: Pool<'_>, id: ChannelId) -> Result<Option<(ChannelRecord, ThreadRecord)>> {
    let q = format!("SELECT {} FROM threads t JOIN channels c ON c.id = t.channel_id WHERE t.channel_id = $1", thread_columns(false));
    let Some(r) = query(q).bind(id).fetch_optional::<ThreadChannelRow>(db).await? else { return Ok(None) };
    Ok(Some((r.channel.try_into()?, r.thread.into())))
}

pub(super) async fn members(db: Pool<'_>, thread: ChannelId) -> Result<Vec<ThreadMemberRecord>> {
    let q = format!("SELECT {THREAD_MEMBER_COLS} FROM thread_members WHERE thread_id = $1 ORDER BY user_id");
    let rows: Vec<ThreadMemberRow> = query(q).bind(thread).fetch_all(db).await?;
    Ok(rows.into_iter().map(Into::into).collect())
}

pub(super) async fn archived(db: Pool<'_>, parent: ChannelId, private: bool, before: u64, limit: u32) -> Result<Vec<ThreadSnapshot>> {
    let q = format!(
        "SELECT {} FROM threads t JOIN channels c ON c.id = t.channel_id
         WHERE c.parent_id = $1 AND t.archived AND c.kind = $2 AND t.archive_timestamp < $3
         ORDER BY t.archive_timestamp DESC, t.channel_id DESC LIMIT $4",
        thread_columns(true)
    );
    let rows: Vec<ThreadChannelRow> = query(q)
        .bind(parent)
        .bind(if private { PRIVATE_THREAD } else { PUBLIC_THREAD })
        .bind(before.min(i64::MAX as u64))
        .bind(limit)
        .fetch_all(db)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let thread: ThreadRecord = r.thread.into();
        let members = members(db, thread.channel_id).await?;
        out.push(ThreadSnapshot { channel: r.channel.try_into()?, thread, members, message_count: r.message_count as u64 });
    }
    Ok(out)
}

/// The threads of the guilds `ids` (as stored), with their members and
/// message counts: two statements for the whole batch.
pub(super) async fn of_guilds(db: Pool<'_>, ids: &[i64]) -> Result<Vec<ThreadSnapshot>> {
    let in_ids = db.dialect().in_ids("$1");
    let q = format!(
        "SELECT {} FROM threads t JOIN channels c ON c.id = t.channel_id WHERE t.guild_id {in_ids} ORDER BY t.channel_id",
        thread_columns(true)
    );
    let rows: Vec<ThreadChannelRow> = query(q).bind(ids).fetch_all(db).await?;
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let q = format!(
        "SELECT {} FROM thread_members tm JOIN threads t ON t.channel_id = tm.thread_id
         WHERE t.guild_id {in_ids} ORDER BY tm.thread_id, tm.user_id",
        qualified("tm", THREAD_MEMBER_COLS)
    );
    let mut members: HashMap<ChannelId, Vec<ThreadMemberRecord>> = HashMap::new();
    for r in query(q).bind(ids).fetch_all::<ThreadMemberRow>(db).await? {
        let m = ThreadMemberRecord::from(r);
        members.entry(m.thread_id).or_default().push(m);
    }
    rows.into_iter()
        .map(|r| {
            let thread: ThreadRecord = r.thread.into();
            Ok(ThreadSnapshot {
                members: members.remove(&thread.channel_id).unwrap_or_default(),
                message_count: r.message_count as u64,
                channel: r.channel.try_into()?,
                thread,
            })
        })
        .collect()
}
